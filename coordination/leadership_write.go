package coordination

// The guarded write of a leadership: Write, and the transaction that
// writes the records under the leadership's token (their one check,
// checkGuardedRecords, is beside GuardedRecord in transport.go). The queue that lets concurrent writes
// share a transaction is group_commit.go.

import (
	"context"
	"errors"
	"fmt"
)

// Write writes the caller's own records, such as commands to devices, in
// one transaction under the epoch of this leadership, and returns after the
// commit. It is the guarded write: the broker refuses it once another member
// minted a newer epoch, so a deposed leader's records never become visible
// to a read_committed reader after its successor's first write.
//
// The transport must implement [ExtendedTransport]; [KafkaTransport] does. Write
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
	if l.extended == nil {
		return fmt.Errorf("coordination: Write: transport %T does not implement ExtendedTransport, whose WriteGuarded writes guarded records", l.transport)
	}
	writer := l.extended
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

// mayHaveCommitted reports an error of [ExtendedTransport.WriteGuarded] after which the
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
func (l *Leadership) writeTxn(ctx context.Context, writer guardedWriter, records []GuardedRecord, calls int) error {
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
