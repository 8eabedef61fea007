package kafkawire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// readAheadProxy is a TCP proxy in front of one broker that reads the
// client's requests ahead, as a proxy or load balancer may, and does to
// the first EndTxn of txnID what the request nemesis's reset-hold mode
// does (internal/chaos): it resets the client's connection without an
// answer, but only once it has read the next request of that connection
// (the pipelined one, written behind the EndTxn), and then delivers both
// to the broker, which applies them. Every other request goes on as it is.
type readAheadProxy struct {
	addr   string
	txnID  string
	held   chan struct{} // closed when the EndTxn is held
	pair   atomic.Value  // string: the key of the request read behind it
	taken  atomic.Bool
	wg     sync.WaitGroup
	closed chan struct{}
}

func newReadAheadProxy(t *testing.T, broker, txnID string) *readAheadProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &readAheadProxy{addr: ln.Addr().String(), txnID: txnID, held: make(chan struct{}), closed: make(chan struct{})}
	var conns sync.Map
	t.Cleanup(func() {
		close(p.closed)
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		p.wg.Wait()
	})
	p.wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			upstream, err := net.Dial("tcp", broker)
			if err != nil {
				client.Close()
				continue
			}
			conns.Store(client, true)
			conns.Store(upstream, true)
			p.wg.Go(func() { p.serve(client, upstream) })
		}
	})
	return p
}

// serve carries one connection: answers back as they come; requests
// forward, but for the held EndTxn.
func (p *readAheadProxy) serve(client, upstream net.Conn) {
	defer client.Close()
	defer upstream.Close()
	var clientGone atomic.Bool
	p.wg.Go(func() {
		r := bufio.NewReader(upstream)
		for {
			frame, err := frameOf(r)
			if err != nil {
				client.Close()
				return
			}
			if !clientGone.Load() {
				_, _ = client.Write(frame)
			}
		}
	})
	r := bufio.NewReader(client)
	for {
		frame, err := frameOf(r)
		if err != nil {
			return
		}
		if !p.isTheEndTxn(frame) {
			if _, err := upstream.Write(frame); err != nil {
				return
			}
			continue
		}
		close(p.held)
		// Read ahead: the request the client writes behind the EndTxn.
		_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
		next, err := frameOf(r)
		if err == nil {
			p.pair.Store(kmsg.NameForKey(int16(binary.BigEndian.Uint16(next[4:6]))))
		}
		clientGone.Store(true)
		if tcp, ok := client.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // a reset, not a FIN
		}
		client.Close()
		_, _ = upstream.Write(frame)
		if next != nil {
			_, _ = upstream.Write(next)
		}
		select { // the broker reads and applies both; their answers go nowhere
		case <-time.After(2 * time.Second):
		case <-p.closed:
		}
		return
	}
}

// isTheEndTxn reports the first EndTxn of the proxy's transactional id.
func (p *readAheadProxy) isTheEndTxn(frame []byte) bool {
	if int16(binary.BigEndian.Uint16(frame[4:6])) != kmsg.EndTxn.Int16() || p.taken.Load() {
		return false
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(int16(binary.BigEndian.Uint16(frame[6:8])))
	b := frame[12:]
	n := int(int16(binary.BigEndian.Uint16(b))) // the client id
	b = b[2+max(n, 0):]
	if req.IsFlexible() {
		b = b[1:] // no tagged fields in franz-go's request headers
	}
	if err := req.ReadFrom(b); err != nil || req.TransactionalID != p.txnID {
		return false
	}
	return p.taken.CompareAndSwap(false, true)
}

// frameOf reads one size-prefixed Kafka frame, its size included.
func frameOf(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 1<<24 {
		return nil, fmt.Errorf("a frame of %d bytes", n)
	}
	frame := make([]byte, 4+int(n))
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// TestPipelinedRequestBehindAFailedReadCountsAsWritten: two roles of one
// wire commit at once, so that role B's EndTxn(commit) is written on the
// coordinator's connection behind role A's. A proxy that reads ahead
// resets the connection before A's answer and delivers both requests to
// the broker, which commits both. franz-go fails A's EndTxn with a broken
// read and B's with errChosenBrokerDead, the error it also gives a request
// it never wrote. Before, the transport counted B's as never sent, sent it
// again, and B's epoch went on: a copy applied late by the proxy would
// commit whatever transaction of B was open by then. Now a request the
// transport cannot prove unsent counts as written: B's commit reports an
// unknown outcome and its epoch begins no other transaction.
func TestPipelinedRequestBehindAFailedReadCountsAsWritten(t *testing.T) {
	c := kafkatest.Fake(t, kfake.NumBrokers(2))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Two transactional ids whose coordinator is node 0, and a topic whose
	// partition 0 node 0 leads (A's) and partition 1 node 1 (B's).
	coordinator := make(map[string]int32)
	plain := c.Client(t)
	var ids []string
	for i := 0; len(ids) < 2 && i < 200; i++ {
		id := kafkatest.TopicName(fmt.Sprintf("pipelined-%d", i))
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorType = id, 1
		resp, err := req.RequestWith(ctx, plain)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("FindCoordinator(%s): %v, %v", id, resp, err)
		}
		if coordinator[id] = resp.NodeID; resp.NodeID == 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) < 2 {
		t.Fatalf("no two transactional ids of node 0 among %v", coordinator)
	}
	idA, idB := ids[0], ids[1]
	topic := c.CreateTopic(t, "coord-pipelined", 2, nil)
	for p := int32(0); p < 2; p++ {
		if err := c.Fake.MoveTopicPartition(topic, p, p); err != nil {
			t.Fatal(err)
		}
	}
	node0 := c.Fake.ListenAddrs()[0]
	proxy := newReadAheadProxy(t, node0, idA)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	w, err := New(Config{Brokers: c.Brokers, TxnTimeout: 30 * time.Second, RenewInterval: 5 * time.Second,
		Options: []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host == node0 {
				host = proxy.addr
			}
			return dialer.DialContext(ctx, network, host)
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	epochA, err := w.Mint(ctx, idA, "mint A")
	if err != nil {
		t.Fatal(err)
	}
	epochB, err := w.Mint(ctx, idB, "mint B")
	if err != nil {
		t.Fatal(err)
	}
	// B's batch (node 1) waits until A's EndTxn is held, so that B's
	// EndTxn goes behind it on node 0's connection.
	c.Fake.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID != nil && *req.TransactionID == idB {
			c.Fake.SleepControl(func() {
				select {
				case <-proxy.held:
				case <-ctx.Done():
				}
				time.Sleep(50 * time.Millisecond)
			})
			return nil, nil, false
		}
		c.Fake.KeepControl()
		return nil, nil, false
	})
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() {
		errB = epochB.Transact(ctx, "write B", []Record{{Partition: Partition{Topic: topic, Partition: 1}, Value: []byte("b")}})
	})
	time.Sleep(100 * time.Millisecond) // B's AddPartitionsToTxn is answered, its batch waits
	wg.Go(func() {
		errA = epochA.Transact(ctx, "write A", []Record{{Partition: Partition{Topic: topic, Partition: 0}, Value: []byte("a")}})
	})
	wg.Wait()
	pair, _ := proxy.pair.Load().(string)
	t.Logf("A: %v (ended %v); B: %v (ended %v); read behind A's EndTxn: %q", errA, epochA.Ended(), errB, epochB.Ended(), pair)
	if pair != "EndTxn" {
		t.Fatalf("the request read behind A's EndTxn is %q; want B's EndTxn", pair)
	}
	if !errors.Is(errB, context.Canceled) && ClassOf(errB) != OutcomeUnknown && epochB.Ended() == nil {
		t.Fatalf("B's commit written behind A's failed read: Transact = %v, epoch ended %v; want an unknown outcome, or the epoch ended", errB, epochB.Ended())
	}
	if ended := epochB.Ended(); ended == nil || ClassOf(ended) != OutcomeUnknown {
		t.Fatalf("B's epoch after its commit died with the connection: ended %v; want class %v (no transaction may begin under it)", ended, OutcomeUnknown)
	}
}
