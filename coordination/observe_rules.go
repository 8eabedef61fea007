package coordination

// The rules of an observation: what a new record of a role, or the clock,
// means as a change of that role (observedRole). Pure: no reads, no
// clock of its own; the loop in observe.go hands each rule the record and
// the instant.

// observedRole is the fold of one role and what the observer reported.
type observedRole struct {
	role      Role
	partition TopicPartition
	builder   *RoleStateBuilder
	state     RoleState
	lease     *Lease // the lease as last reported
	expired   int64  // the deadline of the lease last reported expired

	lapsed map[MemberID]int64 // the last sign of life of each standby reported (or found) lapsed
}

// change classifies one new record that the fold of the role took.
func (r *observedRole) change(key Key, record StateRecord, now int64) (RoleChange, bool) {
	before := r.state
	r.state = r.builder.Build()
	change := RoleChange{Role: r.role, Partition: r.partition, Offset: record.Offset, At: now, State: r.state}
	tombstone := IsTombstone(record.Value)
	switch key.Kind {
	case KindRegistration:
		change.Member = key.Member
		if tombstone {
			if _, was := before.Entry(key.Member); !was {
				return RoleChange{}, false
			}
			change.Kind = ChangeDeregistered
			return change, true
		}
		change.Kind = ChangeRegistered
		return change, true
	case KindLease:
		previous := r.lease
		if tombstone {
			r.lease = nil
			if previous == nil {
				return RoleChange{}, false
			}
			change.Kind, change.Member, change.Previous = ChangeReleased, previous.Member, previous
			return change, true
		}
		if r.state.Lease == nil {
			return RoleChange{}, false
		}
		lease := *r.state.Lease
		r.lease = &lease
		change.Member, change.Previous = lease.Member, previous
		switch {
		case previous == nil:
			change.Kind = ChangeGranted
		case previous.Member == lease.Member && previous.Token == lease.Token && r.expired == previous.Deadline:
			change.Kind = ChangeRestored
		case previous.Member == lease.Member && previous.Token == lease.Token:
			change.Kind = ChangeRenewed
		case previous.Member == lease.Member:
			change.Kind = ChangeReacquired
		default:
			change.Kind = ChangeTakeover
		}
		return change, true
	}
	return RoleChange{}, false
}

// lapses marks each standby of the role whose rank lapsed at now under
// config, once for each last sign of life, and returns a ChangeLapsed for
// each when report. It forgets the members that left the roster.
func (r *observedRole) lapses(now int64, config LeaseConfig, report bool) []RoleChange {
	holder, hasHolder := r.state.Holder()
	var changes []RoleChange
	inRoster := make(map[MemberID]bool, len(r.state.Roster))
	for _, entry := range r.state.Roster {
		inRoster[entry.Member] = true
		seen := entry.LastSeen
		if (hasHolder && entry.Member == holder) || !entry.LapsedAt(now, config) {
			continue
		}
		if last, ok := r.lapsed[entry.Member]; ok && last == seen {
			continue
		}
		r.lapsed[entry.Member] = seen
		if report {
			changes = append(changes, RoleChange{Kind: ChangeLapsed, Role: r.role, Partition: r.partition, Offset: -1,
				Member: entry.Member, At: now, State: r.state})
		}
	}
	for member := range r.lapsed {
		if !inRoster[member] {
			delete(r.lapsed, member)
		}
	}
	return changes
}
