package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// The regression tests of issue 9 ("no needless failovers") on the
// in-memory cluster, in virtual time: scLease 30 s, scRenew 10 s, scStagger
// 5 s, scPoll 1 s. The Kafka-level ones (bounded calls, exact errors) are
// in kafka_liveness_test.go.

// TestLivenessLateChallengeIsAbandoned (issue 9, item 1): a standby decides
// to challenge while the cluster cannot serve its InitProducerId. Its mint
// attempt gives up after one poll interval, and it reads the partition
// again before it tries again. The holder comes back and renews in the
// meantime, so when the cluster serves mints again the standby mints
// nothing: the view that justified the challenge is gone. Before the fix
// the mint waited for ever and landed when the cluster recovered, fencing
// the healthy holder.
func TestLivenessLateChallengeIsAbandoned(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		standby := e.campaign(node2)

		node1.raw.Cut() // the holder's renewals fail from 10 s on
		releaseMints := node2.raw.Block(coordinationtest.OpAcquireEpoch)
		e.runTo(30_000) // the deadline: the standby challenges, and its mint hangs
		if node2.raw.Calls(coordinationtest.OpAcquireEpoch) == 0 {
			t.Fatalf("the standby did not challenge at the deadline")
		}
		node1.raw.Heal()
		e.runTo(33_000) // the holder's renewal retries land; the standby's attempts give up
		attempts := node2.raw.Calls(coordinationtest.OpAcquireEpoch)
		releaseMints()
		e.runTo(45_000)
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != attempts {
			t.Fatalf("the standby minted again (%d attempts, %d before the release) against a renewed lease", got, attempts)
		}
		e.checkToken(holder.Token(), "after the cluster served mints again")
		scHolds(t, holder)
		standby.waiting(t, "while the renewed holder leads")
		if err := standby.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(holder)
	})
}

// TestLivenessNoFailbackAfterAFence (issue 9, item 2): a standby minted and
// so fenced the holder, but its first lease write has not landed yet, so the
// lease still names the deposed holder. The deposed holder competes again at
// once. Its transport saw the lease's token fenced (or, over a transport
// of the four interfaces only, with WithDuplicateMemberCheck, the
// coordinator holds another token than that lease), so the deposed member
// competes as a standby at the tail, and the member that minted takes the
// role. Before the fix the lease's name made it challenge at once
// and fence the new leader (seen 41 ms after each fence on Kafka).
func TestLivenessNoFailbackAfterAFence(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		deposed := e.acquireNow(node1)
		standby := e.campaign(node2)

		node1.raw.Cut() // the holder goes quiet: the standby challenges at the deadline
		node2.raw.FailNext(coordinationtest.OpWriteLease, errors.New("injected: NOT_ENOUGH_REPLICAS"))
		node2.raw.FailNext(coordinationtest.OpWriteLease, errors.New("injected: NOT_ENOUGH_REPLICAS"))
		e.runTo(30_000) // the standby mints; its first lease write fails
		minted := e.cluster.Token(e.role)
		if minted == deposed.Token() {
			t.Fatalf("the standby did not mint at the deadline")
		}
		node1.raw.Heal()
		e.runTo(30_500) // the deposed holder's renewal retry is fenced
		e.runTo(31_000)
		scEnded(t, deposed, coordination.ErrFenced)
		if state := e.state(); state.Lease == nil || state.Lease.Member != node1.id {
			t.Fatalf("the lease = %+v, want the deposed holder's still", state.Lease)
		}
		mintsBefore := node1.raw.Calls(coordinationtest.OpAcquireEpoch)
		// The follower path's transport saw its token fenced (ExtendedTransport.Fenced).
		// A transport of the four interfaces only tells it through
		// DescribeEpoch, under WithDuplicateMemberCheck; without it, the
		// specification's restart rule challenges at once.
		var extra []coordination.Option
		if e.plain {
			extra = append(extra, coordination.WithDuplicateMemberCheck())
		}
		again := e.campaign(node1, extra...)
		e.runTo(35_000)
		if got := node1.raw.Calls(coordinationtest.OpAcquireEpoch); got != mintsBefore {
			t.Fatalf("the deposed holder minted %d times after its fence: failback", got-mintsBefore)
		}
		leader := standby.won(t)
		if leader.Token() != minted {
			t.Fatalf("the new leader holds %s, want the token it minted, %s", leader.Token(), minted)
		}
		again.waiting(t, "while the member that fenced it leads")
		if e.roster() != "node-2,node-1" {
			t.Fatalf("roster = %s, want node-2,node-1 (the deposed member at the tail)", e.roster())
		}
		if err := again.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(leader)
	})
}

// TestLivenessStaggerHoldsAfterResign (issue 9, item 3): with
// WithResignationAnchor, after a resignation the standbys anchor their
// stagger on the lease tombstone's timestamp, so rank 0 takes the role at once and rank 1 waits one
// stagger. Before the fix rank 1 anchored on its own registration, long
// past, and challenged at once too (it won 3 of 4 handovers on Kafka).
func TestLivenessStaggerHoldsAfterResign(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		e.cluster.SetClock(e.clock)
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		rank0 := e.campaign(node2, coordination.WithResignationAnchor())
		rank1 := e.campaign(node3, coordination.WithResignationAnchor())
		e.runTo(12_000)
		e.resign(holder)
		// The standby may take the role the moment Resign returns, so the
		// state is folded up to the lease tombstone.
		if got := e.stateAtLeaseTombstone().LeaseClearedAt; got != scAt(12_000) {
			t.Fatalf("LeaseClearedAt = %d ms, want 12000", got-scStart)
		}
		e.handOver()
		leader := rank0.won(t)
		rank1.waiting(t, "after the handover to rank 0")
		if got := node3.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the rank 1 standby challenged %d times after the resignation, want 0", got)
		}
		if err := rank1.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(leader)
	})
}

// TestLivenessStaggerRank1TakesOverOneStaggerAfterResign: with
// WithResignationAnchor, when rank 0 is gone, rank 1 takes a resigned role
// one stagger after the tombstone, not at once and not a lease later.
func TestLivenessStaggerRank1TakesOverOneStaggerAfterResign(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		e.cluster.SetClock(e.clock)
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		rank0 := e.campaign(node2, coordination.WithResignationAnchor())
		rank1 := e.campaign(node3, coordination.WithResignationAnchor())
		e.runTo(12_000)
		node2.raw.Cut() // rank 0 cannot mint
		e.resign(holder)
		e.runTo(16_000)
		rank1.waiting(t, "before one stagger after the resignation")
		e.runTo(17_000)
		leader := rank1.won(t)
		if got := leader.Lease().GrantedAt; got != scAt(17_000) {
			t.Fatalf("rank 1 took the role at %d ms, want 17000 (the tombstone plus one stagger)", got-scStart)
		}
		node2.raw.Heal()
		if err := rank0.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(leader)
	})
}

// TestLivenessRenewalPreemptsAStuckWrite (issue 9, item 5): a guarded write
// hangs for longer than the lease. The due renewal waits for it until one
// renew interval before the lease's deadline, then cancels it and renews,
// so the lease never lapses and
// the standby never challenges. The cancelled write says why it failed,
// and the leadership goes on.
//
// It runs over the transport itself only: coordinationtest.Plain hides
// ExtendedTransport.WriteGuarded, which a write needs.
func TestLivenessRenewalPreemptsAStuckWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		standby := e.campaign(node2)

		release := node1.raw.Block(coordinationtest.OpWriteGuarded) // every write hangs until 50 s
		written := make(chan error, 1)
		go func() {
			written <- holder.Write(context.Background(), coordination.GuardedRecord{Topic: "commands", Value: []byte("open valve 7")})
		}()
		e.runTo(19_000)
		select {
		case err := <-written:
			t.Fatalf("the stuck write returned before the renewal preempted it: %v", err)
		default:
		}
		e.runTo(20_000) // the renewal fell due at 10 s and waited until deadline (30 s) - renew interval (10 s)
		err := <-written
		if err == nil || !strings.Contains(err.Error(), "renewal cancelled it") {
			t.Fatalf("the preempted write returned %v, want an error that names the renewal", err)
		}
		if got := holder.Lease().GrantedAt; got != scAt(20_000) {
			t.Fatalf("the lease was renewed at %d ms, want 20000", got-scStart)
		}
		e.runTo(50_000) // past the first lease's deadline (30 s) and the write's hang
		release()
		scHolds(t, holder)
		e.checkToken(holder.Token(), "after a write hung for longer than the lease")
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the standby challenged %d times while the holder's write hung", got)
		}
		if err := holder.Write(context.Background(), coordination.GuardedRecord{Topic: "commands", Value: []byte("open valve 8")}); err != nil {
			t.Fatalf("a write after the hang: %v", err)
		}
		if err := standby.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(holder)
	})
}

// stateAtLeaseTombstone folds the partition of the role up to and with its
// first lease tombstone.
func (e *scEnv) stateAtLeaseTombstone() coordination.RoleState {
	e.t.Helper()
	records := e.cluster.Records(e.tp)
	for i, record := range records {
		key, err := coordination.DecodeKey(record.Key)
		if err != nil || key.Kind != coordination.KindLease || !coordination.IsTombstone(record.Value) {
			continue
		}
		state, err := coordination.BuildRoleState(e.role, records[:i+1])
		if err != nil {
			e.t.Fatalf("BuildRoleState: %v", err)
		}
		return state
	}
	e.t.Fatal("no lease tombstone in the partition of the role")
	return coordination.RoleState{}
}

// lvSlowLeaseWrites is the transport of a member whose lease writes take
// hold for delay of the test's clock, as a commit does while the role's
// transaction coordinator moves: a write whose context ends first is
// abandoned in flight, and returns what KafkaTransport returns then, an
// error that wraps ErrProducerLost (outcome unknown).
type lvSlowLeaseWrites struct {
	*coordinationtest.Transport
	clock *scClock
	slow  atomic.Int32 // how many of the next lease writes take delay
	delay time.Duration
}

func (s *lvSlowLeaseWrites) WriteLease(ctx context.Context, tp coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	if s.slow.Add(-1) >= 0 {
		select {
		case <-s.clock.After(s.delay):
		case <-ctx.Done():
			return fmt.Errorf("lease write under %s: the call's context ended (%w) with the transaction in flight: %w", token, ctx.Err(), coordination.ErrProducerLost)
		}
	}
	return s.Transport.WriteLease(ctx, tp, token, key, value)
}

// TestLivenessSlowRenewalWithinTheLeaseKeepsTheLeadership (issue 9, found
// on the 3-node cluster): a renewal whose commit takes longer than a renew
// interval, but lands before the deadline of the lease it renews, keeps the
// leadership. A renewal attempt was bounded by the renew interval, so while
// a transaction coordinator moved (a rolling restart, on a loaded machine)
// a renewal of a 6 s lease renewed every 2 s was abandoned in flight after
// 2 s: ErrProducerLost ended a leadership whose lease had 4 s left, and
// whose renewal often committed anyway. Here the renewal due at 10 s takes
// 15 s; the lease it renews lasts until 30 s.
func TestLivenessSlowRenewalWithinTheLeaseKeepsTheLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := scNewEnv(t, false)
		defer e.teardown()
		raw := e.cluster.Transport("node-1")
		slow := &lvSlowLeaseWrites{Transport: raw, clock: e.clock, delay: 15 * time.Second}
		node1 := &scMember{id: fxMember(t, "node-1"), raw: raw, transport: slow}
		node2 := e.member("node-2")
		holder := e.acquireNow(node1)
		standby := e.campaign(node2)
		slow.slow.Store(1) // the next renewal
		e.runTo(24_000)    // the renewal due at 10 s is still in flight, 14 s later
		scHolds(t, holder)
		e.runTo(26_000) // it landed at 25 s, and the renewal due since 20 s ran at once
		scHolds(t, holder)
		if got := holder.Lease().GrantedAt; got < scAt(10_000) {
			t.Fatalf("the lease was last renewed at %d ms, want the slow renewal of 10000 ms or a later one", got-scStart)
		}
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the standby challenged %d times while the renewal was slow", got)
		}
		e.checkToken(holder.Token(), "after a renewal slower than the renew interval")
		if err := standby.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(holder)
	})
}

// TestLivenessDeadStandbyRankLapses (issue 10, roster liveness), with
// heartbeats on (WithHeartbeatInterval, every 30 s): a standby
// that stops writing heartbeats (killed, cut off) keeps its registration,
// but its rank lapses after the roster lapse (3 heartbeat intervals, 90 s
// here), so the standby behind it takes over a dead holder at the
// deadline, not one stagger later. The live standby's heartbeats never move
// its registration. The dead standby, back, finds its own rank lapsed and
// registers again at the tail: it mints nothing (no failback).
func TestLivenessDeadStandbyRankLapses(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		hb := coordination.WithHeartbeatInterval(30 * time.Second)
		dead := e.campaign(node2, hb)
		live := e.campaign(node3, hb)
		registered, _ := e.state().Entry(node3.id)
		node2.raw.Cut() // rank 0 is gone for the cluster from now on

		e.runTo(95_000)
		entry, _ := e.state().Entry(node3.id)
		if entry.Offset != registered.Offset || entry.LastSeen != scAt(90_000) {
			t.Fatalf("the live standby's entry = %+v, want offset %d (its registration) and last seen at 90000 (its third heartbeat)", entry, registered.Offset)
		}
		node1.raw.Cut() // the holder dies: its last renewal was at 90 s, deadline 120 s
		e.runTo(119_999)
		live.waiting(t, "before the deadline")
		e.runTo(120_000)
		leader := live.won(t)
		if got := leader.Lease().GrantedAt; got != scAt(120_000) {
			t.Fatalf("the live standby took the role at %d ms, want 120000: the dead rank 0 lapsed at 90000", got-scStart)
		}

		node2.raw.Heal()
		e.runTo(123_000)
		dead.waiting(t, "after it came back")
		back, ok := e.state().Entry(node2.id)
		if !ok || back.Offset <= registered.Offset {
			t.Fatalf("the returned standby's entry = %+v, %t; want a new registration after offset %d (the tail)", back, ok, registered.Offset)
		}
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the lapsed standby minted %d times: failback", got)
		}
		e.checkToken(leader.Token(), "after the lapsed standby came back")
		node1.raw.Heal()
		e.runTo(125_000)
		scEnded(t, holder, coordination.ErrFenced)
		if err := dead.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(leader)
		if _, ok := e.state().Entry(node3.id); ok {
			t.Fatal("the resigned member is still in the roster")
		}
		if hb := e.heartbeatRecord(node3.id); hb == nil || !coordination.IsTombstone(hb.Value) {
			t.Fatalf("the newest heartbeat record of the resigned member = %+v, want a tombstone", hb)
		}
	})
}

// TestLivenessLiveStandbysKeepTheirRanks: with heartbeats on, standbys that wait longer than
// the roster lapse stay alive by their heartbeats, so the rank order holds:
// rank 0 takes over a dead holder at the deadline, rank 1 mints nothing.
func TestLivenessLiveStandbysKeepTheirRanks(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		hb := coordination.WithHeartbeatInterval(30 * time.Second)
		rank0 := e.campaign(node2, hb)
		rank1 := e.campaign(node3, hb)
		roster := e.roster()
		e.runTo(185_000)
		if got := e.roster(); got != roster {
			t.Fatalf("roster = %s after six heartbeat intervals, want %s", got, roster)
		}
		node1.raw.Cut() // last renewal at 180 s, deadline 210 s
		e.runTo(210_000)
		leader := rank0.won(t)
		rank1.waiting(t, "after rank 0 took over")
		if got := node3.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("rank 1 minted %d times", got)
		}
		node1.raw.Heal()
		e.runTo(212_000)
		scEnded(t, holder, coordination.ErrFenced)
		if err := rank1.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(leader)
	})
}

// heartbeatRecord returns the newest record on the heartbeat key of a
// member, or nil.
func (e *scEnv) heartbeatRecord(member coordination.MemberID) *coordination.StateRecord {
	key := coordination.EncodeKey(coordination.HeartbeatKey(e.role, member))
	var newest *coordination.StateRecord
	for _, record := range e.cluster.Records(e.tp) {
		if string(record.Key) == string(key) {
			newest = &record
		}
	}
	return newest
}
