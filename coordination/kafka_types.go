package coordination

import "github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"

// This file holds the conversions between the types of this package and
// the plain Kafka types of internal/kafkawire, for the Kafka transport.

// partitionOf is the kafkawire partition of a partition that
// checkTopicPartition accepted.
func partitionOf(tp TopicPartition) kafkawire.Partition {
	return kafkawire.Partition{Topic: tp.Topic, Partition: int32(tp.Partition)} //nolint:gosec // checkTopicPartition bounds it to 0..MaxInt32
}

// producerOf is the producer pair of a token.
func producerOf(token FencingToken) kafkawire.Producer {
	return kafkawire.Producer{ID: token.ProducerID(), Epoch: token.ProducerEpoch()}
}

// tokenOf is the token of a producer pair, and NoEpoch for a pair that no
// token carries (a negative id or epoch).
func tokenOf(producer kafkawire.Producer) FencingToken {
	token, err := NewFencingToken(producer.ID, producer.Epoch)
	if err != nil {
		return NoEpoch
	}
	return token
}

// stateRecords converts the records of a read.
func stateRecords(records []kafkawire.Record) []StateRecord {
	if records == nil {
		return nil
	}
	out := make([]StateRecord, len(records))
	for i, r := range records {
		out[i] = StateRecord{Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
	}
	return out
}

// headersOf converts the headers of a guarded record.
func headersOf(headers []RecordHeader) []kafkawire.Header {
	if len(headers) == 0 {
		return nil
	}
	out := make([]kafkawire.Header, len(headers))
	for i, h := range headers {
		out[i] = kafkawire.Header{Key: h.Key, Value: h.Value}
	}
	return out
}
