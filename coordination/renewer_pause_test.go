package coordination_test

import (
	"context"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// The renewer's pause and resume (leadership_renewal.go), which a planned
// transfer uses: a paused renewer writes no renewal, its renew deadline
// keeps counting, and resume renews at once when a renewal is due.

// TestRenewerPauseSendsNoRenewalAndTheDeadlineCounts: paused after the
// renewal at 10000, the holder writes no lease at 20000, and
// WithRenewDeadline still ends the leadership at 10000 + 20 s.
func TestRenewerPauseSendsNoRenewalAndTheDeadlineCounts(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1, coordination.WithRenewDeadline(20*time.Second))
		e.runTo(10_000)
		if got := holder.Lease().GrantedAt; got != scAt(10_000) {
			t.Fatalf("the renewal was granted at %d, want 10000", got-scStart)
		}
		coordination.PauseRenewals(holder)
		coordination.PauseRenewals(holder) // a second pause does nothing
		writes := node1.raw.Calls(coordinationtest.OpWriteLease)

		e.runTo(29_999)
		scHolds(t, holder)
		if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != writes {
			t.Fatalf("a paused renewer wrote %d leases, want none", got-writes)
		}
		if got := holder.Lease().GrantedAt; got != scAt(10_000) {
			t.Fatalf("the lease of a paused renewer was granted at %d, want 10000", got-scStart)
		}
		e.runTo(30_000) // 10000 + the renew deadline
		scEnded(t, holder, coordination.ErrRenewDeadline)
		coordination.ResumeRenewals(holder) // a resume of ended renewals does nothing
		e.runTo(50_000)
		if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != writes {
			t.Fatalf("a resume after the end wrote %d leases, want none", got-writes)
		}
	})
}

// TestRenewerResumeRenewsAtOnceWhenDue: a resume past the due instant of
// the renewal renews at once, and the schedule goes on from that lease; a
// resume before it renews at the due instant, not earlier.
func TestRenewerResumeRenewsAtOnceWhenDue(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1)
		e.runTo(10_000)
		coordination.PauseRenewals(holder)
		e.runTo(25_000) // the renewal was due at 20000
		if got := holder.Lease().GrantedAt; got != scAt(10_000) {
			t.Fatalf("paused: the lease was granted at %d, want 10000", got-scStart)
		}
		coordination.ResumeRenewals(holder)
		e.settle()
		if got := holder.Lease().GrantedAt; got != scAt(25_000) {
			t.Fatalf("after a resume past the due renewal, the lease was granted at %d, want 25000 (at once)", got-scStart)
		}
		e.runTo(35_000)
		if got := holder.Lease().GrantedAt; got != scAt(35_000) {
			t.Fatalf("the renewal after the resume was granted at %d, want 35000", got-scStart)
		}

		coordination.PauseRenewals(holder)
		e.runTo(36_000)
		writes := node1.raw.Calls(coordinationtest.OpWriteLease)
		coordination.ResumeRenewals(holder) // not due until 45000
		coordination.ResumeRenewals(holder) // a second resume does nothing
		e.settle()
		if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != writes {
			t.Fatalf("a resume before the due renewal wrote %d leases at once, want none", got-writes)
		}
		e.runTo(44_999)
		if got := holder.Lease().GrantedAt; got != scAt(35_000) {
			t.Fatalf("the lease was granted at %d before the due renewal, want 35000", got-scStart)
		}
		e.runTo(45_000)
		if got := holder.Lease().GrantedAt; got != scAt(45_000) {
			t.Fatalf("the due renewal after a resume was granted at %d, want 45000", got-scStart)
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}

// TestRenewerPausedLeadershipResigns: a paused leadership resigns as any
// other, and no renewal or goroutine outlives it (the bubble checks).
func TestRenewerPausedLeadershipResigns(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		holder := e.acquireNow(e.member("node-1"))
		coordination.PauseRenewals(holder)
		e.runTo(5_000)
		e.resign(holder)
		e.checkLeaseTombstone(holder)
	})
}

// TestRenewerPausedAttemptWritesNothing: a due renewal that waits for the
// write slot behind a guarded write, and is paused meanwhile, writes no
// lease when it gets the slot; resume then renews at once (it is due).
func TestRenewerPausedAttemptWritesNothing(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1)
		if e.plain {
			// No guarded write to hold the slot with: the pause of a
			// renewal that waits for it needs one.
			e.resign(holder)
			return
		}
		e.runTo(9_000)
		release := node1.raw.Block(coordinationtest.OpWriteGuarded)
		written := make(chan error, 1)
		go func() { written <- holder.Write(context.Background(), scCommands) }()
		node1.raw.WaitCalls(coordinationtest.OpWriteGuarded, 1)
		e.runTo(10_000) // the renewal is due, and waits for the slot
		writes := node1.raw.Calls(coordinationtest.OpWriteLease)
		e.runTo(10_500)
		coordination.PauseRenewals(holder)
		release()
		if err := <-written; err != nil {
			t.Fatalf("the guarded write that held the slot: %v", err)
		}
		e.settle()
		if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != writes {
			t.Fatalf("a renewal paused while it waited for the slot wrote %d leases, want none", got-writes)
		}
		if got := holder.Lease().GrantedAt; got != scAt(0) {
			t.Fatalf("the lease was granted at %d, want 0 (no renewal)", got-scStart)
		}
		e.runTo(12_000)
		coordination.ResumeRenewals(holder)
		e.settle()
		if got := holder.Lease().GrantedAt; got != scAt(12_000) {
			t.Fatalf("the resume of a due renewal renewed at %d, want 12000 (at once)", got-scStart)
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}
