package bench

// Where the benchmarks' Kafka work lands on a cluster: the node that
// coordinates their transactional ids, and the node that leads the
// partitions they create.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Placement pins the benchmarks' work on a cluster. On a cluster of three,
// a transaction's cost depends on where it lands: the coordinator of the
// transactional id (a leader of a __transaction_state partition, chosen by
// the hash of the id) writes the commit markers to the leader of each
// partition of the transaction, over the network unless it leads that
// partition itself, and each node replicates to the others. Two random
// names put the library and its floor on different nodes, and the ratio
// between them then measures the placement, not the library: in the run of
// 2026-12-05 morning the library's guarded write needed 3.45
// AddPartitionsToTxn per write (CONCURRENT_TRANSACTIONS while the previous
// markers were written) and the floor's 1.80. With a placement, every role
// and transactional id of the benchmarks is coordinated by Coordinator and
// every topic they create is led by Leader, for the library and the floor
// alike.
type Placement struct {
	// Coordinator is the node id of the transaction coordinator of every
	// transactional id.
	Coordinator int32
	// Leader is the node id of the preferred leader of every partition
	// that the benchmarks create (the first replica of its assignment).
	Leader int32
}

// String is "coordinator N, partition leader M".
func (p Placement) String() string {
	return fmt.Sprintf("coordinator node %d, partition leader node %d", p.Coordinator, p.Leader)
}

// Place pins the work of k on the cluster's nodes as p says; the nodes
// must be brokers of the cluster, and the replication factor at least 2.
// It returns an error that names a node that the cluster does not have.
func (k *Kafka) Place(ctx context.Context, p Placement) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		return err
	}
	defer client.Close()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("placement: metadata: %w", err)
	}
	nodes := make(map[int32]bool)
	for _, b := range resp.Brokers {
		nodes[b.NodeID] = true
	}
	for _, node := range []int32{p.Coordinator, p.Leader} {
		if !nodes[node] {
			return fmt.Errorf("placement %s: the cluster has no node %d", p, node)
		}
	}
	if k.replication() < 2 {
		return errors.New("placement: a single broker has nothing to place")
	}
	k.nodes = nil
	for node := range nodes {
		k.nodes = append(k.nodes, node)
	}
	k.placement = &p
	return nil
}

// assignment is the replica assignment of a topic that k creates: nil
// without a placement (the broker chooses), and otherwise the placement's
// leader first, then the other nodes, for each partition.
func (k *Kafka) assignment(partitions int) []kmsg.CreateTopicsRequestTopicReplicaAssignment {
	if k.placement == nil {
		return nil
	}
	replicas := []int32{k.placement.Leader}
	for _, node := range k.nodes {
		if node != k.placement.Leader && len(replicas) < k.replication() {
			replicas = append(replicas, node)
		}
	}
	var out []kmsg.CreateTopicsRequestTopicReplicaAssignment
	for p := range partitions {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition = int32(p)
		a.Replicas = replicas
		out = append(out, a)
	}
	return out
}

// createTopic creates topic with the configs, and with the placement's
// leader when k has one.
func (k *Kafka) createTopic(ctx context.Context, client *kgo.Client, topic string, partitions int, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	if assignment := k.assignment(partitions); assignment != nil {
		t.NumPartitions, t.ReplicationFactor, t.ReplicaAssignment = -1, -1, assignment
	} else {
		t.NumPartitions, t.ReplicationFactor = int32(partitions), int16(k.replication()) //nolint:gosec // the bench's few partitions, on 1 or 3 brokers
	}
	for name, value := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = name, kmsg.StringPtr(value)
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return nil
}

// transactionalID returns prefix-<random suffix>, and with a placement one
// whose transaction coordinator is the placement's node: it asks
// FindCoordinator for candidates, 32 at a time, until one lands there.
func (k *Kafka) transactionalID(ctx context.Context, prefix string) (string, error) {
	if k.placement == nil {
		return prefix + "-" + Suffix(), nil
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		return "", err
	}
	defer client.Close()
	for ctx.Err() == nil {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1 // transaction
		for range 32 {
			req.CoordinatorKeys = append(req.CoordinatorKeys, prefix+"-"+Suffix())
		}
		resp, err := req.RequestWith(ctx, client)
		if err != nil {
			return "", fmt.Errorf("placement: FindCoordinator: %w", err)
		}
		for _, c := range resp.Coordinators {
			if c.ErrorCode == 0 && c.NodeID == k.placement.Coordinator {
				return c.Key, nil
			}
		}
		time.Sleep(100 * time.Millisecond) // __transaction_state may still be loading
	}
	return "", ctx.Err()
}

// role is a role named by transactionalID.
func (k *Kafka) role(ctx context.Context, prefix string) (coordination.Role, error) {
	name, err := k.transactionalID(ctx, prefix)
	if err != nil {
		return coordination.Role{}, err
	}
	return coordination.NewRole(name)
}
