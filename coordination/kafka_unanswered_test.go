package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The requests that the broker applies after the client gave up on their
// answer (issue 28), on kfake: a control function holds one request of an
// API key (SleepControl) past the client's read timeout (the renew
// interval of ktLease, 2 s) and lets it go later. A real broker cannot be
// made to hold one without a proxy.

// kuHold returns a release that runs once, and runs at the end of the test
// before the cluster closes, and the channel that it closes.
func kuHold(t *testing.T) (release func(), released <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return release, ch
}

// kuCommitted reads partitions 0 and 1 of topic read_committed for wait,
// and returns the values per partition.
func kuCommitted(t *testing.T, c *kafkatest.Cluster, topic string, wait time.Duration) map[int32][]string {
	t.Helper()
	client := c.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	seen := make(map[int32][]string)
	for ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[r.Partition] = append(seen[r.Partition], string(r.Value)) })
	}
	return seen
}

// TestKafkaLateRenewalCommitNeverTearsAWrite: the EndTxn(commit) of a
// renewal gets no answer within the read timeout, and its resend commits
// the lease. Before, the epoch went on, and the held EndTxn, landing while
// the next Write's transaction was open (one of its two records refused by
// its leader), committed that Write in part, which Write reported as
// "nothing committed; the abort failed too". Now the epoch begins no
// transaction after the unanswered EndTxn: the Write returns an error that
// wraps ErrOutcomeUnknown, the leadership ends with it, and a
// read_committed reader sees nothing of the Write.
func TestKafkaLateRenewalCommitNeverTearsAWrite(t *testing.T) {
	c := kafkatest.Fake(t)
	e := kaNewEnv(t, c)
	ctx := ktContext(t)
	data := c.CreateTopic(t, "coord-late-commit-data", 2, nil)
	holder, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-1"), e.options...)
	if err != nil {
		t.Fatal(err)
	}
	txnID := e.role.String()
	release, released := kuHold(t)
	var commits atomic.Int32
	c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kreq.(*kmsg.EndTxnRequest)
		switch {
		case req.TransactionalID != txnID:
		case req.Commit && commits.Add(1) == 1: // the next renewal's commit: held past the read timeout
			c.Fake.SleepControl(func() { <-released })
		case !req.Commit: // an abort: the held commit lands first
			c.Fake.SleepControl(func() { release(); time.Sleep(300 * time.Millisecond) })
		}
		return nil, nil, false
	})
	c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: data, Partitions: []int32{1}, Err: kerr.MessageTooLarge, Count: -1})

	klEventually(t, 20*time.Second, "a renewal's commit sent again", func() (bool, string) {
		n := commits.Load()
		return n >= 2, fmt.Sprintf("%d commits of the role", n)
	})
	time.Sleep(200 * time.Millisecond) // the resend's answer reaches the renewal
	err = holder.Write(ctx,
		coordination.GuardedRecord{Topic: data, Partition: 0, Value: []byte("a")},
		coordination.GuardedRecord{Topic: data, Partition: 1, Value: []byte("b")})
	release()
	t.Logf("Write: %v", err)
	if !errors.Is(err, coordination.ErrOutcomeUnknown) {
		t.Errorf("Write after the unanswered commit = %v, want an error that wraps ErrOutcomeUnknown", err)
	}
	if err != nil && strings.Contains(err.Error(), "nothing committed") {
		t.Errorf("Write says nothing committed: %v", err)
	}
	select {
	case <-holder.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the leadership did not end")
	}
	if !errors.Is(holder.Err(), coordination.ErrOutcomeUnknown) || !errors.Is(context.Cause(holder.Context()), coordination.ErrOutcomeUnknown) {
		t.Errorf("Err = %v, cause %v; want ErrOutcomeUnknown", holder.Err(), context.Cause(holder.Context()))
	}
	if seen := kuCommitted(t, c, data, 2*time.Second); len(seen[0]) != len(seen[1]) || len(seen[0]) > 0 {
		t.Fatalf("a read_committed reader sees %v of the failed Write (partition 0 %q, partition 1 %q)", seen, seen[0], seen[1])
	}
}

// TestKafkaLateMintAnswerIsNoSelfFence: the first InitProducerId of a
// member's campaign gets its answer after the read timeout (kfake holds it
// 3 s). Before, it was sent again; the first one landed after the second,
// bumped the epoch over the member's pair, and the member's first lease
// failed as fenced, with no other member. Now the campaign's mint waits for
// its answer: one InitProducerId, and the leadership holds and renews.
func TestKafkaLateMintAnswerIsNoSelfFence(t *testing.T) {
	c := kafkatest.Fake(t)
	e := kaNewEnv(t, c)
	ctx := ktContext(t)
	txnID := e.role.String()
	release, released := kuHold(t)
	var mints atomic.Int32
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		if id := kreq.(*kmsg.InitProducerIDRequest).TransactionalID; id == nil || *id != txnID {
			return nil, nil, false
		}
		if mints.Add(1) == 1 {
			c.Fake.SleepControl(func() {
				select {
				case <-released:
				case <-time.After(3 * time.Second):
				}
			})
		}
		return nil, nil, false
	})
	// The role's first AddPartitionsToTxn lets a held mint land first.
	c.Fake.ControlKey(kmsg.AddPartitionsToTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if kreq.(*kmsg.AddPartitionsToTxnRequest).TransactionalID != txnID {
			c.Fake.KeepControl()
			return nil, nil, false
		}
		c.Fake.SleepControl(func() { release(); time.Sleep(300 * time.Millisecond) })
		return nil, nil, false
	})
	holder, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-1"), e.options...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Resign(context.Background()) }()
	time.Sleep(2*ktLease.RenewInterval() + ktLease.RenewInterval()/2) // two renewals
	if err := holder.Err(); err != nil {
		t.Fatalf("the leadership ended with no other member: %v", err)
	}
	if n := mints.Load(); n != 1 {
		t.Fatalf("the campaign sent %d InitProducerId, want 1", n)
	}
}
