// Package kafkatest is the broker plumbing of the integration tests: it
// finds the real Apache Kafka broker that scripts/kafka-start.sh started,
// starts an in-process kfake cluster, and creates and deletes topics with
// random names.
//
// The real broker's address comes from the environment variable
// KRABKA_KAFKA_BROKERS (comma-separated host:port). Without it a test is
// skipped, with a message that says how to start the broker, except under
// CI (the environment variable CI is not empty), where it fails: CI must
// never pass by skipping the broker. [RequireOrSkip] applies the same rule
// to any other feature that a test needs, such as the SASL listener of
// [SASLBrokers].
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// EnvBrokers is the environment variable that holds the address of the real
// broker.
const EnvBrokers = "KRABKA_KAFKA_BROKERS"

// EnvSASLBrokers is the environment variable that holds the address of the
// real broker's SASL_PLAINTEXT listener: SCRAM-SHA-256, with ACLs enforced.
const EnvSASLBrokers = "KRABKA_KAFKA_SASL_BROKERS"

// The user of the SASL listener that holds no ACL, as scripts/kafka-start.sh
// creates it.
const (
	deniedUser     = "bob"
	deniedPassword = "bob-secret"
)

// startHint tells a developer how to get a broker.
const startHint = `start the broker with: eval "$(scripts/kafka-start.sh)" (stop it with scripts/kafka-stop.sh)`

// Cluster is a Kafka cluster that a test talks to.
type Cluster struct {
	// Name is "kfake" or "kafka"; the test suites use it as a subtest name.
	Name string

	// Brokers are the seed addresses.
	Brokers []string

	// Real reports an Apache Kafka broker. A test asserts what only Kafka
	// guarantees (producer id allocation, CONCURRENT_TRANSACTIONS, strict
	// epoch checks, the broker's timing) on a real cluster only.
	Real bool

	// Fake is the in-process cluster, nil for a real one. Its control
	// functions inject faults.
	Fake *kfake.Cluster

	// ReplicationFactor is the replication factor of the topics that
	// CreateTopic creates: 3 on the 3-node cluster of [KafkaCluster], and 1
	// (the zero value) on one broker.
	ReplicationFactor int
}

// Kafka returns the real broker of KRABKA_KAFKA_BROKERS, once it answers.
// It skips the test when the variable is unset, or fails it under CI.
func Kafka(t testing.TB) *Cluster {
	t.Helper()
	value := strings.TrimSpace(os.Getenv(EnvBrokers))
	if value == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("kafkatest: %s is not set, and CI is set: CI runs the real-broker tests and never skips them; %s", EnvBrokers, startHint)
		}
		t.Skipf("kafkatest: %s is not set, so the real-broker tests are skipped; %s", EnvBrokers, startHint)
	}
	var brokers []string
	for b := range strings.SplitSeq(value, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	c := &Cluster{Name: "kafka", Brokers: brokers, Real: true}
	c.waitReady(t)
	return c
}

// Fake starts an in-process kfake cluster of one broker, and closes it when
// the test ends. It needs no setup.
func Fake(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	fake, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: start kfake: %v", err)
	}
	t.Cleanup(fake.Close)
	return &Cluster{Name: "kfake", Brokers: fake.ListenAddrs(), Fake: fake}
}

// Client returns a plain kgo client of the cluster, closed when the test
// ends. The options come after the seed brokers.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(client.Close)
	return client
}

// Admin returns an admin client of the cluster, closed when the test ends.
func (c *Cluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.Client(t))
}

// waitReady waits up to 30 s for the broker to answer a metadata request:
// a broker that was just started may still refuse connections.
func (c *Cluster) waitReady(t testing.TB) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		t.Fatalf("kafkatest: new client for %v: %v", c.Brokers, err)
	}
	defer client.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := client.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: the broker at %v does not answer after 30 s: %v; %s", c.Brokers, err, startHint)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TopicName returns prefix followed by a random suffix, a topic name that
// no other test uses.
func TopicName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// CreateTopic creates a topic with a random name that starts with prefix,
// the partition count and the configs given, and the cluster's
// [Cluster.ReplicationFactor] (1 on one broker, 3 on the 3-node cluster). It
// deletes the topic when the test ends, and returns its name.
func (c *Cluster) CreateTopic(t testing.TB, prefix string, partitions int, configs map[string]string) string {
	t.Helper()
	admin := c.Admin(t)
	name := TopicName(prefix)
	values := make(map[string]*string, len(configs))
	for k, v := range configs {
		values[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.CreateTopic(ctx, int32(partitions), int16(max(c.ReplicationFactor, 1)), values, name); err != nil { //nolint:gosec // a test's few partitions, on 1 or 3 brokers
		t.Fatalf("kafkatest: create topic %s: %v", name, err)
	}
	c.DeleteTopicAtCleanup(t, name)
	c.WaitTopicReady(t, name, partitions)
	return name
}

// WaitTopicReady waits up to 30 s until every partition of a new topic has
// a leader that answers ListOffsets. The leaders take a new topic up a
// moment after CreateTopics returns, and a write in between waits out
// franz-go's metadata min age (5 s). It asks with fresh requests: kadm
// answers from franz-go's metadata cache, which may predate the topic.
func (c *Cluster) WaitTopicReady(t testing.TB, name string, partitions int) {
	t.Helper()
	client := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := topicReady(ctx, client, name, partitions)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("kafkatest: topic %s is not ready after 30 s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func topicReady(ctx context.Context, client *kgo.Client, name string, partitions int) error {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(name)
	meta.Topics = append(meta.Topics, mt)
	resp, err := meta.RequestWith(ctx, client)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != partitions {
		return fmt.Errorf("metadata has %d topics, want %s with %d partitions", len(resp.Topics), name, partitions)
	}
	list := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = name
	for _, p := range resp.Topics[0].Partitions {
		if p.Leader < 0 {
			return fmt.Errorf("partition %d has no leader", p.Partition)
		}
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = p.Partition, -1, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	list.Topics = append(list.Topics, lt)
	listed, err := list.RequestWith(ctx, client)
	if err != nil {
		return err
	}
	answered := 0
	for _, t := range listed.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			answered++
		}
	}
	if answered != partitions {
		return fmt.Errorf("%d of %d partitions answered", answered, partitions)
	}
	return nil
}

// DeniedClient returns the seed brokers and the client options of a user
// that authenticates (SCRAM-SHA-256) and holds no ACL at all, so that every
// request it makes is refused with an authorization error. On kfake it
// starts a second in-process cluster with SASL and ACLs. On Kafka it uses
// KRABKA_KAFKA_SASL_BROKERS ([SASLBrokers]): without it, it skips the test,
// or fails it under CI.
func (c *Cluster) DeniedClient(t testing.TB) ([]string, []kgo.Opt) {
	t.Helper()
	options := []kgo.Opt{kgo.SASL(scram.Auth{User: deniedUser, Pass: deniedPassword}.AsSha256Mechanism())}
	if !c.Real {
		fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
			kfake.Superuser("SCRAM-SHA-256", "admin", "admin-secret"),
			kfake.User("SCRAM-SHA-256", deniedUser, deniedPassword))
		if err != nil {
			t.Fatalf("kafkatest: start kfake with SASL and ACLs: %v", err)
		}
		t.Cleanup(fake.Close)
		return fake.ListenAddrs(), options
	}
	return SASLBrokers(t), options
}

// DeleteTopicAtCleanup deletes a topic when the test ends, and ignores a
// topic that does not exist.
func (c *Cluster) DeleteTopicAtCleanup(t testing.TB, name string) {
	t.Helper()
	admin := c.Admin(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, _ = admin.DeleteTopics(ctx, name)
	})
}

// RefusedProduce is the answer of a broker that refuses every partition of
// a Produce request with the error code, appending nothing (base offset
// -1): for a kfake control function that stands for a refusing leader,
// such as NOT_ENOUGH_REPLICAS.
func RefusedProduce(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.BaseOffset = rp.Partition, code, -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
