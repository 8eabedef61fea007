package main

// The network of a member that a test cuts, through the dialer of the
// globals: refused (every connection closes, every later dial fails), or
// dropped (a black hole: the connections stay open, nothing arrives).

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
)

// cutDialer is the network of a member that the test can cut. A cut
// refuses: every connection it opened closes, and every later dial fails.
// A black hole drops: the connections stay open, but nothing arrives any
// more, and every later dial hangs until its context ends, as behind a
// firewall that drops packets.
type cutDialer struct {
	mu        sync.Mutex
	cut       bool
	blackhole chan struct{} // closed when the black hole opens
	conns     []*holeConn
}

var errCut = errors.New("test: the network of this member is cut")

// newCutDialer returns the network of a member, whole until the test
// cuts it. When the test ends, it is cut for good: every connection that
// it opened closes, so that no read of the member waits on a black hole
// after the test (a holeConn does not honour deadlines), and the leak
// check finds the member's goroutines ended.
func newCutDialer(t *testing.T) *cutDialer {
	d := &cutDialer{blackhole: make(chan struct{})}
	t.Cleanup(d.cutNow)
	return d
}

func (d *cutDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	cut := d.cut
	d.mu.Unlock()
	if cut {
		return nil, errCut
	}
	select {
	case <-d.blackhole:
		<-ctx.Done()
		return nil, ctx.Err()
	default:
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	hole := &holeConn{Conn: conn, hole: d.blackhole, closed: make(chan struct{})}
	d.mu.Lock()
	d.conns = append(d.conns, hole)
	d.mu.Unlock()
	return hole, nil
}

func (d *cutDialer) cutNow() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = true
	for _, conn := range d.conns {
		conn.Close()
	}
}

func (d *cutDialer) dropNow() { close(d.blackhole) }

// holeConn is a connection that stops delivering when the black hole
// opens: reads block until it closes, writes vanish.
type holeConn struct {
	net.Conn
	hole      <-chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *holeConn) Read(p []byte) (int, error) {
	type read struct {
		n   int
		err error
	}
	select {
	case <-c.hole:
		<-c.closed
		return 0, net.ErrClosed
	default:
	}
	n, err := c.Conn.Read(p)
	select {
	case <-c.hole: // what arrived after the hole opened is dropped
		<-c.closed
		return 0, net.ErrClosed
	default:
	}
	return n, err
}

func (c *holeConn) Write(p []byte) (int, error) {
	select {
	case <-c.hole:
		return len(p), nil
	default:
	}
	return c.Conn.Write(p)
}

func (c *holeConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
