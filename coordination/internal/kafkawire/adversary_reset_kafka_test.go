package kafkawire

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// resetInjector breaks the client's connection right after it wrote its
// first EndTxn (the frame never reaches the broker then), and sends that
// frame to the broker on a connection of its own just before the client
// writes a Produce to late.leader: the EndTxn the broker read whole and
// applied after its connection closed, late (a proxy in front of Kafka
// that still delivered it). The Produce to first.leader goes before.
type resetInjector struct {
	mu          sync.Mutex
	armed       bool
	held        []byte
	heldAddr    string
	firstAddr   string // the leader of the write's first partition
	lateAddr    string // the leader of the write's second partition
	firstSent   chan struct{}
	released    bool
	releaseErr  error
	releaseDone chan struct{}
}

type resetConn struct {
	net.Conn
	addr string
	inj  *resetInjector
}

// frameKey returns the API key of the request frame at the start of b.
func frameKey(b []byte) (int16, bool) {
	if len(b) < 8 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(b[4:6])), true
}

func (c *resetConn) Write(b []byte) (int, error) {
	key, ok := frameKey(b)
	inj := c.inj
	if ok && key == kmsg.EndTxn.Int16() {
		inj.mu.Lock()
		take := inj.armed && inj.held == nil
		if take {
			inj.held, inj.heldAddr = append([]byte(nil), b...), c.addr
		}
		inj.mu.Unlock()
		if take {
			if tc, isTCP := c.Conn.(*net.TCPConn); isTCP {
				_ = tc.SetLinger(0)
			}
			_ = c.Conn.Close() // the client reads no answer: its connection broke
			return len(b), nil
		}
	}
	if ok && key == kmsg.Produce.Int16() {
		inj.mu.Lock()
		held, first, late := inj.held != nil, c.addr == inj.firstAddr, c.addr == inj.lateAddr && !inj.released
		if held && late {
			inj.released = true
		}
		inj.mu.Unlock()
		switch {
		case held && first:
			n, err := c.Conn.Write(b)
			select {
			case <-inj.firstSent:
			default:
				close(inj.firstSent)
			}
			return n, err
		case held && late:
			select {
			case <-inj.firstSent:
			case <-time.After(5 * time.Second):
			}
			time.Sleep(500 * time.Millisecond) // the first partition's batch is appended
			inj.releaseErr = inj.release()
			close(inj.releaseDone)
		}
	}
	return c.Conn.Write(b)
}

// release sends the held EndTxn frame on a connection of its own and
// reads its answer.
func (inj *resetInjector) release() error {
	conn, err := net.DialTimeout("tcp", inj.heldAddr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(inj.held); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	_, err = io.CopyN(io.Discard, conn, int64(binary.BigEndian.Uint32(size[:])))
	return err
}

// TestKafkaLateEndTxnAfterABrokenConnection is
// TestLateEndTxnAfterABrokenConnectionNeverTearsALaterTransaction on the
// real 3-node cluster (Kafka 4.4, EndTxn v4): the EndTxn(commit) of a
// transaction and its connection break; the copy that the broker applies
// late, after the resend committed, lands between the two Produce requests
// of the next write (two partitions, led by two nodes). A read_committed
// reader must never see one record of the write without the other.
func TestKafkaLateEndTxnAfterABrokenConnection(t *testing.T) {
	c := kafkatest.KafkaCluster(t)
	admin := c.Admin(t)
	leaseTopic := c.CreateTopic(t, "coord-reset-kafka-lease", 1, nil)
	topic := c.CreateTopic(t, "coord-reset-kafka", 3, nil)
	txnID := kafkatest.TopicName("reset-kafka")
	c.LockTransactionalIDs(t, txnID)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	meta, err := admin.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make(map[int32]string)
	for _, b := range meta.Brokers {
		addrs[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
	}
	leaders := make(map[int32]int32)
	for _, p := range meta.Topics[topic].Partitions {
		leaders[p.Partition] = p.Leader
	}
	var p0, p1 int32 = 0, -1
	for p := int32(1); p < 3; p++ {
		if leaders[p] != leaders[p0] {
			p1 = p
			break
		}
	}
	if p1 < 0 {
		t.Fatalf("every partition of %s has leader %d; want two leaders", topic, leaders[p0])
	}
	inj := &resetInjector{firstAddr: addrs[leaders[p0]], lateAddr: addrs[leaders[p1]],
		firstSent: make(chan struct{}), releaseDone: make(chan struct{})}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	w, err := New(Config{Brokers: c.Brokers, TxnTimeout: 30 * time.Second, RenewInterval: 500 * time.Millisecond,
		Options: []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, host)
			if err != nil {
				return nil, err
			}
			return &resetConn{Conn: conn, addr: host, inj: inj}, nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	epoch, err := w.Mint(ctx, txnID, "mint")
	if err != nil {
		t.Fatal(err)
	}
	inj.mu.Lock()
	inj.armed = true
	inj.mu.Unlock()
	if err := epoch.Transact(ctx, "renewal", []Record{{Partition: Partition{Topic: leaseTopic}, Value: []byte("lease")}}); err != nil {
		t.Logf("the first transaction: %v", err)
	}
	inj.mu.Lock()
	held := inj.held != nil
	inj.mu.Unlock()
	if !held {
		t.Fatal("no EndTxn was taken")
	}
	err = epoch.Transact(ctx, "write", []Record{
		{Partition: Partition{Topic: topic, Partition: p0}, Value: []byte("a")},
		{Partition: Partition{Topic: topic, Partition: p1}, Value: []byte("b")},
	})
	inj.mu.Lock()
	released := inj.released
	inj.mu.Unlock()
	if released {
		<-inj.releaseDone
	}
	t.Logf("the write: %v; the late EndTxn released %v (err %v)", err, released, inj.releaseErr)
	if err != nil && strings.Contains(err.Error(), "nothing committed") {
		t.Errorf("the write's error says nothing committed: %v", err)
	}
	client := c.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p0: kgo.NewOffset().AtStart(), p1: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	seen := make(map[int32][]string)
	for rctx.Err() == nil {
		client.PollFetches(rctx).EachRecord(func(r *kgo.Record) { seen[r.Partition] = append(seen[r.Partition], string(r.Value)) })
	}
	if len(seen[p0]) != len(seen[p1]) {
		t.Fatalf("a read_committed reader sees part of the write (a torn write; the write returned %v): partition %d %q, partition %d %q", err, p0, seen[p0], p1, seen[p1])
	}
}
