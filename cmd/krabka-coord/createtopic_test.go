package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// create-topic on the real broker (issue 10, bug 5): a new topic inherits
// the cluster's min.insync.replicas (no topic override is written); a
// second run that asks for more than what is there names each difference
// and exits 4; a replication factor above the broker count gets the real
// cause, with exit 2.
func TestCreateTopicInheritsAndCompares(t *testing.T) {
	cluster := kafkatest.Kafka(t)
	brokers := strings.Join(cluster.Brokers, ",")
	topic := kafkatest.TopicName("krabka-coord-create")
	cluster.DeleteTopicAtCleanup(t, topic)
	conn := []string{"--brokers", brokers, "--topic", topic, "--partitions", "2"}

	code, stdout, stderr := runCLI(t, nil, append([]string{"create-topic", "--output", "json"}, conn...)...)
	if code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	var created createTopicJSON
	if err := json.Unmarshal([]byte(stdout), &created); err != nil || !created.Created || created.MinInsyncReplicas == nil {
		t.Fatalf("create-topic = %s (%v)", stdout, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	configs, err := cluster.Admin(t).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	config, err := configs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range config.Configs {
		if entry.Key == "min.insync.replicas" && entry.Source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Fatalf("create-topic wrote min.insync.replicas=%s on the topic; want the cluster's setting inherited", *entry.Value)
		}
	}

	code, stdout, stderr = runCLI(t, nil, append([]string{"create-topic", "--replication-factor", "3", "--min-insync-replicas", "2"}, conn...)...)
	if code != exitCluster || stdout != "" {
		t.Fatalf("create-topic asking for 3 and 2 over 1 and %d: exit %d, stdout %q; want 4", *created.MinInsyncReplicas, code, stdout)
	}
	assertOneLine(t, stderr, "exists, and differs from what was asked: it has replication factor 1, but --replication-factor is 3")
	if *created.MinInsyncReplicas != 2 {
		assertOneLine(t, stderr, "but --min-insync-replicas is 2")
	}

	fresh := kafkatest.TopicName("krabka-coord-create-rf")
	cluster.DeleteTopicAtCleanup(t, fresh)
	code, _, stderr = runCLI(t, nil, "create-topic", "--brokers", brokers, "--topic", fresh, "--replication-factor", "3")
	if code != exitUsage {
		t.Fatalf("create-topic --replication-factor 3 on one broker: exit %d: %s", code, stderr)
	}
	assertOneLine(t, stderr, "--replication-factor 3 is above the 1 live broker of the cluster: pass at most 1")
	code, _, stderr = runCLI(t, nil, "create-topic", "--brokers", brokers, "--topic", fresh, "--min-insync-replicas", "2")
	if code != exitUsage {
		t.Fatalf("create-topic --min-insync-replicas 2 over a default replication factor of 1: exit %d: %s", code, stderr)
	}
	assertOneLine(t, stderr, "--min-insync-replicas 2 is above the cluster's default.replication.factor 1")
}

// An existing topic is checked, and its partition count compared, on
// kfake too.
func TestCreateTopicChecksAnExistingTopic(t *testing.T) {
	cluster := kafkatest.Fake(t)
	brokers := strings.Join(cluster.Brokers, ",")
	if code, _, stderr := runCLI(t, nil, "create-topic", "--brokers", brokers, "--replication-factor", "1", "--partitions", "4"); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, nil, "create-topic", "--brokers", brokers, "--partitions", "4")
	if code != exitOK || !strings.Contains(stdout, "exists and checks out: 4 partitions") {
		t.Fatalf("create-topic again: exit %d: %s%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, nil, "create-topic", "--brokers", brokers, "--partitions", "6")
	if code != exitCluster {
		t.Fatalf("create-topic with another count: exit %d: %s", code, stderr)
	}
	assertOneLine(t, stderr, "it has 4 partitions, but --partitions is 6: pass --partitions 4")
}

// create-topic --cleanup-policy delete makes the application's command
// topic (the README's first snippet writes to one): created with
// cleanup.policy=delete, then checked; a compacted topic is not taken for
// one, nor a command topic for the state topic.
func TestCreateCommandTopic(t *testing.T) {
	brokers := kfakeBrokers(t)
	args := []string{"create-topic", "--brokers", brokers, "--replication-factor", "1", "--topic", "commands", "--partitions", "1"}
	code, stdout, stderr := runCLI(t, nil, append(args, "--cleanup-policy", "delete", "--output", "json")...)
	var created createTopicJSON
	if code != exitOK || json.Unmarshal([]byte(stdout), &created) != nil {
		t.Fatalf("create-topic --cleanup-policy delete: exit %d: %s%s", code, stdout, stderr)
	}
	if !created.Created || created.Topic != "commands" || created.Partitions != 1 || created.CleanupPolicy != "delete" {
		t.Fatalf("create-topic --cleanup-policy delete = %+v", created)
	}
	code, stdout, stderr = runCLI(t, nil, append(args, "--cleanup-policy", "delete")...)
	if code != exitOK || !strings.HasPrefix(stdout, "topic commands exists and checks out: 1 partition") {
		t.Fatalf("create-topic --cleanup-policy delete of the existing topic: exit %d: %s%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, nil, args...)
	if code != exitCluster || !strings.Contains(stderr, "it has cleanup.policy=delete, but it must be compacted") {
		t.Fatalf("create-topic (the state topic) over the command topic: exit %d: %s", code, stderr)
	}
	state := []string{"create-topic", "--brokers", brokers, "--replication-factor", "1", "--topic", "state", "--partitions", "1"}
	if code, _, stderr := runCLI(t, nil, state...); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	code, _, stderr = runCLI(t, nil, append(state, "--cleanup-policy", "delete")...)
	if code != exitCluster || !strings.Contains(stderr, "it has cleanup.policy=compact, but a command topic must not be compacted") {
		t.Fatalf("create-topic --cleanup-policy delete over a compacted topic: exit %d: %s", code, stderr)
	}
	code, _, stderr = runCLI(t, nil, append(args, "--cleanup-policy", "compacted")...)
	if code != exitUsage {
		t.Fatalf("--cleanup-policy compacted: exit %d: %s", code, stderr)
	}
	assertOneLine(t, stderr, `--cleanup-policy "compacted": want compact (the state topic) or delete (a command topic)`)
}
