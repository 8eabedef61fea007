package kafkawire

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/backoff"
)

// This file holds the copy of a mint: an InitProducerId that was written
// to the coordinator and got no answer (its connection broke while the
// client read, or its answer timed out: mayApplyLater), and that the
// coordinator may still apply.
//
// Such a copy, applied after a resend of the mint was answered, bumps the
// epoch over the pair the resend got, and the member's first transaction
// under that pair is fenced with no other member present: a self-fence
// (issue 28). Kafka cannot tell the two copies apart, and the pair a late
// copy leaves cannot be told from a rival's mint, so it cannot be adopted.
// KIP-360's expected pair (an InitProducerId that carries the current pair,
// so that a duplicate is taken for a retry) does not help either: the
// coordinator answers a request whose expected epoch is the previous one
// with the current pair, unbumped, so two challengers that saw the same
// pair both get the same new one (TestKafkaExpectedPairMintsOnePairTwice).
//
// So the mint never sends an InitProducerId while a copy of an earlier one
// may land: requestWith returns at the first attempt without an answer,
// the mint records the copy (noteCopy), and every later InitProducerId of
// the id, in this call or in the next mint, waits first (awaitCopy) until
// the copy can no longer land. The pair the mint then gets is the last
// one. The copy can no longer land when
//
//   - another node answers as the coordinator of the id (unansweredAt, the
//     rule of the copies of AddPartitionsToTxn and EndTxn): the state of
//     the id lives there now, and the old node answers a queued copy
//     NOT_COORDINATOR or cannot append its bump to the transaction log; or
//   - its life has passed (mintCopyLife: the read timeout plus the
//     transaction timeout, from the moment the attempt ended, on Go's
//     monotonic clock): the wait for an InitProducerId's answer that
//     patientInitProducerID grants. A copy that the broker read is queued
//     on its request channel and applied by the next free request handler
//     thread, in milliseconds, or never (a killed broker); a coordinator
//     slower than that is one the mint already treats as gone.
//
// A mint whose InitProducerId was answered records nothing, and awaitCopy
// returns at its first check of copy, a nil pointer under the id's mint
// lock: the mint of a handover without a broken connection waits for
// nothing more than before.

// mintCopy is an InitProducerId of the id that may still land.
type mintCopy struct {
	until time.Time    // the end of its life, on the monotonic clock
	at    unansweredAt // the nodes it was written to
}

// mintCopyLife is how long a copy of an InitProducerId may still land after
// its attempt ended: the read timeout plus the transaction timeout, the
// longest that the mint waits for an InitProducerId's answer
// (patientInitProducerID).
func (w *Wire) mintCopyLife() time.Duration { return w.coords.readTimeout + w.config.TxnTimeout }

// noteCopy records an InitProducerId written to nodes without an answer,
// whose attempt ended now. A copy recorded before is kept with it: the
// nodes of both, until the later end.
func (m *idMint) noteCopy(nodes []int32, life time.Duration) {
	until := time.Now().Add(life)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.copy == nil {
		m.copy = &mintCopy{until: until}
	}
	for _, node := range nodes {
		m.copy.at.note(node)
	}
	if until.After(m.copy.until) {
		m.copy.until = until
	}
}

// pendingCopy returns the copy that may still land, nil for none, and the
// nodes it was written to.
func (m *idMint) pendingCopy() (until time.Time, nodes []int32, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.copy == nil {
		return time.Time{}, nil, false
	}
	return m.copy.until, slices.Clone(m.copy.at.nodes), true
}

// clearCopy forgets the copy: it can no longer land.
func (m *idMint) clearCopy() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.copy = nil
}

// awaitCopy returns once no copy of an earlier InitProducerId of txnID can
// land: at once when there is none; otherwise when the copy's life has
// passed, or when another node than those it was written to answers a
// DescribeTransactions of the id as its coordinator (asked every read
// timeout at most). It returns an *Error of class Canceled when ctx ends
// first, and errClosed when send (the wire's context) does; the copy is
// then kept, for the next mint of the id to wait for. The caller holds
// the id's mint slot.
func (w *Wire) awaitCopy(ctx, send context.Context, mint *idMint, txnID, op string) error {
	pauses := backoff.Doubling{First: 100 * time.Millisecond, Max: w.coords.readTimeout}
	for {
		until, nodes, ok := mint.pendingCopy()
		if !ok {
			return nil
		}
		left := time.Until(until)
		if left <= 0 {
			mint.clearCopy()
			return nil
		}
		if w.answeredElsewhere(ctx, send, txnID, nodes, min(left, w.coords.readTimeout)) {
			mint.clearCopy()
			return nil
		}
		timer := time.NewTimer(min(time.Until(until), pauses.Next()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return &Error{Op: op, Class: Canceled, Err: ctx.Err(),
				Detail: fmt.Errorf("an InitProducerId of the id that got no answer may still be applied for %v more, or until another node answers as the coordinator; "+
					"the mint sends none before, so that no late copy bumps the epoch over its pair", time.Until(until).Round(time.Millisecond))}
		case <-send.Done():
			timer.Stop()
			return errClosed
		case <-timer.C:
		}
	}
}

// answeredElsewhere reports whether the coordinator of txnID answers a
// DescribeTransactions from another node than nodes, within wait.
func (w *Wire) answeredElsewhere(ctx, send context.Context, txnID string, nodes []int32, wait time.Duration) bool {
	probe := unansweredAt{nodes: nodes}
	pctx, stop := context.WithTimeout(ctx, wait)
	defer stop()
	unhook := context.AfterFunc(send, stop)
	defer unhook()
	_, err := w.coords.requestTracked(pctx, txnID, func() kmsg.Request {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{txnID}
		return req
	}, func(kresp kmsg.Response) error {
		for _, state := range kresp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			if err := codeError(state.ErrorCode); coordinatorMoved(err) {
				return err
			}
		}
		return nil
	}, &probe)
	return err == nil && !probe.pending()
}
