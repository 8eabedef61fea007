package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// errAdversaryReset is what a kfake control function returns to break the client's
// connection at once: the client sees an EOF, not a read timeout.
var errAdversaryReset = errors.New("adversary: the connection is reset")

// TestKafkaRenewalCommitOnABrokenConnectionNeverTearsAWrite: the
// EndTxn(commit) of a renewal is read by the coordinator and its
// connection then breaks, with no answer; Kafka applies such a request
// after the connection closed, and a proxy may deliver it later still.
// The resend commits the lease. Before, a broken connection counted as a
// request that nothing applies later: the epoch went on, and the first
// EndTxn, landing while the next Write's transaction was open (one of its
// two records refused by its leader), committed that Write in part. Now
// the Write returns an error that wraps ErrOutcomeUnknown, the leadership
// ends with it, and a read_committed reader sees nothing of the Write.
func TestKafkaRenewalCommitOnABrokenConnectionNeverTearsAWrite(t *testing.T) {
	c := kafkatest.Fake(t)
	e := kaNewEnv(t, c)
	ctx := ktContext(t)
	data := c.CreateTopic(t, "coord-reset-commit-data", 2, nil)
	holder, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-1"), e.options...)
	if err != nil {
		t.Fatal(err)
	}
	txnID := e.role.String()
	side := c.Client(t)
	var held atomic.Pointer[kmsg.EndTxnRequest]
	var commits atomic.Int32
	c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kreq.(*kmsg.EndTxnRequest)
		switch {
		case req.TransactionalID != txnID:
		case req.Commit && commits.Add(1) == 1: // the next renewal's commit: read, and the connection breaks
			held.Store(req)
			return nil, errAdversaryReset, true
		case !req.Commit: // an abort: the commit read before lands first
			c.Fake.SleepControl(func() {
				if late := held.Swap(nil); late != nil {
					rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, _ = side.Request(rctx, late)
					cancel()
				}
			})
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
	t.Logf("Write: %v", err)
	if seen := kuCommitted(t, c, data, 2*time.Second); len(seen[0]) != len(seen[1]) {
		t.Fatalf("a read_committed reader sees part of the Write (partition 0 %q, partition 1 %q); Write returned %v", seen[0], seen[1], err)
	}
	if !errors.Is(err, coordination.ErrOutcomeUnknown) {
		t.Errorf("Write after the commit whose connection broke = %v, want an error that wraps ErrOutcomeUnknown", err)
	}
	if err != nil && strings.Contains(err.Error(), "nothing committed") {
		t.Errorf("Write says nothing committed: %v", err)
	}
	select {
	case <-holder.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the leadership did not end")
	}
	if !errors.Is(holder.Err(), coordination.ErrOutcomeUnknown) {
		t.Errorf("Err = %v; want ErrOutcomeUnknown", holder.Err())
	}
}
