package coordination

import (
	"sync"
	"testing"
)

// TestWriteSlot: one holder at a time; released is closed at once for a
// free slot and at the next unlock for a held one, after which a waiter
// takes the slot; an unlock of a free slot panics.
func TestWriteSlot(t *testing.T) {
	var slot writeSlot
	select {
	case <-slot.released():
	default:
		t.Fatal("released of a free slot is not closed")
	}
	if !slot.tryLock() {
		t.Fatal("tryLock of a free slot failed")
	}
	if slot.tryLock() {
		t.Fatal("tryLock of a held slot succeeded")
	}
	freed := slot.released()
	select {
	case <-freed:
		t.Fatal("released of a held slot is closed before the unlock")
	default:
	}
	slot.unlock()
	<-freed
	if !slot.tryLock() {
		t.Fatal("the waiter could not take the slot after the unlock")
	}
	slot.unlock()

	// Many goroutines that wait the way the leadership's callers do: the
	// slot excludes them (the race detector checks the counter).
	var wg sync.WaitGroup
	counter, inside := 0, 0
	for range 32 {
		wg.Go(func() {
			for range 200 {
				for !slot.tryLock() {
					<-slot.released()
				}
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				counter++
				inside--
				slot.unlock()
			}
		})
	}
	wg.Wait()
	if counter != 32*200 {
		t.Fatalf("counter = %d, want %d", counter, 32*200)
	}

	defer func() {
		if recover() == nil {
			t.Fatal("unlock of a free slot did not panic")
		}
	}()
	slot.unlock()
}
