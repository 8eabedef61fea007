package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Fill appends n registration records of a dummy role, each of another
// member, to partition 0 of topic with a plain batching producer. Every key
// is distinct, so compaction keeps them all: the partition really holds n
// records.
func (k *Kafka) Fill(ctx context.Context, topic string, n int64) error {
	if n <= 0 {
		return nil
	}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(k.Brokers...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(1<<20),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
	)
	if err != nil {
		return err
	}
	defer client.Close()
	dummy := mustRole("bench-dummy")
	now := time.Now().UnixMilli()
	var (
		mu    sync.Mutex
		first error
	)
	for i := range n {
		member := mustMember(fmt.Sprintf("dummy-%08d", i))
		record := &kgo.Record{
			Key:   coordination.EncodeKey(coordination.RegistrationKey(dummy, member)),
			Value: coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: now}),
		}
		client.Produce(ctx, record, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	if err := client.Flush(ctx); err != nil {
		return err
	}
	return first
}

// IdleResult is the cost of one idle standby at one log size.
type IdleResult struct {
	Records int64
	ChildResult
}

// KafkaIdle measures an idle standby of a role whose state partition holds
// each number of records: one state topic per size, filled with dummy
// registrations, a holder in this process with the default lease timings,
// and a standby in a child process, measured over window after warm. The
// children run side by side.
func (k *Kafka) KafkaIdle(ctx context.Context, sizes []int64, warm, window time.Duration) ([]IdleResult, error) {
	lease := coordination.DefaultLeaseConfig()
	results := make([]IdleResult, len(sizes))
	errs := make([]error, len(sizes))
	var wg sync.WaitGroup
	for i, size := range sizes {
		topic, options, err := k.StateTopic(ctx, "krabka-bench-idle", lease)
		if err != nil {
			return nil, err
		}
		if err := k.Fill(ctx, topic, size); err != nil {
			return nil, fmt.Errorf("fill %s with %d records: %w", topic, size, err)
		}
		holderT, err := k.Member(lease)
		if err != nil {
			return nil, err
		}
		defer holderT.Close()
		role := mustRole("bench-idle")
		holder, err := coordination.AcquireLeadership(ctx, holderT, role, mustMember("holder"), options...)
		if err != nil {
			return nil, err
		}
		defer holder.Resign(context.Background())
		wg.Go(func() {
			r, err := Spawn(ctx, "idle-kafka", ChildArgs{
				Brokers: k.Brokers, Topic: topic, Role: role.String(), Member: "standby",
				Lease: [3]time.Duration{lease.Duration(), lease.RenewInterval(), lease.ChallengeStagger()},
				Warm:  warm, Window: window, Fill: size,
			})
			results[i], errs[i] = IdleResult{Records: size, ChildResult: r}, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// EtcdIdle measures an idle standby of etcd's election: a session with the
// TTL of the default lease (30 s, so a keep-alive every 10 s, the default
// renew interval) and a Campaign behind another process's leader key.
func (e *Etcd) EtcdIdle(ctx context.Context, warm, window time.Duration) (ChildResult, error) {
	c, err := e.Client()
	if err != nil {
		return ChildResult{}, err
	}
	defer c.Close()
	s, err := concurrency.NewSession(c, concurrency.WithTTL(30))
	if err != nil {
		return ChildResult{}, err
	}
	defer s.Close()
	prefix := "/krabka-bench/idle-" + Suffix() + "/"
	if err := concurrency.NewElection(s, prefix).Campaign(ctx, "holder"); err != nil {
		return ChildResult{}, err
	}
	return Spawn(ctx, "idle-etcd", ChildArgs{
		Etcd: e.Endpoints, Prefix: prefix,
		Lease: [3]time.Duration{30 * time.Second, 10 * time.Second, 5 * time.Second},
		Warm:  warm, Window: window,
	})
}

// KafkaRoles holds n roles in one child process, for each n.
func (k *Kafka) KafkaRoles(ctx context.Context, counts []int, warm, window time.Duration) ([]ChildResult, error) {
	lease := coordination.DefaultLeaseConfig()
	topic := fmt.Sprintf("krabka-bench-roles-%s", Suffix())
	t, err := k.Member(lease)
	if err != nil {
		return nil, err
	}
	err = t.CreateStateTopic(ctx, 1, 1, coordination.WithTopic(topic), coordination.WithPartitions(16))
	t.Close()
	if err != nil {
		return nil, err
	}
	k.remember(topic)
	var results []ChildResult
	for _, n := range counts {
		r, err := Spawn(ctx, "roles-kafka", ChildArgs{
			Brokers: k.Brokers, Topic: topic, Role: "bench-roles-" + Suffix(), Roles: n,
			Lease: [3]time.Duration{lease.Duration(), lease.RenewInterval(), lease.ChallengeStagger()},
			Warm:  warm, Window: window,
		})
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

// EtcdRoles holds n elections in one child process, for each n.
func (e *Etcd) EtcdRoles(ctx context.Context, counts []int, warm time.Duration) ([]ChildResult, error) {
	var results []ChildResult
	for _, n := range counts {
		r, err := Spawn(ctx, "roles-etcd", ChildArgs{
			Etcd: e.Endpoints, Prefix: "/krabka-bench/roles-" + Suffix(), Roles: n,
			Lease: [3]time.Duration{30 * time.Second, 10 * time.Second, 5 * time.Second},
			Warm:  warm,
		})
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}
