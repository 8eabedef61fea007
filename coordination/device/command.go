package device

import "github.com/krabka-io/krabka-streams-go/coordination"

// Command is one record of a guarded topic as a device, or the dispatcher
// in front of it, reads it: the record, and the fencing token of the
// record batch that carried it. A holder writes such records with
// [coordination.Leadership.Write]; [KafkaCommandReader] reads them back.
//
// Kafka stores the producer id and the producer epoch once per record
// batch, in the batch header, and a transaction's batches carry the pair
// of the transactional producer that wrote them: for a record of
// [coordination.Leadership.Write], the token of the leadership. A device passes Token to
// [Gate.Admit] before it acts, and acts only on a nil answer.
type Command struct {
	// Topic and Partition locate the record; Offset is its offset in the
	// partition.
	Topic     string
	Partition int
	Offset    int64

	// Key is the record key, and nil for none.
	Key []byte

	// Value is the record value.
	Value []byte

	// Headers are the record headers, in order, as the writer gave them
	// ([coordination.GuardedRecord.Headers]); nil for none.
	Headers []coordination.RecordHeader

	// Timestamp is the record's timestamp, in milliseconds since the Unix
	// epoch: over Kafka the CreateTime of the writer's producer, by the
	// writer's clock.
	Timestamp int64

	// Token is the producer id and producer epoch of the record batch. It
	// is [coordination.NoEpoch] for a batch without a producer id (a producer that is
	// neither idempotent nor transactional). A batch of an idempotent
	// producer outside a transaction carries a pair too, and that pair is
	// no leadership's token: [Gate.Admit] refuses it.
	Token coordination.FencingToken
}
