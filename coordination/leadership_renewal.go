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
	l.lease = lease
	l.mu.Unlock()
	return nil
}

// renewLoop renews at every renew interval, and at most one poll interval
// after a renewal that failed for a reason other than a fence; an attempt
// may take until the deadline of the lease it renews (renewAttemptBound).
// It returns when the leadership ends or Resign stops it.
//
// A due renewal does not wait behind a guarded write for long: it waits
// for the write slot at most preemptAfter, then cancels the guarded write
// in flight (see [Leadership.Write]) and takes the slot when the write has
// given it back. While it waits, no new guarded write takes the slot.
func (l *Leadership) renewLoop(ctx context.Context) {
	defer close(l.loopDone)
	clock := l.settings.clock
	retryAt := int64(0) // after a failure: the instant of the retry
	for {
		at := l.settings.lease.Timing(l.Lease()).RenewAt()
		if retryAt != 0 {
			at = retryAt
		}
		select {
		case <-l.stop:
			return
		case <-l.done:
			return
		case <-clock.After(time.Duration(at-clock.NowMillis()) * time.Millisecond):
		}
		attempt, cancel := withClockTimeout(ctx, clock, l.renewAttemptBound())
		err := l.lockForRenewal(attempt)
		if err == nil {
			err = l.renewHeld(attempt)
			l.unlock()
		}
		cancel()
		switch {
		case err == nil:
			retryAt = 0
		case errors.Is(err, ErrNotHeld), endsLeadership(err), errors.Is(err, ErrNotAuthorized):
			return // renewHeld ended the leadership
		default:
			select {
			case <-l.stop:
				return
			case <-l.done:
				return // the renew deadline ended it, and cancelled this attempt
			default:
			}
			l.logger.Warn("coordination: renewal failed; retrying", slog.Any("error", err),
				slog.Duration("retry_in", l.settings.pollInterval))
			retryAt = clock.NowMillis() + l.settings.pollInterval.Milliseconds()
		}
	}
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
	remaining := time.Duration(l.Lease().Deadline-l.settings.clock.NowMillis()) * time.Millisecond
	return max(l.settings.lease.renewInterval, remaining)
}
