package coordination

import (
	"context"
	"errors"
	"fmt"
)

// This file holds the reads of KafkaTransport: each converts its partition
// and hands the read to kafkawire's Reader, which follows every partition
// that a read or a watch asked for, with one long-polling fetch loop per
// leader broker, and keeps a compacted view of each: of the records of the
// roles that its callers follow there (WatchRoles, ReadRolesFrom, keyed by
// keyRole), or of the whole partition once a caller of ReadPartitionFrom
// needs it.

// ReadPartition returns every committed record of the partition, oldest
// first, tombstones included: it walks the log with read_committed
// isolation from the log start offset to the last stable offset that the
// partition had when the call began (one ListOffsets request), so a record
// whose commit marker the broker wrote before the call is in the answer,
// and an aborted write and an open transaction's records are not. Kafka
// answers EndTxn before it writes the markers, so a read at once after a
// commit may end just before it; a caller that needs its own write reads
// again. Every record that the log still
// holds is in the answer, a record that a newer record of its key
// superseded too, until log compaction removes it; every record keeps its
// offset. It costs one Fetch per megabyte of the partition.
//
// The transport also follows the partition from the first call on, until
// Close, with one long-polling fetch loop per leader broker, and keeps a
// compacted view of the records that its incremental readers need there:
// see [KafkaTransport.ReadRolesFrom] and [KafkaTransport.ReadPartitionFrom].
// ReadPartition itself adds nothing to that view.
//
// It returns an error for a topic or a partition that does not exist, for a
// missing READ ACL, and when ctx ends before the walk reaches the offset. It
// is safe for concurrent use.
func (t *KafkaTransport) ReadPartition(ctx context.Context, partition TopicPartition) ([]StateRecord, error) {
	if err := t.useStateTopic(partition); err != nil {
		return nil, err
	}
	records, err := t.wire.Reader().ReadLog(ctx, partitionOf(partition))
	if err != nil {
		return nil, kafkaError(err)
	}
	return stateRecords(records), nil
}

// ReadPartitionFrom returns the committed records of the partition at
// offsets from `from` on, oldest first, and the offset to pass on the next
// call. It returns the transport's compacted view, so of the records from
// `from` on only the newest of each key. A fold that keeps the record of
// the highest offset for every key, as [RoleStateBuilder] does, reaches the
// same state as from the whole log.
//
// The view holds the whole partition from the first call on, for the life
// of the transport (about 200 bytes of heap a record); a member that waits
// for a role reads it with [KafkaTransport.ReadRolesFrom] instead. A call
// costs no request while the long poll of the partition is current, and
// one ListOffsets request otherwise; the view lags a commit by the transit
// of one Fetch response while the leader answers.
//
// A `from` past the end of the partition, which a truncated log or a view
// that started again from the log start leaves behind, returns the whole
// view. It returns an error for a negative `from`, and the errors of
// ReadPartition. It is safe for concurrent use. The view, its cost and its
// lag: see the package doc's section "Reading the state topic over Kafka".
func (t *KafkaTransport) ReadPartitionFrom(ctx context.Context, partition TopicPartition, from int64) ([]StateRecord, int64, error) {
	if err := t.useStateTopic(partition); err != nil {
		return nil, from, err
	}
	if from < 0 {
		return nil, from, fmt.Errorf("coordination: read %s from the negative offset %d", partition, from)
	}
	records, next, err := t.wire.Reader().ReadFrom(ctx, partitionOf(partition), from)
	if err != nil {
		return nil, from, kafkaError(err)
	}
	return stateRecords(records), next, nil
}

// ReadRolesFrom returns the committed records of the partition whose key
// names one of roles, at offsets from `from` on, oldest first, only the
// newest of each key, and the offset to pass on the next call: what
// [KafkaTransport.ReadPartitionFrom] returns of those roles, with its
// costs, its lag and its errors. A record whose key names no role is in
// no answer; one that names a role but does not decode is in that role's.
// A fold of the answers reaches the state that ReadPartition's walk folds
// to, for each of roles. It returns an error for a negative `from` or a
// zero Role.
//
// The view keeps only the records of the roles that a
// [KafkaTransport.WatchRoles] subscription holds or a read asked for (for a
// lease duration after the read). The first read of a role that the view
// did not keep walks the log once from the log start (one Fetch per
// megabyte, under ctx); a read whose ctx ends during that walk returns an
// error that wraps [context.Canceled] or [context.DeadlineExceeded], and the
// next read walks again. It is safe for concurrent use. The roles a view
// keeps and the walk: see the package doc's section "Reading the state
// topic over Kafka".
func (t *KafkaTransport) ReadRolesFrom(ctx context.Context, partition TopicPartition, roles []Role, from int64) ([]StateRecord, int64, error) {
	if err := t.useStateTopic(partition); err != nil {
		return nil, from, err
	}
	if from < 0 {
		return nil, from, fmt.Errorf("coordination: read %s from the negative offset %d", partition, from)
	}
	groups, err := roleGroups(roles)
	if err != nil {
		return nil, from, fmt.Errorf("coordination: read %s: %w", partition, err)
	}
	records, next, err := t.wire.Reader().ReadGroupsFrom(ctx, partitionOf(partition), groups, from)
	if err != nil {
		return nil, from, kafkaError(err)
	}
	return stateRecords(records), next, nil
}

// WatchRoles is [KafkaTransport.WatchPartition] for roles: it subscribes
// to the partition, and makes the transport keep the records of roles in
// its view of the partition until stop (and for a lease duration after
// it), so that [KafkaTransport.ReadRolesFrom] of them costs no walk of the
// log. The channel receives when the view of the partition moves, for a
// record of any role. A zero Role is ignored. stop is safe to call more
// than once.
func (t *KafkaTransport) WatchRoles(partition TopicPartition, roles ...Role) (changed <-chan struct{}, stop func()) {
	changed, stopWatch := t.WatchPartition(partition)
	if t.useStateTopic(partition) != nil {
		return changed, stopWatch
	}
	var groups []string
	for _, role := range roles {
		if !role.IsZero() {
			groups = append(groups, role.String())
		}
	}
	release := t.wire.Reader().Keep(partitionOf(partition), groups)
	return changed, func() {
		stopWatch()
		release()
	}
}

// roleGroups returns the key groups of roles in the transport's views:
// their names, as keyRole reads them from a key.
func roleGroups(roles []Role) ([]string, error) {
	groups := make([]string, 0, len(roles))
	for _, role := range roles {
		if role.IsZero() {
			return nil, errors.New("the zero Role: build the role with NewRole")
		}
		groups = append(groups, role.String())
	}
	return groups, nil
}

// WatchPartition subscribes to the partition, and follows it from now on.
// The channel receives when the transport's view of the partition moves: a
// committed record arrived, the last stable offset or the high watermark
// moved, or a fetch failed. It holds at most one pending value, so nothing
// that happens between a read and the wait is missed. The fetch loop
// long-polls, so a record wakes the channel within a round trip of its
// commit. stop ends the subscription; it is safe to call more than once.
// It makes the transport keep no record by itself: what the view of the
// partition keeps is up to the reads (ReadPartitionFrom, ReadRolesFrom)
// and to WatchRoles.
//
// On a closed transport the channel receives once, and the next read
// reports the error.
func (t *KafkaTransport) WatchPartition(partition TopicPartition) (changed <-chan struct{}, stop func()) {
	if err := t.useStateTopic(partition); err != nil {
		ch := make(chan struct{}, 1)
		ch <- struct{}{} // the next read reports the error
		return ch, func() {}
	}
	return t.wire.Reader().Watch(partitionOf(partition))
}

// StableOffsets reports the last stable offset and the high watermark of a
// followed partition, as its latest fetch returned them; ok is false for a
// partition that no read or watch of this transport asked for yet, and
// before its first fetch. Neither value needs a request, and a change of
// either wakes the watchers.
//
// The leader answers a read_committed long poll when the last stable offset
// moves, and otherwise at the end of the poll's max wait (a quarter of the
// lease slack, at most 5 s), so a high watermark that moved alone is at
// most one max wait old. A high watermark above the last stable offset
// means that an open transaction hides the records from the last stable
// offset on, of every role on the partition, from a read_committed reader.
// A member about to challenge an expired lease can use it to wait rather
// than act on a view that it knows is incomplete: the transaction ends at
// the latest when the coordinator aborts it, a transaction timeout (the
// lease duration of its writer) plus the abort sweep after it began.
func (t *KafkaTransport) StableOffsets(partition TopicPartition) (lastStable, highWatermark int64, ok bool) {
	if checkTopicPartition(partition) != nil {
		return -1, -1, false // no read or watch follows it
	}
	return t.wire.Reader().Offsets(partitionOf(partition))
}

// TopicIncarnation counts the times the reader of the transport saw the
// topic of a partition that it follows deleted and created again (its
// topic id changed; see [ExtendedTransport.TopicIncarnation]), and is 0 for a
// partition that no read or watch follows. Each change started the
// transport's view of the partition over from offset 0 of the new log. It
// sends no request.
func (t *KafkaTransport) TopicIncarnation(partition TopicPartition) uint64 {
	if checkTopicPartition(partition) != nil {
		return 0
	}
	return t.wire.Reader().Incarnation(partitionOf(partition))
}
