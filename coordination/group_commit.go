package coordination

// The group commit of guarded writes: the queue of Leadership.Write calls
// that wait for the write slot, and the batches that share one
// transaction.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// writeCall is one [Leadership.Write] that waits in the queue of its
// leadership, or rides in a transaction.
type writeCall struct {
	ctx     context.Context
	records []GuardedRecord
	// alone marks a call retried in a transaction of its own, after the
	// shared transaction it rode in failed without committing anything.
	alone bool
	// outcome receives the call's result, once. Buffered, so the committer
	// never waits for the caller.
	outcome chan error
}

// writeAlone writes records at once in a transaction of their own when the
// write slot is free, no call waits in the queue, nor a due renewal, and
// the last transaction carried one call: the common case of a lone writer,
// which then pays for no queue. It reports false, and writes nothing, when
// the call must queue.
func (l *Leadership) writeAlone(ctx context.Context, writer GuardedWriter, records []GuardedRecord) (bool, error) {
	if !l.slot.turn.TryLock() {
		return false, nil
	}
	defer l.unlock()
	// After a shared transaction (expect > 0) the callers it answered come
	// back at once: the first of them must not take the free slot for a
	// transaction of its own, or a steady load alternates between a
	// transaction of one call and one of the rest; it queues, and the
	// committer gathers them.
	l.mu.Lock()
	free := len(l.queue) == 0 && l.expect == 0
	l.mu.Unlock()
	free = free && l.slot.renewalGate() == nil
	if !free {
		return false, nil
	}
	if err := l.endedErr("write"); err != nil {
		return true, err
	}
	return true, l.writeTxn(ctx, writer, records, 1)
}

// awaitWrite queues call and returns its outcome. The group commit: the
// caller that takes the write slot writes every call queued at that moment
// (its own among them) in one transaction, so the calls that arrive while a
// transaction commits share the next one. A caller whose call another
// committer took waits for the outcome that committer hands it. A call
// that finds nothing to wait for does not come here (writeAlone).
func (l *Leadership) awaitWrite(writer GuardedWriter, call *writeCall) error {
	l.mu.Lock()
	l.queue = append(l.queue, call)
	l.mu.Unlock()
	for {
		// A due renewal waits for the slot: it goes first.
		if gate := l.slot.renewalGate(); gate != nil {
			select {
			case <-gate:
				continue
			case err := <-call.outcome:
				return err
			case <-call.ctx.Done():
				return l.abandonQueued(call, "waiting for the due renewal of the lease")
			}
		}
		select {
		case err := <-call.outcome:
			return err
		default:
		}
		if l.slot.turn.TryLock() {
			if l.slot.renewalGate() == nil {
				l.commitNext(writer)
			}
			l.unlock()
			select {
			case err := <-call.outcome:
				return err
			default: // another committer's batch holds the call, or a renewal goes first
			}
			continue
		}
		select {
		case <-l.slot.turn.Released():
		case err := <-call.outcome:
			return err
		case <-call.ctx.Done():
			return l.abandonQueued(call, "waiting for the write in flight")
		}
	}
}

// abandonQueued takes a call whose context ended out of the queue, and
// returns its context's error: nothing of it was written. A call that a
// committer took already rides in a transaction that the call's context
// bounds, so the caller waits for its outcome.
func (l *Leadership) abandonQueued(call *writeCall, waiting string) error {
	l.mu.Lock()
	i := slices.Index(l.queue, call)
	if i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
	}
	l.mu.Unlock()
	if i < 0 {
		return <-call.outcome
	}
	return fmt.Errorf("coordination: write role %s: %s, nothing written: %w", l.role, waiting, call.ctx.Err())
}

// commitNext writes the next batch of the queue in one transaction and
// hands each of its calls its outcome. The caller holds the write slot.
func (l *Leadership) commitNext(writer GuardedWriter) {
	if err := l.endedErr("write"); err != nil {
		l.mu.Lock()
		queued := l.queue
		l.queue = nil
		l.mu.Unlock()
		for _, call := range queued {
			call.outcome <- err
		}
		return
	}
	l.gather()
	batch := l.takeBatch()
	if len(batch) == 0 {
		return
	}
	ctx, records := batch[0].ctx, batch[0].records
	if len(batch) > 1 {
		var release func()
		ctx, release = batchContext(batch)
		defer release()
		records = nil
		for _, call := range batch {
			records = append(records, call.records...)
		}
	}
	err := l.writeTxn(ctx, writer, records, len(batch))
	l.mu.Lock()
	l.expect = 0
	if len(batch) > 1 {
		l.expect = len(l.queue) + len(batch)
	}
	l.mu.Unlock()
	switch {
	case err == nil:
		for _, call := range batch {
			call.outcome <- nil
		}
	case len(batch) > 1 && !mayHaveCommitted(err) && !errors.Is(err, errPreempted):
		// Nothing of the shared transaction committed: one call's record
		// (a topic that the member may not write, or that does not exist,
		// a record too large) or a transient error failed it. Each call
		// whose context still runs goes again in a transaction of its own,
		// at the head of the queue and in its order, so that each learns
		// its own outcome and no call fails for another's record.
		// The check of each context and the return to the queue are one
		// step under l.mu, so that a caller whose context ends meanwhile
		// finds its call either answered or back in the queue.
		var again []*writeCall
		l.mu.Lock()
		for _, call := range batch {
			if call.ctx.Err() != nil {
				call.outcome <- err
				continue
			}
			call.alone = true
			again = append(again, call)
		}
		l.queue = append(again, l.queue...)
		l.mu.Unlock()
	default:
		for _, call := range batch {
			call.outcome <- err
		}
	}
}

// gatherYields bounds the yields of gather.
const gatherYields = 4

// gather lets the callers that the last transaction answered queue again
// before the next batch is taken, when that transaction carried more than
// one call: under a steady load of N concurrent writers, the transactions
// then carry about N calls each, instead of alternating between two halves
// (the calls queued while one transaction was in flight, and the callers
// it answered, who come back a moment too late for the next). It yields
// the processor (runtime.Gosched) at most gatherYields times, until the
// queue holds as many calls as the last transaction carried and the queue
// held when it was answered; after a transaction of one call it yields
// not at all, so a lone writer waits for nothing.
func (l *Leadership) gather() {
	for range gatherYields {
		l.mu.Lock()
		queued, expect := len(l.queue), l.expect
		l.mu.Unlock()
		if queued >= expect {
			return
		}
		runtime.Gosched()
	}
}

// takeBatch takes the calls that the next transaction writes out of the
// queue: a call retried alone, or every call queued before the next such
// one. A call whose context has ended gets its context's error and rides
// in no transaction.
func (l *Leadership) takeBatch() []*writeCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var batch []*writeCall
	n := 0
	for _, call := range l.queue {
		if call.alone && len(batch) > 0 {
			break
		}
		n++
		if call.ctx.Err() != nil {
			call.outcome <- fmt.Errorf("coordination: write role %s: waiting for the write in flight, nothing written: %w", l.role, call.ctx.Err())
			continue
		}
		batch = append(batch, call)
		if call.alone {
			break
		}
	}
	l.queue = slices.Delete(l.queue, 0, n)
	return batch
}

// batchContext returns a context that ends when the context of any call of
// the batch ends, with the earliest deadline among them, and the function
// that releases it. It carries the values of the first call's context.
func batchContext(batch []*writeCall) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(batch[0].ctx))
	var deadline time.Time
	for _, call := range batch {
		if d, ok := call.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	cancelDeadline := context.CancelFunc(func() {})
	if !deadline.IsZero() {
		ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
	}
	stops := make([]func() bool, 0, len(batch))
	for _, call := range batch {
		stops = append(stops, context.AfterFunc(call.ctx, func() { cancel(context.Cause(call.ctx)) }))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancelDeadline()
		cancel(nil)
	}
}
