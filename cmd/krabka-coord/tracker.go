package main

import (
	"fmt"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Kinds of the events of a role.
const (
	eventState        = "state"        // the state when watch starts
	eventRegistered   = "registered"   // a member joined the roster
	eventDeregistered = "deregistered" // a member left the roster
	eventGranted      = "granted"      // a lease where there was none
	eventRenewed      = "renewed"      // the holder renewed its lease
	eventRestored     = "restored"     // the holder renewed a lease that had been reported expired
	eventReacquired   = "reacquired"   // the holder of the lease took the role again under a new token
	eventTakeover     = "takeover"     // a lease of another member replaced a lease
	eventReleased     = "released"     // a lease tombstone: the holder resigned, or fence cleared it
	eventExpired      = "expired"      // the deadline of the lease passed without a renewal
	eventLapsed       = "lapsed"       // a standby unseen for 3 heartbeat intervals lost its rank
	eventEpoch        = "epoch"        // the coordinator's token of the role changed
)

// roleEvent is one change of a role: a line of watch. See json.md.
type roleEvent struct {
	At     timeJSON `json:"at"`
	Kind   string   `json:"event"`
	Role   string   `json:"role"`
	Member string   `json:"member"` // "" when the event concerns no member

	// Offset is the offset of the record of the event, and Rank the rank
	// of a member that registered; null otherwise.
	Offset *int64     `json:"offset"`
	Rank   *int       `json:"rank"`
	Token  *tokenJSON `json:"token"`

	// PreviousMember and PreviousToken name the lease that a takeover or
	// a reacquisition replaced, or the epoch that an epoch event replaced.
	PreviousMember string     `json:"previous_member"`
	PreviousToken  *tokenJSON `json:"previous_token"`

	// GrantedAt and Deadline are the instants of a lease, and
	// PreviousDeadline the deadline of the lease that it replaced.
	GrantedAt        *timeJSON `json:"granted_at"`
	Deadline         *timeJSON `json:"deadline"`
	PreviousDeadline *timeJSON `json:"previous_deadline"`
	Message          string    `json:"message"`

	// State is the whole state, for a state event.
	State *describeJSON `json:"state"`

	// roleState is the fold right after the record of the event.
	roleState coordination.RoleState
}

// roleTracker folds the records of one role, and says what each record
// changed.
type roleTracker struct {
	role    coordination.Role
	builder *coordination.RoleStateBuilder
	lease   *coordination.Lease
	next    int64 // the offset to read from next

	expired int64 // the deadline of the last lease reported as expired

	lapsed map[coordination.MemberID]int64 // the last sign of life of each standby reported as lapsed
}

func newRoleTracker(role coordination.Role) *roleTracker {
	return &roleTracker{role: role, builder: coordination.NewRoleStateBuilder(role), lapsed: make(map[coordination.MemberID]int64)}
}

// checkLapses reports each standby whose rank lapsed by now under the
// roster lapse of view, once for each last sign of life: a standby that
// comes back registers again, and lapses again only after a new silence.
// With report false it only marks them, for the state watch starts with.
func (t *roleTracker) checkLapses(now time.Time, view coordination.LeaseConfig, report bool) []roleEvent {
	state := t.builder.Build()
	holder, hasHolder := state.Holder()
	var events []roleEvent
	for _, entry := range state.Roster {
		if (hasHolder && entry.Member == holder) || !entry.LapsedAt(now.UnixMilli(), view) || t.lapsed[entry.Member] == entry.LastSeen {
			continue
		}
		t.lapsed[entry.Member] = entry.LastSeen
		if !report {
			continue
		}
		offset := entry.Offset
		events = append(events, roleEvent{
			At: newTimeJSON(now.UnixMilli()), Kind: eventLapsed, Role: t.role.String(), Member: entry.Member.String(), Offset: &offset,
			Message: fmt.Sprintf("%s lapsed: not seen since %s, %v of heartbeat interval %v; it has no rank now, and the standbys behind it move up",
				showName(entry.Member.String()), formatMillis(entry.LastSeen), coordination.RosterLapseHeartbeats, view.HeartbeatInterval()),
		})
	}
	return events
}

// state returns the folded state.
func (t *roleTracker) state() coordination.RoleState { return t.builder.Build() }

// apply folds records, and returns the events they make. Records below the
// offset already folded are skipped: the reader repeats them after
// compaction.
func (t *roleTracker) apply(records []coordination.StateRecord, now time.Time) []roleEvent {
	var events []roleEvent
	for _, record := range records {
		if record.Offset < t.next {
			continue
		}
		t.next = record.Offset + 1
		if event, ok := t.applyOne(record, now); ok {
			events = append(events, event)
		}
	}
	return events
}

func (t *roleTracker) applyOne(record coordination.StateRecord, now time.Time) (roleEvent, bool) {
	key, err := coordination.DecodeKey(record.Key)
	if err != nil || key.Role != t.role {
		return roleEvent{}, false
	}
	if err := t.builder.Apply(record); err != nil {
		return roleEvent{}, false
	}
	offset := record.Offset
	state := t.builder.Build()
	event := roleEvent{At: newTimeJSON(now.UnixMilli()), Role: t.role.String(), Offset: &offset, roleState: state}
	switch key.Kind {
	case coordination.KindRegistration:
		event.Member = key.Member.String()
		if coordination.IsTombstone(record.Value) {
			event.Kind = eventDeregistered
			event.Message = "left the roster"
			return event, true
		}
		rank, _ := state.RankOf(key.Member)
		event.Kind, event.Rank = eventRegistered, &rank
		event.Message = fmt.Sprintf("joined the roster at offset %d, rank %d", offset, rank)
		if holder, ok := state.Holder(); ok && holder == key.Member {
			event.Message = fmt.Sprintf("joined the roster at offset %d, and holds the lease", offset)
		}
		return event, true
	case coordination.KindLease:
		previous := t.lease
		if coordination.IsTombstone(record.Value) {
			t.lease = nil
			if previous == nil {
				return roleEvent{}, false
			}
			event.Kind, event.Member, event.Token = eventReleased, previous.Member.String(), newTokenJSON(previous.Token)
			event.Message = fmt.Sprintf("lease of %s (token %s) cleared: the holder resigned, or a fence released it; the first standby challenges at once",
				showName(previous.Member.String()), previous.Token)
			return event, true
		}
		lease := *state.Lease
		t.lease = &lease
		event.Member, event.Token = lease.Member.String(), newTokenJSON(lease.Token)
		event.GrantedAt, event.Deadline = timePtr(lease.GrantedAt), timePtr(lease.Deadline)
		name := showName(lease.Member.String())
		switch {
		case previous == nil:
			event.Kind = eventGranted
			event.Message = fmt.Sprintf("%s took the role with token %s, lease until %s", name, lease.Token, formatMillis(lease.Deadline))
		case previous.Member == lease.Member && previous.Token == lease.Token && t.expired == previous.Deadline:
			event.Kind, event.PreviousDeadline = eventRestored, timePtr(previous.Deadline)
			event.Message = fmt.Sprintf("%s renewed token %s %s after its lease expired: the holder is back, deadline %s",
				name, lease.Token, formatShort(time.Duration(lease.GrantedAt-previous.Deadline)*time.Millisecond), formatAgo(lease.Deadline, now.UnixMilli()))
		case previous.Member == lease.Member && previous.Token == lease.Token:
			event.Kind = eventRenewed
			event.Message = fmt.Sprintf("%s renewed token %s, deadline %s", name, lease.Token, formatAgo(lease.Deadline, now.UnixMilli()))
		case previous.Member == lease.Member:
			event.Kind = eventReacquired
			event.PreviousMember, event.PreviousToken, event.PreviousDeadline = previous.Member.String(), newTokenJSON(previous.Token), timePtr(previous.Deadline)
			event.Message = fmt.Sprintf("%s took the role again with a new token %s (its lease under %s %s): a restart, or a producer lost and replaced",
				name, lease.Token, previous.Token, leaseGap(previous.Deadline, lease.GrantedAt))
		default:
			event.Kind = eventTakeover
			event.PreviousMember, event.PreviousToken, event.PreviousDeadline = previous.Member.String(), newTokenJSON(previous.Token), timePtr(previous.Deadline)
			event.Message = fmt.Sprintf("%s took over with token %s from %s (token %s, %s)",
				name, lease.Token, showName(previous.Member.String()), previous.Token, leaseGap(previous.Deadline, lease.GrantedAt))
		}
		return event, true
	}
	return roleEvent{}, false
}

// leaseGap says how a new lease granted at granted stands to the deadline
// of the lease it replaced.
func leaseGap(previousDeadline, granted int64) string {
	if granted < previousDeadline {
		return fmt.Sprintf("%s before its deadline", formatShort(time.Duration(previousDeadline-granted)*time.Millisecond))
	}
	return fmt.Sprintf("its lease expired %s before", formatShort(time.Duration(granted-previousDeadline)*time.Millisecond))
}

// checkExpiry reports the lease whose deadline passed, once.
func (t *roleTracker) checkExpiry(now time.Time) (roleEvent, bool) {
	lease := t.lease
	if lease == nil || now.UnixMilli() < lease.Deadline || t.expired == lease.Deadline {
		return roleEvent{}, false
	}
	t.expired = lease.Deadline
	return roleEvent{
		At: newTimeJSON(now.UnixMilli()), Kind: eventExpired, Role: t.role.String(), Member: lease.Member.String(),
		Token: newTokenJSON(lease.Token), GrantedAt: timePtr(lease.GrantedAt), Deadline: timePtr(lease.Deadline),
		Message: fmt.Sprintf("lease of %s (token %s) expired at %s without a renewal; the first standby challenges now",
			showName(lease.Member.String()), lease.Token, formatMillis(lease.Deadline)),
	}, true
}

// epochEvent reports a change of the coordinator's token.
func epochEvent(role coordination.Role, previous, current coordination.LeadershipStatus, now time.Time) roleEvent {
	event := roleEvent{At: newTimeJSON(now.UnixMilli()), Kind: eventEpoch, Role: role.String()}
	was := "none"
	if previous.Held {
		event.PreviousToken, was = newTokenJSON(previous.Token), previous.Token.String()
	}
	if current.Held {
		event.Token = newTokenJSON(current.Token)
		event.Message = fmt.Sprintf("the transaction coordinator holds epoch %s now (was %s): every writer under an older token is fenced", current.Token, was)
	} else {
		event.Message = fmt.Sprintf("the transaction coordinator no longer knows an epoch of the role (was %s)", was)
	}
	return event
}
