package coordination_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// The scenario tests of Leadership.TransferTo (issue 31) over the
// in-memory cluster, on the harness of leadership_test.go: a manual clock in
// a synctest bubble, over a follower and over a poll-only transport.

// scTransfer is one TransferTo call on a goroutine of its own.
type scTransfer struct {
	done chan struct{}
	err  error
	at   int64 // the instant it returned, relative to scStart
}

// transfer starts TransferTo and returns once the call has parked or
// returned.
func (e *scEnv) transfer(ctx context.Context, l *coordination.Leadership, to coordination.MemberID) *scTransfer {
	tr := &scTransfer{done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		tr.err = l.TransferTo(ctx, to)
		tr.at = e.now()
	}()
	synctest.Wait()
	return tr
}

func (tr *scTransfer) finished() bool {
	select {
	case <-tr.done:
		return true
	default:
		return false
	}
}

// scTransferFault checks that err is a *TransferError of fault.
func scTransferFault(t *testing.T, err error, fault coordination.TransferFault) *coordination.TransferError {
	t.Helper()
	var te *coordination.TransferError
	if !errors.As(err, &te) || te.Fault != fault {
		t.Fatalf("TransferTo = %v; want a *TransferError of fault %s", err, fault)
	}
	return te
}

// ghost registers a member that has no process: nothing of it ever takes
// the role.
func (e *scEnv) ghost(name string) coordination.MemberID {
	e.t.Helper()
	id := fxMember(e.t, name)
	registration := coordination.EncodeRegistration(coordination.Registration{Member: id, RegisteredAt: e.clock.NowMillis()})
	if err := e.cluster.Transport("operator").Append(context.Background(), e.tp, coordination.EncodeKey(coordination.RegistrationKey(e.role, id)), registration); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// TestTransferToALiveMember: the holder hands the role to the standby of
// rank 2 (not the first). The named member takes it with the next epoch of
// the role, the standby of rank 1 never challenges, the holder's
// leadership ends with ErrTransferred, its registration is withdrawn, and a
// write under its token is fenced. With the duplicate-member watch on the
// target, the offer is told apart from a duplicate's lease and taken at
// once too (not after the watch's quiet test).
func TestTransferToALiveMember(t *testing.T) {
	for _, watch := range []bool{false, true} {
		name := "spec"
		var extra []coordination.Option
		if watch {
			name, extra = "duplicate-check", []coordination.Option{coordination.WithDuplicateMemberCheck()}
		}
		t.Run(name, func(t *testing.T) {
			scBothPaths(t, func(t *testing.T, e *scEnv) {
				node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
				holder := e.acquireNow(node1)
				first := e.campaign(node2, extra...)
				target := e.campaign(node3, extra...)
				e.runTo(3_500)

				tr := e.transfer(context.Background(), holder, node3.id)
				if e.plain {
					e.runTo(3_500 + 2*scPoll.Milliseconds()) // the target's poll, then the holder's
				}
				if !tr.finished() || tr.err != nil {
					t.Fatalf("TransferTo = %v (returned %v), want nil", tr.err, tr.finished())
				}
				successor := target.won(t)
				if successor.Member() != node3.id {
					t.Fatalf("successor %s", successor.Member())
				}
				next := holder.Token().ProducerEpoch() + 1
				if successor.Token().ProducerID() != holder.Token().ProducerID() || successor.Token().ProducerEpoch() != next {
					t.Fatalf("the successor holds %s, want the next epoch after %s", successor.Token(), holder.Token())
				}
				e.checkToken(successor.Token(), "after the transfer")
				if granted := successor.Lease().GrantedAt - scAt(3_500); granted > scPoll.Milliseconds() || (!e.plain && granted != 0) {
					t.Fatalf("the target took the role %d ms after the offer", granted)
				}
				scEnded(t, holder, coordination.ErrTransferred)
				scEnded(t, holder, coordination.ErrNotHeld)
				if err := holder.Write(context.Background(), scCommands); !e.plain && !errors.Is(err, coordination.ErrNotHeld) {
					t.Fatalf("Write after the transfer = %v, want ErrNotHeld", err)
				}
				key := coordination.EncodeKey(coordination.LeaseKey(e.role))
				if err := node1.raw.WriteLease(context.Background(), e.tp, holder.Token(), key, []byte("late")); !errors.Is(err, coordination.ErrFenced) {
					t.Fatalf("a write under the old holder's token = %v, want ErrFenced", err)
				}
				first.waiting(t, "after the transfer")
				if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
					t.Fatalf("the standby of rank 1 minted %d times", got)
				}
				if e.roster() != "node-2,node-3" {
					t.Fatalf("roster = %s, want node-2,node-3 (the holder withdrawn)", e.roster())
				}
				if err := holder.Resign(context.Background()); err != nil {
					t.Fatalf("Resign after the transfer = %v, want nil", err)
				}
				if err := first.abandon(t); !errors.Is(err, context.Canceled) {
					t.Fatalf("cancelled AcquireLeadership = %v", err)
				}
				e.resign(successor)
			})
		})
	}
}

// TestTransferRefusedAtOnce: a member not in the roster, the holder
// itself, and the zero member id are refused before anything is written,
// and the holder keeps the role.
func TestTransferRefusedAtOnce(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1)
		before := scCalls(node1)
		for _, c := range []struct {
			to    coordination.MemberID
			fault coordination.TransferFault
		}{
			{fxMember(t, "node-9"), coordination.TransferNotMember},
			{node1.id, coordination.TransferToSelf},
			{coordination.MemberID{}, coordination.TransferNotMember},
		} {
			te := scTransferFault(t, holder.TransferTo(context.Background(), c.to), c.fault)
			if te.Role != e.role || te.Holder != node1.id || te.To != c.to || te.Reason == "" {
				t.Fatalf("TransferError = %+v", te)
			}
		}
		if got, want := scCalls(node1)[coordinationtest.OpWriteLease], before[coordinationtest.OpWriteLease]; got != want {
			t.Fatalf("%d lease writes, want %d: a refused transfer writes nothing", got, want)
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}

// TestTransferToADeadMember: with heartbeats on, a standby whose heartbeats
// stopped for the roster lapse is known dead, and the transfer is refused
// at once; the holder keeps the role and the coordinator's epoch.
func TestTransferToADeadMember(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		beats := coordination.WithHeartbeatInterval(2 * time.Second)
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1, beats)
		standby := e.campaign(node2, beats)
		e.runTo(1_000)
		node2.raw.Cut() // its heartbeats stop landing
		e.runTo(9_000)  // its newest heartbeat is 9 s old, past the lapse of 6 s
		te := scTransferFault(t, holder.TransferTo(context.Background(), node2.id), coordination.TransferMemberDead)
		if te.Reason == "" {
			t.Fatal("no reason")
		}
		scHolds(t, holder)
		e.checkToken(holder.Token(), "after the refused transfer")
		node2.raw.Heal()
		if err := standby.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(holder)
	})
}

// TestTransferNotTakenWithinTheBound: the named member is registered but
// nothing of it runs. The transfer gives up at the bound (15 s with the
// defaults here: max(3 × 5 s, 10 s + 2 × 1 s)), the holder writes its own
// lease again and keeps leading, no epoch is used, and the bystander never
// challenged. A second transfer meanwhile is refused as busy.
func TestTransferNotTakenWithinTheBound(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		bystander := e.campaign(node2)
		ghost := e.ghost("node-ghost")
		e.runTo(2_000)

		tr := e.transfer(context.Background(), holder, ghost)
		scTransferFault(t, holder.TransferTo(context.Background(), node2.id), coordination.TransferBusy)
		e.runTo(2_000 + 14_999)
		if tr.finished() {
			t.Fatalf("TransferTo returned %v at %d ms, before the bound", tr.err, tr.at)
		}
		if lease := e.state().Lease; lease == nil || lease.Member != ghost || lease.Token != holder.Token() {
			t.Fatalf("the lease during the transfer is %+v, want the offer to %s under %s", lease, ghost, holder.Token())
		}
		e.runTo(2_000 + 15_000)
		if !tr.finished() {
			t.Fatal("TransferTo still waits at the bound")
		}
		te := scTransferFault(t, tr.err, coordination.TransferNotTaken)
		if te.Err != nil || tr.at != 17_000 {
			t.Fatalf("TransferTo returned %v at %d ms, want no underlying error at 17000", te, tr.at)
		}
		scHolds(t, holder)
		e.checkToken(holder.Token(), "after the transfer that was not taken")
		if lease := e.state().Lease; lease == nil || lease.Member != node1.id || lease.Token != holder.Token() || lease.GrantedAt != scAt(17_000) {
			t.Fatalf("the lease after the take-back is %+v, want node-1's, granted at 17000", lease)
		}
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the bystander minted %d times", got)
		}
		e.runTo(40_000) // the renewals resumed: the bystander still waits
		scHolds(t, holder)
		bystander.waiting(t, "after the renewals resumed")
		if err := bystander.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(holder)
	})
}

// TestTransferContextCancelled: the caller's context ends mid-transfer: the
// holder takes the role back at once, and TransferTo returns
// TransferNotTaken wrapping the context's error.
func TestTransferContextCancelled(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1)
		ghost := e.ghost("node-ghost")
		ctx, cancel := context.WithCancel(context.Background())
		tr := e.transfer(ctx, holder, ghost)
		e.runTo(3_000)
		cancel()
		e.settle()
		if !tr.finished() {
			t.Fatal("TransferTo still waits after its context ended")
		}
		te := scTransferFault(t, tr.err, coordination.TransferNotTaken)
		if !errors.Is(te, context.Canceled) {
			t.Fatalf("TransferTo = %v, want it to wrap context.Canceled", te)
		}
		scHolds(t, holder)
		if lease := e.state().Lease; lease == nil || lease.Member != node1.id || lease.GrantedAt != scAt(3_000) {
			t.Fatalf("the lease after the cancel is %+v, want node-1's, granted at 3000", lease)
		}
		e.resign(holder)
	})
}

// TestTransferTimeoutOption: WithTransferTimeout refuses an extent ≤ 0 and
// one not below the lease duration with ErrMisconfigured, before anything
// is written; a shorter bound is honoured.
func TestTransferTimeoutOption(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	transport := cluster.Transport("node-1")
	for _, timeout := range []time.Duration{0, -time.Second, coordination.DefaultLeaseDuration} {
		_, err := coordination.AcquireLeadership(context.Background(), transport, fxRole(t, "controller"), fxMember(t, "node-1"), coordination.WithTransferTimeout(timeout))
		if !errors.Is(err, coordination.ErrMisconfigured) {
			t.Errorf("WithTransferTimeout(%v): AcquireLeadership = %v, want ErrMisconfigured", timeout, err)
		}
	}
	if _, err := coordination.NewElector(transport, fxRole(t, "controller"), fxMember(t, "node-1"), coordination.ElectorCallbacks{OnStartedLeading: func(context.Context, *coordination.Leadership) {}},
		coordination.WithSuccessor(nil)); err == nil {
		t.Error("WithSuccessor(nil) accepted")
	}
	if got := transport.Calls(coordinationtest.OpAppend); got != 0 {
		t.Fatalf("%d appends, want none", got)
	}

	scBothPaths(t, func(t *testing.T, e *scEnv) {
		holder := e.acquireNow(e.member("node-1"), coordination.WithTransferTimeout(4*time.Second))
		ghost := e.ghost("node-ghost")
		tr := e.transfer(context.Background(), holder, ghost)
		e.runTo(4_000)
		if !tr.finished() || tr.at != 4_000 {
			t.Fatalf("TransferTo returned %v at %d ms, want at the bound of 4000", tr.finished(), tr.at)
		}
		scTransferFault(t, tr.err, coordination.TransferNotTaken)
		e.resign(holder)
	})
}

// elSuccessor chooses name when it is in the roster, and "" otherwise.
func elSuccessor(t *testing.T, name string, rosters *[][]coordination.RosterEntry) coordination.Option {
	want := fxMember(t, name)
	return coordination.WithSuccessor(func(roster []coordination.RosterEntry) coordination.MemberID {
		*rosters = append(*rosters, roster)
		for _, entry := range roster {
			if entry.Member == want {
				return want
			}
		}
		return coordination.MemberID{}
	})
}

// TestElectorSuccessorTakesTheRoleOnShutdown: an Elector with
// WithSuccessor hands the role, when Run's context ends, to the chosen
// member (rank 2) instead of resigning to the first standby: one epoch,
// the first standby never mints, the chooser saw the roster in rank order
// with the holder first.
func TestElectorSuccessorTakesTheRoleOnShutdown(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		var rosters [][]coordination.RosterEntry
		run := elStart(t, e, node1, nil, elSuccessor(t, "node-3", &rosters))
		holder := run.leadership(t, 1)
		first := e.campaign(node2)
		target := e.campaign(node3)
		e.runTo(2_000)

		run.cancel()
		e.settle()
		if e.plain {
			e.runTo(2_000 + 2*scPoll.Milliseconds())
		}
		<-run.done
		if run.err != nil {
			t.Fatalf("Run = %v, want nil", run.err)
		}
		scEnded(t, holder, coordination.ErrTransferred)
		successor := target.won(t)
		e.checkToken(successor.Token(), "after the hand-over")
		if successor.Token().ProducerEpoch() != holder.Token().ProducerEpoch()+1 {
			t.Fatalf("the successor holds %s, want the next epoch after %s", successor.Token(), holder.Token())
		}
		if len(rosters) != 1 || len(rosters[0]) != 3 || rosters[0][0].Member != node1.id || rosters[0][2].Member != node3.id {
			t.Fatalf("the chooser saw %v, want one roster node-1, node-2, node-3", rosters)
		}
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 0 {
			t.Fatalf("the first standby minted %d times", got)
		}
		if got := e.roster(); got != "node-2,node-3" {
			t.Fatalf("roster = %s, want node-2,node-3", got)
		}
		if err := first.abandon(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled AcquireLeadership = %v", err)
		}
		e.resign(successor)
	})
}

// TestElectorSuccessorFallsBackToResign: a chooser that names nobody, and
// a transfer that is not taken within its bound, leave the Elector's
// resignation as before: the first standby takes the role.
func TestElectorSuccessorFallsBackToResign(t *testing.T) {
	for _, c := range []struct {
		name    string
		choose  string // the member the chooser names when present
		resumed int64  // when the resignation lands, relative to the shutdown
	}{
		{"nobody chosen", "node-absent", 0},
		{"transfer not taken", "node-ghost", 4_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			scBothPaths(t, func(t *testing.T, e *scEnv) {
				node1, node2 := e.member("node-1"), e.member("node-2")
				var rosters [][]coordination.RosterEntry
				run := elStart(t, e, node1, nil, elSuccessor(t, c.choose, &rosters), coordination.WithTransferTimeout(4*time.Second))
				holder := run.leadership(t, 1)
				first := e.campaign(node2)
				e.ghost("node-ghost")
				e.runTo(2_000)

				run.cancel()
				e.runTo(2_000 + c.resumed)
				<-run.done
				scEnded(t, holder, coordination.ErrNotHeld)
				if errors.Is(holder.Err(), coordination.ErrTransferred) {
					t.Fatalf("Err = %v, want a resignation", holder.Err())
				}
				e.checkLeaseTombstone(holder)
				e.handOver()
				successor := first.won(t)
				e.checkToken(successor.Token(), "after the resignation")
				e.resign(successor)
			})
		})
	}
}

// TestTransferTargetMintedButItsLeaseLate: the target mints (which fences
// the holder) but its first lease does not land within the bound. The
// holder's take-back is then fenced: TransferTo returns TransferNotTaken
// wrapping ErrFenced, the leadership ends with ErrFenced, and the target's
// lease lands when its write goes through. At no moment do two tokens
// write: the coordinator holds the target's from its mint on.
func TestTransferTargetMintedButItsLeaseLate(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1, coordination.WithTransferTimeout(4*time.Second))
		target := e.campaign(node2)
		e.runTo(1_000)
		release := node2.raw.Block(coordinationtest.OpWriteLease)
		tr := e.transfer(context.Background(), holder, node2.id)
		e.runTo(1_000 + 4_000)
		if !tr.finished() {
			t.Fatal("TransferTo still waits at the bound")
		}
		te := scTransferFault(t, tr.err, coordination.TransferNotTaken)
		if !errors.Is(te, coordination.ErrFenced) {
			t.Fatalf("TransferTo = %v, want it to wrap ErrFenced (the take-back after the target's mint)", te)
		}
		scEnded(t, holder, coordination.ErrFenced)
		if got := e.cluster.Token(e.role); !got.Supersedes(holder.Token()) {
			t.Fatalf("the coordinator holds %s, want the target's mint after %s", got, holder.Token())
		}
		release()
		e.settle()
		successor := target.won(t)
		e.checkToken(successor.Token(), "after the target's late lease")
		e.resign(successor)
	})
}

// The transfer on the renewer's pause (TransferTo pauses the renewals, and
// takes the write slot for the offer's own write only).

// scLeaseWrites returns the lease writes that the member started.
func scLeaseWrites(m *scMember) int { return m.raw.Calls(coordinationtest.OpWriteLease) }

// TestTransferNoRenewalBetweenOfferAndTargetLease: the target mints at once
// but its lease is held back; the holder's renewal falls due (10000)
// meanwhile. Between the offer and the target's lease the holder writes no
// lease (the offer stays the newest), and the transfer then completes.
func TestTransferNoRenewalBetweenOfferAndTargetLease(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		target := e.campaign(node2)
		e.runTo(9_000)
		late := node2.raw.Block(coordinationtest.OpWriteLease)
		writes := scLeaseWrites(node1)
		tr := e.transfer(context.Background(), holder, node2.id)
		e.runTo(14_000) // past the due renewal at 10000, within the bound (24000)
		if tr.finished() {
			t.Fatalf("TransferTo returned %v before the target's lease", tr.err)
		}
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 1 {
			t.Fatalf("the target minted %d times, want once", got)
		}
		if got := scLeaseWrites(node1) - writes; got != 1 {
			t.Fatalf("the holder wrote %d leases since the transfer began, want 1 (the offer; no renewal)", got)
		}
		if lease := e.state().Lease; lease == nil || lease.Member != node2.id || lease.Token != holder.Token() || lease.GrantedAt != scAt(9_000) {
			t.Fatalf("the newest lease is %+v, want the offer to node-2 under %s granted at 9000", lease, holder.Token())
		}
		late()
		e.handOver() // the holder sees the target's lease
		if !tr.finished() || tr.err != nil {
			t.Fatalf("TransferTo = %v (returned %v), want nil", tr.err, tr.finished())
		}
		if got := scLeaseWrites(node1) - writes; got != 1 {
			t.Fatalf("the holder wrote %d leases during the transfer, want 1 (the offer)", got)
		}
		scEnded(t, holder, coordination.ErrTransferred)
		successor := target.won(t)
		e.checkToken(successor.Token(), "after the transfer")
		e.resign(successor)
	})
}

// TestTransferAfterTheRenewalInFlight: the renewal due at 10000 is in
// flight (its write held) when TransferTo starts. The offer goes after the
// renewal lands, never before it: the renewal cannot write over the offer.
func TestTransferAfterTheRenewalInFlight(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		target := e.campaign(node2)
		e.runTo(9_000)
		slow := node1.raw.Block(coordinationtest.OpWriteLease)
		writes := scLeaseWrites(node1)
		e.runTo(10_000)
		node1.raw.WaitCalls(coordinationtest.OpWriteLease, writes+1) // the renewal, held
		tr := e.transfer(context.Background(), holder, node2.id)
		if got := scLeaseWrites(node1) - writes; got != 1 {
			t.Fatalf("%d lease writes while the renewal is in flight, want 1 (the renewal): the offer waits for the slot", got)
		}
		e.runTo(10_500)
		slow()
		e.handOver()
		if e.plain {
			e.handOver() // the target's poll, then the holder's
		}
		if !tr.finished() || tr.err != nil {
			t.Fatalf("TransferTo = %v (returned %v), want nil", tr.err, tr.finished())
		}
		var leases []coordination.Lease
		key := string(coordination.EncodeKey(coordination.LeaseKey(e.role)))
		for _, entry := range e.cluster.Entries(e.tp) {
			if string(entry.Key) == key && !coordination.IsTombstone(entry.Value) {
				lease, err := coordination.DecodeLease(entry.Value)
				if err != nil {
					t.Fatal(err)
				}
				leases = append(leases, lease)
			}
		}
		if n := len(leases); n < 3 || leases[n-3].Member != node1.id || leases[n-3].GrantedAt != scAt(10_000) ||
			leases[n-2].Member != node2.id || leases[n-2].Token != holder.Token() || leases[n-1].Member != node2.id || leases[n-1].Token == holder.Token() {
			t.Fatalf("the lease records end with %+v; want node-1's renewal of 10000, then the offer, then node-2's own lease", leases)
		}
		if got := scLeaseWrites(node1) - writes; got != 2 {
			t.Fatalf("the holder wrote %d leases, want 2 (the renewal, the offer)", got)
		}
		scEnded(t, holder, coordination.ErrTransferred)
		e.resign(target.won(t))
	})
}

// TestTransferNotTakenRenewalsResumeOnSchedule: a transfer to a member
// that never takes the role writes one lease after the offer, the
// take-back at the bound (17000), though a renewal fell due at 10000; the
// renewals then resume one renew interval after the take-back (27000).
func TestTransferNotTakenRenewalsResumeOnSchedule(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1)
		ghost := e.ghost("node-ghost")
		e.runTo(2_000)
		writes := scLeaseWrites(node1)
		tr := e.transfer(context.Background(), holder, ghost)
		e.runTo(16_999)
		if got := scLeaseWrites(node1) - writes; got != 1 || tr.finished() {
			t.Fatalf("before the bound: %d lease writes (want 1, the offer), TransferTo returned %v", got, tr.finished())
		}
		e.runTo(17_000)
		scTransferFault(t, tr.err, coordination.TransferNotTaken)
		if got := scLeaseWrites(node1) - writes; got != 2 {
			t.Fatalf("at the bound: %d lease writes, want 2 (the offer, the take-back)", got)
		}
		e.runTo(26_999)
		if got := scLeaseWrites(node1) - writes; got != 2 {
			t.Fatalf("after the take-back: %d lease writes before 27000, want 2 (no extra renewal)", got)
		}
		if got := holder.Lease().GrantedAt; got != scAt(17_000) {
			t.Fatalf("the lease was granted at %d, want 17000 (the take-back)", got-scStart)
		}
		e.runTo(27_000)
		if got := holder.Lease().GrantedAt; got != scAt(27_000) || scLeaseWrites(node1)-writes != 3 {
			t.Fatalf("the renewal after the take-back was granted at %d (%d writes), want at 27000", got-scStart, scLeaseWrites(node1)-writes)
		}
		e.runTo(37_000)
		if got := holder.Lease().GrantedAt; got != scAt(37_000) {
			t.Fatalf("the next renewal was granted at %d, want 37000", got-scStart)
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}

// TestTransferRenewDeadlineEndsAHangingTransfer: with WithRenewDeadline(15
// s), the deadline counts during the transfer's pause: a transfer begun at
// 12000 (bound 27000) to a member that never takes the role ends with the
// leadership at 10000 + 15 s, with no take-back.
func TestTransferRenewDeadlineEndsAHangingTransfer(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1, coordination.WithRenewDeadline(15*time.Second))
		ghost := e.ghost("node-ghost")
		e.runTo(12_000) // the renewal of 10000 landed
		writes := scLeaseWrites(node1)
		tr := e.transfer(context.Background(), holder, ghost)
		e.runTo(24_999)
		scHolds(t, holder)
		if tr.finished() {
			t.Fatalf("TransferTo returned %v at %d, before the renew deadline", tr.err, tr.at)
		}
		e.runTo(25_000)
		scEnded(t, holder, coordination.ErrRenewDeadline)
		if !tr.finished() || tr.at != 25_000 {
			t.Fatalf("TransferTo returned %v at %d, want at the renew deadline 25000", tr.finished(), tr.at)
		}
		te := scTransferFault(t, tr.err, coordination.TransferNotTaken)
		if !errors.Is(te, coordination.ErrRenewDeadline) || !errors.Is(te, coordination.ErrNotHeld) {
			t.Fatalf("TransferTo = %v, want it to wrap ErrRenewDeadline and ErrNotHeld", te)
		}
		e.runTo(40_000)
		if got := scLeaseWrites(node1) - writes; got != 1 {
			t.Fatalf("%d lease writes since the transfer began, want 1 (the offer; no take-back)", got)
		}
	})
}

// TestTransferResignDuringTransfer: Resign during a transfer that is not
// taken returns at once (the transfer holds no slot), writes the lease
// tombstone, and ends the transfer at once with TransferNotTaken wrapping
// ErrNotHeld; no take-back is written after it.
func TestTransferResignDuringTransfer(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1)
		ghost := e.ghost("node-ghost")
		e.runTo(2_000)
		tr := e.transfer(context.Background(), holder, ghost)
		e.runTo(5_000)
		e.resign(holder) // no clock step: it does not wait for the bound
		e.settle()
		if !tr.finished() || tr.at != 5_000 {
			t.Fatalf("TransferTo returned %v at %d, want at the resignation (5000)", tr.finished(), tr.at)
		}
		te := scTransferFault(t, tr.err, coordination.TransferNotTaken)
		if !errors.Is(te, coordination.ErrNotHeld) {
			t.Fatalf("TransferTo = %v, want it to wrap ErrNotHeld", te)
		}
		e.runTo(20_000)
		e.checkLeaseTombstone(holder)
		if lease := e.state().Lease; lease != nil {
			t.Fatalf("the lease after the resignation is %+v, want none (a tombstone)", lease)
		}
	})
}

// TestTransferRenewWaitsForTheTransfer: Renew during a transfer waits for
// its end (its lease would withdraw the offer), then renews; a Renew whose
// context ends first returns the context's error and writes nothing.
func TestTransferRenewWaitsForTheTransfer(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1, coordination.WithTransferTimeout(4*time.Second))
		ghost := e.ghost("node-ghost")
		tr := e.transfer(context.Background(), holder, ghost)
		e.runTo(1_000)
		cancelled, cancel := context.WithCancel(context.Background())
		gaveUp := make(chan error, 1)
		go func() { gaveUp <- holder.Renew(cancelled) }()
		renewed := make(chan error, 1)
		go func() { renewed <- holder.Renew(context.Background()) }()
		e.runTo(2_000)
		cancel()
		if err := <-gaveUp; !errors.Is(err, context.Canceled) {
			t.Fatalf("Renew whose context ended during the transfer = %v, want context.Canceled", err)
		}
		e.runTo(3_999)
		select {
		case err := <-renewed:
			t.Fatalf("Renew returned %v during the transfer", err)
		default:
		}
		if lease := e.state().Lease; lease == nil || lease.Member != ghost {
			t.Fatalf("the newest lease during the transfer is %+v, want the offer", lease)
		}
		writes := scLeaseWrites(node1)
		e.runTo(4_000)
		if err := <-renewed; err != nil {
			t.Fatalf("Renew after the transfer = %v", err)
		}
		scTransferFault(t, tr.err, coordination.TransferNotTaken)
		if got := scLeaseWrites(node1) - writes; got != 2 {
			t.Fatalf("%d lease writes at the bound, want 2 (the take-back, the Renew)", got)
		}
		if lease := e.state().Lease; lease == nil || lease.Member != node1.id || lease.GrantedAt != scAt(4_000) {
			t.Fatalf("the newest lease is %+v, want node-1's granted at 4000", lease)
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}

// TestTransferGuardedWritesGoOn: guarded writes are not held back by a
// transfer. Before the target mints, a Write commits at once under the
// holder's token; once the target minted (its lease held back), a Write is
// fenced at the broker, which ends the leadership with ErrFenced, and
// TransferTo still returns nil when the target's lease lands.
func TestTransferGuardedWritesGoOn(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1, coordination.WithTransferTimeout(4*time.Second))
		if e.plain {
			e.resign(holder) // no guarded writes without an ExtendedTransport
			return
		}
		commands := coordination.TopicPartition{Topic: scCommands.Topic}
		ghost := e.ghost("node-ghost")
		tr := e.transfer(context.Background(), holder, ghost)
		e.runTo(1_000)
		written := make(chan error, 1)
		go func() { written <- holder.Write(context.Background(), scCommands) }()
		e.settle()
		select {
		case err := <-written:
			if err != nil {
				t.Fatalf("Write during the transfer = %v", err)
			}
		default:
			t.Fatal("Write waits for the transfer's end")
		}
		if entries := e.cluster.Entries(commands); len(entries) != 1 || entries[0].Token != holder.Token() {
			t.Fatalf("the commands are %+v, want one under %s", entries, holder.Token())
		}
		e.runTo(4_000)
		scTransferFault(t, tr.err, coordination.TransferNotTaken)
		scHolds(t, holder)

		target := e.campaign(node2)
		e.runTo(5_000)
		late := node2.raw.Block(coordinationtest.OpWriteLease)
		tr = e.transfer(context.Background(), holder, node2.id)
		if got := node2.raw.Calls(coordinationtest.OpAcquireEpoch); got != 1 {
			t.Fatalf("the target minted %d times, want once", got)
		}
		if err := holder.Write(context.Background(), scCommands); !errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("Write after the target's mint = %v, want ErrFenced", err)
		}
		scEnded(t, holder, coordination.ErrFenced)
		if tr.finished() {
			t.Fatalf("TransferTo returned %v before the target's lease", tr.err)
		}
		late()
		e.settle()
		if !tr.finished() || tr.err != nil {
			t.Fatalf("TransferTo = %v (returned %v), want nil", tr.err, tr.finished())
		}
		if e.roster() != "node-ghost,node-2" {
			t.Fatalf("roster = %s, want node-ghost,node-2 (the holder withdrawn)", e.roster())
		}
		e.resign(target.won(t))
	})
}

// TestTransferTakeBackFailsRetried: a take-back that fails (a transient
// error) leaves the holder leading with the offer on the partition; the
// renewals retry it one poll interval later, as after a failed renewal,
// and go on from that lease.
func TestTransferTakeBackFailsRetried(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1, coordination.WithTransferTimeout(4*time.Second))
		ghost := e.ghost("node-ghost")
		tr := e.transfer(context.Background(), holder, ghost)
		e.runTo(3_999)
		unavailable := errors.New("broker unavailable")
		node1.raw.FailNext(coordinationtest.OpWriteLease, unavailable)
		e.runTo(4_000)
		te := scTransferFault(t, tr.err, coordination.TransferNotTaken)
		if !errors.Is(te, unavailable) {
			t.Fatalf("TransferTo = %v, want it to wrap the take-back's error", te)
		}
		scHolds(t, holder)
		if lease := e.state().Lease; lease == nil || lease.Member != ghost {
			t.Fatalf("the newest lease after the failed take-back is %+v, want the offer", lease)
		}
		e.runTo(4_999)
		if got := holder.Lease().GrantedAt; got != scAt(0) {
			t.Fatalf("the lease was granted at %d before the retry, want 0", got-scStart)
		}
		e.runTo(5_000)
		if lease := e.state().Lease; lease == nil || lease.Member != node1.id || lease.GrantedAt != scAt(5_000) {
			t.Fatalf("the newest lease after the retry is %+v, want node-1's granted at 5000", lease)
		}
		e.runTo(15_000)
		if got := holder.Lease().GrantedAt; got != scAt(15_000) {
			t.Fatalf("the renewal after the retry was granted at %d, want 15000", got-scStart)
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}
