package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// This file tests the requests that the broker applies after the client
// gave up on their answer (issue 28): kfake holds one request of an API
// key (SleepControl) past the client's read timeout, which is 1 s with a
// short renew interval (RequestTimeoutOverhead), and lets it go later.

// unansweredWire returns a wire on c whose read timeout is 1 s (11 s for a
// Produce, which adds its own timeout), with a transaction timeout of 30 s.
func unansweredWire(t *testing.T, c *kafkatest.Cluster) *Wire {
	t.Helper()
	w, err := New(Config{Brokers: c.Brokers, TxnTimeout: 30 * time.Second, RenewInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// holdRelease is a request that kfake holds until release, which runs
// once; the test's cleanup runs it before the cluster closes.
func holdRelease(t *testing.T) (release func(), released <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return release, ch
}

// committedRecords reads topic's partitions 0 and 1 read_committed for
// wait, and returns the values it saw per partition.
func committedRecords(t *testing.T, c *kafkatest.Cluster, topic string, wait time.Duration) map[int32][]string {
	t.Helper()
	client := c.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	seen := make(map[int32][]string)
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) { seen[r.Partition] = append(seen[r.Partition], string(r.Value)) })
	}
	return seen
}

// TestLateEndTxnNeverTearsALaterTransaction: the EndTxn(commit) of a
// transaction gets no answer within the read timeout, and its resend
// commits it. The held EndTxn then lands while the next transaction of the
// epoch is open, and would commit it: a transaction of two records, one of
// which its leader refused, was reported as not committed and was visible
// in part. Now the epoch begins no transaction after the unanswered
// EndTxn: the first transaction returns its commit, the second one fails
// with class OutcomeUnknown (the epoch ended) and writes nothing, and a
// read_committed reader sees nothing of it.
func TestLateEndTxnNeverTearsALaterTransaction(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	leaseTopic := c.CreateTopic(t, "coord-late-endtxn-lease", 1, nil)
	topic := c.CreateTopic(t, "coord-late-endtxn", 2, nil)
	txnID := kafkatest.TopicName("late-endtxn")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	epoch, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}

	release, released := holdRelease(t)
	var endTxns atomic.Int32
	c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		switch n := endTxns.Add(1); {
		case n == 1: // the first commit: held past the read timeout
			c.Fake.SleepControl(func() { <-released })
		case !kreq.(*kmsg.EndTxnRequest).Commit: // an abort: the held commit lands first
			c.Fake.SleepControl(func() { release(); time.Sleep(300 * time.Millisecond) })
		}
		return nil, nil, false
	})
	// The leader of partition 1 refuses the second transaction's batch.
	c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.MessageTooLarge, Count: -1})

	if err := epoch.Transact(ctx, "renewal", []Record{{Partition: Partition{Topic: leaseTopic}, Value: []byte("lease")}}); err != nil {
		t.Fatalf("the first transaction: %v (its resent commit was answered)", err)
	}
	if endTxns.Load() < 2 {
		t.Fatalf("EndTxn sent %d times, want a resend after the read timeout", endTxns.Load())
	}
	err = epoch.Transact(ctx, "write", []Record{
		{Partition: Partition{Topic: topic, Partition: 0}, Value: []byte("a")},
		{Partition: Partition{Topic: topic, Partition: 1}, Value: []byte("b")},
	})
	release()
	var werr *Error
	if !errors.As(err, &werr) || werr.Class != OutcomeUnknown {
		t.Errorf("the write after the unanswered EndTxn: got %v, want an error of class %v", err, OutcomeUnknown)
	}
	if err != nil && strings.Contains(err.Error(), "nothing committed") {
		t.Errorf("the write's error says nothing committed: %v", err)
	}
	if ended := epoch.Ended(); ended == nil || ClassOf(ended) != OutcomeUnknown {
		t.Errorf("the epoch after the unanswered EndTxn: ended %v, want class %v", ended, OutcomeUnknown)
	}
	seen := committedRecords(t, c, topic, 2*time.Second)
	if len(seen[0]) != len(seen[1]) {
		t.Fatalf("a read_committed reader sees part of the write: partition 0 %q, partition 1 %q", seen[0], seen[1])
	}
	if len(seen[0]) > 0 {
		t.Fatalf("a read_committed reader sees the failed write: %v", seen)
	}
}

// TestLostBatchEndsTheEpochWhenItsSequenceStaysUnused: a Produce that got
// no answer, whose resend the leader refused before the append, leaves a
// copy in flight under a sequence number that the epoch's next batch of
// the partition would reuse. The transaction is aborted and reported so,
// and the epoch ends with class OutcomeUnknown. Before, the epoch went on.
func TestLostBatchEndsTheEpochWhenItsSequenceStaysUnused(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-lost-batch", 1, nil)
	txnID := kafkatest.TopicName("lost-batch")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	epoch, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	release, released := holdRelease(t)
	var produces atomic.Int32
	c.Fake.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		switch produces.Add(1) {
		case 1: // held past the read timeout
			c.Fake.SleepControl(func() { <-released })
			return nil, nil, false
		case 2: // the resend: refused before the append
			return kafkatest.RefusedProduce(kreq.(*kmsg.ProduceRequest), kerr.MessageTooLarge.Code), nil, true
		}
		return nil, nil, false
	})
	// The abort lets the held batch land first (kfake answers no EndTxn
	// of the transaction while one of its batches is held).
	c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.SleepControl(func() { release(); time.Sleep(300 * time.Millisecond) })
		return nil, nil, false
	})
	err = epoch.Transact(ctx, "write", []Record{{Partition: Partition{Topic: topic}, Value: []byte("a")}})
	release()
	if err == nil {
		t.Fatal("the write whose batch was refused committed")
	}
	if produces.Load() < 2 {
		t.Fatalf("Produce sent %d times, want a resend after the read timeout", produces.Load())
	}
	if ended := epoch.Ended(); ended == nil || ClassOf(ended) != OutcomeUnknown {
		t.Fatalf("the epoch after the lost batch: ended %v, want class %v (the write: %v)", ended, OutcomeUnknown, err)
	}
}

// TestMintWaitsForItsOwnInitProducerID: an InitProducerId that got no
// answer within the read timeout was sent again; when the first one landed
// after the second, it bumped the epoch over the pair that the second one
// minted, and the member's first transaction failed as fenced, with no
// other producer. Now the mint waits for the answer of its one request:
// kfake holds it for 2.5 s (past the 1 s read timeout), one InitProducerId
// is sent, and the pair it answers writes.
func TestMintWaitsForItsOwnInitProducerID(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-late-mint-answer", 1, nil)
	txnID := kafkatest.TopicName("late-mint-answer")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	release, released := holdRelease(t)
	var mints atomic.Int32
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		if mints.Add(1) == 1 {
			c.Fake.SleepControl(func() {
				select {
				case <-released:
				case <-time.After(2500 * time.Millisecond):
				}
			})
		}
		return nil, nil, false
	})
	// The first transaction's AddPartitionsToTxn lets the held mint land
	// first, if it is still held.
	c.Fake.ControlKey(kmsg.AddPartitionsToTxn.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.SleepControl(func() { release(); time.Sleep(300 * time.Millisecond) })
		return nil, nil, false
	})

	epoch, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	if n := mints.Load(); n != 1 {
		t.Errorf("the mint sent %d InitProducerId, want 1", n)
	}
	if err := epoch.Transact(ctx, "renewal", []Record{{Partition: Partition{Topic: topic}, Value: []byte("lease")}}); err != nil {
		t.Fatalf("the first transaction under the minted pair %v: %v (no other producer minted)", epoch.Producer(), err)
	}
	if epoch.Fenced() {
		t.Fatal("the epoch is fenced, with no other producer")
	}
}

// TestAnswerTimedOut: a request whose answer timed out at a live broker may
// be applied later; answerTimedOut alone says no to a connection that
// broke or was never dialled (a broken connection is brokeWhileReading's:
// TestMayApplyLater).
func TestAnswerTimedOut(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"a read timeout", fmt.Errorf("read: %w", timeout), true},
		{"a write timeout", &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"a dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{"a connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"an EOF", io.EOF, false},
		{"a refused dial", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false},
		{"a broker code", kerr.RequestTimedOut, false},
	} {
		if got := answerTimedOut(c.err); got != c.want {
			t.Errorf("%s (%v): answerTimedOut = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestMintAtACoordinatorThatMovedGoesAgain: a mint whose InitProducerId a
// coordinator holds without an answer goes again once the id's coordinator
// moved to another node (the old one can no longer apply it: kfake answers
// it NOT_COORDINATOR when it lets it go), within a few read timeouts, not
// after the transaction timeout (30 s); the pair it gets writes.
func TestMintAtACoordinatorThatMovedGoesAgain(t *testing.T) {
	c := kafkatest.Fake(t, kfake.NumBrokers(3))
	w := unansweredWire(t, c)
	if got, _ := w.txn.OptValue(kgo.RequestTimeoutOverhead).(time.Duration); got != w.coords.readTimeout || got != time.Second {
		t.Fatalf("the coordinators' read timeout is %v, the client's %v; want 1 s", w.coords.readTimeout, got)
	}
	topic := c.CreateTopic(t, "coord-moved-mint", 1, nil)
	txnID := kafkatest.TopicName("moved-mint")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	old := c.Fake.CoordinatorFor(txnID)
	release, released := holdRelease(t)
	var held atomic.Int32
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		if c.Fake.CurrentNode() == old && held.Add(1) == 1 {
			c.Fake.SleepControl(func() { <-released })
		}
		return nil, nil, false
	})
	moved := make(chan struct{})
	go func() { // ends after the move
		defer close(moved)
		time.Sleep(1500 * time.Millisecond)
		for c.Fake.CoordinatorFor(txnID) == old {
			c.Fake.RehashCoordinators()
		}
	}()
	start := time.Now()
	epoch, err := w.Mint(ctx, txnID, "mint")
	took := time.Since(start)
	<-moved
	release()
	if err != nil {
		t.Fatal(err)
	}
	if took > 10*time.Second {
		t.Errorf("the mint took %v after its coordinator moved (1.5 s); want a few read timeouts (1 s), not the transaction timeout", took)
	}
	time.Sleep(300 * time.Millisecond) // the held request lands at the old node
	if err := epoch.Transact(ctx, "renewal", []Record{{Partition: Partition{Topic: topic}, Value: []byte("lease")}}); err != nil {
		t.Fatalf("a transaction under the pair minted at the new coordinator: %v", err)
	}
}

// TestAbortThatFindsNoOpenTransactionIsOutcomeUnknown: an abort that the
// coordinator refuses with INVALID_TXN_STATE after records were sent in
// the transaction means that something else ended it (a late commit ends a
// transaction so): the write's outcome is unknown, and the error says so
// (class OutcomeUnknown, the epoch ended), never "nothing committed".
func TestAbortThatFindsNoOpenTransactionIsOutcomeUnknown(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-abort-no-txn", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	epoch, err := w.Mint(ctx, kafkatest.TopicName("abort-no-txn"), "mint")
	if err != nil {
		t.Fatal(err)
	}
	c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.MessageTooLarge, Count: -1})
	c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		resp := kreq.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
	err = epoch.Transact(ctx, "write", []Record{
		{Partition: Partition{Topic: topic, Partition: 0}, Value: []byte("a")},
		{Partition: Partition{Topic: topic, Partition: 1}, Value: []byte("b")},
	})
	var werr *Error
	if !errors.As(err, &werr) || werr.Class != OutcomeUnknown || !werr.Ended {
		t.Fatalf("the write whose abort found no open transaction: got %v, want an error of class %v that ended the epoch", err, OutcomeUnknown)
	}
	if strings.Contains(err.Error(), "nothing committed") {
		t.Fatalf("the write's error says nothing committed: %v", err)
	}
}
