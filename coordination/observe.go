package coordination

// The loop of an observation: Observe, ObserveAll, and the observer that
// reads the partitions of the roles it follows, waits for a wake-up or the
// next timeout, and yields the changes that the rules of observe_rules.go
// find; the changes themselves are in observe_change.go.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Observe follows roles without campaigning: it reads the partitions of
// the state topic that hold them, and yields each change of their holder,
// lease, token and roster, oldest first, from the same incremental fold as
// [AcquireLeadership] ([RoleStateBuilder]). It takes no epoch, joins no
// group and writes nothing. Over Kafka it needs READ on the state topic.
//
// It yields a [ChangeState] for each role, then one [ChangeSynced], then a
// change per record that changes the fold, a [ChangeExpired] by the
// observer's clock and, with heartbeats on, a [ChangeLapsed]. It reads the
// log, not the coordinator. The order of the changes, what a compacted
// read merges, and the options that matter: see the package doc's section
// "Observing roles".
//
// The iteration ends when ctx ends or the loop breaks; no goroutine
// outlives it. A read that fails yields err with a RoleChange whose only
// set field is Partition, the partition that failed, and the observer
// reads it again at the next wake-up or poll; an error that wraps
// [ErrNotAuthorized] or [ErrMisconfigured] ends the iteration after it is
// yielded, because no retry helps. An invalid option, an empty role list
// or the zero [Role] yields one error and ends it. The yield runs on the
// caller's goroutine, and a slow loop body delays the next read only.
func Observe(ctx context.Context, reader StateReader, roles []Role, options ...Option) iter.Seq2[RoleChange, error] {
	return func(yield func(RoleChange, error) bool) {
		if len(roles) == 0 {
			yield(RoleChange{}, errors.New("coordination: Observe: no role: name at least one, or call ObserveAll"))
			return
		}
		o, err := newObserver(reader, roles, options)
		if err != nil {
			yield(RoleChange{}, err)
			return
		}
		o.run(ctx, yield)
	}
}

// ObserveAll is [Observe] for every role of the state topic: the roles
// that the first read finds, and every role that a later record names. It
// reads every partition of the topic ([WithPartitions]).
func ObserveAll(ctx context.Context, reader StateReader, options ...Option) iter.Seq2[RoleChange, error] {
	return func(yield func(RoleChange, error) bool) {
		o, err := newObserver(reader, nil, options)
		if err != nil {
			yield(RoleChange{}, err)
			return
		}
		o.run(ctx, yield)
	}
}

// observer is the state of one Observe or ObserveAll iteration. It lives on
// the caller's goroutine, plus one goroutine per partition that forwards
// the wake-ups of the reader's follower.
type observer struct {
	reader     StateReader
	extended   ExtendedTransport // the reader's extensions (extensionsOf); nil for a plain StateReader
	follower   partitionFollower // nil for a poll-only reader
	s          *settings
	all        bool
	partitions []TopicPartition
	roles      map[Role]*observedRole
	next       map[TopicPartition]int64  // the offset of the next record that makes a change
	read       map[TopicPartition]bool   // partitions read once
	synced     bool                      // every partition was read once, and the states were yielded
	held       []RoleChange              // changes of partitions read before the others, until synced
	skipped    map[string]bool           // partition/offset of malformed records already logged
	logs       map[TopicPartition]uint64 // the log each partition's fold is of (ExtendedTransport.TopicIncarnation)
}

func newObserver(reader StateReader, roles []Role, options []Option) (*observer, error) {
	if reader == nil {
		return nil, errors.New("coordination: Observe: nil StateReader")
	}
	s, err := newSettings(options)
	if err != nil {
		return nil, err
	}
	o := &observer{reader: reader, s: s, all: roles == nil, roles: make(map[Role]*observedRole),
		next: make(map[TopicPartition]int64), read: make(map[TopicPartition]bool), skipped: make(map[string]bool),
		logs: make(map[TopicPartition]uint64)}
	o.extended, _ = extensionsOf(reader)
	if o.all {
		if o.extended != nil {
			o.follower = o.extended // whole partitions
		}
		for p := range s.partitions {
			o.partitions = append(o.partitions, TopicPartition{Topic: s.topic, Partition: p})
		}
		return o, nil
	}
	for _, role := range roles {
		if role.IsZero() {
			return nil, errors.New("coordination: Observe: the zero Role: build the role with NewRole")
		}
		partition, err := s.partition(role)
		if err != nil {
			return nil, fmt.Errorf("coordination: Observe: %w", err)
		}
		if o.roles[role] == nil {
			o.roles[role] = o.newRole(role, partition)
		}
		if !slices.Contains(o.partitions, partition) {
			o.partitions = append(o.partitions, partition)
		}
	}
	scope := make(map[TopicPartition][]Role)
	for role, r := range o.roles {
		scope[r.partition] = append(scope[r.partition], role)
	}
	o.follower = followerOf(o.extended, scope)
	return o, nil
}

func (o *observer) newRole(role Role, partition TopicPartition) *observedRole {
	return &observedRole{role: role, partition: partition, builder: NewRoleStateBuilder(role), lapsed: make(map[MemberID]int64)}
}

func (o *observer) run(ctx context.Context, yield func(RoleChange, error) bool) {
	clock := o.s.clock
	wake := make(chan struct{}, 1)
	var dirtyMu sync.Mutex
	dirty := make(map[TopicPartition]bool)
	if o.follower != nil {
		// Subscribe before the first read, so that no record between a read
		// and the wait is missed.
		forwardCtx, stopForwarding := context.WithCancel(ctx)
		var forwarders sync.WaitGroup
		defer func() { stopForwarding(); forwarders.Wait() }()
		for _, partition := range o.partitions {
			changed, stop := o.follower.WatchPartition(partition)
			forwarders.Go(func() {
				defer stop()
				for {
					select {
					case <-forwardCtx.Done():
						return
					case <-changed:
						dirtyMu.Lock()
						dirty[partition] = true
						dirtyMu.Unlock()
						select {
						case wake <- struct{}{}:
						default:
						}
					}
				}
			})
		}
	}
	pending := slices.Clone(o.partitions)
	for {
		var failed []TopicPartition
		for _, partition := range pending {
			if ctx.Err() != nil {
				return
			}
			changes, err := o.readPartition(ctx, partition)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !yield(RoleChange{Partition: partition}, err) || errors.Is(err, ErrNotAuthorized) || errors.Is(err, ErrMisconfigured) {
					return
				}
				failed = append(failed, partition)
				continue
			}
			if !o.synced {
				o.held = append(o.held, changes...)
				continue
			}
			for _, change := range changes {
				if !yield(change, nil) {
					return
				}
			}
		}
		if !o.synced && len(o.read) == len(o.partitions) {
			if !o.sync(yield) {
				return
			}
		}
		now := clock.NowMillis()
		if !o.synced {
			now = math.MinInt64 // no expiry before the states
		}
		for _, change := range o.timeouts(now) {
			if !yield(change, nil) {
				return
			}
		}
		extent := o.s.pollInterval
		if at, ok := o.nextTimeout(); ok && o.synced {
			extent = min(extent, time.Duration(at-clock.NowMillis())*time.Millisecond)
		}
		polled := false
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-clock.After(extent):
			polled = true
		}
		dirtyMu.Lock()
		if polled {
			// A poll reads every partition: the only read of a poll-only
			// reader, and for a follower the bound on a missed wake-up.
			pending = slices.Clone(o.partitions)
		} else {
			pending = failed
			for partition := range dirty {
				if !slices.Contains(pending, partition) {
					pending = append(pending, partition)
				}
			}
		}
		clear(dirty)
		dirtyMu.Unlock()
	}
}

// readPartition reads the records of the partition that are new to the
// observer, folds them, and returns the changes they make. The first read
// of a partition folds silently and returns the ChangeState of its roles.
//
// A partition whose topic was deleted and created again under the reader
// ([ExtendedTransport.TopicIncarnation]) is folded anew from the new log, as a first
// read: its roles' states are yielded again as ChangeState.
func (o *observer) readPartition(ctx context.Context, partition TopicPartition) ([]RoleChange, error) {
	var records []StateRecord
	if o.follower != nil {
		o.checkLog(partition)
		got, next, err := o.follower.ReadPartitionFrom(ctx, partition, o.next[partition])
		if err != nil {
			return nil, wrapf(err, nil, "observe %s", partition)
		}
		if o.checkLog(partition) {
			return o.readPartition(ctx, partition) // the records may be of either log
		}
		records = got
		defer func() { o.next[partition] = max(o.next[partition], next) }()
	} else {
		got, err := o.reader.ReadPartition(ctx, partition)
		if err != nil {
			return nil, wrapf(err, nil, "observe %s", partition)
		}
		records = got
	}
	now := o.s.clock.NowMillis()
	first := !o.read[partition]
	o.read[partition] = true
	var changes []RoleChange
	for _, record := range records {
		key, err := DecodeKey(record.Key)
		if err != nil {
			o.skip(partition, record, err)
			continue
		}
		r := o.roles[key.Role]
		if r == nil {
			if !o.all {
				continue
			}
			r = o.newRole(key.Role, partition)
			o.roles[key.Role] = r
			if !first {
				r.state = r.builder.Build()
			}
		}
		if err := r.builder.Apply(record); err != nil {
			o.skip(partition, record, err)
			continue
		}
		if first || record.Offset < o.next[partition] {
			continue // folded silently: the initial state, or a record read again
		}
		o.next[partition] = record.Offset + 1
		if change, ok := r.change(key, record, now); ok {
			changes = append(changes, change)
		}
	}
	if first {
		for _, r := range o.sortedRoles() {
			if r.partition != partition {
				continue
			}
			r.state = r.builder.Build()
			if r.state.Lease != nil {
				lease := *r.state.Lease
				r.lease = &lease
				if now >= lease.Deadline {
					r.expired = lease.Deadline // the state says so already
				}
			}
			r.lapses(now, o.s.lease, false) // the state shows them already
			changes = append(changes, RoleChange{Kind: ChangeState, Role: r.role, Partition: partition, Offset: -1, At: now, State: r.state})
		}
		for _, record := range records {
			o.next[partition] = max(o.next[partition], record.Offset+1)
		}
	}
	return changes, nil
}

// checkLog starts the fold of partition over when the reader reports that
// its topic was created again since the fold began, and reports whether it
// did.
func (o *observer) checkLog(partition TopicPartition) bool {
	if o.extended == nil {
		return false
	}
	log := o.extended.TopicIncarnation(partition)
	if !o.read[partition] {
		o.logs[partition] = log
		return false
	}
	if log == o.logs[partition] {
		return false
	}
	o.s.logger.Warn("coordination: the state topic was deleted and created again (its topic id changed): the observed roles of the partition are folded anew from the new log",
		slog.String("partition", partition.String()))
	o.logs[partition], o.next[partition] = log, 0
	delete(o.read, partition) // the next read is a first read
	for role, r := range o.roles {
		if r.partition == partition {
			o.roles[role] = o.newRole(role, partition)
		}
	}
	return true
}

// sync yields the held states in role-name order, ChangeSynced, and the
// changes held since, and reports whether the loop goes on.
func (o *observer) sync(yield func(RoleChange, error) bool) bool {
	o.synced = true
	held := o.held
	o.held = nil
	var states, changes []RoleChange
	for _, change := range held {
		if change.Kind == ChangeState {
			states = append(states, change)
		} else {
			changes = append(changes, change)
		}
	}
	slices.SortStableFunc(states, func(a, b RoleChange) int { return strings.Compare(a.Role.name, b.Role.name) })
	for _, change := range states {
		if !yield(change, nil) {
			return false
		}
	}
	if !yield(RoleChange{Kind: ChangeSynced, Offset: -1, At: o.s.clock.NowMillis()}, nil) {
		return false
	}
	for _, change := range changes {
		if !yield(change, nil) {
			return false
		}
	}
	return true
}

// timeouts reports, role by role in name order, each lease whose
// deadline passed by now and each standby whose rank lapsed by now, once.
func (o *observer) timeouts(now int64) []RoleChange {
	var changes []RoleChange
	for _, r := range o.sortedRoles() {
		if r.lease != nil && now >= r.lease.Deadline && r.expired != r.lease.Deadline {
			r.expired = r.lease.Deadline
			changes = append(changes, RoleChange{Kind: ChangeExpired, Role: r.role, Partition: r.partition, Offset: -1,
				Member: r.lease.Member, At: now, State: r.state})
		}
		changes = append(changes, r.lapses(now, o.s.lease, true)...)
	}
	return changes
}

// nextTimeout returns the earliest instant at which a lease not yet
// reported expired expires, or a standby not yet reported lapsed lapses.
func (o *observer) nextTimeout() (int64, bool) {
	var at int64
	found := false
	next := func(instant int64) {
		if !found || instant < at {
			at, found = instant, true
		}
	}
	for _, r := range o.roles {
		if r.lease != nil && r.expired != r.lease.Deadline {
			next(r.lease.Deadline)
		}
		holder, hasHolder := r.state.Holder()
		for _, entry := range r.state.Roster {
			if hasHolder && entry.Member == holder {
				continue
			}
			lapse, ok := entry.lapseAt(o.s.lease) // heartbeats on, and the member heartbeated
			if !ok {
				continue
			}
			if last, ok := r.lapsed[entry.Member]; ok && last == entry.LastSeen {
				continue
			}
			next(lapse)
		}
	}
	return at, found
}

// sortedRoles returns the observed roles in name order.
func (o *observer) sortedRoles() []*observedRole {
	roles := make([]*observedRole, 0, len(o.roles))
	for _, r := range o.roles {
		roles = append(roles, r)
	}
	slices.SortFunc(roles, func(a, b *observedRole) int { return strings.Compare(a.role.name, b.role.name) })
	return roles
}

// skip logs a record that does not decode, once for each offset.
func (o *observer) skip(partition TopicPartition, record StateRecord, err error) {
	id := fmt.Sprintf("%s@%d", partition, record.Offset)
	if o.skipped[id] {
		return
	}
	o.skipped[id] = true
	o.s.logger.Warn("coordination: observe: skipped a record of the state partition that does not decode",
		slog.String("partition", partition.String()), slog.Any("error", err))
}
