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

// The reader of KafkaTransport: one kgo.Client, one fetch loop per leader
// broker, and for every partition that a caller asked about a compacted
// view of its committed records.
//
// It issues its own read_committed Fetch requests and decodes them with
// kgo.ProcessFetchPartition (the decoder of franz-go's consumer: it skips
// aborted batches, commit and abort markers, and batches that compaction
// emptied, and returns the next offset to fetch), rather than consuming
// through the kgo consumer, because the consumer keeps from its caller
// what the reader is built on (franz-go v1.22, pkg/kgo/source.go):
//
//   - An answer with neither a record nor an error. The consumer drops such
//     a fetch before PollFetches (Fetch.hasErrorsOrRecords), so a long poll
//     that returns on its max wait, or on a last stable offset or high
//     watermark that moved without a committed record (another role's
//     transaction opened, or was aborted), reports nothing; and the
//     consumer has no call that returns the offset a partition fetches
//     next. The reader needs both for every answer: the last stable offset
//     and the high watermark are [KafkaTransport.StableOffsets], and a read
//     returns when the next offset reaches the last stable offset, which a
//     tail of aborted batches or of batches that compaction emptied (the
//     cleaner also removes the markers of old transactions) moves without
//     a record. kgo.KeepControlRecords hands out the markers that are still
//     in the log, and nothing for the rest.
//   - Failed fetches, and the instant of the latest answer. The consumer
//     retries a fetch that failed as a whole, and strips the retriable
//     error of a partition, without a word to PollFetches; the reader wakes
//     its watchers on a failed fetch, and serves
//     [KafkaTransport.ReadPartitionFrom] from its view only while the
//     latest answer of the partition's leader is recent.
//   - A partition that joins. The consumer adds it to the next request of
//     its broker and lets the long poll in flight run (source.addCursor
//     cancels no fetch), so the first answer for a partition that a read
//     starts to follow waited up to FetchMaxWait. The reader abandons the
//     long poll instead.
//
// The rest of what the consumer does, the reader does the same way: one
// Fetch in flight per leader broker for all of its partitions, and a fetch
// session (KIP-227) per broker.
//
// Each leader broker has its own loop, a goroutine that fetches every
// followed partition that the broker leads in one request and long-polls:
// the broker holds the request until the last stable offset of one of them
// moves, or for the loop's max wait. Each request has its own deadline, so
// a broker that stops answering delays the partitions that it leads and no
// other. A broker answers the requests of one connection in order, so one
// request per leader is also the only way that a long poll of one partition
// does not delay another. A partition that starts to be followed, or that
// moves to another leader, joins the request of its leader's loop at once:
// the loop abandons the long poll in flight (franz-go then closes its fetch
// connection) and sends a new request that includes it.
//
// The max wait of a long poll is a quarter of the transport's lease slack
// (the lease duration minus the renew interval), at most 5 s: 5 s with the
// default lease. Each loop keeps an incremental fetch session (KIP-227,
// fetchSession), so an idle long poll names no partition and its empty
// answer carries none (21 bytes on Kafka 4.4, against 76 for a full
// answer of one partition). An idle partition then costs about one such
// answer per max wait, and each of its commits one answer with the
// records and the commit marker.
// [KafkaTransport.ReadPartitionFrom], the read of a waiting member, is
// served from the view without a request while the long poll of its
// partition is current: its latest answer arrived less than two max waits
// ago. Otherwise it lists the last stable offset, as ReadPartition always
// does.

const (
	// readerMaxWaitCap bounds the long poll of a fetch loop. franz-go's own
	// consumer waits 5 s by default.
	readerMaxWaitCap = 5 * time.Second

	// readerMinWait is the floor of the long poll, for very short leases.
	readerMinWait = 10 * time.Millisecond

	// readerFetchGrace is how much longer than its max wait a fetch may take
	// before the loop gives it up: the broker is silent, or the network
	// dropped the connection without a reset. The loop then looks the
	// leader up again, and fetches again after a backoff.
	// 1.5 s: a live leader answers within its max wait and a few
	// milliseconds, and a stopped (SIGSTOP) or cut-off leader held the
	// fetch of a waiting member for a whole 3 s more when it was 3 s.
	readerFetchGrace = 1500 * time.Millisecond

	// readerMetadataTimeout bounds one Metadata request of the reader.
	// franz-go sends the next one to another broker, so one silent broker
	// delays the lookup by this much at most.
	readerMetadataTimeout = 1500 * time.Millisecond

	// readerMaxBackoff bounds the pause before a partition whose fetch or
	// lookup failed is tried again; the pause doubles from 100 ms on each
	// failure in a row. At 2 s, a reader that had failed against a dead
	// leader for a few seconds learned of the new leader up to 2 s after
	// the controller named it.
	readerMaxBackoff = 500 * time.Millisecond

	readerMaxBytes          = 50 << 20
	readerPartitionMaxBytes = 1 << 20
)

// readerTimings returns the long-poll bound of the fetch loops, and the age
// below which the latest answer of a partition makes its view current for
// a waiting member's read: a quarter of the lease slack (the lease duration
// minus the renew interval), between readerMinWait and readerMaxWaitCap,
// and two long polls, at most half the slack. A view that is current is at
// most the freshness bound old, so a waiting member that reads it still
// sees a holder that renews on time as alive: the lease outlives a renewal
// by the slack.
func readerTimings(lease LeaseConfig) (maxWait, fresh time.Duration) {
	slack := lease.Duration() - lease.RenewInterval()
	maxWait = min(max(slack/4, readerMinWait), readerMaxWaitCap)
	return maxWait, min(2*maxWait, slack/2)
}

// ReadPartition returns every committed record of the partition, oldest
// first, tombstones included: it walks the log with read_committed
// isolation from the log start offset to the last stable offset that the
// partition had when the call began (one ListOffsets request), so a record
// committed before the call is in the answer, and an aborted write and an
// open transaction's records are not. Every record that the log still
// holds is in the answer, a record that a newer record of its key
// superseded too, until log compaction removes it; every record keeps its
// offset. It costs one Fetch per megabyte of the partition.
//
// The transport also follows the partition from the first call on, until
// Close, with one long-polling fetch loop per leader broker, and keeps a
// compacted view of it: [KafkaTransport.ReadPartitionFrom] serves that
// view, which folds to the same state, and [DescribeRoleState] and
// [AcquireLeadership] read it instead of the whole log.
//
// It returns an error for a topic or a partition that does not exist, for a
// missing READ ACL, and when ctx ends before the walk reaches the offset. It
// is safe for concurrent use.
func (t *KafkaTransport) ReadPartition(ctx context.Context, partition TopicPartition) ([]StateRecord, error) {
	if err := t.useStateTopic(partition); err != nil {
		return nil, err
	}
	return t.reader.readLog(ctx, partition)
}

// ReadPartitionFrom returns the committed records of the partition at
// offsets from `from` on, oldest first, and the offset to pass on the next
// call. It returns the transport's compacted view, so of the records from
// `from` on only the newest of each key. A fold that keeps the record of
// the highest offset for every key, as [RoleStateBuilder] does, reaches the
// same state as from the whole log.
//
// It is the read of a member that waits for a role, and it costs no request
// while the long poll of the partition is current: the latest answer of its
// leader arrived less than half the lease slack ago (the lease duration of
// the transport minus its renew interval; 10 s with the default lease). The
// view then holds every record committed before that answer, and the call
// waits for the last stable offset that the answer reported. A record
// committed after it is on its way: its leader completes the long poll as
// soon as the commit moves the last stable offset, and the arrival wakes
// [KafkaTransport.WatchPartition]. So the view lags a commit by the transit
// of one Fetch response while the leader answers, and by at most the
// freshness bound when it does not; a holder that renews on time still
// looks alive in it. When the long poll is not current (before the first
// answer, after a failed fetch, or when the leader went silent), the call
// lists the last stable offset as [KafkaTransport.ReadPartition] does (one
// ListOffsets request), and waits for it.
//
// A `from` past the end of the partition, which a truncated log or a view
// that started again from the log start leaves behind, returns the whole
// view. It returns an error for a negative `from`, and the errors of
// ReadPartition. It is safe for concurrent use.
func (t *KafkaTransport) ReadPartitionFrom(ctx context.Context, partition TopicPartition, from int64) ([]StateRecord, int64, error) {
	if err := t.useStateTopic(partition); err != nil {
		return nil, from, err
	}
	return t.reader.read(ctx, partition, from, true)
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
// followed partition, as its latest fetch returned them; ok is false for a
// partition that no read or watch of this transport asked for yet, and
// before its first fetch. Neither value needs a request, and a change of
// either wakes the watchers.
//
// The leader answers a read_committed long poll when the last stable offset
// moves, and otherwise at the end of the poll's max wait (a quarter of the
// lease slack, at most 5 s), so a high watermark that moved alone is at
// most one max wait old. A high watermark above the last stable offset
// means that an open transaction hides the records from the last stable
// offset on, of every role on the partition, from a read_committed reader.
// A member about to challenge an expired lease can use it to wait rather
// than act on a view that it knows is incomplete: the transaction ends at
// the latest when the coordinator aborts it, a transaction timeout (the
// lease duration of its writer) plus the abort sweep after it began.
func (t *KafkaTransport) StableOffsets(partition TopicPartition) (lastStable, highWatermark int64, ok bool) {
	return t.reader.offsets(partition)
}

// kafkaReader is the reader of one KafkaTransport.
type kafkaReader struct {
	client       *kgo.Client // the fetch loops' long polls
	walker       *kgo.Client // ReadPartition's walks of a log (kafka_read_log.go)
	decompressor kgo.Decompressor
	maxWait      time.Duration // the long poll of a fetch
	fresh        time.Duration // the age below which an answer makes a view current

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}  // closed when run and every leader loop returned
	loopWG sync.WaitGroup // the leader loops; run waits for them

	mu     sync.Mutex
	closed bool
	parts  map[TopicPartition]*followedPartition
	loops  map[int32]*leaderLoop // the fetch loop of each leader that has one
	wake   chan struct{}         // one pending value: a partition needs its leader looked up
}

// followedPartition is the compacted view of one partition. Every field is
// guarded by the reader's mu.
type followedPartition struct {
	tp TopicPartition

	leader   int32 // -1 while unknown
	topicID  [16]byte
	needMeta bool // the leader must be looked up before the next fetch

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

	answeredAt time.Time // when the latest answer without an error arrived; zero before one
	failures   int       // fetches and lookups that failed in a row
	retryAt    time.Time // no fetch or lookup of the partition before it
}

// leaderLoop is the fetch loop of one leader broker. Its goroutine fetches
// the partitions whose leader is the broker, and returns when none is left
// or the reader closes. Its fields are guarded by the reader's mu.
type leaderLoop struct {
	leader int32
	kick   chan struct{}      // one pending value: a partition joined
	stop   context.CancelFunc // abandons the fetch in flight; nil between fetches
	kicked bool               // stop was called for a partition that joined
}

// kickLocked makes the loop include a partition that joined it: it
// abandons the long poll in flight, which does not include the partition,
// and wakes a loop that waits for a retry. The caller holds r.mu.
func (l *leaderLoop) kickLocked() {
	if l.stop != nil && !l.kicked {
		l.kicked = true
		l.stop()
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// newKafkaReader starts the reader over client, which its fetch loops
// long-poll on, and walker, a client with no long poll of its own on which
// ReadPartition walks a log (a broker answers the requests of one
// connection in order, so a walk on the loops' connection would wait out
// their long poll).
func newKafkaReader(client, walker *kgo.Client, lease LeaseConfig) *kafkaReader {
	ctx, cancel := context.WithCancel(context.Background())
	maxWait, fresh := readerTimings(lease)
	r := &kafkaReader{
		client:       client,
		walker:       walker,
		decompressor: kgo.DefaultDecompressor(),
		maxWait:      maxWait,
		fresh:        fresh,
		ctx:          ctx,
		cancel:       cancel,
		done:         make(chan struct{}),
		parts:        make(map[TopicPartition]*followedPartition),
		loops:        make(map[int32]*leaderLoop),
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
		r.wakeLocked()
	}
	return p, nil
}

// wakeLocked wakes run, to look up the partitions that need a leader. The
// caller holds r.mu.
func (r *kafkaReader) wakeLocked() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
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

// failedLocked counts a failed fetch or lookup of p and sets the instant
// of its retry: 100 ms after the first failure in a row, doubling up to
// readerMaxBackoff. The caller holds r.mu.
func (p *followedPartition) failedLocked(now time.Time) {
	p.failures++
	backoff := readerMaxBackoff
	if p.failures < 6 {
		backoff = min(100*time.Millisecond<<(p.failures-1), readerMaxBackoff)
	}
	p.retryAt = now.Add(backoff)
}

// currentLocked reports whether the view of p is current: the latest
// answer of its leader arrived less than fresh ago, and no fetch or lookup
// failed since. The caller holds r.mu.
func (p *followedPartition) currentLocked(now time.Time, fresh time.Duration) bool {
	return p.err == nil && !p.needMeta && !p.answeredAt.IsZero() && now.Sub(p.answeredAt) < fresh
}

// read waits until the view of the partition covers the last stable offset
// and returns the records of the view at offsets from `from` on, oldest
// first, with the offset to read from next. The last stable offset is the
// one of the latest answer when served is set and the view is current, and
// otherwise the one that a ListOffsets request returns.
func (r *kafkaReader) read(ctx context.Context, tp TopicPartition, from int64, served bool) ([]StateRecord, int64, error) {
	if from < 0 {
		return nil, from, fmt.Errorf("coordination: read %s from the negative offset %d", tp, from)
	}
	p, _, err := r.await(ctx, tp, served)
	if err != nil {
		return nil, from, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if from > p.next {
		// The log ends before from: it was truncated, or the view started
		// again from the log start. The whole view serves.
		from = 0
	}
	records, next := p.snapshotLocked(from)
	return records, next, nil
}

// await follows the partition and waits until its view covers the last
// stable offset, and returns the partition and that offset (see read for
// which one).
func (r *kafkaReader) await(ctx context.Context, tp TopicPartition, served bool) (*followedPartition, int64, error) {
	p, err := r.follow(tp)
	if err != nil {
		return nil, 0, err
	}
	target := int64(-1)
	if served {
		r.mu.Lock()
		if p.currentLocked(time.Now(), r.fresh) {
			target = p.stable
		}
		r.mu.Unlock()
	}
	if target < 0 {
		target, err = r.listOffset(ctx, tp, listLatest, isolationReadCommitted)
		switch {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			return nil, 0, fmt.Errorf("coordination: read %s: the topic or the partition does not exist; "+
				"create the topic with CreateStateTopic, and check it with CheckStateTopic: %w", tp, err)
		case err != nil:
			return nil, 0, describeKafkaError("read "+tp.String()+": list the last stable offset", err)
		}
	}
	for {
		r.mu.Lock()
		switch {
		case r.closed:
			r.mu.Unlock()
			return nil, 0, errTransportClosed
		case p.next >= target:
			r.mu.Unlock()
			return p, target, nil
		case p.fatal:
			err := p.err
			r.mu.Unlock()
			return nil, 0, err
		}
		advanced, reached, last := p.advanced, p.next, p.err
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			err := fmt.Errorf("coordination: read %s: %w: reached offset %d of the last stable offset %d", tp, ctx.Err(), reached, target)
			if last != nil {
				err = fmt.Errorf("%w (last fetch error: %w)", err, last)
			}
			return nil, 0, err
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

// close ends the goroutines, closes the client, and wakes every waiter and
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

// listOffset lists one offset of a partition (see listOffsets): the last
// stable offset, or the log start offset.
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
	offsets, err := listOffsets(ctx, r.client, broker, tp.Topic, []int32{int32(tp.Partition)}, timestamp, isolation)
	if err != nil {
		return 0, err
	}
	return offsets[int32(tp.Partition)], nil
}

// run looks up the leader of every partition that needs one, and hands the
// partition to its leader's loop, starting the loop when the leader has
// none. It returns when close cancels r.ctx, after every loop returned.
func (r *kafkaReader) run() {
	defer close(r.done)
	defer r.loopWG.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		now := time.Now()
		var due []*followedPartition
		var next time.Time
		for _, p := range r.parts {
			switch {
			case !p.needMeta:
			case p.retryAt.After(now):
				if next.IsZero() || p.retryAt.Before(next) {
					next = p.retryAt
				}
			default:
				due = append(due, p)
			}
		}
		r.mu.Unlock()
		if len(due) > 0 {
			r.refreshMetadata(due)
			if r.ctx.Err() != nil {
				return
			}
			continue
		}
		var retry <-chan time.Time
		if !next.IsZero() {
			timer.Reset(next.Sub(now)) // since Go 1.23 no stale value survives a Reset
			retry = timer.C
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		case <-retry:
		}
		timer.Stop()
	}
}

// refreshMetadata looks up the leader and the topic id of the partitions,
// in one Metadata request, and hands each partition that has a leader to
// the loop of its leader. A partition whose lookup failed is looked up
// again after a backoff.
func (r *kafkaReader) refreshMetadata(parts []*followedPartition) {
	var topics []string
	for _, p := range parts {
		if !slices.Contains(topics, p.tp.Topic) {
			topics = append(topics, p.tp.Topic)
		}
	}
	ctx, cancel := context.WithTimeout(r.ctx, readerMetadataTimeout)
	defer cancel()
	resp, err := requestMetadata(ctx, r.client, topics...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return
	}
	now := time.Now()
	for _, p := range parts {
		if err != nil {
			p.setErrLocked(describeKafkaError("read "+p.tp.String()+": metadata", err), false)
			p.failedLocked(now)
			continue
		}
		if !p.applyMetadataLocked(resp) {
			p.failedLocked(now)
			continue
		}
		r.assignLocked(p)
	}
}

// assignLocked hands a partition whose leader is known to the loop of the
// leader: it starts the loop, or makes the running loop include the
// partition at once. The caller holds r.mu.
func (r *kafkaReader) assignLocked(p *followedPartition) {
	if l := r.loops[p.leader]; l != nil {
		l.kickLocked()
		return
	}
	l := &leaderLoop{leader: p.leader, kick: make(chan struct{}, 1)}
	r.loops[p.leader] = l
	r.loopWG.Add(1)
	go r.runLoop(l)
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

// runLoop is the fetch loop of one leader. It long-polls the partitions
// that the leader leads, each request under its own deadline, and returns
// when the leader leads none of the followed partitions any more, or when
// close cancels r.ctx.
func (r *kafkaReader) runLoop(l *leaderLoop) {
	defer r.loopWG.Done()
	var session fetchSession
	for {
		select {
		case <-l.kick: // a partition that joined before this round is in it
		default:
		}
		r.mu.Lock()
		now := time.Now()
		parts, offsets, retryAt := r.loopPartitionsLocked(l.leader, now)
		if len(parts) == 0 && retryAt.IsZero() {
			delete(r.loops, l.leader)
			r.mu.Unlock()
			return
		}
		if len(parts) == 0 {
			// Every partition of the leader waits for the retry of a failed
			// fetch.
			r.mu.Unlock()
			timer := time.NewTimer(retryAt.Sub(now))
			select {
			case <-r.ctx.Done():
				timer.Stop()
				return
			case <-l.kick:
			case <-timer.C:
			}
			timer.Stop()
			continue
		}
		maxWait := r.maxWait
		if !retryAt.IsZero() {
			// A partition that waits for its retry joins the next request.
			maxWait = max(min(maxWait, retryAt.Sub(now)), 0)
		}
		ctx, cancel := context.WithTimeout(r.ctx, maxWait+readerFetchGrace)
		l.stop, l.kicked = cancel, false
		r.mu.Unlock()

		sessionID, epoch, include := session.plan(parts, offsets)
		resp, err := r.fetch(ctx, l.leader, parts, offsets, include, maxWait, sessionID, epoch)

		r.mu.Lock()
		kicked := l.kicked
		l.stop = nil
		r.mu.Unlock()
		cancel()
		if err != nil {
			session.reset()
		}
		switch {
		case r.ctx.Err() != nil:
			return
		case err != nil && kicked:
			// Abandoned for a partition that joined: nothing failed.
			continue
		case errors.Is(err, kerr.FetchSessionIDNotFound), errors.Is(err, kerr.InvalidFetchSessionEpoch):
			continue // the next request opens a new session
		case err != nil:
			r.fetchLost(parts, err)
			continue
		}
		incremental := session.answered(resp, epoch, parts, offsets)
		for i, p := range parts {
			rp := findFetchPartition(resp, p)
			if rp == nil {
				if incremental {
					r.unchanged(p, offsets[i]) // nothing new since the previous answer
				}
				continue // otherwise the broker left it out; fetch it again
			}
			fetched, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:         offsets[i],
				IsolationLevel: kgo.ReadCommitted(),
				Topic:          p.tp.Topic,
				Partition:      int32(p.tp.Partition),
			}, rp, r.decompressor, nil)
			r.apply(p, offsets[i], fetched, next)
		}
	}
}

// loopPartitionsLocked returns the partitions that the loop of leader
// fetches now, with their offsets, and the earliest instant at which one
// of its other partitions may be fetched again after a failure (zero for
// none). The caller holds r.mu.
func (r *kafkaReader) loopPartitionsLocked(leader int32, now time.Time) (parts []*followedPartition, offsets []int64, retryAt time.Time) {
	for _, p := range r.parts {
		if p.needMeta || p.leader != leader {
			continue
		}
		if p.retryAt.After(now) {
			if retryAt.IsZero() || p.retryAt.Before(retryAt) {
				retryAt = p.retryAt
			}
			continue
		}
		parts = append(parts, p)
		offsets = append(offsets, p.next)
	}
	return parts, offsets, retryAt
}

// fetch issues one read_committed Fetch to a leader, in the fetch session
// sessionID at epoch, naming the partitions that include marks, and returns
// the response or the error of the request as a whole.
func (r *kafkaReader) fetch(ctx context.Context, leader int32, parts []*followedPartition, offsets []int64, include []bool,
	maxWait time.Duration, sessionID, epoch int32) (*kmsg.FetchResponse, error) {
	req := newFetchRequest(maxWait, sessionID, epoch)
	for i, p := range parts {
		if include[i] {
			addFetchPartition(req, p.tp, p.topicID, offsets[i])
		}
	}
	return sendFetch(ctx, r.client, leader, req)
}

// newFetchRequest is a read_committed Fetch of a consumer (replica -1)
// with the reader's size bounds, a long poll of maxWait, and the fetch
// session sessionID at epoch (0 and -1: none, a full fetch).
func newFetchRequest(maxWait time.Duration, sessionID, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.ReplicaState.ID = -1
	req.MaxWaitMillis = int32(maxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = readerMaxBytes
	req.IsolationLevel = 1
	req.SessionID = sessionID
	req.SessionEpoch = epoch
	return req
}

// addFetchPartition adds one partition of a topic, by name and (from Fetch
// version 13 on) by topic id, at offset to req.
func addFetchPartition(req *kmsg.FetchRequest, tp TopicPartition, topicID [16]byte, offset int64) {
	j := slices.IndexFunc(req.Topics, func(t kmsg.FetchRequestTopic) bool { return t.Topic == tp.Topic })
	if j < 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = tp.Topic, topicID
		req.Topics = append(req.Topics, t)
		j = len(req.Topics) - 1
	}
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = int32(tp.Partition)
	fp.CurrentLeaderEpoch = -1
	fp.FetchOffset = offset
	fp.LastFetchedEpoch = -1
	fp.LogStartOffset = -1
	fp.PartitionMaxBytes = readerPartitionMaxBytes
	req.Topics[j].Partitions = append(req.Topics[j].Partitions, fp)
}

// sendFetch sends req to leader over client in one attempt: a pinned
// retriable request retries a dead broker for up to 30 s (franz-go's
// RetryTimeout); the caller looks the partitions up again instead.
func sendFetch(ctx context.Context, client *kgo.Client, leader int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	kresp, err := client.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp, nil
}

// fetchLost handles a Fetch that failed as a whole: the leader did not
// answer within the deadline, the connection failed, or the broker refused
// the request. Each partition of it is looked up again after a backoff.
func (r *kafkaReader) fetchLost(parts []*followedPartition, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for _, p := range parts {
		p.needMeta = true
		p.setErrLocked(describeKafkaError("read "+p.tp.String()+": fetch", err), false)
		p.failedLocked(now)
	}
	r.wakeLocked()
}

// findFetchPartition finds the answer for p in a Fetch response, by topic
// name or, from Fetch version 13 on, by topic id.
func findFetchPartition(resp *kmsg.FetchResponse, p *followedPartition) *kmsg.FetchResponseTopicPartition {
	return findFetchPartitionOf(resp, p.tp, p.topicID)
}

// findFetchPartitionOf finds the answer for tp, whose topic has topicID,
// in a Fetch response.
func findFetchPartitionOf(resp *kmsg.FetchResponse, tp TopicPartition, topicID [16]byte) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != tp.Topic && (t.TopicID == [16]byte{} || t.TopicID != topicID) {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == int32(tp.Partition) {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}

// unchanged records an incremental answer that left p out: the leader has
// nothing new for it, so its view is as current as the answer.
func (r *kafkaReader) unchanged(p *followedPartition, offset int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.next == offset && p.err == nil {
		p.failures, p.retryAt, p.answeredAt = 0, time.Time{}, time.Now()
	}
}

// apply folds one fetched partition into its view.
func (r *kafkaReader) apply(p *followedPartition, offset int64, fetched kgo.FetchPartition, next int64) {
	if fetched.Err != nil {
		r.fetchFailed(p, offset, fetched.Err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.next != offset {
		return // a reset moved the partition while the fetch ran
	}
	changed := p.err != nil
	p.err, p.fatal = nil, false
	p.failures, p.retryAt, p.answeredAt = 0, time.Time{}, time.Now()
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
}

// fetchFailed handles the error of one partition in a Fetch response.
func (r *kafkaReader) fetchFailed(p *followedPartition, offset int64, err error) {
	op := "read " + p.tp.String()
	if errors.Is(err, kerr.OffsetOutOfRange) {
		// The log start moved past the view (DeleteRecords), or the log was
		// truncated below it: start the view again from the log start.
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		start, lerr := r.listOffset(ctx, p.tp, listEarliest, isolationReadUncommitted)
		cancel()
		r.mu.Lock()
		defer r.mu.Unlock()
		if lerr != nil {
			p.setErrLocked(describeKafkaError(op+": list the log start offset", lerr), false)
			p.failedLocked(time.Now())
			return
		}
		if p.next == offset {
			p.next = start
			p.resetLocked()
			p.changedLocked()
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p.failedLocked(time.Now())
	if kafkaFailureOf(err) == failureDenied {
		// The partition stays with its loop, and the fetch is tried again
		// after the backoff: an operator may grant the ACL.
		p.setErrLocked(describeKafkaError(op, err), true)
		return
	}
	// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID, a missing topic, and the
	// rest: look the leader up again.
	p.needMeta = true
	p.setErrLocked(describeKafkaError(op+": fetch", err), false)
	r.wakeLocked()
}
