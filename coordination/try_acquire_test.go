package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

func (e *scEnv) tryAcquire(m *scMember, extra ...coordination.Option) (*coordination.Leadership, error) {
	return coordination.TryAcquire(context.Background(), m.transport, e.role, m.id, e.options(extra...)...)
}

// elTurn checks that err is a TurnError naming the holder and the instant.
func elTurn(t *testing.T, err error, holder string, rank int, retryAt int64) {
	t.Helper()
	var turn *coordination.TurnError
	if !errors.As(err, &turn) || !errors.Is(err, coordination.ErrNotYourTurn) {
		t.Fatalf("TryAcquire = %v, want a *TurnError that wraps ErrNotYourTurn", err)
	}
	gotHolder := ""
	if turn.Lease != nil {
		gotHolder = turn.Lease.Member.String()
	}
	if gotHolder != holder || turn.Rank != rank || turn.RetryAt != retryAt {
		t.Fatalf("TurnError holder %q rank %d retry at %d, want %q, %d, %d (%v)", gotHolder, turn.Rank, turn.RetryAt-scStart, holder, rank, retryAt-scStart, err)
	}
}

func TestTryAcquireTakesAFreeRoleAtOnce(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		l, err := e.tryAcquire(node1)
		if err != nil {
			t.Fatalf("TryAcquire of a free role: %v", err)
		}
		scHolds(t, l)
		e.checkToken(l.Token(), "after TryAcquire")
		e.runTo(10_000) // it renews as any leadership
		if got := l.Lease().GrantedAt; got != scAt(10_000) {
			t.Fatalf("renewed at %d, want 10000", got-scStart)
		}
		e.resign(l)
	})
}

// TestTryAcquireRefusesAHeldRoleAndLeavesNoTrace: the refusal names the
// holder and the instant of the rules; the member leaves the roster again
// and mints nothing.
func TestTryAcquireRefusesAHeldRoleAndLeavesNoTrace(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		_, err := e.tryAcquire(node2)
		elTurn(t, err, "node-1", 0, scAt(30_000))
		if got := e.roster(); got != "node-1" {
			t.Fatalf("roster after the refusal = %q, want node-1", got)
		}
		if n := node2.raw.Calls(coordinationtest.OpAcquireEpoch); n != 0 {
			t.Fatalf("the refused member minted %d times", n)
		}
		// A standby ranks first: at the deadline the trying member is rank
		// 1, one stagger later.
		standby := e.campaign(node3)
		node1.raw.Cut()
		e.runTo(30_000)
		successor := standby.won(t)
		_, err = e.tryAcquire(node2)
		elTurn(t, err, "node-3", 1, scAt(65_000)) // the deposed node-1 still ranks first
		node1.raw.Heal()
		e.runTo(31_000)
		scEnded(t, holder, coordination.ErrFenced)
		// The deposed member leaves the roster, as a rejoin or an operator's
		// fence would take it off.
		if err := node1.raw.Append(context.Background(), e.tp, coordination.EncodeKey(coordination.RegistrationKey(e.role, node1.id)), nil); err != nil {
			t.Fatal(err)
		}
		e.resign(successor)
		e.handOver()
		// No lease and no one else: it takes the role.
		l, err := e.tryAcquire(node2)
		if err != nil {
			t.Fatalf("TryAcquire after the resignation: %v", err)
		}
		e.resign(l)
	})
}

// TestTryAcquireTakesAnExpiredRoleByRank: after the deadline of a silent
// holder, rank 0 takes the role, and rank 1 is told to wait one stagger.
func TestTryAcquireTakesAnExpiredRoleByRank(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2, node3 := e.member("node-1"), e.member("node-2"), e.member("node-3")
		holder := e.acquireNow(node1)
		node1.raw.Cut()
		e.runTo(29_999)
		_, err := e.tryAcquire(node2)
		elTurn(t, err, "node-1", 0, scAt(30_000))
		e.runTo(30_000)
		// node-3 waits in the roster, so node-2 ranks behind it now.
		standby := e.campaign(node3)
		l := standby.won(t)
		_, err = e.tryAcquire(node2)
		elTurn(t, err, "node-3", 1, scAt(65_000)) // the deposed node-1 still ranks first
		scHolds(t, l)
		node1.raw.Heal()
		e.runTo(31_000)
		scEnded(t, holder, coordination.ErrFenced)
		e.resign(l)
	})
}

func TestTryAcquireStopsOnAMissingPermission(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		node1.raw.FailNext(coordinationtest.OpAcquireEpoch, fmt.Errorf("TRANSACTIONAL_ID_AUTHORIZATION_FAILED: %w", coordination.ErrNotAuthorized))
		_, err := e.tryAcquire(node1)
		if !errors.Is(err, coordination.ErrNotAuthorized) || errors.Is(err, coordination.ErrNotYourTurn) {
			t.Fatalf("TryAcquire with a refused mint = %v, want ErrNotAuthorized", err)
		}
		e.checkToken(coordination.NoEpoch, "after the refused mint")
		if got := e.roster(); got != "" {
			t.Fatalf("roster after the failure = %q, want empty", got)
		}
	})
}

// TestTryAcquireTakesAnEarlierIncarnationsLease: by default a live lease
// that names the member is an earlier incarnation's, as for
// AcquireLeadership: the call takes the role at once, for one epoch, and
// the earlier incarnation is fenced.
func TestTryAcquireTakesAnEarlierIncarnationsLease(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		old := e.acquireNow(e.member("node-1"))
		restarted := e.member("node-1")
		l, err := e.tryAcquire(restarted)
		if err != nil {
			t.Fatalf("TryAcquire under a live lease of an earlier incarnation = %v; want the role", err)
		}
		if got := restarted.raw.Calls(coordinationtest.OpAcquireEpoch); got != 1 || !l.Token().Supersedes(old.Token()) {
			t.Fatalf("the restarted member minted %d times, token %s over %s; want one epoch that supersedes", got, l.Token(), old.Token())
		}
		e.runTo(10_000) // the earlier incarnation's renewal is fenced
		scEnded(t, old, coordination.ErrFenced)
		e.resign(l)
	})
}

// TestTryAcquireUnderALiveHoldersMemberID: with WithDuplicateMemberCheck,
// a second process under the holder's member id is told to wait for the
// deadline, and it leaves the registration that the two share.
func TestTryAcquireUnderALiveHoldersMemberID(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		holder := e.acquireNow(e.member("node-1"))
		_, err := e.tryAcquire(e.member("node-1"), coordination.WithDuplicateMemberCheck())
		elTurn(t, err, "node-1", 0, scAt(30_000))
		if got := e.roster(); got != "node-1" {
			t.Fatalf("roster = %q, want node-1 still registered", got)
		}
		e.checkToken(holder.Token(), "after the refused try")
		e.resign(holder)
	})
}
