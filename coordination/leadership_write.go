package coordination

// The guarded write of a leadership: Write, the one check of guarded
// records (checkGuardedRecords), and the transaction that writes them
// under the leadership's token. The queue that lets concurrent writes
// share a transaction is group_commit.go.

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Write writes the caller's own records, such as commands to devices, in
// one transaction under the epoch of this leadership, and returns after the
// commit. It is the guarded write: the broker refuses it once another member
// minted a newer epoch, so a deposed leader's records never become visible
// to a read_committed reader after its successor's first write.
//
// The transport must implement [GuardedWriter]; [KafkaTransport] does. Write
// is safe to call from many goroutines and concurrently with the background
// renewal. The role has one transactional producer, which runs one
// transaction at a time, so the writes take turns on one write slot with
// the renewals and the resignation.
//
// # Group commit
//
// Calls that arrive while a transaction of the leadership is in flight wait
// in a queue, and the next transaction writes all of them: one
// AddPartitionsToTxn, Produce and EndTxn for the lot, the records of each
// call together and in their order, the calls in the order they queued. A
// call that finds nothing in flight starts its transaction at once and
// waits for no company. Each call returns its own outcome:
//
//   - The shared transaction commits: every call of it returns nil.
//   - The broker fences the token: every call of the transaction returns an
//     error that wraps [ErrFenced], none of their records is visible, and
//     the leadership ends; the calls still queued return an error that
//     wraps [ErrNotHeld] and the fence.
//   - The transaction's outcome is unknown, or the producer is lost (the
//     error wraps [ErrProducerLost]): every call of it returns that error,
//     which says whether the records may have committed, and the
//     leadership ends.
//   - The transaction fails without committing anything and leaves the
//     leadership alone: a record for a topic that the member may not write
//     (TOPIC_AUTHORIZATION_FAILED; the error wraps [ErrNotAuthorized]) or
//     that does not exist, a record too large, a transient broker error,
//     the end of one call's context before anything was sent. One call
//     does not fail the others: when the transaction carried more than one
//     call, each call whose context still runs is written again at once in
//     a transaction of its own, in the same order, and returns the outcome
//     of that one. A call whose context ended returns the shared
//     transaction's error. (The retry rests on the contract of
//     [GuardedWriter]: an error that wraps none of ErrFenced,
//     ErrProducerLost and ErrOutcomeUnknown means that nothing committed;
//     see mayHaveCommitted.)
//   - A due renewal preempts the transaction (below): every call of it
//     returns the error that says so.
//
// ctx bounds the call. A call whose context ends while it waits in the
// queue leaves the queue and returns the context's error; nothing of it is
// written. A transaction runs under the contexts of all its calls, the
// earliest deadline among them included: the first context to end ends the
// transaction for all of them, as the end of a caller's context ends its
// own write. Over [KafkaTransport] the calls then return at most 250 ms
// after that context ended; a transaction still in flight then ends in the
// background, and every call of it returns an error that wraps
// [ErrOutcomeUnknown]: its records may commit, or not. The leadership goes
// on, and no call of such a transaction is written again.
//
// A write never lets the lease lapse: a renewal that falls due while a
// transaction of writes holds the slot waits for it until one renew
// interval before the lease's deadline (the lease duration minus two renew
// intervals on the regular schedule: 10 s with the defaults), then cancels
// it, and the queued writes wait for the renewal.
// A renewal shares no transaction with guarded writes: it goes alone,
// ahead of the queue, so that a caller's record (refused, or slow to be
// acknowledged) never holds the lease back, at the cost of one transaction
// per renew interval.
// Over [KafkaTransport] records not yet sent are then failed and the
// transaction is aborted, so nothing of it commits and the leadership goes
// on, while a transaction already in flight ends in the background as
// above (ErrOutcomeUnknown).
//
// Write on an ended leadership writes nothing and returns an error that
// wraps [ErrNotHeld]. It rejects an empty list, a record without a topic or
// with a partition outside 0 to 2^31-1, and a record for the coordination
// topic (the leadership's, or [StateTopic]), before anything is queued.
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
	if done, err := l.writeAlone(ctx, writer, records); done {
		return err
	}
	return l.awaitWrite(writer, &writeCall{ctx: ctx, records: records, outcome: make(chan error, 1)})
}

// mayHaveCommitted reports an error of a [GuardedWriter] after which the
// records of the call may be in the log, so that they are never written
// again: a fence or a lost producer (endsLeadership), or a write of
// unknown outcome ([ErrOutcomeUnknown]).
func mayHaveCommitted(err error) bool {
	return endsLeadership(err) || errors.Is(err, ErrOutcomeUnknown)
}

// writeTxn writes the records of calls calls of Write in one transaction
// under the leadership's token, under ctx: for a batch, the context of all
// its calls (batchContext), so that the first of them to end ends the
// transaction, as the end of a caller's context ends its own write. A due
// renewal that has waited for the slot preemptAfter cancels it (see
// renewLoop, lockForRenewal). It ends the leadership on an error that leaves the token
// unable to write.
func (l *Leadership) writeTxn(ctx context.Context, writer GuardedWriter, records []GuardedRecord, calls int) error {
	writeCtx, cancel := context.WithCancelCause(ctx)
	l.mu.Lock()
	l.preempt, l.writeFrom = cancel, monoMillis(l.settings.clock)
	l.mu.Unlock()
	err := writer.WriteGuarded(writeCtx, l.token, records)
	l.mu.Lock()
	l.preempt = nil
	l.mu.Unlock()
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

// checkGuardedRecords is the one check of guarded records, which every
// path that writes them passes before anything is queued or sent: each
// record names a topic, a partition that Kafka can hold (0 to 2^31-1), and
// no state topic ([StateTopic] is one always, and stateTopic reports the
// others, such as the topic of the caller's own leases): a state topic
// holds only registrations, heartbeats and leases, and a guarded record
// there could forge one. It returns the error of the first record that
// fails, which names the record's index, and nil when every record passes.
// Keys, values and headers are the caller's to choose, as Kafka's are: a
// record too large for its topic fails at the broker, which the write
// reports, and nothing of it commits.
func checkGuardedRecords(records []GuardedRecord, stateTopic func(topic string) bool) error {
	for i, record := range records {
		switch {
		case record.Topic == "":
			return fmt.Errorf("record %d has no topic", i)
		case record.Partition < 0 || record.Partition > math.MaxInt32:
			return fmt.Errorf("record %d has the partition %d, outside 0 to 2^31-1", i, record.Partition)
		case record.Topic == StateTopic || stateTopic != nil && stateTopic(record.Topic):
			return fmt.Errorf("record %d is for the state topic %s, which holds only registrations, heartbeats and leases", i, record.Topic)
		}
	}
	return nil
}
