package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
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

// errReset is what a kfake control function returns to close the client's
// connection at once: the client sees a broken connection (EOF), not a
// read timeout.
var errReset = errors.New("adversary: the connection is reset")

// TestLateEndTxnAfterABrokenConnectionNeverTearsALaterTransaction: the
// EndTxn(commit) of a transaction reaches the coordinator and its
// connection then breaks (EOF) before any answer. Kafka's SocketServer
// queues a request that it read whole on the RequestChannel, and a
// handler applies it whether or not its connection is still open (the
// answer alone is dropped); a TCP proxy between client and broker (the
// connection reset on the client's side, the proxy's own connection to the
// broker still delivering) delays it further. The client resends the
// EndTxn on a new connection, the resend commits, the epoch goes on, and
// the late commit then lands in the middle of the next transaction: the
// first of its two batches (partition 0, led by node 0) is committed,
// the second (partition 1, led by node 1) is refused as no longer in the
// transaction. A read_committed reader must never see one record of the
// write without the other.
func TestLateEndTxnAfterABrokenConnectionNeverTearsALaterTransaction(t *testing.T) {
	c := kafkatest.Fake(t, kfake.NumBrokers(2))
	w := unansweredWire(t, c)
	leaseTopic := c.CreateTopic(t, "coord-reset-endtxn-lease", 1, nil)
	topic := c.CreateTopic(t, "coord-reset-endtxn", 2, nil)
	for p := int32(0); p < 2; p++ {
		if err := c.Fake.MoveTopicPartition(topic, p, p); err != nil {
			t.Fatal(err)
		}
	}
	txnID := kafkatest.TopicName("reset-endtxn")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	epoch, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	side := c.Client(t)

	var held atomic.Pointer[kmsg.EndTxnRequest]
	var heldNode atomic.Int32
	c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.EndTxnRequest)
		if req.Commit && held.CompareAndSwap(nil, req) {
			heldNode.Store(c.Fake.CurrentNode())
			return nil, errReset, true // read, not applied yet; the connection breaks
		}
		c.Fake.KeepControl()
		return nil, nil, false
	})
	var p0Seen atomic.Bool
	var lateErr atomic.Pointer[error]
	var lateApplied atomic.Bool
	c.Fake.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		for _, tp := range kreq.(*kmsg.ProduceRequest).Topics {
			if tp.Topic != topic {
				continue
			}
			for _, p := range tp.Partitions {
				switch p.Partition {
				case 0:
					p0Seen.Store(true)
				case 1:
					c.Fake.SleepControl(func() {
						for !p0Seen.Load() && ctx.Err() == nil {
							time.Sleep(5 * time.Millisecond)
						}
						time.Sleep(100 * time.Millisecond) // partition 0's batch is appended
						if req := held.Load(); req != nil && lateApplied.CompareAndSwap(false, true) {
							rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
							_, err := side.Broker(int(heldNode.Load())).Request(rctx, req)
							rcancel()
							lateErr.Store(&err)
						}
					})
				}
			}
		}
		return nil, nil, false
	})

	if err := epoch.Transact(ctx, "renewal", []Record{{Partition: Partition{Topic: leaseTopic}, Value: []byte("lease")}}); err != nil {
		t.Logf("the first transaction: %v", err)
	}
	if held.Load() == nil {
		t.Fatal("no EndTxn(commit) was taken")
	}
	err = epoch.Transact(ctx, "write", []Record{
		{Partition: Partition{Topic: topic, Partition: 0}, Value: []byte("a")},
		{Partition: Partition{Topic: topic, Partition: 1}, Value: []byte("b")},
	})
	t.Logf("the write: %v; the late commit applied %v (err %v)", err, lateApplied.Load(), deref(lateErr.Load()))
	if err != nil && strings.Contains(err.Error(), "nothing committed") {
		t.Errorf("the write's error says nothing committed: %v", err)
	}
	seen := committedRecords(t, c, topic, 2*time.Second)
	if len(seen[0]) != len(seen[1]) {
		t.Fatalf("a read_committed reader sees part of the write (a torn write; the write returned %v): partition 0 %q, partition 1 %q", err, seen[0], seen[1])
	}
	if err != nil && ClassOf(err) != OutcomeUnknown && len(seen[0]) > 0 {
		t.Fatalf("the write failed with %v, yet it is visible: %v", err, seen)
	}
}

func deref(p *error) error {
	if p == nil {
		return nil
	}
	return *p
}

// TestMayApplyLater: a request whose answer timed out, or whose connection
// broke while the client read the answer (an EOF, a reset on the read), or
// that died with its connection queued behind another's answer
// (errChosenBrokerDead), may be applied by the broker later; one that was
// never written whole (a failed dial, a failed write) may not.
func TestMayApplyLater(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"a read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"a write timeout", &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"a reset on the read", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"an EOF", io.EOF, true},
		{"an EOF mid-answer", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"the first read's EOF", &kgo.ErrFirstReadEOF{}, true},
		{"a request queued behind a failed read (errChosenBrokerDead)", fmt.Errorf("EndTxn: %w", errors.New(chosenBrokerDead)), true},
		{"errChosenBrokerDead, joined", errors.Join(errors.New("x"), errors.New(chosenBrokerDead)), true},
		{"a reset on the write", &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"a dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{"a refused dial", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false},
		{"a broker code", kerr.RequestTimedOut, false},
		{"no error", nil, false},
	} {
		if got := mayApplyLater(c.err); got != c.want {
			t.Errorf("%s (%v): mayApplyLater = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestLostBatchAfterABrokenConnectionEndsTheEpoch: a Produce whose
// connection broke after it was written (EOF) may still be appended later;
// its resend is refused before the append, so its sequence number stays
// unused, and the late copy would take the place of the epoch's next batch
// of the partition. The transaction is aborted, and the epoch ends with
// class OutcomeUnknown, as after a Produce whose answer timed out.
func TestLostBatchAfterABrokenConnectionEndsTheEpoch(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-reset-batch", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	epoch, err := w.Mint(ctx, kafkatest.TopicName("reset-batch"), "mint")
	if err != nil {
		t.Fatal(err)
	}
	side := c.Client(t)
	var held atomic.Pointer[kmsg.ProduceRequest]
	var produces atomic.Int32
	c.Fake.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		switch produces.Add(1) {
		case 1: // read whole, and the connection breaks
			held.Store(kreq.(*kmsg.ProduceRequest))
			return nil, errReset, true
		case 2: // the resend: refused before the append
			return kafkatest.RefusedProduce(kreq.(*kmsg.ProduceRequest), kerr.MessageTooLarge.Code), nil, true
		}
		return nil, nil, false
	})
	// The abort lets the late copy land first.
	c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.SleepControl(func() {
			if req := held.Load(); req != nil {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				_, _ = side.Request(rctx, req)
				rcancel()
			}
		})
		return nil, nil, false
	})
	err = epoch.Transact(ctx, "write", []Record{{Partition: Partition{Topic: topic}, Value: []byte("a")}})
	if err == nil {
		t.Fatal("the write whose batch was refused committed")
	}
	if produces.Load() < 2 {
		t.Fatalf("Produce sent %d times, want a resend after the broken connection", produces.Load())
	}
	if ended := epoch.Ended(); ended == nil || ClassOf(ended) != OutcomeUnknown {
		t.Fatalf("the epoch after the batch whose connection broke: ended %v, want class %v (the write: %v)", ended, OutcomeUnknown, err)
	}
}
