package main

// The lease guard of run: the arithmetic of the instants at which run
// stops its command, by its own clock, when no renewal was confirmed.

import (
	"fmt"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// guardMargin is the part of the lease guard's arithmetic that no flag
// sets: the time for SIGKILL to end the command's process group and for
// run to see it, a standby's view of the log that lags the last renewal by
// a fetch, and the scheduling delays of a loaded host.
const guardMargin = time.Second

// leaseGuard is the arithmetic of run's lease guard. A standby takes the
// role, and starts its own copy of the command, no sooner than the
// deadline of the last lease that it read, by its own clock. The holder
// knows the deadline of the last lease that the cluster confirmed to it,
// by its own clock: a renewal that landed but was not confirmed only
// pushes the standbys' deadline later. So a holder that cannot confirm a
// renewal must have its command dead by
//
//	kill = deadline − max clock skew − margin
//
// by its own clock, and it sends SIGTERM at
//
//	term = kill − grace
//
// to leave the command its grace. SIGKILL follows at kill if the command
// is still there. A renewal confirmed before term moves both instants on.
//
// run keeps no timer of its own for term: it acquires with
// [coordination.WithRenewDeadline] of the window (lease − grace − skew −
// margin), and the library ends the leadership with
// [coordination.ErrRenewDeadline] at the grant of the newest confirmed
// lease plus the window, by the holder's clock. That is term, because a
// lease's deadline is its grant plus the lease duration.
type leaseGuard struct {
	grace  time.Duration
	skew   time.Duration
	margin time.Duration
}

// killAt is the instant by which the command must be dead, for a lease
// with this deadline (ms since the Unix epoch, by the holder's clock).
func (g leaseGuard) killAt(deadlineMillis int64) time.Time {
	return time.UnixMilli(deadlineMillis).Add(-g.skew - g.margin)
}

// killAfterTerm is the instant by which the command must be dead when
// the renew deadline ended the leadership at now: the grace after now,
// measured on the monotonic clock that now carries, and no later than
// killAt of the lease. The library's renew deadline runs on the monotonic
// clock, so after a step of the wall clock back killAt (a wall instant)
// lies as far after term as the step; this bound keeps SIGKILL one grace
// after SIGTERM all the same. After a step forward killAt comes first.
func (g leaseGuard) killAfterTerm(deadlineMillis int64, now time.Time) time.Time {
	kill := now.Add(g.grace)
	if wall := g.killAt(deadlineMillis); wall.Before(kill) {
		return wall
	}
	return kill
}

// termAt is the instant at which the command gets SIGTERM when no renewal
// was confirmed since the lease with this deadline: the instant at which
// the renew deadline of the window ends the leadership. run reads no clock
// for it any more (the library's renew deadline does); it stays as the
// arithmetic that the tests and the help text check the window against.
func (g leaseGuard) termAt(deadlineMillis int64) time.Time {
	return g.killAt(deadlineMillis).Add(-g.grace)
}

// window is how long after a renewal the command may run without the
// next one: the lease duration less the grace, the skew and the margin. It
// is the renew deadline that run acquires with ([leaseGuard.option]).
func (g leaseGuard) window(config coordination.LeaseConfig) time.Duration {
	return config.Duration() - g.grace - g.skew - g.margin
}

// option is the option that makes the library end a leadership at the
// guard's SIGTERM instant: [coordination.WithRenewDeadline] of the window.
func (g leaseGuard) option(config coordination.LeaseConfig) coordination.Option {
	return coordination.WithRenewDeadline(g.window(config))
}

// check refuses a guard that would stop the command before the next
// renewal could be confirmed: the window must exceed the renew interval,
// and it says so with the arithmetic. It is the rule by which
// [coordination.WithRenewDeadline] refuses the window (at or below the
// renew interval; the window is always below the lease duration, since the
// grace and the margin are above zero), said with run's flags.
func (g leaseGuard) check(config coordination.LeaseConfig) error {
	window := g.window(config)
	if window > config.RenewInterval() {
		return nil
	}
	return usageError("the lease guard leaves no room: --lease-duration %v − --grace %v − --max-clock-skew %v − margin %v = %v, which must exceed --renew-interval %v "+
		"(else the command is stopped before the next renewal can confirm the lease): lengthen --lease-duration, or shorten --grace, --max-clock-skew or --renew-interval",
		config.Duration(), g.grace, g.skew, g.margin, window, config.RenewInterval())
}

// describe writes the arithmetic for a lease with this deadline.
func (g leaseGuard) describe(deadlineMillis int64) string {
	return fmt.Sprintf("lease deadline %s − max clock skew %v − margin %v = SIGKILL at %s, SIGTERM %v before",
		formatMillis(deadlineMillis), g.skew, g.margin, formatMillis(g.killAt(deadlineMillis).UnixMilli()), g.grace)
}
