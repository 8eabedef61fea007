package kafkawire

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestNarrowingNamesTheFieldAndTheLimit (issue 28): a value that does not
// fit its narrower wire field is refused with the field and the limit,
// never wrapped: a lease of 2^32 ms + 5 s once reached the broker as a
// transaction timeout of 5 s.
func TestNarrowingNamesTheFieldAndTheLimit(t *testing.T) {
	wrapped := time.Duration(1<<32)*time.Millisecond + 5*time.Second
	for _, r := range []struct {
		name    string
		got     func() (int64, error)
		want    int64
		refused bool
	}{
		{"Millis32 of 30 s", func() (int64, error) { v, err := Millis32("f", 30*time.Second); return int64(v), err }, 30_000, false},
		{"Millis32 of MaxInt32 ms", func() (int64, error) {
			v, err := Millis32("f", math.MaxInt32*time.Millisecond)
			return int64(v), err
		}, math.MaxInt32, false},
		{"Millis32 of 2^32 ms + 5 s", func() (int64, error) { v, err := Millis32("f", wrapped); return int64(v), err }, 0, true},
		{"Millis32 below zero", func() (int64, error) { v, err := Millis32("f", -time.Millisecond); return int64(v), err }, 0, true},
		{"Int32 of 12", func() (int64, error) { v, err := Int32("f", 12, 1); return int64(v), err }, 12, false},
		{"Int32 of 2^31", func() (int64, error) { v, err := Int32("f", 1<<31, 1); return int64(v), err }, 0, true},
		{"Int32 below its floor", func() (int64, error) { v, err := Int32("f", 0, 1); return int64(v), err }, 0, true},
		{"Int16 of -1", func() (int64, error) { v, err := Int16("f", -1, -1); return int64(v), err }, -1, false},
		{"Int16 of 2^15", func() (int64, error) { v, err := Int16("f", 1<<15, -1); return int64(v), err }, 0, true},
	} {
		t.Run(r.name, func(t *testing.T) {
			got, err := r.got()
			if r.refused {
				if err == nil || !strings.Contains(err.Error(), "f ") || !strings.Contains(err.Error(), "does not fit") {
					t.Fatalf("= %d, %v; want an error that names the field and the limit", got, err)
				}
				return
			}
			if err != nil || got != r.want {
				t.Fatalf("= %d, %v; want %d", got, err, r.want)
			}
		})
	}
	if _, err := New(Config{Brokers: []string{"localhost:1"}, TxnTimeout: wrapped, RenewInterval: time.Second}); err == nil ||
		!strings.Contains(err.Error(), "TransactionTimeoutMillis") || !strings.Contains(err.Error(), "2147483647") {
		t.Fatalf("New with a transaction timeout of 2^32 ms + 5 s: %v; want an error that names TransactionTimeoutMillis and its limit", err)
	}
	if got := clampMillis32(wrapped); got != math.MaxInt32 {
		t.Errorf("clampMillis32(2^32 ms + 5 s) = %d, want MaxInt32", got)
	}
	for _, r := range []struct {
		seq  int32
		n    int
		want int32
	}{{0, 3, 3}, {math.MaxInt32 - 1, 1, math.MaxInt32}, {math.MaxInt32, 1, 0}, {math.MaxInt32 - 1, 5, 3}} {
		if got := nextSequence(r.seq, r.n); got != r.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", r.seq, r.n, got, r.want)
		}
	}
}
