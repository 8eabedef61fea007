package coordination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// AcquireLeadership competes for a role, and it returns when this member
// holds the role.
//
// The call registers the member, waits for its turn under the succession
// rules, mints the epoch of the role, and writes the first lease record. It
// returns a *[Leadership] that renews the lease in the background. Every
// write that the caller guards with [Leadership.Token] is fenced by the
// broker.
//
// The call reads the coordination topic in a loop, so the caller bounds the
// wait with the context. It returns the context error when the deadline
// passes before this member wins the role, and it then deregisters the
// member (a tombstone on its registration key, under a short context of its
// own) so that no standby ranks behind a member that left. The context
// bounds only the wait: the leadership it returns outlives it, and ends only
// on a fence or [Leadership.Resign].
//
// A role state that names this member takes the same path as a challenge.
// The record came from an earlier incarnation of the member, because this
// call holds no epoch yet. The new epoch fences that earlier incarnation, and
// it costs one epoch.
//
// The loop in detail:
//   - It appends one registration and ranks on that record only: while the
//     roster still shows an older registration of this member, or none, it
//     reads again instead of appending again. A registration that stays
//     invisible for two lease durations is appended once more, and logged.
//   - It waits until [Decision.WaitUntil], or one poll interval, whichever
//     comes first. A transport that implements [PartitionFollower] wakes it
//     on every new record too, and it then folds only the new records.
//   - A fence on the first lease write is not a win: another member minted
//     after this one. The call goes back to waiting, and it challenges
//     again no sooner than one poll interval later, so two challengers do
//     not fence each other in turn while the winner writes its lease.
//   - A first lease write that fails for a transient reason is retried
//     under the same epoch; after [ErrProducerLost] the next challenge
//     mints again.
//   - It does not challenge on a view that it knows is incomplete: while a
//     transport that implements [StableOffsetReporter] reports an open
//     transaction past the last stable offset of the partition, it holds the
//     challenge, at most for the lease duration plus Kafka's default abort
//     sweep (10 s) after the last stable offset stopped moving.
//   - A missing permission ([ErrNotAuthorized]) and a configuration the
//     cluster refuses ([ErrMisconfigured]) end the call at once. A transport
//     that implements [StateTopicChecker] checks the state topic first.
//   - When the context ends, the error is the context's error itself
//     (err == context.DeadlineExceeded holds); the last error of the
//     transport, if any, is logged.
//   - A record that does not decode is skipped and logged, once for each
//     offset: safety rests on the epoch, so a skipped record can make a
//     challenge early, never a second writer.
//
// The lease policy is [DefaultLeaseConfig] unless an option sets one, over
// every transport. A [KafkaTransport] built with another policy (its
// transaction timeout) does not change that default: pass
// WithLeaseConfig(transport.LeaseConfig()) to run with it. A lease duration
// that differs from the transport's is logged.
//
// Three extensions change what the loop does, each switched on by its
// option and off by default: heartbeats ([WithHeartbeatInterval]), the
// resignation anchor ([WithResignationAnchor]), and the duplicate-member
// watch ([WithDuplicateMemberCheck]). Without them the loop writes only
// registrations and leases, and a lease or registration that names this
// member is an earlier incarnation that it fences at once.
//
// It returns an error, before anything is written, for a nil transport, the
// zero [Role] or [MemberID], and an invalid option. It returns an error that
// wraps [ErrNotAuthorized] when the cluster refuses the member a permission.
func AcquireLeadership(ctx context.Context, transport Transport, role Role, member MemberID, options ...Option) (*Leadership, error) {
	c, err := newCampaign(ctx, "AcquireLeadership", transport, role, member, options)
	if err != nil {
		return nil, err
	}
	return c.run(ctx)
}

// newCampaign checks the arguments of AcquireLeadership or TryAcquire (op
// names the call), applies the options over the transport's lease policy,
// and checks the state topic when the transport can.
func newCampaign(ctx context.Context, op string, transport Transport, role Role, member MemberID, options []Option) (*campaign, error) {
	if transport == nil {
		return nil, fmt.Errorf("coordination: %s: nil Transport", op)
	}
	if role.IsZero() {
		return nil, fmt.Errorf("coordination: %s: the zero Role: build the role with NewRole", op)
	}
	if member.IsZero() {
		return nil, fmt.Errorf("coordination: %s: the zero MemberID: build the member with NewMemberID", op)
	}
	s, err := newSettings(options)
	if err != nil {
		return nil, err
	}
	if policy, reports := transportLease(transport); reports && s.lease.duration != policy.duration {
		s.logger.Warn("coordination: the lease duration differs from the transport's, which is its transaction timeout; pass WithLeaseConfig(transport.LeaseConfig()) to run with the transport's policy",
			slog.String("role", role.String()), slog.Duration("lease", s.lease.duration), slog.Duration("transport", policy.duration))
	}
	partition, err := s.partition(role)
	if err != nil {
		return nil, err
	}
	if checker, ok := transport.(StateTopicChecker); ok {
		if err := checker.CheckStateTopic(ctx, options...); err != nil {
			// Only a refused configuration stops the call: the check needs
			// permissions (DESCRIBE_CONFIGS over Kafka) that a member may
			// lack without harm.
			if errors.Is(err, ErrMisconfigured) {
				return nil, err
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w (the check of the state topic failed: %v)", ctx.Err(), err)
			}
			s.logger.Warn("coordination: the check of the state topic failed; waiting for the role all the same",
				slog.String("role", role.String()), slog.Any("error", err))
		}
	}
	c := &campaign{
		transport: transport,
		role:      role,
		member:    member,
		partition: partition,
		settings:  s,
		logger:    s.logger.With(slog.String("role", role.String()), slog.String("member", member.String()), slog.String("partition", partition.String())),
		skipped:   make(map[int64]bool),
	}
	return c, nil
}

// campaign is the state of one AcquireLeadership call. It lives on the
// caller's goroutine and starts none of its own.
type campaign struct {
	transport Transport
	role      Role
	member    MemberID
	partition TopicPartition
	settings  *settings
	logger    *slog.Logger

	follower PartitionFollower // nil for a poll-only transport
	changed  <-chan struct{}   // wake-ups from the follower
	builder  *RoleStateBuilder
	next     int64          // the offset the follower reads from next
	skipped  map[int64]bool // offsets of malformed records already logged

	registeredAt int64 // the RegisteredAt of this call's registration
	registered   bool  // the append of that registration succeeded
	appendedAt   int64 // when it succeeded, in ms since the Unix epoch
	minted       *FencingToken
	notBefore    int64 // no challenge before this instant, in ms

	lastErr error // the last error of the transport, for the error of a wait that ends

	stuckStable int64 // the last stable offset that an open transaction holds
	stuckSince  int64 // when this call first saw it held, in ms; 0 for none

	ownRegistrationSeen bool   // this call's registration was in the roster once
	namedLease          *Lease // a lease naming this member that this call did not write, as first seen
	namedLeaseSeenAt    int64  // when it was first seen, in ms

	heartbeatDue int64 // the instant of the next heartbeat, in ms
	heartbeated  bool  // a heartbeat of this member was written

	mintTimeouts int // mint attempts in a row that ran out of their bound
}

// openTransactionSweep bounds how long a challenger waits for an open
// transaction that hides the newest records of its partition: the
// transaction timeout that KafkaTransport sets (the lease duration) plus
// this, the default period of Kafka's abort sweep,
// transaction.abort.timed.out.transaction.cleanup.interval.ms.
const openTransactionSweep = 10 * time.Second

// viewIncomplete reports whether an open transaction hides records of the
// partition past the last stable offset, so that a lease that looks expired
// may have been renewed behind it. A holder of another role that stalls in
// the middle of its lease transaction holds the last stable offset of the
// whole partition; a challenge on that view would depose a healthy holder.
// The challenger waits until the transaction ends, or until the coordinator
// must have aborted it: the lease duration plus the abort sweep.
func (c *campaign) viewIncomplete(now int64) bool {
	reporter, ok := c.transport.(StableOffsetReporter)
	if !ok {
		return false
	}
	stable, high, ok := reporter.StableOffsets(c.partition)
	if !ok || high <= stable {
		c.stuckSince = 0
		return false
	}
	if c.stuckSince == 0 || stable != c.stuckStable {
		c.stuckStable, c.stuckSince = stable, now
		c.logger.Info("coordination: an open transaction hides records past the last stable offset; holding the challenge",
			slog.Int64("last_stable_offset", stable), slog.Int64("high_watermark", high))
	}
	if now-c.stuckSince >= (c.settings.lease.duration + openTransactionSweep).Milliseconds() {
		c.logger.Warn("coordination: the last stable offset has not moved for a lease duration plus the abort sweep; challenging on the view it gives",
			slog.Int64("last_stable_offset", stable), slog.Int64("high_watermark", high))
		return false
	}
	return true
}

func (c *campaign) run(ctx context.Context) (*Leadership, error) {
	clock := c.settings.clock
	if follower, ok := c.transport.(PartitionFollower); ok {
		changed, stop := follower.WatchPartition(c.partition)
		defer stop()
		c.follower, c.changed = follower, changed
	}
	c.builder = NewRoleStateBuilder(c.role)
	c.registeredAt = clock.NowMillis()
	for {
		if err := ctx.Err(); err != nil {
			return nil, c.abandon(ctx, err)
		}
		if !c.registered {
			if err := c.register(ctx); err != nil {
				c.lastErr = err
				if ctx.Err() != nil {
					return nil, c.abandon(ctx, ctx.Err())
				}
				if errors.Is(err, ErrNotAuthorized) {
					return nil, err
				}
				c.logger.Warn("coordination: registration failed; retrying", slog.Any("error", err))
				c.wait(ctx, clock.NowMillis()+c.settings.pollInterval.Milliseconds())
				continue
			}
		}
		state, err := c.read(ctx)
		if err != nil {
			c.lastErr = err
			if ctx.Err() != nil {
				return nil, c.abandon(ctx, ctx.Err())
			}
			if errors.Is(err, ErrNotAuthorized) {
				return nil, c.abandon(ctx, err)
			}
			c.logger.Warn("coordination: read of the state partition failed; retrying", slog.Any("error", err))
			c.wait(ctx, clock.NowMillis()+c.settings.pollInterval.Milliseconds())
			continue
		}
		now := clock.NowMillis()
		if entry, ok := state.Entry(c.member); ok && entry.RegisteredAt != c.registeredAt && c.ownRegistrationSeen && c.settings.duplicateCheck {
			// This call's registration was in the roster, and another
			// registration of the same member replaced it: a second live
			// process runs under this member id.
			return nil, c.abandon(ctx, fmt.Errorf("coordination: member %s of role %s: another registration of the same member id (registered at %d ms, this call's at %d ms) replaced this call's: "+
				"two live processes use one member id, and each would fence the other: %w", c.member, c.role, entry.RegisteredAt, c.registeredAt, ErrDuplicateMember))
		}
		if _, ok := state.Entry(c.member); !ok && c.ownRegistrationSeen {
			// A tombstone took this call's registration away: the member
			// has no rank (rule 1), so it registers again, at the tail.
			c.logger.Warn("coordination: this member's registration was removed from the roster; registering again, at the tail")
			c.registeredAt, c.registered, c.ownRegistrationSeen, c.heartbeatDue = now, false, false, 0
			continue
		}
		if entry, ok := state.Entry(c.member); !ok || (entry.RegisteredAt != c.registeredAt && !c.ownRegistrationSeen) {
			// This call's own registration is not visible yet; an older one
			// would rank the member where it no longer stands.
			if now-c.appendedAt >= 2*c.settings.lease.duration.Milliseconds() {
				c.logger.Warn("coordination: own registration still not visible; appending it again",
					slog.Duration("waited", time.Duration(now-c.appendedAt)*time.Millisecond))
				c.registered = false
				continue
			}
			c.wait(ctx, now+c.settings.pollInterval.Milliseconds())
			continue
		}
		c.ownRegistrationSeen = true
		c.heartbeat(ctx, now)
		decision := Evaluate(state, c.member, now, c.settings.lease)
		if decision.Action == ActionNotRegistered {
			// This member's rank lapsed: its heartbeats did not land for
			// the roster lapse, so the others skip it. It registers again
			// and joins at the tail, as a recovered member does.
			entry, _ := state.Entry(c.member)
			c.logger.Warn("coordination: this member's rank lapsed (no heartbeat landed for the roster lapse); registering again, at the tail",
				slog.Int64("last_seen", entry.LastSeen), slog.Duration("roster_lapse", c.settings.lease.RosterLapse()))
			c.registeredAt, c.registered, c.ownRegistrationSeen, c.heartbeatDue = now, false, false, 0
			continue
		}
		if c.minted != nil {
			// An epoch minted by this call fenced the holder already: write
			// its lease now rather than leave the role without a writer.
			decision = Decision{Action: ActionChallenge}
		} else if own := c.classifyOwnLease(state); own == ownLeaseDeposed {
			decision = evaluateDeposed(state, c.member, now, c.settings.lease)
		} else if own == ownLeaseEarlier {
			decision = Decision{Action: ActionChallenge}
		} else if own == ownLeaseWatch {
			var err error
			if decision, err = c.namedByLease(ctx, state, now, decision); err != nil {
				if ctx.Err() != nil {
					return nil, c.abandon(ctx, ctx.Err())
				}
				if errors.Is(err, ErrDuplicateMember) || errors.Is(err, ErrNotAuthorized) {
					return nil, c.abandon(ctx, err)
				}
				c.lastErr = err
				c.logger.Warn("coordination: could not tell whether the lease that names this member is superseded; reading again", slog.Any("error", err))
				c.wait(ctx, now+c.settings.pollInterval.Milliseconds())
				continue
			}
		}
		switch decision.Action {
		case ActionWait:
			// The heartbeat's own record wakes a follower once: the member
			// then reads, decides again and waits again.
			until := decision.WaitUntil
			if c.heartbeatDue > 0 {
				until = min(until, c.heartbeatDue)
			}
			c.wait(ctx, until)
			continue
		case ActionHold, ActionChallenge:
			if c.minted == nil && now < c.notBefore {
				c.wait(ctx, c.notBefore)
				continue
			}
			if c.minted == nil && c.viewIncomplete(now) {
				c.wait(ctx, now+c.settings.pollInterval.Milliseconds())
				continue
			}
		default:
			c.wait(ctx, now+c.settings.pollInterval.Milliseconds())
			continue
		}
		leadership, err := c.challenge(ctx)
		if leadership != nil {
			return leadership, nil
		}
		c.lastErr = err
		if ctx.Err() != nil {
			return nil, c.abandon(ctx, ctx.Err())
		}
		if errors.Is(err, ErrNotAuthorized) || errors.Is(err, ErrMisconfigured) {
			return nil, c.abandon(ctx, err)
		}
		if errors.Is(err, ErrFenced) {
			c.logger.Info("coordination: challenge lost to a newer epoch; waiting", slog.Any("error", err))
			c.notBefore = clock.NowMillis() + c.settings.pollInterval.Milliseconds()
			continue
		}
		c.logger.Warn("coordination: challenge failed; retrying", slog.Any("error", err))
		c.wait(ctx, clock.NowMillis()+c.settings.pollInterval.Milliseconds())
	}
}

// register appends this call's registration record.
func (c *campaign) register(ctx context.Context) error {
	value := EncodeRegistration(Registration{Member: c.member, RegisteredAt: c.registeredAt})
	if err := c.transport.Append(ctx, c.partition, EncodeKey(RegistrationKey(c.role, c.member)), value); err != nil {
		return wrapf(err, nil, "register member %s for role %s on %s", c.member, c.role, c.partition)
	}
	c.registered = true
	c.appendedAt = c.settings.clock.NowMillis()
	return nil
}

// heartbeat writes this member's heartbeat when heartbeats are on
// ([WithHeartbeatInterval]) and one is due: the first right after the
// registration is seen (an entry with a heartbeat can lapse, one without
// never does), then one every heartbeat interval. A waiting standby so
// shows that it is alive without a new registration, which would move it
// to the tail. A heartbeat that fails is logged and tried again one poll
// interval later; the member's rank lapses only when none lands for the
// roster lapse.
func (c *campaign) heartbeat(ctx context.Context, now int64) {
	interval := c.settings.lease.HeartbeatInterval()
	if interval <= 0 || now < c.heartbeatDue {
		return
	}
	value := EncodeHeartbeat(Heartbeat{Member: c.member, SeenAt: now})
	if err := c.transport.Append(ctx, c.partition, EncodeKey(HeartbeatKey(c.role, c.member)), value); err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("coordination: heartbeat failed; retrying", slog.Any("error", err))
		}
		c.heartbeatDue = now + c.settings.pollInterval.Milliseconds()
		return
	}
	c.heartbeated = true
	c.heartbeatDue = now + interval.Milliseconds()
}

// read brings the fold up to date and returns the role state.
func (c *campaign) read(ctx context.Context) (RoleState, error) {
	var records []StateRecord
	if c.follower != nil {
		got, next, err := c.follower.ReadPartitionFrom(ctx, c.partition, c.next)
		if err != nil {
			return RoleState{}, err
		}
		records, c.next = got, next
	} else {
		got, err := c.transport.ReadPartition(ctx, c.partition)
		if err != nil {
			return RoleState{}, err
		}
		records = got
		c.builder = NewRoleStateBuilder(c.role)
	}
	for _, record := range records {
		if err := c.builder.Apply(record); err != nil && !c.skipped[record.Offset] {
			c.skipped[record.Offset] = true
			c.logger.Warn("coordination: skipped a record of the state partition that does not decode", slog.Any("error", err))
		}
	}
	return c.builder.Build(), nil
}

// challenge mints an epoch, unless an earlier challenge of this call holds
// one already, and writes the first lease under it. It returns the
// leadership on success, and otherwise the error; a fenced write drops the
// minted epoch.
func (c *campaign) challenge(ctx context.Context) (*Leadership, error) {
	if c.minted == nil {
		// One bounded attempt: a challenge that the cluster cannot serve
		// now goes back to reading the partition, and mints again only if
		// the view that justified it still stands. An unbounded retry would
		// land its InitProducerId whenever the cluster recovers, and fence
		// whoever holds the role by then.
		bound := c.mintAttemptBound()
		attempt, cancel := withClockTimeout(ctx, c.settings.clock, bound)
		token, err := c.transport.AcquireEpoch(attempt, c.role)
		cancel()
		if err != nil {
			if ctx.Err() == nil && attempt.Err() != nil {
				c.mintTimeouts++ // the next attempt waits twice as long
				return nil, wrapf(err, nil, "mint the epoch of role %s: the attempt gave up after %v; the member reads the partition again before it tries again", c.role, bound)
			}
			return nil, wrapf(err, nil, "mint the epoch of role %s", c.role)
		}
		c.minted = &token
		c.mintTimeouts = 0
	}
	token := *c.minted
	lease := c.settings.lease.Grant(c.member, token, c.settings.clock.NowMillis())
	if err := c.transport.WriteLease(ctx, c.partition, token, EncodeKey(LeaseKey(c.role)), EncodeLease(lease)); err != nil {
		if errors.Is(err, ErrFenced) || errors.Is(err, ErrProducerLost) {
			c.minted = nil // no later write under this epoch can land
		}
		return nil, wrapf(err, nil, "write the first lease of role %s under %s", c.role, token)
	}
	return startLeadership(c, lease), nil
}

// mintAttemptBound bounds one InitProducerId attempt of a challenge: the
// poll interval, and at least minMintAttempt so that a cold client on a
// loaded machine can finish a healthy mint, doubled for each attempt in a
// row that ran out of it, up to the lease duration: a cluster whose mints
// are slow still serves one, and a challenge never waits longer than a
// lease for a mint whose reason may be gone.
func (c *campaign) mintAttemptBound() time.Duration {
	bound := max(c.settings.pollInterval, minMintAttempt)
	for range min(c.mintTimeouts, 16) {
		bound *= 2
	}
	return max(min(bound, c.settings.lease.duration), minMintAttempt)
}

// minMintAttempt is the floor of mintAttemptBound.
const minMintAttempt = 500 * time.Millisecond

// namedByLease decides what this call does about a lease that names its own
// member, which this call did not write. Three processes can have written
// it, and only the coordinator's token and the lease's renewals tell them
// apart:
//
//   - A member that was deposed since: the transaction coordinator holds
//     another token than the lease's, so another member minted after this
//     lease, and its own lease is on the way. The member is a standby now, at
//     the rank of this call's registration (the tail of the roster): no
//     failback. It evaluates as if the lease named nobody.
//   - A live process with the same member id: it renews the lease. Seen
//     renewed while this call waits, it ends the call with an error that
//     wraps [ErrDuplicateMember], instead of fencing that process.
//   - An earlier incarnation of this member (a crash, a restart, or a
//     leadership of this process that ended without a fence): the
//     coordinator still holds the lease's token, and nobody renews it. The
//     member takes the role back under a new epoch: at once when this
//     process minted the lease's token, and otherwise once the lease went
//     one renew interval plus one poll interval without a renewal, or
//     expired.
func (c *campaign) namedByLease(ctx context.Context, state RoleState, now int64, decision Decision) (Decision, error) {
	lease := *state.Lease
	if decision.Action != ActionHold && decision.Action != ActionChallenge {
		return decision, nil
	}
	describeCtx, cancel := withClockTimeout(ctx, c.settings.clock, c.mintAttemptBound())
	current, held, err := c.transport.DescribeEpoch(describeCtx, c.role)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return decision, ctx.Err()
		}
		if errors.Is(err, ErrNotAuthorized) {
			return decision, wrapf(err, nil, "describe the epoch of role %s", c.role)
		}
		// The coordinator cannot tell now; the quiet test below still
		// tells a live duplicate from an earlier incarnation.
		c.logger.Warn("coordination: could not ask the coordinator whether the lease that names this member is superseded; watching the lease for a renewal instead",
			slog.Any("error", err))
		held = false
	}
	if held && current != lease.Token {
		if c.namedLease == nil || c.namedLease.Token != lease.Token {
			c.logger.Info("coordination: the lease names this member, but the coordinator holds a newer token: competing as a standby",
				slog.String("lease_token", lease.Token.String()), slog.String("coordinator_token", current.String()))
		}
		c.namedLease, c.namedLeaseSeenAt = &lease, now
		return evaluateDeposed(state, c.member, now, c.settings.lease), nil
	}
	if recorder, ok := c.transport.(MintRecorder); ok && recorder.Minted(lease.Token) {
		return Decision{Action: ActionChallenge}, nil
	}
	switch {
	case c.namedLease == nil || c.namedLease.Token != lease.Token:
		c.namedLease, c.namedLeaseSeenAt = &lease, now
	case lease.GrantedAt > c.namedLease.GrantedAt:
		return decision, fmt.Errorf("coordination: member %s of role %s: the lease that names this member was renewed under %s while this call waited (granted at %d ms, then at %d ms): "+
			"another live process uses this member id, and this call would fence it: %w", c.member, c.role, lease.Token, c.namedLease.GrantedAt, lease.GrantedAt, ErrDuplicateMember)
	}
	quietUntil := c.namedLeaseSeenAt + (c.settings.lease.renewInterval + c.settings.pollInterval).Milliseconds()
	if decision.Action == ActionHold && now < quietUntil {
		return Decision{Action: ActionWait, WaitUntil: quietUntil}, nil
	}
	return Decision{Action: ActionChallenge}, nil
}

// ownLease is what a lease that names this call's member is, as the loop
// and TryAcquire treat it (classifyOwnLease).
type ownLease int

const (
	ownLeaseNone    ownLease = iota // no lease, or one of another member
	ownLeaseDeposed                 // its token was fenced: a successor minted (FenceRecorder)
	ownLeaseEarlier                 // an earlier incarnation, which the challenge fences (the specification)
	ownLeaseWatch                   // WithDuplicateMemberCheck: tell a live duplicate first
)

// classifyOwnLease says what the lease of state is to this call: a lease
// that names the member under a token this process saw fenced names a
// deposed member, who competes as a standby (no failback); otherwise, by
// the specification, it came from an earlier incarnation of the member,
// because this call holds no epoch yet, and the challenge fences it at
// once, for one epoch; with the duplicate-member watch on, the call first
// tells an earlier incarnation from a second live process.
func (c *campaign) classifyOwnLease(state RoleState) ownLease {
	switch {
	case state.Lease == nil || state.Lease.Member != c.member:
		return ownLeaseNone
	case c.sawFenced(state.Lease.Token):
		return ownLeaseDeposed
	case c.settings.duplicateCheck:
		return ownLeaseWatch
	}
	return ownLeaseEarlier
}

// sawFenced reports whether this process saw a write under token refused
// as fenced: the transport says so ([FenceRecorder]), or the [Elector]
// that runs the call does.
func (c *campaign) sawFenced(token FencingToken) bool {
	if c.settings.fenced != nil && *c.settings.fenced == token {
		return true
	}
	recorder, ok := c.transport.(FenceRecorder)
	return ok && recorder.Fenced(token)
}

// evaluateDeposed evaluates a role whose lease names member under a token
// that is known superseded: as if the lease named nobody, with its
// deadline kept, so the member ranks as the standby of its registration
// (the tail of the roster: no failback) and waits for the deadline.
func evaluateDeposed(state RoleState, member MemberID, now int64, config LeaseConfig) Decision {
	lease := *state.Lease
	state.Lease = &Lease{Token: lease.Token, GrantedAt: lease.GrantedAt, Deadline: lease.Deadline}
	return Evaluate(state, member, now, config)
}

// withClockTimeout is context.WithTimeout on the campaign's clock, so that a
// test that drives a ManualClock drives the bound too. The context ends
// with context.DeadlineExceeded as its error when the extent passes on
// clock. Its goroutine ends when the context ends; the caller calls cancel.
func withClockTimeout(parent context.Context, clock Clock, extent time.Duration) (context.Context, context.CancelFunc) {
	if _, system := clock.(SystemClock); system {
		return context.WithTimeout(parent, extent)
	}
	ctx, cancel := context.WithCancelCause(parent)
	expired := clock.After(extent)
	go func() {
		select {
		case <-expired:
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	return &deadlineContext{ctx}, func() { cancel(context.Canceled) }
}

// deadlineContext reports the cause of its end as its error, so that a
// bound that passed on a ManualClock reads as context.DeadlineExceeded.
type deadlineContext struct{ context.Context }

func (c *deadlineContext) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}

// wait parks until the instant untilMillis, one poll interval, a wake-up
// from the follower, or the end of ctx, whichever comes first.
func (c *campaign) wait(ctx context.Context, untilMillis int64) {
	clock := c.settings.clock
	extent := time.Duration(untilMillis-clock.NowMillis()) * time.Millisecond
	extent = min(extent, c.settings.pollInterval)
	select {
	case <-ctx.Done():
	case <-clock.After(extent):
	case <-c.changed:
	}
}

// abandon deregisters the member after the caller gave up the wait, except
// for a duplicate member (the key is the live process's too), and
// returns cause as it is: a wait that ended on its context returns the
// context's error itself, and the last error of the transport, which says
// why the wait never reached the cluster, goes to the log.
func (c *campaign) abandon(ctx context.Context, cause error) error {
	if c.lastErr != nil && cause == ctx.Err() {
		c.logger.Warn("coordination: the wait for the role ended on its context", slog.Any("error", cause), slog.Any("last_transport_error", c.lastErr))
	}
	// A duplicate member shares its registration key with the live
	// process, so a tombstone would take that process off the roster.
	if c.registered && !errors.Is(cause, ErrDuplicateMember) {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
		defer cancel()
		if err := c.transport.Append(cleanup, c.partition, EncodeKey(RegistrationKey(c.role, c.member)), nil); err != nil {
			c.logger.Warn("coordination: deregistration after a cancelled wait failed", slog.Any("error", err))
		}
		if c.heartbeated {
			if err := c.transport.Append(cleanup, c.partition, EncodeKey(HeartbeatKey(c.role, c.member)), nil); err != nil {
				c.logger.Warn("coordination: the tombstone of the heartbeat failed; it counts for nothing without a registration", slog.Any("error", err))
			}
		}
	}
	return cause
}

// cleanupBound bounds a write that the package makes after the caller's
// context ended: a resignation's tombstones, a deregistration. With the
// transport's own bound on a write in flight (250 ms for [KafkaTransport])
// such a call returns within a second of its context.
const cleanupBound = 600 * time.Millisecond
