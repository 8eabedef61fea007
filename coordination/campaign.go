package coordination

// The loop of a campaign: AcquireLeadership, and the steps that its loop
// carries out (register, read, heartbeat, describe the epoch, challenge,
// wait, abandon). What it does next, the rules decide: campaign_rules.go.

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
// passes before this member wins the role, and deregisters the member. The
// context bounds only the wait: the leadership outlives it.
//
// A role state that names this member (an earlier incarnation's: this
// call holds no epoch yet) takes the path of a challenge, whose new epoch
// fences that incarnation.
//
// It writes nothing and returns an error for a nil transport, the zero
// [Role] or [MemberID] and an invalid option, [ErrMisconfigured] for a
// lease duration other than the transport's policy, and
// [ErrDuplicateCampaign] while this process campaigns for or holds the
// role as the member over the same transport. An error that wraps
// [ErrNotAuthorized] or [ErrMisconfigured] ends it at once. The loop, the lease policy and the
// options that change them: see the package doc's "The campaign in detail".
func AcquireLeadership(ctx context.Context, transport Transport, role Role, member MemberID, options ...Option) (*Leadership, error) {
	c, err := newCampaign(ctx, "AcquireLeadership", transport, role, member, options)
	if err != nil {
		return nil, err
	}
	defer c.releaseClaim() // unless the leadership took it over
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
	extended, _ := extensionsOf(transport)
	var policy LeaseConfig // the transport's lease policy: the default lease, and the only duration
	if extended != nil {
		policy = extended.LeaseConfig()
	}
	s, err := newSettingsOver(options, policy)
	if err != nil {
		return nil, err
	}
	if policy != (LeaseConfig{}) && s.lease.duration != policy.duration {
		return nil, fmt.Errorf("coordination: %s: the options give a lease duration of %v, and the transport's lease policy %v (its LeaseConfig; over Kafka the transaction timeout of every role): "+
			"one lease has one duration; drop the lease options, or build the transport with the lease you want: %w", op, s.lease.duration, policy.duration, ErrMisconfigured)
	}
	partition, err := s.partition(role)
	if err != nil {
		return nil, err
	}
	release := func() {}
	if !s.claimed {
		if release, err = claimCampaign(op, op+" (or the leadership it returned)", transport, partition.Topic, role, member); err != nil {
			return nil, err
		}
	}
	if err := checkTopicForCampaign(ctx, transport, extended, role, s, options); err != nil {
		release()
		return nil, err
	}
	c := &campaign{
		transport: transport,
		extended:  extended,
		role:      role,
		member:    member,
		partition: partition,
		options:   options,
		settings:  s,
		rules:     s.campaignRules(),
		logger:    s.logger.With(slog.String("role", role.String()), slog.String("member", member.String()), slog.String("partition", partition.String())),
		skipped:   make(map[int64]bool),
		release:   release,
	}
	return c, nil
}

// checkTopicForCampaign checks the state topic for newCampaign when the
// transport can: only a refused configuration stops the call.
func checkTopicForCampaign(ctx context.Context, transport Transport, extended ExtendedTransport, role Role, s *settings, options []Option) error {
	if extended != nil {
		// A check that passed a moment ago answers for this one.
		if err := checkStateTopicForCampaign(ctx, transport, extended, s, options); err != nil {
			// Only a refused configuration stops the call: the check needs
			// permissions (DESCRIBE_CONFIGS over Kafka) that a member may
			// lack without harm.
			if errors.Is(err, ErrMisconfigured) {
				return err
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%w (the check of the state topic failed: %v)", ctx.Err(), err) //nolint:errorlint // the call ended on its context; the check's error is said, not wrapped
			}
			s.logger.Warn("coordination: the check of the state topic failed; waiting for the role all the same",
				slog.String("role", role.String()), slog.Any("error", err))
		}
	}
	return nil
}

// campaign is the state of one AcquireLeadership call. It lives on the
// caller's goroutine and starts none of its own. The rules of
// campaign_rules.go decide each of its steps; the methods here carry them
// out.
type campaign struct {
	transport Transport
	extended  ExtendedTransport // the transport's extensions (extensionsOf); nil for a plain Transport
	role      Role
	member    MemberID
	partition TopicPartition
	options   []Option // as the caller passed them, for a check of the state topic
	settings  *settings
	rules     campaignRules
	logger    *slog.Logger

	follower    partitionFollower // nil for a poll-only transport
	changed     <-chan struct{}   // wake-ups from the follower
	builder     *RoleStateBuilder
	next        int64           // the offset the follower reads from next
	incarnation uint64          // the log that builder folds (ExtendedTransport.TopicIncarnation)
	skipped     map[int64]bool  // offsets of malformed records already logged
	leases      leaseHistory    // the newest lease record and the one before it (an offer: leadership_transfer.go)
	beats       heartbeatOffset // the offset of the member's newest heartbeat record (campaign_duplicate.go)

	registeredAt int64 // the RegisteredAt of this call's registration
	registered   bool  // the append of that registration succeeded
	appendedAt   int64 // when it succeeded, in ms since the Unix epoch
	minted       *FencingToken
	notBefore    int64 // no challenge before this instant, in ms on the clock's monotonic reading (monoMillis); 0 for none

	lastErr error // the last error of the transport, for the error of a wait that ends

	memory campaignMemory // the rules' memory (decideCampaign)

	heartbeatDue int64 // the instant of the next heartbeat, in ms on the clock's monotonic reading; 0 for none yet
	wallShift    int64 // NowMillis − monoMillis at the newest read: converts the two instants above for the rules
	heartbeated  bool  // a heartbeat of this member was written

	mintTimeouts int // mint attempts in a row that ran out of their bound

	release func() // releases the claim of the campaign (campaign_claims.go); the leadership takes it over
}

// releaseClaim releases the claim of a campaign that returns no
// leadership.
func (c *campaign) releaseClaim() {
	if c.release != nil {
		c.release()
		c.release = nil
	}
}

// run is the loop of AcquireLeadership: it registers the member, reads
// the partition, and carries out what the rules decide on each read
// (decideCampaign), until a challenge wins or the rules or the context end
// the call.
func (c *campaign) run(ctx context.Context) (*Leadership, error) {
	clock := c.settings.clock
	if follower := followerOfRole(c.extended, c.partition, c.role); follower != nil {
		changed, stop := follower.WatchPartition(c.partition)
		defer stop()
		c.follower, c.changed = follower, changed
		c.incarnation = c.topicIncarnation()
	}
	c.builder, c.leases, c.beats = NewRoleStateBuilder(c.role), leaseHistory{}, heartbeatOffset{}
	if err := c.watchBeforeRegister(ctx); err != nil { // WithDuplicateMemberCheck: campaign_duplicate.go
		return nil, c.abandon(ctx, err)
	}
	c.registeredAt = clock.NowMillis()
	for {
		if err := ctx.Err(); err != nil {
			return nil, c.abandon(ctx, err)
		}
		if !c.registered {
			if err := c.register(ctx); err != nil {
				if err := c.fail(ctx, stageRegister, err); err != nil {
					return nil, err
				}
				continue
			}
		}
		state, err := c.read(ctx)
		if errors.Is(err, errTopicRecreated) {
			continue // registers again, on the new log
		}
		if err != nil {
			if err := c.fail(ctx, stageRead, err); err != nil {
				return nil, err
			}
			continue
		}
		now := clock.NowMillis()
		c.wallShift = now - monoMillis(clock)
		var epoch epochAnswer
		step := c.decide(state, epoch, now)
		for step.action == campaignHeartbeat || step.action == campaignDescribeEpoch {
			// A step on the side: carry it out, and decide again on the
			// same read.
			if step.action == campaignHeartbeat {
				c.heartbeat(ctx, now)
			} else if epoch = c.describeEpoch(ctx); ctx.Err() != nil {
				return nil, c.abandon(ctx, ctx.Err())
			}
			step = c.decide(state, epoch, now)
		}
		if step.notes&noteRivalGivenUp != 0 {
			if err := c.unwrittenMint(epoch.current, now); err != nil {
				return nil, c.abandon(ctx, err)
			}
		}
		if step.notes&noteFencerUnwritten != 0 {
			if err := c.unwrittenMint(c.memory.fencer.token, now); err != nil {
				return nil, c.abandon(ctx, err)
			}
		}
		switch step.action {
		case campaignStop:
			return nil, c.abandon(ctx, step.err)
		case campaignRegister:
			c.registeredAt, c.registered, c.heartbeatDue = now, false, 0
		case campaignAppendAgain:
			c.registered = false
		case campaignWait:
			c.wait(ctx, step.until)
		case campaignChallenge:
			leadership, err := c.challenge(ctx, epoch)
			if leadership != nil {
				return leadership, nil
			}
			if err := c.fail(ctx, stageChallenge, err); err != nil {
				return nil, err
			}
		}
	}
}

// decide asks the rules what to do on state, read at now, with epoch the
// coordinator's answer on this read, keeps the memory that they return,
// and logs their notes.
func (c *campaign) decide(state RoleState, epoch epochAnswer, now int64) campaignStep {
	view := c.view(state, epoch)
	step := decideCampaign(state, c.member, view, c.rules, now)
	c.memory = step.memory
	c.note(step, state, view, now)
	return step
}

// view gathers what the rules read beside state: this call's own
// registration and epoch, what the transport and the Elector know of the
// lease's token and of the partition's stable offsets, epoch, and the
// rules' memory.
func (c *campaign) view(state RoleState, epoch epochAnswer) campaignView {
	view := campaignView{
		role:         c.role,
		partition:    c.partition,
		registeredAt: c.registeredAt,
		appendedAt:   c.appendedAt,
		minted:       c.minted != nil,
		notBefore:    c.onWall(c.notBefore),
		heartbeatDue: c.onWall(c.heartbeatDue),
		epoch:        epoch,
		memory:       c.memory,
	}
	if lease := state.Lease; lease != nil && lease.Member == c.member {
		view.leaseFenced = c.sawFenced(lease.Token)
		view.leaseMinted = c.extended != nil && c.extended.Minted(lease.Token)
		view.priorLease = c.leases.priorOf(*lease)
		view.leaseOffset, view.leaseOffsetKnown = c.leases.offsetOf(*lease)
	}
	view.heartbeatOffset, view.heartbeatOffsetKnown = c.beats.offset, c.beats.known
	if c.extended != nil && epoch.asked && epoch.held {
		minted, pending := c.extended.LateMint(c.role, epoch.current)
		view.ownMint = minted || pending
	}
	if c.extended != nil {
		view.stable.stable, view.stable.high, view.stable.reported = c.extended.StableOffsets(c.partition)
	}
	return view
}

// onWall converts a local instant of the campaign (notBefore,
// heartbeatDue: monotonic, so that a step of the wall clock delays neither)
// into the wall instant of the rules at the newest read; 0 stays 0.
func (c *campaign) onWall(mono int64) int64 {
	if mono == 0 {
		return 0
	}
	return mono + c.wallShift
}

// note logs what a step of the rules found.
func (c *campaign) note(step campaignStep, state RoleState, view campaignView, now int64) {
	notes := step.notes
	if notes&noteRegistrationRemoved != 0 {
		c.logger.Warn("coordination: this member's registration was removed from the roster; registering again, at the tail")
	}
	if notes&noteRegistrationInvisible != 0 {
		c.logger.Warn("coordination: own registration still not visible; appending it again",
			slog.Duration("waited", time.Duration(now-c.appendedAt)*time.Millisecond))
	}
	if notes&noteRankLapsed != 0 {
		entry, _ := state.Entry(c.member)
		c.logger.Warn("coordination: this member's rank lapsed (no heartbeat landed for the roster lapse); registering again, at the tail",
			slog.Int64("last_seen", entry.LastSeen), slog.Duration("roster_lapse", c.settings.lease.RosterLapse()))
	}
	if notes&noteEpochUnknown != 0 {
		// The coordinator cannot tell now; the quiet test still tells a
		// live duplicate from an earlier incarnation.
		c.logger.Warn("coordination: could not ask the coordinator whether the lease that names this member is superseded; watching the lease for a renewal instead",
			slog.Any("error", view.epoch.err))
	}
	if notes&noteLeaseSuperseded != 0 {
		c.logger.Info("coordination: the lease names this member, but the coordinator holds a newer token: competing as a standby",
			slog.String("lease_token", state.Lease.Token.String()), slog.String("coordinator_token", view.epoch.current.String()))
	}
	if notes&noteViewHeld != 0 {
		c.logger.Info("coordination: an open transaction hides records past the last stable offset; holding the challenge",
			slog.Int64("last_stable_offset", c.memory.stuckStable), slog.Int64("high_watermark", view.stable.high))
	}
	if notes&noteRivalMint != 0 {
		c.logger.Info("coordination: the coordinator holds a newer token than the expired lease: another challenger minted; waiting for its first lease",
			slog.String("lease_token", state.Lease.Token.String()), slog.String("coordinator_token", view.epoch.current.String()),
			slog.Int64("challenge_not_before", c.memory.rival.until))
	}
	if notes&noteRivalGivenUp != 0 {
		c.logger.Warn("coordination: no lease of the other challenger's mint landed for a lease duration plus this rank's stagger; challenging: "+
			"a challenger died between its mint and its first lease, or another application uses this role name (its transactional id) on the cluster with another state topic",
			slog.String("coordinator_token", view.epoch.current.String()), slog.String("topic", c.partition.Topic))
	}
	if notes&noteFencerUnwritten != 0 {
		c.logger.Warn("coordination: no lease of the token that fenced this member's leadership came to the state topic by the lease's deadline; challenging: "+
			"a challenger died between its mint and its first lease, or another application uses this role name (its transactional id) on the cluster with another state topic",
			slog.String("fencer_token", c.memory.fencer.token.String()), slog.String("topic", c.partition.Topic))
	}
	if notes&noteViewGivenUp != 0 {
		c.logger.Warn("coordination: the last stable offset has not moved for a lease duration plus the abort sweep; challenging on the view it gives",
			slog.Int64("last_stable_offset", c.memory.stuckStable), slog.Int64("high_watermark", view.stable.high))
	}
}

// fail carries out what the rules decide after a transport call of stage
// failed with err (decideFailure): it returns the error that ends the call,
// and nil when the loop goes on. A call whose context ended returns the
// context's error itself.
func (c *campaign) fail(ctx context.Context, stage campaignStage, err error) error {
	c.lastErr = err
	if ctx.Err() != nil {
		return c.abandon(ctx, ctx.Err())
	}
	now := c.settings.clock.NowMillis()
	step := decideFailure(stage, err, c.rules, now)
	switch step.action {
	case campaignStop:
		return c.abandon(ctx, step.err)
	case campaignRead:
		c.logger.Info("coordination: challenge lost to a newer epoch; waiting", slog.Any("error", err))
		c.notBefore = step.notBefore - now + monoMillis(c.settings.clock)
	default:
		c.logger.Warn("coordination: "+failedCalls[stage]+" failed; retrying", slog.Any("error", err))
		c.wait(ctx, step.until)
	}
	return nil
}

// failedCalls names the call of each stage in the log of a failure.
var failedCalls = [...]string{
	stageRegister:  "registration",
	stageRead:      "read of the state partition",
	stageChallenge: "challenge",
}

// describeEpoch asks the coordinator for the role's token, bounded like a
// mint attempt, for the duplicate-member watch (decideNamedLease).
func (c *campaign) describeEpoch(ctx context.Context) epochAnswer {
	describeCtx, cancel := withClockTimeout(ctx, c.settings.clock, c.mintAttemptBound())
	current, held, err := c.transport.DescribeEpoch(describeCtx, c.role)
	cancel()
	return epochAnswer{asked: true, current: current, held: held, err: err}
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

// heartbeat writes this member's heartbeat, which the rules found due
// (heartbeats on, [WithHeartbeatInterval]): the first right after the
// registration is seen (an entry with a heartbeat can lapse, one without
// never does), then one every heartbeat interval. A waiting standby so
// shows that it is alive without a new registration, which would move it
// to the tail. A heartbeat that fails is logged and tried again one poll
// interval later; the member's rank lapses only when none lands for the
// roster lapse.
func (c *campaign) heartbeat(ctx context.Context, now int64) {
	interval := c.settings.lease.HeartbeatInterval()
	value := EncodeHeartbeat(Heartbeat{Member: c.member, SeenAt: now})
	if err := c.transport.Append(ctx, c.partition, EncodeKey(HeartbeatKey(c.role, c.member)), value); err != nil {
		if ctx.Err() == nil {
			c.logger.Warn("coordination: heartbeat failed; retrying", slog.Any("error", err))
		}
		c.heartbeatDue = now - c.wallShift + c.settings.pollInterval.Milliseconds()
		return
	}
	c.heartbeated = true
	c.heartbeatDue = now - c.wallShift + interval.Milliseconds()
}

// read brings the fold up to date and returns the role state. It returns
// errTopicRecreated when the transport saw the state topic deleted and
// created again (ExtendedTransport.TopicIncarnation): the fold started over
// (restartFold), and the member registers again before it reads.
func (c *campaign) read(ctx context.Context) (RoleState, error) {
	var records []StateRecord
	if c.follower != nil {
		if now := c.topicIncarnation(); now != c.incarnation {
			return RoleState{}, c.restartFold(ctx, now)
		}
		got, next, err := c.follower.ReadPartitionFrom(ctx, c.partition, c.next)
		if err != nil {
			return RoleState{}, err
		}
		if now := c.topicIncarnation(); now != c.incarnation {
			return RoleState{}, c.restartFold(ctx, now) // the records may be of either log
		}
		records, c.next = got, next
	} else {
		got, err := c.transport.ReadPartition(ctx, c.partition)
		if err != nil {
			return RoleState{}, err
		}
		records = got
		c.builder, c.leases, c.beats = NewRoleStateBuilder(c.role), leaseHistory{}, heartbeatOffset{}
	}
	for _, record := range records {
		c.leases.apply(c.role, record)
		c.beats.apply(c.role, c.member, record)
		if err := c.builder.Apply(record); err != nil && !c.skipped[record.Offset] {
			c.skipped[record.Offset] = true
			c.logger.Warn("coordination: skipped a record of the state partition that does not decode", slog.Any("error", err))
		}
	}
	return c.builder.Build(), nil
}

// unwrittenMint records a token under which no member of the state topic
// wrote a lease while the call waited for one (the token that fenced this
// member, by the fenced lease's deadline: watchFencer; a rival's mint, for
// a lease duration plus the stagger: watchRival), and returns the error that
// stops the call when this process saw such a mint of the role on the
// topic before, within unwrittenMintWindow lease durations: one is a
// challenger that died between its mint and its lease; two are the duel of
// two applications that use one role name on one cluster, each fencing the
// other's holder from its own state topic.
func (c *campaign) unwrittenMint(token FencingToken, nowMillis int64) error {
	window := unwrittenMintWindow * c.settings.lease.duration.Milliseconds()
	previous, ok := recordUnwrittenMint(c.transport, c.partition.Topic, c.role, token, nowMillis, window)
	if !ok {
		return nil
	}
	return &ForeignEpochError{Role: c.role, Topic: c.partition.Topic, Tokens: []FencingToken{previous, token}}
}

// errTopicRecreated is what read returns after the fold started over on a
// state topic that was deleted and created again; the loop registers again.
var errTopicRecreated = errors.New("coordination: the state topic was created again")

// topicIncarnation returns the transport's count of the times the state
// topic was created again under its reads (ExtendedTransport), 0 for a
// transport that cannot tell.
func (c *campaign) topicIncarnation() uint64 {
	if c.extended != nil {
		return c.extended.TopicIncarnation(c.partition)
	}
	return 0
}

// restartFold starts the campaign over on the log of a state topic that
// was deleted and created again (incarnation is the transport's count):
// the fold reads from offset 0 of the new log, the member's registration
// and heartbeat, which the old log held, are written again, and the rules
// forget what they learnt of the old log. No challenge comes before one
// lease duration: a live holder renews within its renew interval, and its
// next lease lands in the new log, which the new fold cannot know before.
// It checks the state topic again first, without the memory of the
// campaigns' checks: a topic created with another partition count stops
// the call with ErrMisconfigured. Otherwise it returns errTopicRecreated.
func (c *campaign) restartFold(ctx context.Context, incarnation uint64) error {
	now := c.settings.clock.NowMillis()
	c.logger.Warn("coordination: the state topic was deleted and created again (its topic id changed): the fold of the role starts over from the new log, and this member registers again")
	c.incarnation = incarnation
	c.builder, c.next, c.skipped = NewRoleStateBuilder(c.role), 0, make(map[int64]bool)
	c.leases, c.beats = leaseHistory{}, heartbeatOffset{}
	c.registered, c.registeredAt, c.appendedAt = false, now, 0
	c.heartbeated, c.heartbeatDue = false, 0
	c.memory = campaignMemory{}
	c.notBefore = max(c.notBefore, now+c.settings.lease.duration.Milliseconds())
	if c.extended != nil {
		if err := c.extended.CheckStateTopic(ctx, c.options...); errors.Is(err, ErrMisconfigured) {
			return err
		} else if err != nil && ctx.Err() == nil {
			c.logger.Warn("coordination: the check of the state topic created again failed; waiting for the role all the same", slog.Any("error", err))
		}
	}
	return errTopicRecreated
}

// challenge mints an epoch, unless an earlier challenge of this call holds
// one already, and writes the first lease under it. It returns the
// leadership on success, and otherwise the error; a fenced write drops the
// minted epoch.
//
// With the rival-mint watch on, a mint asked after the coordinator's
// answer on this read (seen) resends no InitProducerId once a rival minted
// over that token (ExtendedTransport.AcquireEpochUnless): it fails as fenced, and the next read
// waits for the rival's lease (watchRival).
func (c *campaign) challenge(ctx context.Context, seen epochAnswer) (*Leadership, error) {
	if c.minted == nil {
		// One bounded attempt: a challenge that the cluster cannot serve
		// now goes back to reading the partition, and mints again only if
		// the view that justified it still stands. An unbounded retry would
		// land its InitProducerId whenever the cluster recovers, and fence
		// whoever holds the role by then.
		bound := c.mintAttemptBound()
		attempt, cancel := withClockTimeout(ctx, c.settings.clock, bound)
		var token FencingToken
		var err error
		if c.extended != nil && c.rules.rivalWatch && seen.asked && seen.held && seen.err == nil {
			token, err = c.extended.AcquireEpochUnless(attempt, c.role, seen.current)
		} else {
			token, err = c.transport.AcquireEpoch(attempt, c.role)
		}
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
	grantMono := monoMillis(c.settings.clock) // the local waits of the leadership run from it
	lease := c.settings.lease.Grant(c.member, token, c.settings.clock.NowMillis())
	if err := c.transport.WriteLease(ctx, c.partition, token, EncodeKey(LeaseKey(c.role)), EncodeLease(lease)); err != nil {
		if !epochServesAgain(err) {
			c.minted = nil
		}
		return nil, wrapf(err, nil, "write the first lease of role %s under %s", c.role, token)
	}
	return startLeadership(c, lease, grantMono), nil
}

// mintAttemptBound is the bound of the next mint attempt of this call
// (campaign_rules.go).
func (c *campaign) mintAttemptBound() time.Duration {
	return mintAttemptBound(c.settings.pollInterval, c.settings.lease.duration, c.mintTimeouts)
}

// sawFenced reports whether this process saw a write under token refused
// as fenced: the transport says so ([ExtendedTransport.Fenced]), or the [Elector]
// that runs the call does.
func (c *campaign) sawFenced(token FencingToken) bool {
	if c.settings.fenced != nil && *c.settings.fenced == token {
		return true
	}
	return c.extended != nil && c.extended.Fenced(token)
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
	if c.lastErr != nil && cause == ctx.Err() { //nolint:errorlint // the context's own error, returned as it is
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
