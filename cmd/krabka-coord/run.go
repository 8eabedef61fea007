package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// The environment of the command of run.
const (
	envRole   = "KRABKA_ROLE"
	envMember = "KRABKA_MEMBER"
	envToken  = "KRABKA_TOKEN"
)

func newRunCommand(g *globals) *cobra.Command {
	flags := &holdFlags{}
	var grace, skew time.Duration
	cmd := &cobra.Command{
		Use:   "run ROLE MEMBER -- COMMAND [ARG...]",
		Short: "Run a command only while this member leads a role",
		Long: `run takes ROLE as MEMBER, as elect does (with the same library
extensions on: the duplicate-member watch, so a restart under the MEMBER
of a live lease waits up to one --renew-interval plus one --poll-interval
and a second, 12s with the defaults, for a renewal before it takes the role
back for one epoch; and the resignation anchor; heartbeats only with
--heartbeat-interval: see 'krabka-coord elect --help'), and then runs COMMAND, with
KRABKA_ROLE, KRABKA_MEMBER and KRABKA_TOKEN (producer_id:producer_epoch) in
its environment, in a process group of its own, with run's stdin, stdout
and stderr. run looks COMMAND up before it campaigns: a command that does
not exist (127) or cannot be run (126) takes no epoch. COMMAND runs only
while this member leads:

  - when COMMAND exits, run resigns (the first standby takes over at once)
    and exits with COMMAND's exit code (128+n when signal n ended it);
  - when the leadership ends because another member minted a newer epoch
    (a fence, or a takeover after run stalled past its lease), or because
    the producer of its epoch failed so that no write under the token can
    land, the process group of COMMAND gets SIGTERM, and SIGKILL after
    --grace; run then leaves the roster and exits 3 (with --rejoin it
    campaigns again, and starts COMMAND again when it leads);
  - on SIGINT, SIGTERM or SIGHUP, the process group of COMMAND gets SIGTERM,
    and SIGKILL after --grace (at once on a second signal); run then
    resigns and exits with COMMAND's code (a SIGHUP that was ignored when
    run started, as under nohup, stays ignored);
  - on SIGUSR1, or POST /step-down (--listen, --step-down-endpoint), run
    stops COMMAND as on a signal, resigns, and campaigns again at the tail
    of the roster: a drain that never lets two copies run.

The lease guard. COMMAND's side effects are not fenced by Kafka, so run
never lets COMMAND outlive the lease that the cluster last confirmed. A
holder cut off from the brokers cannot renew, and a standby takes the role
at the lease deadline by its own clock, then starts its own COMMAND. So
when no renewal has been confirmed, run stops COMMAND on this schedule,
by its own clock:

  SIGKILL at  deadline − --max-clock-skew − margin (1s)
  SIGTERM at  that − --grace

where deadline is that of the last lease the cluster confirmed. A renewal
confirmed before SIGTERM moves both on. The guard is the library's renew
deadline: run takes the role with WithRenewDeadline(lease − grace − skew −
margin), so the leadership itself ends (ErrRenewDeadline) at the SIGTERM
instant, the grant of the last confirmed lease plus that window, and run
stops COMMAND then. With the defaults (lease 30s, renew 10s, grace 10s,
skew 1s) a renewal confirmed at t holds COMMAND until t+18s: the renewals
at t+10s and its retries have 8s to land. run then resigns (when the
cluster answers) and exits 3, or campaigns again with --rejoin. run
refuses a setting where lease − grace − skew − margin does not exceed the
renew interval, as the renew deadline must. Every stop of COMMAND for
another reason (a signal, a fence) is also bounded by the guard's SIGKILL
instant. The guard holds while the clocks of the holder and the standbys
differ by at most --max-clock-skew, and a standby's view of the log lags
by less than the margin.

A fence is different: another member holds the role from the moment of the
mint, and run learns it at its next renewal, so COMMAND stops at most
--renew-interval plus --grace after it. COMMAND cannot prove the
leadership with the token to Kafka by itself: a program that writes under
the epoch uses the library's Leadership.Write.

At a terminal: when run's stdin is its terminal and run is the foreground
job, COMMAND's process group gets the terminal's foreground, as a shell
gives it to a job, so COMMAND reads the terminal as it would without run
(a group in the background would stop on SIGTTIN at its first read; run
does this rather than give COMMAND /dev/null as stdin, so that an
interactive COMMAND works). Ctrl-C, Ctrl-\ and Ctrl-Z then reach COMMAND,
not run, and run resigns when COMMAND exits. When Ctrl-Z, or a read of the
terminal from the background, stops COMMAND, run stops too, so the shell
sees its job stop, and fg or bg continues both. A stopped leader renews
nothing: a standby takes over at the lease deadline, and the fence shows
when the job continues. run takes the foreground back when COMMAND ends.
With stdin from a file, a pipe or /dev/null (systemd, CI) none of this
applies.

SIGKILL of run cannot be caught: no resignation (the standbys take over at
the lease deadline), and COMMAND gets no SIGTERM and no grace. On Linux
COMMAND itself gets SIGKILL from the kernel (a parent-death signal), but the
processes that COMMAND started do not: they keep running, unled, while a
standby starts another copy. Run COMMAND under a supervisor that kills
the whole group or cgroup (systemd's KillMode=control-group, the default),
or make COMMAND the process that does the work, with exec in a shell
wrapper ('sh -c "setup; exec ./worker"'), so that the parent-death signal
reaches it.

Exit codes: COMMAND's code; 0 interrupted (SIGINT, SIGTERM, SIGHUP) before
it was elected, as elect; 3 fenced, leadership lost, or stopped by the
lease guard; 126 COMMAND cannot be run, 127 not found; 1 not elected within
--wait; 2 usage; 4 cluster unreachable, state topic misconfigured, or an
ACL missing.`,
		Example: `  krabka-coord run controller node-1 --brokers 127.0.0.1:9092 -- ./controller --config prod.yaml
  krabka-coord run nightly-report node-1 --grace 5s -- sh -c 'echo "$KRABKA_MEMBER leads with $KRABKA_TOKEN"; ./report'
  krabka-coord run controller node-1 --rejoin --listen :9464 --lease-duration 12s --renew-interval 2s --grace 4s -- ./controller`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if len(args) < 3 || dash != 2 {
				return usageError("run takes ROLE MEMBER -- COMMAND [ARG...], with -- before the command (see '%s --help')", cmd.CommandPath())
			}
			return nil
		},
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if grace <= 0 {
				return usageError("--grace %v: want a duration above zero, such as 10s", grace)
			}
			if skew < 0 {
				return usageError("--max-clock-skew %v: want 0 or more", skew)
			}
			guard := leaseGuard{grace: grace, skew: skew, margin: guardMargin}
			config, err := flags.lease.config()
			if err != nil {
				return err
			}
			if err := guard.check(config); err != nil {
				return err
			}
			path, err := exec.LookPath(args[2])
			if err != nil {
				code := exitNoExec
				if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
					code = exitNotFound
				}
				return &exitError{code: code, err: fmt.Errorf("cannot run %s: %v; run did not campaign", args[2], err)}
			}
			signals := followSignals(cmd.Context())
			defer signals.stop()
			h, err := prepareHolder(signals.ctx, g, flags, args[0], args[1])
			if err != nil {
				return err
			}
			defer h.close()
			h.renewDeadline = guard.option(config)
			for {
				leadership, err := h.acquire(signals.ctx, signals.stepDown)
				if err != nil {
					return err
				}
				if leadership == nil {
					return nil // interrupted before it was elected: it left the roster
				}
				r := &commandRun{h: h, leadership: leadership, signals: signals, guard: guard, path: path, args: args[2:]}
				code, end, err := r.run()
				switch end {
				case endLost, endGuard:
					if !h.rejoinAfter(err) {
						return err
					}
				case endStepDown:
				default:
					if err != nil {
						return err
					}
					return exitCode(code)
				}
			}
		}),
	}
	flags.add(cmd.Flags())
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long the command has to exit after SIGTERM before it gets SIGKILL")
	cmd.Flags().DurationVar(&skew, "max-clock-skew", time.Second, "the largest difference between the clocks of the members, which the lease guard allows for")
	return cmd
}

// How one run of the command ended.
type commandEnd int

const (
	endExited   commandEnd = iota // the command exited by itself
	endSignal                     // a stop signal to run
	endLost                       // the leadership ended: a fence, a lost producer
	endGuard                      // the lease guard stopped the command
	endStepDown                   // a step-down: run campaigns again
)

// commandRun is one run of the command under one leadership.
type commandRun struct {
	h          *holder
	leadership *coordination.Leadership
	signals    *interrupts
	guard      leaseGuard
	path       string
	args       []string // the command and its arguments

	child  *exec.Cmd
	exited <-chan error
}

// run starts the command and waits for the first of its end, the end of
// the leadership, a signal, a step-down, or the lease guard. It returns
// the command's exit code, how it ended, and the error that ends run.
//
// The lease guard is the leadership's renew deadline ([leaseGuard.option]):
// run reads no clock for it. The leadership ends with
// [coordination.ErrRenewDeadline] at the guard's SIGTERM instant, and run
// then stops the command as guardStop says.
func (r *commandRun) run() (int, commandEnd, error) {
	h, g := r.h, r.h.g
	r.child = exec.Command(r.path, r.args[1:]...)
	r.child.Args = r.args
	r.child.Stdin, r.child.Stdout, r.child.Stderr = os.Stdin, os.Stdout, os.Stderr
	r.child.Env = append(os.Environ(),
		envRole+"="+h.role.String(), envMember+"="+h.member.String(), envToken+"="+r.leadership.Token().String())
	exited, err := startCommand(r.child, g.stderr)
	if err != nil {
		code := exitNoExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = exitNotFound
		}
		_ = h.resign(r.leadership, r.signals.again)
		return code, endExited, &exitError{code: code, err: fmt.Errorf("cannot start %s: %v; it resigned role %s", r.args[0], err, h.shownRole())}
	}
	r.exited = exited
	h.report(holderEvent{Event: "command_started", Token: newTokenJSON(r.leadership.Token()), Deadline: timePtr(r.leadership.Lease().Deadline)}, "", false)
	for {
		select {
		case err := <-exited:
			code := childExitCode(err)
			r.exited = nil
			r.stop() // what the command left behind in its group
			r.reportExit(code)
			if err := h.resign(r.leadership, r.signals.again); err != nil {
				return code, endExited, err
			}
			return code, endExited, nil
		case <-r.leadership.Done():
			if errors.Is(r.leadership.Err(), coordination.ErrRenewDeadline) {
				return r.guardStop(r.leadership.Lease())
			}
			if !g.json() {
				fmt.Fprintf(g.stderr, "krabka-coord: leadership of role %s ended (%s); stopping the command: SIGTERM, SIGKILL by %s\n",
					h.shownRole(), shortCause(r.leadership.Err()), formatMillis(r.killBound().UnixMilli()))
			}
			r.reportExit(r.stop())
			return 0, endLost, h.lost(r.leadership)
		case <-r.signals.ctx.Done():
			if !g.json() {
				fmt.Fprintf(g.stderr, "krabka-coord: signal: stopping the command (SIGTERM, SIGKILL by %s or on a second signal), then resigning role %s\n",
					formatMillis(r.killBound().UnixMilli()), h.shownRole())
			}
			code := r.stop()
			r.reportExit(code)
			if err := h.resign(r.leadership, r.signals.again); err != nil {
				return code, endSignal, err
			}
			return code, endSignal, nil
		case <-r.signals.stepDown:
			return r.stepDown("SIGUSR1")
		case <-h.stepDownRequests:
			return r.stepDown("POST /step-down")
		}
	}
}

// killBound is when the command must be dead at the latest if it gets
// SIGTERM now: after the grace, and never after the lease guard's SIGKILL
// instant.
func (r *commandRun) killBound() time.Time {
	bound := time.Now().Add(r.guard.grace)
	if guardKill := r.guard.killAt(r.leadership.Lease().Deadline); guardKill.Before(bound) {
		bound = guardKill
	}
	return bound
}

// stop stops the command's process group: SIGTERM now, SIGKILL at
// killBound or on a second signal. It returns the command's exit code.
func (r *commandRun) stop() int {
	return childExitCode(stopGroup(r.child, r.exited, r.killBound(), r.signals.again))
}

// reportExit reports the end of the command.
func (r *commandRun) reportExit(code int) {
	r.h.report(holderEvent{Event: "command_exited", Token: newTokenJSON(r.leadership.Token()), ExitCode: &code}, "", false)
}

// stepDown stops the command, resigns, and lets run campaign again.
func (r *commandRun) stepDown(by string) (int, commandEnd, error) {
	if !r.h.g.json() {
		fmt.Fprintf(r.h.g.stderr, "krabka-coord: step-down (%s): stopping the command (SIGTERM, SIGKILL by %s), then resigning role %s\n",
			by, formatMillis(r.killBound().UnixMilli()), r.h.shownRole())
	}
	r.reportExit(r.stop())
	if err := r.h.stepDown(r.leadership, by); err != nil {
		return 0, endLost, err
	}
	return 0, endStepDown, nil
}

// guardStop stops the command because no renewal was confirmed since the
// lease with this deadline: the leadership ended on its renew deadline.
// It then writes the tombstones of a resignation, as far as the cluster
// answers (resignLeadership).
func (r *commandRun) guardStop(lease coordination.Lease) (int, commandEnd, error) {
	h := r.h
	h.metrics.guardStopped()
	text := fmt.Sprintf("krabka-coord: lease guard: member %s could not confirm its lease of role %s since %s; stopping the command before a standby may start its own (%s)",
		h.shownMember(), h.shownRole(), formatMillis(lease.GrantedAt), r.guard.describe(lease.Deadline))
	h.report(holderEvent{Event: "guard", Token: newTokenJSON(r.leadership.Token()), Deadline: timePtr(lease.Deadline), Message: text}, text, true)
	code := childExitCode(stopGroup(r.child, r.exited, r.guard.killAt(lease.Deadline), r.signals.again))
	r.reportExit(code)
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	_ = h.resignLeadership(ctx, r.leadership) // best effort: the cluster may be out of reach
	h.metrics.ended("guard")
	if h.flags.rejoin {
		h.metrics.rejoined("guard")
	}
	return code, endGuard, fencedError("lease guard: member %s stopped its command and gave up role %s under token %s: no renewal was confirmed since %s, and a standby may take over at the deadline %s",
		h.shownMember(), h.shownRole(), r.leadership.Token(), formatMillis(lease.GrantedAt), formatMillis(lease.Deadline))
}

// shortCause names why a leadership ended.
func shortCause(err error) string {
	switch {
	case errors.Is(err, coordination.ErrFenced):
		return "fenced: another member holds a newer epoch"
	case errors.Is(err, coordination.ErrProducerLost):
		return "the producer of its epoch is lost"
	case errors.Is(err, coordination.ErrNotAuthorized):
		return "the cluster refused a permission"
	}
	if err == nil {
		return "ended"
	}
	return oneLine(err.Error())
}

// childExitCode is the exit code of a command that Wait returned err for:
// its own code, or 128+n for a signal n, as a shell reports it.
func childExitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if code, ok := reapedExitCode(err); ok {
		return code
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if code, ok := signalExitCode(exit); ok {
			return code
		}
		return exit.ExitCode()
	}
	return exitFailure
}
