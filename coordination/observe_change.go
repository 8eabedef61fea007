package coordination

// The changes that Observe reports: ChangeKind and RoleChange.

import "fmt"

// ChangeKind names what one [RoleChange] reports.
type ChangeKind int

const (
	// ChangeState is the state of a role when the observation starts: the
	// first change of each role that [Observe] names; [ObserveAll] sends
	// one for each role that the first read of the state topic found. A
	// partition whose topic was deleted and created again (see
	// [ExtendedTransport.TopicIncarnation]) yields the states of its roles again,
	// folded from the new log.
	ChangeState ChangeKind = iota

	// ChangeRegistered reports a registration: a member joined the roster,
	// or joined it again at the tail.
	ChangeRegistered

	// ChangeDeregistered reports a registration tombstone: a member left
	// the roster (it resigned, gave up its wait, or an operator removed
	// it).
	ChangeDeregistered

	// ChangeGranted reports a lease where there was none.
	ChangeGranted

	// ChangeRenewed reports a renewal: the same member, the same token, a
	// later deadline.
	ChangeRenewed

	// ChangeRestored reports a renewal of a lease that this observation
	// reported expired: the holder is back after an outage, and no
	// standby took the role meanwhile.
	ChangeRestored

	// ChangeReacquired reports a lease of the same member under a new
	// token: a restart, or a producer lost and replaced.
	ChangeReacquired

	// ChangeTakeover reports a lease of another member that replaced the
	// lease: a failover, or a handover after a resignation that the reader
	// saw as one step.
	ChangeTakeover

	// ChangeReleased reports a lease tombstone: the holder resigned, or an
	// operator cleared the lease. The first standby challenges at once.
	ChangeReleased

	// ChangeExpired reports a lease whose deadline passed, by the
	// observer's clock, without a renewal in the log. The standbys
	// challenge from now on, in rank order.
	ChangeExpired

	// ChangeSynced comes once, right after the ChangeState of every role,
	// when every partition of the observation was read once: what
	// follows is live (client-go's HasSynced). It names no role, and it
	// comes for an ObserveAll of an empty topic too.
	ChangeSynced

	// ChangeLapsed reports a standby whose rank lapsed, with heartbeats on
	// ([WithHeartbeatInterval]; never without): the member heartbeated, and
	// the log holds no heartbeat of it for [LeaseConfig.RosterLapse], by
	// the observer's clock. It keeps its
	// registration, but [RoleState.RankAt] skips it and the standbys
	// behind it move up; a standby that comes back registers again, at
	// the tail. It comes once for each last sign of life
	// ([RosterEntry.LastSeen]): a standby seen again lapses again only
	// after a new silence. The holder never lapses, and a standby that
	// had lapsed already when the observation started is in the
	// [ChangeState], not in a ChangeLapsed.
	ChangeLapsed
)

// String names the kind as the CLI's watch does: "state", "registered",
// "deregistered", "granted", "renewed", "restored", "reacquired",
// "takeover", "released", "expired", "synced", "lapsed", and "change(N)"
// for another value.
func (k ChangeKind) String() string {
	switch k {
	case ChangeState:
		return "state"
	case ChangeRegistered:
		return "registered"
	case ChangeDeregistered:
		return "deregistered"
	case ChangeGranted:
		return "granted"
	case ChangeRenewed:
		return "renewed"
	case ChangeRestored:
		return "restored"
	case ChangeReacquired:
		return "reacquired"
	case ChangeTakeover:
		return "takeover"
	case ChangeReleased:
		return "released"
	case ChangeExpired:
		return "expired"
	case ChangeSynced:
		return "synced"
	case ChangeLapsed:
		return "lapsed"
	}
	return fmt.Sprintf("change(%d)", int(k))
}

// RoleChange is one change of a role that [Observe] reports: the holder,
// the lease and its token, or the roster.
type RoleChange struct {
	// Kind says what changed.
	Kind ChangeKind

	// Role is the role that changed, and Partition the partition of the
	// state topic that holds it.
	Role      Role
	Partition TopicPartition

	// Offset is the offset of the record that made the change, and -1 for
	// [ChangeState], [ChangeExpired], [ChangeLapsed] and [ChangeSynced],
	// which no record makes (the registration of a lapsed standby is its
	// [RosterEntry.Offset] in State).
	Offset int64

	// Member is the member of the change: the member that registered or
	// left, the holder of a lease that was granted, renewed, restored,
	// reacquired, taken over, or that expired, the holder of the lease
	// that a release cleared, and the standby that lapsed. It is the zero
	// MemberID for [ChangeState] and [ChangeSynced].
	Member MemberID

	// At is the instant the observer saw the change, in milliseconds since
	// the Unix epoch, by the clock of [WithClock].
	At int64

	// State is the role state right after the change: the roster in rank
	// order ([RoleState.RankOf]) and the lease, whose token is the
	// holder's. For [ChangeExpired] its lease is the one that expired.
	State RoleState

	// Previous is the lease that the change replaced or cleared (renewed,
	// restored, reacquired, takeover, released), and nil otherwise.
	Previous *Lease
}
