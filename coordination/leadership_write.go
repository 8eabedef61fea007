package coordination

// The write path of a leadership: Write, the write queue that lets
// concurrent writes share one transaction (group commit), and the
// transaction that writes them under the leadership's token. The check of
// guarded records, which Write passes first, is checkGuardedRecords, beside
// GuardedRecord (transport.go).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Write writes the caller's own records, such as commands to devices, in
// one transaction under the epoch of this leadership, and returns after the
// commit. It is the guarded write: the broker refuses it once another member
// minted a newer epoch, so a deposed leader's records never become visible
// to a read_committed reader after its successor's first write.
//
// The transport must implement [GuardedWriter]; [KafkaTransport] does. Write
// is safe for concurrent use, with the background renewal too: calls that
// wait for the role's one transaction share the next one (group commit), and
// each returns its own outcome. A due renewal may preempt a slow write.
//
// ctx bounds the call; over [KafkaTransport] it returns at most 250 ms after
// ctx ends, with an error that wraps [ErrOutcomeUnknown] when its
// transaction was in flight (the records may commit; the leadership goes
// on). A fence returns an error that wraps [ErrFenced], a lost producer one
// that wraps [ErrProducerLost]; both end the leadership. A refused topic
// ([ErrNotAuthorized]) or a transient error commits nothing and leaves the
// leadership alone. On an ended leadership Write writes nothing and returns
// an error that wraps [ErrNotHeld]. It rejects an empty list, a record
// without a topic or with a partition outside 0 to 2^31-1, and a record for
// the coordination topic (the leadership's, or [StateTopic]), before
// anything is queued. Each outcome: see the package doc's section "Guarded
// writes and group commit".
func (l *Leadership) Write(ctx context.Context, records ...GuardedRecord) error {
	writer, ok := l.transport.(GuardedWriter)
	if !ok {
		return fmt.Errorf("coordination: transport %T does not implement GuardedWriter", l.transport)
	}
	if len(records) == 0 {
		return errors.New("coordination: Write: no records")
	}
	if err := checkGuardedRecords(records, func(topic string) bool { return topic == l.partition.Topic }); err != nil {
		return fmt.Errorf("coordination: Write: %w", err)
	}
	if err := l.endedErr("write"); err != nil {
		return err
	}
	if done, err := l.writes.alone(ctx, writer, records); done {
		return err
	}
	return l.writes.await(writer, &writeCall{ctx: ctx, records: records, outcome: make(chan error, 1)})
}

// writeQueue is the write queue of one leadership: the [Leadership.Write]
// calls that wait for the write slot, and the batches that share one
// transaction (group commit). Its lock guards calls and expect; no other
// lock of the leadership is taken under it. It is a field of the
// Leadership (no allocation of its own); l never changes.
type writeQueue struct {
	l *Leadership // the leadership it writes for: its token, its write slot, its end

	mu     sync.Mutex
	calls  []*writeCall // the guarded writes that wait for the next transaction
	expect int          // after a shared transaction: its calls and the calls queued when it ended (gather)
}

// writeCall is one [Leadership.Write] that waits in the write queue of
// its leadership, or rides in a transaction.
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

// mayHaveCommitted reports an error of a [GuardedWriter] after which the
// records of the call may be in the log, so that they are never written
// again: a fence or a lost producer (endsLeadership), or a write of
// unknown outcome ([ErrOutcomeUnknown]).
func mayHaveCommitted(err error) bool {
	return endsLeadership(err) || errors.Is(err, ErrOutcomeUnknown)
}

// txn writes the records of calls calls of Write in one transaction
// under the leadership's token, under ctx: for a batch, the context of all
// its calls (batchContext), so that the first of them to end ends the
// transaction, as the end of a caller's context ends its own write. A due
// renewal that has waited for the slot preemptAfter cancels it (see
// renewer.lockSlot). It ends the leadership on an error that leaves the
// token unable to write.
func (q *writeQueue) txn(ctx context.Context, writer GuardedWriter, records []GuardedRecord, calls int) error {
	l := q.l
	writeCtx, cancel := context.WithCancelCause(ctx)
	l.slot.guard(cancel, monoMillis(l.settings.clock))
	err := writer.WriteGuarded(writeCtx, l.token, records)
	l.slot.unguard()
	preempted := ctx.Err() == nil && errors.Is(context.Cause(writeCtx), errPreempted)
	cancel(nil)
	if err == nil {
		return nil
	}
	if preempted {
		err = fmt.Errorf("%w: %w", errPreempted, err)
	}
	if calls > 1 {
		err = wrapf(err, nil, "guarded write by member %s, one transaction for %d calls", l.member, calls)
	} else {
		err = wrapf(err, nil, "guarded write by member %s", l.member)
	}
	if endsLeadership(err) {
		l.end(err)
	}
	return err
}

// alone writes records at once in a transaction of their own when the
// write slot is free, no call waits in the queue, nor a due renewal, and
// the last transaction carried one call: the common case of a lone writer,
// which then pays for no queue. It reports false, and writes nothing, when
// the call must queue.
func (q *writeQueue) alone(ctx context.Context, writer GuardedWriter, records []GuardedRecord) (bool, error) {
	l := q.l
	if !l.slot.turn.TryLock() {
		return false, nil
	}
	defer l.unlock()
	// After a shared transaction (expect > 0) the callers it answered come
	// back at once: the first of them must not take the free slot for a
	// transaction of its own, or a steady load alternates between a
	// transaction of one call and one of the rest; it queues, and the
	// committer gathers them.
	q.mu.Lock()
	free := len(q.calls) == 0 && q.expect == 0
	q.mu.Unlock()
	free = free && l.slot.renewalGate() == nil
	if !free {
		return false, nil
	}
	if err := l.endedErr("write"); err != nil {
		return true, err
	}
	return true, q.txn(ctx, writer, records, 1)
}

// await queues call and returns its outcome. The group commit: the
// caller that takes the write slot writes every call queued at that moment
// (its own among them) in one transaction, so the calls that arrive while a
// transaction commits share the next one. A caller whose call another
// committer took waits for the outcome that committer hands it. A call
// that finds nothing to wait for does not come here (alone).
func (q *writeQueue) await(writer GuardedWriter, call *writeCall) error {
	l := q.l
	q.mu.Lock()
	q.calls = append(q.calls, call)
	q.mu.Unlock()
	for {
		// A due renewal waits for the slot: it goes first.
		if gate := l.slot.renewalGate(); gate != nil {
			select {
			case <-gate:
				continue
			case err := <-call.outcome:
				return err
			case <-call.ctx.Done():
				return q.abandon(call, "waiting for the due renewal of the lease")
			}
		}
		select {
		case err := <-call.outcome:
			return err
		default:
		}
		if l.slot.turn.TryLock() {
			if l.slot.renewalGate() == nil {
				q.commitNext(writer)
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
			return q.abandon(call, "waiting for the write in flight")
		}
	}
}

// abandon takes a call whose context ended out of the queue, and
// returns its context's error: nothing of it was written. A call that a
// committer took already rides in a transaction that the call's context
// bounds, so the caller waits for its outcome.
func (q *writeQueue) abandon(call *writeCall, waiting string) error {
	q.mu.Lock()
	i := slices.Index(q.calls, call)
	if i >= 0 {
		q.calls = slices.Delete(q.calls, i, i+1)
	}
	q.mu.Unlock()
	if i < 0 {
		return <-call.outcome
	}
	return fmt.Errorf("coordination: write role %s: %s, nothing written: %w", q.l.role, waiting, call.ctx.Err())
}

// commitNext writes the next batch of the queue in one transaction and
// hands each of its calls its outcome. The caller holds the write slot.
func (q *writeQueue) commitNext(writer GuardedWriter) {
	if err := q.l.endedErr("write"); err != nil {
		q.mu.Lock()
		queued := q.calls
		q.calls = nil
		q.mu.Unlock()
		for _, call := range queued {
			call.outcome <- err
		}
		return
	}
	q.gather()
	batch := q.takeBatch()
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
	err := q.txn(ctx, writer, records, len(batch))
	q.mu.Lock()
	q.expect = 0
	if len(batch) > 1 {
		q.expect = len(q.calls) + len(batch)
	}
	q.mu.Unlock()
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
		// step under q.mu, so that a caller whose context ends meanwhile
		// finds its call either answered or back in the queue.
		var again []*writeCall
		q.mu.Lock()
		for _, call := range batch {
			if call.ctx.Err() != nil {
				call.outcome <- err
				continue
			}
			call.alone = true
			again = append(again, call)
		}
		q.calls = append(again, q.calls...)
		q.mu.Unlock()
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
func (q *writeQueue) gather() {
	for range gatherYields {
		q.mu.Lock()
		queued, expect := len(q.calls), q.expect
		q.mu.Unlock()
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
func (q *writeQueue) takeBatch() []*writeCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	var batch []*writeCall
	n := 0
	for _, call := range q.calls {
		if call.alone && len(batch) > 0 {
			break
		}
		n++
		if call.ctx.Err() != nil {
			call.outcome <- fmt.Errorf("coordination: write role %s: waiting for the write in flight, nothing written: %w", q.l.role, call.ctx.Err())
			continue
		}
		batch = append(batch, call)
		if call.alone {
			break
		}
	}
	q.calls = slices.Delete(q.calls, 0, n)
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
