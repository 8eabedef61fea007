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
// A transport may also implement [GuardedWriter] and [PartitionFollower]
// (or [RoleFollower]). [KafkaTransport] implements all three, the
// in-memory transport of package coordinationtest the first two.
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

// checkGuardedRecords is the one check of guarded records, beside the
// record it checks: each record names a topic, a partition that Kafka can
// hold (0 to 2^31-1), and no state topic ([StateTopic] is one always, and
// stateTopic reports the others, such as the topic of the caller's own
// leases): a state topic holds only registrations, heartbeats and leases,
// and a guarded record there could forge one. It returns the error of the
// first record that fails, which names the record's index, and nil when
// every record passes. Keys, values and headers are the caller's to
// choose, as Kafka's are: a record too large for its topic fails at the
// broker, which the write reports, and nothing of it commits.
//
// The write path ([Leadership.Write]) runs it once per call, before
// anything is queued. An adapter may run it in its WriteGuarded to refuse
// the same records from a direct caller, with every state topic it knows;
// [KafkaTransport] does.
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

// GuardedWriter writes the caller's own records under the epoch of a role.
// It is the mechanism behind [Leadership.Write].
type GuardedWriter interface {
	// WriteGuarded writes the records in one transaction of the producer
	// that minted token, and commits it, so they become visible to a
	// read_committed reader together or not at all. It returns after the
	// commit, when the records are durable under the topic's acks=all
	// setting.
	//
	// The implementation returns an error that wraps [ErrFenced] when the
	// broker rejects the token, and then no record of the call is visible.
	// An error whose outcome is unknown (the records may have committed)
	// wraps [ErrOutcomeUnknown], or [ErrProducerLost] when the producer
	// cannot go on. Any other error means that nothing of the call
	// committed: [Leadership.Write] then writes again, alone, the
	// calls that shared the failed transaction.
	WriteGuarded(ctx context.Context, token FencingToken, records []GuardedRecord) error
}

// TombstoneWriter is a [LeaseWriter] that also writes several tombstones
// of one role's partition in one transaction under the role's epoch.
// [Leadership.Resign] uses it when the transport implements it: the lease
// tombstone and the member's registration tombstone (and its heartbeat
// tombstone, with heartbeats on) then commit together, so a standby that
// wakes on the commit folds the resignation whole, in one read, instead of
// a registration tombstone first and the lease tombstone one commit later.
// The records on the topic are the ones the separate writes leave: the
// same keys, each with a null value. Over a transport of only the four
// [Transport] interfaces, Resign writes the lease tombstone with
// [LeaseWriter.WriteLease] and the registration tombstone with
// [Registrar.Append]. [KafkaTransport] implements it.
type TombstoneWriter interface {
	// WriteTombstones writes a null value for each key, in the order given,
	// to the partition, in one transaction of the producer that minted
	// token, and returns after the commit: a read_committed reader sees all
	// of them or none. Every key belongs to the token's role.
	//
	// The errors are those of [LeaseWriter.WriteLease]: an error that wraps
	// [ErrFenced] when the broker rejects the token, and then no tombstone
	// of the call is visible; [ErrOutcomeUnknown] when the commit's outcome
	// is unknown; any other error means that nothing committed.
	WriteTombstones(ctx context.Context, partition TopicPartition, token FencingToken, keys ...[]byte) error
}

// PartitionFollower is a [StateReader] that reads a partition incrementally
// and wakes a waiting member when a record arrives. [ObserveAll] uses it
// when the transport implements it, and [AcquireLeadership], [TryAcquire],
// [Observe] and [DescribeRoleState] do when the transport implements no
// [RoleFollower]: a waiting member then folds only the new records, and a
// resignation's tombstone wakes the first standby at once instead of at
// the next poll. Its reads cover the whole partition, the records of every
// role, so a transport that serves them from memory holds the whole
// (compacted) partition.
type PartitionFollower interface {
	// ReadPartitionFrom returns the committed records of the partition at
	// offsets from `from` on, oldest first, and the offset to pass on the
	// next call. It reads to the last stable offset, as ReadPartition does,
	// except that a transport that follows the partition with a long poll
	// may serve the read from its view while the poll is current: a record
	// committed just before the call may then arrive just after it, and
	// wake WatchPartition. It may return records below `from` too, and
	// always does when log compaction or the transport's own memory no
	// longer covers `from`: a fold that keeps the record of the highest
	// offset for every key, as [RoleStateBuilder] does, takes them without
	// harm.
	ReadPartitionFrom(ctx context.Context, partition TopicPartition, from int64) (records []StateRecord, next int64, err error)

	// WatchPartition subscribes to the partition. The channel receives
	// after committed records past the last ReadPartitionFrom reached the
	// transport; it holds at most one pending value, so a record that lands
	// between a read and the wait is not missed. stop ends the subscription;
	// the caller calls it exactly once.
	WatchPartition(partition TopicPartition) (changed <-chan struct{}, stop func())
}

// RoleFollower is a [StateReader] that reads the records of chosen roles
// of a partition incrementally, and wakes a waiting member when a record
// arrives: a [PartitionFollower] scoped to roles, so that a transport that
// serves the reads from memory holds the records of the roles that its
// callers follow, not those of every role that shares their partition.
// [AcquireLeadership], [TryAcquire], [Observe] and [DescribeRoleState] use
// it when the transport implements it, and fold exactly the state that the
// whole partition folds to: a role's state depends on its own records
// only. [KafkaTransport] implements it.
type RoleFollower interface {
	// ReadRolesFrom returns the committed records of the partition whose
	// key names one of roles, at offsets from `from` on, oldest first, and
	// the offset to pass on the next call: what
	// [PartitionFollower.ReadPartitionFrom] returns, less the records of
	// other roles (and of keys that name no role). It reads to the last
	// stable offset, with the same lag when the transport serves it from
	// a view, and it may return records below `from` too. A read of roles
	// that no WatchRoles subscription of the transport holds may cost a
	// walk of the whole log.
	ReadRolesFrom(ctx context.Context, partition TopicPartition, roles []Role, from int64) (records []StateRecord, next int64, err error)

	// WatchRoles subscribes to the partition for roles, as
	// [PartitionFollower.WatchPartition] does, and makes the transport
	// keep the records of roles until stop: ReadRolesFrom of them then
	// costs no walk of the log. The channel may also receive for records of
	// other roles. stop ends the subscription; the caller calls it exactly
	// once.
	WatchRoles(partition TopicPartition, roles ...Role) (changed <-chan struct{}, stop func())
}

// StableOffsetReporter is implemented by a transport that knows, without a
// request, the last stable offset and the high watermark of a partition it
// follows. A high watermark above the last stable offset means that an open
// transaction hides newer records from a read_committed reader, so the view
// of the partition is incomplete. [AcquireLeadership] holds a challenge
// while that lasts, so that a holder of another role that stalls inside its
// lease transaction on the same partition does not make a healthy holder
// look expired. The hold ends once the last stable offset reaches the high
// watermark of the moment it began (every record hidden then is visible),
// or a lease duration plus Kafka's abort sweep after the last stable
// offset stopped moving; a member first in the roster of a role with no
// lease does not hold at all (every hidden record ranks behind its own
// registration). The hold only delays a challenge: safety rests on the
// epoch. [KafkaTransport] implements it.
type StableOffsetReporter interface {
	// StableOffsets returns the last stable offset and the high watermark of
	// the partition as the transport saw them last, and false when it has
	// not read the partition yet.
	StableOffsets(partition TopicPartition) (lastStable, highWatermark int64, ok bool)
}

// TopicIncarnationReporter is implemented by a [PartitionFollower] or
// [RoleFollower] that can tell when the log of a partition it follows was
// replaced: the topic was deleted and created again (Kafka gives it a new
// topic id), so offsets restart at 0 and every record of the old log is
// gone. TopicIncarnation counts such replacements since the transport began
// to follow the partition (0 before). [AcquireLeadership] compares it around
// each read: on a change its fold of the role starts over from offset 0 of
// the new log, it checks the state topic again (a count that no longer
// matches WithPartitions stops it with [ErrMisconfigured]), and it registers
// again. [Observe] folds the partition anew and yields its roles' states
// again. [KafkaTransport] implements it; it sends no request.
type TopicIncarnationReporter interface {
	TopicIncarnation(partition TopicPartition) uint64
}

// StateTopicChecker is implemented by a transport that can check the
// coordination topic before a member uses it. [AcquireLeadership] calls it
// with its own options before it registers, and returns at once an error
// that wraps [ErrMisconfigured], so that a member configured with another
// partition count than the topic's, or pointed at a missing or uncompacted
// topic, fails loudly instead of taking a role that its peers cannot see.
// Any other error of the check (a cluster that does not answer yet, a
// member without the permission to describe the topic's configuration) is
// logged, and the wait goes on. [KafkaTransport] implements it.
type StateTopicChecker interface {
	CheckStateTopic(ctx context.Context, options ...Option) error
}

// MintRecorder is implemented by a transport that remembers the tokens it
// minted. [AcquireLeadership] asks it about a lease that names its own
// member: a token that this transport minted belongs to an earlier
// leadership of this very process (one that ended on a lost producer, say),
// so the call takes the role back at once; any other token that the
// coordinator still holds may belong to a second live process with the same
// member id, so the call first watches the lease for one renew interval.
// [KafkaTransport] and the in-memory transport of package coordinationtest
// implement it.
type MintRecorder interface {
	// Minted reports whether this transport minted token with AcquireEpoch.
	Minted(token FencingToken) bool
}

// rivalMinter is what the rival-mint watch ([WithRivalMintWatch]) asks of
// a transport beyond [Coordinator], and [KafkaTransport] implements it: a
// mint attempt that gave up before the coordinator answered still gets its
// answer, and the next AcquireEpoch takes the pair it minted while the
// coordinator holds it; and a mint that waits for the coordinator can stop
// once a rival's mint landed.
type rivalMinter interface {
	// lateMint reports whether an abandoned mint attempt of role minted
	// token (minted), or is still waiting for its answer (pending): such a
	// token is no rival's (watchRival).
	lateMint(role Role, token FencingToken) (minted, pending bool)

	// acquireEpochUnless is AcquireEpoch, except that once another
	// producer minted after from was the coordinator's token, it sends no
	// InitProducerId again and returns an error that wraps [ErrFenced]: the
	// challenge lost to that rival, whose first lease is on its way.
	acquireEpochUnless(ctx context.Context, role Role, from FencingToken) (FencingToken, error)
}

// FenceRecorder is implemented by a transport that remembers the tokens of
// its own whose writes the cluster refused as fenced. [AcquireLeadership]
// and [TryAcquire] ask it about a lease that names their own member: a
// lease under a token that this process saw fenced names a deposed member,
// whose successor minted and has not written its lease yet. By the
// specification's restart rule the call would challenge at once, and that
// challenge would fence the successor, a failback that the no-failback
// rule forbids; so the call competes as a standby instead, at the rank of
// its new registration. This is an erratum of the specification (see the
// package doc, "Extensions and errata"): a transport of only the four
// [Transport] interfaces gets the specification's answer. [KafkaTransport]
// and the in-memory transport of package coordinationtest implement it.
type FenceRecorder interface {
	// Fenced reports whether this transport minted token and saw a write
	// under it refused as fenced.
	Fenced(token FencingToken) bool
}
