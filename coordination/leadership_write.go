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
// renewer.due, renewer.lockSlot). It ends the leadership on an error that leaves the token
// unable to write.
func (l *Leadership) writeTxn(ctx context.Context, writer GuardedWriter, records []GuardedRecord, calls int) error {
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
