package kafkawire

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the record batches of the transactional writes. Every
// transactional id of a wire writes through one shared franz-go client
// with raw Produce requests, so the wire encodes the batches itself, as
// franz-go's producer would: magic 2, uncompressed, the transactional
// attribute, and the producer id, epoch and sequence number of the epoch.

// batchCRC is the table of the CRC-32C that covers a record batch from its
// attributes on.
var batchCRC = crc32.MakeTable(crc32.Castagnoli)

// transactionalAttribute is bit 4 of a record batch's attributes: the batch
// belongs to a transaction of its producer id.
const transactionalAttribute = 0x10

// encodeTransactionalBatch encodes records, in order, as one record batch of
// producer whose first record takes sequence, with timestamps of nowMillis
// (ms since the Unix epoch). It reads the keys, values and headers of the
// records. planBatches bounds the records of a batch (maxBatchBytes,
// maxRecordBytes), so every count and length fits its int32 field.
func encodeTransactionalBatch(producer Producer, sequence int32, nowMillis int64, records []Record) []byte {
	var body []byte
	for i, r := range records {
		record := kmsg.Record{OffsetDelta: int32(i), Key: r.Key, Value: r.Value} //nolint:gosec // at most maxBatchBytes/32 + 1 records (planBatches)
		for _, h := range r.Headers {
			record.Headers = append(record.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		// Length is the varint that prefixes the record: the size of
		// everything after it. Encoded with a length of 0 (one byte), the
		// record is that size plus one.
		record.Length = int32(len(record.AppendTo(nil)) - 1) //nolint:gosec // at most maxRecordBytes plus its varints (planBatches)
		body = record.AppendTo(body)
	}
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           transactionalAttribute,
		LastOffsetDelta:      int32(len(records) - 1), //nolint:gosec // at most maxBatchBytes/32 + 1 records (planBatches)
		FirstTimestamp:       nowMillis,
		MaxTimestamp:         nowMillis,
		ProducerID:           producer.ID,
		ProducerEpoch:        producer.Epoch,
		FirstSequence:        sequence,
		NumRecords:           int32(len(records)), //nolint:gosec // as LastOffsetDelta
		Records:              body,
	}
	raw := batch.AppendTo(nil)
	// The length counts the bytes after the first offset and the length;
	// the CRC covers the bytes after it, from the attributes on.
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12)) //nolint:gosec // at most maxBatchBytes + maxRecordBytes and the headers (planBatches)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], batchCRC))
	return raw
}

// nextSequence is the sequence number after a batch of n records that
// starts at sequence. Sequence numbers wrap from the largest int32 to 0, as
// the broker's do.
func nextSequence(sequence int32, n int) int32 {
	next := int64(sequence) + int64(n)
	if next > math.MaxInt32 {
		next -= math.MaxInt32 + 1
	}
	if next < 0 || next > math.MaxInt32 { // n of a batch is far below 2^31 (planBatches)
		next = 0
	}
	return int32(next)
}

// nowMillis is the timestamp of the records of a batch.
func nowMillis() int64 { return time.Now().UnixMilli() }
