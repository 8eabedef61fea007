package coordination_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// A renewal whose Produce never gets an answer (reported from krabka-bench
// -only transfer on the 3-node cluster: a renewal's Produce unanswered for
// over 2 minutes held the role's write slot, and a Resign without a
// deadline blocked). On kfake a control function holds every Produce of
// the role's transactional producer until the test ends: the broker never
// answers, and the client's read timeout and resends change nothing.

// ksHoldRoleProduce holds every Produce request of the role's
// transactional producer until the test ends, and returns the count of
// held requests and the instant of the first (UnixNano).
func ksHoldRoleProduce(t *testing.T, c *kafkatest.Cluster, role coordination.Role) (held *atomic.Int32, first *atomic.Int64) {
	t.Helper()
	_, released := kuHold(t)
	held, first = new(atomic.Int32), new(atomic.Int64)
	txnID := role.String()
	c.Fake.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		if id := kreq.(*kmsg.ProduceRequest).TransactionID; id == nil || *id != txnID {
			return nil, nil, false
		}
		if held.Add(1) == 1 {
			first.Store(time.Now().UnixNano())
		}
		c.Fake.SleepControl(func() { <-released })
		return nil, nil, false
	})
	return held, first
}

// ksWaitHeld waits for the first held Produce, and returns its instant.
func ksWaitHeld(t *testing.T, held *atomic.Int32, first *atomic.Int64) time.Time {
	t.Helper()
	klEventually(t, 10*time.Second, "a renewal's Produce held", func() (bool, string) {
		return held.Load() > 0, "no Produce of the role yet"
	})
	return time.Unix(0, first.Load())
}

// TestKafkaResignDuringUnansweredRenewalIsBounded: Resign with
// context.Background() while the renewal's Produce goes unanswered. It
// stops the renewal (which gives the write slot back within 250 ms), and
// its tombstones, behind the renewal's transaction that ends in the
// background, wait at most until the deadline of the newest lease (at
// least 600 ms): Resign returns within a second of that deadline, and the
// leadership has ended. Before, the tombstones waited for the renewal's
// transaction without a bound; on kfake its coordinator's abort at the
// transaction timeout (the lease duration after the renewal began, about
// 2 s after the deadline) ended the wait, and a broker that stays silent
// held it longer.
func TestKafkaResignDuringUnansweredRenewalIsBounded(t *testing.T) {
	c := kafkatest.Fake(t)
	e := kaNewEnv(t, c)
	ctx := ktContext(t)
	holder, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-1"), e.options...)
	if err != nil {
		t.Fatal(err)
	}
	held, first := ksHoldRoleProduce(t, c, e.role)
	ksWaitHeld(t, held, first)
	time.Sleep(500 * time.Millisecond) // the renewal waits for the answer
	deadline := time.UnixMilli(holder.Lease().Deadline)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- holder.Resign(context.Background()) }()
	select {
	case err = <-done:
	case <-time.After(ktLease.Duration() + 30*time.Second):
		t.Fatalf("Resign(context.Background()) did not return within %v", ktLease.Duration()+30*time.Second)
	}
	took, late := time.Since(start), time.Since(deadline)
	t.Logf("Resign returned after %v, %v after the deadline of the newest lease: %v", took.Round(time.Millisecond), late.Round(time.Millisecond), err)
	if late > time.Second {
		t.Errorf("Resign(context.Background()) returned %v after the deadline of the newest lease (took %v), want at most 1 s after it", late.Round(time.Millisecond), took.Round(time.Millisecond))
	}
	select {
	case <-holder.Done():
	default:
		t.Fatal("the leadership holds after Resign returned")
	}
}

// TestKafkaResignWhoseTombstonesGoUnansweredIsBounded: Resign with
// context.Background() between two renewals, and the Produce of its
// tombstone transaction never gets an answer. Before, that transaction ran
// under the caller's context, which never ends: its batch went again after
// each read timeout for as long as the broker stayed silent (on kfake, until
// its coordinator aborted the transaction at its timeout, the lease
// duration after the tombstones began, and fenced the pair). Now Resign
// returns within a second of the deadline of the newest lease, the
// leadership has ended, and the registration tombstone, a plain append,
// deregisters the member. The lease (6 s, renew interval 4 s) puts the
// deadline 3 s after Resign's call, 3 s before kfake's abort.
func TestKafkaResignWhoseTombstonesGoUnansweredIsBounded(t *testing.T) {
	c := kafkatest.Fake(t)
	lease, err := coordination.NewLeaseConfig(6*time.Second, 4*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := coordination.NewKafkaTransport(lease, c.Brokers...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(transport.Close)
	_, options := ktStateTopic(t, c, transport, 4)
	options = append(options, coordination.WithLeaseConfig(lease), coordination.WithPollInterval(250*time.Millisecond))
	role, member := ktRole(t, "resign-unanswered"), fxMember(t, "node-1")
	holder, err := coordination.AcquireLeadership(ktContext(t), transport, role, member, options...)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.UnixMilli(holder.Lease().GrantedAt).Add(3 * time.Second))) // 1 s before the first renewal
	held, first := ksHoldRoleProduce(t, c, role)
	deadline := time.UnixMilli(holder.Lease().Deadline)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- holder.Resign(context.Background()) }()
	ksWaitHeld(t, held, first)
	select {
	case err = <-done:
	case <-time.After(lease.Duration() + 30*time.Second):
		t.Fatalf("Resign(context.Background()) did not return within %v", lease.Duration()+30*time.Second)
	}
	took, late := time.Since(start), time.Since(deadline)
	t.Logf("Resign returned after %v, %v after the deadline of the newest lease: %v", took.Round(time.Millisecond), late.Round(time.Millisecond), err)
	if late > time.Second {
		t.Errorf("Resign(context.Background()) returned %v after the deadline of the newest lease (took %v), want at most 1 s after it", late.Round(time.Millisecond), took.Round(time.Millisecond))
	}
	if err == nil {
		t.Error("Resign = nil, want the error of the lease tombstone that got no answer")
	}
	select {
	case <-holder.Done():
	default:
		t.Fatal("the leadership holds after Resign returned")
	}
	klEventually(t, 10*time.Second, "the member deregistered", func() (bool, string) {
		state, err := coordination.DescribeRoleState(ktContext(t), transport, role, options...)
		if err != nil {
			return false, err.Error()
		}
		return len(state.Roster) == 0, "roster " + ktRoster(state)
	})
}
