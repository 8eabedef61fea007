package coordination_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// errAdversaryReset is what a kfake control function returns to break the client's
// connection at once: the client sees an EOF, not a read timeout.
var errAdversaryReset = errors.New("adversary: the connection is reset")

// TestKafkaRenewalCommitOnABrokenConnectionNeverTearsAWrite: the
// EndTxn(commit) of a renewal is read by the coordinator and its
// connection then breaks, with no answer; Kafka applies such a request
// after the connection closed, and a proxy may deliver it later still.
// The resend commits the lease. Before, a broken connection counted as a
// request that nothing applies later: the epoch went on, and the first
// EndTxn, landing while the next Write's transaction was open (one of its
// two records refused by its leader), committed that Write in part. Now
// the Write returns an error that wraps ErrOutcomeUnknown, the leadership
// ends with it, and a read_committed reader sees nothing of the Write.
func TestKafkaRenewalCommitOnABrokenConnectionNeverTearsAWrite(t *testing.T) {
	c := kafkatest.Fake(t)
	e := kaNewEnv(t, c)
	ctx := ktContext(t)
	data := c.CreateTopic(t, "coord-reset-commit-data", 2, nil)
	holder, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-1"), e.options...)
	if err != nil {
		t.Fatal(err)
	}
	txnID := e.role.String()
	side := c.Client(t)
	var held atomic.Pointer[kmsg.EndTxnRequest]
	var commits atomic.Int32
	c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kreq.(*kmsg.EndTxnRequest)
		switch {
		case req.TransactionalID != txnID:
		case req.Commit && commits.Add(1) == 1: // the next renewal's commit: read, and the connection breaks
			held.Store(req)
			return nil, errAdversaryReset, true
		case !req.Commit: // an abort: the commit read before lands first
			c.Fake.SleepControl(func() {
				if late := held.Swap(nil); late != nil {
					rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, _ = side.Request(rctx, late)
					cancel()
				}
			})
		}
		return nil, nil, false
	})
	c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: data, Partitions: []int32{1}, Err: kerr.MessageTooLarge, Count: -1})

	klEventually(t, 20*time.Second, "a renewal's commit sent again", func() (bool, string) {
		n := commits.Load()
		return n >= 2, fmt.Sprintf("%d commits of the role", n)
	})
	time.Sleep(200 * time.Millisecond) // the resend's answer reaches the renewal
	err = holder.Write(ctx,
		coordination.GuardedRecord{Topic: data, Partition: 0, Value: []byte("a")},
		coordination.GuardedRecord{Topic: data, Partition: 1, Value: []byte("b")})
	t.Logf("Write: %v", err)
	if seen := kuCommitted(t, c, data, 2*time.Second); len(seen[0]) != len(seen[1]) {
		t.Fatalf("a read_committed reader sees part of the Write (partition 0 %q, partition 1 %q); Write returned %v", seen[0], seen[1], err)
	}
	if !errors.Is(err, coordination.ErrOutcomeUnknown) {
		t.Errorf("Write after the commit whose connection broke = %v, want an error that wraps ErrOutcomeUnknown", err)
	}
	if err != nil && strings.Contains(err.Error(), "nothing committed") {
		t.Errorf("Write says nothing committed: %v", err)
	}
	select {
	case <-holder.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the leadership did not end")
	}
	if !errors.Is(holder.Err(), coordination.ErrOutcomeUnknown) {
		t.Errorf("Err = %v; want ErrOutcomeUnknown", holder.Err())
	}
}

// mintCopyInjector breaks the connection of the first InitProducerId of
// one transactional id right after the client wrote it (the frame never
// reaches the broker then), and sends that frame to the broker on a
// connection of its own later: 1.5 s after the break, or just before the
// client writes the id's first AddPartitionsToTxn after the break,
// whichever comes first. That is a copy the broker applies late, within
// the copy's life (the transport's read timeout plus the lease duration).
type mintCopyInjector struct {
	txnID []byte

	mu      sync.Mutex
	held    []byte
	addr    string
	mints   int // the InitProducerId frames of the id that the client wrote, the broken one included
	landed  chan struct{}
	landErr error
}

type mintCopyConn struct {
	net.Conn
	addr string
	inj  *mintCopyInjector
}

func (c *mintCopyConn) Write(b []byte) (int, error) {
	inj := c.inj
	if len(b) >= 8 && bytes.Contains(b, inj.txnID) {
		switch int16(binary.BigEndian.Uint16(b[4:6])) {
		case kmsg.InitProducerID.Int16():
			inj.mu.Lock()
			inj.mints++
			take := inj.held == nil && inj.landed == nil
			if take {
				inj.held, inj.addr, inj.landed = append([]byte(nil), b...), c.addr, make(chan struct{})
			}
			inj.mu.Unlock()
			if take {
				time.AfterFunc(1500*time.Millisecond, inj.land)
				if tc, isTCP := c.Conn.(*net.TCPConn); isTCP {
					_ = tc.SetLinger(0)
				}
				_ = c.Conn.Close() // the client reads no answer: its connection broke
				return len(b), nil
			}
		case kmsg.AddPartitionsToTxn.Int16():
			inj.land()
		}
	}
	return c.Conn.Write(b)
}

// land sends the held frame on a connection of its own and reads its
// answer, once.
func (inj *mintCopyInjector) land() {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	if inj.held == nil {
		return
	}
	held := inj.held
	inj.held = nil
	defer close(inj.landed)
	conn, err := net.DialTimeout("tcp", inj.addr, 5*time.Second)
	if err != nil {
		inj.landErr = err
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(held); err != nil {
		inj.landErr = err
		return
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		inj.landErr = err
		return
	}
	_, inj.landErr = io.CopyN(io.Discard, conn, int64(binary.BigEndian.Uint32(size[:])))
}

// TestKafkaLateMintAfterABrokenConnectionNeverFencesTheMember is kafkawire's
// TestLateMintAfterABrokenConnectionNeverFencesTheMember on the real broker,
// through AcquireLeadership: the challenge's InitProducerId is written and
// its connection breaks; the broker applies it late (1.5 s after, or before
// the first lease's AddPartitionsToTxn). Before, the mint sent it again at
// once, the late copy bumped the epoch over the member's new pair, and its
// first lease was fenced with no other member present (a self-fence: a third
// InitProducerId followed). Now the mint waits until the copy can no longer
// land: the member mints once more, acquires, and its renewal and a Write
// succeed under that pair.
func TestKafkaLateMintAfterABrokenConnectionNeverFencesTheMember(t *testing.T) {
	c := kafkatest.Kafka(t)
	e := kaNewEnv(t, c)
	ctx := ktContext(t)
	data := c.CreateTopic(t, "coord-late-mint-data", 1, nil)
	inj := &mintCopyInjector{txnID: []byte(e.role.String())}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	transport := ktTransport(t, c, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &mintCopyConn{Conn: conn, addr: host, inj: inj}, nil
	}))
	start := time.Now()
	holder, err := coordination.AcquireLeadership(ctx, transport, e.role, fxMember(t, "node-1"), e.options...)
	if err != nil {
		t.Fatalf("AcquireLeadership: %v", err)
	}
	t.Logf("acquired %v in %v", holder.Token(), time.Since(start).Round(time.Millisecond))
	inj.mu.Lock()
	landed := inj.landed
	inj.mu.Unlock()
	if landed == nil {
		t.Fatal("no InitProducerId of the role was taken")
	}
	select {
	case <-landed:
	case <-time.After(10 * time.Second):
		t.Fatal("the copy of the broken InitProducerId was never sent to the broker")
	}
	inj.mu.Lock()
	mints, landErr := inj.mints, inj.landErr
	inj.mu.Unlock()
	t.Logf("the late InitProducerId: %v; %d InitProducerId of the role written", landErr, mints)
	if landErr != nil {
		t.Fatalf("the late InitProducerId got no answer: %v", landErr)
	}
	if err := holder.Renew(ctx); err != nil {
		t.Fatalf("the first renewal: %v", err)
	}
	if err := holder.Write(ctx, coordination.GuardedRecord{Topic: data, Value: []byte("w")}); err != nil {
		t.Fatalf("a Write: %v", err)
	}
	select {
	case <-holder.Done():
		t.Fatalf("the leadership ended: %v", holder.Err())
	default:
	}
	if mints != 2 {
		t.Errorf("the member wrote %d InitProducerId of the role; want 2 (the broken one, and one mint after its copy could no longer land): a self-fence costs a third", mints)
	}
	if err := holder.Resign(ctx); err != nil {
		t.Errorf("Resign: %v", err)
	}
}
