package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func newCreateTopicCommand(g *globals) *cobra.Command {
	var replicationFactor, minISR int
	cmd := &cobra.Command{
		Use:   "create-topic",
		Short: "Create the state topic, or check the one that exists",
		Long: `create-topic creates the state topic (--topic, __coordination_state by
default) with --partitions partitions, cleanup.policy=compact and
min.insync.replicas, and waits until every partition has a leader. A topic
that exists already is not changed: create-topic checks it instead (its
partition count equals --partitions, and it is compacted) and exits 4 when
it does not match. It is safe to run at every deploy.

The promise that a command is durable in a quorum before the dispatch rests
on this topic: in production use --replication-factor 3
--min-insync-replicas 2.`,
		Example: `  krabka-coord create-topic --brokers 127.0.0.1:9092
  krabka-coord create-topic --replication-factor 3 --min-insync-replicas 2
  krabka-coord create-topic --topic team-a-coordination --partitions 4 --output json`,
		Args: exactArgs(),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if err := g.checkTopicFlags(); err != nil {
				return err
			}
			switch {
			case replicationFactor == 0 || replicationFactor < -1:
				return usageError("--replication-factor %d: want -1 (the broker's default.replication.factor) or a count from 1", replicationFactor)
			case minISR < 1:
				return usageError("--min-insync-replicas %d: want at least 1", minISR)
			case replicationFactor > 0 && minISR > replicationFactor:
				return usageError("--min-insync-replicas %d is above --replication-factor %d: no write could succeed", minISR, replicationFactor)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			c, err := g.connect(ctx)
			if err != nil {
				return err
			}
			result, err := createTopic(ctx, c, replicationFactor, minISR)
			if err != nil {
				return err
			}
			if g.json() {
				return writeJSON(g.stdout, result)
			}
			verb := "created:"
			if !result.Created {
				verb = "exists and checks out:"
			}
			fmt.Fprintf(g.stdout, "state topic %s %s %d partitions, replication factor %d, cleanup.policy=%s, min.insync.replicas=%d\n",
				result.Topic, verb, result.Partitions, result.ReplicationFactor, result.CleanupPolicy, result.MinInsyncReplicas)
			if result.ReplicationFactor < 3 || result.MinInsyncReplicas == 1 {
				fmt.Fprintf(g.stderr, "krabka-coord: note: with replication factor %d and min.insync.replicas=%d a write survives the loss of no broker; production wants 3 and 2\n",
					result.ReplicationFactor, result.MinInsyncReplicas)
			}
			return nil
		}),
	}
	cmd.Flags().IntVar(&replicationFactor, "replication-factor", -1, "replicas of each partition; -1 takes the broker's default.replication.factor")
	cmd.Flags().IntVar(&minISR, "min-insync-replicas", 1, "min.insync.replicas of the topic; use 2 with 3 replicas")
	return cmd
}

// createTopicJSON is the result of create-topic.
type createTopicJSON struct {
	Topic             string `json:"topic"`
	Created           bool   `json:"created"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	CleanupPolicy     string `json:"cleanup_policy"`
	MinInsyncReplicas int    `json:"min_insync_replicas"`
}

// createTopic creates or checks the state topic and describes it.
func createTopic(ctx context.Context, c *cluster, replicationFactor, minISR int) (createTopicJSON, error) {
	topic := c.g.topic
	result := createTopicJSON{Topic: topic}
	client, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return result, usageError("%v", err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	_, _, err = topicMetadata(ctx, client, topic)
	exists := err == nil

	transport, err := c.transport(coordination.DefaultLeaseConfig())
	if err != nil {
		return result, err
	}
	defer transport.Close()
	if err := transport.CreateStateTopic(ctx, replicationFactor, minISR, c.g.coordOptions()...); err != nil {
		if explained := c.explainTopic(ctx); explained != nil {
			return result, explained
		}
		return result, clusterError("%s", strings.TrimPrefix(err.Error(), "coordination: "))
	}
	result.Created = !exists

	result.Partitions, result.ReplicationFactor, err = topicMetadata(ctx, client, topic)
	if err != nil {
		return result, clusterError("describe the state topic %s: %v", topic, err)
	}
	configs, err := admin.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		if config, err := configs.On(topic, nil); err == nil {
			for _, entry := range config.Configs {
				if entry.Value == nil {
					continue
				}
				switch entry.Key {
				case "cleanup.policy":
					result.CleanupPolicy = *entry.Value
				case "min.insync.replicas":
					result.MinInsyncReplicas, _ = strconv.Atoi(*entry.Value)
				}
			}
		}
	}
	return result, nil
}

// topicMetadata returns the partition count and the replication factor of
// a topic, with a fresh Metadata request: kadm answers from franz-go's
// metadata cache, which may predate a topic just created.
func topicMetadata(ctx context.Context, client *kgo.Client, topic string) (partitions, replicas int, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, 0, err
		}
		if len(t.Partitions) > 0 {
			replicas = len(t.Partitions[0].Replicas)
		}
		return len(t.Partitions), replicas, nil
	}
	return 0, 0, kerr.UnknownTopicOrPartition
}
