package kafkawire

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/backoff"
)

// This file holds the produce loop of a transaction: the records cut into
// batches per partition, each batch sent to its partition's leader under
// the epoch's pair and the partition's next sequence number until the
// leader appends it, and the bookkeeping of what a leader's answer (or its
// silence) says about the batch. The requests are built in
// txn_requests.go.

// produceTimeout is the time that a Produce request gives the leader to
// gather the acknowledgements of the in-sync replicas (acks=all):
// franz-go's default ProduceRequestTimeout.
const produceTimeout = 10 * time.Second

// produceTimeoutMillis is produceTimeout as the request's int32
// TimeoutMillis (a constant: the compiler checks the range).
const produceTimeoutMillis = int32(produceTimeout / time.Millisecond)

// maxBatchBytes bounds the records of one batch, about franz-go's default
// ProducerBatchMaxBytes. A broker takes one batch per partition in a
// Produce request of a transactional producer, so a partition with more
// records takes the next batch in the next request.
const maxBatchBytes = 1_000_000

// maxRecordBytes bounds one record of a transaction (key, value and
// headers): a batch's length and a record's are int32 fields, so a record
// above it would wrap them (Kafka's own message.max.bytes is 1 MiB by
// default). With it, a batch holds at most maxBatchBytes + maxRecordBytes
// bytes and maxBatchBytes/32 + 1 records (planBatches), both far inside
// the int32 range of encodeTransactionalBatch.
const maxRecordBytes = 1 << 30

// partitionBatches is the records of one partition in a transaction, cut
// into batches of at most maxBatchBytes.
type partitionBatches struct {
	partition Partition
	batches   [][]Record
	sent      int // batches that the leader appended

	encoded  []byte // the head batch, encoded once and sent again as it is
	sequence int32  // the first sequence number of encoded
	unknown  bool   // the leader may have appended encoded, and never said so
	lost     bool   // a copy of encoded timed out at a live leader, and no answer since says it was appended
	err      error  // why the head batch failed for good
}

// planBatches groups records by partition, in the order of their first
// record, and checks that each partition exists and that the member may see
// it: such a refusal fails the write before anything is sent.
func (w *Wire) planBatches(ctx context.Context, records []Record) ([]*partitionBatches, error) {
	var parts []*partitionBatches
	index := make(map[Partition]*partitionBatches)
	sizes := make(map[Partition]int)
	for _, r := range records {
		p := index[r.Partition]
		if p == nil {
			if _, err := w.leaders.leader(ctx, r.Partition, false); err != nil && !leaderless(err) {
				return nil, topicError(r.Partition.Topic, err)
			}
			p = &partitionBatches{partition: r.Partition, batches: [][]Record{nil}}
			index[r.Partition] = p
			parts = append(parts, p)
		}
		size := len(r.Key) + len(r.Value) + 32
		for _, h := range r.Headers {
			size += len(h.Key) + len(h.Value)
		}
		if size > maxRecordBytes {
			return nil, &Error{Class: Refused, Detail: fmt.Errorf("a record for %s:%d holds %d bytes of key, value and headers, above the %d that a record batch's int32 lengths carry",
				r.Partition.Topic, r.Partition.Partition, size, maxRecordBytes)}
		}
		last := len(p.batches) - 1
		if len(p.batches[last]) > 0 && sizes[r.Partition]+size > maxBatchBytes {
			p.batches = append(p.batches, nil)
			last++
			sizes[r.Partition] = 0
		}
		p.batches[last] = append(p.batches[last], r)
		sizes[r.Partition] += size
	}
	return parts, nil
}

// topicError names the topic of a partition that the broker refused, and for
// a refused topic the ACL that the member lacks. It wraps err, and returns
// a refusal of the pair or of the transactional id as it is: those are
// about the role, not the topic.
func topicError(topic string, err error) error {
	switch {
	case topicDenied(err):
		return fmt.Errorf("the member may not write topic %s (it needs WRITE on Topic:%s): %w", topic, topic, err)
	case fenced(err), roleDenied(err):
		return err
	}
	return fmt.Errorf("records for %s: %w", topic, err)
}

// produce sends the batches of a transaction to the leaders of their
// partitions, one Produce request per leader at a time, until every batch
// is appended, one fails for good, or callCtx ends. It returns the
// failures.
//
// Each batch carries the epoch's pair and the next sequence number of its
// partition, which advances when the leader appends it. A batch that the
// leader refused without appending it (a leader that moved,
// NOT_ENOUGH_REPLICAS) goes again, and so does one whose answer was lost,
// as it is: the leader appends a batch once, and answers a repeat of one it
// appended with its first offset. When callCtx ends with a batch whose
// answer never came, produce sends that batch again, under bg (the
// transaction timeout), until its leader answers, so that the partition's
// next sequence number is known, and then returns a failure, so that the
// transaction is aborted. A batch still unknown when bg ends makes failed
// end the epoch: only a new epoch resets the partition's sequence.
func (e *Epoch) produce(callCtx, bg context.Context, parts []*partitionBatches) []error {
	pauses := backoff.Doubling{First: 5 * time.Millisecond, Max: 250 * time.Millisecond}
	ctx, draining := callCtx, false
	for {
		if !draining && callCtx.Err() != nil {
			if !anyUnknown(parts) {
				return unfinished(parts, callCtx.Err())
			}
			// The caller is gone, and a batch got no answer: send it
			// again under bg until its leader answers, and no other.
			ctx, draining = bg, true
		}
		if draining && (!anyUnknown(parts) || bg.Err() != nil) {
			return drained(parts, callCtx.Err())
		}
		pending := make(map[int32][]*partitionBatches)
		var failures []error
		for _, p := range parts {
			switch {
			case p.err != nil:
				failures = append(failures, p.err)
			case draining && !p.unknown:
			case p.sent < len(p.batches):
				leader, err := e.wire.leaders.leader(ctx, p.partition, p.encoded != nil)
				if err != nil && !leaderless(err) && !leaderLookupTransient(ctx, err) {
					p.err = topicError(p.partition.Topic, err)
					failures = append(failures, p.err)
					continue
				}
				if p.encoded == nil {
					p.sequence = e.sequences.of(p.partition)
					p.encoded = encodeTransactionalBatch(e.producer, p.sequence, nowMillis(), p.batches[p.sent])
				}
				if err == nil {
					pending[leader] = append(pending[leader], p)
				}
				// Without a leader, or without an answer to the Metadata
				// request (a broker just died), the batch waits for the
				// next round, as it is.
			}
		}
		if len(failures) > 0 {
			return failures
		}
		done := true
		for _, p := range parts {
			done = done && p.sent == len(p.batches)
		}
		if done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			if draining {
				return drained(parts, callCtx.Err())
			}
			continue // the top of the loop decides: drain or give up
		}
		progressed := false
		if len(pending) == 1 {
			for leader, batch := range pending {
				progressed = e.produceTo(ctx, leader, batch)
			}
		} else {
			var wg sync.WaitGroup
			var mu sync.Mutex
			for leader, batch := range pending {
				wg.Go(func() {
					ok := e.produceTo(ctx, leader, batch)
					mu.Lock()
					progressed = progressed || ok
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		if progressed {
			pauses.Reset()
			continue
		}
		timer := time.NewTimer(pauses.Next())
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
	}
}

// unfinished returns the failures of the batches that ctx's end left
// unsent or unanswered.
func unfinished(parts []*partitionBatches, err error) []error {
	var failures []error
	for _, p := range parts {
		if p.sent < len(p.batches) {
			failures = append(failures, fmt.Errorf("records for %s: %w", p.partition, err))
		}
	}
	return failures
}

// drained returns the failures of a transaction whose caller's context
// ended (err): at least one, so that the transaction is aborted even when
// the batches sent again completed it.
func drained(parts []*partitionBatches, err error) []error {
	if failures := unfinished(parts, err); len(failures) > 0 {
		return failures
	}
	return []error{fmt.Errorf("the caller's context ended with the transaction in flight: %w", err)}
}

// produceTo sends the head batch of each of parts to leader in one Produce
// request, and records each outcome. It reports whether a batch was
// appended.
func (e *Epoch) produceTo(ctx context.Context, leader int32, parts []*partitionBatches) bool {
	req := e.produceRequest(parts)
	wasUnknown := make([]bool, len(parts))
	for i, p := range parts {
		wasUnknown[i] = p.unknown
		p.unknown = true // from the write of the request on
	}
	// One attempt, without franz-go's retries: a broker-pinned retriable
	// request retries a dead broker for up to 30 s (RetryTimeout), long
	// after the partition moved to a survivor. The loop of produce loads
	// the leader again and sends the batch to whoever leads by then.
	codes, err := e.wire.sendProduce(ctx, leader, req)
	if err != nil {
		// No answer: the leader may have appended each batch, unless the
		// connection could not even be dialled. They go again as they
		// are, unless ctx ended.
		switch {
		case notDialled(err):
			for i, p := range parts {
				p.unknown = wasUnknown[i]
			}
		case mayApplyLater(err), contextEnded(err):
			// The leader may append this copy later, after a resend.
			for _, p := range parts {
				p.lost = true
			}
		}
		return false
	}
	progressed := false
	for _, p := range parts {
		err, found := codes.of(p.partition)
		switch {
		case !found:
			// The answer omits the partition: send the batch again.
		case appended(err):
			e.sequences.set(p.partition, nextSequence(p.sequence, len(p.batches[p.sent])))
			p.sent++
			p.encoded, p.unknown, p.lost = nil, false, false // a late copy is a duplicate now
			progressed = true
		default:
			// A batch that the leader refused before the append leaves
			// its sequence number unused; any other answer may mean that
			// it is in the log. Retriable goes again as it is.
			p.unknown = !notAppended(err)
			if Classify(PathProduce, err) != Retriable {
				p.err = topicError(p.partition.Topic, err)
			}
		}
	}
	return progressed
}

// anyAdded reports whether a leader appended a batch of the transaction,
// which only a partition that the coordinator added takes.
func anyAdded(parts []*partitionBatches) bool {
	for _, p := range parts {
		if p.sent > 0 || p.unknown {
			return true
		}
	}
	return false
}

// anyLost reports a batch of which a copy got no answer, and that its
// leader never said it appended: the copy may be appended later, under a
// sequence number that the epoch's next batch of the partition reuses.
func anyLost(parts []*partitionBatches) bool {
	for _, p := range parts {
		if p.lost {
			return true
		}
	}
	return false
}

// anyUnknown reports a batch whose answer never came.
func anyUnknown(parts []*partitionBatches) bool {
	for _, p := range parts {
		if p.unknown {
			return true
		}
	}
	return false
}
