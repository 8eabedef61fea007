package kafkawire

import (
	"context"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/backoff"
)

// This file holds the waits of CONCURRENT_TRANSACTIONS: the coordinator
// refuses the next transaction's AddPartitionsToTxn, a new mint's
// InitProducerId and an EndTxn until it has written the markers of the
// previous transaction, and the request goes again.

// concurrentTransactionsBackoff is the first pause before a request that
// the coordinator refused with CONCURRENT_TRANSACTIONS is sent again, after
// concurrentTransactionsResends resends without a pause. Under
// transaction.version 1 the coordinator refuses the next transaction's
// AddPartitionsToTxn, and a new mint's InitProducerId, until it has written
// the markers of the previous commit, a fraction of a millisecond on
// loopback. franz-go's default pause of 20 ms made every back-to-back
// guarded write take 22 ms instead of about two; a pause of 250 µs still
// cost about a millisecond, because an idle Go process wakes from a short
// sleep after about one (the netpoller sleeps in whole milliseconds). A
// resend at once costs one round trip instead, which is about how long the
// markers take. The pause then doubles at each attempt up to 200 ms, and
// grows when the state lasts, as franz-go's does (500 ms after 2.5 s, 1 s
// after 5 s), so a stuck coordinator sees a few dozen requests a second at
// first and no storm (a constant 250 µs pause sent about 500 InitProducerId
// in 2 s to a coordinator that kept answering CONCURRENT_TRANSACTIONS).
const concurrentTransactionsBackoff = 250 * time.Microsecond

// concurrentTransactionsResends is how many times a request refused with
// CONCURRENT_TRANSACTIONS goes again at once, before the pauses of
// concurrentTransactionsBackoff.
const concurrentTransactionsResends = 3

// withConcurrentTransactions runs do until it returns something other than
// CONCURRENT_TRANSACTIONS, resending at once concurrentTransactionsResends
// times and then pausing between the attempts as
// concurrentTransactionsBackoff says, or until ctx ends; it then returns
// the last error.
func withConcurrentTransactions(ctx context.Context, do func() error) error {
	start := time.Now()
	pauses := backoff.Doubling{First: concurrentTransactionsBackoff, Max: 200 * time.Millisecond}
	for attempt := 0; ; attempt++ {
		err := do()
		if !busy(err) {
			return err
		}
		if attempt < concurrentTransactionsResends {
			if ctx.Err() != nil {
				return err
			}
			continue
		}
		pause := pauses.Next()
		switch since := time.Since(start); {
		case since > 5*time.Second:
			pause = max(pause, time.Second)
		case since > 5*time.Second/2:
			pause = max(pause, 500*time.Millisecond)
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}
