package kafkawire

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// This file holds the tests of an InitProducerId whose connection broke
// after it was written (issue 28: the self-fence by a late mint), on kfake.

// copyWire is a wire whose copy of a mint lives briefly: a transaction
// timeout of 2 s and the read timeout's floor (1 s).
func copyWire(t *testing.T, c *kafkatest.Cluster) *Wire {
	t.Helper()
	w, err := New(Config{Brokers: c.Brokers, TxnTimeout: 2 * time.Second, RenewInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// TestLateMintAfterABrokenConnectionNeverFencesTheMember: the mint's
// InitProducerId reaches the coordinator and its connection then breaks
// before any answer (EOF). The broker applies such a request later (it
// read it whole; a proxy may still deliver it): here 1.5 s after the
// break, or at the member's first AddPartitionsToTxn if that comes first,
// within the copy's life (the read timeout plus the transaction timeout,
// 3 s). Before, the mint sent it again at once and got a pair; the first
// copy then bumped the epoch over that pair, and the member's first
// transaction was fenced with no other producer of the id: a self-fence.
// Now the mint sends no InitProducerId again while the copy may land, so
// its pair is the last one and its first transaction commits.
func TestLateMintAfterABrokenConnectionNeverFencesTheMember(t *testing.T) {
	c := kafkatest.Fake(t)
	w := copyWire(t, c)
	topic := c.CreateTopic(t, "coord-reset-mint", 1, nil)
	txnID := kafkatest.TopicName("reset-mint")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	side := c.Client(t)

	var taken atomic.Bool
	var held atomic.Pointer[kmsg.InitProducerIDRequest]
	var heldNode atomic.Int32
	var mints atomic.Int32
	var lateErr atomic.Pointer[error]
	landed := make(chan struct{})
	land := func() { // the copy read before the break is applied, once
		if req := held.Swap(nil); req != nil {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := side.Broker(int(heldNode.Load())).Request(rctx, req)
			rcancel()
			lateErr.Store(&err)
			close(landed)
		}
	}
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kreq.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID == nil || *req.TransactionalID != txnID {
			return nil, nil, false
		}
		if taken.CompareAndSwap(false, true) {
			held.Store(req)
			heldNode.Store(c.Fake.CurrentNode())
			time.AfterFunc(1500*time.Millisecond, land)
			return nil, errReset, true // read, not applied yet; the connection breaks
		}
		mints.Add(1)
		return nil, nil, false
	})
	c.Fake.ControlKey(kmsg.AddPartitionsToTxn.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.SleepControl(land)
		return nil, nil, false
	})

	start := time.Now()
	epoch, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatalf("the mint: %v", err)
	}
	t.Logf("the mint took %v, %d InitProducerId after the broken one, its late copy included", time.Since(start).Round(time.Millisecond), mints.Load())
	if !taken.Load() {
		t.Fatal("no InitProducerId was taken")
	}
	err = epoch.Transact(ctx, "renewal", []Record{{Partition: Partition{Topic: topic}, Value: []byte("lease")}})
	select {
	case <-landed:
	case <-time.After(5 * time.Second):
		t.Fatal("the copy of the broken InitProducerId was never applied")
	}
	t.Logf("the late InitProducerId: %v", deref(lateErr.Load()))
	if err != nil || epoch.Fenced() {
		t.Fatalf("the member's first transaction under its pair %v: %v (fenced %v), with no other producer: a self-fence", epoch.Producer(), err, epoch.Fenced())
	}
	if err := epoch.Transact(ctx, "write", []Record{{Partition: Partition{Topic: topic}, Value: []byte("write")}}); err != nil {
		t.Fatalf("the member's second transaction: %v", err)
	}
}

// TestMintWithoutABrokenConnectionWaitsForNoCopy: the wait for a copy of
// an earlier InitProducerId is for a mint after a broken connection only.
// Mints of an id whose InitProducerId were answered, the hot path of a
// handover, wait for nothing: ten mints in a row on kfake, with a copy's
// life of 31 s, take well under one copy's life.
func TestMintWithoutABrokenConnectionWaitsForNoCopy(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c) // TxnTimeout 30 s: a copy would live 31 s
	txnID := kafkatest.TopicName("no-copy")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	var last Producer
	for i := range 10 {
		epoch, err := w.Mint(ctx, txnID, "mint")
		if err != nil {
			t.Fatalf("mint %d: %v", i, err)
		}
		if i > 0 && epoch.Producer().Epoch != last.Epoch+1 {
			t.Errorf("mint %d: pair %v after %v; want one bump per mint", i, epoch.Producer(), last)
		}
		last = epoch.Producer()
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("ten mints without a broken connection took %v; want no wait for a copy", took)
	}
}

// noteTestCopy records a copy of an InitProducerId of txnID written to
// node, alive for life, as a mint whose attempt broke there does.
func noteTestCopy(w *Wire, txnID string, node int32, life time.Duration) {
	w.mu.Lock()
	id := w.idLocked(txnID)
	w.mu.Unlock()
	id.mint.noteCopy([]int32{node}, life)
}

// TestMintWaitsForACopyAtTheCoordinator: a copy of an InitProducerId that
// went to the node that is still the coordinator of the id may land for
// its whole life, so a mint whose context ends first sends no
// InitProducerId and says why; once the life has passed, a mint goes.
func TestMintWaitsForACopyAtTheCoordinator(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	txnID := kafkatest.TopicName("copy-here")
	var mints atomic.Int32
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		mints.Add(1)
		return nil, nil, false
	})
	noteTestCopy(w, txnID, c.Fake.CoordinatorFor(txnID), 2*time.Second)

	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := w.Mint(short, txnID, "mint")
	if ClassOf(err) != Canceled || !strings.Contains(err.Error(), "may still be applied") {
		t.Fatalf("a mint whose context ends while a copy may land = %v; want class %v that names the copy", err, Canceled)
	}
	if n := mints.Load(); n != 0 {
		t.Fatalf("%d InitProducerId sent while a copy may land; want none", n)
	}
	ctx, cancelLong := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelLong()
	start := time.Now()
	if _, err := w.Mint(ctx, txnID, "mint"); err != nil {
		t.Fatalf("the mint after the copy's life: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("the mint went after %v, within the copy's life (2 s, 0.5 s of it gone)", took)
	}
}

// TestMintAfterACopyAtAnotherNodeGoesAtOnce: a copy that went to a node
// that is no longer the coordinator cannot land once another node answers
// as the coordinator (unansweredAt), so the mint asks (DescribeTransactions)
// and goes, without waiting for the copy's life.
func TestMintAfterACopyAtAnotherNodeGoesAtOnce(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	txnID := kafkatest.TopicName("copy-elsewhere")
	noteTestCopy(w, txnID, c.Fake.CoordinatorFor(txnID)+7, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := w.Mint(ctx, txnID, "mint"); err != nil {
		t.Fatalf("the mint: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the mint took %v; want no wait for a copy at a node that is not the coordinator", took)
	}
	if _, _, pending := w.ids[txnID].mint.pendingCopy(); pending {
		t.Error("the copy is still pending after another node answered as the coordinator")
	}
}
