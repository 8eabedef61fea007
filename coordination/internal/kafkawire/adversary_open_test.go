//go:build adversary

package kafkawire

// This file holds the attacks of issue 28 that still break the transport
// (a fresh adversary, branch trial28): each test fails today, and runs
// only with -tags adversary until its class is fixed.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestLateMintAfterABrokenConnectionNeverFencesTheMember: the mint's
// InitProducerId reaches the coordinator and its connection then breaks
// before any answer (EOF). The mint sends it again, and gets a pair; the
// first copy, applied late (a queued request at the broker, or a proxy
// that still delivers it), bumps the epoch over that pair before the
// member's first transaction. The member must not be fenced by its own
// request: with no other producer of the role, its first transaction
// commits, or the mint says that its outcome is unknown.
func TestLateMintAfterABrokenConnectionNeverFencesTheMember(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-reset-mint", 1, nil)
	txnID := kafkatest.TopicName("reset-mint")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	side := c.Client(t)

	var held atomic.Pointer[kmsg.InitProducerIDRequest]
	var heldNode atomic.Int32
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if held.CompareAndSwap(nil, kreq.(*kmsg.InitProducerIDRequest)) {
			heldNode.Store(c.Fake.CurrentNode())
			return nil, errReset, true
		}
		c.Fake.KeepControl()
		return nil, nil, false
	})
	var lateErr atomic.Pointer[error]
	c.Fake.ControlKey(kmsg.AddPartitionsToTxn.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.SleepControl(func() {
			if req := held.Load(); req != nil {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := side.Broker(int(heldNode.Load())).Request(rctx, req)
				rcancel()
				lateErr.Store(&err)
			}
		})
		return nil, nil, false
	})
	epoch, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		if ClassOf(err) == OutcomeUnknown {
			return // the mint says that it cannot know its pair
		}
		t.Fatalf("the mint: %v", err)
	}
	if held.Load() == nil {
		t.Fatal("no InitProducerId was taken")
	}
	err = epoch.Transact(ctx, "renewal", []Record{{Partition: Partition{Topic: topic}, Value: []byte("lease")}})
	t.Logf("the late InitProducerId: %v", deref(lateErr.Load()))
	if err != nil || epoch.Fenced() {
		t.Fatalf("the member's first transaction under its pair %v: %v (fenced %v), with no other producer: a self-fence", epoch.Producer(), err, epoch.Fenced())
	}
}

// TestOneFatalAnswerToThePlainProducersMintIsNotForever: the plain
// producer's idempotent InitProducerId (its first Append, a registration)
// is answered once with a fatal code. franz-go keeps that error for the
// client's life (doInitProducerID: keep=true), so every later Append
// fails with it, though the broker would answer the next InitProducerId;
// a campaign retries its registration until its context ends
// (TestKafkaEveryErrorCodeOfEveryRequest found it; docs/safety.md, "Still
// open"). The next Append must succeed, or the wire must say that only a
// new transport helps.
func TestOneFatalAnswerToThePlainProducersMintIsNotForever(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-plain-mint", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var answered atomic.Bool
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID != nil || !answered.CompareAndSwap(false, true) {
			c.Fake.KeepControl()
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kerr.UnknownServerError.Code, -1, -1
		return resp, nil, true
	})
	record := Record{Partition: Partition{Topic: topic}, Value: []byte("registration")}
	first := w.Append(ctx, record)
	t.Logf("the first Append: %v", first)
	for i := range 3 {
		if err := w.Append(ctx, record); err != nil {
			t.Fatalf("Append %d after one fatal answer to the plain producer's InitProducerId: %v", i+2, err)
		}
	}
}
