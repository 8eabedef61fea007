package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// obWatch is one Observe iteration on a goroutine of its own, with what it
// yielded.
type obWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	lines  []string
	errs   []error
	failed []coordination.TopicPartition // the Partition of each error
}

func obStart(seq func(yield func(coordination.RoleChange, error) bool), cancel context.CancelFunc) *obWatch {
	w := &obWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for change, err := range seq {
			w.mu.Lock()
			if err != nil {
				w.errs = append(w.errs, err)
				w.failed = append(w.failed, change.Partition)
			} else {
				w.lines = append(w.lines, obLine(change))
			}
			w.mu.Unlock()
		}
	}()
	synctest.Wait()
	return w
}

// obLine writes a change as "role kind member [lease member@token]".
func obLine(c coordination.RoleChange) string {
	if c.Kind == coordination.ChangeSynced {
		return "synced"
	}
	line := c.Role.String() + " " + c.Kind.String()
	if !c.Member.IsZero() {
		line += " " + c.Member.String()
	}
	switch c.Kind {
	case coordination.ChangeState:
		var roster []string
		for _, entry := range c.State.Roster {
			roster = append(roster, entry.Member.String())
		}
		line += " [" + strings.Join(roster, ",") + "]"
		if c.State.Lease != nil {
			line += " held by " + c.State.Lease.Member.String()
		}
	case coordination.ChangeTakeover, coordination.ChangeReacquired:
		line += " after " + c.Previous.Member.String() + "@" + c.Previous.Token.String()
	}
	return line
}

// take returns the lines yielded since the last take.
func (w *obWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := w.lines
	w.lines = nil
	return lines
}

func (w *obWatch) stop() {
	w.cancel()
	<-w.done
}

func obWant(t *testing.T, when string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: Observe yielded\n  %s\nwant\n  %s", when, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestObserveFollowsHolderLeaseAndRoster: the state first, then one change
// a record, the expiry by the observer's clock, a holder back after an
// outage, a takeover; renewals are changes too.
func TestObserveFollowsHolderLeaseAndRoster(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		ctx, cancel := context.WithCancel(context.Background())
		w := obStart(coordination.Observe(ctx, e.member("observer").transport, []coordination.Role{e.role}, e.options()...), cancel)
		defer w.stop()
		obWant(t, "at the start", w.take(), "controller state [node-1] held by node-1", "synced")

		e.runTo(10_000)
		e.handOver() // a poll-only observer reads at its next poll
		obWant(t, "a renewal", w.take(), "controller renewed node-1")

		release := node1.raw.Block(coordinationtest.OpWriteLease) // the renewal at 20000 hangs
		e.runTo(40_000)
		obWant(t, "past the deadline", w.take(), "controller expired node-1")
		// A standby that comes now takes over at once; the hung renewal of
		// node-1 is fenced when it is released.
		standby := e.campaign(node2)
		successor := standby.won(t)
		e.handOver()
		obWant(t, "after the takeover", w.take(), "controller registered node-2", "controller takeover node-2 after node-1@"+holder.Token().String())
		release()
		e.runTo(e.now() + 1_000)
		scEnded(t, holder, coordination.ErrFenced)

		e.resign(successor)
		e.handOver()
		got := w.take()
		slices.Sort(got) // the two tombstones of a resignation race
		obWant(t, "after the resignation", got, "controller deregistered node-2", "controller released node-2")
		w.stop()
		if len(w.errs) != 0 {
			t.Fatalf("Observe yielded errors: %v", w.errs)
		}
		e.checkNoWatchers("after Observe")
	})
}

// TestObserveReportsARestoredLease: a lease that expired by the observer's
// clock and is then renewed by the same holder.
func TestObserveReportsARestoredLease(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1)
		ctx, cancel := context.WithCancel(context.Background())
		w := obStart(coordination.Observe(ctx, e.member("observer").transport, []coordination.Role{e.role}, e.options()...), cancel)
		defer w.stop()
		node1.raw.Cut()
		e.runTo(30_000)
		node1.raw.Heal()
		e.runTo(31_000)
		e.handOver()
		obWant(t, "after the outage", w.take(), "controller state [node-1] held by node-1", "synced", "controller expired node-1", "controller restored node-1")
		w.stop()
		e.resign(holder)
	})
}

// TestObserveAllFindsRolesThatAppearLater: every role of the topic, the
// ones the first read found and a later one.
func TestObserveAllFindsRolesThatAppearLater(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		first := e.acquireNow(e.member("node-1"))
		ctx, cancel := context.WithCancel(context.Background())
		w := obStart(coordination.ObserveAll(ctx, e.member("observer").transport, e.options()...), cancel)
		defer w.stop()
		obWant(t, "at the start", w.take(), "controller state [node-1] held by node-1", "synced")

		scheduler := fxRole(t, "scheduler")
		node3 := e.member("node-3")
		c := &scCampaign{member: node3, done: make(chan struct{})}
		var later *coordination.Leadership
		go func() {
			defer close(c.done)
			later, c.err = coordination.AcquireLeadership(context.Background(), node3.transport, scheduler, node3.id, e.options()...)
		}()
		<-c.done
		if c.err != nil {
			t.Fatal(c.err)
		}
		e.handOver()
		obWant(t, "a new role", w.take(), "scheduler registered node-3", "scheduler granted node-3")
		w.stop()
		e.resign(first)
		if err := later.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestObserveEndsOnAMissingPermission: the error is yielded, and the
// iteration ends, because no retry helps; a transient error is yielded and
// the observer reads again. Each error names the partition that failed.
func TestObserveEndsOnAMissingPermission(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		observer := e.member("observer")
		observer.raw.FailNext(coordinationtest.OpReadPartition, errors.New("a broker went away"))
		ctx, cancel := context.WithCancel(context.Background())
		w := obStart(coordination.Observe(ctx, observer.transport, []coordination.Role{e.role}, e.options()...), cancel)
		defer w.stop()
		e.runTo(1_000)
		obWant(t, "after a transient error", w.take(), "controller state []", "synced")
		observer.raw.FailNext(coordinationtest.OpReadPartition, fmt.Errorf("TOPIC_AUTHORIZATION_FAILED: %w", coordination.ErrNotAuthorized))
		e.runTo(2_000)
		<-w.done
		if len(w.errs) != 2 || errors.Is(w.errs[0], coordination.ErrNotAuthorized) || !errors.Is(w.errs[1], coordination.ErrNotAuthorized) {
			t.Fatalf("Observe yielded errors %v, want a transient one and then ErrNotAuthorized", w.errs)
		}
		if !slices.Equal(w.failed, []coordination.TopicPartition{e.tp, e.tp}) {
			t.Fatalf("the errors named partitions %v, want %s twice", w.failed, e.tp)
		}
		cancel()
	})
}

func TestObserveRejectsBadArguments(t *testing.T) {
	transport := coordinationtest.NewCluster().Transport("observer")
	for name, seq := range map[string]func(yield func(coordination.RoleChange, error) bool){
		"no role":        coordination.Observe(context.Background(), transport, nil),
		"zero role":      coordination.Observe(context.Background(), transport, []coordination.Role{{}}),
		"nil reader":     coordination.ObserveAll(context.Background(), nil),
		"invalid option": coordination.ObserveAll(context.Background(), transport, coordination.WithPartitions(0)),
	} {
		n := 0
		for _, err := range seq {
			n++
			if err == nil {
				t.Errorf("%s: Observe yielded a change, want one error", name)
			}
		}
		if n != 1 {
			t.Errorf("%s: Observe yielded %d values, want one error", name, n)
		}
	}
}

// TestObserveAllOfAnEmptyTopicSyncs: with no role to report, the
// observation still says when it is live.
func TestObserveAllOfAnEmptyTopicSyncs(t *testing.T) {
	transport := coordinationtest.NewCluster().Transport("observer")
	for change, err := range coordination.ObserveAll(context.Background(), transport) {
		if err != nil || change.Kind != coordination.ChangeSynced || !change.Role.IsZero() {
			t.Fatalf("first value of ObserveAll of an empty topic = %+v, %v; want ChangeSynced", change, err)
		}
		break
	}
}

// TestObserveReportsALapsedStandby (issue 11), with heartbeats on
// (WithHeartbeatInterval): a standby that writes no heartbeat for the
// roster lapse (3 intervals, 90 s here) is reported
// lapsed once, at the instant its rank lapses by the observer's clock;
// the live standby, whose heartbeats keep it seen, and the holder never
// are. An observation that starts after the lapse shows it in the state
// only. The standby, back, registers again at the tail, and lapses again
// only after a new silence.
func TestObserveReportsALapsedStandby(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		hb := coordination.WithHeartbeatInterval(30 * time.Second)
		hbConfig, err := coordination.DefaultLeaseConfig().WithHeartbeatInterval(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		holder := e.acquireNow(node1)
		dead := e.campaign(node2, hb)
		live := e.campaign(node3, hb)
		var lapses []coordination.RoleChange
		var mu sync.Mutex
		ctx, cancel := context.WithCancel(context.Background())
		w := obStart(func(yield func(coordination.RoleChange, error) bool) {
			for change, err := range coordination.Observe(ctx, e.member("observer").transport, []coordination.Role{e.role}, e.options(hb)...) {
				if change.Kind == coordination.ChangeLapsed {
					mu.Lock()
					lapses = append(lapses, change)
					mu.Unlock()
				}
				if !yield(change, err) {
					return
				}
			}
		}, cancel)
		defer w.stop()
		notRenewals := func() []string {
			var lines []string
			for _, line := range w.take() {
				if !strings.Contains(line, " renewed ") {
					lines = append(lines, line)
				}
			}
			return lines
		}
		obWant(t, "at the start", notRenewals(), "controller state [node-1,node-2,node-3] held by node-1", "synced")
		registered, _ := e.state().Entry(node2.id)
		node2.raw.Cut()

		e.runTo(95_000)
		obWant(t, "after the roster lapse", notRenewals(), "controller lapsed node-2")
		mu.Lock()
		c := lapses[0]
		mu.Unlock()
		seen := registered.LastSeen // its first heartbeat, right after the registration
		if seen == 0 {
			t.Fatalf("node-2 wrote no heartbeat after its registration: %+v", registered)
		}
		if c.At != seen+hbConfig.RosterLapse().Milliseconds()+1 || c.Offset != -1 || c.Partition != e.tp {
			t.Fatalf("lapsed at %d, offset %d, partition %s; want at %d (last seen + the lapse + 1 ms), -1, %s",
				c.At-scStart, c.Offset, c.Partition, seen+90_001-scStart, e.tp)
		}
		if entry, ok := c.State.Entry(node2.id); !ok || !entry.LapsedAt(c.At, hbConfig) || entry.Offset != registered.Offset {
			t.Fatalf("the state of the lapse has node-2 as %+v, %t; want its registration, lapsed", entry, ok)
		}
		e.runTo(200_000)
		obWant(t, "a long silence", notRenewals())

		// A second observation starts after the lapse: the state shows it.
		ctx2, cancel2 := context.WithCancel(context.Background())
		later := obStart(coordination.Observe(ctx2, e.member("observer-2").transport, []coordination.Role{e.role}, e.options(hb)...), cancel2)
		e.runTo(201_000)
		var got []string
		for _, line := range later.take() {
			if !strings.Contains(line, " renewed ") {
				got = append(got, line)
			}
		}
		obWant(t, "an observation that starts after the lapse", got, "controller state [node-1,node-2,node-3] held by node-1", "synced")
		later.stop()

		node2.raw.Heal()
		e.runTo(203_000)
		obWant(t, "the lapsed standby is back", notRenewals(), "controller registered node-2")
		node2.raw.Cut()
		e.runTo(300_000)
		obWant(t, "a new silence", notRenewals(), "controller lapsed node-2")

		node2.raw.Heal()
		e.runTo(301_000)
		for _, c := range []*scCampaign{dead, live} {
			if err := c.abandon(t); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled AcquireLeadership = %v", err)
			}
		}
		e.resign(holder)
		w.stop()
		if len(w.errs) != 0 {
			t.Fatalf("Observe yielded errors: %v", w.errs)
		}
	})
}
