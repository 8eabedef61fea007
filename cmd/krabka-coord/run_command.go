package main

// One run of run's command under one leadership: it starts the command,
// and stops its process group at the first of its exit, the end of the
// leadership, a signal, a step-down, or the lease guard (guard.go).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// How one run of the command ended.
type commandEnd int

const (
	endExited   commandEnd = iota // the command exited by itself
	endSignal                     // a stop signal to run
	endLost                       // the leadership ended: a fence, a lost producer
	endGuard                      // the lease guard stopped the command
	endStepDown                   // a step-down or a transfer: run campaigns again
	endKept                       // a transfer or a drain failed: run starts the command again, under the same leadership
	endDrained                    // a drain handed the role over: run idles until a signal
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
		return code, endExited, &exitError{code: code, err: fmt.Errorf("cannot start %s: %w; it resigned role %s", r.args[0], err, h.shownRole())}
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
		case req := <-h.operatorRequests:
			return r.handover(req)
		}
	}
}

// killBound is when the command must be dead at the latest if it gets
// SIGTERM now: after the grace, and never after the lease guard's SIGKILL
// instant.
func (r *commandRun) killBound() time.Time {
	return r.guard.killAfterTerm(r.leadership.Lease().Deadline, time.Now())
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

// handover stops the command, so that two copies never run, and hands the
// role over (holder_transfer.go). When the transfer fails, the member still
// leads, and run starts the command again.
func (r *commandRun) handover(req operatorRequest) (int, commandEnd, error) {
	what := "transfer to " + showName(req.to.String())
	if req.drain {
		what = "drain"
	}
	if !r.h.g.json() {
		fmt.Fprintf(r.h.g.stderr, "krabka-coord: %s: stopping the command (SIGTERM, SIGKILL by %s), then handing role %s over\n",
			what, formatMillis(r.killBound().UnixMilli()), r.h.shownRole())
	}
	r.reportExit(r.stop())
	if r.h.handover(r.leadership, req) {
		return 0, endKept, nil
	}
	switch {
	case !errors.Is(r.leadership.Err(), coordination.ErrTransferred):
		return 0, endLost, r.h.lost(r.leadership)
	case req.drain:
		return 0, endDrained, nil
	}
	r.h.metrics.rejoined("transfer")
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
	code := childExitCode(stopGroup(r.child, r.exited, r.guard.killAfterTerm(lease.Deadline, time.Now()), r.signals.again))
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
