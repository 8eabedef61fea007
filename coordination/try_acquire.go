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
// key) and returns a *[TurnError], which wraps [ErrNotYourTurn] and says
// why: a live lease, a standby that ranks first, a registration not visible
// yet, an open transaction that hides the newest records, or another mint
// that won. A live lease that names this member is an earlier incarnation,
// which the call fences for one epoch, as AcquireLeadership does (with
// [WithDuplicateMemberCheck]: see the package doc's "The campaign in detail").
//
// ctx bounds the round. A step that fails returns the transport's error and
// deregisters the member; a mint whose first lease write failed leaves the
// role fenced without a lease, so the standbys take over at the old lease's
// deadline. The other errors are AcquireLeadership's: a nil transport, the
// zero Role or MemberID, an invalid option, [ErrNotAuthorized],
// [ErrMisconfigured] and [ErrDuplicateCampaign]. It is safe for concurrent
// use.
func TryAcquire(ctx context.Context, transport Transport, role Role, member MemberID, options ...Option) (*Leadership, error) {
	c, err := newCampaign(ctx, "TryAcquire", transport, role, member, options)
	if err != nil {
		return nil, err
	}
	defer c.releaseClaim() // unless the leadership took it over
	clock := c.settings.clock
	c.registeredAt = clock.NowMillis()
	if err := c.register(ctx); err != nil {
		return nil, err
	}
	// A follower's compacted view folds to the same state as the whole log.
	c.follower = followerOfRole(c.extended, c.partition, role)
	c.incarnation = c.topicIncarnation()
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
	step := decideTry(state, member, c.view(state, epochAnswer{}), c.rules, now)
	if !step.challenge {
		if step.keepRegistration {
			// As AcquireLeadership leaves it for ErrDuplicateMember.
			c.registered = false
		}
		return nil, refuse(step.rank, step.retryAt, "%s", step.reason)
	}
	rank := step.rank
	leadership, err := c.challenge(ctx, epochAnswer{})
	if leadership == nil && err != nil && c.minted != nil && !errors.Is(err, ErrNotAuthorized) && ctx.Err() == nil {
		// The epoch is minted, and it fenced the holder: one more try of
		// the first lease, rather than leave the role without a writer.
		leadership, err = c.challenge(ctx, epochAnswer{})
	}
	if leadership != nil {
		return leadership, nil
	}
	if errors.Is(err, ErrFenced) {
		return nil, refuse(rank, clock.NowMillis()+c.settings.pollInterval.Milliseconds(), "another member minted a newer epoch first (%v)", err)
	}
	return nil, c.abandon(ctx, err)
}
