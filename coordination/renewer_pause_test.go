package coordination_test

import (
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
