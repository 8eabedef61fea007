package kafkawire

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestMintUnlessMovedStopsAfterARivalsMint: a mint of the rival-mint watch
// whose first InitProducerId the coordinator answers with
// CONCURRENT_TRANSACTIONS sends none again once a rival's mint landed: it
// fails as fenced, and the rival's pair stays the coordinator's. With the
// rival's pair as its own starting point, or without the watch (Mint), it
// resends and mints. kfake answers the first InitProducerId with the code.
func TestMintUnlessMovedStopsAfterARivalsMint(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newWire := func() *Wire {
		w, err := New(Config{Brokers: c.Brokers, TxnTimeout: 10 * time.Second, RenewInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		return w
	}
	holder, rival, challenger := newWire(), newWire(), newWire()
	txnID := kafkatest.TopicName("unless-moved")
	busyOnce := func() *int {
		sent := new(int)
		c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			*sent++
			resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
			resp.ErrorCode = kerr.ConcurrentTransactions.Code
			return resp, nil, true // handled once: the resend goes to the cluster
		})
		return sent
	}
	counted := func() *int {
		n := new(int)
		c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake.KeepControl()
			*n++
			return nil, nil, false
		})
		return n
	}
	sends := counted()

	first, err := holder.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	won, err := rival.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}

	before := *sends
	busy := busyOnce()
	_, err = challenger.MintUnlessMoved(ctx, txnID, "mint", first.Producer())
	var werr *Error
	if !errors.As(err, &werr) || werr.Class != Fenced {
		t.Fatalf("MintUnlessMoved after a rival's mint: got %v, want an error of class Fenced", err)
	}
	if *busy != 1 || *sends-before != 1 {
		t.Errorf("InitProducerId sent %d times (%d answered busy), want once: no resend after the rival's mint", *sends-before, *busy)
	}
	if held, _, _ := holder.DescribeEpoch(ctx, txnID, "describe"); held != won.Producer() {
		t.Errorf("the coordinator holds %v, want the rival's %v", held, won.Producer())
	}

	// From the rival's own pair nothing moved: the resend mints.
	busyOnce()
	got, err := challenger.MintUnlessMoved(ctx, txnID, "mint", won.Producer())
	if err != nil {
		t.Fatalf("MintUnlessMoved from the coordinator's pair: %v", err)
	}
	if got.Producer() == won.Producer() {
		t.Fatalf("MintUnlessMoved minted nothing new: %v", got.Producer())
	}
	// Without the watch, Mint resends whatever was minted meanwhile.
	busyOnce()
	if _, err := holder.Mint(ctx, txnID, "mint"); err != nil {
		t.Fatalf("Mint after a busy answer: %v", err)
	}
}

// TestKafkaRivalMinted: what the rival-mint watch reads of the
// coordinator on the real broker (and kfake): a pair that another wire
// minted after from is a rival's, in Empty and after a commit; the
// coordinator's pair itself, and a pair of this wire, are not.
func TestKafkaRivalMinted(t *testing.T) {
	for _, c := range []*kafkatest.Cluster{kafkatest.Fake(t), kafkatest.Kafka(t)} {
		t.Run(c.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			newWire := func() *Wire {
				w, err := New(Config{Brokers: c.Brokers, TxnTimeout: 10 * time.Second, RenewInterval: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(w.Close)
				return w
			}
			a, b := newWire(), newWire()
			topic := c.CreateTopic(t, "coord-rival", 1, nil)
			txnID := kafkatest.TopicName("rival")
			first, err := a.Mint(ctx, txnID, "mint")
			if err != nil {
				t.Fatal(err)
			}
			if _, moved := b.rivalMinted(ctx, txnID, first.Producer()); moved {
				t.Error("the coordinator's own pair reads as a rival's")
			}
			second, err := b.Mint(ctx, txnID, "mint")
			if err != nil {
				t.Fatal(err)
			}
			if rival, moved := a.rivalMinted(ctx, txnID, first.Producer()); !moved || rival != second.Producer() {
				t.Errorf("after b's mint, a reads %v, %t; want b's %v as a rival's", rival, moved, second.Producer())
			}
			if _, moved := b.rivalMinted(ctx, txnID, first.Producer()); moved {
				t.Error("b reads its own mint as a rival's")
			}
			if err := second.Transact(ctx, "write", []Record{{Partition: Partition{Topic: topic}, Value: []byte("lease")}}); err != nil {
				t.Fatal(err)
			}
			if rival, moved := a.rivalMinted(ctx, txnID, first.Producer()); !moved || rival != second.Producer() {
				t.Errorf("after b's commit, a reads %v, %t; want b's %v as a rival's", rival, moved, second.Producer())
			}
		})
	}
}
