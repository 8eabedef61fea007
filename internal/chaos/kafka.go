package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// CreateTopics creates the state topic (compacted) and the command topic
// (max(CommandSpread, 1) partitions per role) of a run, with the replication factor rf (0 or
// less: the cluster's default.replication.factor) and the cluster's
// min.insync.replicas, and returns the replication factor that the
// cluster gave them. The harness reads and writes its own topics, never a
// shared one, so a run can share the broker with others.
func CreateTopics(ctx context.Context, info *RunInfo, rf int) (int, error) {
	seeds := info.Brokers
	for _, n := range info.Nodes {
		seeds = append(seeds, n.Addr)
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return 0, err
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	replicas := int16(-1) // the broker's default.replication.factor (KIP-464)
	if rf > math.MaxInt16 {
		return 0, fmt.Errorf("replication factor %d: want at most %d (CreateTopics' int16)", rf, math.MaxInt16)
	}
	if rf > 0 {
		replicas = int16(rf)
	}
	// The state topic is compacted as the package asks, and the cleaner
	// keeps every record for a day: the checker reads every lease record of
	// the run, and compaction keeps only the last one of a role.
	compact, lag := "compact", "86400000"
	topics := []struct {
		name       string
		partitions int
		configs    map[string]*string
	}{
		{info.StateTopic, info.StatePartitions, map[string]*string{"cleanup.policy": &compact, "min.compaction.lag.ms": &lag}},
		{info.CommandTopic, len(info.Roles) * max(info.CommandSpread, 1), nil},
	}
	for _, topic := range topics {
		for {
			_, err := admin.CreateTopic(ctx, int32(topic.partitions), replicas, topic.configs, topic.name) //nolint:gosec // the run's partitions and roles: a few dozen
			if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
				break
			}
			if ctx.Err() != nil {
				return 0, fmt.Errorf("create topic %s: %w", topic.name, err)
			}
			time.Sleep(500 * time.Millisecond) // the broker may still be starting
		}
	}
	for {
		meta, err := admin.Metadata(ctx, info.StateTopic)
		if err == nil {
			if p, ok := meta.Topics[info.StateTopic].Partitions[0]; ok && len(p.Replicas) > 0 {
				return len(p.Replicas), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("metadata of topic %s: %w (last error: %w)", info.StateTopic, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ReadCommitted reads one partition read_committed from its first offset
// to its end.
//
// It first waits, at most settle, until no transaction is open on the
// partition (the last stable offset reaches the high watermark), so that a
// transaction left open by a killed member is aborted by the broker before
// the read. It then reads, keeping the transaction markers, until it has
// passed the last stable offset, and returns the data records only.
func ReadCommitted(ctx context.Context, brokers []string, topic string, partition int32, settle time.Duration) ([]*kgo.Record, error) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	deadline := time.Now().Add(settle)
	var stable int64
	for {
		end, err := listOffset(ctx, adm.ListEndOffsets, topic, partition)
		if err != nil {
			return nil, err
		}
		stable, err = listOffset(ctx, adm.ListCommittedOffsets, topic, partition)
		if err != nil {
			return nil, err
		}
		if stable >= end || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	start, err := listOffset(ctx, adm.ListStartOffsets, topic, partition)
	if err != nil {
		return nil, err
	}
	if start > 0 {
		return nil, fmt.Errorf("%s-%d starts at offset %d: records were deleted, and the check would be blind to them", topic, partition, start)
	}
	if stable == 0 {
		return nil, nil
	}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	var out []*kgo.Record
	for {
		fetches := client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for _, fe := range fetches.Errors() {
			if !kerr.IsRetriable(fe.Err) {
				return nil, fmt.Errorf("read %s-%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		done := false
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset >= stable-1 {
				done = true
			}
			if r.Offset < stable && !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
		if done {
			return out, nil
		}
	}
}

// listOffset lists one offset of one partition, and retries what the
// broker calls retriable (a partition without a leader while the broker
// starts, a coordinator that loads) until ctx ends.
func listOffset(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string, partition int32) (int64, error) {
	for {
		offset, err := listOffsetOnce(ctx, list, topic, partition)
		if err == nil || !kerr.IsRetriable(err) && !errors.Is(err, kerr.LeaderNotAvailable) {
			return offset, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func listOffsetOnce(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string, partition int32) (int64, error) {
	listed, err := list(ctx, topic)
	if err != nil {
		var shards *kadm.ShardErrors
		if errors.As(err, &shards) && len(shards.Errs) > 0 {
			return 0, shards.Errs[0].Err
		}
		return 0, err
	}
	offset, ok := listed.Lookup(topic, partition)
	if !ok {
		return 0, fmt.Errorf("no offset for %s-%d", topic, partition)
	}
	if offset.Err != nil {
		return 0, fmt.Errorf("offset of %s-%d: %w", topic, partition, offset.Err)
	}
	return offset.Offset, nil
}

// LoadCheckInput reads everything the checker needs for a run: the command
// partitions and the state partitions of the roles from the broker, and the
// logs from the run directory.
func LoadCheckInput(ctx context.Context, info *RunInfo, settle time.Duration) (CheckInput, error) {
	in := CheckInput{
		Roles:    info.Roles,
		Commands: make(map[string][]CommandRecord),
		Leases:   make(map[string][]LeaseRecord),
		Config: CheckConfig{
			Members:     len(info.Members),
			Lease:       info.Lease,
			Stagger:     info.Stagger,
			Slack:       info.Slack,
			EndMillis:   info.EndMillis,
			StartMillis: info.StartMillis,
			// The library's read timeout is the renew interval, clamped to
			// 1-10 s, and its transaction timeout the lease.
			CopyLife: info.Lease + min(max(info.Renew, time.Second), 10*time.Second),
		},
	}
	stateByPartition := make(map[int][]coordination.StateRecord)
	for i, name := range info.Roles {
		partitions, err := CommandPartitions(i, len(info.Roles), info.CommandSpread)
		if err != nil {
			return in, err
		}
		for _, partition := range partitions {
			records, err := ReadCommitted(ctx, info.Brokers, info.CommandTopic, partition, settle)
			if err != nil {
				return in, err
			}
			for _, r := range records {
				in.Commands[name] = append(in.Commands[name], CommandRecord{Partition: partition, Offset: r.Offset, Value: r.Value})
			}
		}
		role, err := coordination.NewRole(name)
		if err != nil {
			return in, err
		}
		tp, err := coordination.RoleTopicPartition(role, coordination.WithTopic(info.StateTopic), coordination.WithPartitions(info.StatePartitions))
		if err != nil {
			return in, err
		}
		state, ok := stateByPartition[tp.Partition]
		if !ok {
			got, err := ReadCommitted(ctx, info.Brokers, info.StateTopic, int32(tp.Partition), settle) //nolint:gosec // a partition of the run's state topic
			if err != nil {
				return in, err
			}
			for _, r := range got {
				state = append(state, coordination.StateRecord{Offset: r.Offset, Key: r.Key, Value: r.Value})
			}
			stateByPartition[tp.Partition] = state
		}
		leases, err := LeaseRecords(role, state)
		if err != nil {
			return in, err
		}
		in.Leases[name] = leases
	}
	logs, err := loadLogs(info)
	if err != nil {
		return in, err
	}
	in.Acks, in.Events, in.Faults, in.Calls, in.History, in.Mints = logs.acks, logs.events, logs.faults, logs.calls, logs.history, logs.mints
	if info.ClusterDir != "" {
		ids := make([]int32, len(info.Nodes))
		for i, n := range info.Nodes {
			ids[i] = n.ID
		}
		if in.KafkaEvents, err = ReadKafkaEvents(info.ClusterDir, ids); err != nil {
			return in, err
		}
	}
	return in, nil
}
