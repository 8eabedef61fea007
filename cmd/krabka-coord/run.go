package main

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
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "run ROLE MEMBER -- COMMAND [ARG...]",
		Short: "Run a command only while this member leads a role",
		Long: `run takes ROLE as MEMBER, as elect does, and then runs COMMAND, with
KRABKA_ROLE, KRABKA_MEMBER and KRABKA_TOKEN (producer_id:producer_epoch) in
its environment, in a process group of its own, with run's stdin, stdout
and stderr. COMMAND runs only while this member leads:

  - when COMMAND exits, run resigns (the first standby takes over at once)
    and exits with COMMAND's exit code (128+n when signal n ended it);
  - when the leadership ends because another member minted a newer epoch
    (a fence, or a takeover after run stalled past its lease), or because
    the producer of its epoch failed so that no write under the token can
    land, the process group of COMMAND gets SIGTERM, and SIGKILL after
    --grace; run then leaves the roster and exits 3;
  - on SIGINT, SIGTERM or SIGHUP, the process group of COMMAND gets SIGTERM,
    and SIGKILL after --grace; run then resigns and exits with COMMAND's
    code (a SIGHUP that was ignored when run started, as under nohup, stays
    ignored).

A fence shows on the next renewal, so COMMAND stops at most --renew-interval
plus --grace after it. COMMAND cannot prove the leadership with the token to
Kafka by itself: a program that writes under the epoch uses the library's
Leadership.Write. Use run for work that must not run twice at a time, and
keep --renew-interval short when the overlap must be short.

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
it was elected, as elect; 3 fenced or leadership lost; 126 COMMAND could not
be started, 127 not found; 1 not elected within --wait; 2 usage; 4 cluster
unreachable or state topic misconfigured.`,
		Example: `  krabka-coord run controller node-1 --brokers 127.0.0.1:9092 -- ./controller --config prod.yaml
  krabka-coord run nightly-report node-1 --grace 30s -- sh -c 'echo "$KRABKA_MEMBER leads with $KRABKA_TOKEN"; ./report'
  krabka-coord run controller node-1 --listen :9464 --renew-interval 2s --lease-duration 6s -- ./controller`,
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
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			h, err := prepareHolder(ctx, g, flags, args[0], args[1])
			if err != nil {
				return err
			}
			defer h.close()
			leadership, err := h.acquire(ctx)
			if err != nil {
				return err
			}
			if leadership == nil {
				return nil // interrupted before it was elected: it left the roster
			}
			child := exec.Command(args[2], args[3:]...)
			child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
			child.Env = append(os.Environ(),
				envRole+"="+h.role.String(), envMember+"="+h.member.String(), envToken+"="+leadership.Token().String())
			exited, err := startCommand(child, g.stderr)
			if err != nil {
				code := exitNoExec
				if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
					code = exitNotFound
				}
				_ = h.resign(leadership)
				return &exitError{code: code, err: fmt.Errorf("cannot start %s: %v; it resigned role %s", args[2], err, h.shownRole())}
			}

			select {
			case err := <-exited:
				code := childExitCode(err)
				stopGroup(child, nil, grace) // what the command left behind
				if err := h.resign(leadership); err != nil {
					var exit *exitError
					if errors.As(err, &exit) && exit.code == exitFenced {
						return err
					}
					fmt.Fprintf(g.stderr, "krabka-coord: %s\n", oneLine(err.Error()))
				}
				return exitCode(code)
			case <-leadership.Done():
				if !g.json() {
					fmt.Fprintf(g.stderr, "krabka-coord: leadership of role %s ended (%s); stopping the command: SIGTERM, SIGKILL after %v\n",
						h.shownRole(), shortCause(leadership.Err()), grace)
				}
				stopGroup(child, exited, grace)
				return h.lost(leadership)
			case <-ctx.Done():
				if !g.json() {
					fmt.Fprintf(g.stderr, "krabka-coord: signal: stopping the command (SIGTERM, SIGKILL after %v), then resigning role %s\n", grace, h.shownRole())
				}
				code := childExitCode(stopGroup(child, exited, grace))
				if err := h.resign(leadership); err != nil {
					var exit *exitError
					if errors.As(err, &exit) && exit.code == exitFenced {
						return err
					}
					fmt.Fprintf(g.stderr, "krabka-coord: %s\n", oneLine(err.Error()))
				}
				return exitCode(code)
			}
		}),
	}
	flags.add(cmd.Flags())
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long the command has to exit after SIGTERM before it gets SIGKILL")
	return cmd
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
