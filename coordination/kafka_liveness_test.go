package coordination_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The Kafka-level regression tests of issue 9: every exported call returns
// within its context plus a small bound (item 4), on kfake and on the real
// broker. A member's connections go through klPausableDialer, which can
// stop every byte in both directions, as a broker that stopped answering
// or a cut network does: the member's requests in flight stay in flight.
// The ACL cases of item 7 are in kafka_acl_test.go.

func TestKafkaLivenessFake(t *testing.T) {
	t.Run("BoundedCalls", func(t *testing.T) { klBoundedCalls(t, kafkatest.Fake(t)) })
	t.Run("MissingTopicFailsTheWriteOnly", func(t *testing.T) { klMissingTopic(t, kafkatest.Fake(t)) })
	t.Run("DeadSeedBroker", func(t *testing.T) { klDeadSeed(t, kafkatest.Fake(t)) })
}

func TestKafkaLivenessKafka(t *testing.T) {
	kafkatest.Kafka(t)
	t.Run("BoundedCalls", func(t *testing.T) { klBoundedCalls(t, kafkatest.Kafka(t)) })
	t.Run("MissingTopicFailsTheWriteOnly", func(t *testing.T) { klMissingTopic(t, kafkatest.Kafka(t)) })
	t.Run("DeadSeedBroker", func(t *testing.T) { klDeadSeed(t, kafkatest.Kafka(t)) })
}

// klOverrun is the most that a call may run past its context: the issue's
// bound. The library's own bound is 250 ms (a transaction in flight) plus
// 600 ms for a resignation whose context had already ended.
const klOverrun = time.Second

// klPausableDialer dials the brokers, and pauses every connection it made
// on demand: reads and writes then block until resume (or the connection
// closes), so requests in flight neither fail nor finish.
type klPausableDialer struct {
	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed by resume
}

func (d *klPausableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &klPausableConn{Conn: conn, dialer: d}, nil
}

func (d *klPausableDialer) pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused == nil {
		d.paused = make(chan struct{})
	}
}

func (d *klPausableDialer) resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused != nil {
		close(d.paused)
		d.paused = nil
	}
}

// gate returns the channel that a paused connection waits on, or nil.
func (d *klPausableDialer) gate() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.paused
}

type klPausableConn struct {
	net.Conn
	dialer    *klPausableDialer
	closeOnce sync.Once
	closed    chan struct{}
	initOnce  sync.Once
}

func (c *klPausableConn) done() chan struct{} {
	c.initOnce.Do(func() { c.closed = make(chan struct{}) })
	return c.closed
}

func (c *klPausableConn) wait() error {
	if gate := c.dialer.gate(); gate != nil {
		select {
		case <-gate:
		case <-c.done():
			return net.ErrClosed
		}
	}
	return nil
}

func (c *klPausableConn) Read(p []byte) (int, error) {
	if err := c.wait(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if err := c.wait(); err != nil { // bytes that arrived during a pause wait for the resume
			return 0, err
		}
	}
	return n, err
}

func (c *klPausableConn) Write(p []byte) (int, error) {
	if err := c.wait(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *klPausableConn) Close() error {
	c.closeOnce.Do(func() { close(c.done()) })
	return c.Conn.Close()
}

// klTimed runs call and returns how long it took.
func klTimed(call func()) time.Duration {
	start := time.Now()
	call()
	return time.Since(start)
}

// klBoundedCalls (issue 9, item 4): a holder whose every connection stops
// answering. Leadership.Write and Leadership.Resign with a 1 s context, a
// standby's AcquireLeadership with a 1 s deadline, and KafkaTransport.Close
// all return within a second of their context. The write in flight returns
// ErrOutcomeUnknown, and its transaction goes on in the background: the
// epoch's producer, and the leadership, stay (ErrProducerLost would end
// both). Before the fix the write returned after 20-30 s, Resign after
// 15 s and Close after 16 s.
func klBoundedCalls(t *testing.T, c *kafkatest.Cluster) {
	e := klNewEnv(t, c, klConfig(t, 6*time.Second, 2*time.Second, time.Second))
	role := ktRole(t, "bounded")
	commands := c.CreateTopic(t, "coord-bounded-commands", 1, nil)
	dialer := &klPausableDialer{}
	t.Cleanup(dialer.resume)
	ctx := ktContext(t)

	// Resign of a live leadership whose connections stop answering.
	resigning := e.campaign(t, e.transport(t, kgo.Dialer(dialer.dial)), role, "node-0").await(t, 30*time.Second)
	dialer.pause()
	resign, cancel := context.WithTimeout(ctx, time.Second)
	var err error
	took := klTimed(func() { err = resigning.Resign(resign) })
	cancel()
	t.Logf("Resign with a 1 s context on a silent cluster returned after %v: %v", took, err)
	if took > time.Second+klOverrun {
		t.Fatalf("Resign with a 1 s context returned after %v; want at most %v", took, time.Second+klOverrun)
	}
	select {
	case <-resigning.Done():
	default:
		t.Fatalf("the leadership holds after Resign")
	}
	dialer.resume()

	holderTransport := e.transport(t, kgo.Dialer(dialer.dial))
	holder := e.campaign(t, holderTransport, role, "node-1").await(t, 30*time.Second)
	if err := holder.Write(ctx, coordination.GuardedRecord{Topic: commands, Value: []byte("before the pause")}); err != nil {
		t.Fatalf("a write before the pause: %v", err)
	}

	dialer.pause()
	write, cancel := context.WithTimeout(ctx, time.Second)
	took = klTimed(func() {
		err = holder.Write(write, coordination.GuardedRecord{Topic: commands, Value: []byte("during the pause")})
	})
	cancel()
	t.Logf("Write with a 1 s context on a silent cluster returned after %v: %v", took, err)
	if took > time.Second+klOverrun {
		t.Fatalf("Write with a 1 s context returned after %v; want at most %v", took, time.Second+klOverrun)
	}
	if err == nil {
		t.Fatalf("Write on a silent cluster succeeded")
	}
	if errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("Write on a silent cluster = %v; a silent cluster is no fence", err)
	}
	if !errors.Is(err, coordination.ErrOutcomeUnknown) || errors.Is(err, coordination.ErrProducerLost) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write on a silent cluster = %v; want ErrOutcomeUnknown with the context's error, not ErrProducerLost", err)
	}
	if ended := holder.Err(); ended != nil {
		t.Fatalf("the leadership ended with the write of unknown outcome: %v", ended)
	}

	// A second member whose connections stop answering too.
	standbyTransport := e.transport(t, kgo.Dialer(dialer.dial))
	acquire, cancel := context.WithTimeout(ctx, time.Second)
	var leadership *coordination.Leadership
	took = klTimed(func() {
		leadership, err = coordination.AcquireLeadership(acquire, standbyTransport, role, fxMember(t, "node-2"), e.options...)
	})
	cancel()
	t.Logf("AcquireLeadership with a 1 s deadline on a silent cluster returned after %v: %v", took, err)
	if leadership != nil {
		t.Fatalf("AcquireLeadership took the role on a silent cluster")
	}
	if took > time.Second+klOverrun {
		t.Fatalf("AcquireLeadership with a 1 s deadline returned after %v; want at most %v", took, time.Second+klOverrun)
	}

	took = klTimed(holderTransport.Close)
	t.Logf("KafkaTransport.Close on a silent cluster returned after %v", took)
	if took > klOverrun {
		t.Fatalf("KafkaTransport.Close on a silent cluster took %v; want at most %v", took, klOverrun)
	}
}

// klMissingTopic (issue 9, item 7): a guarded record for a topic that does
// not exist fails that write with an error that names the topic, and
// leaves the leadership alone: the next write and the renewals go on.
func klMissingTopic(t *testing.T, c *kafkatest.Cluster) {
	e := klNewEnv(t, c, klConfig(t, 6*time.Second, 2*time.Second, time.Second))
	role := ktRole(t, "missing-topic")
	commands := c.CreateTopic(t, "coord-missing-commands", 1, nil)
	holder := e.campaign(t, e.member(t, "node-1"), role, "node-1").await(t, 30*time.Second)
	ctx := ktContext(t)
	missing := kafkatest.TopicName("coord-no-such-topic")
	write, cancel := context.WithTimeout(ctx, 15*time.Second)
	err := holder.Write(write, coordination.GuardedRecord{Topic: missing, Value: []byte("lost")})
	cancel()
	t.Logf("a write to a missing topic: %v", err)
	if err == nil {
		t.Fatalf("a write to the missing topic %s succeeded", missing)
	}
	if errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrProducerLost) {
		t.Fatalf("a write to a missing topic = %v; want a failed write, not the end of the leadership", err)
	}
	klAlive(t, "node-1", holder)
	if err := holder.Write(ctx, coordination.GuardedRecord{Topic: commands, Value: []byte("after")}); err != nil {
		t.Fatalf("a write after the failed one: %v", err)
	}
	if err := holder.Renew(ctx); err != nil {
		t.Fatalf("a renewal after the failed write: %v", err)
	}
	klAlive(t, "node-1", holder)
}

// TestKafkaLivenessTimeoutAbortIsNoFence (issue 9, item 7): a commit held
// back longer than the transaction timeout meets the transaction
// coordinator's own abort, which bumps the epoch though no member minted.
// The write must say so and end the epoch's producer with ErrProducerLost,
// not report a fence by another member (ErrFenced). The Produce of the
// write is held back by the dialer, after its AddPartitionsToTxn opened the
// transaction, until the coordinator shows the abort.
// Kafka only: kfake does not abort transactions at their timeout.
func TestKafkaLivenessTimeoutAbortIsNoFence(t *testing.T) {
	c := kafkatest.Kafka(t)
	e := klNewEnv(t, c, klConfig(t, 3*time.Second, time.Second, time.Second))
	role := ktRole(t, "timeout-abort")
	commands := c.CreateTopic(t, "coord-timeout-commands", 1, nil)
	ctx := ktContext(t)
	dialer := &klPausableDialer{}
	t.Cleanup(dialer.resume)
	holder := e.transport(t, kgo.Dialer(dialer.only(kmsg.Produce)))
	token, err := holder.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}

	dialer.pause()
	write, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	result := make(chan error, 1)
	go func() {
		result <- holder.WriteGuarded(write, token, []coordination.GuardedRecord{{Topic: commands, Value: []byte("held back")}})
	}()
	admin := c.Admin(t)
	klEventually(t, 20*time.Second, "the coordinator aborts the transaction at its timeout", func() (bool, string) {
		described, err := admin.DescribeTransactions(ctx, role.String())
		if err != nil {
			return false, err.Error()
		}
		txn := described[role.String()]
		return txn.ProducerID == token.ProducerID() && txn.ProducerEpoch == token.ProducerEpoch()+1 &&
				(txn.State == "CompleteAbort" || txn.State == "PrepareAbort"),
			fmt.Sprintf("%d:%d %s", txn.ProducerID, txn.ProducerEpoch, txn.State)
	})
	dialer.resume()
	select {
	case err = <-result:
	case <-write.Done():
		t.Fatalf("the held-back write did not return within its context")
	}
	t.Logf("the write whose transaction the coordinator aborted at its timeout: %v", err)
	switch {
	case err == nil:
		t.Fatalf("a commit after the coordinator's timeout abort succeeded")
	case errors.Is(err, coordination.ErrFenced):
		t.Fatalf("the coordinator's timeout abort reported as a fence: %v", err)
	case !errors.Is(err, coordination.ErrProducerLost):
		t.Fatalf("the coordinator's timeout abort = %v; want an error that wraps ErrProducerLost", err)
	case !strings.Contains(err.Error(), "aborted the transaction") || !strings.Contains(err.Error(), "timeout"):
		t.Fatalf("the coordinator's timeout abort = %v; want a message that says the coordinator aborted at the timeout", err)
	}
	// A real fence still reads as one: the holder mints again, a rival
	// mints after it, and the holder's write under its new token fails
	// with ErrFenced.
	again, err := holder.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch after the abort: %v", err)
	}
	if _, err := e.transport(t).AcquireEpoch(ctx, role); err != nil {
		t.Fatalf("the rival's AcquireEpoch: %v", err)
	}
	err = holder.WriteGuarded(ctx, again, []coordination.GuardedRecord{{Topic: commands, Value: []byte("after the rival's mint")}})
	if !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("a write under %s after a rival minted = %v; want ErrFenced", again, err)
	}
}

// only returns a dial function like dial's whose connections pause, while
// the dialer is paused, only the requests of one api key: the rest of the
// transaction reaches the broker.
func (d *klPausableDialer) only(key kmsg.Key) func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		var dialer net.Dialer
		conn, err := dialer.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &klOneKeyConn{klPausableConn: klPausableConn{Conn: conn, dialer: d}, key: key}, nil
	}
}

// klOneKeyConn holds back the writes of the requests of one api key while
// its dialer is paused. franz-go writes a request in one Write, which
// starts with the request's length (4 bytes) and api key (2 bytes).
type klOneKeyConn struct {
	klPausableConn
	key kmsg.Key
}

func (c *klOneKeyConn) Read(p []byte) (int, error) { return c.Conn.Read(p) }

func (c *klOneKeyConn) Write(p []byte) (int, error) {
	if len(p) >= 6 && int16(binary.BigEndian.Uint16(p[4:6])) == c.key.Int16() {
		if err := c.wait(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

// klDeadSeed (issue 10, bug 1, the library's part): with a dead broker
// first among the seeds, DescribeEpoch and DescribeLeadership answer from
// the brokers that are up, every time, instead of failing with franz-go's
// "unable to dial" shard error.
func klDeadSeed(t *testing.T, c *kafkatest.Cluster) {
	e := klNewEnv(t, c, klConfig(t, 6*time.Second, 2*time.Second, time.Second))
	role := ktRole(t, "dead-seed")
	holder := e.campaign(t, e.member(t, "node-1"), role, "node-1").await(t, 30*time.Second)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := listener.Addr().String()
	listener.Close()
	transport, err := coordination.NewKafkaTransport(e.lease, append([]string{dead}, c.Brokers...)...)
	if err != nil {
		t.Fatalf("NewKafkaTransport: %v", err)
	}
	t.Cleanup(transport.Close)
	for i := range 10 {
		ctx, cancel := context.WithTimeout(ktContext(t), 15*time.Second)
		token, held, err := transport.DescribeEpoch(ctx, role)
		cancel()
		if err != nil || !held || token != holder.Token() {
			t.Fatalf("DescribeEpoch %d with the dead seed %s first = %s, %t, %v; want %s, true, nil", i, dead, token, held, err, holder.Token())
		}
	}
	ctx, cancel := context.WithTimeout(ktContext(t), 15*time.Second)
	defer cancel()
	status, err := coordination.DescribeLeadership(ctx, transport, role)
	if err != nil || !status.Authoritative(holder.Token()) {
		t.Fatalf("DescribeLeadership with the dead seed %s first = %v, %v; want %s authoritative", dead, status, err, holder.Token())
	}
}
