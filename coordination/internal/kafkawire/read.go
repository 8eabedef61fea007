package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file holds a read of a followed partition: the wait until its view
// covers the last stable offset (the one of the latest long-poll answer
// while the view is current, and otherwise the one that ListOffsets
// returns), and the copy of the view from an offset on.

// ReadFrom returns the records of the partition's compacted view at
// offsets from `from` (not negative) on, oldest first, only the newest of
// each key, and the offset to pass on the next call. It follows the
// partition from the first call on, and makes its view keep the whole
// partition from then on, for the life of the reader (selection.go): a
// view that kept only some groups until then is filled with one walk of
// the log first (backfill.go).
//
// It costs no request while the long poll of the partition is current:
// its latest answer arrived less than the freshness bound ago (two long
// polls, at most half the lease slack). The call then waits for the last
// stable offset that the answer reported. Otherwise (before the first
// answer, after a failed fetch, or when the leader went silent) it lists
// the last stable offset with one ListOffsets request and waits for it. A
// `from` past the end of the view, which a truncated log or a view that
// started again from the log start leaves behind, returns the whole view.
//
// Its errors are *Error named "read <partition>": Missing for a topic or
// a partition that does not exist, NotAuthorized for a missing READ or
// DESCRIBE ACL, Canceled when ctx ends before the view reaches the offset
// (Err says how far it got, and the last fetch error), Closed on a closed
// reader.
func (r *Reader) ReadFrom(ctx context.Context, tp Partition, from int64) ([]Record, int64, error) {
	p, err := r.follow(tp)
	if err != nil {
		return nil, from, err
	}
	r.mu.Lock()
	s := r.selectAllLocked(p)
	r.mu.Unlock()
	if err := r.fill(ctx, p, s); err != nil {
		return nil, from, err
	}
	return r.served(ctx, p, from, nil)
}

// ReadGroupsFrom is [Reader.ReadFrom] for the records of some key groups
// only (see [KeyGroup]): it returns the records of the view whose key
// belongs to one of groups, at offsets from `from` on, only the newest of
// each key, and the offset to pass on the next call. It holds the groups
// for the call ([Reader.Keep]), so a caller that reads a partition again
// and again holds them across the calls, or each call costs a walk of the
// log: the first read of a group that the view has not kept from its first
// fetch on, or while it keeps the whole partition, walks the log once,
// keeping the group's records, to fill the view (backfill.go). The reads
// of a held group that follow cost what ReadFrom costs. Without a KeyGroup
// it is ReadFrom. Its errors are those of ReadFrom.
func (r *Reader) ReadGroupsFrom(ctx context.Context, tp Partition, groups []string, from int64) ([]Record, int64, error) {
	if r.group == nil {
		return r.ReadFrom(ctx, tp, from)
	}
	p, err := r.follow(tp)
	if err != nil {
		return nil, from, err
	}
	release := r.Keep(tp, groups)
	defer release()
	for _, g := range groups {
		r.mu.Lock()
		s := p.sel.groups[g]
		if all := p.sel.all; all != nil && all.filled {
			s = all
		}
		r.mu.Unlock()
		if s == nil {
			continue // the reader closed: served reports it
		}
		if err := r.fill(ctx, p, s); err != nil {
			return nil, from, err
		}
	}
	return r.served(ctx, p, from, r.inGroups(groups))
}

// served waits until the view of p covers the last stable offset (await),
// and copies the records of the view from `from` on that keep reports
// (every record for nil).
func (r *Reader) served(ctx context.Context, p *followedPartition, from int64, keep func(key []byte) bool) ([]Record, int64, error) {
	if _, _, err := r.await(ctx, p.tp, true); err != nil {
		return nil, from, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if from > p.next {
		// The log ends before from: it was truncated, or the view started
		// again from the log start. The whole view serves.
		from = 0
	}
	return p.view.Records(from, keep), p.next, nil
}

// await follows the partition and waits until its view covers the last
// stable offset, and returns the partition and that offset. The last
// stable offset is the one of the latest answer when served is set and
// the view is current, and otherwise the one that a ListOffsets request
// returns. A topic created again while it waits (restartLocked) makes it
// ask for the new log's last stable offset.
func (r *Reader) await(ctx context.Context, tp Partition, served bool) (*followedPartition, int64, error) {
	p, err := r.follow(tp)
	if err != nil {
		return nil, 0, err
	}
	for {
		target, incarnation, err := r.awaitTarget(ctx, p, served)
		if err != nil {
			return nil, 0, err
		}
		reached, err := r.awaitOffset(ctx, p, target, incarnation)
		if err != nil {
			return nil, 0, err
		}
		if reached {
			return p, target, nil
		}
		// The topic was created again while the call waited: the target
		// was an offset of the old log.
	}
}

// awaitTarget returns the last stable offset that a read of p waits for
// (see await), and the incarnation of the log it is an offset of.
func (r *Reader) awaitTarget(ctx context.Context, p *followedPartition, served bool) (target int64, incarnation uint64, err error) {
	op := "read " + p.tp.String()
	r.mu.Lock()
	incarnation, target = p.incarnation, -1
	if served && p.currentLocked(time.Now(), r.fresh) {
		target = p.stable
	}
	r.mu.Unlock()
	if target >= 0 {
		return target, incarnation, nil
	}
	target, err = r.listOffset(ctx, p.tp, listLatest, isolationReadCommitted)
	if err == nil {
		return target, incarnation, nil
	}
	if class := Classify(PathFetch, err); class == Missing {
		r.mu.Lock()
		known := p.err
		r.mu.Unlock()
		if known != nil && known.Class == Misconfigured {
			return 0, 0, known // the lookup found the topic with fewer partitions
		}
		return 0, 0, &Error{Op: op, Class: class, Err: err, Detail: errors.New("the topic or the partition does not exist; " +
			"create the topic with CreateStateTopic, and check it with CheckStateTopic")}
	}
	return 0, 0, wrap(PathFetch, op+": list the last stable offset", err)
}

// awaitOffset waits until the view of p reaches target, an offset of the
// log of incarnation, and reports whether it did; false, with no error,
// when the topic was created again meanwhile.
func (r *Reader) awaitOffset(ctx context.Context, p *followedPartition, target int64, incarnation uint64) (bool, error) {
	for {
		r.mu.Lock()
		switch {
		case r.closed:
			r.mu.Unlock()
			return false, errClosed
		case p.incarnation != incarnation:
			r.mu.Unlock()
			return false, nil
		case p.next >= target:
			r.mu.Unlock()
			return true, nil
		case p.fatal:
			err := p.err
			r.mu.Unlock()
			return false, err
		}
		advanced, reached, last := p.advanced, p.next, p.err
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			err := fmt.Errorf("%w: reached offset %d of the last stable offset %d", ctx.Err(), reached, target)
			if last != nil {
				err = fmt.Errorf("%w (last fetch error: %w)", err, last)
			}
			return false, &Error{Op: "read " + p.tp.String(), Class: Canceled, Err: err}
		case <-advanced:
		}
	}
}

// currentLocked reports whether the view of p is current: the latest
// answer of its leader arrived less than fresh ago, and no fetch or lookup
// failed since. The caller holds r.mu.
func (p *followedPartition) currentLocked(now time.Time, fresh time.Duration) bool {
	return p.err == nil && !p.needMeta && !p.answeredAt.IsZero() && now.Sub(p.answeredAt) < fresh
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
func (r *Reader) listOffset(ctx context.Context, tp Partition, timestamp int64, isolation int8) (int64, error) {
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
func (r *Reader) listOffsetAt(ctx context.Context, tp Partition, timestamp int64, isolation int8, broker int32) (int64, error) {
	offsets, err := listOffsets(ctx, r.client, broker, tp.Topic, []int32{tp.Partition}, timestamp, isolation)
	if err != nil {
		return 0, err
	}
	return offsets[tp.Partition], nil
}
