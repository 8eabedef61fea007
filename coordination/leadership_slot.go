package coordination

// The write slot of a leadership: the one turn on the role's
// transactional producer that renewals, guarded writes and the resignation
// take, and the preemption of a guarded write that holds it past a due
// renewal.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// errPreempted is the cause with which a due renewal cancels a guarded
// write that holds the write slot too long.
var errPreempted = errors.New("the write held the role's producer past the due renewal of the lease, so the renewal cancelled it")

// preemptAfter is how long a due renewal waits for a guarded write in
// flight before it cancels it: until one renew interval before the
// deadline of the current lease, and not at all past that instant. On the
// regular schedule (a renewal due one renew interval after the grant) that
// is the lease duration minus two renew intervals: 10 s with the defaults
// (30 s, 10 s), 2 s with lease 6 s / renew 2 s, and at least one renew
// interval for a lease that follows the advice of [NewLeaseConfig] (a renew
// interval of at most a third of the lease). The renewal then still has one
// renew interval to commit before a standby may challenge. lockForRenewal
// also gives a write that has just begun half a renew interval.
//
// It waits that long, rather than a fixed half renew interval, because over
// [KafkaTransport] a write cancelled with its transaction at the broker
// still holds the epoch's turn until its transaction ends in the
// background, so the renewal gains nothing by cancelling early: on the
// 3-node cluster most writes that stall (1 to 5 s while a partition leader
// or a transaction coordinator moves) commit within the longer wait.
func (l *Leadership) preemptAfter() time.Duration {
	lease, grantMono := l.leaseClock()
	until := time.Duration(monoAt(lease, grantMono, lease.Deadline)-monoMillis(l.settings.clock))*time.Millisecond - l.settings.lease.renewInterval
	return max(until, 0)
}

// lockForRenewal takes the write slot for a due renewal. It holds back new
// guarded writes while it waits, and cancels the guarded write in flight
// once it has waited preemptAfter, or gives up when ctx ends.
func (l *Leadership) lockForRenewal(ctx context.Context) error {
	if l.slot.TryLock() {
		return nil
	}
	gate := make(chan struct{})
	l.mu.Lock()
	l.renewGate = gate
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.renewGate = nil
		l.mu.Unlock()
		close(gate)
	}()
	wait := l.preemptAfter()
	l.mu.Lock()
	if l.preempt != nil {
		// A write that has just begun gets half a renew interval: a
		// renewal retried in the last renew interval before the deadline
		// would otherwise cancel every write at once, and over
		// KafkaTransport the cancellation of a write at the broker costs
		// the epoch's producer.
		held := time.Duration(monoMillis(l.settings.clock)-l.writeFrom) * time.Millisecond
		wait = max(wait, l.settings.lease.renewInterval/2-held)
	}
	l.mu.Unlock()
	preempt := l.settings.clock.After(wait)
	for {
		if l.slot.TryLock() {
			return nil
		}
		select {
		case <-l.slot.Released():
		case <-preempt:
			preempt = nil
			l.mu.Lock()
			cancel := l.preempt
			l.mu.Unlock()
			if cancel != nil {
				l.logger().Warn("coordination: a guarded write holds the role's producer past a due renewal; cancelling it to renew the lease",
					slog.Duration("waited", wait))
				cancel(errPreempted)
			}
		case <-ctx.Done():
			return fmt.Errorf("coordination: renew role %s: waiting for the write in flight: %w", l.role, ctx.Err())
		}
	}
}

// lock takes the write slot, or gives up when ctx ends first. It lets a due
// renewal that waits for the slot go first.
func (l *Leadership) lock(ctx context.Context, operation string) error {
	for {
		l.mu.Lock()
		gate := l.renewGate
		l.mu.Unlock()
		if gate == nil {
			break
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return fmt.Errorf("coordination: %s role %s: waiting for the due renewal of the lease: %w", operation, l.role, ctx.Err())
		}
	}
	for {
		if l.slot.TryLock() {
			return nil
		}
		select {
		case <-l.slot.Released():
		case <-ctx.Done():
			return fmt.Errorf("coordination: %s role %s: waiting for the write in flight: %w", operation, l.role, ctx.Err())
		}
	}
}

// unlock gives the write slot back.
func (l *Leadership) unlock() { l.slot.Unlock() }

// renewalGate returns the gate of a due renewal that waits for the write
// slot, and nil when none waits.
func (l *Leadership) renewalGate() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewGate
}
