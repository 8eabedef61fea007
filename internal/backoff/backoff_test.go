package backoff

import (
	"testing"
	"time"
)

// The pauses of the library's and the CLI's retries, as their callers
// state them: Next and After agree, double from First, stop at Max, and
// Reset starts over.
func TestDoublingPauses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first, max time.Duration
		want       []time.Duration
	}{
		{"CONCURRENT_TRANSACTIONS: 250 µs doubling to 200 ms", 250 * time.Microsecond, 200 * time.Millisecond,
			[]time.Duration{250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 16 * time.Millisecond, 32 * time.Millisecond, 64 * time.Millisecond, 128 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}},
		{"the coordinator's lookup: 50 ms doubling to 500 ms", 50 * time.Millisecond, 500 * time.Millisecond,
			[]time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond}},
		{"the CLI: 100 ms doubling to 1 s", 100 * time.Millisecond, time.Second,
			[]time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}},
		{"a bound equal to the first pause", time.Second, time.Second,
			[]time.Duration{time.Second, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Doubling{First: tc.first, Max: tc.max}
			for i, want := range tc.want {
				if got := d.Next(); got != want {
					t.Errorf("Next() #%d = %v, want %v", i+1, got, want)
				}
				if got := After(tc.first, tc.max, i+1); got != want {
					t.Errorf("After(%v, %v, %d) = %v, want %v", tc.first, tc.max, i+1, got, want)
				}
			}
			d.Reset()
			if got := d.Next(); got != tc.first {
				t.Errorf("Next() after Reset = %v, want %v", got, tc.first)
			}
		})
	}
	if got := After(time.Millisecond, time.Second, 1<<30); got != time.Second {
		t.Errorf("After(1ms, 1s, 1<<30) = %v, want 1s (no overflow)", got)
	}
	if got := After(100*time.Millisecond, time.Second, 0); got != 100*time.Millisecond {
		t.Errorf("After(100ms, 1s, 0) = %v, want 100ms", got)
	}
}

// Jitter stays within its fraction of the pause.
func TestJitterStaysInItsRange(t *testing.T) {
	for range 1000 {
		if got := Jitter(100*time.Millisecond, 0.2); got < 80*time.Millisecond || got >= 120*time.Millisecond {
			t.Fatalf("Jitter(100ms, 0.2) = %v, want in [80ms, 120ms)", got)
		}
	}
}
