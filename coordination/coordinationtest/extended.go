package coordinationtest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// This file holds the methods of [Transport] that
// [coordination.ExtendedTransport] adds to the four interfaces of
// [coordination.Transport], and the operator's calls of [Cluster] that
// shape what they report: SetLeaseConfig, SetTopicPartitions,
// RecreateTopic and OpenTransaction.

// SetLeaseConfig sets the lease policy that every transport of the
// cluster reports ([Transport.LeaseConfig]), as a [coordination.KafkaTransport]
// reports the one it was built with. The zero LeaseConfig (the default)
// reports none. It is safe for concurrent use.
func (c *Cluster) SetLeaseConfig(config coordination.LeaseConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lease = config
}

// SetTopicPartitions records that topic exists with the given partition
// count, for [Transport.CheckStateTopic]. A topic the cluster was not told
// of passes the check, as an auto-created topic would. It is safe for
// concurrent use.
func (c *Cluster) SetTopicPartitions(topic string, partitions int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.topics[topic] = partitions
}

// RecreateTopic deletes topic and creates it again, as an operator's
// delete and create do on Kafka: every record of its partitions is gone,
// offsets restart at 0, and [Transport.TopicIncarnation] counts one more.
// partitions above zero sets the new partition count (SetTopicPartitions).
// It wakes the watchers of the topic's partitions. It is safe for
// concurrent use.
func (c *Cluster) RecreateTopic(topic string, partitions int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for partition := range c.logs {
		if partition.Topic == topic {
			delete(c.logs, partition)
			delete(c.openAt, partition)
		}
	}
	if partitions > 0 {
		c.topics[topic] = partitions
	}
	c.incarnations[topic]++
	for partition, watchers := range c.watchers {
		if partition.Topic != topic {
			continue
		}
		for w := range watchers {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

// OpenTransaction opens a transaction on the partition, as a producer of
// another role that stalls inside its lease transaction does on Kafka: the
// records appended from now on stay in the log but out of every read (the
// last stable offset stays where it was, and the high watermark moves on,
// as [Transport.StableOffsets] reports) until commit. A second call while
// one is open moves nothing. commit is safe to call more than once, and
// wakes the watchers of the partition. It is safe for concurrent use.
func (c *Cluster) OpenTransaction(partition coordination.TopicPartition) (commit func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.openAt[partition]; !ok {
		c.openAt[partition] = c.endLocked(partition)
	}
	return sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.openAt, partition)
		for w := range c.watchers[partition] {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	})
}

// followLocked records that this transport follows the partition, with
// the incarnation of its topic then. The caller holds the cluster's lock.
func (t *Transport) followLocked(partition coordination.TopicPartition) {
	if _, ok := t.follows[partition]; !ok {
		t.follows[partition] = t.cluster.incarnations[partition.Topic]
	}
}

// LeaseConfig returns the lease policy of [Cluster.SetLeaseConfig], and
// the zero LeaseConfig (none) without one.
func (t *Transport) LeaseConfig() coordination.LeaseConfig {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	return t.cluster.lease
}

// checkRoles are the roles whose partitions CheckStateTopic compares:
// with a partition count other than the topic's, one of them lands on
// another partition with a probability of 1 - 2^-64 or more.
var checkRoles = sync.OnceValue(func() []coordination.Role {
	roles := make([]coordination.Role, 64)
	for i := range roles {
		roles[i], _ = coordination.NewRole(fmt.Sprintf("coordinationtest-check-%d", i))
	}
	return roles
})

// CheckStateTopic checks the state topic that the options name against
// the count of [Cluster.SetTopicPartitions]: it returns a
// *[coordination.StateTopicError] (which wraps
// [coordination.ErrMisconfigured]) when the options place roles on other
// partitions than the topic's count does, and nil for a topic the cluster
// was not told of. An invalid option returns its error. The cluster has no
// cleanup policy: every topic counts as compacted. It fails on an ended
// context and on a cut-off member ([Transport.Cut]); it counts as no call
// of any [Op], and takes no injected fault.
func (t *Transport) CheckStateTopic(ctx context.Context, options ...coordination.Option) error {
	t.cluster.mu.Lock()
	err := t.refuseLocked(ctx, OpReadPartition)
	t.cluster.mu.Unlock()
	if err != nil {
		return fmt.Errorf("coordinationtest: CheckStateTopic of %s: %w", t.member, errors.Unwrap(err))
	}
	roles := checkRoles()
	first, err := coordination.RoleTopicPartition(roles[0], options...)
	if err != nil {
		return err
	}
	t.cluster.mu.Lock()
	partitions, ok := t.cluster.topics[first.Topic]
	t.cluster.mu.Unlock()
	if !ok {
		return nil
	}
	for _, role := range roles {
		placed, err := coordination.RoleTopicPartition(role, options...)
		if err != nil {
			return err
		}
		want, err := coordination.RolePartition(role, partitions)
		if err != nil {
			return err
		}
		if placed.Partition != want {
			return &coordination.StateTopicError{Topic: first.Topic, Partitions: partitions,
				Detail: fmt.Sprintf("the topic has %d partitions, but the options place role %s on partition %d, not %d (WithPartitions)", partitions, role, placed.Partition, want)}
		}
	}
	return nil
}

// WriteTombstones appends a tombstone for each key, in order, under the
// token, all of them or none, and wakes the watchers of the partition. It
// refuses what WriteLease refuses: a token that is not the newest of its
// role or not this transport's (an error that wraps
// [coordination.ErrFenced]), a key of another role than the token's, a
// partition that Kafka has no name for. Faults of [OpWriteLease] apply to
// it.
func (t *Transport) WriteTombstones(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, keys ...[]byte) error {
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
	role := t.cluster.roles[token.ProducerID()]
	for i, key := range keys {
		decoded, err := coordination.DecodeKey(key)
		if err != nil {
			return t.errorf(OpWriteLease, "tombstone %d: %w", i, err)
		}
		if decoded.Role != role {
			return t.errorf(OpWriteLease, "tombstone %d: the key of role %s under token %s of role %s: a token writes the records of its own role only", i, decoded.Role, token, role)
		}
	}
	for _, key := range keys {
		t.cluster.appendLocked(partition, key, nil, token, t.member, nil)
	}
	return lost
}

// ReadRolesFrom is [Transport.ReadPartitionFrom] less the records whose
// key names none of roles (a key that does not decode names none).
func (t *Transport) ReadRolesFrom(ctx context.Context, partition coordination.TopicPartition, roles []coordination.Role, from int64) ([]coordination.StateRecord, int64, error) {
	records, next, err := t.ReadPartitionFrom(ctx, partition, from)
	if err != nil {
		return nil, next, err
	}
	kept := records[:0]
	for _, record := range records {
		key, err := coordination.DecodeKey(record.Key)
		if err != nil {
			continue
		}
		for _, role := range roles {
			if key.Role == role {
				kept = append(kept, record)
				break
			}
		}
	}
	return kept, next, nil
}

// WatchRoles is [Transport.WatchPartition]: it wakes on every record of
// the partition, the roles' and the others'. The cluster keeps every
// record, so it costs nothing more.
func (t *Transport) WatchRoles(partition coordination.TopicPartition, _ ...coordination.Role) (<-chan struct{}, func()) {
	return t.WatchPartition(partition)
}

// StableOffsets returns the last stable offset (below a transaction that
// [Cluster.OpenTransaction] holds open, else the end of the log) and the
// high watermark (the end of the log) of the partition, and false before
// this transport read or watched it.
func (t *Transport) StableOffsets(partition coordination.TopicPartition) (lastStable, highWatermark int64, ok bool) {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	if _, followed := t.follows[partition]; !followed {
		return 0, 0, false
	}
	high := t.cluster.endLocked(partition)
	stable := high
	if open, isOpen := t.cluster.openAt[partition]; isOpen {
		stable = open
	}
	return stable, high, true
}

// TopicIncarnation returns the times [Cluster.RecreateTopic] recreated the
// partition's topic since this transport first read or watched the
// partition, and 0 before.
func (t *Transport) TopicIncarnation(partition coordination.TopicPartition) uint64 {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	base, ok := t.follows[partition]
	if !ok {
		return 0
	}
	return t.cluster.incarnations[partition.Topic] - base
}

// LateMint reports whether a mint of role by this transport whose reply
// was lost ([Transport.LoseNextReply] of [OpAcquireEpoch]) minted token;
// such a mint took effect at once, so pending is always false.
func (t *Transport) LateMint(role coordination.Role, token coordination.FencingToken) (minted, pending bool) {
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	late, ok := t.late[role]
	return ok && late == token, false
}

// AcquireEpochUnless is [Transport.AcquireEpoch], except for a call that
// waited at a gate of [Transport.Block] (a mint that waited for the
// coordinator): when the cluster's token of the role is no longer from
// then, and this transport did not mint it, the call mints nothing and
// returns an error that wraps [coordination.ErrFenced]: a rival minted
// over from. Faults of [OpAcquireEpoch] apply to it.
func (t *Transport) AcquireEpochUnless(ctx context.Context, role coordination.Role, from coordination.FencingToken) (coordination.FencingToken, error) {
	t.cluster.mu.Lock()
	waits := len(t.gates[OpAcquireEpoch]) > 0
	t.cluster.mu.Unlock()
	lost, err := t.enter(ctx, OpAcquireEpoch)
	if err != nil {
		return coordination.NoEpoch, err
	}
	if role.IsZero() {
		return coordination.NoEpoch, t.errorf(OpAcquireEpoch, "the zero Role has no transactional id")
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	if current, ok := t.cluster.producers[role]; waits && ok && current != from && current != t.minted[role] && current != t.late[role] {
		return coordination.NoEpoch, t.errorf(OpAcquireEpoch, "token %s of role %s was minted by another producer over %s: %w", current, role, from, coordination.ErrFenced)
	}
	token := t.cluster.mintLocked(role)
	if lost != nil {
		t.late[role] = token
		return coordination.NoEpoch, lost
	}
	t.minted[role] = token
	return token, nil
}
