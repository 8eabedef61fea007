package coordination_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// The wall clock of the holder steps (NTP, a VM restore) while its waits
// go on: every wait, timeout and deadline of the local process is measured
// on the clock's monotonic reading, and wall-clock milliseconds only stamp
// the lease's instants (issue 28).

// wallStepClock is the scenario's clock with a wall reading that a test
// steps on its own: NowMillis reads the manual clock plus the step, while
// the waits (After) and the monotonic reading stay on the manual clock, as
// a host's do when its wall clock is set.
type wallStepClock struct {
	*scClock
	step atomic.Int64 // ms added to the wall reading
}

func (c *wallStepClock) NowMillis() int64 { return c.scClock.NowMillis() + c.step.Load() }

// TestRenewalsGoOnAtTheRenewIntervalAcrossAWallStep: a step of the
// holder's wall clock by an hour, back or forward, between two renewals
// neither stops nor hastens them: the holder renews every renew interval
// of the manual (monotonic) clock, each lease stamped by the stepped wall
// clock. Before the fix a step back stopped the renewals for the hour.
func TestRenewalsGoOnAtTheRenewIntervalAcrossAWallStep(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			scBothPaths(t, func(t *testing.T, e *scEnv) {
				node1 := e.member("node-1")
				clock := &wallStepClock{scClock: e.clock}
				holder := e.acquireNow(node1, coordination.WithClock(clock))
				e.runTo(5_000)
				clock.step.Store(step.Milliseconds())
				for i := int64(1); i <= 6; i++ {
					e.runTo(i*10_000 - 1)
					if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != int(i) {
						t.Fatalf("%d ms (wall stepped %v): %d lease writes, want %d: the renewal came early", e.now(), step, got, i)
					}
					e.runTo(i * 10_000)
					scHolds(t, holder)
					if got := node1.raw.Calls(coordinationtest.OpWriteLease); got != int(1+i) {
						t.Fatalf("%d ms (wall stepped %v): %d lease writes, want %d: the renewal is late", e.now(), step, got, 1+i)
					}
					if got, want := holder.Lease().GrantedAt, scAt(i*10_000)+step.Milliseconds(); got != want {
						t.Fatalf("%d ms: lease granted at %d, want the stepped wall reading %d", e.now(), got-scStart, want-scStart)
					}
				}
				e.resign(holder)
			})
		})
	}
}

// TestRenewDeadlineEndsOnTimeAcrossAWallStep: a holder cut off from the
// cluster ends its leadership at the grant of its last confirmed lease
// plus the renew deadline, measured on its monotonic clock, whatever its
// wall clock did meanwhile: a step back of an hour does not keep the work
// running beside a successor for that hour (before the fix it did), and a
// step forward does not end it early.
func TestRenewDeadlineEndsOnTimeAcrossAWallStep(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			scBothPaths(t, func(t *testing.T, e *scEnv) {
				node1 := e.member("node-1")
				clock := &wallStepClock{scClock: e.clock}
				holder := e.acquireNow(node1, coordination.WithClock(clock), coordination.WithRenewDeadline(20*time.Second))
				e.runTo(10_000) // the first renewal lands: granted at 10000
				node1.raw.Cut()
				e.runTo(15_000)
				clock.step.Store(step.Milliseconds())
				e.runTo(29_999)
				scHolds(t, holder)
				if err := holder.Context().Err(); err != nil {
					t.Fatalf("Context ended at 29999 (wall stepped %v): %v", step, err)
				}
				e.runTo(30_000) // 10000 + the renew deadline, on the monotonic clock
				scEnded(t, holder, coordination.ErrRenewDeadline)
				if holder.Context().Err() == nil {
					t.Fatalf("Context still live at the renew deadline (wall stepped %v)", step)
				}
				node1.raw.Heal()
			})
		})
	}
}

// steppedSystemClock is the host's clock with a wall reading that a test
// steps: it embeds SystemClock, so its waits and its monotonic reading are
// the host's (inside a synctest bubble, the bubble's), and only NowMillis
// moves.
type steppedSystemClock struct {
	coordination.SystemClock
	step *atomic.Int64 // ms added to the wall reading
}

func (c steppedSystemClock) NowMillis() int64 { return c.SystemClock.NowMillis() + c.step.Load() }

// TestSystemClockWaitsAreMonotonicAcrossAWallStep: the same over the host's
// clock (a SystemClock embedded, its wall reading stepped back an hour
// after the first lease), inside a synctest bubble: the holder renews at
// every renew interval, and once cut off, its renew deadline ends the
// leadership at the grant of its last confirmed lease plus the deadline.
func TestSystemClockWaitsAreMonotonicAcrossAWallStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := coordinationtest.NewCluster()
		node1 := cluster.Transport("node-1")
		step := new(atomic.Int64)
		start := time.Now()
		holder, err := coordination.AcquireLeadership(context.Background(), node1, fxRole(t, "controller"), fxMember(t, "node-1"),
			coordination.WithClock(steppedSystemClock{step: step}), coordination.WithLeaseDuration(scLease),
			coordination.WithRenewInterval(scRenew), coordination.WithPollInterval(scPoll), coordination.WithRenewDeadline(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		step.Store(-time.Hour.Milliseconds())
		time.Sleep(5*time.Second + time.Millisecond) // past the renewal at 10 s
		synctest.Wait()
		if got := node1.Calls(coordinationtest.OpWriteLease); got != 2 {
			t.Fatalf("%v after the grant, with the wall clock stepped back an hour: %d lease writes, want 2", time.Since(start), got)
		}
		node1.Cut()
		time.Sleep(20*time.Second - 2*time.Millisecond) // just before the renewal at 10 s + the renew deadline
		synctest.Wait()
		select {
		case <-holder.Done():
			t.Fatalf("the leadership ended early: %v", holder.Err())
		default:
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		select {
		case <-holder.Done():
		default:
			t.Fatalf("%v after the grant, the renew deadline did not end the leadership", time.Since(start))
		}
		if !errors.Is(holder.Err(), coordination.ErrRenewDeadline) {
			t.Fatalf("Err = %v, want ErrRenewDeadline", holder.Err())
		}
		node1.Heal()
	})
}

// TestStandbyHeartbeatsGoOnAcrossAWallStep: a waiting standby with
// heartbeats on writes one every heartbeat interval of its monotonic
// clock, whatever its wall clock did: before the fix a step back of an
// hour stopped its heartbeats for the hour, and its rank lapsed in the
// view of the others.
func TestStandbyHeartbeatsGoOnAcrossAWallStep(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1, node2 := e.member("node-1"), e.member("node-2")
		hb := coordination.WithHeartbeatInterval(5 * time.Second)
		holder := e.acquireNow(node1, hb)
		clock := &wallStepClock{scClock: e.clock}
		standby := e.campaign(node2, hb, coordination.WithClock(clock))
		e.runTo(2_000)
		before := node2.raw.Calls(coordinationtest.OpAppend) // the registration and the first heartbeat
		clock.step.Store(-time.Hour.Milliseconds())
		e.runTo(32_000)
		standby.waiting(t, "30 s after its wall clock stepped back")
		if got := node2.raw.Calls(coordinationtest.OpAppend) - before; got < 5 {
			t.Fatalf("%d heartbeats in the 30 s after the wall clock stepped back an hour; want one every 5 s", got)
		}
		standby.abandon(t)
		e.resign(holder)
	})
}
