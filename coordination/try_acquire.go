package coordination

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotYourTurn reports that [TryAcquire] did not take the role, because
// the succession rules do not let the member challenge now. The error is a
// *[TurnError], which names the holder and when to try again.
var ErrNotYourTurn = errors.New("not this member's turn to take the role")

// TurnError is the refusal of [TryAcquire]: the role, who holds it, and
// when the rules may let the member challenge. It wraps [ErrNotYourTurn];
// find it with [errors.As].
type TurnError struct {
	// Role and Member are the role and the member of the call.
	Role   Role
	Member MemberID

	// Lease is the lease of the role as the call read it: its member is
	// the holder, its token the holder's, its deadline the instant the
	// standbys start to challenge. It is nil when no member holds the
	// role.
	Lease *Lease

	// Rank is the challenge rank that the member's registration had: 0
	// for the first standby ([RoleState.RankOf]).
	Rank int

	// RetryAt is the instant from which the rules let the member
	// challenge, for an unchanged role state, in milliseconds since the
	// Unix epoch by the member's clock. A call then registers again, at
	// the tail of the roster, so a member that others joined behind meanwhile
	// ranks later.
	RetryAt int64

	// Reason says why, such as "role held by node-1 under 1000:3 until
	// 1700000030000 ms".
	Reason string
}

// Error writes "coordination: member <member> may not take role <role>
// now: <reason>; retry at <RetryAt> ms".
func (e *TurnError) Error() string {
	return fmt.Sprintf("coordination: member %s may not take role %s now: %s; retry at %d ms", e.Member, e.Role, e.Reason, e.RetryAt)
}

// Unwrap returns [ErrNotYourTurn].
func (e *TurnError) Unwrap() error { return ErrNotYourTurn }

// TryAcquire takes the role in one round if the succession rules allow it
// now, and otherwise returns at once: the non-blocking form of
// [AcquireLeadership], as etcd's Mutex.TryLock is of Lock.
//
// The round registers the member, reads the role's partition to its last
// stable offset, and evaluates the rules ([Evaluate]) on what it read. When
// they say challenge, it mints the epoch of the role (one attempt, bounded
// like a challenge of AcquireLeadership) and writes the first lease, and
// returns the *[Leadership], which renews in the background as any other.
// Otherwise it deregisters the member again (as etcd's TryLock deletes its
// key) and returns a *[TurnError], which wraps [ErrNotYourTurn]: the role
// is held by a live lease, another standby ranks first and its stagger has
// not passed, the member's registration is not visible yet, an open
// transaction hides the newest records of the partition, or another mint
// won the challenge. A live lease that names this member is an earlier
// incarnation, which the call fences for one epoch, as AcquireLeadership
// does; with [WithDuplicateMemberCheck] the call refuses such a lease when
// this transport did not mint its token (an earlier incarnation, or a
// second live process with this member id: wait for its deadline; the call
// then leaves its registration, which may be that process's too).
//
// It returns the transport's error when a step fails, and deregisters the
// member then too; a mint whose first lease write failed leaves the role
// fenced without a lease, so the standbys take over at the deadline of the
// old lease. ctx bounds the round. The other errors are those of
// AcquireLeadership: for a nil transport, the zero Role or MemberID, an
// invalid option, [ErrNotAuthorized] and [ErrMisconfigured]. It is safe
// for concurrent use, with the same caveat as AcquireLeadership: two calls
// for one role and member are two processes under one member id.
func TryAcquire(ctx context.Context, transport Transport, role Role, member MemberID, options ...Option) (*Leadership, error) {
	c, err := newCampaign(ctx, "TryAcquire", transport, role, member, options)
	if err != nil {
		return nil, err
	}
	clock := c.settings.clock
	c.registeredAt = clock.NowMillis()
	if err := c.register(ctx); err != nil {
		return nil, err
	}
	// A follower's compacted view folds to the same state as the whole log.
	c.follower, _ = c.transport.(PartitionFollower)
	c.builder = NewRoleStateBuilder(role)
	state, err := c.read(ctx)
	if err != nil {
		return nil, c.abandon(ctx, wrapf(err, nil, "read %s for role %s", c.partition, role))
	}
	now := clock.NowMillis()
	refuse := func(rank int, retryAt int64, format string, args ...any) error {
		turn := &TurnError{Role: role, Member: member, Rank: rank, RetryAt: retryAt, Reason: fmt.Sprintf(format, args...)}
		if state.Lease != nil {
			lease := *state.Lease
			turn.Lease = &lease
		}
		return c.abandon(ctx, turn)
	}
	poll := now + c.settings.pollInterval.Milliseconds()
	if entry, ok := state.Entry(member); !ok || entry.RegisteredAt != c.registeredAt {
		return nil, refuse(0, poll, "its registration is not visible in %s yet", c.partition)
	}
	rank, _ := state.RankOf(member)
	decision := Evaluate(state, member, now, c.settings.lease)
	own := classifyOwnLease(state, member, state.Lease != nil && c.sawFenced(state.Lease.Token), c.settings.duplicateCheck)
	live := state.Lease != nil && c.settings.lease.Timing(*state.Lease).LiveAt(now)
	if lease := state.Lease; own == ownLeaseDeposed {
		decision = evaluateDeposed(state, member, now, c.settings.lease) // a successor minted: no failback
	} else if own == ownLeaseEarlier && live {
		decision = Decision{Action: ActionChallenge} // the specification's restart path
	} else if own == ownLeaseWatch && live {
		recorder, ok := c.transport.(MintRecorder)
		if !ok || !recorder.Minted(lease.Token) {
			// The registration key may be a live process's too: no
			// tombstone on it (as AcquireLeadership leaves it for
			// ErrDuplicateMember).
			c.registered = false
			return nil, refuse(rank, lease.Deadline, "the live lease names this member under %s, which this transport did not mint: an earlier incarnation, or another live process with this member id", lease.Token)
		}
		decision = Decision{Action: ActionChallenge} // an earlier leadership of this process: take it back
	}
	switch decision.Action {
	case ActionChallenge:
	case ActionWait:
		if lease := state.Lease; lease != nil && c.settings.lease.Timing(*lease).LiveAt(now) {
			return nil, refuse(rank, decision.WaitUntil, "role held by %s under %s until %d ms, and this member ranks %d", lease.Member, lease.Token, lease.Deadline, rank)
		}
		return nil, refuse(rank, decision.WaitUntil, "this member ranks %d, and the stagger of its rank has not passed", rank)
	default:
		return nil, refuse(rank, poll, "the rules say %s", decision.Action)
	}
	var stable stableOffsets
	if reporter, ok := c.transport.(StableOffsetReporter); ok {
		stable.stable, stable.high, stable.reported = reporter.StableOffsets(c.partition)
	}
	if _, hold, _ := c.memory.watchStable(stable, now, c.settings.lease); hold {
		return nil, refuse(rank, poll, "an open transaction hides the newest records of %s, so an expired lease may have been renewed", c.partition)
	}
	leadership, err := c.challenge(ctx)
	if leadership == nil && err != nil && c.minted != nil && !errors.Is(err, ErrNotAuthorized) && ctx.Err() == nil {
		// The epoch is minted, and it fenced the holder: one more try of
		// the first lease, rather than leave the role without a writer.
		leadership, err = c.challenge(ctx)
	}
	if leadership != nil {
		return leadership, nil
	}
	if errors.Is(err, ErrFenced) {
		return nil, refuse(rank, clock.NowMillis()+c.settings.pollInterval.Milliseconds(), "another member minted a newer epoch first (%v)", err)
	}
	return nil, c.abandon(ctx, err)
}
