package kafkatest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// javaStringHash is Java's String.hashCode over the UTF-16 code units of s.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 { // a surrogate pair
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + r
	}
	return h
}

// kafkaAbs is Kafka's Utils.abs: the absolute value, and 0 for MinInt32.
func kafkaAbs(n int32) int32 {
	switch {
	case n == math.MinInt32:
		return 0
	case n < 0:
		return -n
	}
	return n
}

// TestKafkaClusterNodes checks the node control on the 3-node cluster: the
// transaction coordinator of a transactional id is the leader of its
// partition of __transaction_state (Kafka's partitionFor:
// Utils.abs(hashCode) % 50, the default transaction.state.log.num.partitions),
// the active controller is one of the three nodes, and a paused node
// reports paused and answers again after Resume.
func TestKafkaClusterNodes(t *testing.T) {
	c := KafkaCluster(t)
	nodes := c.Nodes(t)
	ids := []string{TopicName("kafkatest-a"), TopicName("kafkatest-b"), TopicName("kafkatest-c"), TopicName("kafkatest-d")}
	coordinators := nodes.TransactionCoordinators(t, ids...)
	for _, id := range ids {
		partition := kafkaAbs(javaStringHash(id)) % 50
		leader := nodes.PartitionLeader(t, "__transaction_state", partition)
		if coordinators[id] != leader {
			t.Errorf("the transaction coordinator of %s is node %d, but node %d leads __transaction_state/%d", id, coordinators[id], leader, partition)
		}
		if one := nodes.TransactionCoordinator(t, id); one != coordinators[id] {
			t.Errorf("TransactionCoordinator(%s) = %d, TransactionCoordinators says %d", id, one, coordinators[id])
		}
	}
	controller := nodes.ActiveController(t)
	if controller < 1 || controller > ClusterNodes {
		t.Fatalf("ActiveController = %d; want a node of 1 to %d", controller, ClusterNodes)
	}
	if others := Others(controller); len(others) != ClusterNodes-1 {
		t.Fatalf("Others(%d) = %v", controller, others)
	}

	paused := Others(controller)[0]
	nodes.Pause(t, paused)
	if status := nodes.run(t, "status"); !strings.Contains(status, fmt.Sprintf("node=%d state=paused", paused)) {
		nodes.Resume(t, paused)
		t.Fatalf("node %d is not paused after Pause:\n%s", paused, status)
	}
	nodes.Resume(t, paused)
	client, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers[paused-1]))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Ping(ctx); err != nil {
		t.Fatalf("node %d does not answer after Resume: %v", paused, err)
	}
}
