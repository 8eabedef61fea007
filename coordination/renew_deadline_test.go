package coordination_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// TestRenewDeadlineEndsTheLeadershipBeforeTheStandbyMay: a holder cut off
// from the cluster ends its leadership, and so its context, at the grant
// of its last confirmed lease plus the renew deadline, by its own clock:
// a margin (lease − renew deadline) before the standby's challenge.
func TestRenewDeadlineEndsTheLeadershipBeforeTheStandbyMay(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1, coordination.WithRenewDeadline(20*time.Second))
		e.runTo(10_000) // the first renewal lands: granted at 10000
		if got := holder.Lease().GrantedAt; got != scAt(10_000) {
			t.Fatalf("the renewal was granted at %d, want 10000", got-scStart)
		}
		standby := e.campaign(node2)
		node1.raw.Cut()

		e.runTo(29_999)
		scHolds(t, holder)
		if err := holder.Context().Err(); err != nil {
			t.Fatalf("Context ended at 29999: %v", err)
		}
		e.runTo(30_000) // 10000 + the renew deadline
		scEnded(t, holder, coordination.ErrRenewDeadline)
		if cause := context.Cause(holder.Context()); !errors.Is(cause, coordination.ErrRenewDeadline) || cause != holder.Err() {
			t.Fatalf("Context cause = %v, want Err() = %v", cause, holder.Err())
		}
		standby.waiting(t, "at the holder's renew deadline")
		e.checkToken(holder.Token(), "at the holder's renew deadline")
		e.runTo(40_000) // the deadline of the lease granted at 10000
		successor := standby.won(t)
		node1.raw.Heal()
		e.resign(successor)
	})
}

// TestRenewDeadlineKeepsALeadershipThatRenews: the bound moves with every
// confirmed renewal, and a renewal that fails once and lands on its retry
// keeps the leadership.
func TestRenewDeadlineKeepsALeadershipThatRenews(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1, coordination.WithRenewDeadline(12*time.Second))
		node1.raw.FailNext(coordinationtest.OpWriteLease, errors.New("NOT_ENOUGH_REPLICAS"))
		e.runTo(11_000) // the renewal at 10000 failed, its retry at 11000 landed
		if got := holder.Lease().GrantedAt; got != scAt(11_000) {
			t.Fatalf("lease granted at %d, want 11000", got-scStart)
		}
		e.runTo(100_000)
		scHolds(t, holder)
		e.resign(holder)
		if cause := context.Cause(holder.Context()); !errors.Is(cause, coordination.ErrNotHeld) {
			t.Fatalf("Context cause after Resign = %v, want ErrNotHeld", cause)
		}
	})
}

// TestLeadershipContextEndsWithTheFence: the simple form, without the
// option: the context ends when a fence ends the leadership.
func TestLeadershipContextEndsWithTheFence(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		holder := e.acquireNow(e.member("node-1"))
		ctx := holder.Context()
		if ctx != holder.Context() || ctx.Err() != nil {
			t.Fatal("Context is not one live context")
		}
		if _, err := e.cluster.Transport("operator").AcquireEpoch(context.Background(), e.role); err != nil {
			t.Fatal(err)
		}
		e.runTo(10_000)
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(context.Cause(ctx), coordination.ErrFenced) {
			t.Fatalf("Err %v, cause %v; want Canceled and ErrFenced", ctx.Err(), context.Cause(ctx))
		}
	})
}

func TestWithRenewDeadlineRejectsADeadlineWithoutRoom(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	role, member := fxRole(t, "controller"), fxMember(t, "node-1")
	for _, deadline := range []time.Duration{0, -time.Second, 10 * time.Second, 5 * time.Second, 30 * time.Second, time.Minute} {
		_, err := coordination.AcquireLeadership(context.Background(), cluster.Transport("a"), role, member,
			coordination.WithLeaseDuration(30*time.Second), coordination.WithRenewInterval(10*time.Second), coordination.WithRenewDeadline(deadline))
		if err == nil {
			t.Fatalf("WithRenewDeadline(%v) with lease 30s and renew 10s was accepted", deadline)
		}
	}
	tp, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cluster.Records(tp)); got != 0 {
		t.Fatalf("a refused option wrote %d records", got)
	}
}
