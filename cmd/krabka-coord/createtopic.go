package main

// The command create-topic: it creates the state topic (or, with
// --cleanup-policy delete, an application's command topic), or checks an
// existing one against what was asked, and the reads of the cluster's
// configuration and of a topic's metadata that it needs.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newCreateTopicCommand(g *globals) *cobra.Command {
	var replicationFactor, minISR int
	var policy string
	cmd := &cobra.Command{
		Use:   "create-topic",
		Short: "Create the state topic (or a command topic), or check the one that exists",
		Long: `create-topic creates the state topic (--topic, __coordination_state by
default) with --partitions partitions and cleanup.policy=compact, and waits
until every partition has a leader. The replication factor and
min.insync.replicas are the cluster's defaults (default.replication.factor,
min.insync.replicas) unless --replication-factor and --min-insync-replicas
say otherwise.

A topic that exists already is not changed: create-topic checks it instead,
with describe permissions only (DESCRIBE and DESCRIBE_CONFIGS on the topic;
no CREATE), so an application user can run it at every deploy. The check
compares what is there with what was asked: the partition count with
--partitions, compaction, and the replication factor and min.insync.replicas
when their flags are given. It names every difference and exits 4.

The promise that a command is durable in a quorum before the dispatch rests
on this topic: in production use --replication-factor 3
--min-insync-replicas 2 (or cluster defaults of those).

--cleanup-policy delete creates (or checks) a topic of the application's own
instead, such as the topic its leader writes commands to with
Leadership.Write: cleanup.policy=delete, so that records of one key are all
kept, with the same flags otherwise (--topic names it).`,
		Example: `  krabka-coord create-topic --brokers 127.0.0.1:9092
  krabka-coord create-topic --replication-factor 3 --min-insync-replicas 2
  krabka-coord create-topic --topic team-a-coordination --partitions 4 --output json
  krabka-coord create-topic --topic commands --partitions 1 --cleanup-policy delete`,
		Args: exactArgs(),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := g.checkTopicFlags(); err != nil {
				return err
			}
			minISRSet := cmd.Flags().Changed("min-insync-replicas")
			rfSet := cmd.Flags().Changed("replication-factor")
			switch {
			case replicationFactor == 0 || replicationFactor < -1 || replicationFactor > 1<<15-1:
				return usageError("--replication-factor %d: want -1 (the cluster's default.replication.factor) or a count from 1", replicationFactor)
			case minISRSet && minISR < 1:
				return usageError("--min-insync-replicas %d: want at least 1", minISR)
			case minISRSet && replicationFactor > 0 && minISR > replicationFactor:
				return usageError("--min-insync-replicas %d is above --replication-factor %d: a broker older than Kafka 3.7 refuses every write, a later one takes the replication factor instead; pass at most %d", minISR, replicationFactor, replicationFactor)
			}
			if policy != policyCompact && policy != policyDelete {
				return usageError("--cleanup-policy %q: want compact (the state topic) or delete (a command topic)", policy)
			}
			want := topicRequest{partitions: g.partitions, cleanupPolicy: policy}
			if rfSet && replicationFactor > 0 {
				want.replicationFactor = replicationFactor
			}
			if minISRSet {
				want.minISR = minISR
			}
			signals := followSignals(cmd.Context())
			defer signals.stop()
			ctx, cancel := context.WithTimeout(signals.ctx, requestTimeout)
			defer cancel()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			result, err := createTopic(ctx, c, want)
			if err != nil {
				if interruptedBy(ctx) {
					return interruptedError("before create-topic finished")
				}
				return err
			}
			if g.json() {
				return writeJSON(g.stdout, result)
			}
			verb := "created:"
			if !result.Created {
				verb = "exists and checks out:"
			}
			isr := "unknown (no DESCRIBE_CONFIGS)"
			if result.MinInsyncReplicas != nil {
				isr = fmt.Sprint(*result.MinInsyncReplicas)
			}
			fmt.Fprintf(g.stdout, "%s %s %s %s, replication factor %d, cleanup.policy=%s, min.insync.replicas=%s\n",
				want.what(), result.Topic, verb, fmtCount(result.Partitions, "partition", "partitions"), result.ReplicationFactor, result.CleanupPolicy, isr)
			if result.MinInsyncReplicas != nil && (result.ReplicationFactor < 3 || *result.MinInsyncReplicas < 2) {
				fmt.Fprintf(g.stderr, "krabka-coord: note: with replication factor %d and min.insync.replicas=%d a write survives the loss of %s; production wants 3 and 2\n",
					result.ReplicationFactor, *result.MinInsyncReplicas, fmtCount(max(0, min(result.ReplicationFactor, result.ReplicationFactor-*result.MinInsyncReplicas)), "broker", "brokers"))
			}
			return nil
		}),
	}
	cmd.Flags().IntVar(&replicationFactor, "replication-factor", -1, "replicas of each partition of a new topic; -1 takes the cluster's default.replication.factor")
	cmd.Flags().IntVar(&minISR, "min-insync-replicas", 0, "min.insync.replicas of a new topic (default: the cluster's min.insync.replicas); use 2 with 3 replicas")
	cmd.Flags().StringVar(&policy, "cleanup-policy", policyCompact, "compact for the state topic; delete for a topic of the application's own, such as its command topic")
	return cmd
}

// The cleanup policies of create-topic.
const (
	policyCompact = "compact" // the state topic
	policyDelete  = "delete"  // a command topic of the application
)

// topicRequest is what create-topic was asked for; a zero field was not
// asked for, and takes the cluster's default.
type topicRequest struct {
	partitions        int
	replicationFactor int
	minISR            int
	cleanupPolicy     string // policyCompact ("" too) or policyDelete
}

// what names the topic in messages: "state topic", or "topic" for a
// command topic.
func (r topicRequest) what() string {
	if r.cleanupPolicy == policyDelete {
		return "topic"
	}
	return "state topic"
}

// createTopicJSON is the result of create-topic.
type createTopicJSON struct {
	Topic             string `json:"topic"`
	Created           bool   `json:"created"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	CleanupPolicy     string `json:"cleanup_policy"`

	// MinInsyncReplicas is null when the user may not describe the
	// topic's configs.
	MinInsyncReplicas *int `json:"min_insync_replicas"`
}

// createTopic creates the state topic, or checks the one that exists
// against want, and describes it.
func createTopic(ctx context.Context, c *cluster, want topicRequest) (createTopicJSON, error) {
	topic := c.g.topic
	result := createTopicJSON{Topic: topic}
	client, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return result, usageError("%v", err)
	}
	defer client.Close()
	var brokers int
	err = retryTransient(ctx, func(ctx context.Context) (err error) {
		result.Partitions, result.ReplicationFactor, brokers, err = describeTopic(ctx, client, topic)
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return permanent(err)
		}
		return err
	})
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		if err := c.newTopic(ctx, client, want, brokers); err != nil {
			return result, err
		}
		result.Created = true
		err = retryTransient(ctx, func(ctx context.Context) (err error) {
			result.Partitions, result.ReplicationFactor, _, err = describeTopic(ctx, client, topic)
			return err
		})
		if err != nil {
			return result, clusterError("describe the %s %s after its creation: %s", want.what(), topic, oneLine(err.Error()))
		}
	case isDenied(err):
		return result, c.deniedError("describe the "+want.what()+" "+topic, topicACL(opDescribe, topic), err)
	case err != nil:
		return result, clusterError("describe the %s %s: %s", want.what(), topic, oneLine(err.Error()))
	}
	configs, err := topicConfigs(ctx, client, topic)
	need := aclNeed{operation: opDescribeConfigs, resourceType: resTopic, resource: topic}
	switch {
	case isDenied(err) && (want.minISR > 0 || !result.Created):
		return result, c.deniedError("describe the configs of the "+want.what()+" "+topic+" (to check its cleanup.policy and min.insync.replicas)", need, err)
	case isDenied(err):
	case err != nil:
		return result, clusterError("describe the configs of the %s %s: %s", want.what(), topic, oneLine(err.Error()))
	default:
		result.CleanupPolicy = configs["cleanup.policy"]
		if isr, err := strconv.Atoi(configs["min.insync.replicas"]); err == nil {
			result.MinInsyncReplicas = &isr
		}
	}
	if result.Created {
		return result, nil
	}
	var differences []string
	if result.Partitions != want.partitions {
		differences = append(differences, fmt.Sprintf("it has %s, but --partitions is %d: pass --partitions %d, the count the members use (Kafka cannot take partitions away, and more would move roles)",
			fmtCount(result.Partitions, "partition", "partitions"), want.partitions, result.Partitions))
	}
	switch {
	case want.cleanupPolicy == policyDelete && result.CleanupPolicy != "" && strings.Contains(result.CleanupPolicy, "compact"):
		differences = append(differences, fmt.Sprintf("it has cleanup.policy=%s, but a command topic must not be compacted (compaction keeps only the newest record of a key): run 'kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config cleanup.policy=delete'",
			result.CleanupPolicy, c.brokers[0], topic))
	case want.cleanupPolicy != policyDelete && !strings.Contains(result.CleanupPolicy, "compact"):
		differences = append(differences, fmt.Sprintf("it has cleanup.policy=%s, but it must be compacted: run 'kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact'",
			result.CleanupPolicy, c.brokers[0], topic))
	}
	if want.replicationFactor > 0 && result.ReplicationFactor != want.replicationFactor {
		differences = append(differences, fmt.Sprintf("it has replication factor %d, but --replication-factor is %d: change it with kafka-reassign-partitions.sh",
			result.ReplicationFactor, want.replicationFactor))
	}
	if want.minISR > 0 && result.MinInsyncReplicas != nil && *result.MinInsyncReplicas != want.minISR {
		differences = append(differences, fmt.Sprintf("it has min.insync.replicas=%d, but --min-insync-replicas is %d: run 'kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=%d'",
			*result.MinInsyncReplicas, want.minISR, c.brokers[0], topic, want.minISR))
	}
	if len(differences) > 0 {
		if want.cleanupPolicy == policyDelete {
			return result, clusterError("the topic %s exists, and differs from what was asked: %s", topic, strings.Join(differences, "; "))
		}
		return result, clusterError("the state topic %s exists, and differs from what was asked: %s; if %s holds other data (a command topic, say), leave it alone and pass another --topic",
			topic, strings.Join(differences, "; "), topic)
	}
	return result, nil
}

// newTopic creates the state topic: compacted (or, for a command topic,
// cleanup.policy=delete), with the partitions and
// the replication factor asked for, and min.insync.replicas only when it
// was asked for (the cluster's otherwise). It waits until every partition
// answers at its leader.
func (c *cluster) newTopic(ctx context.Context, client *kgo.Client, want topicRequest, brokers int) error {
	topic := c.g.topic
	if want.replicationFactor > brokers && brokers > 0 {
		return usageError("--replication-factor %d is above the %s of the cluster: pass at most %d", want.replicationFactor, fmtCount(brokers, "live broker", "live brokers"), brokers)
	}
	replication := want.replicationFactor
	if replication == 0 {
		replication = -1
		if defaultRF, ok := c.brokerConfigInt(ctx, "default.replication.factor"); ok {
			if int64(want.minISR) > defaultRF {
				return usageError("--min-insync-replicas %d is above the cluster's default.replication.factor %d: a broker older than Kafka 3.7 refuses every write, a later one takes the replication factor instead; pass --replication-factor too", want.minISR, defaultRF)
			}
		}
	}
	policy := want.cleanupPolicy
	if policy == "" {
		policy = policyCompact
	}
	configs := map[string]*string{"cleanup.policy": kmsg.StringPtr(policy)}
	if want.minISR > 0 {
		configs["min.insync.replicas"] = kmsg.StringPtr(strconv.Itoa(want.minISR))
	}
	if want.partitions < 1 || want.partitions > math.MaxInt32 || replication < -1 || replication > math.MaxInt16 {
		return usageError("--partitions %d or --replication-factor %d does not fit CreateTopics: want 1 to %d partitions and -1 to %d replicas",
			want.partitions, replication, math.MaxInt32, math.MaxInt16)
	}
	_, err := kadm.NewClient(client).CreateTopic(ctx, int32(want.partitions), int16(replication), configs, topic)
	switch {
	case err == nil, errors.Is(err, kerr.TopicAlreadyExists):
	case isDenied(err):
		return c.deniedError("create the "+want.what()+" "+topic, topicACL(opCreate, topic), err)
	case errors.Is(err, kerr.InvalidReplicationFactor):
		return usageError("the cluster refused the replication factor: %s; it has %s", kafkaDetail(err), fmtCount(brokers, "live broker", "live brokers"))
	default:
		return clusterError("create the %s %s: %s", want.what(), topic, oneLine(err.Error()))
	}
	for {
		// A fresh Metadata request first: the sharded ListOffsets goes by
		// franz-go's metadata, which otherwise predates the topic for its
		// minimum age (5 s).
		_, _, _, err := describeTopic(ctx, client, topic)
		if err == nil {
			err = partitionsReady(ctx, client, topic, want.partitions)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return clusterError("the %s %s was created, but its partitions are not ready: %s", want.what(), topic, oneLine(err.Error()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kafkaDetail is the text of a Kafka error with the broker's message.
func kafkaDetail(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message + ": " + ke.Description
	}
	return oneLine(err.Error())
}

// brokerConfigInt reads an integer config of a live broker, and reports
// false when the cluster does not tell (DESCRIBE_CONFIGS on the Cluster
// missing).
func (c *cluster) brokerConfigInt(ctx context.Context, key string) (int64, bool) {
	value, ok := c.brokerConfig(ctx, key)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(value, 10, 64)
	return v, err == nil
}

// brokerConfig reads a config of one live broker, static or dynamic, and
// reports false when the cluster does not tell.
func (c *cluster) brokerConfig(ctx context.Context, key string) (string, bool) {
	client, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return "", false
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	admin := kadm.NewClient(client)
	brokers, err := admin.ListBrokers(ctx)
	if err != nil || len(brokers) == 0 {
		return "", false
	}
	described, err := admin.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
	if err != nil {
		return "", false
	}
	for _, config := range described {
		if config.Err != nil {
			continue
		}
		for _, entry := range config.Configs {
			if entry.Key == key && entry.Value != nil {
				return *entry.Value, true
			}
		}
	}
	return "", false
}

// partitionsReady reports, with an error, a topic of which a partition
// does not answer ListOffsets at its leader yet.
func partitionsReady(ctx context.Context, client *kgo.Client, topic string, partitions int) error {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(p), -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	shards := client.RequestSharded(ctx, req)
	answered := 0
	for _, shard := range shards {
		if shard.Err != nil {
			return shard.Err
		}
		for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err
				}
				answered++
			}
		}
	}
	if answered != partitions {
		return fmt.Errorf("%d of %d partitions answered", answered, partitions)
	}
	return nil
}

// describeTopic returns the partition count and the replication factor of
// a topic, and the count of live brokers, with a fresh Metadata request:
// kadm answers from franz-go's metadata cache, which may predate a topic
// just created. The broker count comes with the error of a topic that does
// not exist.
func describeTopic(ctx context.Context, client *kgo.Client, topic string) (partitions, replicas, brokers int, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return 0, 0, 0, err
	}
	brokers = len(resp.Brokers)
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, 0, brokers, err
		}
		if len(t.Partitions) > 0 {
			replicas = len(t.Partitions[0].Replicas)
		}
		return len(t.Partitions), replicas, brokers, nil
	}
	return 0, 0, brokers, kerr.UnknownTopicOrPartition
}

// topicMetadata returns the partition count and the replication factor of
// a topic, as describeTopic does.
func topicMetadata(ctx context.Context, client *kgo.Client, topic string) (partitions, replicas int, err error) {
	partitions, replicas, _, err = describeTopic(ctx, client, topic)
	return partitions, replicas, err
}
