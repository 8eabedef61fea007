package coordination

import (
	"context"
	"fmt"
	"math"
)

// Coordinator mints and reports the leadership epoch of a role. An adapter
// implements it over the transaction coordinator of a cluster.
//
// The two calls carry different weight. AcquireEpoch takes the role, and
// DescribeEpoch only looks.
type Coordinator interface {
	// AcquireEpoch mints a new epoch for the role and fences the previous
	// holder. The implementation calls InitProducerId with
	// transactional.id = <role>, and it keeps the producer that the epoch
	// binds, because [LeaseWriter.WriteLease] writes through that producer.
	//
	// The transaction coordinator picks the epoch, so the quorum mints the
	// value and the value only grows. The implementation should pass the
	// lease duration as transaction_timeout_ms, so the coordinator aborts the
	// open transaction of a dead holder without a client.
	AcquireEpoch(ctx context.Context, role Role) (FencingToken, error)

	// DescribeEpoch reports the token that the transaction coordinator holds
	// for the role. It reports false for a role that no member has ever
	// taken. The implementation calls DescribeTransactions, which joins no
	// group and takes no epoch.
	DescribeEpoch(ctx context.Context, role Role) (FencingToken, bool, error)
}

// StateReader reads one partition of [StateTopic]. An adapter implements it
// with a plain assign, seek, and poll loop over the partition.
type StateReader interface {
	// ReadPartition returns every committed record of the partition, oldest
	// first. The read takes committed records only, so an aborted lease write
	// stays invisible. The reader walks from the first offset of the
	// partition to the last stable offset.
	ReadPartition(ctx context.Context, partition TopicPartition) ([]StateRecord, error)
}

// Registrar appends the registration record of one candidate.
//
// This call carries no authority. A candidate holds no epoch when it
// announces itself, and it must take no epoch to do so, so the append sits
// outside a transaction. The offset that the broker assigns is the join
// sequence that the succession rules rank on.
type Registrar interface {
	// Append appends one record to the partition. The producer behind it
	// pins the partition, and it applies no partitioner of its own. A nil
	// value appends a tombstone.
	Append(ctx context.Context, partition TopicPartition, key, value []byte) error
}

// LeaseWriter writes the lease record of a role in a transaction under the
// epoch of the role.
//
// A lease record authenticates itself. The broker fences any writer that
// does not hold the current epoch, so a lease record that reached the log is
// proof that its author held the epoch.
type LeaseWriter interface {
	// WriteLease writes one record under the token, inside a transaction of
	// the producer that minted the token. A nil value clears the lease. The
	// producer pins the partition, and it applies no partitioner of its own.
	//
	// The implementation returns an error that wraps [ErrFenced] when the
	// broker rejects the token. That rejection is how a deposed holder learns
	// that it lost the role.
	WriteLease(ctx context.Context, partition TopicPartition, token FencingToken, key, value []byte) error
}

// Transport is every cluster operation that this package performs, and it
// is nothing else. One adapter type satisfies all four interfaces.
//
// The library pins no Kafka client, so a caller writes the adapter over the
// client it already runs. The adapter needs two producers for one role. The
// transactional producer carries transactional.id = <role>, and it writes
// the lease records of that role. A second, plain producer appends the
// registration records, because Kafka puts every send of a transactional
// producer inside a transaction, and a candidate holds no epoch to open one
// with.
//
// One transport stands for one member: two members of one role need two
// transports, because the second mint fences the producer of the first. A
// transport is safe for concurrent use by the leaderships of several roles.
//
// A transport may implement the whole of [ExtendedTransport] too, as
// [KafkaTransport] and the in-memory transport of package coordinationtest
// do; a transport of these four interfaces only gets the specification's
// behaviour (see the package doc's section "The transport contract").
type Transport interface {
	Coordinator
	StateReader
	Registrar
	LeaseWriter
}

// GuardedRecord is one record of the caller's own, such as a command to a
// device, that a holder writes under the epoch of its role with
// [Leadership.Write].
type GuardedRecord struct {
	// Topic is the topic of the record. It is the caller's topic, never
	// [StateTopic].
	Topic string

	// Partition is the partition of the record. The writer pins it and
	// applies no partitioner, so the caller keeps its own order.
	Partition int

	// Key is the record key, and nil for none.
	Key []byte

	// Value is the record value.
	Value []byte

	// Headers are the record headers, such as a trace id or a content
	// type, in order; nil for none. Over Kafka they are the headers of the
	// Kafka record, and the KafkaCommandReader of package
	// coordination/device yields them with the record. A key may repeat, as in Kafka.
	Headers []RecordHeader
}

// checkGuardedRecords is the one check of guarded records, which every
// path that writes them passes before anything is queued or sent: each
// record names a topic, a partition that Kafka can hold (0 to 2^31-1), and
// no state topic ([StateTopic] is one always, and stateTopic reports the
// others, such as the topic of the caller's own leases): a state topic
// holds only registrations, heartbeats and leases, and a guarded record
// there could forge one. It returns the error of the first record that
// fails, which names the record's index, and nil when every record passes.
// Keys, values and headers are the caller's to choose, as Kafka's are: a
// record too large for its topic fails at the broker, which the write
// reports, and nothing of it commits.
func checkGuardedRecords(records []GuardedRecord, stateTopic func(topic string) bool) error {
	for i, record := range records {
		switch {
		case record.Topic == "":
			return fmt.Errorf("record %d has no topic", i)
		case record.Partition < 0 || record.Partition > math.MaxInt32:
			return fmt.Errorf("record %d has the partition %d, outside 0 to 2^31-1", i, record.Partition)
		case record.Topic == StateTopic || stateTopic != nil && stateTopic(record.Topic):
			return fmt.Errorf("record %d is for the state topic %s, which holds only registrations, heartbeats and leases", i, record.Topic)
		}
	}
	return nil
}

// RecordHeader is one header of a [GuardedRecord]: a key and a value, as a
// Kafka record header carries them.
type RecordHeader struct {
	// Key is the header key.
	Key string

	// Value is the header value, and nil for none.
	Value []byte
}

// ExtendedTransport is the one extension of [Transport]: every capability
// that the package uses beyond the specification's four interfaces. The
// loops probe a transport for it once, when a campaign, a [TryAcquire], an
// observer or a [DescribeRoleState] starts; a transport that implements it
// only in part is a plain [Transport] to them. [KafkaTransport] and the
// in-memory transport of package coordinationtest implement it, and
// coordinationtest.TestTransport checks each method. What each method
// selects in the loops: see the package doc's section "The transport
// contract". Its methods are safe for concurrent use.
type ExtendedTransport interface {
	Transport

	// LeaseConfig returns the transport's lease policy: the default of the
	// campaigns over it, which an option may not contradict. Over Kafka its
	// duration is the transaction timeout of every role.
	LeaseConfig() LeaseConfig

	// CheckStateTopic checks the state topic that the options name (its
	// partition count, compaction) and returns an error that wraps
	// [ErrMisconfigured] when a member must not use it; any other error
	// means the check could not tell.
	CheckStateTopic(ctx context.Context, options ...Option) error

	// WriteGuarded writes the records in one transaction of the producer
	// that minted token and commits it: all visible to a read_committed
	// reader, or none. Errors: [ErrFenced] (nothing visible),
	// [ErrOutcomeUnknown] or [ErrProducerLost] (the records may have
	// committed); any other error means that nothing committed. It is the
	// mechanism of [Leadership.Write].
	WriteGuarded(ctx context.Context, token FencingToken, records []GuardedRecord) error

	// WriteTombstones writes a null value for each key (all of the token's
	// role), in order, to the partition in one transaction of the producer
	// that minted token; a reader sees all of them or none. Errors are
	// WriteLease's. [Leadership.Resign] writes its tombstones with it.
	WriteTombstones(ctx context.Context, partition TopicPartition, token FencingToken, keys ...[]byte) error

	// ReadPartitionFrom returns the committed records of the partition at
	// offsets from `from` on, oldest first, up to the last stable offset,
	// and the offset to pass next. It may return records below `from`
	// (a fold keeps the newest record of each key).
	ReadPartitionFrom(ctx context.Context, partition TopicPartition, from int64) (records []StateRecord, next int64, err error)

	// WatchPartition subscribes to the partition: the channel (at most one
	// pending value) receives after committed records past the last read
	// reached the transport. The caller calls stop exactly once.
	WatchPartition(partition TopicPartition) (changed <-chan struct{}, stop func())

	// ReadRolesFrom is ReadPartitionFrom less the records of keys that name
	// none of roles.
	ReadRolesFrom(ctx context.Context, partition TopicPartition, roles []Role, from int64) (records []StateRecord, next int64, err error)

	// WatchRoles is WatchPartition for the records of roles (it may also
	// wake for others), and keeps their records until stop.
	WatchRoles(partition TopicPartition, roles ...Role) (changed <-chan struct{}, stop func())

	// StableOffsets returns the last stable offset and the high watermark
	// of the partition as the transport saw them last, without a request,
	// and false before its first read of the partition. A high watermark
	// above the last stable offset means an open transaction hides records.
	StableOffsets(partition TopicPartition) (lastStable, highWatermark int64, ok bool)

	// TopicIncarnation counts the times the partition's topic was deleted
	// and created again (offsets restart at 0) since the transport began
	// to follow it; 0 before. It sends no request.
	TopicIncarnation(partition TopicPartition) uint64

	// Minted reports whether this transport minted token with AcquireEpoch.
	Minted(token FencingToken) bool

	// Fenced reports whether this transport minted token and saw a write
	// under it refused as fenced.
	Fenced(token FencingToken) bool

	// LateMint reports whether a mint attempt of role that gave up before
	// its answer minted token after all (minted), or still waits for its
	// answer (pending): such a token is no rival's.
	LateMint(role Role, token FencingToken) (minted, pending bool)

	// AcquireEpochUnless is AcquireEpoch, except that a mint request sent
	// again after the coordinator made the first wait (a retry, over Kafka
	// CONCURRENT_TRANSACTIONS) is not sent once another producer minted over
	// from (the coordinator's token when the caller looked): it returns an
	// error that wraps [ErrFenced] and mints nothing. The first request is
	// always sent, so an adapter that mints with one request and never
	// retries implements it as AcquireEpoch.
	AcquireEpochUnless(ctx context.Context, role Role, from FencingToken) (FencingToken, error)
}

// extensionsOf is the one probe of a transport (or a reader) for the
// extension contract: the loops call it once when they start, and nothing
// else asks a transport for a method beyond the four interfaces.
func extensionsOf(transport any) (ExtendedTransport, bool) {
	extended, ok := transport.(ExtendedTransport)
	return extended, ok
}

// guardedWriter is the part of [ExtendedTransport] that the write path
// calls.
type guardedWriter interface {
	WriteGuarded(ctx context.Context, token FencingToken, records []GuardedRecord) error
}

// partitionFollower is the incremental read that the loops call: an
// [ExtendedTransport] itself, or its reads scoped to roles (follower.go).
type partitionFollower interface {
	ReadPartitionFrom(ctx context.Context, partition TopicPartition, from int64) (records []StateRecord, next int64, err error)
	WatchPartition(partition TopicPartition) (changed <-chan struct{}, stop func())
}
