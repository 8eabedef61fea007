package coordination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readLogRetry is the pause before a Fetch of the log walk that failed is
// sent again, to the leader that the fetch loop knows by then.
const readLogRetry = 100 * time.Millisecond

// readLog walks the log of a partition with read_committed Fetch requests,
// from its log start offset to the last stable offset that it had when the
// call began, and returns every committed record on the way: the answer of
// [KafkaTransport.ReadPartition]. The partition's fetch loop learns its
// leader and topic id first (await), and the walk then asks that leader.
// A Fetch that fails is sent again after readLogRetry, until ctx ends.
func (r *kafkaReader) readLog(ctx context.Context, tp TopicPartition) ([]StateRecord, error) {
	p, target, err := r.await(ctx, tp, false)
	if err != nil {
		return nil, err
	}
	// The walk starts at offset 0, and lists the log start offset only when
	// retention or DeleteRecords moved it (OFFSET_OUT_OF_RANGE).
	offset := int64(0)
	var records []StateRecord
	var last error
	for offset < target {
		if last != nil {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("coordination: read %s: %w: the walk of the log reached offset %d of the last stable offset %d (last fetch error: %w)", tp, ctx.Err(), offset, target, last)
			case <-time.After(readLogRetry):
			}
		}
		r.mu.Lock()
		leader, topicID := p.leader, p.topicID
		r.mu.Unlock()
		fetched, next, err := r.fetchOnce(ctx, leader, tp, topicID, offset)
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("coordination: read %s: %w: the walk of the log reached offset %d of the last stable offset %d", tp, ctx.Err(), offset, target)
		case errors.Is(err, kerr.OffsetOutOfRange):
			// Retention or DeleteRecords moved the log start past offset.
			if offset, err = r.listOffset(ctx, tp, listEarliest, isolationReadUncommitted); err != nil {
				last = err
			}
			continue
		case err != nil:
			last = describeKafkaError("read "+tp.String()+": fetch", err)
			continue
		}
		last = nil
		for _, record := range fetched {
			if record.Offset >= offset && record.Offset < target {
				var key []byte
				if len(record.Key) > 0 {
					key = slices.Clone(record.Key)
				}
				records = append(records, StateRecord{Offset: record.Offset, Key: key, Value: slices.Clone(record.Value), Timestamp: record.Timestamp.UnixMilli()})
			}
		}
		if next <= offset {
			last = fmt.Errorf("coordination: read %s: the fetch at offset %d did not move", tp, offset)
			continue
		}
		offset = next
	}
	return records, nil
}

// fetchOnce sends one read_committed Fetch of one partition at offset to
// leader over the walker's client, without a long poll and without a fetch
// session, and returns its committed records and the offset to fetch next.
func (r *kafkaReader) fetchOnce(ctx context.Context, leader int32, tp TopicPartition, topicID [16]byte, offset int64) ([]*kgo.Record, int64, error) {
	req := newFetchRequest(0, 0, -1)
	addFetchPartition(req, tp, topicID, offset)
	resp, err := sendFetch(ctx, r.walker, leader, req)
	if err != nil {
		return nil, offset, err
	}
	rp := findFetchPartitionOf(resp, tp, topicID)
	if rp == nil {
		return nil, offset, fmt.Errorf("the Fetch response omits %s", tp)
	}
	fetched, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset:         offset,
		IsolationLevel: kgo.ReadCommitted(),
		Topic:          tp.Topic,
		Partition:      int32(tp.Partition),
	}, rp, r.decompressor, nil)
	if fetched.Err != nil {
		return nil, offset, fetched.Err
	}
	return fetched.Records, next, nil
}
