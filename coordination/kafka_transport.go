package coordination

import (
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// This file holds KafkaTransport, the thin layer of this package over the
// Kafka machinery of internal/kafkawire: its type, its constructors and
// Close. The other kafka_*.go files hold one group of its methods each;
// kafka_errors.go renders kafkawire's errors, kafka_types.go converts the
// types.

// KafkaTransport implements [Transport], [GuardedWriter],
// [PartitionFollower], [RoleFollower] and [StableOffsetReporter] with
// franz-go.
//
// A transport stands for one member process, and it owns three franz-go
// clients, whatever the number of roles it holds:
//
//   - one plain producer for [KafkaTransport.Append]: idempotent, acks=all,
//     no linger, and a partitioner that keeps the partition the caller
//     pinned; it also sends the admin requests;
//   - one transactional client that every role shares. Each epoch that
//     [KafkaTransport.AcquireEpoch] mints is a producer id and epoch of
//     transactional.id = the role name, with transaction.timeout.ms = the
//     lease duration, and the lease writes and guarded writes of the role
//     are raw AddPartitionsToTxn, Produce and EndTxn requests under that
//     pair, one transaction at a time, with the sequence numbers of the
//     epoch's partitions that the transport keeps;
//   - one read_committed reader that follows, for the life of the
//     transport, every partition that a read or a watch asked for, and
//     keeps in memory the records of the roles that its callers follow
//     there (see [KafkaTransport.WatchRoles]).
//
// So a process that holds N roles costs the connections of three clients
// to each broker (at most two each: one for Produce or Fetch, one for the
// other requests), not three per role. franz-go's own transactional
// producer binds a client to one transactional id, which is why the
// transport does not use it.
//
// # The token stays the minted pair
//
// Kafka 4 with transaction.version=2 (KIP-890 part 2) bumps the producer
// epoch at every EndTxn of version 5 or later, so the token of a holder would
// change at every renewal. The transactional client of this transport
// therefore caps EndTxn at version 4 and Produce at version 11. The
// coordinator picks the behaviour from the request version, so a
// transaction of this transport keeps the epoch, and the token that
// AcquireEpoch returned is the pair that every lease record of the
// leadership carries and that [KafkaTransport.DescribeEpoch] reports. Every
// request of a transaction carries the token's own producer id and epoch,
// so the transport never writes under a pair it did not mint, and never
// adopts one: a pair that moved at the coordinator refuses the token's
// next request, and the write returns an error that wraps [ErrFenced].
//
// A port over a client that cannot cap request versions cannot keep the
// token fixed on such a cluster: every commit hands its producer a new
// epoch. It must adopt the pair that each of its own commits returns (the
// one case where adopting is right, because the coordinator bumped the
// epoch for this producer), carry it in the next lease record, and accept
// that a third party's DescribeLeadership sees the lease's token one commit
// behind; or the operator keeps the cluster at transaction.version=1.
//
// # Fences
//
// Broker codes 47 INVALID_PRODUCER_EPOCH, 90 PRODUCER_FENCED and 49
// INVALID_PRODUCER_ID_MAPPING from any request of a transaction end the
// epoch: the transport ends its producer and never sends InitProducerId
// for it again, because a new InitProducerId can mint a new epoch for a
// deposed member. Every later write under that token returns an error that
// wraps [ErrFenced] without a request. The one refusal of the token that
// is no fence, the coordinator's own abort of a transaction that outlived
// its timeout (which bumps the epoch), ends the epoch with an error that
// says so and wraps [ErrProducerLost]. A missing WRITE on the
// TransactionalId (53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED) ends the epoch
// with an error that wraps [ErrNotAuthorized]; a missing ACL on a topic
// (29 TOPIC_AUTHORIZATION_FAILED) fails the write only.
//
// A transaction that leaves the epoch in a state that only a new
// InitProducerId repairs ends the epoch too, but it is no fence, and the
// error wraps [ErrProducerLost] instead: a commit that failed with its
// outcome unknown, or a request of the epoch whose answer timed out and
// that the broker may still apply later (these wrap [ErrOutcomeUnknown]
// too: the records may be in the log), an
// abort that failed, a batch whose answer never came (the partition's next
// sequence number is then unknown), 45 OUT_OF_ORDER_SEQUENCE_NUMBER or 59
// UNKNOWN_PRODUCER_ID (after an abort, as the Java producer does), a
// closed transport. The transport then ends the open transaction itself,
// with an EndTxn(abort) at the token's epoch, so it does not hide the
// partition's newer records until the transaction timeout.
//
// A write that fails for a transient reason (a coordinator that moved, which
// franz-go finds again; CONCURRENT_TRANSACTIONS, which the transport waits
// out; NOT_ENOUGH_REPLICAS; a leader that moved; the end of its context
// before a batch went out) aborts its transaction, so the partition's last
// stable offset moves on, and keeps the token: the next write under it may
// succeed.
//
// # Open transactions hide records
//
// A read_committed reader stops at the last stable offset, the first offset
// of the oldest open transaction of the partition. Roles that share a
// partition therefore share its stalls: an open lease transaction of one
// role hides the newer records of every role on the partition until it
// commits or is aborted. The transport keeps its transactions short (one
// record for a lease, no linger), aborts a transaction that failed, and
// passes the lease duration as the transaction timeout, so the coordinator
// aborts the transaction of a holder that stalled or died within a lease
// duration plus one sweep of its abort timer, whose period is the broker
// setting transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s
// by default). Until then a standby of another role on the partition sees
// that role's lease age. [KafkaTransport.StableOffsets] tells a reader
// whether its view of a partition is incomplete, so that it can wait rather
// than challenge on it.
//
// A KafkaTransport is safe for concurrent use by the leaderships of several
// roles. The writes of one epoch run one at a time. Close releases
// everything.
type KafkaTransport struct {
	lease LeaseConfig
	wire  *kafkawire.Wire

	mu          sync.Mutex
	stateTopics map[string]bool // topics of Append, WriteLease and the reads

	checks stateTopicChecks // the campaigns' checks of the state topic (kafka_topic.go)
}

var (
	_ Transport            = (*KafkaTransport)(nil)
	_ GuardedWriter        = (*KafkaTransport)(nil)
	_ PartitionFollower    = (*KafkaTransport)(nil)
	_ RoleFollower         = (*KafkaTransport)(nil)
	_ StableOffsetReporter = (*KafkaTransport)(nil)
	_ MintRecorder         = (*KafkaTransport)(nil)
	_ rivalMinter          = (*KafkaTransport)(nil)
	_ FenceRecorder        = (*KafkaTransport)(nil)
)

// NewKafkaTransport connects a coordination transport to brokers, a list of
// host:port seed addresses of one cluster. The lease duration becomes the
// transaction timeout of every role, so it must not exceed the broker's
// transaction.max.timeout.ms (15 minutes by default).
//
// The lease policy is not the default of the calls over this transport:
// they take [DefaultLeaseConfig], the specification's default, unless an
// option says otherwise. Pass WithLeaseConfig(transport.LeaseConfig()) so
// that the transaction timeout and the lease agree. A call whose lease
// duration differs from the transport's is logged, because a transaction
// timeout longer than the lease lets a stalled holder hide its partition
// longer than a lease.
//
// The call opens no connection; the first request does. It returns an error
// for the zero LeaseConfig, for a lease duration above math.MaxInt32
// milliseconds (about 24.8 days: InitProducerId carries the transaction
// timeout as int32 milliseconds), and for an empty broker list. Use
// [NewKafkaTransportWithOptions] for TLS, SASL and other client settings.
func NewKafkaTransport(lease LeaseConfig, brokers ...string) (*KafkaTransport, error) {
	return NewKafkaTransportWithOptions(lease, nil, brokers...)
}

// NewKafkaTransportWithOptions is [NewKafkaTransport] with franz-go client
// options, such as kgo.DialTLSConfig, kgo.SASL, kgo.ClientID, kgo.WithLogger,
// kgo.WithHooks, kgo.RequestTimeoutOverhead or kgo.MaxVersions. Every client
// of the transport takes them.
//
// Pass connection settings only. The transport sets, before the options, a
// metadata minimum age of 500 ms (franz-go's default is 5 s), so that a
// client learns the new leaders soon after a broker fault, a request
// timeout overhead of the lease's renew interval (clamped to 1-10 s;
// franz-go's default is 10 s), so that a request to a hung broker gives up
// before the next renewal is due, and a retry backoff of 50 ms doubling to
// 500 ms (franz-go's: 250 ms doubling to 5 s); an option may override
// each. The transport sets, after the options,
// what its correctness rests on: the seed brokers, acks=all, no linger, a
// partitioner that keeps the caller's partition, and for the transactional
// clients the transactional id, the transaction timeout, and the version cap
// of EndTxn and Produce described on [KafkaTransport]. It returns an error
// for options that kgo rejects, and for options that disable idempotent
// writes or name a transactional id, because those break the transactions.
func NewKafkaTransportWithOptions(lease LeaseConfig, clientOptions []kgo.Opt, brokers ...string) (*KafkaTransport, error) {
	if lease == (LeaseConfig{}) {
		return nil, errors.New("coordination: NewKafkaTransport: zero LeaseConfig: build it with NewLeaseConfig or DefaultLeaseConfig")
	}
	if len(brokers) == 0 {
		return nil, errors.New("coordination: NewKafkaTransport: no brokers: pass at least one host:port")
	}
	for i, broker := range brokers {
		if broker == "" {
			return nil, fmt.Errorf("coordination: NewKafkaTransport: broker %d is empty", i)
		}
	}
	wire, err := kafkawire.New(kafkawire.Config{Brokers: brokers, Options: clientOptions,
		TxnTimeout: lease.Duration(), RenewInterval: lease.RenewInterval(), KeyGroup: keyRole})
	if err != nil {
		return nil, fmt.Errorf("coordination: NewKafkaTransport: %w", err)
	}
	return &KafkaTransport{lease: lease, wire: wire, stateTopics: make(map[string]bool)}, nil
}

// LeaseConfig returns the lease policy the transport was built with: its
// duration is the transaction timeout of every role. Pass it to
// [WithLeaseConfig] to run a call with it; the calls' default is
// [DefaultLeaseConfig].
func (t *KafkaTransport) LeaseConfig() LeaseConfig { return t.lease }

// useStateTopic checks a partition of the state topic and remembers its
// topic, so that WriteGuarded refuses it.
func (t *KafkaTransport) useStateTopic(partition TopicPartition) error {
	if err := checkTopicPartition(partition); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stateTopics[partition.Topic] = true
	return nil
}

// checkTopicPartition rejects a partition that Kafka has no name for.
func checkTopicPartition(partition TopicPartition) error {
	switch {
	case partition.Topic == "":
		return errors.New("coordination: empty topic name")
	case partition.Partition < 0 || partition.Partition > 1<<31-1:
		return fmt.Errorf("coordination: partition %d of topic %s is out of range", partition.Partition, partition.Topic)
	}
	return nil
}

// isClosed reports whether Close ran.
func (t *KafkaTransport) isClosed() bool { return t.wire.Closed() }

// Close closes every client of the transport and ends its reader: the
// transactional client, the plain producer and the reader's client. A
// transaction in flight fails at once; its write returns an error that
// wraps [ErrProducerLost]. Every later call returns an error, and every
// write under a token of this transport an error that wraps
// [ErrProducerLost]: the epoch's producer is gone, though no other member
// fenced it. Close is idempotent and safe for concurrent use.
//
// Close returns within 500 ms. franz-go's own Close of a
// client waits up to a second for requests in flight to a silent broker;
// such a client finishes closing in the background, on a goroutine of the
// transport, and sends nothing more.
//
// Close takes no epoch back: a resigned member's epoch stays the newest
// until another member mints one.
func (t *KafkaTransport) Close() { t.wire.Close() }
