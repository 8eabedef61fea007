package kafkawire

import (
	"context"
	"time"
)

// This file holds the warm-up of a transactional id's route: the
// coordinator and the leader that its next mint and first write need,
// looked up ahead, in the background.

// warmTimeout bounds the requests that warm the route of a transactional
// id.
const warmTimeout = 5 * time.Second

// Prewarm makes the transactional client learn the transaction
// coordinator of txnID and the leader of partition, once per id until
// [Wire.DropWarm]: a registration of a candidate calls it, and the
// candidate's mint and first lease then skip FindCoordinator and Metadata
// (two round trips of a handover). The warm-up runs in the background and
// writes nothing: one FindCoordinator of the id, whose answer the
// coordinator cache keeps, and the Metadata of the partition's topic when
// the leader cache has not loaded it yet. It takes no epoch, and a failure
// only leaves the route cold. It is safe for concurrent use, and does
// nothing on a closed wire.
func (w *Wire) Prewarm(txnID string, partition Partition) {
	w.mu.Lock()
	id := w.idLocked(txnID)
	if w.closed || id.warmed {
		w.mu.Unlock()
		return
	}
	id.warmed = true
	w.background.Add(1) // under mu, so that Close, which sets closed under mu, waits for it
	w.mu.Unlock()
	go func() {
		defer w.background.Done()
		ctx, cancel := context.WithTimeout(w.ctx, warmTimeout)
		defer cancel()
		_, _ = w.coords.node(ctx, txnID)
		_, _ = w.leaders.leader(ctx, partition, false)
	}()
}

// DropWarm forgets the warm-up of txnID, so that its next Prewarm warms
// it again (after the member deregistered). It is safe for concurrent
// use.
func (w *Wire) DropWarm(txnID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id := w.ids[txnID]; id != nil {
		id.warmed = false
	}
}
