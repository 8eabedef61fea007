package kafkawire

import (
	"context"
	"sync"
)

// turn is a semaphore of one whose waiters give up when their context
// ends: the slot of an epoch's transactions and of an id's mint. Its zero
// value is free. It costs a mutex and a flag in its owner, and a channel
// only while somebody waits; a buffered channel of one, the usual Go
// semaphore, costs a pointer and 96 bytes more for every epoch and id, of
// which a wire holding thousands of roles keeps thousands. Waiters are not
// served in order: a release wakes them all, and one of them takes the
// turn. It is safe for concurrent use.
type turn struct {
	mu    sync.Mutex
	held  bool
	freed chan struct{} // closed by the next release; nil while nobody waits
}

// acquire takes the turn, or returns the error of ctx when ctx ends first.
func (t *turn) acquire(ctx context.Context) error {
	for {
		t.mu.Lock()
		if !t.held {
			t.held = true
			t.mu.Unlock()
			return nil
		}
		if t.freed == nil {
			t.freed = make(chan struct{})
		}
		freed := t.freed
		t.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives the turn back, and wakes its waiters. It panics when the
// turn is free, as sync.Mutex's Unlock does: a release without an acquire
// is a bug of the caller.
func (t *turn) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.held {
		panic("kafkawire: release of a free turn")
	}
	t.held = false
	if t.freed != nil {
		close(t.freed)
		t.freed = nil
	}
}
