package coordination

// The write slot of a leadership: the one turn on the role's
// transactional producer that renewals, guarded writes and the resignation
// take, and the preemption of a guarded write that holds it past a due
// renewal (the renewer's lockSlot).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/slot"
)

// errPreempted is the cause with which a due renewal cancels a guarded
// write that holds the write slot too long.
var errPreempted = errors.New("the write held the role's producer past the due renewal of the lease, so the renewal cancelled it")

// writeSlot is the write slot of a leadership: held for every write,
// because the writes share the role's transactional producer. A caller
// waiting for it gives up when its context ends. A due renewal that waits
// for it closes the gate to new writers, and may cancel the guarded write
// that holds it (preempt). Its lock guards gate, preempt and writeFrom; no
// other lock is taken under it.
type writeSlot struct {
	turn slot.Slot

	mu        sync.Mutex
	gate      chan struct{}           // non-nil while a due renewal waits for the slot; closed when it has it
	preempt   context.CancelCauseFunc // cancels the guarded write in flight; nil when none
	writeFrom int64                   // when the guarded write in flight began, in ms on the clock's monotonic reading
}

// lock takes the write slot, or gives up when ctx ends first. It lets a due
// renewal that waits for the slot go first.
func (l *Leadership) lock(ctx context.Context, operation string) error {
	for {
		gate := l.slot.renewalGate()
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
		if l.slot.turn.TryLock() {
			return nil
		}
		select {
		case <-l.slot.turn.Released():
		case <-ctx.Done():
			return fmt.Errorf("coordination: %s role %s: waiting for the write in flight: %w", operation, l.role, ctx.Err())
		}
	}
}

// unlock gives the write slot back.
func (l *Leadership) unlock() { l.slot.turn.Unlock() }

// renewalGate returns the gate of a due renewal that waits for the write
// slot, and nil when none waits.
func (s *writeSlot) renewalGate() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gate
}

// guard records the cancellation of the guarded write that holds the slot,
// begun at the monotonic instant from, for a due renewal to preempt it;
// unguard forgets it when the write returns.
func (s *writeSlot) guard(cancel context.CancelCauseFunc, from int64) {
	s.mu.Lock()
	s.preempt, s.writeFrom = cancel, from
	s.mu.Unlock()
}

func (s *writeSlot) unguard() {
	s.mu.Lock()
	s.preempt = nil
	s.mu.Unlock()
}

// preemptAfter is how long a due renewal waits for a guarded write in
// flight before it cancels it: until one renew interval before the
// deadline of the current lease, and not at all past that instant. On the
// regular schedule (a renewal due one renew interval after the grant) that
// is the lease duration minus two renew intervals: 10 s with the defaults
// (30 s, 10 s), 2 s with lease 6 s / renew 2 s, and at least one renew
// interval for a lease that follows the advice of [NewLeaseConfig] (a renew
// interval of at most a third of the lease). The renewal then still has one
// renew interval to commit before a standby may challenge. lockSlot
// also gives a write that has just begun half a renew interval.
//
// It waits that long, rather than a fixed half renew interval, because over
// [KafkaTransport] a write cancelled with its transaction at the broker
// still holds the epoch's turn until its transaction ends in the
// background, so the renewal gains nothing by cancelling early: on the
// 3-node cluster most writes that stall (1 to 5 s while a partition leader
// or a transaction coordinator moves) commit within the longer wait.
func (r *renewer) preemptAfter() time.Duration {
	lease, grantMono := r.leaseClock()
	settings := r.l.settings
	until := time.Duration(monoAt(lease, grantMono, lease.Deadline)-monoMillis(settings.clock))*time.Millisecond - settings.lease.renewInterval
	return max(until, 0)
}

// lockSlot takes the write slot for a due renewal. It holds back new
// guarded writes while it waits, and cancels the guarded write in flight
// once it has waited preemptAfter, or gives up when ctx ends.
func (r *renewer) lockSlot(ctx context.Context) error {
	l := r.l
	s := &l.slot
	if s.turn.TryLock() {
		return nil
	}
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(gate)
	}()
	wait := r.preemptAfter()
	clock, renewInterval := l.settings.clock, l.settings.lease.renewInterval
	s.mu.Lock()
	if s.preempt != nil {
		// A write that has just begun gets half a renew interval: a
		// renewal retried in the last renew interval before the deadline
		// would otherwise cancel every write at once, and over
		// KafkaTransport the cancellation of a write at the broker costs
		// the epoch's producer.
		held := time.Duration(monoMillis(clock)-s.writeFrom) * time.Millisecond
		wait = max(wait, renewInterval/2-held)
	}
	s.mu.Unlock()
	preempt := clock.After(wait)
	for {
		if s.turn.TryLock() {
			return nil
		}
		select {
		case <-s.turn.Released():
		case <-preempt:
			preempt = nil
			s.mu.Lock()
			cancel := s.preempt
			s.mu.Unlock()
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
