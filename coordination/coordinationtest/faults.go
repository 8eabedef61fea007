package coordinationtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// ErrUnreachable reports that a member cannot reach the cluster, because a
// test cut it off with [Transport.Cut]. It is not a fence: the member still
// holds whatever epoch it minted, and the cluster still takes its writes
// once [Transport.Heal] reconnects it, until another member mints a newer
// epoch.
var ErrUnreachable = errors.New("coordinationtest: the member cannot reach the cluster")

// Op names one call of [Transport], so a test injects a fault into it and
// counts it.
type Op int

const (
	// OpAcquireEpoch is [Transport.AcquireEpoch].
	OpAcquireEpoch Op = iota + 1

	// OpDescribeEpoch is [Transport.DescribeEpoch].
	OpDescribeEpoch

	// OpReadPartition is [Transport.ReadPartition] and
	// [Transport.ReadPartitionFrom]: both read the log, so one fault covers
	// the poll path and the follower path alike.
	OpReadPartition

	// OpAppend is [Transport.Append].
	OpAppend

	// OpWriteLease is [Transport.WriteLease].
	OpWriteLease

	// OpWriteGuarded is [Transport.WriteGuarded].
	OpWriteGuarded
)

// opCount bounds the Op values, for the counters.
const opCount = int(OpWriteGuarded) + 1

// String names the call, such as "AcquireEpoch", and "Op(N)" for a value
// outside the list.
func (op Op) String() string {
	switch op {
	case OpAcquireEpoch:
		return "AcquireEpoch"
	case OpDescribeEpoch:
		return "DescribeEpoch"
	case OpReadPartition:
		return "ReadPartition"
	case OpAppend:
		return "Append"
	case OpWriteLease:
		return "WriteLease"
	case OpWriteGuarded:
		return "WriteGuarded"
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

// mustBeValid panics on an Op outside the list: a test that passes one has
// a bug.
func (op Op) mustBeValid() {
	if op < OpAcquireEpoch || op > OpWriteGuarded {
		panic(fmt.Sprintf("coordinationtest: unknown %v", op))
	}
}

// fault is one injected failure of one call.
type fault struct {
	err error
	// lostReply says that the call takes effect before it fails.
	lostReply bool
}

// gate holds the calls of one Op until its channel closes.
type gate struct {
	open chan struct{}
}

// Cut cuts the member off from the cluster. Until [Transport.Heal], every
// call of the transport fails at once with an error that wraps
// [ErrUnreachable], and nothing reaches the cluster. A call that a gate of
// [Transport.Block] holds fails when the gate opens. Subscriptions of
// [Transport.WatchPartition] stay, and a read after the heal catches up.
//
// Cut is safe to call from any goroutine, and a second Cut changes nothing.
func (t *Transport) Cut() {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.cut = true
}

// Heal reconnects a member that [Transport.Cut] cut off. It changes nothing
// for a member that is not cut off. Heal is safe to call from any goroutine.
func (t *Transport) Heal() {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.cut = false
}

// FailNext makes the next call of op fail with an error that wraps err,
// and nothing of the call reaches the cluster. Failures queue: a second
// FailNext fails the call after next. A test injects a transient broker
// error with it, or an error that wraps [coordination.ErrFenced] to model a
// broker's fence of its own.
//
// FailNext is safe to call from any goroutine. It panics for a nil err.
func (t *Transport) FailNext(op Op, err error) {
	t.inject(op, fault{err: err})
}

// LoseNextReply makes the next call of op take effect on the cluster and
// then fail with an error that wraps err, as when the reply of the broker
// is lost on the way back. It queues with [Transport.FailNext] in one
// order. A lost reply of AcquireEpoch mints an epoch that the transport
// never learns, so the transport cannot write under it.
//
// LoseNextReply is safe to call from any goroutine. It panics for a nil
// err.
func (t *Transport) LoseNextReply(op Op, err error) {
	t.inject(op, fault{err: err, lostReply: true})
}

func (t *Transport) inject(op Op, f fault) {
	op.mustBeValid()
	if f.err == nil {
		panic("coordinationtest: a nil error injected into " + op.String())
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.faults[op] = append(t.faults[op], f)
}

// Block holds every call of op that starts before release runs, until
// release runs or the context of the call ends. A held call has not reached
// the cluster: after release it goes ahead, and at the end of its context
// it returns the context's error and changes nothing. A test models a slow
// broker or a paused process with it, and it learns that a call is held
// with [Transport.WaitCalls].
//
// Gates stack: a call waits for every gate of its op that was in place when
// it started. release is safe to call from any goroutine and more than
// once.
func (t *Transport) Block(op Op) (release func()) {
	op.mustBeValid()
	g := &gate{open: make(chan struct{})}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.gates[op] = append(t.gates[op], g)
	return sync.OnceFunc(func() {
		t.cluster.mu.Lock()
		defer t.cluster.mu.Unlock()
		t.gates[op] = slices.DeleteFunc(t.gates[op], func(other *gate) bool { return other == g })
		close(g.open)
	})
}

// StaleReads makes the reads of this transport stop at the log as it is
// now: until catchUp runs, [Transport.ReadPartition] and
// [Transport.ReadPartitionFrom] return no record that any transport
// appends after the call, and ReadPartitionFrom reports the end offset of
// that moment. It models a consumer that fetches from a follower replica
// behind the leader, or an adapter whose reads stop at a high watermark it
// fetched earlier: the member's own writes land, and the member does not
// see them. Watch wake-ups still arrive.
//
// StaleReads is safe to call from any goroutine. A second call while reads
// are stale moves nothing. catchUp is safe to call more than once.
func (t *Transport) StaleReads() (catchUp func()) {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	if t.staleAt == nil {
		t.staleAt = make(map[coordination.TopicPartition]int64)
		for partition, log := range t.cluster.logs {
			t.staleAt[partition] = log.next
		}
	}
	return sync.OnceFunc(func() {
		t.cluster.mu.Lock()
		defer t.cluster.mu.Unlock()
		t.staleAt = nil
	})
}

// readEndLocked returns the offset that the reads of this transport stop
// before. The caller holds the lock of the cluster.
func (t *Transport) readEndLocked(partition coordination.TopicPartition) int64 {
	var end int64
	if log := t.cluster.logs[partition]; log != nil {
		end = log.next
	}
	if t.staleAt != nil {
		end = min(end, t.staleAt[partition])
	}
	if open, ok := t.cluster.openAt[partition]; ok {
		end = min(end, open) // the last stable offset
	}
	t.followLocked(partition)
	return end
}

// Calls returns the number of calls of op that started on this transport,
// whatever their outcome: a call that a fault failed counts, and so does a
// call that a gate holds now. Calls is safe to call from any goroutine.
func (t *Transport) Calls(op Op) int {
	op.mustBeValid()
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	return t.calls[op]
}

// WaitCalls blocks until at least n calls of op have started on this
// transport, as [Transport.Calls] counts them. It returns at once when they
// have. A test waits with it until the code under test has reached a call,
// such as a renewal that a gate of [Transport.Block] holds, instead of
// sleeping. It waits for ever for a call that never comes, so a test bounds
// it with the deadline of the test.
func (t *Transport) WaitCalls(op Op, n int) {
	op.mustBeValid()
	for {
		t.cluster.mu.Lock()
		calls, changed := t.calls[op], t.changed
		t.cluster.mu.Unlock()
		if calls >= n {
			return
		}
		<-changed
	}
}

// enter is the prologue of every call: it counts the call, refuses it when
// the context ended or the member is cut off, waits at the gates of op, and
// takes the next injected fault. It returns a non-nil err when the call
// fails before it reaches the cluster, and a non-nil lost when the call goes
// ahead and then fails with lost.
func (t *Transport) enter(ctx context.Context, op Op) (lost, err error) {
	c := t.cluster
	c.mu.Lock()
	t.calls[op]++
	close(t.changed)
	t.changed = make(chan struct{})
	if err := t.refuseLocked(ctx, op); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	gates := slices.Clone(t.gates[op])
	c.mu.Unlock()

	for _, g := range gates {
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, t.errorf(op, "held by Block until the context ended: %w", ctx.Err())
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(gates) > 0 {
		if err := t.refuseLocked(ctx, op); err != nil {
			return nil, err
		}
	}
	if queue := t.faults[op]; len(queue) > 0 {
		f := queue[0]
		t.faults[op] = queue[1:]
		if f.lostReply {
			return t.errorf(op, "injected, after the call took effect: %w", f.err), nil
		}
		return nil, t.errorf(op, "injected: %w", f.err)
	}
	return nil, nil
}

// refuseLocked fails a call whose context ended or whose member is cut
// off. The caller holds the lock of the cluster.
func (t *Transport) refuseLocked(ctx context.Context, op Op) error {
	if ctx.Err() != nil {
		return t.errorf(op, "%w", ctx.Err())
	}
	if t.cut {
		return t.errorf(op, "%w", ErrUnreachable)
	}
	return nil
}

// errorf builds an error that names the member and the call.
func (t *Transport) errorf(op Op, format string, args ...any) error {
	return fmt.Errorf("coordinationtest: %s of %s: "+format, append([]any{op, t.member}, args...)...)
}
