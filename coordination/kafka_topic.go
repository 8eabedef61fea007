package coordination

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// This file holds the state topic's admin over KafkaTransport:
// CreateStateTopic and CheckStateTopic check the options and the answer
// against what the members need (kafkawire's Wire.CreateTopic,
// TopicLeaders and TopicConfig send the requests).

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
// leader. A topic that exists already is not changed: the call then checks
// it as [KafkaTransport.CheckStateTopic] does and returns that result, so it
// is safe to call at every start.
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
		return fmt.Errorf("coordination: CreateStateTopic: min.insync.replicas %d above the replication factor %d: a broker older than Kafka 3.7 refuses every write, a later one takes the replication factor instead", minInsyncReplicas, replicationFactor)
	}
	if t.isClosed() {
		return errTransportClosed
	}
	configs := map[string]*string{
		"cleanup.policy":      new("compact"),
		"min.insync.replicas": new(strconv.Itoa(minInsyncReplicas)),
	}
	op := fmt.Sprintf("create the state topic %s with %d partitions", s.topic, s.partitions)
	partitions, err := kafkawire.Int32("CreateTopics' NumPartitions (WithPartitions)", s.partitions, 1)
	if err != nil {
		return fmt.Errorf("coordination: CreateStateTopic: %w", err)
	}
	replicas, err := kafkawire.Int16("CreateTopics' ReplicationFactor", replicationFactor, -1)
	if err != nil {
		return fmt.Errorf("coordination: CreateStateTopic: %w", err)
	}
	existed, err := t.wire.CreateTopic(ctx, op, s.topic, partitions, replicas, configs)
	switch {
	case err != nil:
		return kafkaError(err)
	case existed:
		return t.CheckStateTopic(ctx, options...)
	}
	return nil
}

// CheckStateTopic checks the coordination topic that the options name, as a
// member does at start: the topic exists, its partition count equals the
// configured one ([WithPartitions], [DefaultPartitions] by default), and its
// cleanup.policy contains compact. Members that disagree on the count put a
// role on different partitions and never see each other's leases, so a
// mismatch is an error that names both counts. The options start from the
// specification's defaults, as [AcquireLeadership]'s do.
//
// It costs a metadata request and a DescribeConfigs request, and once for
// the transport's life an ApiVersions check of every broker (see "Kafka 4
// and the token that must not move" in the package doc). A missing topic,
// a partition count that differs, and a topic that is not compacted return
// a *[StateTopicError], which wraps [ErrMisconfigured]; a broker that cannot
// serve a request at its capped version an error that wraps
// ErrMisconfigured and names the API and both ranges. It also returns an
// error for invalid options, for a missing DESCRIBE or DESCRIBE_CONFIGS ACL
// (wrapping [ErrNotAuthorized]), and for a cluster it cannot reach.
//
// It logs a warning on the options' logger when the lease is shorter than
// [MinLeaseForFailureDetection] allows for the broker.session.timeout.ms it
// reads (skipped without DESCRIBE_CONFIGS on the cluster). Each call
// checks anew; the campaigns over one transport share a check that passed
// within a minute (see [ExtendedTransport]).
func (t *KafkaTransport) CheckStateTopic(ctx context.Context, options ...Option) error {
	s, err := newSettings(options) // the specification's defaults, as AcquireLeadership's
	if err != nil {
		return err
	}
	if t.isClosed() {
		return errTransportClosed
	}
	op := "check the state topic " + s.topic
	if err := t.wire.CheckVersions(ctx, "check the request versions of the cluster"); err != nil {
		return kafkaError(err)
	}
	leaders, err := t.wire.TopicLeaders(ctx, op, s.topic)
	switch {
	case kafkawire.ClassOf(err) == kafkawire.Missing:
		return &StateTopicError{Topic: s.topic, Missing: true, WantPartitions: s.partitions,
			Detail: fmt.Sprintf("the topic does not exist; create it with CreateStateTopic (cleanup.policy=compact, %d partitions)", s.partitions)}
	case err != nil:
		return kafkaError(err)
	case len(leaders) != s.partitions:
		return &StateTopicError{Topic: s.topic, Partitions: len(leaders), WantPartitions: s.partitions,
			Detail: fmt.Sprintf("the topic has %d partitions, but this member is configured for %d "+
				"(WithPartitions; the default is %d): members with different counts put a role on different partitions "+
				"and never see each other's leases", len(leaders), s.partitions, DefaultPartitions)}
	}
	policy, err := t.wire.TopicConfig(ctx, op, s.topic, "cleanup.policy")
	if err != nil {
		return kafkaError(err)
	}
	for _, p := range strings.Split(policy, ",") {
		if strings.TrimSpace(p) == "compact" {
			if len(leaders) > 0 {
				t.warnShortLease(ctx, s, leaders[0])
			}
			return nil
		}
	}
	return &StateTopicError{Topic: s.topic, Partitions: len(leaders), WantPartitions: s.partitions, CleanupPolicy: policy,
		Detail: fmt.Sprintf("cleanup.policy is %q, but the topic needs compact: "+
			"without it retention deletes the registrations and leases that rank the members", policy)}
}
