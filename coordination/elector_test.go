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

// The tests of Elector, over the in-memory cluster in a synctest bubble
// with a ManualClock (the sc harness of leadership_test.go). The helpers
// carry the el prefix.

// elRun is one Elector.Run on a goroutine of its own, with what its
// callbacks saw.
type elRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	panic  any

	mu      sync.Mutex
	started []*coordination.Leadership
	causes  []error // context.Cause of each OnStartedLeading's ctx when it ended
	stopped []error
	leaders []string // member@token of each OnNewLeader
}

// elStart runs the elector of member m; work is the body of
// OnStartedLeading after it recorded the leadership, and nil for "wait
// for ctx".
func elStart(t *testing.T, e *scEnv, m *scMember, work func(ctx context.Context, l *coordination.Leadership, n int), extra ...coordination.Option) *elRun {
	t.Helper()
	r := &elRun{done: make(chan struct{})}
	callbacks := coordination.ElectorCallbacks{
		OnStartedLeading: func(ctx context.Context, l *coordination.Leadership) {
			r.mu.Lock()
			r.started = append(r.started, l)
			n := len(r.started)
			r.mu.Unlock()
			if work != nil {
				work(ctx, l, n)
			} else {
				<-ctx.Done()
			}
			r.mu.Lock()
			r.causes = append(r.causes, context.Cause(ctx))
			r.mu.Unlock()
		},
		OnStoppedLeading: func(err error) {
			r.mu.Lock()
			r.stopped = append(r.stopped, err)
			r.mu.Unlock()
		},
		OnNewLeader: func(lease coordination.Lease) {
			r.mu.Lock()
			r.leaders = append(r.leaders, lease.Member.String()+"@"+lease.Token.String())
			r.mu.Unlock()
		},
	}
	elector, err := coordination.NewElector(m.transport, e.role, m.id, callbacks, e.options(extra...)...)
	if err != nil {
		t.Fatalf("NewElector: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		defer func() { r.panic = recover() }()
		r.err = elector.Run(ctx)
	}()
	synctest.Wait()
	return r
}

func (r *elRun) snapshot() (started int, causes, stopped []error, leaders []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.started), append([]error(nil), r.causes...), append([]error(nil), r.stopped...), append([]string(nil), r.leaders...)
}

func (r *elRun) leadership(t *testing.T, n int) *coordination.Leadership {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.started) < n {
		t.Fatalf("OnStartedLeading ran %d times, want at least %d", len(r.started), n)
	}
	return r.started[n-1]
}

// stop cancels Run and waits for it.
func (r *elRun) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	<-r.done
	return r.err
}

// TestElectorRivalMintWatchWaitsForTheMintsLease: with
// WithRivalMintWatch, a member that would challenge an expired lease while
// the coordinator holds a newer token (a mint whose lease never came: here
// an operator's AcquireEpoch) waits one lease duration from first sight
// before it challenges, where the specification's rules (the test above)
// take the role at the deadline.
func TestElectorRivalMintWatchWaitsForTheMintsLease(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		run := elStart(t, e, node1, nil, coordination.WithRivalMintWatch())
		first := run.leadership(t, 1)
		scHolds(t, first)
		if _, err := e.cluster.Transport("operator").AcquireEpoch(context.Background(), e.role); err != nil {
			t.Fatal(err)
		}
		e.runTo(10_000)
		scEnded(t, first, coordination.ErrFenced)
		// At the deadline the coordinator holds the operator's token, not
		// the expired lease's: a rival's mint, whose lease it waits for.
		e.runTo(59_999)
		if started, _, _, _ := run.snapshot(); started != 1 {
			t.Fatalf("the member challenged before the rival's mint had stood a lease duration (at %d starts)", started)
		}
		e.runTo(60_000)
		second := run.leadership(t, 2)
		scHolds(t, second)
		e.checkToken(second.Token(), "after the rival's wait")
		if err := run.stop(t); err != nil {
			t.Fatalf("Run after its context ended = %v, want nil", err)
		}
	})
}

// TestElectorRejoinsAfterAFenceAndResignsOnShutdown: a fence ends the
// work's context with the fence as its cause, the elector reports it,
// rejoins at the tail, takes the role again by the rules, and resigns when
// its context ends.
func TestElectorRejoinsAfterAFenceAndResignsOnShutdown(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		run := elStart(t, e, node1, nil)
		first := run.leadership(t, 1)
		scHolds(t, first)

		// An operator mints a newer epoch: the holder learns it at its next
		// renewal.
		if _, err := e.cluster.Transport("operator").AcquireEpoch(context.Background(), e.role); err != nil {
			t.Fatal(err)
		}
		e.runTo(10_000)
		scEnded(t, first, coordination.ErrFenced)
		started, causes, stopped, _ := run.snapshot()
		if started != 1 || len(causes) != 1 || !errors.Is(causes[0], coordination.ErrFenced) {
			t.Fatalf("after the fence: %d starts, causes %v; want 1 start whose context ended on ErrFenced", started, causes)
		}
		if len(stopped) != 1 || !errors.Is(stopped[0], coordination.ErrFenced) {
			t.Fatalf("OnStoppedLeading got %v, want one error that wraps ErrFenced", stopped)
		}
		// It rejoined: registered again, and it waits for the deadline of
		// the deposed lease as any standby would.
		if entry, ok := e.state().Entry(node1.id); !ok || entry.RegisteredAt != scAt(10_000) {
			t.Fatalf("roster entry of node-1 = %+v, %t; want a registration at 10000", entry, ok)
		}
		e.runTo(29_999)
		if started, _, _, _ := run.snapshot(); started != 1 {
			t.Fatalf("the fenced member took the role again before the deadline")
		}
		e.runTo(30_000)
		second := run.leadership(t, 2)
		scHolds(t, second)
		e.checkToken(second.Token(), "after the rejoin")

		if err := run.stop(t); err != nil {
			t.Fatalf("Run after its context ended = %v, want nil", err)
		}
		scEnded(t, second, coordination.ErrNotHeld)
		e.checkLeaseTombstone(second)
		if got := e.roster(); got != "" {
			t.Fatalf("roster after the shutdown = %q, want empty", got)
		}
		_, _, stopped, _ = run.snapshot()
		if len(stopped) != 2 || !errors.Is(stopped[1], coordination.ErrNotHeld) {
			t.Fatalf("OnStoppedLeading got %v, want a resignation second", stopped)
		}
		e.checkNoWatchers("after Run")
	})
}

// TestElectorReturningWorkResignsAndCampaignsAgain: work that returns
// while the leadership holds ends it with a resignation, which hands the
// role to the standby at once; the elector joins the roster again at the
// tail.
func TestElectorReturningWorkResignsAndCampaignsAgain(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		returned := make(chan struct{})
		run := elStart(t, e, node1, func(ctx context.Context, l *coordination.Leadership, n int) {
			if n == 1 {
				<-returned // returns while leading
				return
			}
			<-ctx.Done()
		})
		first := run.leadership(t, 1)
		standby := e.campaign(node2)
		close(returned)
		e.handOver()
		scEnded(t, first, coordination.ErrNotHeld)
		e.checkLeaseTombstone(first)
		successor := standby.won(t)
		if got := e.roster(); !e.plain && got != "node-2" {
			t.Fatalf("roster right after the return = %q, want node-2: the elector waits a poll interval", got)
		}
		e.runTo(e.now() + scPoll.Milliseconds())
		if got := e.roster(); got != "node-2,node-1" {
			t.Fatalf("roster after the return = %q, want node-2,node-1 (node-1 rejoined at the tail)", got)
		}
		e.resign(successor)
		e.handOver()
		second := run.leadership(t, 2)
		scHolds(t, second)
		if err := run.stop(t); err != nil {
			t.Fatalf("Run = %v", err)
		}
		scEnded(t, second, coordination.ErrNotHeld)
	})
}

// TestElectorPanickingWorkResignsAndPanicsAgain: a panic of the work does
// not leave the renewals running: the elector resigns, reports, and the
// panic reaches the caller of Run with its value.
func TestElectorPanickingWorkResignsAndPanicsAgain(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		run := elStart(t, e, node1, func(context.Context, *coordination.Leadership, int) { panic("boom") })
		<-run.done
		if fmt.Sprint(run.panic) != "boom" {
			t.Fatalf("Run panicked with %v, want boom", run.panic)
		}
		l := run.leadership(t, 1)
		scEnded(t, l, coordination.ErrNotHeld)
		e.checkLeaseTombstone(l)
		_, _, stopped, _ := run.snapshot()
		if len(stopped) != 1 || !strings.Contains(stopped[0].Error(), "panicked: boom") {
			t.Fatalf("OnStoppedLeading got %v, want the panic", stopped)
		}
		e.runTo(60_000) // no renewal after the panic
		if n := node1.raw.Calls(coordinationtest.OpWriteLease); n != 2 {
			t.Fatalf("%d lease writes, want 2: the grant and the resignation's tombstone", n)
		}
	})
}

// TestElectorStopsOnAMissingPermission: no retry helps, so Run returns the
// error and never starts the work.
func TestElectorStopsOnAMissingPermission(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		node1.raw.FailNext(coordinationtest.OpAppend, fmt.Errorf("TOPIC_AUTHORIZATION_FAILED: %w", coordination.ErrNotAuthorized))
		run := elStart(t, e, node1, nil)
		<-run.done
		if !errors.Is(run.err, coordination.ErrNotAuthorized) {
			t.Fatalf("Run = %v, want ErrNotAuthorized", run.err)
		}
		if started, _, stopped, _ := run.snapshot(); started != 0 || len(stopped) != 0 {
			t.Fatalf("%d starts and %d stops, want none", started, len(stopped))
		}
	})
}

// TestElectorReportsEachNewLeader: OnNewLeader names the holder at the
// start and each new holder, itself included, and no renewal.
func TestElectorReportsEachNewLeader(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		holder := e.acquireNow(node1)
		run := elStart(t, e, node2, nil)
		e.runTo(20_000) // two renewals
		e.resign(holder)
		e.handOver()
		mine := run.leadership(t, 1)
		e.runTo(e.now() + scPoll.Milliseconds()) // a poll-only observer reads again
		if err := run.stop(t); err != nil {
			t.Fatal(err)
		}
		_, _, _, leaders := run.snapshot()
		want := []string{"node-1@" + holder.Token().String(), "node-2@" + mine.Token().String()}
		if strings.Join(leaders, " ") != strings.Join(want, " ") {
			t.Fatalf("OnNewLeader saw %v, want %v", leaders, want)
		}
	})
}

func TestNewElectorRejectsBadArguments(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	role, member := fxRole(t, "controller"), fxMember(t, "node-1")
	work := coordination.ElectorCallbacks{OnStartedLeading: func(context.Context, *coordination.Leadership) {}}
	for name, build := range map[string]func() (*coordination.Elector, error){
		"nil transport": func() (*coordination.Elector, error) { return coordination.NewElector(nil, role, member, work) },
		"zero role": func() (*coordination.Elector, error) {
			return coordination.NewElector(cluster.Transport("a"), coordination.Role{}, member, work)
		},
		"zero member": func() (*coordination.Elector, error) {
			return coordination.NewElector(cluster.Transport("a"), role, coordination.MemberID{}, work)
		},
		"nil OnStartedLeading": func() (*coordination.Elector, error) {
			return coordination.NewElector(cluster.Transport("a"), role, member, coordination.ElectorCallbacks{})
		},
		"invalid option": func() (*coordination.Elector, error) {
			return coordination.NewElector(cluster.Transport("a"), role, member, work, coordination.WithPollInterval(0))
		},
	} {
		if elector, err := build(); err == nil || elector != nil {
			t.Errorf("%s: NewElector = %v, %v; want an error", name, elector, err)
		}
	}
}
