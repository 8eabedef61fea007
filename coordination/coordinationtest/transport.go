package coordinationtest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Transport is the client of one member process over a [Cluster]. It
// implements [coordination.Transport] and the whole
// [coordination.ExtendedTransport] (extended.go), and it carries the faults that a test
// injects into that member: [Transport.Cut], [Transport.FailNext],
// [Transport.LoseNextReply], [Transport.Block] and [Transport.StaleReads].
//
// The transport keeps the token of its own last mint of each role, as the
// transactional producer of a Kafka client does. A write under a token
// fails with an error that wraps [coordination.ErrFenced], and changes
// nothing, when the token is not the newest token of its role at the
// cluster, or when it is not the token that this transport minted last for
// that role: a member cannot write under the epoch of another.
//
// A call whose context has ended fails with an error that wraps the
// context's error, and changes nothing. A Transport is safe for concurrent
// use, and it starts no goroutine.
type Transport struct {
	cluster *Cluster
	member  string

	// Guarded by cluster.mu.
	minted  map[coordination.Role]coordination.FencingToken
	fenced  map[coordination.FencingToken]bool // own tokens whose writes the cluster refused
	cut     bool
	faults  map[Op][]fault
	gates   map[Op][]*gate
	calls   [opCount]int
	changed chan struct{}                                   // closed and replaced on every call
	staleAt map[coordination.TopicPartition]int64           // set by StaleReads: reads stop before these offsets
	late    map[coordination.Role]coordination.FencingToken // mints whose reply was lost (LateMint)
	follows map[coordination.TopicPartition]uint64          // partitions read or watched, with the topic's incarnation then
	// stateTopics are the topics of this transport's reads, appends and
	// lease writes: WriteGuarded refuses a record for one, as
	// KafkaTransport does, since a guarded record there could forge a
	// registration or a lease.
	stateTopics map[string]bool
}

var (
	_ coordination.Transport         = (*Transport)(nil)
	_ coordination.ExtendedTransport = (*Transport)(nil)
)

// Transport opens a new client of the cluster for the member process that
// the name stands for. Each call returns a new transport with no minted
// token and no fault, as a restarted process opens a new client, so two
// transports may carry one name. The name only labels the records the
// transport writes ([Entry.Writer]) and its errors.
func (c *Cluster) Transport(member string) *Transport {
	return &Transport{
		cluster: c,
		member:  member,
		minted:  make(map[coordination.Role]coordination.FencingToken),
		fenced:  make(map[coordination.FencingToken]bool),
		faults:  make(map[Op][]fault),
		gates:   make(map[Op][]*gate),
		changed: make(chan struct{}),
		late:    make(map[coordination.Role]coordination.FencingToken),
		follows: make(map[coordination.TopicPartition]uint64),

		stateTopics: make(map[string]bool),
	}
}

// Member returns the name that [Cluster.Transport] opened the transport
// with.
func (t *Transport) Member() string { return t.member }

// AcquireEpoch mints the next token of the role at the cluster, and binds
// this transport to it. The token fences every earlier token of the role,
// this transport's own included. It returns an error for the zero
// [coordination.Role].
func (t *Transport) AcquireEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, error) {
	lost, err := t.enter(ctx, OpAcquireEpoch)
	if err != nil {
		return coordination.NoEpoch, err
	}
	if role.IsZero() {
		return coordination.NoEpoch, t.errorf(OpAcquireEpoch, "the zero Role has no transactional id")
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	token := t.cluster.mintLocked(role)
	if lost != nil {
		t.late[role] = token // the mint took effect: LateMint knows it
		return coordination.NoEpoch, lost
	}
	t.minted[role] = token
	return token, nil
}

// Minted reports whether this transport's newest mint of the token's role
// is token ([coordination.ExtendedTransport]). It is safe for concurrent
// use.
func (t *Transport) Minted(token coordination.FencingToken) bool {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	for _, minted := range t.minted {
		if minted == token {
			return true
		}
	}
	return false
}

// Fenced reports whether this transport minted token and the cluster
// refused a write under it because a newer token of its role stands
// ([coordination.ExtendedTransport]). It is safe for concurrent use.
func (t *Transport) Fenced(token coordination.FencingToken) bool {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	return t.fenced[token]
}

// DescribeEpoch reports the token that the cluster holds for the role now,
// and false with [coordination.NoEpoch] for a role that no member has
// minted.
func (t *Transport) DescribeEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, bool, error) {
	lost, err := t.enter(ctx, OpDescribeEpoch)
	if err != nil {
		return coordination.NoEpoch, false, err
	}
	if lost != nil {
		return coordination.NoEpoch, false, lost
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	token, ok := t.cluster.producers[role]
	if !ok {
		return coordination.NoEpoch, false, nil
	}
	return token, true, nil
}

// ReadPartition returns copies of every record of the partition, in offset
// order. A partition that nothing wrote returns no record and no error. See
// [Transport.StaleReads] for a read behind the log.
func (t *Transport) ReadPartition(ctx context.Context, partition coordination.TopicPartition) ([]coordination.StateRecord, error) {
	lost, err := t.enter(ctx, OpReadPartition)
	if err != nil {
		return nil, err
	}
	if lost != nil {
		return nil, lost
	}
	if err := checkPartition(partition); err != nil {
		return nil, t.errorf(OpReadPartition, "%w", err)
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.stateTopics[partition.Topic] = true // WriteGuarded refuses it
	return t.cluster.readLocked(partition, 0, t.readEndLocked(partition)), nil
}

// ReadPartitionFrom returns copies of the records of the partition at
// offsets from `from` on, in offset order, and the end offset of the
// partition to read from next. It never returns a record below `from`. It
// returns an error for a negative `from` and for a `from` past the end
// offset, as Kafka answers OFFSET_OUT_OF_RANGE. Faults of [OpReadPartition]
// apply to it.
func (t *Transport) ReadPartitionFrom(ctx context.Context, partition coordination.TopicPartition, from int64) ([]coordination.StateRecord, int64, error) {
	lost, err := t.enter(ctx, OpReadPartition)
	if err != nil {
		return nil, from, err
	}
	if lost != nil {
		return nil, from, lost
	}
	if err := checkPartition(partition); err != nil {
		return nil, from, t.errorf(OpReadPartition, "%w", err)
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.stateTopics[partition.Topic] = true // WriteGuarded refuses it
	if last := t.cluster.endLocked(partition); from < 0 || from > last {
		return nil, from, t.errorf(OpReadPartition, "offset %d out of range [0, %d] of %s", from, last, partition)
	}
	end := t.readEndLocked(partition)
	if from > end {
		// A read behind the log after an earlier, fresher read: nothing new.
		return nil, from, nil
	}
	return t.cluster.readLocked(partition, from, end), end, nil
}

// WatchPartition subscribes to the partition. The channel holds at most one
// pending value, and every record that any transport appends to the
// partition puts one there if the channel is empty, so a record that lands
// between a read and the wait is not missed. A cut-off member still
// receives, and its next read fails. stop ends the subscription; it is safe
// to call more than once. [Cluster.Watchers] counts the subscriptions that
// are not stopped.
func (t *Transport) WatchPartition(partition coordination.TopicPartition) (<-chan struct{}, func()) {
	w := &watcher{ch: make(chan struct{}, 1)}
	c := t.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watchers[partition] == nil {
		c.watchers[partition] = make(map[*watcher]struct{})
	}
	c.watchers[partition][w] = struct{}{}
	t.followLocked(partition)
	return w.ch, sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.watchers[partition], w)
		if len(c.watchers[partition]) == 0 {
			delete(c.watchers, partition)
		}
	})
}

// Append appends a copy of one record to the partition, outside any
// transaction, and wakes the watchers of the partition. A nil value appends
// a tombstone. It returns an error for an empty topic name, a negative
// partition, and a key that decodes as a lease key: a lease goes through
// WriteLease, under the role's epoch, as on Kafka.
func (t *Transport) Append(ctx context.Context, partition coordination.TopicPartition, key, value []byte) error {
	lost, err := t.enter(ctx, OpAppend)
	if err != nil {
		return err
	}
	if err := checkPartition(partition); err != nil {
		return t.errorf(OpAppend, "%w", err)
	}
	if decoded, err := coordination.DecodeKey(key); err == nil && decoded.Kind == coordination.KindLease {
		return t.errorf(OpAppend, "the lease key of role %s: a lease is written with WriteLease, in a transaction under the role's epoch, never appended outside one", decoded.Role)
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.stateTopics[partition.Topic] = true // WriteGuarded refuses it
	t.cluster.appendLocked(partition, key, value, coordination.NoEpoch, t.member, nil)
	return lost
}

// WriteLease appends a copy of one record to the partition under the token,
// and wakes the watchers of the partition. A nil value appends a tombstone.
// It returns an error that wraps [coordination.ErrFenced], and appends
// nothing, when the token is not the newest token of its role or not the
// token this transport minted last for that role. It returns an error for
// an empty topic name, a negative partition, and a key that decodes as the
// key of another role than the token's, and appends nothing.
func (t *Transport) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	lost, err := t.enter(ctx, OpWriteLease)
	if err != nil {
		return err
	}
	if err := checkPartition(partition); err != nil {
		return t.errorf(OpWriteLease, "%w", err)
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.stateTopics[partition.Topic] = true // WriteGuarded refuses it
	if err := t.authorizeLocked(OpWriteLease, token); err != nil {
		return err
	}
	if decoded, err := coordination.DecodeKey(key); err == nil && decoded.Role != t.cluster.roles[token.ProducerID()] {
		return t.errorf(OpWriteLease, "the key of role %s under token %s of role %s: a token writes the records of its own role only",
			decoded.Role, token, t.cluster.roles[token.ProducerID()])
	}
	t.cluster.appendLocked(partition, key, value, token, t.member, nil)
	return lost
}

// WriteGuarded appends copies of the records under the token, all of them
// or none, and wakes the watchers of each partition it writes. Each record
// keeps the token in [Entry.Token] and its headers in [Entry.Headers]. It
// returns an error that wraps [coordination.ErrFenced], and appends
// nothing, when the token is not the newest token of its role or not the
// token this transport minted last for that role. It returns an error, and
// appends nothing, for a record with an
// empty topic name, with [coordination.StateTopic] or another topic that
// this transport read, appended to or wrote a lease to as its topic (a
// state topic), or with a negative partition. An empty batch checks the
// token and writes nothing.
func (t *Transport) WriteGuarded(ctx context.Context, token coordination.FencingToken, records []coordination.GuardedRecord) error {
	lost, err := t.enter(ctx, OpWriteGuarded)
	if err != nil {
		return err
	}
	for i, record := range records {
		partition := coordination.TopicPartition{Topic: record.Topic, Partition: record.Partition}
		if err := checkPartition(partition); err != nil {
			return t.errorf(OpWriteGuarded, "record %d: %w", i, err)
		}
		if record.Topic == coordination.StateTopic {
			return t.errorf(OpWriteGuarded, "record %d: a guarded record never goes to %s", i, coordination.StateTopic)
		}
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	for i, record := range records {
		if t.stateTopics[record.Topic] {
			return t.errorf(OpWriteGuarded, "record %d: a guarded record never goes to the state topic %s", i, record.Topic)
		}
	}
	if err := t.authorizeLocked(OpWriteGuarded, token); err != nil {
		return err
	}
	for _, record := range records {
		partition := coordination.TopicPartition{Topic: record.Topic, Partition: record.Partition}
		t.cluster.appendLocked(partition, record.Key, record.Value, token, t.member, record.Headers)
	}
	return lost
}

// authorizeLocked refuses a write under a token that is not the newest
// token of its role, or that this transport did not mint last for that
// role. The caller holds the lock of the cluster.
func (t *Transport) authorizeLocked(op Op, token coordination.FencingToken) error {
	role, ok := t.cluster.roles[token.ProducerID()]
	if !ok {
		return t.errorf(op, "token %s: no role has producer id %d: %w", token, token.ProducerID(), coordination.ErrFenced)
	}
	if current := t.cluster.producers[role]; token != current {
		if own, ok := t.minted[role]; ok && own == token {
			t.fenced[token] = true
		}
		return t.errorf(op, "token %s of role %s is not the current token %s: %w", token, role, current, coordination.ErrFenced)
	}
	if own, ok := t.minted[role]; !ok || own != token {
		return t.errorf(op, "token %s of role %s was not minted by this transport: %w", token, role, coordination.ErrFenced)
	}
	return nil
}

// checkPartition rejects a partition that Kafka has no name for.
func checkPartition(partition coordination.TopicPartition) error {
	switch {
	case partition.Topic == "":
		return errors.New("empty topic name")
	case partition.Partition < 0:
		return fmt.Errorf("negative partition %d of topic %s", partition.Partition, partition.Topic)
	}
	return nil
}
