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

// abandonHook cancels a mint attempt's context as soon as its
// InitProducerId is on the wire, and holds the answer back for a moment,
// so that the attempt gives up before the coordinator's answer reaches it:
// the mint that a challenger abandons while the coordinator moves.
type abandonHook struct {
	cancel atomic.Pointer[context.CancelFunc]
	writes atomic.Int32 // InitProducerId requests written
}

func (h *abandonHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key != kmsg.InitProducerID.Int16() || err != nil {
		return
	}
	h.writes.Add(1)
	if cancel := h.cancel.Load(); cancel != nil {
		(*cancel)()
	}
}

func (h *abandonHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.InitProducerID.Int16() && err == nil && h.cancel.Load() != nil {
		time.Sleep(300 * time.Millisecond) // the answer reaches the client after its caller gave up
	}
}

var (
	_ kgo.HookBrokerWrite = (*abandonHook)(nil)
	_ kgo.HookBrokerRead  = (*abandonHook)(nil)
)

// TestKafkaAbandonedMintIsTakenByTheNextMint: a mint attempt whose caller
// gave up with its InitProducerId in flight still gets its answer, and the
// next Mint of the id takes that pair instead of minting again, while the
// coordinator holds it: one epoch for the two attempts, and the pair
// writes. When another producer minted in between, the next Mint mints
// anew. On kfake and on the real broker.
func TestKafkaAbandonedMintIsTakenByTheNextMint(t *testing.T) {
	for _, c := range []*kafkatest.Cluster{kafkatest.Fake(t), kafkatest.Kafka(t)} {
		t.Run(c.Name, func(t *testing.T) { ktAbandonedMint(t, c) })
	}
}

func ktAbandonedMint(t *testing.T, c *kafkatest.Cluster) {
	hook := new(abandonHook)
	newWire := func(opts ...kgo.Opt) *Wire {
		w, err := New(Config{Brokers: c.Brokers, Options: opts, TxnTimeout: 10 * time.Second, RenewInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		return w
	}
	w := newWire(kgo.WithHooks(hook))
	other := newWire()
	topic := c.CreateTopic(t, "coord-late-mint", 1, nil)
	txnID := kafkatest.TopicName("late-mint")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	abandon := func() Producer {
		t.Helper()
		attempt, stop := context.WithCancel(ctx)
		defer stop()
		hook.cancel.Store(&stop)
		defer hook.cancel.Store(nil)
		_, err := w.Mint(attempt, txnID, "mint")
		var werr *Error
		if !errors.As(err, &werr) || werr.Class != Canceled {
			t.Fatalf("abandoned mint: got %v, want an error of class Canceled", err)
		}
		if _, pending := w.LateMint(txnID, Producer{}); !pending {
			t.Fatal("LateMint: the abandoned attempt's request is in flight, but pending is false")
		}
		// The answer lands: the coordinator holds the pair, and LateMint
		// knows it as this wire's own.
		deadline := time.Now().Add(10 * time.Second)
		for {
			held, ok, err := other.DescribeEpoch(ctx, txnID, "describe")
			if err != nil || !ok {
				t.Fatalf("DescribeEpoch: %v, %v", ok, err)
			}
			if minted, _ := w.LateMint(txnID, held); minted {
				return held
			}
			if time.Now().After(deadline) {
				t.Fatalf("the abandoned attempt's pair was never kept (coordinator holds %v)", held)
			}
			time.Sleep(20 * time.Millisecond) // poll interval of the condition wait
		}
	}

	late := abandon()
	if late == first.Producer() {
		t.Fatalf("the abandoned attempt minted nothing: the coordinator still holds %v", late)
	}
	if first.Fenced() == false {
		t.Error("the first epoch is not ended after a newer mint of the same wire")
	}
	writes := hook.writes.Load()
	taken, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	if taken.Producer() != late {
		t.Fatalf("the next Mint got %v, want the abandoned attempt's pair %v (no second epoch)", taken.Producer(), late)
	}
	if n := hook.writes.Load() - writes; n != 0 {
		t.Errorf("the next Mint sent %d InitProducerId, want 0", n)
	}
	if held, _, _ := other.DescribeEpoch(ctx, txnID, "describe"); held != late {
		t.Errorf("after the next Mint the coordinator holds %v, want %v", held, late)
	}
	if err := taken.Transact(ctx, "write", []Record{{Partition: Partition{Topic: topic}, Value: []byte("under the taken pair")}}); err != nil {
		t.Fatalf("a transaction under the taken pair: %v", err)
	}

	// Another producer mints after the abandoned attempt: its pair is no
	// longer the coordinator's, and the next Mint mints anew. (The
	// abandoned attempt sends one InitProducerId and no retry, so it waits
	// for the commit's markers first: CONCURRENT_TRANSACTIONS mints
	// nothing.)
	for deadline := time.Now().Add(10 * time.Second); ; {
		txn, err := w.describeTransaction(ctx, txnID)
		if err == nil && (txn.State == "CompleteCommit" || txn.State == "Empty") { // kfake reports Empty
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit under the taken pair did not complete: %+v, %v", txn, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval of the condition wait
	}
	late = abandon()
	rival, err := other.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	again, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	if p := again.Producer(); p == late || p == rival.Producer() {
		t.Fatalf("the Mint after a rival's got %v (abandoned %v, rival %v), want a new pair", p, late, rival.Producer())
	}
	if _, ok := w.LateMint(txnID, late); ok {
		t.Error("LateMint still reports the abandoned pair after a Mint that did not take it")
	}
}
