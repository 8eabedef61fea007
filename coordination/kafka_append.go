package coordination

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The registrations of KafkaTransport: Append writes one record with the
// plain idempotent producer, outside any transaction.

// Append appends one record to the partition with the plain idempotent
// producer, outside any transaction, and returns when the leader and its
// in-sync replicas have it (acks=all). The record goes to the partition
// given, and a nil or empty value goes out as a null value, a tombstone that
// the log cleaner removes after delete.retention.ms.
//
// It retries what franz-go retries (a lost connection, a leader that moved,
// NOT_ENOUGH_REPLICAS) until ctx ends, and returns at most 250 ms
// (abandonGrace) after that, with an error that says whether the record may
// still be appended; it returns a permanent error for a missing WRITE ACL
// on the topic. It refuses a key that decodes as a lease key, and sends
// nothing: a lease outside a transaction under the role's epoch would let
// an unfenced writer fake one. It is safe for concurrent use.
func (t *KafkaTransport) Append(ctx context.Context, partition TopicPartition, key, value []byte) error {
	if err := t.useStateTopic(partition); err != nil {
		return err
	}
	if t.isClosed() {
		return errTransportClosed
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Kind == KindLease {
		return fmt.Errorf("coordination: append to %s: the lease key of role %s: a lease is written with WriteLease, "+
			"in a transaction under the role's epoch, never appended outside one, where no fence guards it", partition, decoded.Role)
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Kind == KindRegistration {
		// The registration of a candidate: open the client of its next mint
		// now, so that a challenge pays no connection setup. A
		// deregistration closes it.
		if IsTombstone(value) {
			t.dropWarm(decoded.Role)
		} else {
			t.prewarm(decoded.Role)
		}
	}
	record := &kgo.Record{Topic: partition.Topic, Partition: int32(partition.Partition), Key: key, Value: tombstoneAsNull(value)}
	if err := t.produceBounded(ctx, record); err != nil {
		return describeKafkaError("append to "+partition.String(), err)
	}
	return nil
}

// produceBounded produces one record with the plain producer and waits for
// its acknowledgement, for the end of ctx, or for abandonGrace after it,
// whichever comes first. franz-go fails a record whose context ends before
// it was sent, but an idempotent producer cannot take back a record in
// flight, so a call that must return within its context stops waiting for
// it: the error then says that the outcome is unknown. The record's
// callback runs later on franz-go's goroutine, into a buffered channel.
func (t *KafkaTransport) produceBounded(ctx context.Context, record *kgo.Record) error {
	done := make(chan error, 1)
	t.plain.Produce(ctx, record, func(_ *kgo.Record, err error) { done <- err })
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
		return fmt.Errorf("the call's context ended (%w) with the record in flight; its outcome is unknown, and it may still be appended", ctx.Err())
	}
}

// tombstoneAsNull sends an empty value as a null value: only a null value is
// a tombstone to the log cleaner.
func tombstoneAsNull(value []byte) []byte {
	if IsTombstone(value) {
		return nil
	}
	return value
}
