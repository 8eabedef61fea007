package coordination

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// StateRecord is one record of [StateTopic] as it sits in the log. A
// [StateReader] returns these, and [BuildRoleState] folds them.
type StateRecord struct {
	// Offset is the offset of the record in its partition. The succession
	// rules rank candidates on the offset of a registration.
	Offset int64

	// Key is the encoded record key. [DecodeKey] reads it.
	Key []byte

	// Value is the encoded record value. An empty value is a tombstone. See
	// [IsTombstone].
	Value []byte

	// Timestamp is the record's timestamp, in milliseconds since the Unix
	// epoch, and zero when the reader does not know it. Over Kafka it is
	// the CreateTime that the writer's producer stamped, so it reads the
	// writer's clock. The fold reads it from a lease tombstone only: see
	// [RoleState.LeaseClearedAt].
	Timestamp int64
}

// RosterEntry is one member of the roster of a role.
type RosterEntry struct {
	// Member is the member that registered.
	Member MemberID

	// Offset is the offset of the registration record of the member in the
	// partition of the role. The offset is the join sequence of the member,
	// because log compaction keeps the offset of every record it retains.
	Offset int64

	// RegisteredAt is the time the member registered, in milliseconds since
	// the Unix epoch.
	RegisteredAt int64

	// LastSeen is the SeenAt of the member's newest [Heartbeat] written
	// after this registration (at a higher offset), in milliseconds since
	// the Unix epoch by the member's own clock, and zero when the member
	// wrote none: heartbeats are an extension that is off by default (see
	// [WithHeartbeatInterval]), and another port or an older release writes
	// none. A heartbeat never moves Offset, so it never moves the rank.
	LastSeen int64
}

// LapsedAt reports whether the rank of this entry has lapsed at nowMillis
// (ms since the Unix epoch) under config: config has heartbeats on
// ([LeaseConfig.WithHeartbeatInterval]), the member heartbeated (LastSeen
// is not zero), and its newest heartbeat is older than
// [LeaseConfig.RosterLapse]. An entry that never heartbeated never lapses,
// so with heartbeats off, and for every member that writes none, the
// ranks are the specification's. [RoleState.RankAt] skips a lapsed
// standby, and [Evaluate] tells a lapsed member to register again, at the
// tail.
func (e RosterEntry) LapsedAt(nowMillis int64, config LeaseConfig) bool {
	lapse, ok := e.lapseAt(config)
	return ok && nowMillis >= lapse
}

// lapseAt returns the first instant at which the entry counts as lapsed
// under config, and false for an entry that cannot lapse.
func (e RosterEntry) lapseAt(config LeaseConfig) (int64, bool) {
	lapse := config.RosterLapse().Milliseconds()
	if lapse <= 0 || e.LastSeen == 0 || e.LastSeen >= math.MaxInt64-lapse {
		return 0, false
	}
	return e.LastSeen + lapse + 1, true
}

// RoleState is the state that a reader folds out of the records of one
// role. It is a plain value: the fold that built it does not change it
// afterwards.
type RoleState struct {
	// Roster holds the candidates of the role in registration order, which is
	// offset order.
	Roster []RosterEntry

	// Lease is the lease of the role, and nil when no member holds it.
	Lease *Lease

	// LeaseClearedAt is the instant at which a tombstone cleared the lease
	// of the role, in milliseconds since the Unix epoch: the timestamp of
	// that tombstone, written by the clock of the member that resigned. It
	// is zero while a lease stands, when no tombstone cleared one, and when
	// the reader gave no timestamp or log compaction removed the tombstone.
	// [Evaluate] reads it only under the resignation anchor, an extension
	// that is off by default ([LeaseConfig.WithResignationAnchor]).
	LeaseClearedAt int64
}

// Entry returns the roster entry of a member, and it reports whether the
// member registered.
func (s RoleState) Entry(member MemberID) (RosterEntry, bool) {
	for _, entry := range s.Roster {
		if entry.Member == member {
			return entry, true
		}
	}
	return RosterEntry{}, false
}

// Holder returns the member that the lease names, and it reports whether the
// role has a lease.
//
// The holder of an expired lease is still the holder. Ask
// [LeaseTiming.LiveAt] whether the lease is live.
func (s RoleState) Holder() (MemberID, bool) {
	if s.Lease == nil {
		return MemberID{}, false
	}
	return s.Lease.Member, true
}

// RankOf returns the challenge rank of a member, and it reports whether the
// member registered.
//
// The rank is the index of the member in the roster after the removal of the
// current holder, so the first standby takes rank 0. The holder itself keeps
// rank 0. A holder reaches the rank test only after its own lease expired,
// and it still owns the newest epoch at that point, so it reclaims the role
// for less churn than a failover costs.
func (s RoleState) RankOf(member MemberID) (int, bool) {
	holder, hasHolder := s.Holder()
	rank := 0
	for _, entry := range s.Roster {
		if entry.Member == member {
			if hasHolder && holder == member {
				return 0, true
			}
			return rank, true
		}
		if hasHolder && entry.Member == holder {
			continue
		}
		rank++
	}
	return 0, false
}

// RankAt returns the challenge rank of a member at nowMillis (ms since the
// Unix epoch) under the roster lapse of config, and it reports whether the
// member registered and has not lapsed.
//
// It is [RoleState.RankOf] with every lapsed standby left out
// ([RosterEntry.LapsedAt]): with heartbeats on, a standby whose heartbeats
// stopped for [LeaseConfig.RosterLapse] (a SIGKILLed process, a host that
// is gone) no longer holds back the members behind it. With heartbeats off
// (the default) it is RankOf.
// The holder is never left out, because the lease is its sign of life. A
// lapse never reorders the live members, and a lapsed member regains no
// rank: [Evaluate] sends it to register again, at the tail.
func (s RoleState) RankAt(member MemberID, nowMillis int64, config LeaseConfig) (int, bool) {
	holder, hasHolder := s.Holder()
	rank := 0
	for _, entry := range s.Roster {
		isHolder := hasHolder && entry.Member == holder
		if entry.Member == member {
			if isHolder {
				return 0, true
			}
			if entry.LapsedAt(nowMillis, config) {
				return 0, false
			}
			return rank, true
		}
		if isHolder || entry.LapsedAt(nowMillis, config) {
			continue
		}
		rank++
	}
	return 0, false
}

// BuildRoleState folds the records of one partition into the state of one
// role. It reports the first record that does not decode, with its offset,
// and it still folds every record that does, so the state it returns next to
// the error is the state of the well-formed records.
//
// The caller reads the partition of the role in offset order. The fold gives
// the same answer for another order, because it keeps the record of the
// highest offset for every key.
func BuildRoleState(role Role, records []StateRecord) (RoleState, error) {
	builder := NewRoleStateBuilder(role)
	var first error
	for _, record := range records {
		if err := builder.Apply(record); err != nil && first == nil {
			first = err
		}
	}
	return builder.Build(), first
}

// RoleStateBuilder folds the records of one role into a [RoleState].
//
// The builder keeps the record of the highest offset for every key, which is
// what log compaction keeps. A later registration for a member replaces the
// earlier one and moves the member to the tail of the roster. A registration
// tombstone removes the member. A lease tombstone clears the lease. A
// heartbeat (an extension: see [WithHeartbeatInterval]) moves the member's
// [RosterEntry.LastSeen] and nothing else; a heartbeat at a lower offset
// than the member's registration belongs to an earlier incarnation and
// counts for nothing.
//
// The builder drops a record of another role, so a caller folds a partition
// that holds several roles and needs no filter of its own. Its cost is one
// decode a record and one map entry a member: a caller that applies only the
// records it has not applied yet folds a growing log in time proportional to
// the new records.
//
// A RoleStateBuilder is not safe for concurrent use.
type RoleStateBuilder struct {
	role          Role
	registrations map[MemberID]foldedRegistration
	heartbeats    map[MemberID]foldedHeartbeat
	lease         foldedLease
	leaseSeen     bool
}

// foldedRegistration is the kept record of one registration key. A
// tombstone is kept too, so that a lower offset applied later loses to it.
type foldedRegistration struct {
	offset       int64
	tombstone    bool
	registeredAt int64
}

// foldedHeartbeat is the kept record of one heartbeat key.
type foldedHeartbeat struct {
	offset    int64
	tombstone bool
	seenAt    int64
}

type foldedLease struct {
	offset    int64
	tombstone bool
	clearedAt int64 // a tombstone's timestamp, in ms since the Unix epoch
	lease     Lease
}

// NewRoleStateBuilder builds an empty fold for one role.
func NewRoleStateBuilder(role Role) *RoleStateBuilder {
	return &RoleStateBuilder{role: role, registrations: make(map[MemberID]foldedRegistration), heartbeats: make(map[MemberID]foldedHeartbeat)}
}

// Role returns the role that this fold collects.
func (b *RoleStateBuilder) Role() Role { return b.role }

// Apply applies one record of the coordination partition. It drops a record
// of another role, and it reports a record that does not decode: the error
// wraps a *[FormatError] and names the offset, and the fold stays as it was.
//
// The key carries the identity, because the key is the compaction key. The
// builder takes the member and the record kind from the key, and it takes
// neither from the value.
func (b *RoleStateBuilder) Apply(record StateRecord) error {
	key, err := DecodeKey(record.Key)
	if err != nil {
		return fmt.Errorf("coordination: record at offset %d: %w", record.Offset, err)
	}
	if key.Role != b.role {
		return nil
	}
	tombstone := IsTombstone(record.Value)
	// The value decodes before the offset test, so a malformed record is
	// reported whatever order the records come in.
	switch key.Kind {
	case KindRegistration:
		folded := foldedRegistration{offset: record.Offset, tombstone: tombstone}
		if !tombstone {
			registration, err := DecodeRegistration(record.Value)
			if err != nil {
				return fmt.Errorf("coordination: record at offset %d: %w", record.Offset, err)
			}
			folded.registeredAt = registration.RegisteredAt
		}
		if kept, ok := b.registrations[key.Member]; ok && kept.offset > record.Offset {
			return nil
		}
		b.registrations[key.Member] = folded
	case KindHeartbeat:
		folded := foldedHeartbeat{offset: record.Offset, tombstone: tombstone}
		if !tombstone {
			heartbeat, err := DecodeHeartbeat(record.Value)
			if err != nil {
				return fmt.Errorf("coordination: record at offset %d: %w", record.Offset, err)
			}
			folded.seenAt = heartbeat.SeenAt
		}
		if kept, ok := b.heartbeats[key.Member]; ok && kept.offset > record.Offset {
			return nil
		}
		b.heartbeats[key.Member] = folded
	case KindLease:
		folded := foldedLease{offset: record.Offset, tombstone: tombstone}
		if tombstone {
			folded.clearedAt = max(record.Timestamp, 0)
		} else {
			lease, err := DecodeLease(record.Value)
			if err != nil {
				return fmt.Errorf("coordination: record at offset %d: %w", record.Offset, err)
			}
			folded.lease = lease
		}
		if b.leaseSeen && b.lease.offset > record.Offset {
			return nil
		}
		b.lease, b.leaseSeen = folded, true
	}
	return nil
}

// Build returns the role state, with the roster in offset order. The state
// shares no memory with the builder, so the caller keeps it while the
// builder folds more records.
func (b *RoleStateBuilder) Build() RoleState {
	var state RoleState
	for member, folded := range b.registrations {
		if folded.tombstone {
			continue
		}
		entry := RosterEntry{Member: member, Offset: folded.offset, RegisteredAt: folded.registeredAt}
		if heartbeat, ok := b.heartbeats[member]; ok && !heartbeat.tombstone && heartbeat.offset > folded.offset {
			entry.LastSeen = heartbeat.seenAt
		}
		state.Roster = append(state.Roster, entry)
	}
	slices.SortFunc(state.Roster, func(a, b RosterEntry) int {
		switch {
		case a.Offset < b.Offset:
			return -1
		case a.Offset > b.Offset:
			return 1
		}
		// One offset holds one record in a real log; the tie-break keeps a
		// made-up list deterministic.
		return strings.Compare(a.Member.name, b.Member.name)
	})
	if b.leaseSeen && b.lease.tombstone {
		state.LeaseClearedAt = b.lease.clearedAt
	}
	if b.leaseSeen && !b.lease.tombstone {
		lease := b.lease.lease
		state.Lease = &lease
	}
	return state
}
