package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// The renewal scheduler (renewal_scheduler.go): the renewals of every
// leadership over one transport and one clock are one goroutine's work,
// whatever the number of leaderships, and that goroutine ends with the last
// of them. The scenarios run in a synctest bubble on the manual clock of
// the scenario harness, which drives the scheduler.

// renewalGoroutines counts the goroutines of the process whose stack is in
// the scheduler's loop, and those whose stack is in a method of a
// Leadership or of its renewer (a renewal attempt, or a goroutine of a
// leadership of its own).
func renewalGoroutines() (schedulers, leaderships int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "coordination.(*renewalScheduler).run") {
			schedulers++
		}
		if strings.Contains(g, "coordination.(*Leadership).") || strings.Contains(g, "coordination.(*renewer).") {
			leaderships++
		}
	}
	return schedulers, leaderships
}

// acquireRoles takes n roles for m, one after the other, at the current
// instant of the scenario's clock.
func acquireRoles(t *testing.T, e *scEnv, m *scMember, n int, extra ...coordination.Option) []*coordination.Leadership {
	t.Helper()
	held := make([]*coordination.Leadership, n)
	for i := range held {
		ctx, cancel := context.WithCancel(context.Background())
		l, err := coordination.AcquireLeadership(ctx, m.transport, fxRole(t, fmt.Sprintf("scheduled-%04d", i)), m.id, e.options(extra...)...)
		cancel()
		if err != nil {
			t.Fatalf("AcquireLeadership of role %d: %v", i, err)
		}
		held[i] = l
	}
	return held
}

// resignAll resigns every leadership, all at once.
func resignAll(t *testing.T, held []*coordination.Leadership) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(held))
	for i, l := range held {
		wg.Go(func() { errs[i] = l.Resign(context.Background()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

// grantedAt counts the leaderships whose lease was granted at instant.
func grantedAt(held []*coordination.Leadership, instant int64) int {
	n := 0
	for _, l := range held {
		if l.Lease().GrantedAt == instant {
			n++
		}
	}
	return n
}

func TestRenewalSchedulerServesManyLeadershipsWithOneGoroutine(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		few := acquireRoles(t, e, node1, 3)
		e.settle()
		if schedulers, leaderships := renewalGoroutines(); schedulers != 1 || leaderships != 0 {
			t.Fatalf("3 held leaderships run %d scheduler goroutines and %d goroutines of their own; want 1 and 0", schedulers, leaderships)
		}
		resignAll(t, few)
		e.settle()
		if schedulers, _ := renewalGoroutines(); schedulers != 0 {
			t.Fatalf("the scheduler still runs after the last leadership resigned")
		}

		// Many leaderships: the same goroutines, and every one renews at
		// its instant.
		held := acquireRoles(t, e, node1, 300)
		start := e.now()
		e.settle()
		if schedulers, leaderships := renewalGoroutines(); schedulers != 1 || leaderships != 0 {
			t.Fatalf("300 held leaderships run %d scheduler goroutines and %d goroutines of their own; want 1 and 0", schedulers, leaderships)
		}
		for round := int64(1); round <= 3; round++ {
			at := start + round*scRenew.Milliseconds()
			e.runTo(at - 1)
			if n := grantedAt(held, scAt(at-scRenew.Milliseconds())); n != len(held) {
				t.Fatalf("round %d: %d of %d leases renewed before the renew instant", round, len(held)-n, len(held))
			}
			e.runTo(at)
			e.settle()
			if n := grantedAt(held, scAt(at)); n != len(held) {
				t.Fatalf("round %d: %d of %d leases renewed at the renew instant", round, n, len(held))
			}
			if schedulers, leaderships := renewalGoroutines(); schedulers != 1 || leaderships != 0 {
				t.Fatalf("round %d: %d scheduler goroutines and %d of the leaderships after the renewals; want 1 and 0", round, schedulers, leaderships)
			}
		}
		resignAll(t, held)
		e.settle()
		if schedulers, leaderships := renewalGoroutines(); schedulers != 0 || leaderships != 0 {
			t.Fatalf("after the last resignation: %d scheduler goroutines and %d of the leaderships; want none", schedulers, leaderships)
		}
	})
}

func TestRenewalSchedulerRetriesAFailedRenewalAndKeepsTheOthersOnTime(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		held := acquireRoles(t, e, node1, 3)
		node1.raw.FailNext(coordinationtest.OpWriteLease, errors.New("NOT_ENOUGH_REPLICAS"))

		e.runTo(10_000)
		e.settle()
		if n := grantedAt(held, scAt(10_000)); n != 2 {
			t.Fatalf("%d leases renewed at 10000 ms, want 2: one renewal failed", n)
		}
		e.runTo(10_000 + scPoll.Milliseconds() - 1)
		if n := grantedAt(held, scAt(0)); n != 1 {
			t.Fatalf("%d leases are the first grant before the retry instant, want 1", n)
		}
		e.runTo(10_000 + scPoll.Milliseconds())
		e.settle()
		if n := grantedAt(held, scAt(10_000+scPoll.Milliseconds())); n != 1 {
			t.Fatalf("%d leases renewed at the retry instant, want 1", n)
		}
		e.runTo(20_000)
		e.settle()
		if n := grantedAt(held, scAt(20_000)); n != 2 {
			t.Fatalf("%d leases renewed at 20000 ms, want the 2 on the regular schedule", n)
		}
		e.runTo(21_000)
		e.settle()
		if n := grantedAt(held, scAt(21_000)); n != 1 {
			t.Fatalf("%d leases renewed at 21000 ms, want the retried one, a renew interval after its retry", n)
		}
		for _, l := range held {
			scHolds(t, l)
		}
		resignAll(t, held)
	})
}

func TestRenewalSchedulerResignDuringAnAttemptLeavesTheOthersRenewing(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		held := acquireRoles(t, e, node1, 2)
		grants := node1.raw.Calls(coordinationtest.OpWriteLease)
		release := node1.raw.Block(coordinationtest.OpWriteLease)
		e.runTo(10_000)
		node1.raw.WaitCalls(coordinationtest.OpWriteLease, grants+2) // both renewals hang

		resigned := make(chan error, 1)
		go func() { resigned <- held[0].Resign(context.Background()) }()
		e.settle()
		select {
		case err := <-resigned:
			t.Fatalf("Resign returned %v while its tombstone is held", err)
		default:
		}
		release()
		if err := <-resigned; err != nil {
			t.Fatalf("Resign: %v", err)
		}
		scEnded(t, held[0], coordination.ErrNotHeld)
		if got := held[0].Lease().GrantedAt; got != scAt(0) {
			t.Fatalf("the cancelled renewal moved the resigned lease to %d ms", got-scStart)
		}
		e.settle()
		if got := held[1].Lease().GrantedAt; got != scAt(10_000) {
			t.Fatalf("the other renewal, released, granted its lease at %d ms, want 10000", got-scStart)
		}
		e.runTo(20_000)
		e.settle()
		if got := held[1].Lease().GrantedAt; got != scAt(20_000) {
			t.Fatalf("after the resignation of the other, the next renewal granted at %d ms, want 20000", got-scStart)
		}
		if schedulers, _ := renewalGoroutines(); schedulers != 1 {
			t.Fatalf("%d scheduler goroutines for the leadership left, want 1", schedulers)
		}
		resignAll(t, held[1:])
	})
}

func TestRenewalSchedulerBoundsTheAttemptsInFlight(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		const roles, bound = 1100, 1024 // bound: maxRenewalsInFlight
		held := acquireRoles(t, e, node1, roles)
		grants := node1.raw.Calls(coordinationtest.OpWriteLease)
		release := node1.raw.Block(coordinationtest.OpWriteLease)
		e.runTo(10_000)
		node1.raw.WaitCalls(coordinationtest.OpWriteLease, grants+bound)
		e.settle()
		if got := node1.raw.Calls(coordinationtest.OpWriteLease) - grants; got != bound {
			t.Fatalf("%d renewals in flight at once, want the bound %d", got, bound)
		}
		release()
		e.settle()
		if n := grantedAt(held, scAt(10_000)); n != roles {
			t.Fatalf("%d of %d leases renewed once the broker answered", n, roles)
		}
		resignAll(t, held)
	})
}

// uncomparableClock is a Clock that cannot key a map: its leaderships get
// a scheduler of their own.
type uncomparableClock struct {
	*scClock
	_ []int
}

func TestRenewalSchedulerOnAClockThatIsNoMapKey(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		held := acquireRoles(t, e, node1, 2, coordination.WithClock(uncomparableClock{scClock: e.clock}))
		e.runTo(10_000)
		e.settle()
		if n := grantedAt(held, scAt(10_000)); n != 2 {
			t.Fatalf("%d of 2 leases renewed at 10000 ms", n)
		}
		resignAll(t, held)
		e.settle()
		if schedulers, _ := renewalGoroutines(); schedulers != 0 {
			t.Fatalf("%d scheduler goroutines after the resignations", schedulers)
		}
	})
}
