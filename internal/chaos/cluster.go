package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BrokerNode is one broker of the cluster as its metadata names it.
type BrokerNode struct {
	// ID is the node id (broker.id, node.id).
	ID int32 `json:"id"`

	// Addr is the advertised host:port of its client listener.
	Addr string `json:"addr"`
}

// DiscoverBrokers returns the brokers of the cluster behind the seeds,
// sorted by node id, once the metadata names at least want of them (want
// 0: any). It retries until ctx ends: a cluster that was just started may
// not have registered every broker yet.
func DiscoverBrokers(ctx context.Context, seeds []string, want int) ([]BrokerNode, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	for {
		var nodes []BrokerNode
		meta, err := admin.BrokerMetadata(ctx)
		if err == nil {
			for _, b := range meta.Brokers {
				nodes = append(nodes, BrokerNode{ID: b.NodeID, Addr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))})
			}
			slices.SortFunc(nodes, func(a, b BrokerNode) int { return int(a.ID - b.ID) })
			if len(nodes) > 0 && len(nodes) >= want {
				return nodes, nil
			}
			err = fmt.Errorf("the metadata names %d brokers, want %d", len(nodes), want)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("discover the brokers of %v: %w (last error: %w)", seeds, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ClusterControl carries out the faults of the nodes of a multi-broker
// cluster. It runs the cluster command (scripts/kafka-cluster.sh, or one
// with its subcommands: kill N, restart N, pause N, resume N) for the
// process of a node, and reads the cluster's metadata with a client of its
// own for the rest: the transaction coordinator of a role, the leader of a
// partition, the active KRaft controller, and the end of a recovery.
//
// It is safe for concurrent use. [ClusterControl.Close] closes its client.
type ClusterControl struct {
	// Command is the path of the cluster command; it runs with the
	// environment of the harness (KRABKA_CLUSTER_DIR and so on).
	Command string

	// Nodes lists the nodes of the cluster.
	Nodes []BrokerNode

	// Topics are the topics whose replicas must be back in sync before a
	// fault is over; __transaction_state is always one of them.
	Topics []string

	// StateTopic and StatePartition name the partition of the state topic
	// that holds the roles of the run.
	StateTopic     string
	StatePartition int32

	// Log receives the output of the cluster command.
	Log io.Writer

	once   sync.Once
	client *kgo.Client
	err    error
	logMu  sync.Mutex
}

var _ ClusterActions = (*ClusterControl)(nil)

func (c *ClusterControl) admin() (*kadm.Client, error) {
	c.once.Do(func() {
		seeds := make([]string, len(c.Nodes))
		for i, n := range c.Nodes {
			seeds[i] = n.Addr
		}
		c.client, c.err = kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestTimeoutOverhead(5*time.Second))
	})
	if c.err != nil {
		return nil, c.err
	}
	return kadm.NewClient(c.client), nil
}

// Close closes the metadata client.
func (c *ClusterControl) Close() {
	c.once.Do(func() {})
	if c.client != nil {
		c.client.Close()
	}
}

// run runs the cluster command with args, bounded by ctx, in a process
// group of its own (a node it starts outlives the harness).
func (c *ClusterControl) run(ctx context.Context, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.Command, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	err := cmd.Run()
	if c.Log != nil {
		c.logMu.Lock()
		fmt.Fprintf(c.Log, "%s %s %s (%s, err %v)\n%s", time.Now().UTC().Format(time.TimeOnly+".000"), c.Command,
			strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err, out.String())
		c.logMu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", c.Command, strings.Join(args, " "), err, lastLine(out.String()))
	}
	return nil
}

func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return lines[len(lines)-1]
}

func node(id int32) string { return strconv.Itoa(int(id)) }

// KillNode kills the process of a node (SIGKILL): a crash, its data kept.
func (c *ClusterControl) KillNode(ctx context.Context, id int32) error {
	return c.run(ctx, "kill", node(id))
}

// RestartNode stops a node gracefully if it runs (SIGTERM, a controlled
// shutdown), starts it again on its data, and returns once its broker is
// registered again.
func (c *ClusterControl) RestartNode(ctx context.Context, id int32) error {
	return c.run(ctx, "restart", node(id))
}

// PauseNode stops the process of a node (SIGSTOP), and ResumeNode continues
// it (SIGCONT).
func (c *ClusterControl) PauseNode(ctx context.Context, id int32) error {
	return c.run(ctx, "pause", node(id))
}

// ResumeNode continues a paused node (SIGCONT).
func (c *ClusterControl) ResumeNode(ctx context.Context, id int32) error {
	return c.run(ctx, "resume", node(id))
}

// NodeIDs returns the ids of the nodes, in order.
func (c *ClusterControl) NodeIDs() []int32 {
	ids := make([]int32, len(c.Nodes))
	for i, n := range c.Nodes {
		ids[i] = n.ID
	}
	return ids
}

// TxnCoordinator returns the node that is the transaction coordinator of
// the transactional id (the role's name): the leader of its partition of
// __transaction_state, as FindCoordinator answers.
func (c *ClusterControl) TxnCoordinator(ctx context.Context, transactionalID string) (int32, error) {
	admin, err := c.admin()
	if err != nil {
		return -1, err
	}
	resp := admin.FindTxnCoordinators(ctx, transactionalID)
	r, ok := resp[transactionalID]
	switch {
	case !ok:
		return -1, fmt.Errorf("FindCoordinator(%s): no answer", transactionalID)
	case r.Err != nil:
		return -1, fmt.Errorf("FindCoordinator(%s): %w", transactionalID, r.Err)
	}
	return r.NodeID, nil
}

// PartitionLeader returns the leader of a partition.
func (c *ClusterControl) PartitionLeader(ctx context.Context, topic string, partition int32) (int32, error) {
	admin, err := c.admin()
	if err != nil {
		return -1, err
	}
	meta, err := admin.Metadata(ctx, topic)
	if err != nil {
		return -1, err
	}
	p, ok := meta.Topics[topic].Partitions[partition]
	switch {
	case !ok:
		return -1, fmt.Errorf("metadata: no partition %s-%d", topic, partition)
	case p.Err != nil:
		return -1, fmt.Errorf("metadata of %s-%d: %w", topic, partition, p.Err)
	case p.Leader < 0:
		return -1, fmt.Errorf("%s-%d has no leader", topic, partition)
	}
	return p.Leader, nil
}

// StateLeader returns the leader of the state partition of the roles.
func (c *ClusterControl) StateLeader(ctx context.Context) (int32, error) {
	return c.PartitionLeader(ctx, c.StateTopic, c.StatePartition)
}

// ActiveController returns the leader of the KRaft quorum (the active
// controller), as DescribeQuorum of __cluster_metadata answers. A broker
// forwards the request to the quorum.
func (c *ClusterControl) ActiveController(ctx context.Context) (int32, error) {
	if _, err := c.admin(); err != nil {
		return -1, err
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	topic := kmsg.NewDescribeQuorumRequestTopic()
	topic.Topic = "__cluster_metadata"
	partition := kmsg.NewDescribeQuorumRequestTopicPartition()
	topic.Partitions = append(topic.Partitions, partition)
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, c.client)
	if err != nil {
		return -1, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if resp.ErrorCode != 0 {
		return -1, fmt.Errorf("DescribeQuorum: error code %d", resp.ErrorCode)
	}
	if len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return -1, errors.New("DescribeQuorum: no partition in the answer")
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderID < 0 {
		return -1, fmt.Errorf("DescribeQuorum: error code %d, leader %d", p.ErrorCode, p.LeaderID)
	}
	return p.LeaderID, nil
}

// Recovered reports whether every node is a live broker of the metadata
// and every partition of the topics has a leader and its full set of
// in-sync replicas. It returns what is missing otherwise.
func (c *ClusterControl) Recovered(ctx context.Context) (bool, string, error) {
	admin, err := c.admin()
	if err != nil {
		return false, "", err
	}
	topics := append([]string{"__transaction_state"}, c.Topics...)
	meta, err := admin.Metadata(ctx, topics...)
	if err != nil {
		return false, "", err
	}
	if len(meta.Brokers) < len(c.Nodes) {
		return false, fmt.Sprintf("%d of %d brokers live", len(meta.Brokers), len(c.Nodes)), nil
	}
	for _, topic := range topics {
		detail, ok := meta.Topics[topic]
		if !ok || detail.Err != nil {
			return false, fmt.Sprintf("topic %s: %v", topic, detail.Err), nil
		}
		for _, p := range detail.Partitions.Sorted() {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
				return false, fmt.Sprintf("%s-%d: leader %d, isr %v of replicas %v (%v)", topic, p.Partition, p.Leader, p.ISR, p.Replicas, p.Err), nil
			}
		}
	}
	return true, "", nil
}

// AwaitRecovered waits until [ClusterControl.Recovered] holds, polling
// every half second, and returns an error that names what was missing when
// ctx ends first.
func (c *ClusterControl) AwaitRecovered(ctx context.Context) error {
	last := "no answer yet"
	for {
		probe, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, missing, err := c.Recovered(probe)
		cancel()
		switch {
		case ok:
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = missing
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cluster did not recover: %w (%s)", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
