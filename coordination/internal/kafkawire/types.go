package kafkawire

import "strconv"

// This file holds the plain types in which the package speaks Kafka's own
// terms: a partition, a producer pair, a record and its headers. The
// coordination package converts its own types (TopicPartition,
// FencingToken, StateRecord, GuardedRecord, Command) to and from these at
// its thin layer; kafkawire never imports it.

// Partition names one partition of a topic, as Kafka's requests do.
type Partition struct {
	// Topic is the topic name.
	Topic string
	// Partition is the partition number, from 0.
	Partition int32
}

// String writes the topic-partition form that Kafka's tools print, such
// as "__coordination_state-12".
func (p Partition) String() string { return p.Topic + "-" + strconv.Itoa(int(p.Partition)) }

// Producer is the pair that the transaction coordinator mints for a
// transactional id with InitProducerId, and that every request and record
// batch of a transaction carries: the broker refuses a pair that an
// InitProducerId of the same id superseded.
type Producer struct {
	// ID is the producer id, from 0.
	ID int64
	// Epoch is the producer epoch, from 0.
	Epoch int16
}

// String writes the producer_id:producer_epoch form, such as "4242:7".
func (p Producer) String() string {
	return strconv.FormatInt(p.ID, 10) + ":" + strconv.FormatInt(int64(p.Epoch), 10)
}

// Header is one record header.
type Header struct {
	// Key is the header key.
	Key string
	// Value is the header value, nil for none.
	Value []byte
}

// Record is one Kafka record. A write reads Partition, Key, Value and
// Headers; a read sets every field it knows.
type Record struct {
	// Partition is where the record goes, or where it was read.
	Partition Partition
	// Offset is the record's offset in its partition; a write ignores it.
	Offset int64
	// Key is the record key, nil for none. A compacted topic keeps the
	// newest record of each key, compared as bytes.
	Key []byte
	// Value is the record value; a nil value is a tombstone to the log
	// cleaner.
	Value []byte
	// Timestamp is the record's CreateTime, in milliseconds since the Unix
	// epoch; a write ignores it (a transactional batch carries the time of
	// its encoding).
	Timestamp int64
	// Headers are the record's headers, in order.
	Headers []Header
	// Producer is the pair of the record's batch, as the consumer of
	// [Consumer] reads it from the batch header; -1:-1 for a batch of no
	// idempotent producer. The other reads leave it zero.
	Producer Producer
}
