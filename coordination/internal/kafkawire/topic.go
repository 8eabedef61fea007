package kafkawire

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds topic admin over the plain client: the creation of a
// topic and the wait until its partitions answer, and the reads of a
// topic's partitions and configs that a check of the state topic needs.

// CreateTopic creates topic with the partition count, the replication
// factor (-1: the broker's default.replication.factor) and the configs
// given, and waits until every partition has a leader that answers
// ListOffsets: the controller creates a topic before its brokers take up
// leadership, and a write in between is refused with
// NOT_LEADER_OR_FOLLOWER, which franz-go retries only after its metadata
// min age. It reports existed, and does nothing more, for a topic that
// exists already (TOPIC_ALREADY_EXISTS). Its errors are *Error named op
// (PathAdmin), and of class Canceled for a created topic whose partitions
// were not ready when ctx ended.
func (w *Wire) CreateTopic(ctx context.Context, op, topic string, partitions int32, replicationFactor int16, configs map[string]*string) (existed bool, err error) {
	if w.Closed() {
		return false, errClosed
	}
	_, err = w.admin.CreateTopic(ctx, partitions, replicationFactor, configs, topic)
	switch {
	case err != nil && topicExists(err):
		return true, nil
	case err != nil:
		return false, wrap(PathAdmin, op, err)
	}
	for {
		err := w.topicReady(ctx, topic, int(partitions))
		if err == nil {
			return false, nil
		}
		if ctx.Err() != nil {
			return false, &Error{Op: fmt.Sprintf("the state topic %s was created, but its partitions are not ready", topic), Class: Canceled, Err: err}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// topicReady reports, with an error, a topic whose partitions are not all
// led and answering.
func (w *Wire) topicReady(ctx context.Context, topic string, partitions int) error {
	metadata, err := w.topicMetadata(ctx, topic)
	if err != nil {
		return err
	}
	if len(metadata.Partitions) != partitions {
		return fmt.Errorf("%d of %d partitions", len(metadata.Partitions), partitions)
	}
	indexes := make([]int32, 0, len(metadata.Partitions))
	for _, p := range metadata.Partitions {
		if p.Leader < 0 {
			return fmt.Errorf("partition %d has no leader", p.Partition)
		}
		indexes = append(indexes, p.Partition)
	}
	_, err = listOffsets(ctx, w.plain, -1, topic, indexes, listLatest, isolationReadUncommitted)
	return err
}

// topicMetadata reads the metadata of one topic with a fresh Metadata
// request: kadm answers from franz-go's metadata cache, which may predate
// the topic.
func (w *Wire) topicMetadata(ctx context.Context, topic string) (kmsg.MetadataResponseTopic, error) {
	resp, err := requestMetadata(ctx, w.plain, topic)
	if err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	for _, mt := range resp.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			return mt, codeError(mt.ErrorCode)
		}
	}
	return kmsg.MetadataResponseTopic{}, errMissing
}

// TopicLeaders returns the leader of every partition of topic, in the
// order of a fresh Metadata answer (-1 for a partition without a leader),
// so its length is the partition count. Its errors are *Error named op
// (PathAdmin): Missing for a topic that does not exist, NotAuthorized for
// a missing DESCRIBE ACL, Closed on a closed wire.
func (w *Wire) TopicLeaders(ctx context.Context, op, topic string) ([]int32, error) {
	if w.Closed() {
		return nil, errClosed
	}
	metadata, err := w.topicMetadata(ctx, topic)
	if err != nil {
		return nil, wrap(PathAdmin, op, err)
	}
	leaders := make([]int32, len(metadata.Partitions))
	for i, p := range metadata.Partitions {
		leaders[i] = p.Leader
	}
	return leaders, nil
}

// TopicConfig returns the value of the config key of topic, with one
// DescribeConfigs request, and "" for a key without a value. Its errors
// are *Error named op + ": describe its configs" (PathAdmin):
// NotAuthorized for a missing DESCRIBE_CONFIGS ACL.
func (w *Wire) TopicConfig(ctx context.Context, op, topic, key string) (string, error) {
	op += ": describe its configs"
	configs, err := w.admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", wrap(PathAdmin, op, err)
	}
	config, err := configs.On(topic, nil)
	if err != nil {
		return "", wrap(PathAdmin, op, err)
	}
	if config.Err != nil {
		return "", wrap(PathAdmin, op, config.Err)
	}
	value := ""
	for _, c := range config.Configs {
		if c.Key == key && c.Value != nil {
			value = *c.Value
		}
	}
	return value, nil
}
