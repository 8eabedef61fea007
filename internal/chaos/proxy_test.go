package chaos

import (
	"bufio"
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestProxyForwards(t *testing.T) {
	p := newProxy(t)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got, err := roundTrip(conn, "hello", 5*time.Second); err != nil || got != "hello\n" {
		t.Fatalf("round trip through the proxy = %q, %v; want \"hello\\n\"", got, err)
	}
}

func TestProxyDropClosesAndRefusesUntilHeal(t *testing.T) {
	p := newProxy(t)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := roundTrip(conn, "a", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut(CutDrop)
	if _, err := roundTrip(conn, "b", 5*time.Second); err == nil {
		t.Fatal("round trip on a dropped connection succeeded")
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err == nil {
		_, err = roundTrip(fresh, "c", 5*time.Second)
		fresh.Close()
	}
	if err == nil {
		t.Fatal("a new connection during a drop carried a round trip")
	}
	p.Heal()
	healed, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer healed.Close()
	if got, err := roundTrip(healed, "d", 5*time.Second); err != nil || got != "d\n" {
		t.Fatalf("round trip after the heal = %q, %v", got, err)
	}
}

func TestProxyStallHoldsBytesAndDeliversThemAtHeal(t *testing.T) {
	p := newProxy(t)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reader := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := reader.ReadString('\n'); err != nil || got != "before\n" {
		t.Fatalf("before the stall: %q, %v", got, err)
	}
	p.Cut(CutStall)
	if _, err := conn.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := reader.ReadString('\n'); !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("read during a stall: %v; want a timeout", err)
	}
	p.Heal()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := reader.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after the heal: %q, %v; want the held line", got, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestProxyResetsWhenTheBrokerIsDown: a connection to a broker that is down
// is reset, never closed cleanly, so that franz-go retries it as it
// retries a refused dial.
func TestProxyResetsWhenTheBrokerIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now
	p, err := NewProxy("127.0.0.1:0", down)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	conn, err := net.Dial("tcp", p.Addr())
	if err == nil {
		defer conn.Close()
		_, err = roundTrip(conn, "hello", 5*time.Second)
	}
	// On loopback the reset may reach the client within its connect.
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("round trip to a broker that is down = %v; want a connection reset (ECONNRESET), not an end of stream", err)
	}
}

// TestProxyDropResets: a drop resets the connections in place and the new
// ones.
func TestProxyDropResets(t *testing.T) {
	p := newProxy(t)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := roundTrip(conn, "a", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut(CutDrop)
	if _, err := roundTrip(conn, "b", 5*time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("round trip on a dropped connection = %v; want a reset", err)
	}
	fresh, err := net.Dial("tcp", p.Addr())
	if err == nil {
		defer fresh.Close()
		_, err = roundTrip(fresh, "c", 5*time.Second)
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("round trip on a new connection during a drop = %v; want a reset", err)
	}
}
