package kafkawire

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestTurn: one holder at a time; a waiter takes the turn when the holder
// releases it, and gives up with its context's error when that ends
// first, leaving the turn to the others.
func TestTurn(t *testing.T) {
	var turn turn
	if err := turn.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- turn.acquire(ctx) }()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended: got %v, want context.Canceled", err)
	}

	got := make(chan error, 1)
	go func() { got <- turn.acquire(context.Background()) }()
	select {
	case err := <-got:
		t.Fatalf("a second holder took the turn while the first held it (%v)", err)
	default:
	}
	turn.release()
	if err := <-got; err != nil {
		t.Fatalf("the waiter after the release: %v", err)
	}
	turn.release()

	// Many goroutines: the turn excludes them (the race detector checks
	// the counter), and each gets it.
	var wg sync.WaitGroup
	counter, inside := 0, 0
	for range 64 {
		wg.Go(func() {
			for range 100 {
				if err := turn.acquire(context.Background()); err != nil {
					t.Error(err)
					return
				}
				inside++
				if inside != 1 {
					t.Errorf("%d holders at once", inside)
				}
				counter++
				inside--
				turn.release()
			}
		})
	}
	wg.Wait()
	if counter != 6400 {
		t.Fatalf("counter = %d, want 6400", counter)
	}
}

// TestTurnReleaseOfAFreeTurnPanics: a release without an acquire is the
// caller's bug, named at once.
func TestTurnReleaseOfAFreeTurnPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("release of a free turn did not panic")
		}
	}()
	var turn turn
	turn.release()
}
