package kafkawire

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A coordinator that keeps answering CONCURRENT_TRANSACTIONS sees a few
// resends at once, then pauses that double: not a storm of a request a
// millisecond.
func TestConcurrentTransactionsResendsBackOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	attempts := 0
	err := withConcurrentTransactions(ctx, func() error {
		attempts++
		return kerr.ConcurrentTransactions
	})
	if !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("withConcurrentTransactions = %v; want the last CONCURRENT_TRANSACTIONS", err)
	}
	// 4 at once, then 250 µs, 500 µs, ... 128 ms (about 0.26 s in all),
	// then 200 ms apart: about 4 + 10 + 9 in 2 s.
	if attempts > 40 {
		t.Fatalf("%d attempts in 2 s against a coordinator that stays busy; want at most 40", attempts)
	}
	if attempts < concurrentTransactionsResends+1 {
		t.Fatalf("%d attempts; want at least the %d resends at once", attempts, concurrentTransactionsResends+1)
	}
}

// The first answers after the immediate resends come after short pauses:
// the markers of the previous transaction take a round trip or two.
func TestConcurrentTransactionsFirstPausesAreShort(t *testing.T) {
	attempts := 0
	start := time.Now()
	err := withConcurrentTransactions(context.Background(), func() error {
		attempts++
		if attempts <= concurrentTransactionsResends+2 {
			return kerr.ConcurrentTransactions
		}
		return nil
	})
	if err != nil {
		t.Fatalf("withConcurrentTransactions = %v; want nil once the coordinator answers", err)
	}
	if elapsed := time.Since(start); elapsed > 200*time.Millisecond {
		t.Fatalf("two pauses took %v; want the short pauses of 250 µs and 500 µs (at most 200 ms on a loaded machine)", elapsed)
	}
}
