package main

// The command run: it takes a role as elect does (holder.go), and runs a
// command only while the member leads (run_command.go), under the lease
// guard (guard.go).

import (
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
of a live lease waits up to one --renew-interval plus one --poll-interval,
11s with the defaults, for a renewal before it takes the role
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
    of the roster: a drain that never lets two copies run;
  - on POST /transfer or /drain ('krabka-coord transfer', 'drain'), and at
    a stop with --successor or --successor-policy, run stops COMMAND first,
    then hands the role over (see 'krabka-coord elect --help'); a transfer
    that fails starts COMMAND again under the same token.

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
				return &exitError{code: code, err: fmt.Errorf("cannot run %s: %w; run did not campaign", args[2], err)}
			}
			signals := followSignals(cmd.Context())
			defer signals.stop()
			h, err := prepareHolder(signals.ctx, g, flags, args[0], args[1])
			if err != nil {
				return err
			}
			defer h.close()
			h.renewDeadline = guard.option(config)
			var kept *coordination.Leadership // a failed transfer's: run starts the command again under it
			for {
				leadership := kept
				if leadership == nil {
					leadership, err = h.acquire(signals.ctx, signals.stepDown)
					if errors.Is(err, errDrained) {
						return h.idle(signals.ctx)
					}
					if err != nil {
						return err
					}
				}
				kept = nil
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
				case endKept:
					kept = leadership
				case endDrained:
					return h.idle(signals.ctx)
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
