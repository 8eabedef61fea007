package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// The group commit of Leadership.Write (issue 12, item 1) on the in-memory
// cluster, in virtual time: calls that queue while a transaction is in
// flight share the next one, and each call learns its own outcome. The
// transport below scripts each WriteGuarded call (hold it, fail it) and
// refuses every record for gcForbidden, as a broker refuses a topic that
// the member may not write. The helpers of this file carry the gc prefix.

const (
	gcCommands  = "commands"
	gcForbidden = "forbidden"
)

// gcTransport is a member's in-memory transport whose WriteGuarded calls a
// test scripts by their index, from 0.
type gcTransport struct {
	*coordinationtest.Transport

	mu     sync.Mutex
	calls  [][]coordination.GuardedRecord
	script map[int]func(ctx context.Context, inner func() error) error
}

func (t *gcTransport) WriteGuarded(ctx context.Context, token coordination.FencingToken, records []coordination.GuardedRecord) error {
	t.mu.Lock()
	n := len(t.calls)
	t.calls = append(t.calls, records)
	step := t.script[n]
	t.mu.Unlock()
	for _, r := range records {
		if r.Topic == gcForbidden {
			return fmt.Errorf("gc: record for %s: TOPIC_AUTHORIZATION_FAILED, nothing committed: %w", r.Topic, coordination.ErrNotAuthorized)
		}
	}
	inner := func() error { return t.Transport.WriteGuarded(ctx, token, records) }
	if step != nil {
		return step(ctx, inner)
	}
	return inner()
}

// on scripts WriteGuarded call n.
func (t *gcTransport) on(n int, step func(ctx context.Context, inner func() error) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.script[n] = step
}

// hold scripts call n to wait until release runs (then it writes) or its
// context ends (then it writes nothing).
func (t *gcTransport) hold(n int) (release func()) {
	open := make(chan struct{})
	t.on(n, func(ctx context.Context, inner func() error) error {
		select {
		case <-open:
			return inner()
		case <-ctx.Done():
			return fmt.Errorf("gc: held call %d: %w", n, ctx.Err())
		}
	})
	return sync.OnceFunc(func() { close(open) })
}

// callCount returns the number of WriteGuarded calls so far.
func (t *gcTransport) callCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

// call returns the values of the records of WriteGuarded call n.
func (t *gcTransport) call(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var values []string
	for _, r := range t.calls[n] {
		values = append(values, string(r.Value))
	}
	return values
}

// gcSetup starts a scenario: node-1 holds the role over a gcTransport.
func gcSetup(e *scEnv) (*gcTransport, *coordination.Leadership) {
	raw := e.cluster.Transport("node-1")
	gt := &gcTransport{Transport: raw, script: make(map[int]func(context.Context, func() error) error)}
	m := &scMember{id: fxMember(e.t, "node-1"), raw: raw, transport: gt}
	return gt, e.acquireNow(m)
}

// gcWrite starts one Write of the records "<name>-0" .. "<name>-<n-1>" to
// topic, and returns the channel of its outcome.
func gcWrite(ctx context.Context, l *coordination.Leadership, topic, name string, n int) <-chan error {
	records := make([]coordination.GuardedRecord, n)
	for i := range records {
		records[i] = coordination.GuardedRecord{Topic: topic, Value: fmt.Appendf(nil, "%s-%d", name, i)}
	}
	out := make(chan error, 1)
	go func() { out <- l.Write(ctx, records...) }()
	return out
}

// gcValues returns the values of the partition 0 of topic, in offset order.
func gcValues(e *scEnv, topic string) []string {
	var values []string
	for _, entry := range e.cluster.Entries(coordination.TopicPartition{Topic: topic}) {
		values = append(values, string(entry.Value))
	}
	return values
}

// TestGroupCommitSharesOneTransaction: eight calls that queue while a
// transaction is in flight share the next one. Each returns nil, the
// records of each call are together and in their order, and the calls are
// in the order they queued.
func TestGroupCommitSharesOneTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		gt, holder := gcSetup(e)
		release := gt.hold(0)
		first := gcWrite(t.Context(), holder, gcCommands, "first", 1)
		e.settle()
		var outcomes []<-chan error
		for i := range 8 {
			outcomes = append(outcomes, gcWrite(t.Context(), holder, gcCommands, fmt.Sprintf("w%d", i), 3))
			e.settle() // queue them in a known order
		}
		if got := gt.callCount(); got != 1 {
			t.Fatalf("%d WriteGuarded calls while the first transaction is held, want 1", got)
		}
		release()
		if err := <-first; err != nil {
			t.Fatalf("the first write: %v", err)
		}
		for i, out := range outcomes {
			if err := <-out; err != nil {
				t.Fatalf("write w%d: %v", i, err)
			}
		}
		if got := gt.callCount(); got != 2 {
			t.Fatalf("%d WriteGuarded calls for 9 writes, want 2: the eight queued writes share one transaction", got)
		}
		var want []string
		want = append(want, "first-0")
		for i := range 8 {
			for j := range 3 {
				want = append(want, fmt.Sprintf("w%d-%d", i, j))
			}
		}
		if got := gcValues(e, gcCommands); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("the command topic holds %v, want %v", got, want)
		}
		for _, entry := range e.cluster.Entries(coordination.TopicPartition{Topic: gcCommands}) {
			if entry.Token != holder.Token() {
				t.Fatalf("record %q under %s, want %s", entry.Value, entry.Token, holder.Token())
			}
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}

// TestGroupCommitFenceFailsEveryCallOfTheTransaction: the broker fences the
// shared transaction. Every call of it returns ErrFenced, the leadership
// ends, and the calls queued behind it return ErrNotHeld and the fence
// without a transaction of their own.
func TestGroupCommitFenceFailsEveryCallOfTheTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		gt, holder := gcSetup(e)
		releaseFirst := gt.hold(0)
		first := gcWrite(t.Context(), holder, gcCommands, "first", 1)
		e.settle()
		fenced := make(chan struct{})
		gt.on(1, func(ctx context.Context, _ func() error) error {
			<-fenced
			return fmt.Errorf("gc: PRODUCER_FENCED: %w", coordination.ErrFenced)
		})
		var shared, behind []<-chan error
		for i := range 4 {
			shared = append(shared, gcWrite(t.Context(), holder, gcCommands, fmt.Sprintf("s%d", i), 2))
			e.settle()
		}
		releaseFirst()
		if err := <-first; err != nil {
			t.Fatalf("the first write: %v", err)
		}
		e.settle() // the shared transaction is in flight
		for i := range 3 {
			behind = append(behind, gcWrite(t.Context(), holder, gcCommands, fmt.Sprintf("b%d", i), 1))
		}
		e.settle()
		close(fenced)
		for i, out := range shared {
			if err := <-out; !errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrNotHeld) {
				t.Fatalf("write s%d of the fenced transaction = %v, want ErrFenced", i, err)
			}
		}
		for i, out := range behind {
			if err := <-out; !errors.Is(err, coordination.ErrNotHeld) || !errors.Is(err, coordination.ErrFenced) {
				t.Fatalf("write b%d queued behind the fence = %v, want ErrNotHeld and ErrFenced", i, err)
			}
		}
		scEnded(t, holder, coordination.ErrFenced)
		if got := gt.callCount(); got != 2 {
			t.Fatalf("%d WriteGuarded calls, want 2: the writes queued behind the fence are never sent", got)
		}
		if got := gcValues(e, gcCommands); strings.Join(got, ",") != "first-0" {
			t.Fatalf("the command topic holds %v, want only first-0", got)
		}
	})
}

// TestGroupCommitUnknownOutcomeFailsEveryCallOfTheTransaction: the commit
// of a shared transaction is lost on the way back (here it landed). Every
// call returns ErrProducerLost, and the leadership ends.
func TestGroupCommitUnknownOutcomeFailsEveryCallOfTheTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		gt, holder := gcSetup(e)
		releaseFirst := gt.hold(0)
		first := gcWrite(t.Context(), holder, gcCommands, "first", 1)
		e.settle()
		gt.on(1, func(ctx context.Context, inner func() error) error {
			if err := inner(); err != nil {
				return err
			}
			return fmt.Errorf("gc: the EndTxn's answer was lost, outcome unknown: %w", coordination.ErrProducerLost)
		})
		var shared []<-chan error
		for i := range 3 {
			shared = append(shared, gcWrite(t.Context(), holder, gcCommands, fmt.Sprintf("s%d", i), 1))
			e.settle()
		}
		releaseFirst()
		if err := <-first; err != nil {
			t.Fatalf("the first write: %v", err)
		}
		for i, out := range shared {
			if err := <-out; !errors.Is(err, coordination.ErrProducerLost) {
				t.Fatalf("write s%d of the transaction of unknown outcome = %v, want ErrProducerLost", i, err)
			}
		}
		scEnded(t, holder, coordination.ErrProducerLost)
		if got := gt.callCount(); got != 2 {
			t.Fatalf("%d WriteGuarded calls, want 2: a call of unknown outcome is never written again", got)
		}
	})
}

// TestGroupCommitRefusedRecordFailsOnlyItsCall: one call of a shared
// transaction writes to a topic that the member may not write, and the
// broker refuses the transaction. That call returns ErrNotAuthorized, the
// other calls are written again alone, in their order, and return nil, and
// the leadership goes on.
func TestGroupCommitRefusedRecordFailsOnlyItsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		gt, holder := gcSetup(e)
		releaseFirst := gt.hold(0)
		first := gcWrite(t.Context(), holder, gcCommands, "first", 1)
		e.settle()
		a := gcWrite(t.Context(), holder, gcCommands, "a", 2)
		e.settle()
		b := gcWrite(t.Context(), holder, gcForbidden, "b", 1)
		e.settle()
		c := gcWrite(t.Context(), holder, gcCommands, "c", 2)
		e.settle()
		releaseFirst()
		if err := <-first; err != nil {
			t.Fatalf("the first write: %v", err)
		}
		if err := <-a; err != nil {
			t.Fatalf("write a, beside a refused record: %v", err)
		}
		if err := <-b; !errors.Is(err, coordination.ErrNotAuthorized) || errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrProducerLost) {
			t.Fatalf("write b to %s = %v, want ErrNotAuthorized only", gcForbidden, err)
		}
		if err := <-c; err != nil {
			t.Fatalf("write c, beside a refused record: %v", err)
		}
		scHolds(t, holder)
		want := [][]string{{"first-0"}, {"a-0", "a-1", "b-0", "c-0", "c-1"}, {"a-0", "a-1"}, {"b-0"}, {"c-0", "c-1"}}
		if got := gt.callCount(); got != len(want) {
			t.Fatalf("%d WriteGuarded calls, want %d: the shared one, then each call alone", got, len(want))
		}
		for n, values := range want {
			if got := gt.call(n); strings.Join(got, ",") != strings.Join(values, ",") {
				t.Fatalf("WriteGuarded call %d wrote %v, want %v", n, got, values)
			}
		}
		if got := gcValues(e, gcCommands); strings.Join(got, ",") != "first-0,a-0,a-1,c-0,c-1" {
			t.Fatalf("the command topic holds %v, want first-0,a-0,a-1,c-0,c-1", got)
		}
		e.resign(holder)
	})
}

// TestGroupCommitQueuedCallWhoseContextEndsLeavesTheQueue: a call whose
// context ends while it waits in the queue returns its context's error
// and is never written; the others of its queue share the next
// transaction.
func TestGroupCommitQueuedCallWhoseContextEndsLeavesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		gt, holder := gcSetup(e)
		releaseFirst := gt.hold(0)
		first := gcWrite(t.Context(), holder, gcCommands, "first", 1)
		e.settle()
		ctx, cancel := context.WithCancel(t.Context())
		a := gcWrite(ctx, holder, gcCommands, "a", 1)
		b := gcWrite(t.Context(), holder, gcCommands, "b", 1)
		e.settle()
		cancel()
		if err := <-a; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing written") {
			t.Fatalf("the cancelled queued write = %v, want context.Canceled and nothing written", err)
		}
		releaseFirst()
		if err := <-first; err != nil {
			t.Fatalf("the first write: %v", err)
		}
		if err := <-b; err != nil {
			t.Fatalf("write b: %v", err)
		}
		if got := gt.callCount(); got != 2 || strings.Join(gt.call(1), ",") != "b-0" {
			t.Fatalf("%d WriteGuarded calls, the second of %v; want 2, the second of b-0 only", got, gt.call(min(1, got-1)))
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}

// TestGroupCommitContextEndingOnTheWireEndsTheTransaction: a call whose
// context ends while its shared transaction is in flight ends that
// transaction. The transport fails it before anything committed, so the
// leadership goes on: that call returns its context's error, and the other
// call is written again alone and returns nil.
func TestGroupCommitContextEndingOnTheWireEndsTheTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		gt, holder := gcSetup(e)
		releaseFirst := gt.hold(0)
		gt.hold(1) // the shared transaction waits until a context ends
		first := gcWrite(t.Context(), holder, gcCommands, "first", 1)
		e.settle()
		ctx, cancel := context.WithCancel(t.Context())
		a := gcWrite(ctx, holder, gcCommands, "a", 1)
		e.settle()
		b := gcWrite(t.Context(), holder, gcCommands, "b", 1)
		e.settle()
		releaseFirst()
		if err := <-first; err != nil {
			t.Fatalf("the first write: %v", err)
		}
		e.settle()
		if got := gt.callCount(); got != 2 {
			t.Fatalf("%d WriteGuarded calls, want 2: the shared transaction in flight", got)
		}
		cancel()
		if err := <-a; !errors.Is(err, context.Canceled) {
			t.Fatalf("the write whose context ended on the wire = %v, want context.Canceled", err)
		}
		if err := <-b; err != nil {
			t.Fatalf("write b, whose transaction another call's context ended: %v", err)
		}
		if got := gt.callCount(); got != 3 || strings.Join(gt.call(2), ",") != "b-0" {
			t.Fatalf("%d WriteGuarded calls; want 3, the last of b-0 alone", got)
		}
		if got := gcValues(e, gcCommands); strings.Join(got, ",") != "first-0,b-0" {
			t.Fatalf("the command topic holds %v, want first-0,b-0", got)
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}

// TestGroupCommitRenewalPreemptsASharedTransaction: the queued writes never
// hold a due renewal back. A write hangs; the renewal due at 10 s waits
// until one renew interval before the lease's deadline (30 s - 10 s),
// cancels it, and renews at 20 s ahead of the two writes queued behind it.
// Those share the next transaction, which hangs too: the renewal due at
// 30 s cancels it at 40 s (50 s - 10 s), and both calls return the error
// that says so. The lease never lapses, and the leadership goes on.
func TestGroupCommitRenewalPreemptsASharedTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		gt, holder := gcSetup(e)
		gt.hold(0)
		gt.hold(1)
		first := gcWrite(t.Context(), holder, gcCommands, "first", 1)
		e.settle()
		a := gcWrite(t.Context(), holder, gcCommands, "a", 1)
		e.settle()
		b := gcWrite(t.Context(), holder, gcCommands, "b", 1)
		e.runTo(20_000)
		if err := <-first; err == nil || !strings.Contains(err.Error(), "renewal cancelled it") {
			t.Fatalf("the hung write = %v, want the error of the preemption", err)
		}
		if got := holder.Lease().GrantedAt; got != scAt(20_000) {
			t.Fatalf("the lease was renewed at %d ms, want 20000", got-scStart)
		}
		e.settle()
		if got := gt.callCount(); got != 2 || strings.Join(gt.call(1), ",") != "a-0,b-0" {
			t.Fatalf("%d WriteGuarded calls (the second of %v); want 2, the second one shared by a and b", got, gt.call(got-1))
		}
		e.runTo(40_000)
		for name, out := range map[string]<-chan error{"a": a, "b": b} {
			if err := <-out; err == nil || !strings.Contains(err.Error(), "renewal cancelled it") {
				t.Fatalf("write %s of the preempted shared transaction = %v, want the error of the preemption", name, err)
			}
		}
		if got := holder.Lease().GrantedAt; got != scAt(40_000) {
			t.Fatalf("the lease was renewed at %d ms, want 40000", got-scStart)
		}
		scHolds(t, holder)
		if err := <-gcWrite(t.Context(), holder, gcCommands, "after", 1); err != nil {
			t.Fatalf("a write after the preemptions: %v", err)
		}
		e.resign(holder)
	})
}

// TestGroupCommitNoCallLost: 16 goroutines write 100 calls each, at once,
// and every seventh call of each goroutine goes to a topic that the member
// may not write. Every call returns its own outcome, and the command topic
// holds each successful call's record exactly once, each goroutine's in
// its order. It runs in real time, for the race detector.
func TestGroupCommitNoCallLost(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	raw := cluster.Transport("node-1")
	gt := &gcTransport{Transport: raw, script: make(map[int]func(context.Context, func() error) error)}
	ctx := t.Context()
	holder, err := coordination.AcquireLeadership(ctx, gt, fxRole(t, "controller"), fxMember(t, "node-1"))
	if err != nil {
		t.Fatalf("AcquireLeadership: %v", err)
	}
	defer func() { _ = holder.Resign(context.Background()) }()
	const writers, calls = 16, 100
	var wg sync.WaitGroup
	failures := make(chan error, writers*calls)
	for w := range writers {
		wg.Go(func() {
			for i := range calls {
				topic := gcCommands
				if i%7 == 3 {
					topic = gcForbidden
				}
				err := holder.Write(ctx, coordination.GuardedRecord{Topic: topic, Value: fmt.Appendf(nil, "%d/%d", w, i)})
				switch {
				case topic == gcForbidden && !errors.Is(err, coordination.ErrNotAuthorized):
					failures <- fmt.Errorf("write %d/%d to %s = %w, want ErrNotAuthorized", w, i, topic, err)
				case topic == gcCommands && err != nil:
					failures <- fmt.Errorf("write %d/%d: %w", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Error(err)
	}
	next := make([]int, writers)
	seen := 0
	for _, entry := range cluster.Entries(coordination.TopicPartition{Topic: gcCommands}) {
		var w, i int
		if _, err := fmt.Sscanf(string(entry.Value), "%d/%d", &w, &i); err != nil {
			t.Fatalf("record %q: %v", entry.Value, err)
		}
		for next[w]%7 == 3 {
			next[w]++
		}
		if i != next[w] {
			t.Fatalf("writer %d's record %d follows its record %d; want %d: a call lost, repeated or out of order", w, i, next[w]-1, next[w])
		}
		next[w]++
		seen++
	}
	want := 0
	for i := range calls {
		if i%7 != 3 {
			want += writers
		}
	}
	if seen != want {
		t.Fatalf("the command topic holds %d records, want %d", seen, want)
	}
	t.Logf("%d calls in %d WriteGuarded calls", writers*calls, gt.callCount())
	scHolds(t, holder)
}
