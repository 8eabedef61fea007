package coordination

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The reader of KafkaTransport: one goroutine, one kgo.Client, and for every
// partition that a caller asked about a compacted view of its committed
// records.
//
// It issues its own read_committed Fetch requests and decodes them with
// kgo.ProcessFetchPartition, rather than consuming through the kgo consumer,
// because it must know exactly how far it has read. The consumer hands out
// records only, and a read_committed partition ends in a commit marker,
// which is no record: a reader that counts records never learns that it
// reached the last stable offset. ProcessFetchPartition returns the next
// offset to fetch, past markers, aborted batches and batches that compaction
// emptied, and the Fetch response carries the last stable offset and the
// high watermark.
//
// The goroutine fetches every followed partition of one leader in one
// request, and the leaders in parallel, and long-polls: the broker holds
// the request until the last stable offset moves or readerMaxWait passes. A
// broker serves the requests of one connection in order, so one request per
// leader is also the only way that a long poll of one partition does not
// delay another.

const (
	// readerMaxWait is the long-poll bound of a Fetch. It is also the
	// longest delay before the reader starts on a partition that it did
	// not follow yet.
	readerMaxWait = 500 * time.Millisecond

	readerMaxBytes          = 50 << 20
	readerPartitionMaxBytes = 1 << 20
)

// ReadPartition returns the committed records of the partition, oldest
// first: the newest record of every key, tombstones included, read with
// read_committed isolation from the start of the partition. It returns once
// the transport's view of the partition reaches the last stable offset that
// the partition had when the call began (one ListOffsets request), so a
// record committed before the call is in the answer. An aborted write and
// an open transaction's records are not.
//
// The answer is the partition as log compaction leaves it: a record that a
// newer record of the same key superseded is left out, and every record
// keeps its offset. [BuildRoleState] folds it to the same state as the whole
// log. The transport follows the partition from the first call on, until
// Close, with one long-polling fetch loop for all partitions.
//
// It returns an error for a topic or a partition that does not exist, for a
// missing READ ACL, and when ctx ends before the view reaches the offset. It
// is safe for concurrent use.
func (t *KafkaTransport) ReadPartition(ctx context.Context, partition TopicPartition) ([]StateRecord, error) {
	if err := t.useStateTopic(partition); err != nil {
		return nil, err
	}
	records, _, err := t.reader.read(ctx, partition, 0)
	return records, err
}

// ReadPartitionFrom returns the committed records of the partition at
// offsets from `from` on, oldest first, and the offset to pass on the next
// call. It waits for the last stable offset as [KafkaTransport.ReadPartition]
// does, and it returns the transport's compacted view, so of the records
// from `from` on only the newest of each key. A fold that keeps the record
// of the highest offset for every key, as [RoleStateBuilder] does, reaches
// the same state as from the whole log.
//
// It serves the records from memory: the fetch loop already holds them, and
// the call costs one ListOffsets request. A `from` past the end of the
// partition, which a truncated log or a view that started again from the log
// start leaves behind, returns the whole view. It returns an error for a
// negative `from`.
func (t *KafkaTransport) ReadPartitionFrom(ctx context.Context, partition TopicPartition, from int64) ([]StateRecord, int64, error) {
	if err := t.useStateTopic(partition); err != nil {
		return nil, from, err
	}
	return t.reader.read(ctx, partition, from)
}

// WatchPartition subscribes to the partition, and follows it from now on.
// The channel receives when the transport's view of the partition moves: a
// committed record arrived, the last stable offset or the high watermark
// moved, or a fetch failed. It holds at most one pending value, so nothing
// that happens between a read and the wait is missed. The fetch loop
// long-polls, so a record wakes the channel within a round trip of its
// commit. stop ends the subscription; it is safe to call more than once.
//
// On a closed transport the channel receives once, and the next read
// reports the error.
func (t *KafkaTransport) WatchPartition(partition TopicPartition) (changed <-chan struct{}, stop func()) {
	if err := t.useStateTopic(partition); err != nil {
		ch := make(chan struct{}, 1)
		ch <- struct{}{} // the next read reports the error
		return ch, func() {}
	}
	return t.reader.watch(partition)
}

// StableOffsets reports the last stable offset and the high watermark of a
// followed partition, as its latest fetch returned them, so at most a long
// poll (half a second) old; ok is false for a partition that no read or
// watch of this transport asked for yet, and before its first fetch. Neither
// value needs a request, and a change of either wakes the watchers.
//
// A high watermark above the last stable offset means that an open
// transaction hides the records from the last stable offset on, of every
// role on the partition, from a read_committed reader. A member about to
// challenge an expired lease can use it to wait rather than act on a view
// that it knows is incomplete: the transaction ends at the latest when the
// coordinator aborts it, a transaction timeout (the lease duration of its
// writer) plus the abort sweep after it began.
func (t *KafkaTransport) StableOffsets(partition TopicPartition) (lastStable, highWatermark int64, ok bool) {
	return t.reader.offsets(partition)
}

// kafkaReader is the reader of one KafkaTransport.
type kafkaReader struct {
	client       *kgo.Client
	decompressor kgo.Decompressor

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns

	mu     sync.Mutex
	closed bool
	parts  map[TopicPartition]*followedPartition
	wake   chan struct{} // one pending value: a partition was added
}

// followedPartition is the compacted view of one partition. Every field
// below mu is guarded by the reader's mu; the fetch loop alone touches the
// fields above it.
type followedPartition struct {
	tp TopicPartition

	leader   int32 // -1 while unknown
	topicID  [16]byte
	needMeta bool

	next     int64          // every offset below it is folded into view
	view     map[string]int // the index in log of the newest record of every key
	log      []viewRecord   // the records of view in offset order, and superseded ones
	dead     int            // superseded records in log
	stable   int64          // last stable offset of the latest fetch, -1 before one
	high     int64          // high watermark of the latest fetch, -1 before one
	err      error          // the error of the latest fetch or metadata request
	fatal    bool           // err needs an operator: a missing topic, partition or ACL
	advanced chan struct{}  // closed and replaced when any of the above changes
	watchers map[chan struct{}]struct{}
}

func newKafkaReader(client *kgo.Client) *kafkaReader {
	ctx, cancel := context.WithCancel(context.Background())
	r := &kafkaReader{
		client:       client,
		decompressor: kgo.DefaultDecompressor(),
		ctx:          ctx,
		cancel:       cancel,
		done:         make(chan struct{}),
		parts:        make(map[TopicPartition]*followedPartition),
		wake:         make(chan struct{}, 1),
	}
	go r.run()
	return r
}

// follow returns the view of a partition, and starts to fetch it the first
// time.
func (r *kafkaReader) follow(tp TopicPartition) (*followedPartition, error) {
	if err := checkTopicPartition(tp); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errTransportClosed
	}
	p := r.parts[tp]
	if p == nil {
		p = &followedPartition{
			tp: tp, leader: -1, needMeta: true,
			view: make(map[string]int), stable: -1, high: -1,
			advanced: make(chan struct{}), watchers: make(map[chan struct{}]struct{}),
		}
		r.parts[tp] = p
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	return p, nil
}

// viewRecord is one record of the view of a partition. Its key is the
// string that also keys view, so the view stores the bytes of a key once. A
// record that a newer record of its key superseded stays in the log, dead,
// until the next compaction of the log.
type viewRecord struct {
	offset    int64
	key       string
	value     []byte
	timestamp int64 // the record's timestamp, in ms since the Unix epoch
	dead      bool
}

// addLocked folds one fetched record into the view: O(1), amortised over
// the compactions of the log. The caller holds r.mu, and adds the records
// in offset order.
func (p *followedPartition) addLocked(offset int64, key string, value []byte, timestamp int64) {
	if i, ok := p.view[key]; ok {
		p.log[i] = viewRecord{offset: p.log[i].offset, dead: true}
		p.dead++
	}
	p.view[key] = len(p.log)
	p.log = append(p.log, viewRecord{offset: offset, key: key, value: value, timestamp: timestamp})
	if p.dead > 1024 && p.dead > len(p.log)/2 {
		live := make([]viewRecord, 0, len(p.log)-p.dead)
		for _, r := range p.log {
			if !r.dead {
				p.view[r.key] = len(live)
				live = append(live, r)
			}
		}
		p.log, p.dead = live, 0
	}
}

// resetLocked empties the view. The caller holds r.mu.
func (p *followedPartition) resetLocked() {
	clear(p.view)
	p.log, p.dead = nil, 0
}

// changedLocked wakes the waiters and the watchers of p. The caller holds
// r.mu.
func (p *followedPartition) changedLocked() {
	close(p.advanced)
	p.advanced = make(chan struct{})
	for ch := range p.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// setErrLocked records the error of a failed fetch or metadata request. The
// caller holds r.mu.
func (p *followedPartition) setErrLocked(err error, fatal bool) {
	if p.err == nil || p.err.Error() != err.Error() || p.fatal != fatal {
		p.err, p.fatal = err, fatal
		p.changedLocked()
	}
}

// read waits until the view of the partition covers the last stable offset
// as of the call, and returns the records of the view at offsets from
// `from` on, oldest first, with the offset to read from next.
func (r *kafkaReader) read(ctx context.Context, tp TopicPartition, from int64) ([]StateRecord, int64, error) {
	if from < 0 {
		return nil, from, fmt.Errorf("coordination: read %s from the negative offset %d", tp, from)
	}
	p, err := r.follow(tp)
	if err != nil {
		return nil, from, err
	}
	target, err := r.listOffset(ctx, tp, -1, 1)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return nil, from, fmt.Errorf("coordination: read %s: the topic or the partition does not exist; "+
			"create the topic with CreateStateTopic, and check it with CheckStateTopic: %w", tp, err)
	case err != nil:
		return nil, from, describeKafkaError("read "+tp.String()+": list the last stable offset", err)
	}
	for {
		r.mu.Lock()
		switch {
		case r.closed:
			r.mu.Unlock()
			return nil, from, errTransportClosed
		case p.next >= target:
			if from > p.next {
				// The log ends before from: it was truncated, or the view
				// started again from the log start. The whole view serves.
				from = 0
			}
			records, next := p.snapshotLocked(from)
			r.mu.Unlock()
			return records, next, nil
		case p.fatal:
			err := p.err
			r.mu.Unlock()
			return nil, from, err
		}
		advanced, reached, last := p.advanced, p.next, p.err
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			err := fmt.Errorf("coordination: read %s: %w: reached offset %d of the last stable offset %d", tp, ctx.Err(), reached, target)
			if last != nil {
				err = fmt.Errorf("%w (last fetch error: %w)", err, last)
			}
			return nil, from, err
		case <-advanced:
		}
	}
}

// snapshotLocked copies the records of the view at offsets from `from` on,
// in offset order. It costs a binary search and the records it copies, so
// an incremental read of a waiting member costs its new records, not the
// partition. The caller holds r.mu.
func (p *followedPartition) snapshotLocked(from int64) ([]StateRecord, int64) {
	i, _ := slices.BinarySearchFunc(p.log, from, func(r viewRecord, offset int64) int { return cmp.Compare(r.offset, offset) })
	records := make([]StateRecord, 0, len(p.log)-i)
	for _, record := range p.log[i:] {
		if !record.dead {
			var key []byte
			if record.key != "" {
				key = []byte(record.key)
			}
			records = append(records, StateRecord{Offset: record.offset, Key: key, Value: slices.Clone(record.value), Timestamp: record.timestamp})
		}
	}
	return records, p.next
}

// watch subscribes to the partition.
func (r *kafkaReader) watch(tp TopicPartition) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p, err := r.follow(tp)
	if err != nil {
		ch <- struct{}{} // the caller's next read reports the error
		return ch, func() {}
	}
	r.mu.Lock()
	p.watchers[ch] = struct{}{}
	r.mu.Unlock()
	return ch, sync.OnceFunc(func() {
		r.mu.Lock()
		delete(p.watchers, ch)
		r.mu.Unlock()
	})
}

// offsets returns the last stable offset and the high watermark of the
// latest fetch of a followed partition.
func (r *kafkaReader) offsets(tp TopicPartition) (stable, high int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[tp]
	if p == nil || p.stable < 0 {
		return -1, -1, false
	}
	return p.stable, p.high, true
}

// close ends the goroutine, closes the client, and wakes every waiter and
// watcher, whose next call then fails.
func (r *kafkaReader) close() {
	r.cancel()
	<-r.done
	r.client.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, p := range r.parts {
		p.changedLocked()
	}
}

// listOffset lists one offset of a partition: timestamp -1 with isolation 1
// is the last stable offset, timestamp -2 the log start offset.
//
// It asks the leader that the fetch loop knows for a followed partition
// directly, and franz-go's sharded ListOffsets otherwise, or when the leader
// refuses. The sharded request maps the partition with a metadata request
// of its own whenever its cached mapping is older than the metadata min age
// (5 s), so through it an idle waiting member paid a Metadata round trip on
// every fifth read, 12 requests a minute and sometimes a round trip on the
// read of a handover.
func (r *kafkaReader) listOffset(ctx context.Context, tp TopicPartition, timestamp int64, isolation int8) (int64, error) {
	r.mu.Lock()
	leader := int32(-1)
	if p := r.parts[tp]; p != nil && !p.needMeta {
		leader = p.leader
	}
	r.mu.Unlock()
	if leader >= 0 {
		if offset, err := r.listOffsetAt(ctx, tp, timestamp, isolation, leader); err == nil || ctx.Err() != nil {
			return offset, err
		}
	}
	return r.listOffsetAt(ctx, tp, timestamp, isolation, -1)
}

// listOffsetAt lists one offset at a broker, or with franz-go's sharded
// request for the broker -1.
func (r *kafkaReader) listOffsetAt(ctx context.Context, tp TopicPartition, timestamp int64, isolation int8, broker int32) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	topic := kmsg.NewListOffsetsRequestTopic()
	topic.Topic = tp.Topic
	partition := kmsg.NewListOffsetsRequestTopicPartition()
	partition.Partition = int32(tp.Partition)
	partition.Timestamp = timestamp
	partition.CurrentLeaderEpoch = -1
	topic.Partitions = append(topic.Partitions, partition)
	req.Topics = append(req.Topics, topic)
	var resp kmsg.Response
	var err error
	if broker >= 0 {
		resp, err = r.client.Broker(int(broker)).RetriableRequest(ctx, req)
	} else {
		resp, err = r.client.Request(ctx, req)
	}
	if err != nil {
		return 0, err
	}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		if t.Topic != tp.Topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition != int32(tp.Partition) {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, err
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("the ListOffsets response omits %s", tp)
}

// run is the fetch loop. It returns when close cancels r.ctx.
func (r *kafkaReader) run() {
	defer close(r.done)
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
		r.mu.Lock()
		parts := make([]*followedPartition, 0, len(r.parts))
		for _, p := range r.parts {
			parts = append(parts, p)
		}
		r.mu.Unlock()
		if len(parts) == 0 {
			select {
			case <-r.ctx.Done():
				return
			case <-r.wake:
				continue
			}
		}
		failed := r.refreshMetadata(parts)
		if r.fetchAll(parts) {
			failed = true
		}
		if r.ctx.Err() != nil {
			return
		}
		if failed {
			backoff = min(max(2*backoff, 100*time.Millisecond), 2*time.Second)
		} else {
			backoff = 0
		}
	}
}

// refreshMetadata looks up the leader and the topic id of every partition
// that needs them. It reports whether one of them failed.
func (r *kafkaReader) refreshMetadata(parts []*followedPartition) (failed bool) {
	var topics []string
	for _, p := range parts {
		if p.needMeta && !slices.Contains(topics, p.tp.Topic) {
			topics = append(topics, p.tp.Topic)
		}
	}
	if len(topics) == 0 {
		return false
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, t)
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	kresp, err := r.client.Request(ctx, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		for _, p := range parts {
			if p.needMeta {
				p.setErrLocked(describeKafkaError("read "+p.tp.String()+": metadata", err), false)
			}
		}
		return true
	}
	resp := kresp.(*kmsg.MetadataResponse)
	for _, p := range parts {
		if !p.needMeta {
			continue
		}
		failed = !p.applyMetadataLocked(resp) || failed
	}
	return failed
}

// applyMetadataLocked takes the leader and topic id of p from a metadata
// response. The caller holds r.mu.
func (p *followedPartition) applyMetadataLocked(resp *kmsg.MetadataResponse) bool {
	op := "read " + p.tp.String()
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != p.tp.Topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			switch {
			case errors.Is(err, kerr.UnknownTopicOrPartition):
				p.setErrLocked(fmt.Errorf("coordination: %s: the topic does not exist; create it with CreateStateTopic: %w", op, err), true)
			case kafkaFailureOf(err) == failureDenied:
				p.setErrLocked(describeKafkaError(op, err), true)
			default:
				p.setErrLocked(describeKafkaError(op+": metadata", err), false)
			}
			return false
		}
		for _, part := range t.Partitions {
			if part.Partition != int32(p.tp.Partition) {
				continue
			}
			if err := kerr.ErrorForCode(part.ErrorCode); err != nil && part.Leader < 0 {
				p.setErrLocked(describeKafkaError(op+": metadata", err), false)
				return false
			}
			if part.Leader < 0 {
				p.setErrLocked(fmt.Errorf("coordination: %s: the partition has no leader", op), false)
				return false
			}
			p.leader, p.topicID, p.needMeta = part.Leader, t.TopicID, false
			return true
		}
		p.setErrLocked(fmt.Errorf("coordination: %s: the topic has %d partitions, so partition %d does not exist; "+
			"check WithPartitions against the topic (CheckStateTopic)", op, len(t.Partitions), p.tp.Partition), true)
		return false
	}
	p.setErrLocked(fmt.Errorf("coordination: %s: the metadata response omits the topic", op), false)
	return false
}

// fetchAll fetches every partition that has a leader, one request per
// leader, the leaders in parallel. It reports whether one of them failed.
func (r *kafkaReader) fetchAll(parts []*followedPartition) bool {
	type request struct {
		parts   []*followedPartition
		offsets []int64
	}
	byLeader := make(map[int32]*request)
	r.mu.Lock()
	for _, p := range parts {
		if p.needMeta || p.leader < 0 {
			continue
		}
		req := byLeader[p.leader]
		if req == nil {
			req = new(request)
			byLeader[p.leader] = req
		}
		req.parts = append(req.parts, p)
		req.offsets = append(req.offsets, p.next)
	}
	r.mu.Unlock()
	if len(byLeader) == 0 {
		return true
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed bool
	)
	for leader, req := range byLeader {
		wg.Go(func() {
			if !r.fetch(leader, req.parts, req.offsets) {
				mu.Lock()
				failed = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

// fetch issues one read_committed Fetch to a leader and folds the answer
// into the views. It reports whether every partition succeeded.
func (r *kafkaReader) fetch(leader int32, parts []*followedPartition, offsets []int64) bool {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.ReplicaState.ID = -1
	req.MaxWaitMillis = int32(readerMaxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = readerMaxBytes
	req.IsolationLevel = 1
	req.SessionID = 0
	req.SessionEpoch = -1
	for i, p := range parts {
		j := slices.IndexFunc(req.Topics, func(t kmsg.FetchRequestTopic) bool { return t.Topic == p.tp.Topic })
		if j < 0 {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = p.tp.Topic, p.topicID
			req.Topics = append(req.Topics, t)
			j = len(req.Topics) - 1
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = int32(p.tp.Partition)
		fp.CurrentLeaderEpoch = -1
		fp.FetchOffset = offsets[i]
		fp.LastFetchedEpoch = -1
		fp.LogStartOffset = -1
		fp.PartitionMaxBytes = readerPartitionMaxBytes
		req.Topics[j].Partitions = append(req.Topics[j].Partitions, fp)
	}

	ctx, cancel := context.WithTimeout(r.ctx, readerMaxWait+15*time.Second)
	defer cancel()
	kresp, err := r.client.Broker(int(leader)).RetriableRequest(ctx, req)
	if err == nil {
		err = kerr.ErrorForCode(kresp.(*kmsg.FetchResponse).ErrorCode)
	}
	if err != nil {
		if r.ctx.Err() != nil {
			return true
		}
		r.mu.Lock()
		for _, p := range parts {
			p.needMeta = true
			p.setErrLocked(describeKafkaError("read "+p.tp.String()+": fetch", err), false)
		}
		r.mu.Unlock()
		return false
	}

	ok := true
	for i, p := range parts {
		rp := findFetchPartition(kresp.(*kmsg.FetchResponse), p)
		if rp == nil {
			continue // the broker may leave a partition out; fetch it again
		}
		fetched, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset:         offsets[i],
			IsolationLevel: kgo.ReadCommitted(),
			Topic:          p.tp.Topic,
			Partition:      int32(p.tp.Partition),
		}, rp, r.decompressor, nil)
		if !r.apply(p, offsets[i], fetched, next) {
			ok = false
		}
	}
	return ok
}

// findFetchPartition finds the answer for p in a Fetch response, by topic
// name or, from Fetch version 13 on, by topic id.
func findFetchPartition(resp *kmsg.FetchResponse, p *followedPartition) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != p.tp.Topic && (t.TopicID == [16]byte{} || t.TopicID != p.topicID) {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == int32(p.tp.Partition) {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}

// apply folds one fetched partition into its view. It reports whether the
// fetch succeeded.
func (r *kafkaReader) apply(p *followedPartition, offset int64, fetched kgo.FetchPartition, next int64) bool {
	if fetched.Err != nil {
		return r.fetchFailed(p, offset, fetched.Err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.next != offset {
		return true // a reset moved the partition while the fetch ran
	}
	changed := p.err != nil
	p.err, p.fatal = nil, false
	for _, record := range fetched.Records {
		if n := len(p.log); n > 0 && record.Offset <= p.log[n-1].offset {
			continue // a fetch from an offset inside a batch repeats its head
		}
		p.addLocked(record.Offset, string(record.Key), slices.Clone(record.Value), record.Timestamp.UnixMilli())
	}
	if next > p.next {
		p.next, changed = next, true
	}
	if fetched.LastStableOffset != p.stable || fetched.HighWatermark != p.high {
		p.stable, p.high, changed = fetched.LastStableOffset, fetched.HighWatermark, true
	}
	if changed {
		p.changedLocked()
	}
	return true
}

// fetchFailed handles the error of one partition in a Fetch response.
func (r *kafkaReader) fetchFailed(p *followedPartition, offset int64, err error) bool {
	op := "read " + p.tp.String()
	if errors.Is(err, kerr.OffsetOutOfRange) {
		// The log start moved past the view (DeleteRecords), or the log was
		// truncated below it: start the view again from the log start.
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		start, lerr := r.listOffset(ctx, p.tp, -2, 0)
		cancel()
		r.mu.Lock()
		defer r.mu.Unlock()
		if lerr != nil {
			p.setErrLocked(describeKafkaError(op+": list the log start offset", lerr), false)
			return false
		}
		if p.next == offset {
			p.next = start
			p.resetLocked()
			p.changedLocked()
		}
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case kafkaFailureOf(err) == failureDenied:
		p.setErrLocked(describeKafkaError(op, err), true)
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		p.needMeta = true
		p.setErrLocked(describeKafkaError(op+": fetch", err), false)
	default:
		p.needMeta = true
		p.setErrLocked(describeKafkaError(op+": fetch", err), false)
	}
	return false
}
