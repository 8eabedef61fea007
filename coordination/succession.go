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
// The rules are:
//
//  1. A member that is not in the roster gets [ActionNotRegistered]. It has
//     no rank, because rank comes from the registration record.
//  2. A member that the lease names, while that lease is live, gets
//     [ActionHold].
//  3. A challenger of rank n gets [ActionChallenge] from the deadline plus n
//     challenge staggers on. With no lease, the anchor is the registration
//     instant of the member instead of a deadline, so rank 0 challenges at
//     once and rank n challenges n staggers later.
//  4. Every other member gets [ActionWait]. The instant it carries is the
//     earliest instant at which this answer changes for an unchanged role
//     state.
//
// The anchor of rule 3 comes from the role state, never from the current
// instant: "now plus n staggers" would move on every evaluation, and a
// standby of rank 1 or more would wait for ever while rank 0 is dead. The
// member of an expired lease keeps rank 0, so it reclaims its own role at
// its own deadline ([RoleState.RankOf]). A caller evaluates again when it
// reads a new record, and at the latest at [Decision.WaitUntil]. Heartbeats
// and the resignation anchor, switched on in the config, change the
// answers: see the package doc's section "Evaluate's extensions".
func Evaluate(state RoleState, member MemberID, nowMillis int64, config LeaseConfig) Decision {
	entry, registered := state.Entry(member)
	if !registered {
		return Decision{Action: ActionNotRegistered}
	}
	rank, live := state.RankAt(member, nowMillis, config)
	if !live {
		// Heartbeats only: the member's rank lapsed, the others skip it,
		// so it registers again and joins at the tail rather than claim a
		// rank they no longer count.
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
		anchor := entry.RegisteredAt
		if config.resignAnchor {
			anchor = max(anchor, state.LeaseClearedAt)
		}
		challengeAt = addMillis(anchor, config.ChallengeDelay(rank))
	}
	if nowMillis >= challengeAt {
		return Decision{Action: ActionChallenge}
	}
	return Decision{Action: ActionWait, WaitUntil: min(challengeAt, nextLapse(state, member, nowMillis, config))}
}

// nextLapse returns the first instant after nowMillis at which an entry
// that can lapse ([RosterEntry.LapsedAt]: heartbeats on, and the member
// heartbeated) and that stands ahead of member in the rank order, or is
// member itself, lapses: the answer of Evaluate changes then for an
// unchanged role state. It returns math.MaxInt64 when none can.
func nextLapse(state RoleState, member MemberID, nowMillis int64, config LeaseConfig) int64 {
	next := int64(math.MaxInt64)
	if config.RosterLapse() <= 0 {
		return next
	}
	holder, hasHolder := state.Holder()
	for _, entry := range state.Roster {
		if !(hasHolder && entry.Member == holder) {
			if at, ok := entry.lapseAt(config); ok && at > nowMillis {
				next = min(next, at)
			}
		}
		if entry.Member == member {
			break
		}
	}
	return next
}
