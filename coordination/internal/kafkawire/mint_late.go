package kafkawire

import (
	"context"
	"fmt"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/slot"
)

// This file holds what a Wire keeps of the mints of one transactional id:
// the one mint at a time, and the pair that an abandoned mint attempt got
// after its caller had gone.
//
// An InitProducerId that reached the coordinator bumps the epoch whether or
// not its sender waits for the answer. A challenger whose mint attempt ran
// out of its bound while the coordinator moved (after a broker fault, the
// new coordinator loads the transaction log, then aborts the deposed
// holder's open transaction first) would mint again on its next attempt,
// one more epoch, and a rival's lease that the first bump did not fence is
// fenced by the second. So the request in flight runs to its answer, and the
// next mint takes its pair when the coordinator still holds it.

// idMint is the mint state of one transactional id, part of its idState
// (wire.go).
type idMint struct {
	// sem is the id's mint slot: the mint of the id in flight holds it, and
	// an abandoned attempt keeps it until its request has answered.
	sem slot.Slot

	mu        sync.Mutex
	late      *Producer // the pair that an abandoned attempt minted; nil for none
	abandoned bool      // the attempt in flight lost its caller, and holds sem until it answers
	copy      *mintCopy // an InitProducerId without an answer that may still land (mint_copy.go); nil for none
}

// acquire takes the id's mint slot, or returns the error of ctx.
func (m *idMint) acquire(ctx context.Context) error { return m.sem.Acquire(ctx) }

// release gives the id's mint slot back.
func (m *idMint) release() { m.sem.Unlock() }

// takeLate returns the kept pair of an abandoned attempt, and forgets it.
func (m *idMint) takeLate() *Producer {
	m.mu.Lock()
	defer m.mu.Unlock()
	late := m.late
	m.late = nil
	return late
}

// LateMint reports whether an abandoned mint attempt of txnID minted
// producer, or whether an attempt whose caller gave up is still waiting for
// its answer (pending: any pair may be its own). It is safe for concurrent
// use.
func (w *Wire) LateMint(txnID string, producer Producer) (minted, pending bool) {
	w.mu.Lock()
	id := w.ids[txnID]
	w.mu.Unlock()
	if id == nil {
		return false, false
	}
	mint := &id.mint
	mint.mu.Lock()
	defer mint.mu.Unlock()
	return mint.late != nil && *mint.late == producer, mint.abandoned
}

// adoptLate takes the kept pair of an abandoned attempt of txnID when the
// coordinator holds exactly that pair and no transaction of it is open: the
// pair is then the newest epoch of the id, and no other member has written
// under it. The caller holds the id's mint slot.
func (w *Wire) adoptLate(ctx context.Context, mint *idMint, txnID string) (Producer, bool) {
	late := mint.takeLate()
	if late == nil {
		return Producer{}, false
	}
	txn, err := w.describeTransaction(ctx, txnID)
	if err != nil || txn.Err != nil || txn.ProducerID != late.ID || txn.ProducerEpoch != late.Epoch {
		return Producer{}, false
	}
	switch txn.State {
	case "Empty", "CompleteCommit", "CompleteAbort":
		return *late, true
	}
	return Producer{}, false
}

// mintResult is the answer of one mint attempt.
type mintResult struct {
	producer Producer
	err      error
}

// mintAttempt sends InitProducerId for txnID until the coordinator mints,
// refuses for good, or ctx ends. The caller holds the id's mint slot. The
// requests run under the wire's context, not ctx, so that when ctx ends
// with a request in flight the call returns at once (class Canceled) and
// the request runs on to its answer on a goroutine of the wire, which then
// keeps the pair it minted (adoptLate) and gives the slot back. owned
// reports whether the caller still holds the slot: false when the
// goroutine took it over.
func (w *Wire) mintAttempt(ctx context.Context, mint *idMint, txnID, op string, unless *Producer) (_ Producer, _ error, owned bool) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return Producer{}, errClosed, true
	}
	w.background.Add(1) // under mu, so that Close, which sets closed under mu, waits for it
	w.mu.Unlock()
	result := make(chan mintResult, 1)
	mint.mu.Lock()
	mint.abandoned = false
	mint.mu.Unlock()
	go func() { // ends when its last request has answered or the wire closed
		defer w.background.Done()
		producer, err := w.initProducerID(ctx, w.ctx, mint, txnID, op, unless)
		mint.mu.Lock()
		defer mint.mu.Unlock()
		if !mint.abandoned {
			result <- mintResult{producer, err}
			return
		}
		if err == nil {
			mint.late = &producer
		}
		mint.abandoned = false
		mint.release()
	}()
	select {
	case r := <-result:
		return r.producer, r.err, true
	case <-ctx.Done():
	}
	mint.mu.Lock()
	defer mint.mu.Unlock()
	select {
	case r := <-result:
		return r.producer, r.err, true
	default:
	}
	mint.abandoned = true
	if mint.copy != nil {
		return Producer{}, &Error{Op: op, Class: Canceled,
			Err: fmt.Errorf("%w (an InitProducerId of the id got no answer and may still be applied; the next mint of the id sends none before it can no longer land)", ctx.Err())}, false
	}
	return Producer{}, &Error{Op: op, Class: Canceled,
		Err: fmt.Errorf("%w (an InitProducerId in flight runs on to its answer, which the next mint of the id takes if the coordinator still holds it)", ctx.Err())}, false
}
