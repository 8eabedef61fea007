package main

// The signals of a command that runs until one: the stop signals
// (SIGINT, SIGTERM, SIGHUP), a second one that cuts a grace short, and
// SIGUSR1 for a step-down.

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// errInterrupted is the cause of a context that a stop signal ended.
var errInterrupted = errors.New("interrupted by a signal")

// interrupts follows the stop signals of a command that runs until one:
// SIGINT, SIGTERM and SIGHUP (the terminal or the session that started the
// process went away; a SIGHUP that was ignored at start, as under nohup,
// stays ignored). The first one ends ctx, with errInterrupted as its cause;
// every later one arrives on again, so that a second Ctrl-C can cut a
// grace period short; one within sameStopWindow of the first is the same
// stop delivered twice and is dropped, so the resignation still runs. SIGUSR1 arrives on stepDown (elect and run step down
// on it, and other commands ignore it).
//
// One goroutine forwards the signals; it ends when stop is called, and the
// process takes back the default handling of the signals then.
type interrupts struct {
	ctx      context.Context
	again    <-chan os.Signal
	stepDown <-chan os.Signal

	cancel   context.CancelCauseFunc
	incoming chan os.Signal
	usr1     chan os.Signal
	stopCh   chan struct{}
	once     sync.Once
	done     chan struct{}
}

// sameStopWindow is how close to the first stop signal a later one is
// taken as the same stop rather than an escalation. A supervisor and a
// shell that both forward a SIGTERM, or a kill of the process group and of
// the process, deliver two signals within microseconds; a person who
// presses Ctrl-C twice takes far longer than this.
const sameStopWindow = 250 * time.Millisecond

// stopBurst tells the first stop signal from an escalation. The zero value
// has seen no signal.
type stopBurst struct{ at time.Time }

// started reports whether the first stop signal arrived.
func (b *stopBurst) started() bool { return !b.at.IsZero() }

// escalates records a stop signal that arrives at now and reports whether
// it cuts a grace short: false for the first one, and for one within
// sameStopWindow of the first.
func (b *stopBurst) escalates(now time.Time) bool {
	if !b.started() {
		b.at = now
		return false
	}
	return now.Sub(b.at) >= sameStopWindow
}

// stopSignals are the signals that stop a command.
func stopSignals() []os.Signal {
	signals := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		signals = append(signals, syscall.SIGHUP)
	}
	return signals
}

// followSignals starts following the stop signals and SIGUSR1. The caller
// calls stop when the command ends.
func followSignals(parent context.Context) *interrupts {
	ctx, cancel := context.WithCancelCause(parent)
	incoming := make(chan os.Signal, 4)
	signal.Notify(incoming, stopSignals()...)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	again := make(chan os.Signal, 4)
	in := &interrupts{ctx: ctx, again: again, stepDown: usr1, cancel: cancel, incoming: incoming, usr1: usr1,
		stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(in.done)
		var first stopBurst
		for {
			select {
			case sig := <-incoming:
				if !first.started() {
					first.escalates(time.Now())
					cancel(errInterrupted)
					continue
				}
				if !first.escalates(time.Now()) {
					continue // the same stop, delivered twice at once
				}
				select {
				case again <- sig:
				default: // one pending escalation is enough
				}
			case <-in.stopCh:
				return
			}
		}
	}()
	return in
}

// stop ends the forwarding and the context; it is safe to call twice.
func (in *interrupts) stop() {
	in.once.Do(func() {
		signal.Stop(in.incoming)
		signal.Stop(in.usr1)
		close(in.stopCh)
		<-in.done
		in.cancel(context.Canceled)
	})
}

// interruptedBy reports whether a stop signal ended ctx.
func interruptedBy(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errInterrupted)
}

// interruptedError is the end of a command that a stop signal interrupted
// before it changed anything: exit code 0, as the interruption of elect
// and run before their election.
func interruptedError(what string) error {
	return &exitError{code: exitOK, err: errors.New("interrupted " + what + "; nothing was changed")}
}
