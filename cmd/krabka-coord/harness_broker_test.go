package main

// The brokers of the tests: an embedded kfake cluster, and loopback
// addresses of a broker that is dead or that never answers.

import (
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	listener.Close()
	return addr
}

// silentAddr is a loopback address that accepts connections and never
// answers, as a seed behind a firewall that drops packets looks after the
// handshake.
func silentAddr(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := listener.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return listener.Addr().String()
}

// kfakeBrokers starts an embedded cluster for the test, and returns the
// --brokers of it.
func kfakeBrokers(t *testing.T) string {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return strings.Join(cluster.ListenAddrs(), ",")
}
