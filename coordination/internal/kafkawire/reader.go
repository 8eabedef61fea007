package kafkawire

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/internal/backoff"
)

// This file holds the Reader of a Wire, its state and its timings: one kgo.Client, one fetch loop per leader
// broker, and for every partition that a caller asked about a compacted
// view of its committed records: of those that its callers selected
// (selection.go), the records of some key groups or the whole partition.
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
//     and the high watermark are [Reader.Offsets], and a read
//     returns when the next offset reaches the last stable offset, which a
//     tail of aborted batches or of batches that compaction emptied (the
//     cleaner also removes the markers of old transactions) moves without
//     a record. kgo.KeepControlRecords hands out the markers that are still
//     in the log, and nothing for the rest.
//   - Failed fetches, and the instant of the latest answer. The consumer
//     retries a fetch that failed as a whole, and strips the retriable
//     error of a partition, without a word to PollFetches; the reader wakes
//     its watchers on a failed fetch, and serves [Reader.ReadFrom] and
//     [Reader.ReadGroupsFrom] from its view only while the latest answer
//     of the partition's leader is recent.
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
// The max wait of a long poll is a quarter of the lease slack
// (the lease duration minus the renew interval), at most 5 s: 5 s with the
// default lease. Each loop keeps an incremental fetch session (KIP-227,
// fetchSession), so an idle long poll names no partition and its empty
// answer carries none (21 bytes on Kafka 4.4, against 76 for a full
// answer of one partition). An idle partition then costs about one such
// answer per max wait, and each of its commits one answer with the
// records and the commit marker.
// [Reader.ReadGroupsFrom], the read of a waiting member (and
// [Reader.ReadFrom]), is served from the view without a request while the
// long poll of its partition is current: its latest answer arrived less
// than two max waits ago. Otherwise it lists the last stable offset, as
// ReadLog always does.

//
// The other files of the reader: lookup.go (the leaders of the followed
// partitions), fetch_loop.go (one loop per leader), fetch_request.go (the
// Fetch request), fetch_session.go (KIP-227), view.go (the compacted
// view), selection.go (which records a view keeps), backfill.go (the fill
// of a group that joins late), seen.go (the groups that the log holds),
// wake.go (the wake-ups of waiters, watchers
// and loops), read.go (a read served from the view) and read_log.go (the
// walk of a log).

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
func readerTimings(lease, renewInterval time.Duration) (maxWait, fresh time.Duration) {
	slack := lease - renewInterval
	maxWait = min(max(slack/4, readerMinWait), readerMaxWaitCap)
	return maxWait, min(2*maxWait, slack/2)
}

// Reader follows, for the life of its Wire, every partition that a read
// or a watch asked for, with read_committed long polls, and keeps a
// compacted view of the selected records of each (selection.go). It is
// safe for concurrent use.
type Reader struct {
	client       *kgo.Client // the fetch loops' long polls
	walker       *kgo.Client // ReadLog's walks of a log (read_log.go)
	decompressor kgo.Decompressor
	group        KeyGroup              // the groups of keys that a view keeps; nil: every view keeps everything
	recreated    func(topics []string) // told of the topics that the lookups found created again; nil for none
	linger       time.Duration         // how long a view keeps a group after its last hold (selection.go)
	maxWait      time.Duration         // the long poll of a fetch
	fresh        time.Duration         // the age below which an answer makes a view current

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}  // closed when run and every leader loop returned
	loopWG sync.WaitGroup // the leader loops; run waits for them

	mu     sync.Mutex
	closed bool
	parts  map[Partition]*followedPartition
	loops  map[int32]*leaderLoop // the fetch loop of each leader that has one
	wake   chan struct{}         // one pending value: a partition needs its leader looked up
}

// followedPartition is one partition that the reader follows: where its
// leader is, how far the view reaches, and how its fetches fare. Every
// field is guarded by the reader's mu.
type followedPartition struct {
	tp Partition

	leader   int32 // -1 while unknown
	topicID  [16]byte
	needMeta bool // the leader must be looked up before the next fetch

	// incarnation counts the times the topic's id changed under the
	// reader (the topic was deleted and created again), each of which
	// started the view over from the new log (restartLocked).
	incarnation uint64

	next     int64         // every offset below it is folded into view
	view     View          // the compacted view of the selected records below next
	sel      selection     // which records view keeps (selection.go)
	seen     seenGroups    // the groups of the records below next (seen.go)
	stable   int64         // last stable offset of the latest fetch, -1 before one
	high     int64         // high watermark of the latest fetch, -1 before one
	err      *Error        // the error of the latest fetch or metadata request
	fatal    bool          // err needs an operator: a missing topic, partition or ACL
	advanced chan struct{} // closed and replaced when any of the above changes
	watchers map[chan struct{}]struct{}

	answeredAt time.Time // when the latest answer without an error arrived; zero before one
	failures   int       // fetches and lookups that failed in a row
	retryAt    time.Time // no fetch or lookup of the partition before it
}

// newReader starts the reader over client, which its fetch loops
// long-poll on, and walker, a client with no long poll of its own on which
// ReadLog walks a log (a broker answers the requests of one connection in
// order, so a walk on the loops' connection would wait out their long
// poll). lease and renewInterval set its timings (readerTimings).
func newReader(client, walker *kgo.Client, group KeyGroup, lease, renewInterval time.Duration) *Reader {
	ctx, cancel := context.WithCancel(context.Background())
	maxWait, fresh := readerTimings(lease, renewInterval)
	r := &Reader{
		client:       client,
		walker:       walker,
		decompressor: kgo.DefaultDecompressor(),
		group:        group,
		linger:       lease,
		maxWait:      maxWait,
		fresh:        fresh,
		ctx:          ctx,
		cancel:       cancel,
		done:         make(chan struct{}),
		parts:        make(map[Partition]*followedPartition),
		loops:        make(map[int32]*leaderLoop),
		wake:         make(chan struct{}, 1),
	}
	go r.run()
	return r
}

// follow returns the state of a partition, and starts to fetch it the
// first time.
func (r *Reader) follow(tp Partition) (*followedPartition, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errClosed
	}
	p := r.parts[tp]
	if p == nil {
		p = &followedPartition{
			tp: tp, leader: -1, needMeta: true, stable: -1, high: -1,
			advanced: make(chan struct{}), watchers: make(map[chan struct{}]struct{}),
		}
		r.parts[tp] = p
		r.wakeLocked()
	}
	return p, nil
}

// Offsets returns the last stable offset and the high watermark of a
// followed partition, as its latest fetch returned them; ok is false for a
// partition that no read or watch asked for yet, and before its first
// fetch. It sends no request.
func (r *Reader) Offsets(tp Partition) (stable, high int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.parts[tp]
	if p == nil || p.stable < 0 {
		return -1, -1, false
	}
	return p.stable, p.high, true
}

// Incarnation returns how many times the reader saw the topic of a
// followed partition deleted and created again (its topic id changed, as
// Metadata and Fetch from version 13 on carry it), and 0 for a partition
// that no read or watch asked for. Each change started the view over from
// the new log, so a caller that folds the records of the partition
// compares it before and after a read: a fold of an older incarnation
// starts over from offset 0. It sends no request.
func (r *Reader) Incarnation(tp Partition) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.parts[tp]; p != nil {
		return p.incarnation
	}
	return 0
}

// restartLocked starts the view of p over from offset 0 of a new log: the
// topic was deleted and created again under the reader, so nothing of the
// old view, its offsets or its selection's fills holds for the new log.
// It wakes the waiters and watchers. The caller holds r.mu.
func (p *followedPartition) restartLocked() {
	p.incarnation++
	p.next, p.stable, p.high = 0, -1, -1
	p.answeredAt = time.Time{}
	p.view.Reset()
	p.resetSelectionLocked()
	p.changedLocked()
}

// close ends the goroutines, closes the client, and wakes every waiter and
// watcher, whose next call then fails.
func (r *Reader) close() {
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

// setErrLocked records the error of a failed fetch or metadata request. The
// caller holds r.mu.
func (p *followedPartition) setErrLocked(err *Error, fatal bool) {
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
	p.retryAt = now.Add(backoff.After(100*time.Millisecond, readerMaxBackoff, p.failures))
}
