package kafkawire

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// holdProduceHook tells when a Produce is on the wire, and holds its answer
// back for a while once armed, so that the test ends the epoch while the
// transaction waits for that answer.
type holdProduceHook struct {
	armed    atomic.Bool
	sent     chan struct{} // receives once a Produce is written while armed
	answered atomic.Bool   // the held answer reached the client
}

func (h *holdProduceHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.Produce.Int16() && err == nil && h.armed.Load() {
		select {
		case h.sent <- struct{}{}:
		default:
		}
	}
}

func (h *holdProduceHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.Produce.Int16() && err == nil && h.armed.Load() {
		time.Sleep(3 * time.Second) // the answer comes long after the epoch ended
		h.answered.Store(true)
	}
}

var (
	_ kgo.HookBrokerWrite = (*holdProduceHook)(nil)
	_ kgo.HookBrokerRead  = (*holdProduceHook)(nil)
)

// TestEpochEndFailsTheTransactionInFlight: the end of an epoch (a fence
// that another call learnt of, a newer mint of the wire) fails the
// transaction in flight at once, with the epoch's error, without waiting
// for the answer of its request in flight; and every later transaction of
// the epoch fails without a request. The context of a transaction is the
// transaction's own, which the end cancels.
func TestEpochEndFailsTheTransactionInFlight(t *testing.T) {
	c := kafkatest.Fake(t)
	hook := &holdProduceHook{sent: make(chan struct{}, 1)}
	w, err := New(Config{Brokers: c.Brokers, Options: []kgo.Opt{kgo.WithHooks(hook)}, TxnTimeout: 10 * time.Second, RenewInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	topic := c.CreateTopic(t, "coord-epoch-end", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	epoch, err := w.Mint(ctx, kafkatest.TopicName("epoch-end"), "mint")
	if err != nil {
		t.Fatal(err)
	}
	record := []Record{{Partition: Partition{Topic: topic}, Value: []byte("lease")}}
	if err := epoch.Transact(ctx, "write", record); err != nil {
		t.Fatalf("a transaction before the end: %v", err)
	}

	hook.armed.Store(true)
	result := make(chan error, 1)
	go func() { result <- epoch.Transact(ctx, "write", record) }()
	select {
	case <-hook.sent:
	case err := <-result:
		t.Fatalf("the transaction returned before its Produce was on the wire: %v", err)
	}
	reason := &Error{Op: "token of role epoch-end", Class: Fenced, Err: errors.New("a newer epoch")}
	epoch.end(reason)
	err = <-result
	if hook.answered.Load() {
		t.Fatal("the transaction waited for the answer of its Produce after the epoch ended")
	}
	var werr *Error
	if !errors.As(err, &werr) || werr.Class != Fenced || !werr.Ended {
		t.Fatalf("the transaction in flight: got %v, want the epoch's end (class Fenced, Ended)", err)
	}

	hook.armed.Store(false)
	err = epoch.Transact(ctx, "write", record)
	var ended *Error
	if !errors.As(err, &werr) || werr.Class != Fenced || !errors.As(werr.Err, &ended) || !ended.Ended {
		t.Fatalf("a transaction after the end: got %v, want the epoch's end under the call's op", err)
	}
}
