package coordination

import (
	"fmt"
	"math"
)

// Action is the step that one member takes about a role now.
type Action int

const (
	// ActionNotRegistered says that the member is not in the roster of the
	// role, so it has no rank. It registers first, reads the partition again,
	// and evaluates again.
	ActionNotRegistered Action = iota

	// ActionHold says that this member holds the role and that its lease is
	// live. It renews the lease, and it calls InitProducerId for nothing.
	ActionHold

	// ActionChallenge says that this member calls InitProducerId now.
	ActionChallenge

	// ActionWait says that this member waits and then evaluates the role
	// state again. [Decision.WaitUntil] carries the instant.
	ActionWait
)

// String names the action: "not registered", "hold", "challenge", or
// "wait", and "action(N)" for a value outside the list.
func (a Action) String() string {
	switch a {
	case ActionNotRegistered:
		return "not registered"
	case ActionHold:
		return "hold"
	case ActionChallenge:
		return "challenge"
	case ActionWait:
		return "wait"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Decision is what one member does about a role right now. [Evaluate]
// returns one.
type Decision struct {
	// Action is the step that the member takes now.
	Action Action

	// WaitUntil is the instant of the next evaluation, in milliseconds since
	// the Unix epoch. It carries a value for [ActionWait] only.
	WaitUntil int64
}

// Evaluate decides what one member does about a role at this instant,
// nowMillis in milliseconds since the Unix epoch. It is a pure function: it
// reads no clock and no log, so any number of goroutines call it at once.
//
// The rules are:
//
//  1. A member that is not in the roster gets [ActionNotRegistered]. It has
//     no rank, because rank comes from the registration record. So does a
//     standby whose rank lapsed: not seen (no heartbeat, see [Heartbeat])
//     for [LeaseConfig.RosterLapse]; it registers again, at the tail.
//  2. Ranks count live members only ([RoleState.RankAt]): a lapsed standby
//     holds back nobody behind it.
//  3. A member that the lease names, while that lease is live, gets
//     [ActionHold].
//  4. A challenger of rank n gets [ActionChallenge] from the deadline plus n
//     challenge staggers on. With no lease, the anchor is the later of the
//     registration instant of the member and [RoleState.LeaseClearedAt]
//     (the instant a resignation's tombstone cleared the lease), so rank 0
//     challenges at once and rank n challenges n staggers later, after a
//     resignation as after a join.
//  5. Every other member gets [ActionWait]. The instant it carries is the
//     earliest instant at which this answer changes for an unchanged role
//     state.
//
// The anchor of rule 4 always comes from the role state, and never from the
// current instant. A member that has no lease to wait for anchors on its own
// registration record, or on the tombstone that cleared the lease when that
// came later: without it every standby of a resigned role would find its
// own registration long past and challenge at once. An anchor of "now plus n staggers" would move forward
// on every evaluation, and a standby of rank 1 or more would then wait for
// ever while rank 0 is dead.
//
// The member of an expired lease keeps rank 0, so it reclaims its own role at
// its own deadline. See [RoleState.RankOf].
//
// A caller evaluates again when it reads a new record, and at the latest at
// the instant that [Decision.WaitUntil] names.
func Evaluate(state RoleState, member MemberID, nowMillis int64, config LeaseConfig) Decision {
	entry, registered := state.Entry(member)
	if !registered {
		return Decision{Action: ActionNotRegistered}
	}
	rank, live := state.RankAt(member, nowMillis, config)
	if !live {
		// The member's rank lapsed: the others skip it, so it registers
		// again and joins at the tail rather than claim a rank they no
		// longer count.
		return Decision{Action: ActionNotRegistered}
	}
	var challengeAt int64
	if state.Lease != nil {
		timing := config.Timing(*state.Lease)
		if state.Lease.Member == member && timing.LiveAt(nowMillis) {
			return Decision{Action: ActionHold}
		}
		challengeAt = timing.ChallengeAt(rank)
	} else {
		anchor := max(entry.RegisteredAt, state.LeaseClearedAt)
		challengeAt = addMillis(anchor, config.ChallengeDelay(rank))
	}
	if nowMillis >= challengeAt {
		return Decision{Action: ActionChallenge}
	}
	return Decision{Action: ActionWait, WaitUntil: min(challengeAt, nextLapse(state, member, nowMillis, config))}
}

// nextLapse returns the first instant after nowMillis at which a live
// non-holder entry of the roster lapses, the member's own included: the
// rank of the member changes then for an unchanged role state.
func nextLapse(state RoleState, member MemberID, nowMillis int64, config LeaseConfig) int64 {
	holder, hasHolder := state.Holder()
	next := int64(math.MaxInt64)
	lapse := config.RosterLapse().Milliseconds()
	for _, entry := range state.Roster {
		if (hasHolder && entry.Member == holder) || entry.LapsedAt(nowMillis, config) {
			if entry.Member == member {
				break
			}
			continue
		}
		if seen := max(entry.LastSeen, entry.RegisteredAt); seen < math.MaxInt64-lapse-1 {
			next = min(next, seen+lapse+1)
		}
		if entry.Member == member {
			break
		}
	}
	return next
}
