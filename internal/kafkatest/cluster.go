package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnvClusterBrokers is the environment variable that holds the addresses
// of the 3-node cluster of scripts/kafka-cluster.sh, node 1 first:
// comma-separated host:port.
const EnvClusterBrokers = "KRABKA_KAFKA_CLUSTER_BROKERS"

// ClusterNodes is the number of nodes of the cluster of [KafkaCluster]:
// broker ids 1 to ClusterNodes, each a combined broker and controller.
const ClusterNodes = 3

// clusterHint tells a developer how to get the cluster.
const clusterHint = `start the 3-node cluster with: eval "$(scripts/kafka-cluster.sh start)" (stop it with scripts/kafka-cluster.sh stop)`

// KafkaCluster returns the 3-node KRaft cluster of
// KRABKA_KAFKA_CLUSTER_BROKERS (replication factor 3, min.insync.replicas
// 2, Kafka's default failure detection), once every node answers. It skips
// the test when the variable is unset, or fails it under CI (CI is not
// empty): CI must never pass by skipping the cluster. The Cluster it
// returns creates topics with replication factor 3. A test that kills,
// stops or pauses nodes takes them with [Cluster.Nodes].
func KafkaCluster(t testing.TB) *Cluster {
	t.Helper()
	value := strings.TrimSpace(os.Getenv(EnvClusterBrokers))
	if value == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("kafkatest: %s is not set, and CI is set: CI runs the 3-node cluster tests and never skips them; %s", EnvClusterBrokers, clusterHint)
		}
		t.Skipf("kafkatest: %s is not set, so the 3-node cluster tests are skipped; %s", EnvClusterBrokers, clusterHint)
	}
	var brokers []string
	for b := range strings.SplitSeq(value, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) != ClusterNodes {
		t.Fatalf("kafkatest: %s=%s names %d brokers; the cluster has %d nodes", EnvClusterBrokers, value, len(brokers), ClusterNodes)
	}
	c := &Cluster{Name: "cluster", Brokers: brokers, Real: true, ReplicationFactor: ClusterNodes}
	c.waitReady(t)
	return c
}

// Nodes controls the nodes of the 3-node cluster: it finds the node that
// plays a part (the transaction coordinator of a transactional id, the
// leader of a partition, the active controller) and kills, stops, pauses,
// resumes and restarts nodes through scripts/kafka-cluster.sh. Node ids are
// the broker ids, 1 to [ClusterNodes]. Every method fails the test on an
// error. A Nodes is for the goroutine of its test.
type Nodes struct {
	c      *Cluster
	script string
}

// Nodes takes the node control of the cluster for the test: it waits for
// (up to 10 minutes) and takes a file lock of this machine that every test
// holding a Nodes of the same cluster shares, so that the tests that kill
// nodes never disturb each other, whichever package or process they run
// in. The lock is an exclusive flock(2) on
// $TMPDIR/krabka-kafkatest-<brokers>-nodes.lock, the brokers of
// KRABKA_KAFKA_CLUSTER_BROKERS with ':' and ',' made '_'
// (krabka-kafkatest-127.0.0.1_19192_127.0.0.1_19193_127.0.0.1_19194-nodes.lock
// for the default cluster): a fault harness outside Go takes the same lock
// with flock(1) before it touches the nodes. It then heals the cluster ([Nodes.Heal]). When the test ends it heals
// the cluster again (every node started, resumed, registered, every
// partition with its full ISR) and only then releases the lock: a test
// leaves the cluster whole even when it fails half way.
func (c *Cluster) Nodes(t testing.TB) *Nodes {
	t.Helper()
	if c.Name != "cluster" {
		t.Fatalf("kafkatest: Nodes needs the 3-node cluster of KafkaCluster, not %s", c.Name)
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatalf("kafkatest: cannot find the source of kafkatest to locate scripts/kafka-cluster.sh")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "kafka-cluster.sh")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	n := &Nodes{c: c, script: script}
	// The script must control the cluster that the test talks to: the same
	// KRABKA_CLUSTER_DIR and KRABKA_CLUSTER_BASE_PORT as its start.
	line := strings.TrimSpace(n.run(t, "env"))
	if want := EnvClusterBrokers + "=" + strings.Join(c.Brokers, ","); line != want {
		t.Fatalf("kafkatest: %s controls %q, but the test talks to %q: set KRABKA_CLUSTER_DIR (and KRABKA_CLUSTER_BASE_PORT) as for the cluster's start",
			script, line, want)
	}
	name := strings.NewReplacer(":", "_", "/", "_", ",", "_").Replace(strings.Join(c.Brokers, ","))
	path := filepath.Join(os.TempDir(), "krabka-kafkatest-"+name+"-nodes.lock")
	start := time.Now()
	unlock, err := lockFile(path, 10*time.Minute)
	if err != nil {
		t.Fatalf("kafkatest: lock the nodes of the cluster (%s): %v", path, err)
	}
	if waited := time.Since(start); waited > 100*time.Millisecond {
		t.Logf("kafkatest: waited %v for another test of this machine to release the cluster's nodes", waited.Round(time.Millisecond))
	}
	t.Cleanup(unlock)
	t.Cleanup(func() { n.Heal(t) }) // runs before unlock
	n.Heal(t)
	return n
}

// run runs the script with args and returns its stdout; its stderr goes
// to the test log.
func (n *Nodes) run(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(n.script, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Logf("kafka-cluster.sh %s: %s", strings.Join(args, " "), s)
	}
	if err != nil {
		t.Fatalf("kafkatest: kafka-cluster.sh %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func checkNode(t testing.TB, node int32) string {
	t.Helper()
	if node < 1 || node > ClusterNodes {
		t.Fatalf("kafkatest: node %d: the cluster's nodes are 1 to %d", node, ClusterNodes)
	}
	return strconv.Itoa(int(node))
}

// Kill sends SIGKILL to the node: a crash. Its data stays for Restart.
func (n *Nodes) Kill(t testing.TB, node int32) { t.Helper(); n.run(t, "kill", checkNode(t, node)) }

// Stop stops the node gracefully (SIGTERM: a controlled shutdown that moves
// its partition leaderships away first), and waits until it has exited.
func (n *Nodes) Stop(t testing.TB, node int32) { t.Helper(); n.run(t, "stop", checkNode(t, node)) }

// Pause sends SIGSTOP to the node: a hung process whose sockets stay open.
func (n *Nodes) Pause(t testing.TB, node int32) { t.Helper(); n.run(t, "pause", checkNode(t, node)) }

// Resume sends SIGCONT to a paused node.
func (n *Nodes) Resume(t testing.TB, node int32) { t.Helper(); n.run(t, "resume", checkNode(t, node)) }

// Restart stops the node gracefully if it runs, starts it again on its
// data dir, and waits until its broker is registered and unfenced. It does
// not wait for the ISR: [Nodes.WaitISR] does.
func (n *Nodes) Restart(t testing.TB, node int32) {
	t.Helper()
	n.run(t, "restart", checkNode(t, node))
}

// Heal makes the cluster whole: it resumes a paused node, starts a stopped
// one on its data dir, waits until every broker is registered and every
// partition of the cluster has its full ISR ([Nodes.WaitISR]), and then
// gives every partition back to its preferred replica ([Nodes.Balance]), so
// that each node leads its share of the partitions and of the transaction
// coordinators again, as Kafka's own auto.leader.rebalance.enable does
// after leader.imbalance.check.interval.seconds (5 minutes).
func (n *Nodes) Heal(t testing.TB) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(n.run(t, "status")), "\n") {
		fields := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				fields[k] = v
			}
		}
		switch fields["state"] {
		case "paused":
			n.run(t, "resume", fields["node"])
		case "stopped":
			n.run(t, "restart", fields["node"])
		}
	}
	n.WaitISR(t)
	n.Balance(t)
}

// Balance elects the preferred replica (the first of its replicas) leader
// of every partition that another replica leads (ElectLeaders, preferred),
// and waits up to a minute until each has taken over. It needs a whole
// cluster ([Nodes.WaitISR]).
func (n *Nodes) Balance(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var elected time.Time
	for {
		moved, err := n.unpreferred()
		if err == nil && len(moved) == 0 {
			return
		}
		if err == nil && time.Since(elected) > 5*time.Second { // once, and again if it did not take
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err = kadm.NewClient(n.c.Client(t)).ElectLeaders(ctx, kadm.ElectPreferredReplica, moved)
			cancel()
			elected = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: the preferred replicas do not lead after a minute: %v (%v)", moved, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// unpreferred returns the partitions that a replica other than the first
// one leads.
func (n *Nodes) unpreferred() (kadm.TopicsSet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.metadata(ctx, nil)
	if err != nil {
		return nil, err
	}
	moved := kadm.TopicsSet{}
	for _, topic := range resp.Topics {
		if kerr.ErrorForCode(topic.ErrorCode) != nil || topic.Topic == nil {
			continue // deleted since the listing
		}
		for _, p := range topic.Partitions {
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				moved.Add(*topic.Topic, p.Partition)
			}
		}
	}
	return moved, nil
}

// WaitISR waits, up to 2 minutes, until every broker of the cluster is
// registered and every partition of the topics named, or of every topic
// when none is named, has a leader and its full ISR (every replica in
// sync). A restarted node catches up a moment after it registers.
func (n *Nodes) WaitISR(t testing.TB, topics ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := n.isrComplete(topics)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: the cluster is not whole after 2 minutes: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (n *Nodes) isrComplete(topics []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.metadata(ctx, topics)
	if err != nil {
		return err
	}
	if len(resp.Brokers) != ClusterNodes {
		return fmt.Errorf("%d of %d brokers registered", len(resp.Brokers), ClusterNodes)
	}
	for _, topic := range resp.Topics {
		if err := kerr.ErrorForCode(topic.ErrorCode); err != nil {
			if len(topics) == 0 && errors.Is(err, kerr.UnknownTopicOrPartition) {
				continue // deleted by another test since the listing
			}
			return fmt.Errorf("topic %s: %w", *topic.Topic, err)
		}
		for _, p := range topic.Partitions {
			if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
				return fmt.Errorf("%s/%d: leader %d, replicas %v, ISR %v", *topic.Topic, p.Partition, p.Leader, p.Replicas, p.ISR)
			}
		}
	}
	return nil
}

// metadata asks a fresh client for the metadata of the topics (of every
// topic when none is named): kgo's cached metadata may predate a fault.
func (n *Nodes) metadata(ctx context.Context, topics []string) (*kmsg.MetadataResponse, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(n.c.Brokers...))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	req := kmsg.NewPtrMetadataRequest()
	if len(topics) > 0 {
		for _, topic := range topics {
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, mt)
		}
	} else {
		req.Topics = nil // every topic
	}
	return req.RequestWith(ctx, client)
}

// fresh runs one request on a fresh client: a FindCoordinator answer must
// not come from a cache either.
func (n *Nodes) fresh(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(n.c.Brokers...))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	return client.Request(ctx, req)
}

// TransactionCoordinator returns the node that is the transaction
// coordinator of the transactional id now (FindCoordinator, key type
// transaction): the leader of its partition of __transaction_state. It
// retries for up to 30 s while the coordinator is not available, as after
// a node died.
func (n *Nodes) TransactionCoordinator(t testing.TB, transactionalID string) int32 {
	t.Helper()
	return n.TransactionCoordinators(t, transactionalID)[transactionalID]
}

// TransactionCoordinators is [Nodes.TransactionCoordinator] for several
// transactional ids in one request.
func (n *Nodes) TransactionCoordinators(t testing.TB, transactionalIDs ...string) map[string]int32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		found, err := n.findTxnCoordinators(transactionalIDs)
		if err == nil {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: the transaction coordinators of %v: %v", transactionalIDs, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (n *Nodes) findTxnCoordinators(ids []string) (map[string]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1 // transaction
	req.CoordinatorKeys = ids
	resp, err := n.fresh(ctx, req)
	if err != nil {
		return nil, err
	}
	found := make(map[string]int32, len(ids))
	for _, c := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
		if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Key, err)
		}
		found[c.Key] = c.NodeID
	}
	for _, id := range ids {
		if _, ok := found[id]; !ok {
			return nil, fmt.Errorf("%s: no coordinator in the answer", id)
		}
	}
	return found, nil
}

// PartitionLeader returns the node that leads the partition now, from a
// fresh metadata request. It retries for up to 30 s while the partition has
// no leader.
func (n *Nodes) PartitionLeader(t testing.TB, topic string, partition int32) int32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, err := n.partitionLeader(topic, partition)
		if err == nil {
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: the leader of %s/%d: %v", topic, partition, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (n *Nodes) partitionLeader(topic string, partition int32) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.metadata(ctx, []string{topic})
	if err != nil {
		return -1, err
	}
	for _, mt := range resp.Topics {
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return -1, err
		}
		for _, p := range mt.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, err
			}
			if p.Leader < 0 {
				return -1, fmt.Errorf("no leader")
			}
			return p.Leader, nil
		}
	}
	return -1, fmt.Errorf("no partition %d in the metadata", partition)
}

// ActiveController returns the node that is the active controller, the
// leader of the KRaft quorum (DescribeQuorum of __cluster_metadata, which a
// broker forwards to the controllers). It retries for up to 30 s.
func (n *Nodes) ActiveController(t testing.TB) int32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, err := n.activeController()
		if err == nil {
			return leader
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: the active controller: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (n *Nodes) activeController() (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rp.Partition = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := n.fresh(ctx, req)
	if err != nil {
		return -1, err
	}
	quorum := resp.(*kmsg.DescribeQuorumResponse)
	if err := kerr.ErrorForCode(quorum.ErrorCode); err != nil {
		return -1, err
	}
	for _, rt := range quorum.Topics {
		if len(rt.Partitions) == 0 {
			continue
		}
		p := rt.Partitions[0] // the metadata log has one partition
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return -1, err
		}
		if p.LeaderID < 1 {
			return -1, fmt.Errorf("the quorum has no leader (epoch %d)", p.LeaderEpoch)
		}
		return p.LeaderID, nil
	}
	return -1, fmt.Errorf("DescribeQuorum answered no partition")
}

// Others returns the nodes other than those given, in id order.
func Others(nodes ...int32) []int32 {
	var others []int32
	for id := int32(1); id <= ClusterNodes; id++ {
		if !slices.Contains(nodes, id) {
			others = append(others, id)
		}
	}
	return others
}
