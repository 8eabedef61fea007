package coordination

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional write path of KafkaTransport: WriteLease and
// WriteGuarded run one transaction under the token's epoch, as raw
// AddPartitionsToTxn, Produce and EndTxn requests through the one
// transactional client that every role of the transport shares, and
// classify what goes wrong (a fence, the coordinator's abort at the
// transaction timeout, a refused ACL, a lost producer, a transient failure
// that aborts and keeps the token). See KafkaTransport for the rules.

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
// included, and the call returns at most 250 ms (abandonGrace) after ctx
// ends. A transaction still in flight then returns an error that wraps
// [ErrOutcomeUnknown] and the context's error, and goes on in the
// background, holding the token's turn, within the transaction timeout (the
// lease duration): a batch that got no answer goes again until its leader
// answers, so that its partition's next sequence number is known, and the
// transaction is then aborted, unless its commit was on its way. The
// producer stays; only a transaction that cannot be resolved within the
// timeout ends it, and the next write then gets [ErrProducerLost]. A write
// that gave up while it waited for the token's previous transaction wrote
// nothing and leaves the producer alone. Writes under one token run one at
// a time.
func (t *KafkaTransport) WriteLease(ctx context.Context, partition TopicPartition, token FencingToken, key, value []byte) error {
	if err := t.useStateTopic(partition); err != nil {
		return err
	}
	producer, err := t.producer("lease write", token)
	if err != nil {
		return err
	}
	if decoded, err := DecodeKey(key); err == nil && decoded.Role != producer.role {
		return fmt.Errorf("coordination: lease write under %s: the key belongs to role %s, the token to role %s", token, decoded.Role, producer.role)
	}
	record := txnRecord{partition: partition, key: key, value: tombstoneAsNull(value)}
	return t.transact(ctx, producer, fmt.Sprintf("lease write of role %s to %s under %s", producer.role, partition, token), []txnRecord{record})
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
	out := make([]txnRecord, 0, len(records))
	t.mu.Lock()
	for i, r := range records {
		var refuse string
		switch {
		case r.Topic == "":
			refuse = "has no topic"
		case r.Partition < 0 || r.Partition > 1<<31-1:
			refuse = fmt.Sprintf("has the partition %d, outside 0 to 2^31-1", r.Partition)
		case r.Topic == StateTopic || t.stateTopics[r.Topic]:
			refuse = fmt.Sprintf("is for the state topic %s, which holds only registrations and leases", r.Topic)
		}
		if refuse != "" {
			t.mu.Unlock()
			return fmt.Errorf("coordination: guarded write under %s: record %d %s", token, i, refuse)
		}
		out = append(out, txnRecord{partition: TopicPartition{Topic: r.Topic, Partition: r.Partition}, key: r.Key, value: r.Value, headers: r.Headers})
	}
	t.mu.Unlock()
	producer, err := t.producer("guarded write", token)
	if err != nil {
		return err
	}
	if len(out) == 0 {
		return producer.closed()
	}
	return t.transact(ctx, producer, fmt.Sprintf("guarded write of role %s under %s", producer.role, token), out)
}

// producer returns the epoch producer that minted token, or an error that
// wraps ErrFenced for a token this transport did not mint (or minted
// over), and ErrProducerLost on a closed transport.
func (t *KafkaTransport) producer(what string, token FencingToken) (*epochProducer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, fmt.Errorf("coordination: %s under %s: %w: %w", what, token, errTransportClosed, ErrProducerLost)
	}
	producer := t.minted[token]
	if producer == nil {
		return nil, fmt.Errorf("coordination: %s under %s: this transport did not mint the token, and writes only under its own: %w", what, token, ErrFenced)
	}
	return producer, nil
}

// transact writes records in one transaction of producer, and classifies
// what goes wrong. See KafkaTransport for the rules. The transaction runs
// on a goroutine of its own, so that the call returns within its context
// plus abandonGrace whatever the brokers do.
func (t *KafkaTransport) transact(ctx context.Context, producer *epochProducer, op string, records []txnRecord) error {
	if err := producer.closed(); err != nil {
		return wrapf(err, nil, "%s", op)
	}
	select {
	case producer.slot <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("coordination: %s: waited for the transaction in flight of the same epoch, nothing written: %w", op, ctx.Err())
	}
	done := make(chan error, 1)
	go func() { // owned by this call, or by the producer once the call gives up; it ends with the transaction
		defer func() { <-producer.slot }()
		done <- t.transactHeld(ctx, producer, op, records)
	}()
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
	}
	return fmt.Errorf("coordination: %s: the call's context ended (%w) with the transaction in flight, which did not end within %v more: %w, so the records may be in the log; "+
		"the transaction ends in the background, within the transaction timeout: a batch without an answer goes again until its leader answers, then the transaction is aborted "+
		"unless its commit was on its way; the next write under the token waits for it",
		op, ctx.Err(), abandonGrace, ErrOutcomeUnknown)
}

// abandonGrace bounds how long a write waits for its transaction after the
// caller's context ended: a commit in flight often ends within it. Past it,
// the write returns an error that wraps [ErrOutcomeUnknown], and its
// transaction ends in the background (see [KafkaTransport.WriteLease]).
// Every write of the transport therefore returns within its context plus
// this bound.
const abandonGrace = 250 * time.Millisecond

// abortTimeout bounds the EndTxn(abort) after a failed write.
const abortTimeout = 10 * time.Second

// produceTimeout is the time that a Produce request gives the leader to
// gather the acknowledgements of the in-sync replicas (acks=all):
// franz-go's default ProduceRequestTimeout.
const produceTimeout = 10 * time.Second

// maxBatchBytes bounds the records of one batch, about franz-go's default
// ProducerBatchMaxBytes. A broker takes one batch per partition in a
// Produce request of a transactional producer, so a partition with more
// records takes the next batch in the next request.
const maxBatchBytes = 1_000_000

// partitionBatches is the records of one partition in a transaction, cut
// into batches of at most maxBatchBytes.
type partitionBatches struct {
	partition TopicPartition
	batches   [][]txnRecord
	sent      int // batches that the leader appended

	encoded  []byte // the head batch, encoded once and sent again as it is
	sequence int32  // the first sequence number of encoded
	unknown  bool   // the leader may have appended encoded, and never said so
	err      error  // why the head batch failed for good
}

// planBatches groups records by partition, in the order of their first
// record, and checks that each partition exists and that the member may see
// it: such a refusal fails the write before anything is sent.
func (t *KafkaTransport) planBatches(ctx context.Context, records []txnRecord) ([]*partitionBatches, error) {
	var parts []*partitionBatches
	index := make(map[TopicPartition]*partitionBatches)
	sizes := make(map[TopicPartition]int)
	for _, r := range records {
		p := index[r.partition]
		if p == nil {
			if _, err := t.leaders.leader(ctx, r.partition, false); err != nil && !errors.Is(err, kerr.LeaderNotAvailable) {
				return nil, topicError(r.partition.Topic, err)
			}
			p = &partitionBatches{partition: r.partition, batches: [][]txnRecord{nil}}
			index[r.partition] = p
			parts = append(parts, p)
		}
		size := len(r.key) + len(r.value) + 32
		last := len(p.batches) - 1
		if len(p.batches[last]) > 0 && sizes[r.partition]+size > maxBatchBytes {
			p.batches = append(p.batches, nil)
			last++
			sizes[r.partition] = 0
		}
		p.batches[last] = append(p.batches[last], r)
		sizes[r.partition] += size
	}
	return parts, nil
}

// topicError names the topic of a partition that the broker refused, and for
// a refused topic the ACL that the member lacks. It wraps err, and returns
// a refusal of the token or of the transactional id as it is: those are
// about the role, not the topic.
func topicError(topic string, err error) error {
	switch {
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Errorf("the member may not write topic %s (it needs WRITE on Topic:%s): %w", topic, topic, err)
	case kafkaFailureOf(err) == failureFenced, errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return err
	}
	return fmt.Errorf("records for %s: %w", topic, err)
}

// transactHeld runs one transaction: AddPartitionsToTxn of its partitions,
// a Produce to each of their leaders, and EndTxn. The caller holds
// producer.slot.
func (t *KafkaTransport) transactHeld(ctx context.Context, producer *epochProducer, op string, records []txnRecord) error {
	if err := producer.closed(); err != nil {
		return wrapf(err, nil, "%s", op)
	}
	if err := ctx.Err(); err != nil {
		return wrapf(err, nil, "%s", op)
	}
	// Every request before the commit ends with the caller's context, and
	// with the producer.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(producer.ctx, cancel)
	defer stop()

	// A batch that got no answer by the end of the caller's context goes
	// again under bg, so that the partition's next sequence number is
	// known when the transaction is aborted (produce).
	bg, cancelBg := context.WithTimeout(producer.ctx, t.lease.Duration())
	defer cancelBg()

	parts, err := t.planBatches(rctx, records)
	if err != nil {
		return describeKafkaError(op+", nothing written", err)
	}
	if err := t.addPartitions(rctx, producer, parts); err != nil {
		// An AddPartitionsToTxn that got no answer may have opened the
		// transaction; one that the coordinator refused did not.
		var ke *kerr.Error
		return t.failed(producer, op, []error{err}, !errors.As(err, &ke), parts)
	}
	if failures := t.produce(rctx, bg, producer, parts); len(failures) > 0 {
		return t.failed(producer, op, failures, true, parts)
	}

	// The caller's deadline no longer applies: a commit abandoned midway has
	// an outcome that only a new epoch resolves.
	commitCtx, cancelCommit := context.WithTimeout(producer.ctx, t.lease.Duration())
	defer cancelCommit()
	err = t.endTxn(commitCtx, producer, true)
	switch {
	case err == nil:
		return nil
	case kafkaFailureOf(err) == failureFenced:
		return producer.close(t.fenceError(producer, op, err))
	case kafkaFailureOf(err) == failureDenied:
		// The coordinator refused the EndTxn: nothing committed.
		err = producer.close(describeKafkaError(op+", nothing committed", err))
		t.abortOpen(producer)
		return err
	case errors.Is(err, kerr.TransactionAbortable):
		return t.failed(producer, op, []error{err}, true, parts)
	default:
		err = producer.close(fmt.Errorf("coordination: %s: the commit failed and its outcome is unknown, so the records may be in the log; "+
			"the transport ends the producer, because only a new epoch repairs it: %w: %w", op, ErrProducerLost, err))
		t.abortOpen(producer)
		return err
	}
}

// addPartitions adds the partitions of a transaction to it at the
// coordinator, with one AddPartitionsToTxn (version 3, the last client
// version; franz-go sends it to the role's transaction coordinator, and
// finds the coordinator again when it moved). It pauses and sends the
// request again while the coordinator answers CONCURRENT_TRANSACTIONS: the
// markers of the previous transaction are still being written.
func (t *KafkaTransport) addPartitions(ctx context.Context, producer *epochProducer, parts []*partitionBatches) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = producer.role.String()
	req.ProducerID, req.ProducerEpoch = producer.token.ProducerID(), producer.token.ProducerEpoch()
	for _, p := range parts {
		i := slices.IndexFunc(req.Topics, func(topic kmsg.AddPartitionsToTxnRequestTopic) bool { return topic.Topic == p.partition.Topic })
		if i < 0 {
			topic := kmsg.NewAddPartitionsToTxnRequestTopic()
			topic.Topic = p.partition.Topic
			req.Topics = append(req.Topics, topic)
			i = len(req.Topics) - 1
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, int32(p.partition.Partition))
	}
	return withConcurrentTransactions(ctx, func() error {
		kresp, err := t.coords.request(ctx, req.TransactionalID, func() kmsg.Request { return req }, func(kresp kmsg.Response) error {
			for _, topic := range kresp.(*kmsg.AddPartitionsToTxnResponse).Topics {
				for _, p := range topic.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); coordinatorMoved(err) {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
		var refused []error
		answered := 0
		for _, topic := range resp.Topics {
			answered += len(topic.Partitions)
			for _, p := range topic.Partitions {
				err := kerr.ErrorForCode(p.ErrorCode)
				switch {
				case err == nil, errors.Is(err, kerr.OperationNotAttempted):
				case errors.Is(err, kerr.ConcurrentTransactions):
					return err
				default:
					refused = append(refused, topicError(topic.Topic, err))
				}
			}
		}
		if answered < len(parts) {
			// An answer without a partition of the request added nothing
			// that the transaction can count on.
			refused = append(refused, fmt.Errorf("the AddPartitionsToTxn answer names %d of the %d partitions of the transaction: %w", answered, len(parts), kerr.UnknownServerError))
		}
		return errors.Join(refused...)
	})
}

// produce sends the batches of a transaction to the leaders of their
// partitions, one Produce request per leader at a time, until every batch
// is appended, one fails for good, or callCtx ends. It returns the
// failures.
//
// Each batch carries the token's producer id and epoch and the next
// sequence number of its partition, which advances when the leader
// appends it. A batch that the leader refused without appending it (a
// leader that moved, NOT_ENOUGH_REPLICAS) goes again, and so does one
// whose answer was lost, as it is: the leader appends a batch once, and
// answers a repeat of one it appended with its first offset. When callCtx
// ends with a batch whose answer never came, produce sends that batch
// again, under bg (the transaction timeout), until its leader answers, so
// that the partition's next sequence number is known, and then returns a
// failure, so that the transaction is aborted. A batch still unknown when
// bg ends makes failed end the producer: only a new epoch resets the
// partition's sequence.
func (t *KafkaTransport) produce(callCtx, bg context.Context, producer *epochProducer, parts []*partitionBatches) []error {
	backoff := 5 * time.Millisecond
	ctx, draining := callCtx, false
	for {
		if !draining && callCtx.Err() != nil {
			if !anyUnknown(parts) {
				return t.unfinished(parts, callCtx.Err())
			}
			// The caller is gone, and a batch got no answer: send it
			// again under bg until its leader answers, and no other.
			ctx, draining = bg, true
		}
		if draining && (!anyUnknown(parts) || bg.Err() != nil) {
			return t.drained(parts, callCtx.Err())
		}
		pending := make(map[int32][]*partitionBatches)
		var failures []error
		for _, p := range parts {
			switch {
			case p.err != nil:
				failures = append(failures, p.err)
			case draining && !p.unknown:
			case p.sent < len(p.batches):
				leader, err := t.leaders.leader(ctx, p.partition, p.encoded != nil)
				if err != nil && !errors.Is(err, kerr.LeaderNotAvailable) && !leaderLookupTransient(ctx, err) {
					p.err = topicError(p.partition.Topic, err)
					failures = append(failures, p.err)
					continue
				}
				if p.encoded == nil {
					p.sequence = producer.sequences[p.partition]
					p.encoded = encodeTransactionalBatch(producer.token.ProducerID(), producer.token.ProducerEpoch(), p.sequence, nowMillis(), p.batches[p.sent])
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
				return t.drained(parts, callCtx.Err())
			}
			continue // the top of the loop decides: drain or give up
		}
		progressed := false
		if len(pending) == 1 {
			for leader, batch := range pending {
				progressed = t.produceTo(ctx, producer, leader, batch)
			}
		} else {
			var wg sync.WaitGroup
			var mu sync.Mutex
			for leader, batch := range pending {
				wg.Go(func() {
					ok := t.produceTo(ctx, producer, leader, batch)
					mu.Lock()
					progressed = progressed || ok
					mu.Unlock()
				})
			}
			wg.Wait()
		}
		if progressed {
			backoff = 5 * time.Millisecond
			continue
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// unfinished returns the failures of the batches that ctx's end left
// unsent or unanswered.
func (t *KafkaTransport) unfinished(parts []*partitionBatches, err error) []error {
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
func (t *KafkaTransport) drained(parts []*partitionBatches, err error) []error {
	if failures := t.unfinished(parts, err); len(failures) > 0 {
		return failures
	}
	return []error{fmt.Errorf("the caller's context ended with the transaction in flight: %w", err)}
}

// produceTo sends the head batch of each of parts to leader in one Produce
// request, and records each outcome. It reports whether a batch was
// appended.
func (t *KafkaTransport) produceTo(ctx context.Context, producer *epochProducer, leader int32, parts []*partitionBatches) bool {
	txnID := producer.role.String()
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &txnID
	req.Acks = -1
	req.TimeoutMillis = int32(produceTimeout.Milliseconds())
	for _, p := range parts {
		i := slices.IndexFunc(req.Topics, func(topic kmsg.ProduceRequestTopic) bool { return topic.Topic == p.partition.Topic })
		if i < 0 {
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic = p.partition.Topic
			req.Topics = append(req.Topics, topic)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p.partition.Partition)
		rp.Records = p.encoded
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	wasUnknown := make([]bool, len(parts))
	for i, p := range parts {
		wasUnknown[i] = p.unknown
		p.unknown = true // from the write of the request on
	}
	// One attempt, without franz-go's retries: a broker-pinned retriable
	// request retries a dead broker for up to 30 s (RetryTimeout), long
	// after the partition moved to a survivor. The loop of produce loads
	// the leader again and sends the batch to whoever leads by then.
	kresp, err := t.txn.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		// No answer: the leader may have appended each batch, unless the
		// connection could not even be dialled. They go again as they
		// are, unless ctx ended.
		if notDialled(err) {
			for i, p := range parts {
				p.unknown = wasUnknown[i]
			}
		}
		return false
	}
	appended := false
	for _, p := range parts {
		code, found := int16(0), false
		for _, topic := range kresp.(*kmsg.ProduceResponse).Topics {
			if topic.Topic != p.partition.Topic {
				continue
			}
			for _, rp := range topic.Partitions {
				if rp.Partition == int32(p.partition.Partition) {
					code, found = rp.ErrorCode, true
				}
			}
		}
		err := kerr.ErrorForCode(code)
		switch {
		case !found:
			// The answer omits the partition: send the batch again.
		case err == nil, errors.Is(err, kerr.DuplicateSequenceNumber):
			producer.sequences[p.partition] = nextSequence(p.sequence, len(p.batches[p.sent]))
			p.sent++
			p.encoded, p.unknown = nil, false
			appended = true
		case produceNotAppended(err):
			p.unknown = false
			if !kerr.IsRetriable(err) {
				p.err = topicError(p.partition.Topic, err)
			}
		case kerr.IsRetriable(err):
			// REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND: the
			// leader may have appended the batch; it goes again as it is.
		default:
			p.err = topicError(p.partition.Topic, err)
		}
	}
	return appended
}

// notDialled reports a request that failed before it was written: the
// connection to the broker could not be dialled.
func notDialled(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// leaderLookupTransient reports a failure to look up a partition's leader
// that the next round of produce may not see: a Metadata request without an
// answer (a dead or unreachable broker) or with a retriable code, while ctx
// lasts. A topic that does not exist (after leaderCache's own retries), a
// partition outside the topic and a refused ACL fail the batch.
func leaderLookupTransient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, kerr.UnknownTopicOrPartition) {
		return false
	}
	var ke *kerr.Error
	return !errors.As(err, &ke) || ke.Retriable
}

// produceNotAppended reports a broker code with which a leader refuses a
// batch before it appends it, so that the batch's sequence number stays
// unused: a leader that moved or does not know the partition yet, too few
// in-sync replicas, a refused ACL or record, a refused token or sequence.
func produceNotAppended(err error) bool {
	switch {
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID),
		errors.Is(err, kerr.NotEnoughReplicas), errors.Is(err, kerr.FencedLeaderEpoch),
		errors.Is(err, kerr.UnknownLeaderEpoch), errors.Is(err, kerr.CorruptMessage),
		errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.InvalidTimestamp),
		errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.InvalidRequiredAcks),
		errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.ProducerFenced),
		errors.Is(err, kerr.InvalidProducerIDMapping), errors.Is(err, kerr.InvalidTxnState),
		errors.Is(err, kerr.OutOfOrderSequenceNumber), errors.Is(err, kerr.UnknownProducerID),
		errors.Is(err, kerr.TransactionAbortable):
		return true
	}
	return false
}

// endTxn sends EndTxn (version 4: the coordinator keeps the epoch) to
// commit or abort the open transaction of producer, again while the
// coordinator answers CONCURRENT_TRANSACTIONS.
func (t *KafkaTransport) endTxn(ctx context.Context, producer *epochProducer, commit bool) error {
	return withConcurrentTransactions(ctx, func() error {
		_, err := t.coords.request(ctx, producer.role.String(), func() kmsg.Request {
			req := kmsg.NewPtrEndTxnRequest()
			req.TransactionalID = producer.role.String()
			req.ProducerID, req.ProducerEpoch = producer.token.ProducerID(), producer.token.ProducerEpoch()
			req.Commit = commit
			return req
		}, func(resp kmsg.Response) error {
			return kerr.ErrorForCode(resp.(*kmsg.EndTxnResponse).ErrorCode)
		})
		return err
	})
}

// failed handles the errors of a transaction before its commit. A fence
// ends the producer, and so does a refusal of the transactional id. Any
// other error aborts the transaction (when open says that it may be open at
// the coordinator) and keeps the producer, unless the abort fails, or the
// errors leave the producer unable to go on under the token: a sequence
// number that the broker refused (OUT_OF_ORDER_SEQUENCE_NUMBER,
// UNKNOWN_PRODUCER_ID; the Java producer ends its transactional producer
// there too), a batch whose answer never came, so that the partition's
// next sequence number is unknown, or INVALID_TXN_STATE. The caller holds
// producer.slot.
func (t *KafkaTransport) failed(producer *epochProducer, op string, causes []error, open bool, parts []*partitionBatches) error {
	cause := errors.Join(causes...)
	if len(causes) == 1 {
		cause = causes[0]
	}
	switch {
	case kafkaFailureOf(cause) == failureFenced:
		return producer.close(t.fenceError(producer, op, cause))
	case errors.Is(cause, kerr.TransactionalIDAuthorizationFailed), errors.Is(cause, kerr.ClusterAuthorizationFailed):
		// The member may no longer use the role's transactional id: no
		// write under the token can land until an operator grants it.
		err := producer.close(describeKafkaError(op+", nothing committed", cause))
		t.abortOpen(producer)
		return err
	}
	if open {
		// The abort may wait for a coordinator that moves (9 s after a
		// kill -9 with Kafka's defaults): it is bounded by the transaction
		// timeout, after which the coordinator aborts by itself.
		ctx, cancel := context.WithTimeout(producer.ctx, t.lease.Duration())
		err := t.endTxn(ctx, producer, false)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, kerr.InvalidTxnState) && !anyAdded(parts):
			// Nothing was open: the AddPartitionsToTxn that got no answer
			// never reached the coordinator.
		case kafkaFailureOf(err) == failureFenced:
			return producer.close(t.fenceError(producer, op, errors.Join(cause, err)))
		default:
			err = producer.close(fmt.Errorf("coordination: %s, nothing committed: %w; the abort failed too, so the transport ends the producer: %w: %w", op, cause, ErrProducerLost, err))
			t.abortOpen(producer)
			return err
		}
	}
	switch {
	case errors.Is(cause, kerr.OutOfOrderSequenceNumber), errors.Is(cause, kerr.UnknownProducerID), errors.Is(cause, kerr.InvalidTxnState):
		return producer.close(fmt.Errorf("coordination: %s, nothing committed (aborted): %w; the broker refused the producer state of the token, "+
			"which only a new epoch resets, so the transport ends the producer: %w", op, cause, ErrProducerLost))
	case anyUnknown(parts):
		return producer.close(fmt.Errorf("coordination: %s, nothing committed (aborted): %w; a batch got no answer, so the next sequence number "+
			"of its partition is unknown, which only a new epoch resets, so the transport ends the producer: %w", op, cause, ErrProducerLost))
	}
	if !open {
		return describeKafkaError(op+", nothing written", cause)
	}
	return describeKafkaError(op+" (aborted)", cause)
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

// anyUnknown reports a batch whose answer never came.
func anyUnknown(parts []*partitionBatches) bool {
	for _, p := range parts {
		if p.unknown {
			return true
		}
	}
	return false
}

// fenceError describes a refusal of the token. The transaction coordinator
// refuses a token for two reasons: another member minted a newer epoch (a
// fence: the error wraps [ErrFenced]), or the coordinator itself aborted a
// transaction of the token that outlived transaction.timeout.ms and bumped
// the epoch so that the stalled producer cannot go on. Nobody else holds
// the role in the second case, so the error says so and wraps
// [ErrProducerLost] instead; the leadership ends either way, because no
// write under the token can land again. It tells the two apart with one
// DescribeTransactions request (bounded by fenceDescribeTimeout): the
// coordinator's pair is the token's producer id at the next epoch, the
// transaction is aborting or aborted, and it started at least a
// transaction timeout ago. A challenger's InitProducerId leaves an Empty
// transaction instead, at the next epoch or the one after. The caller
// holds producer.slot.
func (t *KafkaTransport) fenceError(producer *epochProducer, op string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), fenceDescribeTimeout)
	defer cancel()
	role := producer.role.String()
	txn, derr := t.describeTransaction(ctx, role)
	if derr == nil && txn.Err == nil && abortedAtTimeout(producer.token, txn, time.Now().UnixMilli()) {
		return fmt.Errorf("coordination: %s: the transaction coordinator aborted the transaction of %s at its timeout "+
			"(transaction.timeout.ms %d, which the transport sets to the lease duration) and bumped the epoch to %d:%d; "+
			"no other member minted, but no write under %s can land again: %w: %w",
			op, producer.token, txn.TimeoutMillis, txn.ProducerID, txn.ProducerEpoch, producer.token, ErrProducerLost, err)
	}
	return describeKafkaError(op, err)
}

// fenceDescribeTimeout bounds the DescribeTransactions of fenceError.
const fenceDescribeTimeout = time.Second

// abortedAtTimeout reports whether a described transaction shows the
// coordinator's own abort of token's transaction at its timeout. See
// fenceError.
func abortedAtTimeout(token FencingToken, txn kadm.DescribedTransaction, nowMillis int64) bool {
	if txn.ProducerID != token.ProducerID() || int(txn.ProducerEpoch) != int(token.ProducerEpoch())+1 {
		return false
	}
	if txn.State != "PrepareAbort" && txn.State != "CompleteAbort" {
		return false
	}
	return txn.StartTimestamp > 0 && txn.TimeoutMillis > 0 && nowMillis-txn.StartTimestamp >= int64(txn.TimeoutMillis)
}

// abortOpen ends, as far as it can, a transaction that an ended producer
// may have left open, so that it does not hide the newer records of its
// partitions until the coordinator aborts it at the transaction timeout. It
// sends EndTxn(abort) at the token's own epoch, version 4: an abort can
// mint no epoch, and the coordinator refuses it when the token is stale or
// no transaction is open. The outcome does not matter to the caller. The
// caller holds producer.slot.
func (t *KafkaTransport) abortOpen(producer *epochProducer) {
	ctx, cancel := context.WithTimeout(t.ctx, min(abortTimeout, t.lease.Duration()))
	defer cancel()
	_ = t.endTxn(ctx, producer, false)
}
