package coordinationtest

import (
	"bytes"
	"math"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// FirstProducerID is the producer id that a new [Cluster] allocates first.
// Each later allocation takes the next id, as the block allocator of a
// Kafka cluster hands out ids that only grow.
const FirstProducerID = 1000

// Cluster is an in-memory Kafka cluster: the partitions of every topic, and
// the transaction coordinator of every role. Each member process reaches it
// through a [Transport] of its own, which [Cluster.Transport] opens.
//
// The transaction coordinator mints tokens the way InitProducerId does.
// The first mint of a role allocates a fresh producer id with epoch 0, and
// each later mint of that role keeps the producer id and bumps the epoch.
// The mint after epoch [math.MaxInt16] allocates a fresh producer id with
// epoch 0 again, which is Kafka's answer to an exhausted epoch. A write under
// any token but the newest of its role fails with an error that wraps
// [coordination.ErrFenced].
//
// The methods of Cluster are the view of an operator who sees the whole
// cluster at once: they take no context, inject no fault, and count no call.
// A Cluster is safe for concurrent use.
type Cluster struct {
	mu        sync.Mutex
	logs      map[coordination.TopicPartition]*partitionLog
	producers map[coordination.Role]coordination.FencingToken // the newest token of each role
	roles     map[int64]coordination.Role                     // the role of each producer id
	nextID    int64
	watchers  map[coordination.TopicPartition]map[*watcher]struct{}
	clock     coordination.Clock // stamps appended records; nil stamps none

	// The state behind the extensions of the transports (extended.go).
	lease        coordination.LeaseConfig              // SetLeaseConfig; zero: none
	topics       map[string]int                        // SetTopicPartitions: the partition count of a topic
	incarnations map[string]uint64                     // RecreateTopic: the times a topic was created again
	openAt       map[coordination.TopicPartition]int64 // OpenTransaction: the offset of an open transaction's first record
}

// SetClock makes the cluster stamp every record it appends with the
// instant that clock reads, as a Kafka producer stamps CreateTime: the
// [coordination.StateRecord.Timestamp] of a read, and so the
// [coordination.RoleState.LeaseClearedAt] of a resigned role. Pass the
// clock that the members use. A cluster without a clock stamps zero
// ("unknown"), and the members then anchor a role without a lease on their
// own registrations. It is safe for concurrent use.
func (c *Cluster) SetClock(clock coordination.Clock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock = clock
}

// NewCluster builds an empty cluster: no record in any partition, and no
// role minted. Its first producer id is [FirstProducerID].
func NewCluster() *Cluster {
	return &Cluster{
		logs:      make(map[coordination.TopicPartition]*partitionLog),
		producers: make(map[coordination.Role]coordination.FencingToken),
		roles:     make(map[int64]coordination.Role),
		nextID:    FirstProducerID,
		watchers:  make(map[coordination.TopicPartition]map[*watcher]struct{}),

		topics:       make(map[string]int),
		incarnations: make(map[string]uint64),
		openAt:       make(map[coordination.TopicPartition]int64),
	}
}

// Entry is one record in the log of a partition, with what the cluster
// knows about its writer.
type Entry struct {
	// Offset is the offset of the record in its partition, from 0.
	Offset int64

	// Key is the record key, and nil for none.
	Key []byte

	// Value is the record value. A nil or empty value is a tombstone.
	Value []byte

	// Token is the token that the record was written under:
	// [coordination.NoEpoch] for an append outside a transaction, and the
	// token of the writer for a lease record or a guarded record.
	Token coordination.FencingToken

	// Writer is the member name of the [Transport] that wrote the record.
	Writer string

	// Timestamp is the instant the cluster appended the record, in
	// milliseconds since the Unix epoch, by the clock of [Cluster.SetClock];
	// zero without one.
	Timestamp int64

	// Headers are the headers of a guarded record
	// ([coordination.GuardedRecord.Headers]), in order; nil for none.
	Headers []coordination.RecordHeader
}

// partitionLog is the log of one partition. next is the offset that the
// next record takes; compaction removes records and keeps next.
type partitionLog struct {
	entries []Entry
	next    int64
}

// watcher is one subscription of [Transport.WatchPartition].
type watcher struct {
	ch chan struct{}
}

// Token returns the token that the transaction coordinator holds for the
// role now, and [coordination.NoEpoch] for a role that no member has
// minted.
func (c *Cluster) Token(role coordination.Role) coordination.FencingToken {
	c.mu.Lock()
	defer c.mu.Unlock()
	if token, ok := c.producers[role]; ok {
		return token
	}
	return coordination.NoEpoch
}

// ExhaustEpoch moves the role to the last epoch of its producer id,
// [math.MaxInt16], as 32767 mints would. It allocates a producer id for a
// role that no member has minted. The token it returns fences every earlier
// token of the role, and no transport holds it, so the next
// [Transport.AcquireEpoch] of the role mints a fresh producer id with epoch
// 0. A test uses it to check that a comparison of tokens reads the producer
// id first.
func (c *Cluster) ExhaustEpoch(role coordination.Role) coordination.FencingToken {
	c.mu.Lock()
	defer c.mu.Unlock()
	current, ok := c.producers[role]
	id := current.ProducerID()
	if !ok {
		id = c.allocateLocked(role)
	}
	token := mustToken(id, math.MaxInt16)
	c.producers[role] = token
	return token
}

// mintLocked mints the next token of the role. The caller holds c.mu.
func (c *Cluster) mintLocked(role coordination.Role) coordination.FencingToken {
	current, ok := c.producers[role]
	var token coordination.FencingToken
	switch {
	case !ok, current.ProducerEpoch() == math.MaxInt16:
		token = mustToken(c.allocateLocked(role), 0)
	default:
		token = mustToken(current.ProducerID(), current.ProducerEpoch()+1)
	}
	c.producers[role] = token
	return token
}

// allocateLocked takes the next producer id for the role. The caller holds
// c.mu.
func (c *Cluster) allocateLocked(role coordination.Role) int64 {
	id := c.nextID
	c.nextID++
	c.roles[id] = role
	return id
}

// mustToken builds a token from values that this package picked itself.
func mustToken(id int64, epoch int16) coordination.FencingToken {
	token, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		panic(err) // unreachable: the ids and epochs here are never negative
	}
	return token
}

// Records returns the records of the partition in offset order, as a
// reader of the partition sees them. The records are copies, so the caller
// may keep and change them. A partition that nothing wrote returns none.
func (c *Cluster) Records(partition coordination.TopicPartition) []coordination.StateRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readLocked(partition, 0, c.endLocked(partition))
}

// Entries returns the records of the partition in offset order, each with
// the token it was written under and the member that wrote it. The entries
// are copies. A test reads the topic of its guarded records with it, to
// check which leadership wrote what.
func (c *Cluster) Entries(partition coordination.TopicPartition) []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	log := c.logs[partition]
	if log == nil {
		return nil
	}
	entries := make([]Entry, len(log.entries))
	for i, entry := range log.entries {
		entries[i] = entry
		entries[i].Key = bytes.Clone(entry.Key)
		entries[i].Value = bytes.Clone(entry.Value)
		entries[i].Headers = cloneHeaders(entry.Headers)
	}
	return entries
}

// EndOffset returns the offset that the next record of the partition takes,
// which is 0 for a partition that nothing wrote. Compaction does not change
// it.
func (c *Cluster) EndOffset(partition coordination.TopicPartition) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.endLocked(partition)
}

// endLocked is EndOffset for a caller that holds c.mu.
func (c *Cluster) endLocked(partition coordination.TopicPartition) int64 {
	if log := c.logs[partition]; log != nil {
		return log.next
	}
	return 0
}

// Compact cleans the log of the partition the way log compaction does: it
// keeps the record of the highest offset for every key, and it then drops
// that record too when it is a tombstone. A record without a key stays.
// Every record that stays keeps its offset, and the next record still takes
// the offset it would have taken.
//
// Kafka keeps a tombstone for delete.retention.ms and never cleans the
// active segment. Compact cleans everything at once, which is the harshest
// state a reader can meet.
func (c *Cluster) Compact(partition coordination.TopicPartition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	log := c.logs[partition]
	if log == nil {
		return
	}
	last := make(map[string]int64)
	for _, entry := range log.entries {
		if entry.Key != nil {
			last[string(entry.Key)] = entry.Offset
		}
	}
	kept := log.entries[:0]
	for _, entry := range log.entries {
		if entry.Key != nil && (last[string(entry.Key)] != entry.Offset || len(entry.Value) == 0) {
			continue
		}
		kept = append(kept, entry)
	}
	clear(log.entries[len(kept):])
	log.entries = kept
}

// Watchers returns the number of subscriptions of
// [Transport.WatchPartition] to the partition that are not stopped yet. A
// test checks with it that the code under test stops every subscription it
// takes.
func (c *Cluster) Watchers(partition coordination.TopicPartition) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.watchers[partition])
}

// appendLocked appends copies of the records to their partitions, and wakes
// the watchers of each partition. The caller holds c.mu.
func (c *Cluster) appendLocked(partition coordination.TopicPartition, key, value []byte, token coordination.FencingToken, writer string, headers []coordination.RecordHeader) {
	log := c.logs[partition]
	if log == nil {
		log = &partitionLog{}
		c.logs[partition] = log
	}
	var timestamp int64
	if c.clock != nil {
		timestamp = c.clock.NowMillis()
	}
	log.entries = append(log.entries, Entry{
		Offset:    log.next,
		Key:       bytes.Clone(key),
		Value:     bytes.Clone(value),
		Token:     token,
		Writer:    writer,
		Timestamp: timestamp,
		Headers:   cloneHeaders(headers),
	})
	log.next++
	for w := range c.watchers[partition] {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// readLocked returns copies of the records of the partition at offsets
// from `from` on and below end. The caller holds c.mu.
func (c *Cluster) readLocked(partition coordination.TopicPartition, from, end int64) []coordination.StateRecord {
	log := c.logs[partition]
	if log == nil {
		return nil
	}
	var records []coordination.StateRecord
	for _, entry := range log.entries {
		if entry.Offset < from || entry.Offset >= end {
			continue
		}
		records = append(records, coordination.StateRecord{
			Offset:    entry.Offset,
			Key:       bytes.Clone(entry.Key),
			Value:     bytes.Clone(entry.Value),
			Timestamp: entry.Timestamp,
		})
	}
	return records
}

// cloneHeaders copies headers, so that neither the writer nor a reader
// shares memory with the log.
func cloneHeaders(headers []coordination.RecordHeader) []coordination.RecordHeader {
	if headers == nil {
		return nil
	}
	out := make([]coordination.RecordHeader, len(headers))
	for i, h := range headers {
		out[i] = coordination.RecordHeader{Key: h.Key, Value: bytes.Clone(h.Value)}
	}
	return out
}
