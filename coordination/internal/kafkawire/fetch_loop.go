package kafkawire

import (
	"context"
	"runtime"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the fetch loop of one leader broker: a goroutine that
// long-polls every followed partition that the broker leads in one
// read_committed Fetch, folds each answer into the partitions' views, and
// hands a partition whose fetch failed back to the lookups.

// leaderLoop is the fetch loop of one leader broker. Its goroutine fetches
// the partitions whose leader is the broker, and returns when none is left
// or the reader closes. Its fields are guarded by the reader's mu.
type leaderLoop struct {
	leader int32
	kick   chan struct{}      // one pending value: a partition joined
	stop   context.CancelFunc // abandons the fetch in flight; nil between fetches
	kicked bool               // stop was called for a partition that joined
}

// runLoop is the fetch loop of one leader. It long-polls the partitions
// that the leader leads, each request under its own deadline, and returns
// when the leader leads none of the followed partitions any more, or when
// close cancels r.ctx.
func (r *Reader) runLoop(l *leaderLoop) {
	defer r.loopWG.Done()
	var session fetchSession
	for {
		select {
		case <-l.kick: // a partition that joined before this round is in it
		default:
		}
		r.mu.Lock()
		now := time.Now()
		parts, offsets, ids, retryAt := r.loopPartitionsLocked(l.leader, now)
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

		sessionID, epoch, include := session.plan(parts, offsets, ids)
		resp, err := r.fetch(ctx, l.leader, parts, offsets, ids, include, maxWait, sessionID, epoch)

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
		case sessionRefused(err):
			continue // the next request opens a new session
		case err != nil:
			r.fetchLost(parts, err)
			continue
		}
		incremental := session.answered(resp, epoch, parts, offsets, ids)
		moved := false
		for i, p := range parts {
			rp := findFetchPartition(resp, p.tp, ids[i])
			if rp == nil {
				if incremental {
					r.unchanged(p, offsets[i], ids[i]) // nothing new since the previous answer
				}
				continue // otherwise the broker left it out; fetch it again
			}
			fetched, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:         offsets[i],
				IsolationLevel: kgo.ReadCommitted(),
				Topic:          p.tp.Topic,
				Partition:      p.tp.Partition,
			}, rp, r.decompressor, nil)
			if r.apply(p, offsets[i], ids[i], fetched, next) {
				moved = true
			}
		}
		if moved {
			// A view moved and its waiters and watchers are runnable: a
			// campaign that this answer lets challenge, a read that
			// waited for it. Let them run before this loop builds and
			// sends its next long poll, which the leader holds anyway
			// until something new commits. Otherwise, on a busy machine
			// with no idle processor, the woken goroutine waits behind
			// the loop (the Go scheduler runs a goroutine readied by a
			// channel operation on the same processor, after the
			// current one blocks), and a handover pays that wait
			// between the commit of the resignation and the
			// challenger's InitProducerId.
			runtime.Gosched()
		}
	}
}

// loopPartitionsLocked returns the partitions that the loop of leader
// fetches now, with their offsets and topic ids, and the earliest instant
// at which one of its other partitions may be fetched again after a
// failure (zero for none). The caller holds r.mu.
func (r *Reader) loopPartitionsLocked(leader int32, now time.Time) (parts []*followedPartition, offsets []int64, ids [][16]byte, retryAt time.Time) {
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
		ids = append(ids, p.topicID)
	}
	return parts, offsets, ids, retryAt
}

// fetchLost handles a Fetch that failed as a whole: the leader did not
// answer within the deadline, the connection failed, or the broker refused
// the request. Each partition of it is looked up again after a backoff.
func (r *Reader) fetchLost(parts []*followedPartition, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for _, p := range parts {
		p.needMeta = true
		p.setErrLocked(wrap(PathFetch, "read "+p.tp.String()+": fetch", err), false)
		p.failedLocked(now)
	}
	r.wakeLocked()
}

// unchanged records an incremental answer that left p out: the leader has
// nothing new for it, so its view is as current as the answer.
func (r *Reader) unchanged(p *followedPartition, offset int64, id [16]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.next == offset && p.topicID == id && p.err == nil {
		p.failures, p.retryAt, p.answeredAt = 0, time.Time{}, time.Now()
		r.sweepLocked(p, p.answeredAt)
	}
}

// apply folds one fetched partition, fetched at offset of the topic id,
// into its view: the records that its selection keeps (selection.go). It
// reports whether the view moved, and so woke the partition's waiters and
// watchers.
func (r *Reader) apply(p *followedPartition, offset int64, id [16]byte, fetched kgo.FetchPartition, next int64) bool {
	if fetched.Err != nil {
		r.fetchFailed(p, offset, fetched.Err)
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.next != offset || p.topicID != id {
		return false // a reset moved the partition, or the topic was created again, while the fetch ran
	}
	changed := p.err != nil
	p.err, p.fatal = nil, false
	p.failures, p.retryAt, p.answeredAt = 0, time.Time{}, time.Now()
	for _, record := range fetched.Records {
		if record.Offset < offset {
			continue // a fetch from an offset inside a batch repeats its head
		}
		if last, ok := p.view.Last(); ok && record.Offset <= last {
			continue
		}
		if !r.foldLocked(p, record.Key) {
			continue // no selection of the partition needs it (selection.go)
		}
		p.view.Add(record.Offset, record.Key, slices.Clone(record.Value), record.Timestamp.UnixMilli())
	}
	r.sweepLocked(p, p.answeredAt)
	if next > p.next {
		p.next, changed = next, true
	}
	if fetched.LastStableOffset != p.stable || fetched.HighWatermark != p.high {
		p.stable, p.high, changed = fetched.LastStableOffset, fetched.HighWatermark, true
	}
	if changed {
		p.changedLocked()
	}
	return changed
}

// fetchFailed handles the error of one partition in a Fetch response.
func (r *Reader) fetchFailed(p *followedPartition, offset int64, err error) {
	op := "read " + p.tp.String()
	if logMoved(err) {
		// The log start moved past the view (DeleteRecords), or the log was
		// truncated below it: start the view again from the log start.
		ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
		start, lerr := r.listOffset(ctx, p.tp, listEarliest, isolationReadUncommitted)
		cancel()
		r.mu.Lock()
		defer r.mu.Unlock()
		if lerr != nil {
			p.setErrLocked(wrap(PathFetch, op+": list the log start offset", lerr), false)
			p.failedLocked(time.Now())
			return
		}
		if p.next == offset {
			p.next = start
			p.view.Reset()
			p.resetSelectionLocked()
			p.changedLocked()
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p.failedLocked(time.Now())
	if class := Classify(PathFetch, err); class == NotAuthorized {
		// The partition stays with its loop, and the fetch is tried again
		// after the backoff: an operator may grant the ACL.
		p.setErrLocked(&Error{Op: op, Class: class, Err: err}, true)
		return
	}
	// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_ID, a missing topic, and the
	// rest: look the leader up again.
	p.needMeta = true
	p.setErrLocked(wrap(PathFetch, op+": fetch", err), false)
	r.wakeLocked()
}
