package main

// The brokers of the tests: an embedded kfake cluster, the state topic on
// a cluster, and loopback addresses of a broker that is dead or that never
// answers.

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
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
	addr, _ := silentBroker(t)
	return addr
}

// silentBroker is silentAddr, and a channel that gets a value when it
// accepted a connection: a client is connecting to it.
func silentBroker(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() })
	connected := make(chan struct{}, 1)
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
			select {
			case connected <- struct{}{}:
			default: // one is pending already
			}
		}
	}()
	return listener.Addr().String(), connected
}

// kfakeBrokers starts an embedded cluster for the test, and returns the
// --brokers of it.
func kfakeBrokers(t *testing.T) string {
	t.Helper()
	return strings.Join(kafkatest.Fake(t).Brokers, ",")
}

// createStateTopic creates the state topic of conn (its --brokers, --topic
// and --partitions) with create-topic, with replication factor 1.
func createStateTopic(t *testing.T, conn []string) {
	t.Helper()
	if code, _, stderr := runCLI(t, nil, append([]string{"create-topic", "--replication-factor", "1"}, conn...)...); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
}

// writeRegistration writes a registration of the member for the role to
// the state topic (topic, with partitions), as a member that then crashed
// would leave it.
func writeRegistration(t *testing.T, cluster *kafkatest.Cluster, topic string, partitions int, roleName, memberName string) {
	t.Helper()
	transport, err := coordination.NewKafkaTransport(coordination.DefaultLeaseConfig(), cluster.Brokers...)
	if err != nil {
		t.Fatal(err)
	}
	defer transport.Close()
	role, member := mustRole(t, roleName), mustMember(t, memberName)
	partition, err := coordination.RoleTopicPartition(role, coordination.WithTopic(topic), coordination.WithPartitions(partitions))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := transport.Append(ctx, partition, coordination.EncodeKey(coordination.RegistrationKey(role, member)),
		coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: time.Now().UnixMilli()})); err != nil {
		t.Fatal(err)
	}
}
