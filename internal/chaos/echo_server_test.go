package chaos

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// The harness of the proxy tests: an echo server behind the proxy, and a
// round trip of one line through a connection.

// echoServer answers every line with the same line, until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				_, _ = io.Copy(conn, conn)
			})
		}
	})
	return ln.Addr().String()
}

// roundTrip writes one line to conn and reads the line that comes back,
// within timeout.
func roundTrip(conn net.Conn, line string, timeout time.Duration) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	return got, err
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := NewProxy("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
