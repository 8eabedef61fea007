package slot

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestSlot: one holder at a time; Released is closed at once for a free
// slot and at the next Unlock for a held one, after which a waiter takes
// the slot.
func TestSlot(t *testing.T) {
	var s Slot
	select {
	case <-s.Released():
	default:
		t.Fatal("Released of a free slot is not closed")
	}
	if !s.TryLock() {
		t.Fatal("TryLock of a free slot failed")
	}
	if s.TryLock() {
		t.Fatal("TryLock of a held slot succeeded")
	}
	freed := s.Released()
	select {
	case <-freed:
		t.Fatal("Released of a held slot is closed before the Unlock")
	default:
	}
	s.Unlock()
	<-freed
	if !s.TryLock() {
		t.Fatal("the waiter could not take the slot after the Unlock")
	}
	s.Unlock()
}

// TestSlotAcquire: a waiter takes the slot when the holder gives it back,
// and gives up with its context's error when that ends first, leaving the
// slot to the others.
func TestSlotAcquire(t *testing.T) {
	var s Slot
	if err := s.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- s.Acquire(ctx) }()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended: got %v, want context.Canceled", err)
	}
	got := make(chan error, 1)
	go func() { got <- s.Acquire(context.Background()) }()
	select {
	case err := <-got:
		t.Fatalf("a second holder took the slot while the first held it (%v)", err)
	default:
	}
	s.Unlock()
	if err := <-got; err != nil {
		t.Fatalf("the waiter after the Unlock: %v", err)
	}
	s.Unlock()
}

// TestSlotExcludes: many goroutines, half waiting with Acquire and half
// with TryLock and Released: the slot excludes them (the race detector
// checks the counter), and each gets it.
func TestSlotExcludes(t *testing.T) {
	var s Slot
	var wg sync.WaitGroup
	counter, inside := 0, 0
	for i := range 32 {
		wg.Go(func() {
			for range 200 {
				if i%2 == 0 {
					if err := s.Acquire(context.Background()); err != nil {
						t.Error(err)
						return
					}
				} else {
					for !s.TryLock() {
						<-s.Released()
					}
				}
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				counter++
				inside--
				s.Unlock()
			}
		})
	}
	wg.Wait()
	if counter != 32*200 {
		t.Fatalf("counter = %d, want %d", counter, 32*200)
	}
}

// TestSlotUnlockOfAFreeSlotPanics: an Unlock without a lock is the
// caller's bug, named at once.
func TestSlotUnlockOfAFreeSlotPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Unlock of a free slot did not panic")
		}
	}()
	var s Slot
	s.Unlock()
}
