package kafkawire

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the walk of a partition's whole log: read_committed
// Fetch requests from the log start offset to the last stable offset, on a
// client without a long poll.

// readLogRetry is the pause before a Fetch of the log walk that failed is
// sent again, to the leader that the fetch loop knows by then.
const readLogRetry = 100 * time.Millisecond

// ReadLog walks the log of a partition with read_committed Fetch
// requests, from its log start offset to the last stable offset that it
// had when the call began (one ListOffsets request), and returns every
// committed record on the way, oldest first, tombstones and superseded
// records included, each with its offset, key (nil for none), value and
// timestamp. The partition's fetch loop learns its leader and topic id
// first, and the walk then asks that leader; the partition is followed
// from then on. A Fetch that fails is sent again after readLogRetry, until
// ctx ends. It costs one Fetch per megabyte of the partition. Its errors
// are those of [Reader.ReadFrom].
func (r *Reader) ReadLog(ctx context.Context, tp Partition) ([]Record, error) {
	p, target, err := r.await(ctx, tp, false)
	if err != nil {
		return nil, err
	}
	return r.walk(ctx, p, target, nil)
}

// walk fetches the committed records of p's log below target, from its
// log start offset on, and returns those whose key keep reports (every
// record for a nil keep), oldest first. A Fetch that fails is sent again
// after readLogRetry, to the leader that the fetch loop knows by then,
// until ctx ends.
func (r *Reader) walk(ctx context.Context, p *followedPartition, target int64, keep func(key []byte) bool) ([]Record, error) {
	tp := p.tp
	op := "read " + tp.String()
	// The walk starts at offset 0, and lists the log start offset only when
	// retention or DeleteRecords moved it (OFFSET_OUT_OF_RANGE).
	offset := int64(0)
	var records []Record
	var last error
	for offset < target {
		if last != nil {
			select {
			case <-ctx.Done():
				return nil, &Error{Op: op, Class: Canceled, Err: fmt.Errorf("%w: the walk of the log reached offset %d of %d (last fetch error: %w)",
					ctx.Err(), offset, target, last)}
			case <-time.After(readLogRetry):
			}
		}
		r.mu.Lock()
		leader, topicID := p.leader, p.topicID
		r.mu.Unlock()
		fetched, next, err := r.fetchOnce(ctx, leader, tp, topicID, offset)
		switch {
		case ctx.Err() != nil:
			return nil, &Error{Op: op, Class: Canceled, Err: fmt.Errorf("%w: the walk of the log reached offset %d of %d",
				ctx.Err(), offset, target)}
		case err != nil && logMoved(err):
			// Retention or DeleteRecords moved the log start past offset.
			if offset, err = r.listOffset(ctx, tp, listEarliest, isolationReadUncommitted); err != nil {
				last = err
			}
			continue
		case err != nil:
			last = wrap(PathFetch, op+": fetch", err)
			continue
		}
		last = nil
		for _, record := range fetched {
			if record.Offset < offset || record.Offset >= target || (keep != nil && !keep(record.Key)) {
				continue
			}
			var key []byte
			if len(record.Key) > 0 {
				key = slices.Clone(record.Key)
			}
			records = append(records, Record{Partition: tp, Offset: record.Offset, Key: key, Value: slices.Clone(record.Value), Timestamp: record.Timestamp.UnixMilli()})
		}
		if next <= offset {
			last = fmt.Errorf("%s: the fetch at offset %d did not move", op, offset)
			continue
		}
		offset = next
	}
	return records, nil
}

// fetchOnce sends one read_committed Fetch of one partition at offset to
// leader over the walker's client, without a long poll and without a fetch
// session, and returns its committed records and the offset to fetch next.
func (r *Reader) fetchOnce(ctx context.Context, leader int32, tp Partition, topicID [16]byte, offset int64) ([]*kgo.Record, int64, error) {
	req := newFetchRequest(0, 0, -1)
	addFetchPartition(req, tp, topicID, offset)
	resp, err := sendFetch(ctx, r.walker, leader, req)
	if err != nil {
		return nil, offset, err
	}
	rp := findFetchPartition(resp, tp, topicID)
	if rp == nil {
		return nil, offset, fmt.Errorf("the Fetch response omits %s", tp)
	}
	fetched, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset:         offset,
		IsolationLevel: kgo.ReadCommitted(),
		Topic:          tp.Topic,
		Partition:      tp.Partition,
	}, rp, r.decompressor, nil)
	if fetched.Err != nil {
		return nil, offset, fetched.Err
	}
	return fetched.Records, next, nil
}
