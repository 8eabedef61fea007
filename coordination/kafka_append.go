package coordination

import (
	"context"
	"fmt"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// This file holds the registrations of KafkaTransport: Append checks what
// the key means (a lease is never appended; a registration warms the
// route of the role's next mint) and writes one record with the plain
// idempotent producer, outside any transaction (kafkawire's Wire.Append).

// Append appends one record to the partition with the plain idempotent
// producer, outside any transaction, and returns when the leader and its
// in-sync replicas have it (acks=all). The record goes to the partition
// given, and a nil or empty value goes out as a null value, a tombstone that
// the log cleaner removes after delete.retention.ms.
//
// It retries what franz-go retries (a lost connection, a leader that moved,
// NOT_ENOUGH_REPLICAS) until ctx ends, and returns at most 250 ms
// after that, with an error that says whether the record may
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
	if err := t.wire.CheckVersions(ctx, "append to "+partition.String()); err != nil {
		return kafkaError(err) // no registration on a cluster that cannot serve the role's requests
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Kind == KindRegistration {
		// The registration of a candidate: warm the route of its next mint
		// now, so that a challenge pays no lookup. A deregistration forgets
		// the warm-up.
		if IsTombstone(value) {
			t.wire.DropWarm(decoded.Role.String())
		} else {
			t.wire.Prewarm(decoded.Role.String(), partitionOf(partition))
		}
	}
	return kafkaError(t.wire.Append(ctx, kafkawire.Record{Partition: partitionOf(partition), Key: key, Value: tombstoneAsNull(value)}))
}

// tombstoneAsNull sends an empty value as a null value: only a null value is
// a tombstone to the log cleaner.
func tombstoneAsNull(value []byte) []byte {
	if IsTombstone(value) {
		return nil
	}
	return value
}
