package coordination

// The renewer of a leadership: Renew, and the renewals in the background
// on the scheduler of the leadership's clock (renewal_scheduler.go): the
// due renewal, its retry, a pause (pause, resume), and their end. The
// renewer owns the newest lease, under its own lock. The bound of a
// leadership on its own lease clock is renew_deadline.go.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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
// returns the transport's error, as does one whose ctx ended with its write
// in flight ([ErrOutcomeUnknown] alone). Renew on an ended leadership writes nothing and returns an error that wraps
// [ErrNotHeld], and the fence too if a fence ended it. During a
// [Leadership.TransferTo] it waits for the transfer's end (its lease would
// withdraw the offer).
func (l *Leadership) Renew(ctx context.Context) error {
	if err := l.lock(ctx, "renew"); err != nil {
		return err
	}
	for {
		waited, err := l.awaitTransfer(ctx) // gives the slot back while it waits
		if err != nil {
			return err
		}
		if !waited {
			break
		}
	}
	defer l.unlock()
	return l.renewer.renew(ctx)
}

// renewer renews the lease of one leadership: the due renewal on the
// scheduler of the leadership's clock, its retry after a failure, a pause,
// and the end with WithRenewDeadline (renew_deadline.go). It owns the
// newest lease. Its lock guards every field but l, and is taken before the
// scheduler's lock; no other lock of the leadership is held with it. It is
// a field of the Leadership (no allocation of its own); l never changes.
type renewer struct {
	l *Leadership // the leadership it renews: its identity, its write slot, its end

	mu           sync.Mutex
	lease        Lease
	leaseMono    int64 // the instant of lease's grant on the clock's monotonic reading (monoMillis), from which the local waits run
	sched        *renewalScheduler
	task         scheduledTask      // the next renewal
	deadlineTask *scheduledTask     // the end on the renew deadline (renew_deadline.go); nil without WithRenewDeadline
	retryAt      int64              // after a failed renewal: the instant of the retry (monoMillis), else 0
	attempting   bool               // a renewal attempt runs
	paused       bool               // between pause and resume: no renewal is scheduled, and an attempt under way writes nothing
	over         bool               // no renewal starts again: Resign, or the end of the leadership
	stopAttempt  context.CancelFunc // cancels the attempt in flight; nil when none runs
	idle         chan struct{}      // made by a waiter (wait) while an attempt runs; closed when it ends
}

// leaseClock returns the newest lease and the instant of its grant on the
// clock's monotonic reading.
func (r *renewer) leaseClock() (Lease, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease, r.leaseMono
}

// monoAt converts an instant of the lease granted at grantMono (a
// monotonic instant) into the same instant on the monotonic reading: the
// extent from the lease's GrantedAt is measured on the local clock, and a
// step of the wall clock since the grant does not move it.
func monoAt(lease Lease, grantMono, wallMillis int64) int64 {
	return grantMono + (wallMillis - lease.GrantedAt)
}

// renew writes one renewal, and makes its lease the newest on success. The
// caller holds the write slot. An error after which no renewal under the
// token can land ends the leadership.
func (r *renewer) renew(ctx context.Context) error {
	l := r.l
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
	r.mu.Lock()
	r.lease, r.leaseMono = lease, grantMono
	r.mu.Unlock()
	return nil
}

// start puts the renewals of the leadership, whose first lease was granted
// at the monotonic instant leaseMono, on the scheduler of its clock: the
// first renewal at the RenewAt of that lease, and with [WithRenewDeadline]
// the check of the deadline. Both are instants on the clock's monotonic
// reading, measured from the grant of the lease: a step of the wall clock
// moves neither.
func (r *renewer) start(l *Leadership, lease Lease, leaseMono int64) {
	r.l, r.lease, r.leaseMono = l, lease, leaseMono
	r.task = scheduledTask{index: -1, pooled: true, fn: r.due}
	r.sched = schedulerFor(l.transport, l.settings.clock)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sched.schedule(&r.task, r.renewAtLocked())
	if deadline := l.settings.renewDeadline; deadline > 0 {
		r.deadlineTask = &scheduledTask{index: -1, fn: r.deadlineDue}
		r.sched.schedule(r.deadlineTask, addMillis(leaseMono, deadline))
	}
}

// renewAtLocked is the RenewAt of the newest lease on the clock's monotonic
// reading. The caller holds r.mu.
func (r *renewer) renewAtLocked() int64 {
	return monoAt(r.lease, r.leaseMono, r.l.settings.lease.Timing(r.lease).RenewAt())
}

// pause stops the renewals in the background until resume: it takes the
// due renewal off the scheduler, and an attempt under way that has not
// begun its write yet writes nothing. An attempt whose write has begun
// holds the write slot until it ends, so a caller that takes the slot
// after pause returns knows that no renewal of the pause lands after its
// own write. Leadership.Renew still writes. The renew deadline
// (WithRenewDeadline) keeps counting from the newest lease, and ends the
// leadership on time. It never blocks; a second pause, or a pause of
// ended renewals, does nothing.
func (r *renewer) pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over || r.paused {
		return
	}
	r.paused = true
	r.sched.cancel(&r.task)
}

// resume ends a pause: the next renewal goes at the RenewAt of the newest
// lease, or at the retry instant after a failed renewal, and at once when
// that instant has passed. A resume without a pause, or of ended
// renewals, does nothing.
func (r *renewer) resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over || !r.paused {
		return
	}
	r.paused = false
	if r.attempting {
		return // the attempt under way schedules the next renewal when it ends
	}
	r.scheduleNextLocked()
}

// scheduleNextLocked puts the next renewal on the scheduler: at the retry
// instant after a failed renewal, else at the RenewAt of the newest lease.
// The caller holds r.mu.
func (r *renewer) scheduleNextLocked() {
	at := r.renewAtLocked()
	if r.retryAt != 0 {
		at = r.retryAt
	}
	r.sched.schedule(&r.task, at)
}

// stop stops the renewals for good: it takes the leadership's tasks off
// the scheduler and cancels the attempt in flight, which then ends them
// (at once when none runs: wait). Resign and end call it; a second call
// does nothing.
func (r *renewer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.over {
		return
	}
	r.over = true
	r.sched.cancel(&r.task)
	r.sched.cancel(r.deadlineTask)
	if r.stopAttempt != nil {
		r.stopAttempt()
	}
	if !r.attempting {
		r.sched.release()
	}
}

// wait returns once no renewal attempt runs, after stop: Resign waits so,
// because its tombstone goes through the same producer. The channel it
// waits on is made only then, so that a held leadership keeps none.
func (r *renewer) wait() {
	r.mu.Lock()
	if !r.attempting {
		r.mu.Unlock()
		return
	}
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	idle := r.idle
	r.mu.Unlock()
	<-idle
}

// due runs one due renewal, on the scheduler's pool, and schedules the
// next: at the RenewAt of the new lease, or one poll interval later after
// a renewal that failed for a reason other than a fence; an attempt may
// take until the deadline of the lease it renews (attemptBound); a failed
// attempt is retried one poll interval later. No renewal is scheduled again
// once the leadership ended or Resign stopped the renewals, nor while they
// are paused.
//
// A due renewal does not wait behind a guarded write for long: it waits
// for the write slot at most preemptAfter, then cancels the guarded write
// in flight (see [Leadership.Write]) and takes the slot when the write has
// given it back (lockSlot). While it waits, no new guarded write takes the
// slot.
func (r *renewer) due() {
	r.mu.Lock()
	if r.over || r.paused {
		r.mu.Unlock()
		return
	}
	r.attempting = true
	// The attempt's context is its own, not a child of a context that the
	// leadership keeps, so that a held leadership keeps none.
	parent, stop := context.WithCancel(context.Background())
	r.stopAttempt = stop
	r.mu.Unlock()

	l := r.l
	clock := l.settings.clock
	bound := r.attemptBound()
	attempt, cancel := withClockTimeout(parent, clock, bound)
	skipped := false
	err := r.lockSlot(attempt)
	if err == nil {
		if skipped = r.isPaused(); !skipped { // a pause while the attempt waited for the slot: no write
			err = r.renew(attempt)
		}
		l.unlock()
	}
	cancel()
	stop()

	retry := err != nil && !errors.Is(err, ErrNotHeld) && !endsLeadership(err) && !errors.Is(err, ErrNotAuthorized)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempting = false
	r.stopAttempt = nil
	if r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
	if r.over {
		r.sched.release() // Resign or the end of the leadership stopped the renewals
		return
	}
	switch {
	case skipped:
	case err == nil:
		r.retryAt = 0
	case !retry:
		// renew ended the leadership, and end stopped the renewals; stop
		// them here all the same.
		r.over = true
		r.sched.cancel(r.deadlineTask)
		r.sched.release()
		return
	default:
		l.logger().Warn("coordination: renewal failed; retrying", slog.Any("error", err),
			slog.Duration("retry_in", l.settings.pollInterval))
		r.retryAt = monoMillis(clock) + l.settings.pollInterval.Milliseconds()
	}
	if !r.paused {
		r.scheduleNextLocked()
	}
}

// isPaused reports whether the renewals are paused.
func (r *renewer) isPaused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paused
}

// attemptBound is how long one renewal attempt may take: until the
// deadline of the lease it renews, and at least one renew interval. An
// attempt whose transaction is still in flight at its end loses the epoch's
// producer (outcome unknown) and ends the leadership, so a bound of one
// renew interval ended healthy leaderships whose commit was only slow, as
// while the role's transaction coordinator moves: the lease stays valid,
// and no standby challenges, until its deadline. A failed attempt that
// returns early is retried as before, one poll interval later.
func (r *renewer) attemptBound() time.Duration {
	lease, grantMono := r.leaseClock()
	settings := r.l.settings
	remaining := time.Duration(monoAt(lease, grantMono, lease.Deadline)-monoMillis(settings.clock)) * time.Millisecond
	return max(settings.lease.renewInterval, remaining)
}
