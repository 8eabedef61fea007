package coordination_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// The scenario tests of AcquireLeadership and Leadership. Each one runs
// twice, over a transport that follows the partition and over one that only
// polls, inside a synctest bubble with a ManualClock. The test moves the
// clock only after synctest.Wait reports that every goroutine of the bubble
// has parked, so no test sleeps and no step races the loop. The helpers of
// this file carry the sc prefix.

const (
	scLease   = 30 * time.Second
	scRenew   = 10 * time.Second
	scStagger = 5 * time.Second
	scPoll    = time.Second

	// scStart is the instant of the ManualClock when a scenario starts, in
	// milliseconds since the Unix epoch. scAt names instants relative to it.
	scStart = int64(1_700_000_000_000)
)

func TestLeadershipSingleMemberTakesTheRoleAtOnce(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		l := e.acquireNow(node1)
		scHolds(t, l)
		e.checkToken(l.Token(), "after the win")
		if l.Role() != e.role || l.Member() != node1.id || l.Partition() != e.tp {
			t.Fatalf("accessors = %s, %s, %s; want %s, %s, %s", l.Role(), l.Member(), l.Partition(), e.role, node1.id, e.tp)
		}
		want := coordination.Lease{Member: node1.id, Token: l.Token(), GrantedAt: scAt(0), Deadline: scAt(30_000)}
		if got := l.Lease(); got != want {
			t.Fatalf("Lease = %+v, want %+v", got, want)
		}
		for op, n := range map[coordinationtest.Op]int{
			coordinationtest.OpAppend:       1,
			coordinationtest.OpAcquireEpoch: 1,
			coordinationtest.OpWriteLease:   1,
		} {
			if got := node1.raw.Calls(op); got != n {
				t.Errorf("Calls(%s) = %d, want %d", op, got, n)
			}
		}
		state := e.state()
		if e.roster() != "node-1" || state.Lease == nil || *state.Lease != want {
			t.Fatalf("the log holds roster %q and lease %+v, want node-1 and %+v", e.roster(), state.Lease, want)
		}
		status, err := coordination.DescribeLeadership(context.Background(), e.cluster.Transport("auditor"), e.role)
		if err != nil || !status.Authoritative(l.Token()) {
			t.Fatalf("DescribeLeadership = %v, %v; want %s authoritative", status, err, l.Token())
		}
		e.checkNoWatchers("after the win")
		e.resign(l)
	})
}

func TestLeadershipStandbyWaitsWhileTheHolderRenews(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		standby := e.campaign(node2)
		standby.waiting(t, "at the start")

		// Twenty renew intervals are more than six lease durations.
		for i := int64(1); i <= 20; i++ {
			e.runTo(i * 10_000)
			standby.waiting(t, "while the holder renews")
			scHolds(t, holder)
			e.checkToken(holder.Token(), "while the holder renews")
			if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
				t.Fatalf("at %d ms the standby minted %d times", e.now(), got)
			}
			if got := holder.Lease().GrantedAt; got != scAt(i*10_000) {
				t.Fatalf("at %d ms the lease was granted at %d, want the renewal at %d", e.now(), got-scStart, i*10_000)
			}
			if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != int(1+i) {
				t.Fatalf("at %d ms the holder wrote %d leases, want %d", e.now(), got, 1+i)
			}
			if i == 10 {
				// Compaction removes what the follower read already; the
				// offsets of what stays do not move.
				e.cluster.Compact(e.tp)
			}
		}
		if e.roster() != "node-1,node-2" {
			t.Fatalf("roster = %s, want node-1,node-2", e.roster())
		}
		e.resign(holder)
		e.handOver()
		e.resign(standby.won(t))
	})
}

func TestLeadershipCutOffHolderIsReplacedAtItsDeadlineAndNotBefore(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		// The standbys register 1 ms before a whole second, so their polls
		// fall 1 ms before each whole second too, and one of them lands 1 ms
		// before the instant of their challenge.
		e.runTo(999)
		first := e.campaign(node2)  // rank 0
		second := e.campaign(node3) // rank 1
		node1.raw.Cut()

		e.runTo(29_999)
		first.waiting(t, "1 ms before the deadline")
		second.waiting(t, "1 ms before the deadline")
		e.checkToken(holder.Token(), "1 ms before the deadline")
		if n := node2.raw.Calls(coordinationtest.OpAcquireEpoch) + node3.raw.Calls(coordinationtest.OpAcquireEpoch); n != 0 {
			t.Fatalf("the standbys minted %d times before the deadline", n)
		}

		e.runTo(30_000)
		successor := first.won(t)
		if !successor.Token().Supersedes(holder.Token()) {
			t.Fatalf("the successor's token %s does not supersede %s", successor.Token(), holder.Token())
		}
		e.checkToken(successor.Token(), "at the deadline")
		if got := successor.Lease().GrantedAt; got != scAt(30_000) {
			t.Fatalf("the successor was granted its lease at %d ms, want 30000", got-scStart)
		}
		second.waiting(t, "after rank 0 won")
		if got := node3.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("rank 1 minted %d times", got)
		}
		// The deposed holder learns it from its next write, and from
		// nothing else: the clock passing its deadline told it nothing.
		scHolds(t, holder)

		node1.raw.Heal()
		e.runTo(31_000) // the renewal retry comes at most one poll interval later
		scEnded(t, holder, coordination.ErrFenced)
		ended := holder.Err()
		before := scCalls(node1)
		err := holder.Renew(context.Background())
		if !errors.Is(err, coordination.ErrFenced) || !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Renew after the fence = %v, want ErrNotHeld and ErrFenced", err)
		}
		if err := holder.Write(context.Background(), scCommands); err == nil {
			t.Fatal("Write after the fence succeeded")
		} else if !e.plain && !errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("Write after the fence = %v, want ErrFenced", err)
		}
		if err := holder.Resign(context.Background()); !errors.Is(err, coordination.ErrFenced) || !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Resign after the fence = %v, want ErrNotHeld and ErrFenced", err)
		}
		e.runTo(100_000)
		scSameCalls(t, node1, before, "after Done closed")
		if holder.Err() != ended {
			t.Fatalf("Err changed from %v to %v", ended, holder.Err())
		}
		if got := e.cluster.Records(coordination.TopicPartition{Topic: scCommands.Topic}); len(got) != 0 {
			t.Fatalf("the deposed holder's guarded write landed: %d records", len(got))
		}
		scHolds(t, successor)
		second.waiting(t, "while rank 0 holds")

		if err := second.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v, want context.Canceled", err)
		}
		e.resign(successor)
		e.checkNoWatchers("at the end")
	})
}

func TestLeadershipRankOneChallengesOneStaggerAfterTheDeadline(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		// So that a poll lands 1 ms before the challenge.
		e.runTo(999)
		first := e.campaign(node2)  // rank 0
		second := e.campaign(node3) // rank 1
		node1.raw.Cut()
		node2.raw.Cut()

		e.runTo(34_999)
		first.waiting(t, "rank 0 is cut off")
		second.waiting(t, "1 ms before the deadline plus one stagger")
		e.checkToken(holder.Token(), "1 ms before the deadline plus one stagger")

		e.runTo(35_000)
		successor := second.won(t)
		e.checkToken(successor.Token(), "at the deadline plus one stagger")
		if got := successor.Lease().GrantedAt; got != scAt(35_000) {
			t.Fatalf("rank 1 was granted its lease at %d ms, want 35000", got-scStart)
		}
		first.waiting(t, "rank 0 is cut off")

		if err := first.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v, want context.Canceled", err)
		}
		// A resignation that cannot reach the cluster still ends the
		// leadership, and says why it wrote nothing.
		if err := holder.Resign(context.Background()); !errors.Is(err, coordinationtest.ErrUnreachable) {
			t.Fatalf("Resign of a cut-off holder = %v, want ErrUnreachable", err)
		}
		scEnded(t, holder, coordination.ErrNotHeld)
		e.resign(successor)
	})
}

func TestLeadershipResignationHandsOverWithinOnePollInterval(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		first := e.campaign(node2)
		second := e.campaign(node3)
		e.runTo(3_500)

		e.resign(holder)
		e.checkLeaseTombstone(holder)
		if e.roster() != "node-2,node-3" {
			t.Fatalf("roster after the resignation = %s, want node-2,node-3", e.roster())
		}

		e.settle()
		if e.plain {
			first.waiting(t, "a poll-only standby before its next poll")
			e.runTo(3_500 + scPoll.Milliseconds())
		}
		successor := first.won(t)
		if granted := successor.Lease().GrantedAt - scAt(3_500); granted > scPoll.Milliseconds() || (!e.plain && granted != 0) {
			t.Fatalf("the standby took the role %d ms after the resignation", granted)
		}
		if !successor.Token().Supersedes(holder.Token()) {
			t.Fatalf("%s does not supersede %s", successor.Token(), holder.Token())
		}
		second.waiting(t, "after the handover")
		if err := second.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(successor)
	})
}

func TestLeadershipRejoiningMemberRanksLast(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		first := e.campaign(node2)
		second := e.campaign(node3)

		node1.raw.Cut()
		e.runTo(30_000)
		successor := first.won(t)
		node1.raw.Heal()
		e.runTo(31_000)
		scEnded(t, holder, coordination.ErrFenced)

		// node-1 restarts as a new process and registers again.
		restarted := e.member("node-1")
		rejoin := e.campaign(restarted)
		rejoin.waiting(t, "after the rejoin")
		if e.roster() != "node-2,node-3,node-1" {
			t.Fatalf("roster after the rejoin = %s, want node-2,node-3,node-1", e.roster())
		}
		state := e.state()
		if rank, _ := state.RankOf(node3.id); rank != 0 {
			t.Fatalf("node-3 ranks %d, want 0", rank)
		}
		if rank, _ := state.RankOf(node1.id); rank != 1 {
			t.Fatalf("the rejoined node-1 ranks %d, want 1", rank)
		}

		// The successor dies after its renewal at 40000; node-3, not the
		// rejoined node-1, takes the role at the deadline.
		e.runTo(40_000)
		node2.raw.Cut()
		e.runTo(70_000)
		replacement := second.won(t)
		if got := replacement.Lease().GrantedAt; got != scAt(70_000) {
			t.Fatalf("node-3 took the role at %d ms, want 70000", got-scStart)
		}
		rejoin.waiting(t, "after node-3 won")
		if got := restarted.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the rejoined node-1 minted %d times", got)
		}
		e.runTo(75_000) // rank 1's instant, had node-3 died too
		rejoin.waiting(t, "while node-3 renews")

		if err := rejoin.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		if err := successor.Resign(context.Background()); !errors.Is(err, coordinationtest.ErrUnreachable) {
			t.Fatalf("Resign of the cut-off successor = %v, want ErrUnreachable", err)
		}
		e.resign(replacement)
	})
}

func TestLeadershipCancelledAcquireReturnsTheContextError(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)

		standby := e.campaign(node2)
		e.runTo(2_500)
		if err := standby.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("AcquireLeadership after cancel = %v, want context.Canceled", err)
		}
		if e.roster() != "node-1" {
			t.Fatalf("roster after the cancelled wait = %s, want node-1: the member left", e.roster())
		}
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the cancelled standby minted %d times", got)
		}
		e.checkNoWatchers("after the cancelled wait")

		// A deadline ends the wait too. Only the bubble's own time moves
		// it, when every goroutine is parked on the ManualClock.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		timed := e.campaignCtx(ctx, cancel, node2)
		<-timed.done
		cancel()
		if !errors.Is(timed.err, context.DeadlineExceeded) || timed.leadership != nil {
			t.Fatalf("AcquireLeadership past its deadline = %v, %v; want context.DeadlineExceeded", timed.leadership, timed.err)
		}

		// A context that ended before the call writes nothing.
		node3 := e.member("node-3")
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		late := e.campaignCtx(ctx, cancel, node3)
		if !late.finished() || !errors.Is(late.err, context.Canceled) {
			t.Fatalf("AcquireLeadership with an ended context = %v, finished %t; want context.Canceled", late.err, late.finished())
		}
		scSameCalls(t, node3, map[coordinationtest.Op]int{}, "a call with an ended context")
		e.checkNoWatchers("at the end")
		e.resign(holder)
	})
}

func TestLeadershipFenceOnTheFirstLeaseWriteIsNotAWin(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		intruder := e.cluster.Transport("intruder")
		release := node1.raw.Block(coordinationtest.OpWriteLease)
		c := e.campaign(node1)
		node1.raw.WaitCalls(coordinationtest.OpWriteLease, 1) // minted, and held at the first lease write
		stolen, err := intruder.AcquireEpoch(context.Background(), e.role)
		if err != nil {
			t.Fatal(err)
		}
		release()
		e.settle()
		c.waiting(t, "after the fenced first write")
		if state := e.state(); state.Lease != nil {
			t.Fatalf("a fenced lease write landed: %+v", state.Lease)
		}

		e.runTo(scPoll.Milliseconds() - 1)
		c.waiting(t, "before one poll interval passed")
		if got := node1.raw.Calls(coordinationtest.OpAcquireEpoch); got != 1 {
			t.Fatalf("the member minted %d times within a poll interval of the fence, want 1", got)
		}
		e.runTo(scPoll.Milliseconds())
		l := c.won(t)
		if got := node1.raw.Calls(coordinationtest.OpAcquireEpoch); got != 2 {
			t.Fatalf("the member minted %d times, want 2", got)
		}
		if !l.Token().Supersedes(stolen) {
			t.Fatalf("the winning token %s does not supersede the intruder's %s", l.Token(), stolen)
		}
		e.resign(l)
	})
}

func TestLeadershipRegistersOnceWhileReadsFail(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		transient := errors.New("NOT_LEADER_OR_FOLLOWER")
		for range 3 {
			node1.raw.FailNext(coordinationtest.OpReadPartition, transient)
		}
		release := node1.raw.Block(coordinationtest.OpReadPartition)
		c := e.campaign(node1)
		node1.raw.WaitCalls(coordinationtest.OpReadPartition, 1)
		c.waiting(t, "while the read hangs")
		release()
		for !c.finished() {
			if e.now() > 3*scPoll.Milliseconds() {
				t.Fatalf("at %d ms the member still waits after 3 failed reads", e.now())
			}
			if got := node1.raw.Calls(coordinationtest.OpAppend); got != 1 {
				t.Fatalf("at %d ms the member appended %d registrations, want 1", e.now(), got)
			}
			e.runTo(e.now() + scPoll.Milliseconds())
		}
		l := c.won(t)
		if got := node1.raw.Calls(coordinationtest.OpAppend); got != 1 {
			t.Fatalf("the member appended %d registrations, want 1", got)
		}
		if got := node1.raw.Calls(coordinationtest.OpReadPartition); got != 4 {
			t.Fatalf("the member read %d times, want 4", got)
		}
		e.resign(l)
	})
}

func TestLeadershipRegistersOnceWhileItsRegistrationIsNotVisible(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		catchUp := node1.raw.StaleReads()
		c := e.campaign(node1)
		e.runTo(20_000)
		c.waiting(t, "while its registration is not visible")
		if got := node1.raw.Calls(coordinationtest.OpAppend); got != 1 {
			t.Fatalf("the member appended %d registrations, want 1", got)
		}
		if got := node1.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the member minted %d times without a rank", got)
		}
		catchUp()
		e.runTo(20_000 + scPoll.Milliseconds())
		l := c.won(t)
		if got := node1.raw.Calls(coordinationtest.OpAppend); got != 1 {
			t.Fatalf("the member appended %d registrations, want 1", got)
		}
		e.resign(l)
	})
}

func TestLeadershipReappendsARegistrationThatStaysInvisible(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		catchUp := node1.raw.StaleReads()
		c := e.campaign(node1)
		twoLeases := 2 * scLease.Milliseconds()
		e.runTo(twoLeases - 1)
		if got := node1.raw.Calls(coordinationtest.OpAppend); got != 1 {
			t.Fatalf("the member appended %d registrations before two lease durations, want 1", got)
		}
		e.runTo(twoLeases + scPoll.Milliseconds())
		if got := node1.raw.Calls(coordinationtest.OpAppend); got != 2 {
			t.Fatalf("the member appended %d registrations after two lease durations, want 2", got)
		}
		catchUp()
		e.runTo(twoLeases + 2*scPoll.Milliseconds())
		l := c.won(t)
		if got := node1.raw.Calls(coordinationtest.OpAppend); got != 2 {
			t.Fatalf("the member appended %d registrations, want 2", got)
		}
		e.resign(l)
	})
}

func TestLeadershipTransientRenewalFailureIsRetriedWithinOnePollInterval(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		standby := e.campaign(node2)
		node1.raw.FailNext(coordinationtest.OpWriteLease, errors.New("NOT_ENOUGH_REPLICAS"))

		e.runTo(10_000)
		if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != 2 {
			t.Fatalf("lease writes = %d, want 2: the grant and the failed renewal", got)
		}
		scHolds(t, holder)
		if got := holder.Lease().GrantedAt; got != scAt(0) {
			t.Fatalf("a failed renewal moved the lease to %d ms", got-scStart)
		}
		e.runTo(10_000 + scPoll.Milliseconds() - 1)
		if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != 2 {
			t.Fatalf("lease writes = %d before the retry instant, want 2", got)
		}
		e.runTo(10_000 + scPoll.Milliseconds())
		if got := holder.Lease().GrantedAt; got != scAt(11_000) {
			t.Fatalf("the retry granted the lease at %d ms, want 11000", got-scStart)
		}
		e.runTo(21_000)
		if got := holder.Lease().GrantedAt; got != scAt(21_000) {
			t.Fatalf("the renewal after the retry granted the lease at %d ms, want 21000", got-scStart)
		}

		// A cut that heals before the deadline costs nothing either.
		node1.raw.Cut()
		e.runTo(45_500)
		scHolds(t, holder)
		node1.raw.Heal()
		e.runTo(46_000)
		if got := holder.Lease().GrantedAt; got != scAt(46_000) {
			t.Fatalf("the first retry after the heal granted the lease at %d ms, want 46000", got-scStart)
		}
		e.runTo(100_000)
		scHolds(t, holder)
		standby.waiting(t, "while the holder survives")
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the standby minted %d times", got)
		}
		e.checkToken(holder.Token(), "at the end")
		e.resign(holder)
		e.handOver()
		e.resign(standby.won(t))
	})
}

func TestLeadershipGuardedWriteAfterAFenceIsRefused(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		l := e.acquireNow(node1)
		commands := coordination.TopicPartition{Topic: scCommands.Topic}
		err := l.Write(context.Background(), scCommands)
		if e.plain {
			if err == nil || errors.Is(err, coordination.ErrFenced) {
				t.Fatalf("Write over a transport without ExtendedTransport.WriteGuarded = %v, want an error that is no fence", err)
			}
			scHolds(t, l)
		} else {
			if err != nil {
				t.Fatalf("Write of the holder: %v", err)
			}
			if entries := e.cluster.Entries(commands); len(entries) != 1 || entries[0].Token != l.Token() {
				t.Fatalf("commands = %+v, want one record under %s", entries, l.Token())
			}
		}

		// Another process mints the role: no clock takes part in the fence.
		if _, err := e.cluster.Transport("intruder").AcquireEpoch(context.Background(), e.role); err != nil {
			t.Fatal(err)
		}
		if e.plain {
			err = l.Renew(context.Background())
		} else {
			err = l.Write(context.Background(), scCommands)
		}
		if !errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("the first write after the mint = %v, want ErrFenced", err)
		}
		scEnded(t, l, coordination.ErrFenced)
		if !e.plain {
			if entries := e.cluster.Entries(commands); len(entries) != 1 {
				t.Fatalf("a fenced guarded write landed: %d records", len(entries))
			}
		}
		before := scCalls(node1)
		if err := l.Write(context.Background(), scCommands); err == nil {
			t.Fatal("Write after Done succeeded")
		}
		e.runTo(60_000)
		scSameCalls(t, node1, before, "after Done closed")
		if err := l.Resign(context.Background()); !errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("Resign after the fence = %v, want ErrFenced", err)
		}
	})
}

func TestLeadershipHandoverAcrossAnExhaustedEpoch(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		standby := e.campaign(node2)
		exhausted := e.cluster.ExhaustEpoch(e.role)

		e.runTo(10_000)
		scEnded(t, holder, coordination.ErrFenced)
		e.runTo(29_999)
		standby.waiting(t, "before the deadline of the fenced holder's lease")
		e.runTo(30_000)
		successor := standby.won(t)
		if successor.Token().ProducerEpoch() != 0 || successor.Token().ProducerID() == exhausted.ProducerID() {
			t.Fatalf("the mint after %s took %s, want a fresh producer id at epoch 0", exhausted, successor.Token())
		}
		if !successor.Token().Supersedes(exhausted) || !successor.Token().Supersedes(holder.Token()) {
			t.Fatalf("%s does not supersede %s and %s", successor.Token(), exhausted, holder.Token())
		}
		e.runTo(40_000)
		scHolds(t, successor)
		e.resign(successor)
		if err := holder.Resign(context.Background()); !errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("Resign after the fence = %v", err)
		}
	})
}

func TestLeadershipResignIsIdempotentAndSafeWithRenew(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		l := e.acquireNow(node1)
		ctx := context.Background()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					err := l.Renew(ctx)
					if errors.Is(err, coordination.ErrNotHeld) {
						return
					}
					if err != nil {
						t.Errorf("Renew: %v", err)
						return
					}
				}
			})
		}
		for range 3 {
			wg.Go(func() {
				if err := l.Resign(ctx); err != nil {
					t.Errorf("Resign: %v", err)
				}
			})
		}
		wg.Wait()
		scEnded(t, l, coordination.ErrNotHeld)
		ended := l.Err()

		// Exactly one lease tombstone, and no lease record after it.
		leaseKey := string(coordination.EncodeKey(coordination.LeaseKey(e.role)))
		tombstones, afterTombstone := 0, 0
		for _, entry := range e.cluster.Entries(e.tp) {
			if string(entry.Key) != leaseKey {
				continue
			}
			if coordination.IsTombstone(entry.Value) {
				tombstones++
			} else if tombstones > 0 {
				afterTombstone++
			}
		}
		if tombstones != 1 || afterTombstone != 0 {
			t.Fatalf("the log holds %d lease tombstones and %d lease records after one, want 1 and 0", tombstones, afterTombstone)
		}
		before := scCalls(node1)
		if err := l.Resign(ctx); err != nil {
			t.Fatalf("a second Resign = %v, want nil", err)
		}
		if err := l.Renew(ctx); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Renew after Resign = %v, want ErrNotHeld", err)
		}
		e.runTo(60_000)
		scSameCalls(t, node1, before, "after Done closed")
		if l.Err() != ended {
			t.Fatalf("Err changed from %v to %v", ended, l.Err())
		}
	})
}

func TestLeadershipResignWithAnEndedContextStillWritesItsTombstone(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		standby := e.campaign(node2)
		e.runTo(5_000)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := holder.Resign(ctx); err != nil {
			t.Fatalf("Resign with an ended context: %v", err)
		}
		scEnded(t, holder, coordination.ErrNotHeld)
		e.checkLeaseTombstone(holder)
		e.handOver()
		e.resign(standby.won(t))
	})
}

func TestLeadershipResignWhileARenewalHangs(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		l := e.acquireNow(node1)
		release := node1.raw.Block(coordinationtest.OpWriteLease)
		e.runTo(10_000)
		node1.raw.WaitCalls(coordinationtest.OpWriteLease, 2) // the renewal hangs

		resigned := make(chan error, 1)
		go func() { resigned <- l.Resign(context.Background()) }()
		// Resign stops the hanging renewal, and its own tombstone reaches
		// the gate next.
		node1.raw.WaitCalls(coordinationtest.OpWriteLease, 3)
		e.settle()
		select {
		case err := <-resigned:
			t.Fatalf("Resign returned %v before its tombstone was written", err)
		default:
		}
		release()
		if err := <-resigned; err != nil {
			t.Fatalf("Resign: %v", err)
		}
		scEnded(t, l, coordination.ErrNotHeld)
		if state := e.state(); state.Lease != nil || len(state.Roster) != 0 {
			t.Fatalf("after the resignation the log holds %+v", state)
		}
		if got := l.Lease().GrantedAt; got != scAt(0) {
			t.Fatalf("the cancelled renewal moved the lease to %d ms", got-scStart)
		}
	})
}

func TestLeadershipInvalidOptionsWriteNothing(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	node1 := cluster.Transport("node-1")
	role, member := fxRole(t, "controller"), fxMember(t, "node-1")
	cases := []struct {
		option coordination.Option
		name   string
	}{
		{coordination.WithLeaseDuration(0), "WithLeaseDuration"},
		{coordination.WithLeaseDuration(-time.Second), "WithLeaseDuration"},
		{coordination.WithRenewInterval(0), "WithRenewInterval"},
		{coordination.WithRenewInterval(time.Minute), "WithRenewInterval"},
		{coordination.WithChallengeStagger(-1), "WithChallengeStagger"},
		{coordination.WithPollInterval(0), "WithPollInterval"},
		{coordination.WithPartitions(0), "WithPartitions"},
		{coordination.WithTopic(""), "WithTopic"},
		{coordination.WithClock(nil), "WithClock"},
		{coordination.WithLogger(nil), "WithLogger"},
		{coordination.WithLeaseConfig(coordination.LeaseConfig{}), "WithLeaseConfig"},
	}
	for _, tc := range cases {
		l, err := coordination.AcquireLeadership(context.Background(), node1, role, member, tc.option)
		if err == nil || l != nil {
			t.Fatalf("AcquireLeadership with a bad %s = %v, %v; want an error", tc.name, l, err)
		}
		if !strings.Contains(err.Error(), tc.name) {
			t.Errorf("the error %q does not name %s", err, tc.name)
		}
	}
	for name, call := range map[string]func() (*coordination.Leadership, error){
		"nil transport": func() (*coordination.Leadership, error) {
			return coordination.AcquireLeadership(context.Background(), nil, role, member)
		},
		"zero role": func() (*coordination.Leadership, error) {
			return coordination.AcquireLeadership(context.Background(), node1, coordination.Role{}, member)
		},
		"zero member": func() (*coordination.Leadership, error) {
			return coordination.AcquireLeadership(context.Background(), node1, role, coordination.MemberID{})
		},
	} {
		if l, err := call(); err == nil || l != nil {
			t.Errorf("AcquireLeadership with a %s = %v, %v; want an error", name, l, err)
		}
	}
	scSameCalls(t, &scMember{raw: node1}, map[coordinationtest.Op]int{}, "after invalid calls")
	tp, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	if cluster.Watchers(tp) != 0 || cluster.EndOffset(tp) != 0 {
		t.Fatal("an invalid call reached the cluster")
	}
}

func TestLeadershipLostRepliesDuringTheChallenge(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		timeout := errors.New("request timed out")
		// The registration, the mint and the first lease write each land,
		// and each reply is lost on the way back.
		node1.raw.LoseNextReply(coordinationtest.OpAppend, timeout)
		node1.raw.LoseNextReply(coordinationtest.OpAcquireEpoch, timeout)
		node1.raw.LoseNextReply(coordinationtest.OpWriteLease, timeout)
		c := e.campaign(node1)
		for !c.finished() {
			if e.now() > 10*scPoll.Milliseconds() {
				t.Fatalf("at %d ms the member still waits", e.now())
			}
			e.runTo(e.now() + scPoll.Milliseconds())
		}
		l := c.won(t)
		e.checkToken(l.Token(), "after the win")
		// A lost mint costs one epoch, because the member never learned
		// it; a lost lease write is retried under the epoch it has.
		if got := node1.raw.Calls(coordinationtest.OpAcquireEpoch); got != 2 {
			t.Fatalf("the member minted %d times, want 2", got)
		}
		if got := l.Token().ProducerEpoch(); got != 1 {
			t.Fatalf("the member holds epoch %d, want 1", got)
		}
		if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != 2 {
			t.Fatalf("the member wrote %d first leases, want 2", got)
		}
		if e.roster() != "node-1" {
			t.Fatalf("roster = %s, want node-1", e.roster())
		}
		e.resign(l)
	})
}

// TestLeadershipRestartedHolderTakesItsRoleBackWithTheDuplicateCheck: with
// WithDuplicateMemberCheck, a holder that crashes and restarts while its
// lease is live waits for one quiet renew interval (and poll), then takes
// the role back, ahead of the standby, and its new epoch fences its old
// incarnation. It does not wait for the deadline, and it does not
// challenge at once either: a lease that names the member may belong to a
// second live process with the same member id. (The specification's
// default, a challenge at once, is TestSpecAcquireLeadershipRestartCostsOneEpoch.)
func TestLeadershipRestartedHolderTakesItsRoleBackWithTheDuplicateCheck(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		old := e.acquireNow(node1)
		standby := e.campaign(node2)
		e.runTo(12_000)

		// node-1 crashes (its client is cut) and restarts at once.
		node1.raw.Cut()
		restarted := e.member("node-1")
		again := e.campaign(restarted, coordination.WithDuplicateMemberCheck())
		e.runTo(22_000)
		again.waiting(t, "before the lease was quiet for a renew interval and a poll")
		e.runTo(23_000)
		l := again.won(t)
		if !l.Token().Supersedes(old.Token()) {
			t.Fatalf("%s does not supersede %s", l.Token(), old.Token())
		}
		if got := l.Lease().GrantedAt; got != scAt(23_000) {
			t.Fatalf("the restarted member was granted its lease at %d ms, want 23000", got-scStart)
		}
		standby.waiting(t, "while node-1 holds")
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the standby minted %d times", got)
		}
		if e.roster() != "node-2,node-1" {
			t.Fatalf("roster = %s, want node-2,node-1", e.roster())
		}
		node1.raw.Heal()
		e.runTo(30_000) // the old incarnation's renewal
		scEnded(t, old, coordination.ErrFenced)
		if err := old.Resign(context.Background()); !errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("Resign of the fenced incarnation = %v", err)
		}
		if err := standby.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(l)
	})
}

// TestLeadershipLiveDuplicateMemberIsRefused (issue 10, bug 9): a second
// process starts with the member id of a live holder. The lease that names
// the id is renewed while the second process waits, so AcquireLeadership
// returns ErrDuplicateMember instead of fencing the live holder, and it
// deregisters nothing of the holder's. The watch is WithDuplicateMemberCheck.
func TestLeadershipLiveDuplicateMemberIsRefused(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		holder := e.acquireNow(e.member("node-1"))
		duplicate := e.campaign(e.member("node-1"), coordination.WithDuplicateMemberCheck())
		e.runTo(11_000) // the holder's renewal at 10 s, and the next poll
		if !duplicate.finished() {
			t.Fatalf("the duplicate is still waiting after the holder renewed")
		}
		if !errors.Is(duplicate.err, coordination.ErrDuplicateMember) {
			t.Fatalf("the duplicate's AcquireLeadership = %v, want ErrDuplicateMember", duplicate.err)
		}
		scHolds(t, holder)
		e.checkToken(holder.Token(), "after the duplicate was refused")
		// The refused call wrote no tombstone on the registration key that
		// it shares with the live holder.
		if e.roster() != "node-1" {
			t.Fatalf("roster after the duplicate was refused = %q, want node-1", e.roster())
		}
		e.resign(holder)
	})
}

// TestLeadershipDuplicateStandbyKeepsTheOthersRegistration: two waiting
// processes under one member id. The registration of the second replaces
// the first's; the first is refused with ErrDuplicateMember and must not
// write a tombstone on the key, which now ranks the second. The watch is
// WithDuplicateMemberCheck.
func TestLeadershipDuplicateStandbyKeepsTheOthersRegistration(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		holder := e.acquireNow(e.member("node-0"))
		first := e.campaign(e.member("node-1"), coordination.WithDuplicateMemberCheck())
		e.runTo(1_000)
		second := e.campaign(e.member("node-1"), coordination.WithDuplicateMemberCheck())
		e.runTo(3_000)
		if !first.finished() || !errors.Is(first.err, coordination.ErrDuplicateMember) {
			t.Fatalf("the first of two standbys under one member id: finished %t, err %v; want ErrDuplicateMember", first.finished(), first.err)
		}
		if e.roster() != "node-0,node-1" {
			t.Fatalf("roster after the first duplicate gave up = %q, want node-0,node-1 (the second's registration kept)", e.roster())
		}
		second.waiting(t, "while node-0 holds the role")
		if err := second.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(holder)
	})
}

// TestLeadershipSimultaneousChallengeLeavesOneLeader starts two challengers
// at one instant: the standby of rank 0 at the deadline of a dead holder,
// and the holder itself, restarted, which keeps rank 0. Which of them wins
// depends on the scheduler; that exactly one holds the newest epoch, and
// that the other learns it from its first write, does not.
func TestLeadershipSimultaneousChallengeLeavesOneLeader(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		dead := e.acquireNow(node1)
		standby := e.campaign(node2)
		node1.raw.Cut()
		e.runTo(29_999)

		restarted := e.member("node-1")
		e.clock.Set(scAt(30_000)) // releases the standby's wait
		rejoin := e.campaign(restarted)
		e.runTo(50_000)

		var live []*coordination.Leadership
		for _, c := range []*scCampaign{standby, rejoin} {
			if !c.finished() {
				continue
			}
			l := c.won(t)
			select {
			case <-l.Done():
				if !errors.Is(l.Err(), coordination.ErrFenced) {
					t.Fatalf("%s ended with %v, want a fence", l.Member(), l.Err())
				}
			default:
				live = append(live, l)
			}
		}
		if len(live) != 1 {
			t.Fatalf("%d live leaderships after the simultaneous challenge, want 1", len(live))
		}
		e.checkToken(live[0].Token(), "after the simultaneous challenge")
		mints := node2.raw.Calls(coordinationtest.OpAcquireEpoch) + restarted.raw.Calls(coordinationtest.OpAcquireEpoch)
		if mints < 1 || mints > 2 {
			t.Fatalf("the challengers minted %d times, want 1 or 2", mints)
		}
		t.Logf("winner %s with %s after %d mints", live[0].Member(), live[0].Token(), mints)

		_ = dead.Resign(context.Background()) // cut off: no tombstone
		for _, c := range []*scCampaign{standby, rejoin} {
			if !c.finished() {
				c.waiting(t, "the loser")
				if err := c.abandon(t); !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled AcquireLeadership = %v", err)
				}
			} else if c.leadership != live[0] {
				_ = c.leadership.Resign(context.Background())
			}
		}
		e.resign(live[0])
	})
}

// TestLeadershipDuplicateIsRefusedBeforeItWrites (issue 30, item 4: the
// CLI kept this check of its own): with WithDuplicateMemberCheck, a second
// process under the member id of a live holder, or of a live standby whose
// heartbeats land, is refused with ErrDuplicateMember before it writes
// anything. Before, it registered first, and its registration replaced
// the live standby's, which then gave up as the "duplicate".
func TestLeadershipDuplicateIsRefusedBeforeItWrites(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		hb := coordination.WithHeartbeatInterval(5 * time.Second)
		dup := coordination.WithDuplicateMemberCheck()
		holder := e.acquireNow(e.member("node-1"), hb)
		node2 := e.member("node-2")
		standby := e.campaign(node2, hb, dup)
		e.runTo(2_000)
		registered, _ := e.state().Entry(node2.id)

		// The live holder's member id: its renewal at 10 s shows it alive.
		holderDup := e.member("node-1")
		refused := e.campaign(holderDup, hb, dup)
		e.runTo(11_000)
		if !refused.finished() || !errors.Is(refused.err, coordination.ErrDuplicateMember) {
			t.Fatalf("a second process under the holder's member id: finished %t, err %v; want ErrDuplicateMember", refused.finished(), refused.err)
		}
		if got := holderDup.raw.Calls(coordinationtest.OpAppend); got != 0 {
			t.Fatalf("the refused duplicate of the holder appended %d records; want none", got)
		}

		// The live standby's member id: its next heartbeat shows it alive.
		standbyDup := e.member("node-2")
		refused = e.campaign(standbyDup, hb, dup)
		e.runTo(18_000)
		if !refused.finished() || !errors.Is(refused.err, coordination.ErrDuplicateMember) {
			t.Fatalf("a second process under the standby's member id: finished %t, err %v; want ErrDuplicateMember", refused.finished(), refused.err)
		}
		if got := standbyDup.raw.Calls(coordinationtest.OpAppend); got != 0 {
			t.Fatalf("the refused duplicate of the standby appended %d records; want none", got)
		}
		if entry, ok := e.state().Entry(registered.Member); !ok || entry.Offset != registered.Offset {
			t.Fatalf("the live standby's entry = %+v, %t; want its registration at offset %d kept", entry, ok, registered.Offset)
		}
		standby.waiting(t, "after its duplicate was refused")
		scHolds(t, holder)

		if err := standby.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(holder)
	})
}

// TestLeadershipCrashedStandbyIsTakenOverAfterOneHeartbeat: with
// WithDuplicateMemberCheck and heartbeats, a standby registration of the
// member that gets no heartbeat (a crashed earlier run) holds the new
// process back one heartbeat interval, one poll interval and a second,
// before it writes anything; the process then registers in its place.
func TestLeadershipCrashedStandbyIsTakenOverAfterOneHeartbeat(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		hb := coordination.WithHeartbeatInterval(5 * time.Second)
		dup := coordination.WithDuplicateMemberCheck()
		holder := e.acquireNow(e.member("node-1"), hb)
		crashed := e.member("node-2")
		gone := e.campaign(crashed, hb, dup)
		e.runTo(1_000)
		crashed.raw.Cut() // no heartbeat lands from now on
		restarted := e.member("node-2")
		again := e.campaign(restarted, hb, dup)
		e.runTo(7_999) // 1 s + 5 s + 1 s (poll) + 1 s
		if got := restarted.raw.Calls(coordinationtest.OpAppend); got != 0 {
			t.Fatalf("the restarted standby appended %d records during the watch; want none", got)
		}
		e.runTo(9_000)
		if got := restarted.raw.Calls(coordinationtest.OpAppend); got == 0 {
			t.Fatal("the restarted standby did not register after the watch")
		}
		again.waiting(t, "while node-1 holds")
		if e.roster() != "node-1,node-2" {
			t.Fatalf("roster = %s, want node-1,node-2", e.roster())
		}
		if err := again.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		crashed.raw.Heal()
		if err := gone.abandon(t); err == nil {
			t.Fatal("the crashed standby's AcquireLeadership returned no error")
		}
		e.resign(holder)
	})
}
