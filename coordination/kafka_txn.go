package coordination

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional write path of KafkaTransport: WriteLease and
// WriteGuarded run one transaction on the client of the token's epoch, and
// classify what goes wrong (a fence, the coordinator's abort at the
// transaction timeout, a refused ACL, a lost producer, a transient failure
// that aborts and keeps the token). See KafkaTransport for the rules.

// WriteLease writes one record to the partition in a transaction of the
// producer that minted token, and returns after the commit. A nil or empty
// value goes out as a null value, which clears the lease and which the log
// cleaner removes.
//
// The token must be the newest epoch that this transport minted for its
// role. An older token, a token of another transport, a token whose client
// the transport closed after a fence, and a producer epoch that moved at the
// commit all give an error that wraps [ErrFenced], and the first three send
// no request. A key that decodes as the key of another role than the
// token's is refused. A write that fails for a transient reason aborts its
// transaction and returns an error that does not wrap ErrFenced.
//
// ctx bounds the write, the wait for a write in flight of the same token
// included, and the call returns at most 250 ms (abandonGrace) after ctx
// ends. A transaction still in flight then is abandoned: the error wraps
// [ErrProducerLost] and says that the outcome is unknown, and the transport
// closes the token's producer, because an EndTxn abandoned midway leaves an
// outcome that only a new epoch resolves. A write that gave up while it
// waited for the token's previous transaction wrote nothing and leaves the
// producer alone. Writes under one token run one at a time.
func (t *KafkaTransport) WriteLease(ctx context.Context, partition TopicPartition, token FencingToken, key, value []byte) error {
	if err := t.useStateTopic(partition); err != nil {
		return err
	}
	producer, err := t.producer("lease write", token)
	if err != nil {
		return err
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Role != producer.role {
		return fmt.Errorf("coordination: lease write under %s: the key belongs to role %s, the token to role %s", token, decoded.Role, producer.role)
	}
	record := &kgo.Record{Topic: partition.Topic, Partition: int32(partition.Partition), Key: key, Value: tombstoneAsNull(value)}
	return t.transact(ctx, producer, fmt.Sprintf("lease write of role %s to %s under %s", producer.role, partition, token), record)
}

// WriteGuarded writes the caller's records in one transaction of the
// producer that minted token, and returns after the commit: a read_committed
// reader sees all of them or none, and they are on the in-sync replicas of
// their partitions (acks=all). Each record goes to the partition it names,
// with its headers.
//
// The token rules and the errors are those of [KafkaTransport.WriteLease]:
// a deposed leader's write fails with an error that wraps [ErrFenced], and
// then none of its records becomes visible. It refuses a record without a
// topic, with a negative partition, or for a topic that this transport uses
// as a state topic (StateTopic, or any topic of its lease writes,
// registrations and reads). An empty list checks the token and writes
// nothing. It runs one at a time with the lease writes of the token.
func (t *KafkaTransport) WriteGuarded(ctx context.Context, token FencingToken, records []GuardedRecord) error {
	out := make([]*kgo.Record, 0, len(records))
	t.mu.Lock()
	for i, r := range records {
		var refuse string
		switch {
		case r.Topic == "":
			refuse = "has no topic"
		case r.Partition < 0:
			refuse = fmt.Sprintf("has the negative partition %d", r.Partition)
		case r.Topic == StateTopic || t.stateTopics[r.Topic]:
			refuse = fmt.Sprintf("is for the state topic %s, which holds only registrations and leases", r.Topic)
		}
		if refuse != "" {
			t.mu.Unlock()
			return fmt.Errorf("coordination: guarded write under %s: record %d %s", token, i, refuse)
		}
		out = append(out, &kgo.Record{Topic: r.Topic, Partition: int32(r.Partition), Key: r.Key, Value: r.Value, Headers: kafkaHeaders(r.Headers)})
	}
	t.mu.Unlock()
	producer, err := t.producer("guarded write", token)
	if err != nil {
		return err
	}
	if len(out) == 0 {
		return producer.closed()
	}
	return t.transact(ctx, producer, fmt.Sprintf("guarded write of role %s under %s", producer.role, token), out...)
}

// producer returns the transactional client that minted token, or an error
// that wraps ErrFenced for a token this transport did not mint (or minted
// over), and ErrProducerLost on a closed transport.
func (t *KafkaTransport) producer(what string, token FencingToken) (*epochProducer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("coordination: %s under %s: %w: %w", what, token, errTransportClosed, ErrProducerLost)
	}
	producer := t.minted[token]
	if producer == nil {
		return nil, fmt.Errorf("coordination: %s under %s: this transport did not mint the token, and writes only under its own: %w", what, token, ErrFenced)
	}
	return producer, nil
}

// transact writes records in one transaction of producer, and classifies
// what goes wrong. See KafkaTransport for the rules.
//
// franz-go recovers a failed producer id by calling InitProducerId again,
// from BeginTransaction, from a produce, or from EndTransaction. That mints
// a new epoch: on Kafka only for the member that holds the newest one (the
// coordinator refuses a stale epoch with PRODUCER_FENCED), on kfake for any
// member. The transport cannot stop franz-go from sending it, so it closes
// the client before one can happen where it can tell (after a fence, after
// an abort that left the producer id failed), and it checks the request
// counter after every step where one can happen: after BeginTransaction,
// before any record went out, so such a write writes nothing; after the
// produce, before the commit, so it aborts; and after the commit.
func (t *KafkaTransport) transact(ctx context.Context, producer *epochProducer, op string, records ...*kgo.Record) error {
	if err := producer.closed(); err != nil {
		return wrapf(err, nil, "%s", op)
	}
	select {
	case producer.slot <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("coordination: %s: waited for the transaction in flight of the same epoch, nothing written: %w", op, ctx.Err())
	}
	done := make(chan error, 1)
	go func() { // owned by this call, or by the producer once the call gives up; it ends with the transaction
		defer func() { <-producer.slot }()
		done <- t.transactHeld(ctx, producer, op, records)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	grace := time.NewTimer(abandonGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
	}
	return producer.close(fmt.Errorf("coordination: %s: the call's context ended (%w) with the transaction in flight, which did not end within %v more; "+
		"its outcome is unknown, so the records may be in the log; the transport ends the epoch's producer, because only a new epoch repairs it: %w",
		op, ctx.Err(), abandonGrace, ErrProducerLost))
}

// abandonGrace bounds how long a write waits for its transaction after the
// caller's context ended: a commit in flight often ends within it. Past it,
// the write returns an error that wraps [ErrProducerLost] (outcome unknown)
// and the transport closes the epoch's producer, whose transaction then
// fails at once. Every write of the transport therefore returns within its
// context plus this bound.
const abandonGrace = 250 * time.Millisecond

// transactHeld runs one transaction. The caller holds producer.slot.
func (t *KafkaTransport) transactHeld(ctx context.Context, producer *epochProducer, op string, records []*kgo.Record) error {
	producer.mu.Lock()
	client := producer.client
	closeErr := producer.closeErr
	producer.mu.Unlock()
	switch {
	case client == nil:
		return fmt.Errorf("coordination: %s: %w", op, closeErr)
	case producer.reinitialised():
		return producer.close(fmt.Errorf("coordination: %s: franz-go re-initialised the producer id since the mint: %w", op, errEpochMoved))
	}
	if err := ctx.Err(); err != nil {
		return wrapf(err, nil, "%s", op)
	}

	if err := client.BeginTransaction(); err != nil {
		// The producer id of a usable client carries no error, so a refusal
		// here means the client cannot go on without a new InitProducerId.
		if kafkaFailureOf(err) == failureFenced {
			return producer.close(t.fenceError(producer, op, err))
		}
		return producer.close(wrapf(err, []error{ErrProducerLost}, "%s: begin transaction, nothing written", op))
	}
	if producer.reinitialised() {
		// Nothing went out under the new epoch; the transaction is empty.
		return producer.close(fmt.Errorf("coordination: %s: franz-go re-initialised the producer id to begin the transaction: %w", op, errEpochMoved))
	}
	results := client.ProduceSync(ctx, records...)
	var failures []error
	for _, result := range results {
		if result.Err != nil {
			failures = append(failures, recordError(result.Record, result.Err))
		}
	}
	if len(failures) > 0 {
		return t.failed(client, producer, op, failures)
	}
	if producer.reinitialised() {
		return t.failed(client, producer, op, []error{fmt.Errorf("franz-go re-initialised the producer id during the produce: %w", errEpochMoved)})
	}

	// The caller's deadline no longer applies: a commit abandoned midway has
	// an outcome that only a new epoch resolves.
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.lease.Duration())
	defer cancel()
	if err := client.EndTransaction(commitCtx, kgo.TryCommit); err != nil {
		switch {
		case kafkaFailureOf(err) == failureFenced:
			return producer.close(t.fenceError(producer, op, err))
		case kafkaFailureOf(err) == failureDenied:
			// The coordinator refused the EndTxn: nothing committed.
			err = producer.close(describeKafkaError(op+", nothing committed", err))
			t.abortOpen(producer)
			return err
		case errors.Is(err, kerr.TransactionAbortable):
			return t.failed(client, producer, op, []error{err})
		default:
			err = producer.close(fmt.Errorf("coordination: %s: the commit failed and its outcome is unknown, so the records may be in the log; "+
				"the transport closes the producer, because only a new epoch repairs it: %w: %w", op, ErrProducerLost, err))
			t.abortOpen(producer)
			return err
		}
	}

	// The commit succeeded: the records are in the log under the token, so
	// this write reports success whatever the checks below find. A pair that
	// moved, or a producer id that cannot be read, closes the producer, and
	// the next write under the token fails.
	if producer.reinitialised() {
		producer.close(fmt.Errorf("coordination: %s: franz-go re-initialised the producer id to commit: %w", op, errEpochMoved))
		return nil
	}
	id, epoch, err := client.ProducerID(commitCtx)
	switch {
	case err != nil:
		producer.close(wrapf(err, []error{ErrProducerLost}, "%s: read the producer id after the commit", op))
	case id != producer.token.ProducerID() || epoch != producer.token.ProducerEpoch():
		producer.close(fmt.Errorf("coordination: %s: producer epoch moved from %s to %d:%d at the commit; "+
			"the transport never adopts a pair it did not mint: %w", op, producer.token, id, epoch, errEpochMoved))
	}
	return nil
}

// failed handles the errors of a transaction before its commit. A fence
// closes the client. Any other error aborts the transaction and keeps the
// client, unless the abort fails, franz-go re-initialised the producer id to
// abort, or the producer id may be left failed: franz-go then aborts without
// an EndTxn, and would recover at the next BeginTransaction with a new
// InitProducerId. The caller holds producer.slot.
func (t *KafkaTransport) failed(client *kgo.Client, producer *epochProducer, op string, causes []error) error {
	cause := errors.Join(causes...)
	if len(causes) == 1 {
		cause = causes[0]
	}
	switch {
	case kafkaFailureOf(cause) == failureFenced:
		return producer.close(t.fenceError(producer, op, cause))
	case errors.Is(cause, kerr.TransactionalIDAuthorizationFailed), errors.Is(cause, kerr.ClusterAuthorizationFailed):
		// The member may no longer use the role's transactional id: no
		// write under the token can land until an operator grants it.
		err := producer.close(describeKafkaError(op+", nothing committed", cause))
		t.abortOpen(producer)
		return err
	}
	endTxns := producer.requests.endTxns.Load()
	ctx, cancel := context.WithTimeout(context.Background(), min(abortTimeout, t.lease.Duration()))
	defer cancel()
	if err := client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		if kafkaFailureOf(err) == failureFenced {
			return producer.close(t.fenceError(producer, op, errors.Join(cause, err)))
		}
		err = producer.close(fmt.Errorf("coordination: %s, nothing committed: %w; the abort failed too, so the transport closes the producer: %w: %w", op, cause, ErrProducerLost, err))
		t.abortOpen(producer)
		return err
	}
	if producer.reinitialised() {
		return producer.close(fmt.Errorf("coordination: %s: %w; franz-go re-initialised the producer id to abort the transaction: %w", op, cause, errEpochMoved))
	}
	if producer.requests.endTxns.Load() == endTxns {
		for _, c := range causes {
			if !unsentRecordError(c) {
				err := producer.close(fmt.Errorf("coordination: %s, nothing committed: %w; franz-go may hold the producer id as failed, "+
					"and would mint a new epoch to recover it, so the transport closes the producer: %w", op, cause, ErrProducerLost))
				t.abortOpen(producer)
				return err
			}
		}
	}
	return describeKafkaError(op+" (aborted)", cause)
}

// fenceError describes a refusal of the token. The transaction coordinator
// refuses a token for two reasons: another member minted a newer epoch (a
// fence: the error wraps [ErrFenced]), or the coordinator itself aborted a
// transaction of the token that outlived transaction.timeout.ms and bumped
// the epoch so that the stalled producer cannot go on. Nobody else holds
// the role in the second case, so the error says so and wraps
// [ErrProducerLost] instead; the leadership ends either way, because no
// write under the token can land again. It tells the two apart with one
// DescribeTransactions request (bounded by fenceDescribeTimeout): the
// coordinator's pair is the token's producer id at the next epoch, the
// transaction is aborting or aborted, and it started at least a
// transaction timeout ago. A challenger's InitProducerId leaves an Empty
// transaction instead, at the next epoch or the one after. The caller
// holds producer.slot.
func (t *KafkaTransport) fenceError(producer *epochProducer, op string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), fenceDescribeTimeout)
	defer cancel()
	role := producer.role.String()
	described, derr := t.admin.DescribeTransactions(ctx, role)
	if txn, ok := described[role]; derr == nil && ok && txn.Err == nil && abortedAtTimeout(producer.token, txn, time.Now().UnixMilli()) {
		return fmt.Errorf("coordination: %s: the transaction coordinator aborted the transaction of %s at its timeout "+
			"(transaction.timeout.ms %d, which the transport sets to the lease duration) and bumped the epoch to %d:%d; "+
			"no other member minted, but no write under %s can land again: %w: %w",
			op, producer.token, txn.TimeoutMillis, txn.ProducerID, txn.ProducerEpoch, producer.token, ErrProducerLost, err)
	}
	return describeKafkaError(op, err)
}

// fenceDescribeTimeout bounds the DescribeTransactions of fenceError.
const fenceDescribeTimeout = time.Second

// abortedAtTimeout reports whether a described transaction shows the
// coordinator's own abort of token's transaction at its timeout. See
// fenceError.
func abortedAtTimeout(token FencingToken, txn kadm.DescribedTransaction, nowMillis int64) bool {
	if txn.ProducerID != token.ProducerID() || int(txn.ProducerEpoch) != int(token.ProducerEpoch())+1 {
		return false
	}
	if txn.State != "PrepareAbort" && txn.State != "CompleteAbort" {
		return false
	}
	return txn.StartTimestamp > 0 && txn.TimeoutMillis > 0 && nowMillis-txn.StartTimestamp >= int64(txn.TimeoutMillis)
}

// abortOpen ends, as far as it can, a transaction that a closed producer may
// have left open, so that it does not hide the newer records of its
// partitions until the coordinator aborts it at the transaction timeout. It
// sends a raw EndTxn(abort) at the token's own epoch, version 4: an abort
// can mint no epoch, and the coordinator refuses it when the token is stale
// or no transaction is open. The outcome does not matter to the caller.
// The caller holds producer.slot.
func (t *KafkaTransport) abortOpen(producer *epochProducer) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = producer.role.String()
	req.ProducerID = producer.token.ProducerID()
	req.ProducerEpoch = producer.token.ProducerEpoch()
	req.Commit = false
	ctx, cancel := context.WithTimeout(context.Background(), min(abortTimeout, t.lease.Duration()))
	defer cancel()
	_, _ = t.reader.client.Request(ctx, req)
}

// abortTimeout bounds the EndTxn(abort) after a failed write.
const abortTimeout = 10 * time.Second

// recordError names the topic of a record that the broker refused, and for
// a refused topic the ACL that the member lacks. It wraps err.
func recordError(record *kgo.Record, err error) error {
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		return fmt.Errorf("the member may not write topic %s (it needs WRITE on Topic:%s): %w", record.Topic, record.Topic, err)
	}
	return fmt.Errorf("record for %s: %w", record.Topic, err)
}

// unsentRecordError reports an error with which franz-go fails a record
// without touching its producer id: the end of the record's context, a
// record timeout, a topic that does not exist or that the member may not
// see, a record too large. Every other broker code on a record may come from
// a failed producer id.
func unsentRecordError(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return true
	}
	switch ke {
	case kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.MessageTooLarge, kerr.RecordListTooLarge,
		kerr.InvalidTopicException, kerr.TopicAuthorizationFailed:
		return true
	}
	return false
}
