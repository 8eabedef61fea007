package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the leader lookups of the reader: one goroutine that
// looks up, with one Metadata request, the leader and topic id of every
// followed partition that needs one, and hands each partition to the
// fetch loop of its leader.

// run looks up the leader of every partition that needs one, and hands the
// partition to its leader's loop, starting the loop when the leader has
// none. It returns when close cancels r.ctx, after every loop returned.
func (r *Reader) run() {
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
// again after a backoff. It tells r.recreated of the topics whose id
// changed.
func (r *Reader) refreshMetadata(parts []*followedPartition) {
	var topics []string
	for _, p := range parts {
		if !slices.Contains(topics, p.tp.Topic) {
			topics = append(topics, p.tp.Topic)
		}
	}
	ctx, cancel := context.WithTimeout(r.ctx, readerMetadataTimeout)
	defer cancel()
	resp, err := requestMetadata(ctx, r.client, topics...)
	var recreated []string
	r.mu.Lock()
	if r.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	now := time.Now()
	for _, p := range parts {
		if err != nil {
			p.setErrLocked(wrap(PathMetadata, "read "+p.tp.String()+": metadata", err), false)
			p.failedLocked(now)
			continue
		}
		incarnation := p.incarnation
		ok := p.applyMetadataLocked(resp)
		if p.incarnation != incarnation && !slices.Contains(recreated, p.tp.Topic) {
			recreated = append(recreated, p.tp.Topic)
		}
		if !ok {
			p.failedLocked(now)
			continue
		}
		r.assignLocked(p)
	}
	r.mu.Unlock()
	if len(recreated) > 0 && r.recreated != nil {
		r.recreated(recreated)
	}
}

// assignLocked hands a partition whose leader is known to the loop of the
// leader: it starts the loop, or makes the running loop include the
// partition at once. The caller holds r.mu.
func (r *Reader) assignLocked(p *followedPartition) {
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
// response. A topic id that differs from the one the view was folded
// under (the topic was deleted and created again) starts the view over
// (restartLocked). A missing topic or partition and a refused ACL are
// fatal: a read fails at once (Missing, Misconfigured for a partition
// beyond the topic's count, NotAuthorized), and the lookup goes on after
// the backoff. The caller holds r.mu.
func (p *followedPartition) applyMetadataLocked(resp *kmsg.MetadataResponse) bool {
	op := "read " + p.tp.String()
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != p.tp.Topic {
			continue
		}
		if err := codeError(t.ErrorCode); err != nil {
			switch class := Classify(PathMetadata, err); class {
			case Missing:
				p.setErrLocked(&Error{Op: op, Class: Missing, Err: err,
					Detail: errors.New("the topic does not exist; create it with CreateStateTopic")}, true)
			case NotAuthorized:
				p.setErrLocked(&Error{Op: op, Class: class, Err: err}, true)
			default:
				p.setErrLocked(&Error{Op: op + ": metadata", Class: class, Err: err}, false)
			}
			return false
		}
		for _, part := range t.Partitions {
			if part.Partition != p.tp.Partition {
				continue
			}
			if err := codeError(part.ErrorCode); err != nil && part.Leader < 0 {
				p.setErrLocked(wrap(PathMetadata, op+": metadata", err), false)
				return false
			}
			if part.Leader < 0 {
				p.setErrLocked(&Error{Op: op, Class: Retriable, Detail: errors.New("the partition has no leader")}, false)
				return false
			}
			if p.topicID != ([16]byte{}) && t.TopicID != ([16]byte{}) && t.TopicID != p.topicID {
				// The topic was deleted and created again: its log is
				// another, which the view folds from its start.
				p.restartLocked()
			}
			p.leader, p.topicID, p.needMeta = part.Leader, t.TopicID, false
			return true
		}
		// The topic has fewer partitions than this one needs: it was
		// created so, or deleted and created again with fewer. No retry
		// helps until an operator acts, and a member must not go on as if
		// the partition were only late.
		p.setErrLocked(&Error{Op: op, Class: Misconfigured, Detail: fmt.Errorf("the topic has %d partitions, so partition %d does not exist; "+
			"check WithPartitions against the topic (CheckStateTopic)", len(t.Partitions), p.tp.Partition)}, true)
		return false
	}
	p.setErrLocked(&Error{Op: op, Class: Retriable, Detail: errors.New("the metadata response omits the topic")}, false)
	return false
}
