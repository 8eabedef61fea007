package coordination

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateStateTopic creates the coordination topic with cleanup.policy=compact,
// min.insync.replicas = minInsyncReplicas, and the replication factor given
// (-1 takes the broker's default.replication.factor). The options are those
// of [AcquireLeadership]: [WithTopic] names the topic ([StateTopic] by
// default) and [WithPartitions] sets its partition count
// ([DefaultPartitions] by default); the others do not matter here. Pass
// every member the same options, so the count that created the topic is the
// count that places each role.
//
// The call returns when every partition of the new topic answers at its
// leader. A
// topic that exists already is not changed: the call then checks it as
// [KafkaTransport.CheckStateTopic] does and returns that result, so it is
// safe to call at every start.
//
// The claim "durable in a quorum before the dispatch" rests on this topic:
// use a replication factor of 3 and a min.insync.replicas of 2 in
// production. It returns an error for a replication factor of 0 or below
// -1, for a minInsyncReplicas below 1 or above the replication factor, for
// invalid options, and for a missing CREATE ACL.
func (t *KafkaTransport) CreateStateTopic(ctx context.Context, replicationFactor, minInsyncReplicas int, options ...Option) error {
	s, err := newSettings(options) // the specification's defaults, as AcquireLeadership's
	if err != nil {
		return err
	}
	switch {
	case replicationFactor == 0 || replicationFactor < -1 || replicationFactor > 1<<15-1:
		return fmt.Errorf("coordination: CreateStateTopic: replication factor %d: want -1 (the broker default) or a count from 1", replicationFactor)
	case minInsyncReplicas < 1:
		return fmt.Errorf("coordination: CreateStateTopic: min.insync.replicas %d: want at least 1", minInsyncReplicas)
	case replicationFactor > 0 && minInsyncReplicas > replicationFactor:
		return fmt.Errorf("coordination: CreateStateTopic: min.insync.replicas %d above the replication factor %d: no write could succeed", minInsyncReplicas, replicationFactor)
	}
	if t.isClosed() {
		return errTransportClosed
	}
	configs := map[string]*string{
		"cleanup.policy":      new("compact"),
		"min.insync.replicas": new(strconv.Itoa(minInsyncReplicas)),
	}
	_, err = t.admin.CreateTopic(ctx, int32(s.partitions), int16(replicationFactor), configs, s.topic)
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return t.CheckStateTopic(ctx, options...)
	case err != nil:
		return describeKafkaError(fmt.Sprintf("create the state topic %s with %d partitions", s.topic, s.partitions), err)
	}
	return t.waitTopicReady(ctx, s.topic, s.partitions)
}

// waitTopicReady waits until every partition of a topic that was just
// created has a leader that answers ListOffsets. The controller creates a
// topic before its brokers take up leadership, and a write in between is
// refused with NOT_LEADER_OR_FOLLOWER, which franz-go retries only after its
// metadata min age (5 s).
func (t *KafkaTransport) waitTopicReady(ctx context.Context, topic string, partitions int) error {
	for {
		if err := t.topicReady(ctx, topic, partitions); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return wrapf(err, nil, "the state topic %s was created, but its partitions are not ready", topic)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// topicReady reports, with an error, a topic whose partitions are not all
// led and answering.
func (t *KafkaTransport) topicReady(ctx context.Context, topic string, partitions int) error {
	metadata, err := t.topicMetadata(ctx, topic)
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
	_, err = listOffsets(ctx, t.plain, -1, topic, indexes, listLatest, isolationReadUncommitted)
	return err
}

// topicMetadata reads the metadata of one topic with a fresh Metadata
// request: kadm answers from franz-go's metadata cache, which may predate
// the topic.
func (t *KafkaTransport) topicMetadata(ctx context.Context, topic string) (kmsg.MetadataResponseTopic, error) {
	resp, err := requestMetadata(ctx, t.plain, topic)
	if err != nil {
		return kmsg.MetadataResponseTopic{}, err
	}
	for _, mt := range resp.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			return mt, kerr.ErrorForCode(mt.ErrorCode)
		}
	}
	return kmsg.MetadataResponseTopic{}, kerr.UnknownTopicOrPartition
}

// CheckStateTopic checks the coordination topic that the options name, as a
// member does at start: the topic exists, its partition count equals the
// configured one ([WithPartitions], [DefaultPartitions] by default), and its
// cleanup.policy contains compact. Members that disagree on the count put a
// role on different partitions and never see each other's leases, so a
// mismatch is an error that names both counts.
//
// It costs a metadata request and a DescribeConfigs request. A missing
// topic, a partition count that differs, and a topic that is not compacted
// return a *[StateTopicError], which wraps [ErrMisconfigured]. It also returns an error
// for invalid options, for a missing DESCRIBE or DESCRIBE_CONFIGS ACL
// (wrapping [ErrNotAuthorized]), and for a cluster it cannot reach.
// [AcquireLeadership] calls it before it registers. The options start from
// the specification's defaults, as AcquireLeadership's do, so that an
// option valid there (such as [WithRenewDeadline]) is valid here.
//
// It also reads broker.session.timeout.ms from a broker that leads a
// partition of the topic, and logs a warning on the options' logger
// ([WithLogger]) when the lease ([DefaultLeaseConfig], or the one that
// [WithLeaseConfig] and its siblings set) is shorter than
// [MinLeaseForFailureDetection] allows: such a lease stays
// safe, but every broker fault costs a leadership change. That read needs
// DESCRIBE_CONFIGS on the cluster; without it the check is skipped.
func (t *KafkaTransport) CheckStateTopic(ctx context.Context, options ...Option) error {
	s, err := newSettings(options) // the specification's defaults, as AcquireLeadership's
	if err != nil {
		return err
	}
	if t.isClosed() {
		return errTransportClosed
	}
	op := "check the state topic " + s.topic
	metadata, err := t.topicMetadata(ctx, s.topic)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return &StateTopicError{Topic: s.topic, Missing: true, WantPartitions: s.partitions,
			Detail: fmt.Sprintf("the topic does not exist; create it with CreateStateTopic (cleanup.policy=compact, %d partitions)", s.partitions)}
	case err != nil:
		return describeKafkaError(op, err)
	case len(metadata.Partitions) != s.partitions:
		return &StateTopicError{Topic: s.topic, Partitions: len(metadata.Partitions), WantPartitions: s.partitions,
			Detail: fmt.Sprintf("the topic has %d partitions, but this member is configured for %d "+
				"(WithPartitions; the default is %d): members with different counts put a role on different partitions "+
				"and never see each other's leases", len(metadata.Partitions), s.partitions, DefaultPartitions)}
	}
	configs, err := t.admin.DescribeTopicConfigs(ctx, s.topic)
	if err != nil {
		return describeKafkaError(op+": describe its configs", err)
	}
	config, err := configs.On(s.topic, nil)
	if err != nil {
		return describeKafkaError(op+": describe its configs", err)
	}
	if config.Err != nil {
		return describeKafkaError(op+": describe its configs", config.Err)
	}
	policy := ""
	for _, c := range config.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	for _, p := range strings.Split(policy, ",") {
		if strings.TrimSpace(p) == "compact" {
			if len(metadata.Partitions) > 0 {
				t.warnShortLease(ctx, s, metadata.Partitions[0].Leader)
			}
			return nil
		}
	}
	return &StateTopicError{Topic: s.topic, Partitions: len(metadata.Partitions), WantPartitions: s.partitions, CleanupPolicy: policy,
		Detail: fmt.Sprintf("cleanup.policy is %q, but the topic needs compact: "+
			"without it retention deletes the registrations and leases that rank the members", policy)}
}
