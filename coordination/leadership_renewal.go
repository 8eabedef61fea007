package coordination

// The renewal of a leadership: Renew, and the background loop that renews
// the lease at every renew interval and retries a renewal that failed.
// The bound of a leadership on its own lease clock is renew_deadline.go.

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Renew writes a fresh lease record under the same epoch. The background
// loop calls it at every renew interval, and a caller that drives its own
// schedule calls it too. It returns when the transport's write returns; ctx
// bounds the write, and the wait for a write in flight of the same
// leadership.
//
// A renewal that the broker fences ends the leadership. Renew then returns
// an error that wraps [ErrFenced], and [Leadership.Done] closes. So does a
// renewal that gets [ErrProducerLost] or [ErrNotAuthorized]. A renewal that
// fails for another, transient reason leaves the leadership as it is and
// returns the transport's error. Renew on an ended leadership writes nothing and
// returns an error that wraps [ErrNotHeld], and the fence too if a fence
// ended it.
func (l *Leadership) Renew(ctx context.Context) error {
	if err := l.lock(ctx, "renew"); err != nil {
		return err
	}
	defer l.unlock()
	return l.renewHeld(ctx)
}

// renewHeld writes one renewal. The caller holds the write slot.
func (l *Leadership) renewHeld(ctx context.Context) error {
	if err := l.endedErr("renew"); err != nil {
		return err
	}
	grantMono := monoMillis(l.settings.clock)
	lease := l.settings.lease.Grant(l.member, l.token, l.settings.clock.NowMillis())
	err := l.transport.WriteLease(ctx, l.partition, l.token, EncodeKey(LeaseKey(l.role)), EncodeLease(lease))
	if err != nil {
		err = wrapf(err, nil, "renewal by member %s", l.member)
		if endsLeadership(err) || errors.Is(err, ErrNotAuthorized) {
			l.end(err) // no renewal under the token can land again
		}
		return err
	}
	l.mu.Lock()
	l.lease, l.leaseMono = lease, grantMono
	l.mu.Unlock()
	return nil
}

// startRenewals puts the leadership's renewals on the scheduler of its
// clock: the first renewal at the RenewAt of the first lease, and with
// [WithRenewDeadline] the check of the deadline. Both are instants on the
// clock's monotonic reading, measured from the grant of the lease: a step
// of the wall clock moves neither.
func (l *Leadership) startRenewals() {
	l.renewTask = scheduledTask{index: -1, pooled: true, fn: l.renewalDue}
	l.sched = schedulerFor(l.transport, l.settings.clock)
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	l.sched.schedule(&l.renewTask, l.renewAt())
	if deadline := l.settings.renewDeadline; deadline > 0 {
		_, grantMono := l.leaseClock()
		l.deadlineTask = &scheduledTask{index: -1, fn: l.renewDeadlineDue}
		l.sched.schedule(l.deadlineTask, addMillis(grantMono, deadline))
	}
}

// renewAt is the RenewAt of the newest lease on the clock's monotonic
// reading.
func (l *Leadership) renewAt() int64 {
	lease, grantMono := l.leaseClock()
	return monoAt(lease, grantMono, l.settings.lease.Timing(lease).RenewAt())
}

// stopRenewals stops the renewals for good: it takes the leadership's tasks
// off the scheduler and cancels the attempt in flight, which then ends
// them (at once when none runs: waitRenewals). Resign and end call it; a
// second call does nothing.
func (l *Leadership) stopRenewals() {
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	if l.renewalsOver {
		return
	}
	l.renewalsOver = true
	l.sched.cancel(&l.renewTask)
	l.sched.cancel(l.deadlineTask)
	if l.stopAttempt != nil {
		l.stopAttempt()
	}
	if !l.attempting {
		l.finishRenewals()
	}
}

// finishRenewals releases a waiter of waitRenewals and leaves the
// scheduler. The caller holds renewMu, with renewalsOver set and no
// attempt running.
func (l *Leadership) finishRenewals() {
	if l.renewalsDone != nil {
		close(l.renewalsDone)
	}
	l.sched.release()
}

// waitRenewals returns once no renewal attempt runs, after stopRenewals:
// Resign waits so, because its tombstone goes through the same producer.
// The channel it waits on is made only then, so that a held leadership
// keeps none.
func (l *Leadership) waitRenewals() {
	l.renewMu.Lock()
	if !l.attempting {
		l.renewMu.Unlock()
		return
	}
	if l.renewalsDone == nil {
		l.renewalsDone = make(chan struct{})
	}
	done := l.renewalsDone
	l.renewMu.Unlock()
	<-done
}

// renewalDue runs one due renewal, on the scheduler's pool, and schedules
// the next: at the RenewAt of the new lease, or one poll interval later
// after a renewal that failed for a reason other than a fence; an attempt
// may take until the deadline of the lease it renews (renewAttemptBound).
// No renewal is scheduled again once the leadership ended or Resign
// stopped the renewals.
//
// A due renewal does not wait behind a guarded write for long: it waits
// for the write slot at most preemptAfter, then cancels the guarded write
// in flight (see [Leadership.Write]) and takes the slot when the write has
// given it back. While it waits, no new guarded write takes the slot.
func (l *Leadership) renewalDue() {
	l.renewMu.Lock()
	if l.renewalsOver {
		l.renewMu.Unlock()
		return
	}
	l.attempting = true
	// The attempt's context is its own, not a child of a context that the
	// leadership keeps, so that a held leadership keeps none.
	parent, stop := context.WithCancel(context.Background())
	l.stopAttempt = stop
	l.renewMu.Unlock()

	clock := l.settings.clock
	attempt, cancel := withClockTimeout(parent, clock, l.renewAttemptBound())
	err := l.lockForRenewal(attempt)
	if err == nil {
		err = l.renewHeld(attempt)
		l.unlock()
	}
	cancel()
	stop()

	retry := err != nil && !errors.Is(err, ErrNotHeld) && !endsLeadership(err) && !errors.Is(err, ErrNotAuthorized)
	l.renewMu.Lock()
	defer l.renewMu.Unlock()
	l.attempting = false
	l.stopAttempt = nil
	if l.renewalsOver {
		l.finishRenewals() // Resign or the end of the leadership stopped the renewals
		return
	}
	switch {
	case err == nil:
		l.retryAt = 0
	case !retry:
		// renewHeld ended the leadership, and end stopped the renewals;
		// stop them here all the same.
		l.renewalsOver = true
		l.sched.cancel(l.deadlineTask)
		l.finishRenewals()
		return
	default:
		l.logger().Warn("coordination: renewal failed; retrying", slog.Any("error", err),
			slog.Duration("retry_in", l.settings.pollInterval))
		l.retryAt = monoMillis(clock) + l.settings.pollInterval.Milliseconds()
	}
	at := l.renewAt()
	if l.retryAt != 0 {
		at = l.retryAt
	}
	l.sched.schedule(&l.renewTask, at)
}

// renewAttemptBound is how long one renewal attempt may take: until the
// deadline of the lease it renews, and at least one renew interval. An
// attempt whose transaction is still in flight at its end loses the epoch's
// producer (outcome unknown) and ends the leadership, so a bound of one
// renew interval ended healthy leaderships whose commit was only slow, as
// while the role's transaction coordinator moves: the lease stays valid,
// and no standby challenges, until its deadline. A failed attempt that
// returns early is retried as before, one poll interval later.
func (l *Leadership) renewAttemptBound() time.Duration {
	lease, grantMono := l.leaseClock()
	remaining := time.Duration(monoAt(lease, grantMono, lease.Deadline)-monoMillis(l.settings.clock)) * time.Millisecond
	return max(l.settings.lease.renewInterval, remaining)
}
