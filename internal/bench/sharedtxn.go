package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// A prototype, for the roles-per-process figure only: the transactional
// protocol of a role (InitProducerId, AddPartitionsToTxn, a transactional
// Produce, EndTxn) sent as raw requests over ONE franz-go client that every
// role of the process shares. KafkaTransport opens one franz-go client per
// mint instead, because franz-go binds a client to one transactional id, and
// each holds its own connections. The prototype shows what sharing would
// cost; it is not the library, and it handles no fault.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sharedTxnClient is the one client of the prototype, with the request
// versions KafkaTransport's transactional clients use (EndTxn v4, Produce
// v11), and AddPartitionsToTxn at v3, the last client version.
func sharedTxnClient(brokers []string) (*kgo.Client, error) {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	versions.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	versions.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
	return kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MaxVersions(versions))
}

// transactionalBatch encodes one record as a transactional record batch of
// a producer id, epoch and sequence.
func transactionalBatch(id int64, epoch int16, sequence int32, key, value []byte) []byte {
	record := kmsg.Record{Key: key, Value: value}
	body := record.AppendTo(nil)
	record.Length = int32(len(body) - 1) // everything after the 1-byte varint 0
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           0x10, // transactional
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           id,
		ProducerEpoch:        epoch,
		FirstSequence:        sequence,
		NumRecords:           1,
		Records:              record.AppendTo(nil),
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

// retryConcurrent retries a coordinator request while it answers
// CONCURRENT_TRANSACTIONS or a retriable code.
func retryConcurrent(ctx context.Context, do func() error) error {
	for {
		err := do()
		if err == nil || !(errors.Is(err, kerr.ConcurrentTransactions) || kerr.IsRetriable(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// sharedMintAndLease mints the epoch of role and writes one lease record in
// one transaction, over the shared client.
func sharedMintAndLease(ctx context.Context, client *kgo.Client, role coordination.Role, member coordination.MemberID, tp coordination.TopicPartition, lease coordination.LeaseConfig, leader int32) error {
	txnID := role.String()
	var id int64
	var epoch int16
	err := retryConcurrent(ctx, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = int32(lease.Duration().Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, client)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		id, epoch = resp.ProducerID, resp.ProducerEpoch
		return nil
	})
	if err != nil {
		return fmt.Errorf("InitProducerId: %w", err)
	}
	token, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		return err
	}
	err = retryConcurrent(ctx, func() error {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, id, epoch
		topic := kmsg.NewAddPartitionsToTxnRequestTopic()
		topic.Topic, topic.Partitions = tp.Topic, []int32{int32(tp.Partition)}
		req.Topics = append(req.Topics, topic)
		resp, err := req.RequestWith(ctx, client)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("AddPartitionsToTxn: %w", err)
	}
	value := coordination.EncodeLease(lease.Grant(member, token, time.Now().UnixMilli()))
	produce := kmsg.NewPtrProduceRequest()
	produce.TransactionID = &txnID
	produce.Acks = -1
	produce.TimeoutMillis = 10_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = tp.Topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = int32(tp.Partition)
	pp.Records = transactionalBatch(id, epoch, 0, coordination.EncodeKey(coordination.LeaseKey(role)), value)
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	kresp, err := client.Broker(int(leader)).RetriableRequest(ctx, produce)
	if err != nil {
		return fmt.Errorf("Produce: %w", err)
	}
	for _, t := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("Produce: %w", err)
			}
		}
	}
	err = retryConcurrent(ctx, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, id, epoch, true
		resp, err := req.RequestWith(ctx, client)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
	if err != nil {
		return fmt.Errorf("EndTxn: %w", err)
	}
	return nil
}

// leaderOf asks the leader of a partition.
func leaderOf(ctx context.Context, client *kgo.Client, tp coordination.TopicPartition) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(tp.Topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return -1, err
	}
	for _, topic := range resp.Topics {
		for _, p := range topic.Partitions {
			if p.Partition == int32(tp.Partition) {
				return p.Leader, nil
			}
		}
	}
	return -1, fmt.Errorf("no leader for %s", tp)
}

// rolesShared is the child of the prototype: args.Roles roles, each minted
// and given one lease over the one shared client, then measured like
// rolesKafka. The state topic has one partition.
func rolesShared(args ChildArgs) (ChildResult, error) {
	start := time.Now()
	lease, err := leaseOf(args)
	if err != nil {
		return ChildResult{}, err
	}
	client, err := sharedTxnClient(args.Brokers)
	if err != nil {
		return ChildResult{}, err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tp := coordination.TopicPartition{Topic: args.Topic, Partition: 0}
	leader, err := leaderOf(ctx, client, tp)
	if err != nil {
		return ChildResult{}, err
	}
	member := mustMember("holder")
	errs := make([]error, args.Roles)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(64, args.Roles) {
		wg.Go(func() {
			for i := range work {
				role, err := coordination.NewRole(fmt.Sprintf("%s-%05d", args.Role, i))
				if err != nil {
					errs[i] = err
					continue
				}
				errs[i] = sharedMintAndLease(ctx, client, role, member, tp, lease, leader)
			}
		})
	}
	for i := range args.Roles {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return ChildResult{}, err
	}
	setup := time.Since(start)
	time.Sleep(args.Warm)
	result := ChildResult{Setup: setup.Seconds(), Heap: HeapInuse(), RSS: RSSBytes(), Goroutines: runtime.NumGoroutine()}
	result.Connections, err = TCPConnections(PortOf(args.Brokers[0]))
	return result, err
}

// SharedRoles runs the prototype for each count, and checks on the first
// role that a read_committed reader sees its lease.
func (k *Kafka) SharedRoles(ctx context.Context, counts []int, warm time.Duration) ([]ChildResult, error) {
	lease := coordination.DefaultLeaseConfig()
	topic, options, err := k.StateTopic(ctx, "krabka-bench-shared", lease)
	if err != nil {
		return nil, err
	}
	var results []ChildResult
	for _, n := range counts {
		prefix := "bench-shared-" + Suffix()
		r, err := Spawn(ctx, "roles-shared", ChildArgs{
			Brokers: k.Brokers, Topic: topic, Role: prefix, Roles: n,
			Lease: [3]time.Duration{lease.Duration(), lease.RenewInterval(), lease.ChallengeStagger()},
			Warm:  warm,
		})
		if err != nil {
			return nil, err
		}
		// The lease records landed, committed, and decode.
		t, err := k.Member(lease)
		if err != nil {
			return nil, err
		}
		role, _ := coordination.NewRole(fmt.Sprintf("%s-%05d", prefix, 0))
		state, err := coordination.DescribeRoleState(ctx, t, role, options...)
		t.Close()
		if err != nil {
			return nil, err
		}
		if state.Lease == nil {
			return nil, fmt.Errorf("prototype: role %s has no visible lease", role)
		}
		results = append(results, r)
	}
	return results, nil
}
