package clifmt

// The events of a role: the changes that coordination.Observe reports, as
// watch and demo print them, and the change of the coordinator's epoch.

import (
	"fmt"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Kinds of the events of a role.
const (
	EventState        = "state"        // the state when watch starts
	EventRegistered   = "registered"   // a member joined the roster
	EventDeregistered = "deregistered" // a member left the roster
	EventGranted      = "granted"      // a lease where there was none
	EventRenewed      = "renewed"      // the holder renewed its lease
	EventRestored     = "restored"     // the holder renewed a lease that had been reported expired
	EventReacquired   = "reacquired"   // the holder of the lease took the role again under a new token
	EventTakeover     = "takeover"     // a lease of another member replaced a lease
	EventReleased     = "released"     // a lease tombstone: the holder resigned, or fence cleared it
	EventExpired      = "expired"      // the deadline of the lease passed without a renewal
	EventLapsed       = "lapsed"       // a standby unseen for 3 heartbeat intervals lost its rank
	EventEpoch        = "epoch"        // the coordinator's token of the role changed
)

// RoleEvent is one change of a role: a line of watch. See json.md.
type RoleEvent struct {
	At     TimeJSON `json:"at"`
	Kind   string   `json:"event"`
	Role   string   `json:"role"`
	Member string   `json:"member"` // "" when the event concerns no member

	// Offset is the offset of the record of the event, and Rank the rank
	// of a member that registered; null otherwise.
	Offset *int64     `json:"offset"`
	Rank   *int       `json:"rank"`
	Token  *TokenJSON `json:"token"`

	// PreviousMember and PreviousToken name the lease that a takeover or
	// a reacquisition replaced, or the epoch that an epoch event replaced.
	PreviousMember string     `json:"previous_member"`
	PreviousToken  *TokenJSON `json:"previous_token"`

	// GrantedAt and Deadline are the instants of a lease, and
	// PreviousDeadline the deadline of the lease that it replaced.
	GrantedAt        *TimeJSON `json:"granted_at"`
	Deadline         *TimeJSON `json:"deadline"`
	PreviousDeadline *TimeJSON `json:"previous_deadline"`
	Message          string    `json:"message"`

	// State is the whole state, for a state event: the describe document
	// of watch (nil otherwise, which encodes as null).
	State any `json:"state"`

	// Fold is the state that coordination.Observe reported with the
	// change: the fold right after the record of the event.
	Fold coordination.RoleState `json:"-"`
}

// EventOf turns a change that coordination.Observe reported into the
// event that watch prints, and reports false for a change that watch does
// not print (ChangeState, whose event needs the coordinator's status, and
// ChangeSynced). view is the lease policy whose heartbeat interval the
// observation judged a lapse by (--heartbeat-interval), for the words of
// a lapsed event.
func EventOf(change coordination.RoleChange, view coordination.LeaseConfig) (RoleEvent, bool) {
	now := change.At
	state := change.State
	event := RoleEvent{At: NewTimeJSON(now), Role: change.Role.String(), Member: change.Member.String(), Fold: state}
	if change.Offset >= 0 {
		offset := change.Offset
		event.Offset = &offset
	}
	event.Kind = change.Kind.String()
	name := ShowName(change.Member.String())
	previous := change.Previous
	switch change.Kind {
	case coordination.ChangeRegistered:
		rank, _ := state.RankOf(change.Member)
		event.Rank = &rank
		event.Message = fmt.Sprintf("joined the roster at offset %d, rank %d", change.Offset, rank)
		if holder, ok := state.Holder(); ok && holder == change.Member {
			event.Message = fmt.Sprintf("joined the roster at offset %d, and holds the lease", change.Offset)
		}
		return event, true
	case coordination.ChangeDeregistered:
		event.Message = "left the roster"
		return event, true
	case coordination.ChangeReleased:
		if previous == nil {
			return RoleEvent{}, false
		}
		event.Token = NewTokenJSON(previous.Token)
		event.Message = fmt.Sprintf("lease of %s (token %s) cleared: the holder resigned, or a fence released it; the first standby challenges at once",
			name, previous.Token)
		return event, true
	case coordination.ChangeExpired:
		lease := state.Lease
		if lease == nil {
			return RoleEvent{}, false
		}
		event.Token, event.GrantedAt, event.Deadline = NewTokenJSON(lease.Token), TimePtr(lease.GrantedAt), TimePtr(lease.Deadline)
		event.Message = fmt.Sprintf("lease of %s (token %s) expired at %s without a renewal; the first standby challenges now",
			name, lease.Token, FormatMillis(lease.Deadline))
		return event, true
	case coordination.ChangeLapsed:
		entry, ok := state.Entry(change.Member)
		if !ok {
			return RoleEvent{}, false
		}
		offset := entry.Offset // its registration, which keeps its place no more
		event.Offset = &offset
		event.Message = fmt.Sprintf("%s lapsed: not seen since %s, %v of heartbeat interval %v; it has no rank now, and the standbys behind it move up",
			name, FormatMillis(max(entry.LastSeen, entry.RegisteredAt)), coordination.RosterLapseHeartbeats, view.HeartbeatInterval())
		return event, true
	case coordination.ChangeGranted, coordination.ChangeRenewed, coordination.ChangeRestored, coordination.ChangeReacquired, coordination.ChangeTakeover:
	default:
		return RoleEvent{}, false
	}
	lease := state.Lease
	if lease == nil {
		return RoleEvent{}, false
	}
	event.Token = NewTokenJSON(lease.Token)
	event.GrantedAt, event.Deadline = TimePtr(lease.GrantedAt), TimePtr(lease.Deadline)
	switch {
	case change.Kind == coordination.ChangeGranted || previous == nil:
		event.Kind = EventGranted
		event.Message = fmt.Sprintf("%s took the role with token %s, lease until %s", name, lease.Token, FormatMillis(lease.Deadline))
	case change.Kind == coordination.ChangeRestored:
		event.PreviousDeadline = TimePtr(previous.Deadline)
		event.Message = fmt.Sprintf("%s renewed token %s %s after its lease expired: the holder is back, deadline %s",
			name, lease.Token, FormatShort(time.Duration(lease.GrantedAt-previous.Deadline)*time.Millisecond), FormatAgo(lease.Deadline, now))
	case change.Kind == coordination.ChangeRenewed:
		event.Message = fmt.Sprintf("%s renewed token %s, deadline %s", name, lease.Token, FormatAgo(lease.Deadline, now))
	case change.Kind == coordination.ChangeReacquired:
		event.PreviousMember, event.PreviousToken, event.PreviousDeadline = previous.Member.String(), NewTokenJSON(previous.Token), TimePtr(previous.Deadline)
		event.Message = fmt.Sprintf("%s took the role again with a new token %s (its lease under %s %s): a restart, a producer lost and replaced, or a planned transfer's offer taken",
			name, lease.Token, previous.Token, leaseGap(previous.Deadline, lease.GrantedAt))
	case lease.Token == previous.Token:
		// One token, another member: no mint happened. It is the offer of a
		// planned transfer (the holder names the target under its own
		// token), or the holder's lease again after an offer not taken.
		event.PreviousMember, event.PreviousToken, event.PreviousDeadline = previous.Member.String(), NewTokenJSON(previous.Token), TimePtr(previous.Deadline)
		event.Message = fmt.Sprintf("the lease under token %s names %s now, not %s, with no new epoch: the offer of a planned transfer, or the holder's take-back of an offer not taken",
			lease.Token, name, ShowName(previous.Member.String()))
	default:
		event.PreviousMember, event.PreviousToken, event.PreviousDeadline = previous.Member.String(), NewTokenJSON(previous.Token), TimePtr(previous.Deadline)
		event.Message = fmt.Sprintf("%s took over with token %s from %s (token %s, %s)",
			name, lease.Token, ShowName(previous.Member.String()), previous.Token, leaseGap(previous.Deadline, lease.GrantedAt))
	}
	return event, true
}

// leaseGap says how a new lease granted at granted stands to the deadline
// of the lease it replaced.
func leaseGap(previousDeadline, granted int64) string {
	if granted < previousDeadline {
		return fmt.Sprintf("%s before its deadline", FormatShort(time.Duration(previousDeadline-granted)*time.Millisecond))
	}
	return fmt.Sprintf("its lease expired %s before", FormatShort(time.Duration(granted-previousDeadline)*time.Millisecond))
}

// EpochEvent reports a change of the coordinator's token.
func EpochEvent(role coordination.Role, previous, current coordination.LeadershipStatus, now time.Time) RoleEvent {
	event := RoleEvent{At: NewTimeJSON(now.UnixMilli()), Kind: EventEpoch, Role: role.String()}
	was := "none"
	if previous.Held {
		event.PreviousToken, was = NewTokenJSON(previous.Token), previous.Token.String()
	}
	if current.Held {
		event.Token = NewTokenJSON(current.Token)
		event.Message = fmt.Sprintf("the transaction coordinator holds epoch %s now (was %s): every writer under an older token is fenced", current.Token, was)
	} else {
		event.Message = fmt.Sprintf("the transaction coordinator no longer knows an epoch of the role (was %s)", was)
	}
	return event
}
