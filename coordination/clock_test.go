package coordination_test

import (
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

var (
	_ coordination.Clock = coordination.SystemClock{}
	_ coordination.Clock = (*coordination.ManualClock)(nil)
)

// ready reports whether the wait has received, without blocking, and
// returns the value it received.
func ready(ch <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-ch:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestManualClockAfterDueAtOnce(t *testing.T) {
	clock := coordination.NewManualClock(5000)
	if got := clock.NowMillis(); got != 5000 {
		t.Fatalf("NowMillis() = %d, want 5000", got)
	}
	for _, extent := range []time.Duration{0, -1, -time.Hour} {
		at, ok := ready(clock.After(extent))
		if !ok {
			t.Errorf("After(%v) did not receive at once", extent)
		} else if at.UnixMilli() != 5000 {
			t.Errorf("After(%v) received %d, want the clock's instant 5000", extent, at.UnixMilli())
		}
	}
	if n := clock.Waiters(); n != 0 {
		t.Errorf("Waiters() = %d after due waits, want 0", n)
	}
}

func TestManualClockAdvanceReleasesAtTheInstant(t *testing.T) {
	clock := coordination.NewManualClock(1000)
	wait := clock.After(10 * time.Millisecond)
	if _, ok := ready(wait); ok {
		t.Fatal("a 10ms wait received before the clock moved")
	}
	clock.Advance(9 * time.Millisecond)
	if _, ok := ready(wait); ok {
		t.Fatal("a 10ms wait received 1ms early")
	}
	if clock.NowMillis() != 1009 || clock.Waiters() != 1 {
		t.Fatalf("NowMillis() = %d, Waiters() = %d; want 1009, 1", clock.NowMillis(), clock.Waiters())
	}
	clock.Advance(time.Millisecond)
	at, ok := ready(wait)
	if !ok {
		t.Fatal("a 10ms wait did not receive at its instant")
	}
	if at.UnixMilli() != 1010 || clock.Waiters() != 0 {
		t.Errorf("received %d with %d waits left, want 1010 and 0", at.UnixMilli(), clock.Waiters())
	}
	if _, ok := ready(wait); ok {
		t.Error("a wait received twice")
	}
}

func TestManualClockRoundsASubMillisecondWaitUp(t *testing.T) {
	clock := coordination.NewManualClock(0)
	wait := clock.After(time.Nanosecond)
	if _, ok := ready(wait); ok {
		t.Fatal("a 1ns wait received before the clock moved: it must never end early")
	}
	clock.Advance(time.Millisecond)
	if _, ok := ready(wait); !ok {
		t.Fatal("a 1ns wait did not receive after 1ms")
	}
	// A sub-millisecond step rounds up as well, so it moves the clock.
	clock.Advance(time.Nanosecond)
	if got := clock.NowMillis(); got != 2 {
		t.Errorf("NowMillis() after Advance(1ns) = %d, want 2", got)
	}
}

func TestManualClockSetReleasesEveryDueWait(t *testing.T) {
	clock := coordination.NewManualClock(0)
	early, exact, late := clock.After(5*time.Millisecond), clock.After(10*time.Millisecond), clock.After(11*time.Millisecond)
	clock.Set(10)
	for name, wait := range map[string]<-chan time.Time{"5ms": early, "10ms": exact} {
		at, ok := ready(wait)
		if !ok || at.UnixMilli() != 10 {
			t.Errorf("the %s wait: received %t at %d, want true at 10", name, ok, at.UnixMilli())
		}
	}
	if _, ok := ready(late); ok {
		t.Error("the 11ms wait received at 10")
	}
	if n := clock.Waiters(); n != 1 {
		t.Errorf("Waiters() = %d, want 1", n)
	}
}

func TestManualClockBackwardsSetReleasesNothing(t *testing.T) {
	clock := coordination.NewManualClock(1000)
	wait := clock.After(5 * time.Millisecond) // due at 1005
	clock.Set(500)
	if clock.NowMillis() != 500 {
		t.Fatalf("Set did not move the clock backwards: %d", clock.NowMillis())
	}
	if _, ok := ready(wait); ok {
		t.Fatal("a backwards move released a wait")
	}
	// A wait taken after the backwards move counts from the new instant.
	second := clock.After(5 * time.Millisecond) // due at 505
	clock.Set(505)
	if _, ok := ready(second); !ok {
		t.Error("the wait due at 505 did not receive")
	}
	if _, ok := ready(wait); ok {
		t.Error("the wait due at 1005 received at 505")
	}
	clock.Set(1005)
	if _, ok := ready(wait); !ok {
		t.Error("the wait due at 1005 did not receive at 1005")
	}
}

func TestManualClockBlockUntil(t *testing.T) {
	clock := coordination.NewManualClock(0)
	clock.BlockUntil(0) // returns at once

	done := make(chan int64)
	go func() {
		at := <-clock.After(time.Second)
		done <- at.UnixMilli()
	}()
	clock.BlockUntil(1) // the goroutine has parked on the clock
	clock.Advance(time.Second)
	if n := clock.Waiters(); n != 0 {
		t.Fatalf("Waiters() = %d after the clock reached the wait", n)
	}
	if got := <-done; got != 1000 {
		t.Errorf("the parked goroutine woke at %d, want 1000", got)
	}
}

func TestManualClockConcurrentUse(t *testing.T) {
	const waiters = 32
	clock := coordination.NewManualClock(0)
	var wg sync.WaitGroup
	woke := make([]int64, waiters)
	for i := range waiters {
		wg.Go(func() {
			extent := time.Duration(i+1) * time.Millisecond
			at := <-clock.After(extent)
			if now := clock.NowMillis(); now < int64(i+1) {
				t.Errorf("waiter %d woke with the clock at %d", i, now)
			}
			woke[i] = at.UnixMilli()
		})
	}
	clock.BlockUntil(waiters)
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for range 100 {
				_ = clock.NowMillis()
				_ = clock.Waiters()
			}
		})
	}
	for range waiters {
		clock.Advance(time.Millisecond)
	}
	if n := clock.Waiters(); n != 0 {
		t.Fatalf("Waiters() = %d after the clock passed every wait", n)
	}
	wg.Wait()
	readers.Wait()
	for i, at := range woke {
		if at != int64(i+1) {
			t.Errorf("waiter %d received %d, want %d", i, at, i+1)
		}
	}
}

func TestSystemClock(t *testing.T) {
	var clock coordination.SystemClock
	before := time.Now().UnixMilli()
	now := clock.NowMillis()
	after := time.Now().UnixMilli()
	if now < before || now > after {
		t.Errorf("NowMillis() = %d, outside [%d, %d]", now, before, after)
	}
	for _, extent := range []time.Duration{0, -time.Second} {
		if _, ok := ready(clock.After(extent)); !ok {
			t.Errorf("SystemClock.After(%v) did not receive at once", extent)
		}
	}
}
