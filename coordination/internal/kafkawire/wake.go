package kafkawire

import "sync"

// This file holds the wake-ups of the reader: a partition's waiters and
// watchers when its view moves, the lookup goroutine when a partition
// needs its leader, and a leader's loop when a partition joins it.

// Watch subscribes to the partition, and follows it from now on. The
// channel receives when the view of the partition moves: a committed
// record arrived, the last stable offset or the high watermark moved, or a
// fetch failed. It holds at most one pending value, so nothing that
// happens between a read and the wait is missed. stop ends the
// subscription; it is safe to call more than once. On a closed reader the
// channel receives once, and the next read reports the error.
func (r *Reader) Watch(tp Partition) (changed <-chan struct{}, stop func()) {
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

// wakeLocked wakes run, to look up the partitions that need a leader. The
// caller holds r.mu.
func (r *Reader) wakeLocked() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
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
