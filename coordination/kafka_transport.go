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

// KafkaTransport implements [Transport] and [ExtendedTransport] with
// franz-go.
//
// A transport stands for one member process. It owns three franz-go clients
// whatever the number of roles it holds (a plain producer for
// [KafkaTransport.Append] and the admin requests, one transactional client
// that every role shares, one read_committed reader), so N roles cost the
// connections of three clients to each broker. The token that
// [KafkaTransport.AcquireEpoch] returns stays the pair of every lease record
// of the leadership, on Kafka 3 and 4 alike.
//
// Broker codes 47, 90 and 49 from a request of a transaction end the epoch, and
// every later write under the token returns an error that wraps [ErrFenced];
// a transaction that only a new InitProducerId repairs ends it with
// [ErrProducerLost]; 53 on the transactional id with [ErrNotAuthorized]. A
// transient error aborts the transaction and keeps the token.
//
// A KafkaTransport is safe for concurrent use by the leaderships of several
// roles. The writes of one epoch run one at a time. Close releases
// everything. The clients, the fences, and why an open transaction hides
// the other roles' records: see the package doc's sections "The Kafka
// transport", "Fences over Kafka", "Open transactions hide records" and
// "Kafka 4 and the token that must not move".
type KafkaTransport struct {
	lease LeaseConfig
	wire  *kafkawire.Wire

	mu          sync.Mutex
	stateTopics map[string]bool // topics of Append, WriteLease and the reads
}

var (
	_ Transport         = (*KafkaTransport)(nil)
	_ ExtendedTransport = (*KafkaTransport)(nil)
)

// NewKafkaTransport connects a coordination transport to brokers, a list of
// host:port seed addresses of one cluster. The lease duration becomes the
// transaction timeout of every role, so it must not exceed the broker's
// transaction.max.timeout.ms (15 minutes by default).
//
// The lease policy is the default of the campaigns over this transport
// ([KafkaTransport.LeaseConfig]), so the transaction timeout and the lease
// agree; a campaign whose options give another lease duration fails with
// [ErrMisconfigured], because a transaction timeout longer than the lease
// lets a stalled holder hide its partition longer than a lease.
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

// LeaseConfig returns the lease policy the transport was built with, for
// [ExtendedTransport]: its duration is the transaction timeout of every
// role, and the policy is the default of the campaigns over the transport.
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
