// Package slot is a semaphore of one whose waiters also wait for other
// things: the write slot of a leadership, the slot of an epoch's
// transactions and of a transactional id's mint.
//
// A [Slot] is a mutex and a flag, and a channel only while somebody
// waits; the usual Go semaphore, a buffered channel of one, costs a
// pointer and 96 bytes more for each, and a process that holds thousands
// of roles keeps thousands of each. A waiter that waits for the slot alone
// calls [Slot.Acquire]; one that also waits for something else calls
// [Slot.TryLock], and when the slot is held selects on [Slot.Released]
// with its other cases, then tries again. Waiters are not served in order:
// a release wakes them all, and one of them takes the slot.
package slot

import (
	"context"
	"sync"
)

// Slot is a semaphore of one. Its zero value is free. It is safe for
// concurrent use, and must not be copied after its first use.
type Slot struct {
	mu    sync.Mutex
	held  bool
	freed chan struct{} // closed by the next Unlock; nil while nobody waits
}

// closed is a channel that is always closed: Released's answer for a free
// slot.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// TryLock takes the slot and reports true when it is free, and reports
// false at once when it is held.
func (s *Slot) TryLock() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held {
		return false
	}
	s.held = true
	return true
}

// Released returns a channel that is closed once the slot is free: at its
// next Unlock, or already when it is free now.
func (s *Slot) Released() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held {
		return closed
	}
	if s.freed == nil {
		s.freed = make(chan struct{})
	}
	return s.freed
}

// Acquire takes the slot, or returns the error of ctx when ctx ends first.
func (s *Slot) Acquire(ctx context.Context) error {
	for !s.TryLock() {
		select {
		case <-s.Released():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Unlock gives the slot back and wakes its waiters. It panics when the
// slot is free, as sync.Mutex's Unlock does: an Unlock without a lock is a
// bug of the caller.
func (s *Slot) Unlock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.held {
		panic("slot: Unlock of a free slot")
	}
	s.held = false
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
}
