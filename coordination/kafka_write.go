package coordination

import (
	"context"
	"fmt"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// This file holds the transactional writes of KafkaTransport: WriteLease
// and WriteGuarded check the token, the key and the records, and run one
// transaction of the token's epoch (kafkawire's Epoch.Transact). See
// KafkaTransport for the rules.

// WriteLease writes one record to the partition in a transaction of the
// producer that minted token, and returns after the commit. A nil or empty
// value goes out as a null value, which clears the lease and which the log
// cleaner removes.
//
// The token must be the newest epoch that this transport minted for its
// role. An older token, a token of another transport, a token whose
// producer the transport ended after a fence, and a broker's refusal of
// the token all give an error that wraps [ErrFenced], and the first three
// send no request. A key that decodes as the key of another role than the
// token's is refused. A write that fails for a transient reason aborts its
// transaction and returns an error that does not wrap ErrFenced.
//
// ctx bounds the write, the wait for a write in flight of the same token
// included, and the call returns at most 250 ms after ctx ends. A
// transaction still in flight then returns an error that wraps
// [ErrOutcomeUnknown] and the context's error, and ends in the background
// within the transaction timeout (the lease duration), holding the token's
// turn; only a transaction that cannot be resolved by then ends the
// producer, and the next write gets [ErrProducerLost]. A write that gave up
// while it waited for the token's previous transaction wrote nothing. Writes
// under one token run one at a time; the call is safe for concurrent use.
func (t *KafkaTransport) WriteLease(ctx context.Context, partition TopicPartition, token FencingToken, key, value []byte) error {
	if err := t.useStateTopic(partition); err != nil {
		return err
	}
	epoch, err := t.epochOf("lease write", token)
	if err != nil {
		return err
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Role.String() != epoch.TxnID() {
		return fmt.Errorf("coordination: lease write under %s: the key belongs to role %s, the token to role %s", token, decoded.Role, epoch.TxnID())
	}
	record := kafkawire.Record{Partition: partitionOf(partition), Key: key, Value: tombstoneAsNull(value)}
	// Concatenated, not fmt.Sprintf: the first lease of a handover is on
	// its critical path.
	op := "lease write of role " + epoch.TxnID() + " to " + partition.String() + " under " + token.String()
	return kafkaError(epoch.Transact(ctx, op, []kafkawire.Record{record}))
}

// WriteTombstones writes a null value for each key, in the order given, to
// the partition in one transaction of the producer that minted token, and
// returns after the commit, so a read_committed reader sees every tombstone
// of the call or none. [Leadership.Resign] writes the lease tombstone and
// the member's registration tombstone with it (see [TombstoneWriter]).
//
// Every key must decode ([DecodeKey]) as a key of the token's role; a key
// that does not, or an empty list, is refused before any request. The token
// rules, the errors and the bounds are those of [KafkaTransport.WriteLease]:
// a deposed member's call fails with an error that wraps [ErrFenced], and
// then none of its tombstones is visible. It runs one at a time with the
// other writes of the token, and is safe for concurrent use.
func (t *KafkaTransport) WriteTombstones(ctx context.Context, partition TopicPartition, token FencingToken, keys ...[]byte) error {
	if err := t.useStateTopic(partition); err != nil {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("coordination: tombstones under %s: no key", token)
	}
	epoch, err := t.epochOf("tombstones", token)
	if err != nil {
		return err
	}
	records := make([]kafkawire.Record, 0, len(keys))
	for i, key := range keys {
		decoded, err := DecodeKey(key)
		if err != nil {
			return fmt.Errorf("coordination: tombstones under %s: key %d: %w", token, i, err)
		}
		if decoded.Role.String() != epoch.TxnID() {
			return fmt.Errorf("coordination: tombstones under %s: key %d belongs to role %s, the token to role %s", token, i, decoded.Role, epoch.TxnID())
		}
		records = append(records, kafkawire.Record{Partition: partitionOf(partition), Key: key})
	}
	op := "tombstones of role " + epoch.TxnID() + " in " + partition.String() + " under " + token.String() // as WriteLease's
	return kafkaError(epoch.Transact(ctx, op, records))
}

// WriteGuarded writes the caller's records in one transaction of the
// producer that minted token, and returns after the commit: a read_committed
// reader sees all of them or none, and they are on the in-sync replicas of
// their partitions (acks=all). Each record goes to the partition it names,
// with its headers, and the records of one partition keep their order.
//
// The token rules and the errors are those of [KafkaTransport.WriteLease]:
// a deposed leader's write fails with an error that wraps [ErrFenced], and
// then none of its records becomes visible. It refuses a record without a
// topic, with a negative partition, or for a topic that this transport uses
// as a state topic (StateTopic, or any topic of its lease writes,
// registrations and reads). A record for a topic that does not exist, or
// that the member may not write, fails the write only (the error says which
// topic, and for a refused topic which ACL is missing). An empty list
// checks the token and writes nothing. It runs one at a time with the lease
// writes of the token.
func (t *KafkaTransport) WriteGuarded(ctx context.Context, token FencingToken, records []GuardedRecord) error {
	t.mu.Lock()
	err := checkGuardedRecords(records, func(topic string) bool { return t.stateTopics[topic] }) // transport.go
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("coordination: guarded write under %s: %w", token, err)
	}
	out := make([]kafkawire.Record, 0, len(records))
	for _, r := range records {
		out = append(out, kafkawire.Record{Partition: kafkawire.Partition{Topic: r.Topic, Partition: int32(r.Partition)}, //nolint:gosec // checkGuardedRecords bounds it to 0..MaxInt32
			Key: r.Key, Value: r.Value, Headers: headersOf(r.Headers)})
	}
	epoch, err := t.epochOf("guarded write", token)
	if err != nil {
		return err
	}
	if len(out) == 0 {
		return kafkaError(epoch.Ended())
	}
	return kafkaError(epoch.Transact(ctx, "guarded write of role "+epoch.TxnID()+" under "+token.String(), out))
}
