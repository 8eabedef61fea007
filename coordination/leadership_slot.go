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
	"sync"
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
	lease := l.Lease()
	until := time.Duration(lease.Deadline-l.settings.clock.NowMillis())*time.Millisecond - l.settings.lease.renewInterval
	return max(until, 0)
}

// lockForRenewal takes the write slot for a due renewal. It holds back new
// guarded writes while it waits, and cancels the guarded write in flight
// once it has waited preemptAfter, or gives up when ctx ends.
func (l *Leadership) lockForRenewal(ctx context.Context) error {
	if l.slot.tryLock() {
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
		held := time.Duration(l.settings.clock.NowMillis()-l.writeFrom) * time.Millisecond
		wait = max(wait, l.settings.lease.renewInterval/2-held)
	}
	l.mu.Unlock()
	preempt := l.settings.clock.After(wait)
	for {
		if l.slot.tryLock() {
			return nil
		}
		select {
		case <-l.slot.released():
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
		if l.slot.tryLock() {
			return nil
		}
		select {
		case <-l.slot.released():
		case <-ctx.Done():
			return fmt.Errorf("coordination: %s role %s: waiting for the write in flight: %w", operation, l.role, ctx.Err())
		}
	}
}

// unlock gives the write slot back.
func (l *Leadership) unlock() { l.slot.unlock() }

// writeSlot is the write slot of a leadership: a semaphore of one whose
// waiters also wait for other things (a preemption, a context, a queued
// call's outcome). A waiter calls tryLock, and when the slot is held
// selects on released with its other cases, then tries again. Its zero
// value is free. It costs a mutex and a flag in the Leadership, and a
// channel only while somebody waits, where a buffered channel of one
// costs 96 bytes more for every leadership of a process that may hold
// thousands. It is safe for concurrent use.
type writeSlot struct {
	mu    sync.Mutex
	held  bool
	freed chan struct{} // closed by the next unlock; nil while nobody waits
}

// closedChan is a channel that is always closed: released's answer when
// the slot is free.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// tryLock takes the slot and reports true when it is free, and reports
// false at once when it is held.
func (s *writeSlot) tryLock() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		return false
	}
	s.held = true
	return true
}

// released returns a channel that is closed once the slot is free: at its
// next unlock, or already when it is free now.
func (s *writeSlot) released() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held {
		return closedChan
	}
	if s.freed == nil {
		s.freed = make(chan struct{})
	}
	return s.freed
}

// unlock gives the slot back and wakes its waiters, one of which takes it.
// It panics when the slot is free, as sync.Mutex's Unlock does.
func (s *writeSlot) unlock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held {
		panic("coordination: unlock of a free write slot")
	}
	s.held = false
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
}

// renewalGate returns the gate of a due renewal that waits for the write
// slot, and nil when none waits.
func (l *Leadership) renewalGate() chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewGate
}
