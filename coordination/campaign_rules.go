package coordination

// The rules of a campaign: what one call of AcquireLeadership does next,
// as pure functions beside Evaluate (decideCampaign, decideNamedLease,
// decideFailure), and what the one round of TryAcquire does (decideTry),
// with the view and the memory they read. The loop that carries their
// steps out is campaign.go, the round try_acquire.go.

import (
	"errors"
	"fmt"
	"time"
)

// campaignRules is what the rules of a campaign read of the member's
// options: the lease policy with its extensions (heartbeats and the
// resignation anchor ride in [LeaseConfig]), the poll interval, and the
// duplicate-member watch.
type campaignRules struct {
	lease          LeaseConfig
	pollInterval   time.Duration
	duplicateCheck bool // WithDuplicateMemberCheck
	rivalWatch     bool // WithRivalMintWatch
}

// campaignRules returns the rules that these settings give.
func (s *settings) campaignRules() campaignRules {
	return campaignRules{lease: s.lease, pollInterval: s.pollInterval, duplicateCheck: s.duplicateCheck, rivalWatch: s.rivalWatch}
}

// campaignView is what one call knows beside the role state when the rules
// decide: its own registration, its epoch, what the transport told it, and
// the rules' own memory. The loop builds it for every decision; it holds
// no reference that the rules could change.
type campaignView struct {
	role      Role
	partition TopicPartition // the partition of the role, for the reasons of decideTry

	registeredAt int64 // the RegisteredAt of this call's registration
	appendedAt   int64 // when its append succeeded, in ms
	minted       bool  // this call holds an epoch that it minted
	notBefore    int64 // no challenge before this instant, in ms (decideFailure)
	heartbeatDue int64 // the instant of the next heartbeat, in ms; 0 for none yet

	// leaseFenced: this process saw a write under the lease's token
	// refused as fenced ([ExtendedTransport.Fenced], or the [Elector]'s
	// withFencedToken). leaseMinted: this transport minted the lease's
	// token ([ExtendedTransport.Minted]).
	leaseFenced bool
	leaseMinted bool

	// leaseOffset is the offset of the lease record of state.Lease in the
	// partition, when leaseOffsetKnown; heartbeatOffset, that of the
	// member's newest heartbeat record, when heartbeatOffsetKnown. The
	// duplicate-member watch reads them (writtenSince).
	leaseOffset          int64
	leaseOffsetKnown     bool
	heartbeatOffset      int64
	heartbeatOffsetKnown bool

	epoch  epochAnswer   // the coordinator's answer on this read, for the duplicate-member watch
	stable stableOffsets // what a [ExtendedTransport.StableOffsets] reports of the partition

	memory campaignMemory

	// priorLease: the lease record before the newest one on the
	// partition, when the newest is state.Lease and names this member;
	// nil for none (offeredTo).
	priorLease *Lease

	// ownMint: the token that the coordinator holds (epoch.current) may be
	// this transport's own, minted by a mint attempt that gave up before
	// the coordinator answered, or still waiting for its answer
	// (ExtendedTransport.LateMint); watchRival does not wait for it.
	ownMint bool
}

// epochAnswer is what DescribeEpoch answered on the current read of the
// partition: asked is false until the loop asked; err is the error of a
// DescribeEpoch that failed (other than the end of the call's context).
type epochAnswer struct {
	asked   bool
	current FencingToken
	held    bool
	err     error
}

// stableOffsets is what a [ExtendedTransport.StableOffsets] says of the partition;
// reported is false without one, or before it read the partition.
type stableOffsets struct {
	reported     bool
	stable, high int64
}

// campaignMemory is what the rules remember from one decision to the next:
// each step returns it, updated, and the loop hands it to the next call.
type campaignMemory struct {
	ownRegistrationSeen bool   // this call's registration was in the roster once
	namedLease          *Lease // a lease naming this member that this call did not write, as first seen
	namedLeaseSeenAt    int64  // when it was first seen, in ms
	namedLeaseBar       int64  // a renewal at this offset or past it was written after namedLease was first seen; 0 for unknown (writtenSince)
	offer               Lease  // a holder's offer of the role to this member (offeredTo), by value; the zero Lease for none

	stuckStable int64 // the last stable offset that an open transaction holds
	stuckSince  int64 // when the rules first saw it held, in ms; 0 for none
	stuckHigh   int64 // the high watermark when the hold began: the hold ends once the last stable offset reaches it

	// rival is a mint of another challenger that the rules wait for
	// (watchRival); the zero value for none.
	rival rivalMint

	// fencer is what a deposed member learnt of the token that fenced its
	// lease (watchFencer).
	fencer fencerWatch
}

// fencerWatch is the coordinator's token that a deposed member found when
// it first saw the lease that names it under its fenced token: the mint
// that fenced it, or a later one. A mint of a member of this state topic
// writes its lease at once; one whose lease never lands here is another
// application's under the same role name (or a challenger that died).
type fencerWatch struct {
	asked  bool         // the coordinator was asked (or could not answer)
	token  FencingToken // its token, when newer than the fenced lease's; the zero value for none
	landed bool         // a lease under token came to the partition
	noted  bool         // noteFencerUnwritten went out once
}

// rivalMint is a token that the transaction coordinator held for the role
// while the newest lease on the partition carried an older one: another
// challenger minted it and has not yet written its first lease.
type rivalMint struct {
	token      FencingToken // the coordinator's token
	leaseToken FencingToken // the token of the expired lease it superseded
	seenAt     int64        // when the rules first saw it, in ms; 0 for none
	until      int64        // no challenge before this instant, in ms
}

// campaignAction is what the loop does next.
type campaignAction int

const (
	// campaignWait parks until campaignStep.until, one poll interval, a
	// wake-up of the follower, or the end of the call, and reads again.
	campaignWait campaignAction = iota
	// campaignRead reads the partition again at once.
	campaignRead
	// campaignRegister registers the member anew, at the tail: a new
	// registration stamped now, and the first heartbeat due at once.
	campaignRegister
	// campaignAppendAgain appends this call's registration once more,
	// with the same RegisteredAt.
	campaignAppendAgain
	// campaignHeartbeat writes the member's heartbeat, then asks the
	// rules again on the same read.
	campaignHeartbeat
	// campaignDescribeEpoch asks the coordinator for the role's token
	// (DescribeEpoch), then asks the rules again on the same read.
	campaignDescribeEpoch
	// campaignChallenge mints an epoch, unless the call holds one, and
	// writes the first lease.
	campaignChallenge
	// campaignStop ends the call with campaignStep.err.
	campaignStop
)

// String names the action, for the table test's messages.
func (a campaignAction) String() string {
	switch a {
	case campaignWait:
		return "wait"
	case campaignRead:
		return "read"
	case campaignRegister:
		return "register"
	case campaignAppendAgain:
		return "append again"
	case campaignHeartbeat:
		return "heartbeat"
	case campaignDescribeEpoch:
		return "describe epoch"
	case campaignChallenge:
		return "challenge"
	case campaignStop:
		return "stop"
	}
	return fmt.Sprintf("campaignAction(%d)", int(a))
}

// campaignNote marks what a step found that the loop logs.
type campaignNote int

const (
	noteRegistrationRemoved   campaignNote = 1 << iota // a tombstone took this call's registration away
	noteRegistrationInvisible                          // the registration stayed invisible for two lease durations
	noteRankLapsed                                     // this member's heartbeats did not land for the roster lapse
	noteLeaseSuperseded                                // first sight: the lease names this member, the coordinator holds a newer token
	noteEpochUnknown                                   // DescribeEpoch failed: the quiet test decides alone
	noteViewHeld                                       // an open transaction hides records: the challenge waits
	noteViewGivenUp                                    // it hid them for a lease duration plus the abort sweep: challenge anyway
	noteRivalMint                                      // first sight: another challenger minted after the expired lease; waiting for its lease
	noteRivalGivenUp                                   // no lease of that mint landed for a lease duration plus this rank's stagger: challenge
	noteFencerUnwritten                                // a deposed member challenges, and no lease of the token that fenced it ever landed
)

// campaignStep is one decision of the rules.
type campaignStep struct {
	action    campaignAction
	until     int64 // campaignWait: the instant, in ms
	notBefore int64 // campaignRead after a lost challenge: no challenge before it, in ms
	err       error // campaignStop: the call's error
	notes     campaignNote
	memory    campaignMemory // the rules' memory for the next decision
}

// decideCampaign decides what one call of [AcquireLeadership] does next,
// on the role state it has just read, at nowMillis. It is the rules of
// the loop around [Evaluate], and like Evaluate it reads no clock and no
// log; the loop (campaign.run) carries its steps out.
//
// In order:
//
//  1. Duplicate registration (WithDuplicateMemberCheck): another
//     registration of the member replaced this call's, which the roster
//     showed before: stop with [ErrDuplicateMember]. Without the watch the
//     call ranks on the registration that the roster shows.
//  2. Registration removed: the roster showed this call's registration,
//     and no longer shows the member: register anew, at the tail.
//  3. Registration not visible: the roster shows no registration of the
//     member, or an older one: read again one poll interval later; after
//     two lease durations, append it again.
//  4. Heartbeat (WithHeartbeatInterval): one is due: write it, then decide
//     again.
//  5. Rank lapsed (heartbeats): Evaluate says not registered: register
//     anew, at the tail.
//  6. Minted: this call holds an epoch, which fenced the holder already:
//     challenge, to write its lease.
//  7. A lease that names the member (classifyOwnLease): a deposed member
//     evaluates as a standby (evaluateDeposed); an earlier incarnation is
//     challenged at once (the specification); with the duplicate-member
//     watch, a holder's offer of a planned transfer is challenged at once
//     (offeredTo), and decideNamedLease decides the rest.
//  8. Evaluate's answer: wait until its instant (or the next heartbeat,
//     if sooner); a challenge waits for notBefore, for a view that no
//     open transaction hides (watchStable), and for the first lease of a
//     rival challenger that minted after an expired lease (watchRival),
//     then challenges.
func decideCampaign(state RoleState, member MemberID, view campaignView, rules campaignRules, nowMillis int64) campaignStep {
	memory := view.memory
	poll := nowMillis + rules.pollInterval.Milliseconds()
	entry, registered := state.Entry(member)
	switch {
	case registered && entry.RegisteredAt != view.registeredAt && memory.ownRegistrationSeen && rules.duplicateCheck:
		return campaignStep{action: campaignStop, memory: memory, err: fmt.Errorf("coordination: member %s of role %s: another registration of the same member id (registered at %d ms, this call's at %d ms) replaced this call's: "+
			"two live processes use one member id, and each would fence the other: %w", member, view.role, entry.RegisteredAt, view.registeredAt, ErrDuplicateMember)}
	case !registered && memory.ownRegistrationSeen:
		// The member has no rank (rule 1 of Evaluate), so it registers
		// again, at the tail.
		memory.ownRegistrationSeen = false
		return campaignStep{action: campaignRegister, notes: noteRegistrationRemoved, memory: memory}
	case !registered || (entry.RegisteredAt != view.registeredAt && !memory.ownRegistrationSeen):
		// An older registration would rank the member where it no longer
		// stands.
		if nowMillis-view.appendedAt >= 2*rules.lease.duration.Milliseconds() {
			return campaignStep{action: campaignAppendAgain, notes: noteRegistrationInvisible, memory: memory}
		}
		return campaignStep{action: campaignWait, until: poll, memory: memory}
	}
	memory.ownRegistrationSeen = true
	if f := memory.fencer; f.token != (FencingToken{}) && state.Lease != nil && state.Lease.Token == f.token {
		memory.fencer.landed = true
	}
	if rules.lease.HeartbeatInterval() > 0 && nowMillis >= view.heartbeatDue {
		return campaignStep{action: campaignHeartbeat, memory: memory}
	}
	decision := Evaluate(state, member, nowMillis, rules.lease)
	if decision.Action == ActionNotRegistered {
		// The rank lapsed: the others skip this member, so it joins at the
		// tail, as a recovered member does.
		memory.ownRegistrationSeen = false
		return campaignStep{action: campaignRegister, notes: noteRankLapsed, memory: memory}
	}
	if view.minted {
		return campaignStep{action: campaignChallenge, memory: memory}
	}
	var notes campaignNote
	offer := false // a holder's offer is taken (offeredTo)
	switch classifyOwnLease(state, member, view.leaseFenced, rules.duplicateCheck) {
	case ownLeaseDeposed:
		if !memory.fencer.asked {
			if !view.epoch.asked {
				return campaignStep{action: campaignDescribeEpoch, memory: memory}
			}
			memory.fencer = watchFencer(state, view.epoch)
		}
		decision = evaluateDeposed(state, member, nowMillis, rules.lease)
		if f := memory.fencer; decision.Action == ActionChallenge && f.token != (FencingToken{}) && !f.landed && !f.noted {
			notes |= noteFencerUnwritten
			memory.fencer.noted = true
		}
	case ownLeaseEarlier:
		decision = Decision{Action: ActionChallenge}
		if offered, ok := offeredTo(state, member, view, rules, nowMillis); ok {
			memory.offer, offer = offered, true
		}
	case ownLeaseWatch:
		if offered, ok := offeredTo(state, member, view, rules, nowMillis); ok {
			// A holder's planned transfer to this member: take it at
			// once (the mint fences the holder).
			if !view.epoch.asked {
				return campaignStep{action: campaignDescribeEpoch, memory: memory}
			}
			if view.epoch.err == nil && view.epoch.held && view.epoch.current == offered.Token {
				memory.offer, offer = offered, true
				decision = Decision{Action: ActionChallenge}
				break
			}
		}
		named := decideNamedLease(state, member, view, memory, rules, nowMillis, decision)
		if named.step != nil {
			return *named.step
		}
		decision, memory, notes = named.decision, named.memory, named.notes
	}
	switch decision.Action {
	case ActionWait:
		return campaignStep{action: campaignWait, until: decision.WaitUntil, notes: notes, memory: memory}.withHeartbeat(view)
	case ActionHold, ActionChallenge:
		// Hold comes only of a lease that names this member, which this
		// call did not write: the restart path challenges. An offer does
		// not wait for a complete view: the holder stopped writing, and
		// only its take-back after the transfer's bound could be hidden,
		// which this mint then fences (the transfer ends either way).
		if nowMillis < view.notBefore {
			return campaignStep{action: campaignWait, until: view.notBefore, notes: notes, memory: memory}
		}
		var hold bool
		var note campaignNote
		if !offer && !hiddenRecordsRankBehind(state, member) {
			memory, hold, note = memory.watchStable(view.stable, nowMillis, rules.lease)
		}
		if hold {
			return campaignStep{action: campaignWait, until: poll, notes: notes | note, memory: memory}
		}
		notes |= note
		rival := watchRival(state, member, view, memory, rules, nowMillis)
		if rival.step != nil {
			rival.step.notes |= notes
			return *rival.step
		}
		return campaignStep{action: campaignChallenge, notes: notes | rival.notes, memory: rival.memory}
	}
	// A deposed member whose own rank lapsed once the lease no longer
	// counts as its: read again.
	return campaignStep{action: campaignWait, until: poll, notes: notes, memory: memory}
}

// withHeartbeat brings the instant of a wait forward to the next
// heartbeat, when heartbeats are on: the heartbeat's own record wakes a
// follower once, and the member then reads, decides again and waits again.
func (s campaignStep) withHeartbeat(view campaignView) campaignStep {
	if view.heartbeatDue > 0 {
		s.until = min(s.until, view.heartbeatDue)
	}
	return s
}

// namedLeaseStep is what decideNamedLease decides: a step to take now
// (ask the coordinator, or stop), or else the decision, the memory and
// the notes that the rest of the rules go on with.
type namedLeaseStep struct {
	step     *campaignStep
	decision Decision
	memory   campaignMemory
	notes    campaignNote
}

// decideNamedLease decides, with the duplicate-member watch on, what a
// call does about a lease that names its own member, which it did not
// write. Three processes can have written it, and only the coordinator's
// token and the lease's renewals tell them apart:
//
//   - A member that was deposed since: the transaction coordinator holds
//     another token than the lease's, so another member minted after this
//     lease, and its own lease is on the way. The member is a standby now,
//     at the rank of this call's registration (the tail of the roster): no
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
//
// A renewal counts only when written after the lease was first seen
// (writtenSince, against the high watermark of that read): one that an
// open transaction hid then is the lease from now on, no duplicate.
//
// decision is Evaluate's answer, and memory the rules' memory so far. The
// step is campaignDescribeEpoch until the loop asked the coordinator on
// this read. A DescribeEpoch refused for a missing permission stops the
// call; one that failed otherwise leaves the quiet test to decide alone.
func decideNamedLease(state RoleState, member MemberID, view campaignView, memory campaignMemory, rules campaignRules, nowMillis int64, decision Decision) namedLeaseStep {
	if decision.Action != ActionHold && decision.Action != ActionChallenge {
		return namedLeaseStep{decision: decision, memory: memory}
	}
	if !view.epoch.asked {
		return namedLeaseStep{step: &campaignStep{action: campaignDescribeEpoch, memory: memory}}
	}
	lease := *state.Lease
	current, held := view.epoch.current, view.epoch.held
	var notes campaignNote
	if err := view.epoch.err; err != nil {
		if errors.Is(err, ErrNotAuthorized) {
			return namedLeaseStep{step: &campaignStep{action: campaignStop, memory: memory, err: wrapf(err, nil, "describe the epoch of role %s", view.role)}}
		}
		notes, held = noteEpochUnknown, false
	}
	if held && current != lease.Token {
		if memory.namedLease == nil || memory.namedLease.Token != lease.Token {
			notes |= noteLeaseSuperseded
		}
		memory.namedLease, memory.namedLeaseSeenAt, memory.namedLeaseBar = &lease, nowMillis, renewalBar(view)
		return namedLeaseStep{decision: evaluateDeposed(state, member, nowMillis, rules.lease), memory: memory, notes: notes}
	}
	if view.leaseMinted {
		return namedLeaseStep{decision: Decision{Action: ActionChallenge}, memory: memory, notes: notes}
	}
	switch {
	case memory.namedLease == nil || memory.namedLease.Token != lease.Token:
		memory.namedLease, memory.namedLeaseSeenAt, memory.namedLeaseBar = &lease, nowMillis, renewalBar(view)
	case lease.GrantedAt > memory.namedLease.GrantedAt && !writtenSince(view.leaseOffset, view.leaseOffsetKnown, memory.namedLeaseBar):
		// A renewal that an open transaction hid when the lease was first
		// seen: written before, by an earlier incarnation as well as by a
		// live process. It is the lease now; the quiet test goes on.
		memory.namedLease = &lease
	case lease.GrantedAt > memory.namedLease.GrantedAt:
		return namedLeaseStep{step: &campaignStep{action: campaignStop, notes: notes, memory: memory, err: fmt.Errorf("coordination: member %s of role %s: the lease that names this member was renewed under %s while this call waited (granted at %d ms, then at %d ms): "+
			"another live process uses this member id, and this call would fence it: %w", member, view.role, lease.Token, memory.namedLease.GrantedAt, lease.GrantedAt, ErrDuplicateMember)}}
	}
	quietUntil := memory.namedLeaseSeenAt + (rules.lease.renewInterval + rules.pollInterval).Milliseconds()
	if decision.Action == ActionHold && nowMillis < quietUntil {
		return namedLeaseStep{decision: Decision{Action: ActionWait, WaitUntil: quietUntil}, memory: memory, notes: notes}
	}
	return namedLeaseStep{decision: Decision{Action: ActionChallenge}, memory: memory, notes: notes}
}

// renewalBar returns the offset from which a lease record was written
// after this read: the high watermark that the transport reports, and 0
// (unknown) without a report. A record before it was in the log already,
// visible or hidden behind an open transaction (the last stable offset).
func renewalBar(view campaignView) int64 {
	if !view.stable.reported {
		return 0
	}
	return view.stable.high
}

// writtenSince reports whether a record of the member (a lease renewal, a
// heartbeat, a registration) at offset can be evidence of a live process
// under the member's id: written at bar or past it (after the watch first
// saw what names the member), or with either offset unknown (known false,
// bar 0: then every such record counts). A crashed member's last records
// that an open transaction hid are older than bar, and come to light only
// when the transaction ends: no sign of a live process. The log position
// decides, not GrantedAt or SeenAt, which are another process's clock.
func writtenSince(offset int64, known bool, bar int64) bool {
	return bar == 0 || !known || offset >= bar
}

// offeredTo reports whether the lease of state is a holder's offer of the
// role to member ([Leadership.TransferTo]), and returns it: a live lease
// that names member, which this transport did not mint, granted at or
// after this call's registration, and either remembered as an offer
// already (memory.offer, by value) or written under the same token as the
// lease before it, which named another member: the holder's. The caller
// checks the token against the coordinator's too (an offer's token is the
// current pair), and takes the role at once.
//
// This tells an offer from the lease of a second live process under the
// member's id, which decideNamedLease watches for (ErrDuplicateMember):
// every lease of that process under its token names the member, the first
// one included (its mint is newer than the lease before it), and it renews
// them. A holder writes its offer once and renews it never.
func offeredTo(state RoleState, member MemberID, view campaignView, rules campaignRules, nowMillis int64) (Lease, bool) {
	lease := state.Lease
	if lease == nil || lease.Member != member || view.leaseMinted || lease.GrantedAt < view.registeredAt || !rules.lease.Timing(*lease).LiveAt(nowMillis) {
		return Lease{}, false
	}
	if view.memory.offer == *lease {
		return *lease, true
	}
	prior := view.priorLease
	if prior == nil || prior.Token != lease.Token || prior.Member == member {
		return Lease{}, false
	}
	return *lease, true
}

// campaignStage names the step of a campaign whose transport call failed.
type campaignStage int

const (
	stageRegister  campaignStage = iota // the append of the registration
	stageRead                           // the read of the partition
	stageChallenge                      // the mint, or the first lease write
)

// decideFailure decides what a call does after a transport call of stage
// failed with err, while its context still runs (the loop returns the
// context's error itself when it ended): a missing permission
// ([ErrNotAuthorized]), and a configuration that the cluster refuses
// ([ErrMisconfigured]) at any stage, stop the call; a challenge fenced
// by a newer epoch is no win, and the call reads again and challenges no
// sooner than one poll interval later, so two challengers do not fence
// each other in turn while the winner writes its lease; any other failure
// is retried one poll interval later.
func decideFailure(stage campaignStage, err error, rules campaignRules, nowMillis int64) campaignStep {
	poll := nowMillis + rules.pollInterval.Milliseconds()
	switch {
	case errors.Is(err, ErrNotAuthorized):
		return campaignStep{action: campaignStop, err: err}
	case errors.Is(err, ErrMisconfigured):
		// A read fails so for a partition that the state topic lacks, and
		// for a topic created again that no longer matches WithPartitions;
		// a registration for INVALID_TRANSACTION_TIMEOUT to the plain
		// producer's InitProducerId, or a broker that cannot serve a
		// request of the role.
		return campaignStep{action: campaignStop, err: err}
	case stage == stageChallenge && errors.Is(err, ErrFenced):
		return campaignStep{action: campaignRead, notBefore: poll}
	}
	return campaignStep{action: campaignWait, until: poll}
}

// ownLease is what a lease that names this call's member is, as the loop
// and TryAcquire treat it (classifyOwnLease).
type ownLease int

const (
	ownLeaseNone    ownLease = iota // no lease, or one of another member
	ownLeaseDeposed                 // its token was fenced: a successor minted (ExtendedTransport.Fenced)
	ownLeaseEarlier                 // an earlier incarnation, which the challenge fences (the specification)
	ownLeaseWatch                   // WithDuplicateMemberCheck: tell a live duplicate first
)

// classifyOwnLease says what the lease of state is to member: a lease that
// names the member under a token this process saw fenced (fenced) names a
// deposed member, who competes as a standby (no failback); otherwise, by
// the specification, it came from an earlier incarnation of the member,
// because the call holds no epoch yet, and the challenge fences it at
// once, for one epoch; with the duplicate-member watch on (watch), the
// call first tells an earlier incarnation from a second live process.
func classifyOwnLease(state RoleState, member MemberID, fenced, watch bool) ownLease {
	switch {
	case state.Lease == nil || state.Lease.Member != member:
		return ownLeaseNone
	case fenced:
		return ownLeaseDeposed
	case watch:
		return ownLeaseWatch
	}
	return ownLeaseEarlier
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

// openTransactionSweep bounds how long a challenger waits for an open
// transaction that hides the newest records of its partition: the
// transaction timeout that KafkaTransport sets (the lease duration) plus
// this, the default period of Kafka's abort sweep,
// transaction.abort.timed.out.transaction.cleanup.interval.ms.
const openTransactionSweep = 10 * time.Second

// hiddenRecordsRankBehind reports whether no record that an open
// transaction hides can stand before the member's own challenge: the view
// shows no lease of the role, and the member is first in its roster. The
// last stable offset is a prefix of the partition, and the member ranks
// on its own registration, which the view shows (decideCampaign checked
// it), so every hidden record comes after that registration: a later
// registration ranks behind the member, and a first lease hidden there is
// a challenge of a member that ranks behind it, which the member's own
// challenge deposes under the specification's rules whatever it waits
// for. Waiting for such a view to be complete protects no holder, and on a
// partition whose other roles renew all the time (many roles over few
// partitions) the last stable offset trails the high watermark most of
// the time, so the wait could last until the lease duration plus the
// abort sweep, or for ever while the offset keeps moving.
func hiddenRecordsRankBehind(state RoleState, member MemberID) bool {
	return state.Lease == nil && len(state.Roster) > 0 && state.Roster[0].Member == member
}

// watchStable reports whether a challenge holds because an open
// transaction hides records of the partition past the last stable offset,
// so that a lease that looks expired may have been renewed behind it. A
// holder of another role that stalls in the middle of its lease
// transaction holds the last stable offset of the whole partition; a
// challenge on that view would depose a healthy holder. The challenger
// waits until the transaction ends, or until the coordinator must have
// aborted it: the lease duration plus the abort sweep after the last
// stable offset stopped moving. It returns the memory with the held offset
// and the instant it was first seen, and the note that the loop logs.
//
// The hold ends too once the last stable offset reaches the high watermark
// of the moment the hold began (stuckHigh): every record hidden then is
// visible, and a record hidden now was written after that moment, which
// no renewal that the expired-looking lease missed can be. Without that
// end, a partition whose other roles open transactions all the time (many
// roles over few partitions: their renewals) has its last stable offset
// trail the high watermark almost always, moving all the while, and the
// challenge would wait as long as the traffic lasts, the failover of a
// dead holder with it.
func (m campaignMemory) watchStable(view stableOffsets, nowMillis int64, config LeaseConfig) (campaignMemory, bool, campaignNote) {
	if !view.reported || view.high <= view.stable {
		m.stuckSince, m.stuckHigh = 0, 0
		return m, false, 0
	}
	if m.stuckSince != 0 && m.stuckHigh != 0 && view.stable >= m.stuckHigh {
		m.stuckSince, m.stuckHigh = 0, 0
		return m, false, 0 // what the hold waited for is visible
	}
	var note campaignNote
	if m.stuckSince == 0 || view.stable != m.stuckStable {
		if m.stuckSince == 0 {
			m.stuckHigh = view.high // a new hold: it waits for what is hidden now
		}
		m.stuckStable, m.stuckSince = view.stable, nowMillis
		note = noteViewHeld
	}
	if nowMillis-m.stuckSince >= (config.duration + openTransactionSweep).Milliseconds() {
		return m, false, noteViewGivenUp
	}
	return m, true, note
}

// rivalStep is what watchRival decides: a step to take now (ask the
// coordinator, or wait for the rival's lease), or else the memory and the
// notes that the challenge goes on with.
type rivalStep struct {
	step   *campaignStep
	memory campaignMemory
	notes  campaignNote
}

// watchRival decides, with the rival-mint watch on ([WithRivalMintWatch]),
// whether a challenge of an expired lease waits for a rival: another
// challenger that minted after that lease, and whose first lease has not
// landed yet. Without the watch (the specification), a
// challenge lost to a newer epoch, or a standby of the next rank, mints
// again one poll interval later, and while the state partition cannot take
// a write (its leader moves after a broker fault) two challengers fence each
// other's first lease in turn, one epoch each time, until one lease lands.
// A mint is then the claim of a lease that was never written: the
// challenger waits as it would for that lease, one lease duration from when
// it first saw the mint, plus the stagger of its rank, and challenges only
// if no lease under a newer token landed by then (the rival died between
// its mint and its lease).
//
// The rule asks the coordinator (DescribeEpoch) once per read, and only
// to challenge a lease that expired: a lease that Resign tombstoned, a
// role without a lease, and a handover take the specification's path with
// no extra request. It waits only when the coordinator holds another token
// than the expired lease's; a coordinator that cannot answer, and a token
// that this transport's own abandoned mint attempt may have minted
// (view.ownMint: the next mint takes that token instead of minting
// again), leave the challenge as the specification has it.
func watchRival(state RoleState, member MemberID, view campaignView, memory campaignMemory, rules campaignRules, nowMillis int64) rivalStep {
	lease := state.Lease
	if !rules.rivalWatch || lease == nil || rules.lease.Timing(*lease).LiveAt(nowMillis) {
		memory.rival = rivalMint{}
		return rivalStep{memory: memory}
	}
	if r := memory.rival; r.seenAt != 0 && r.leaseToken == lease.Token && nowMillis < r.until {
		// Waiting for the rival's lease already: no question per read.
		return rivalStep{step: &campaignStep{action: campaignWait, until: r.until, memory: memory}}
	}
	if !view.epoch.asked {
		return rivalStep{step: &campaignStep{action: campaignDescribeEpoch, memory: memory}}
	}
	if view.epoch.err != nil || !view.epoch.held || view.epoch.current == lease.Token || view.ownMint {
		memory.rival = rivalMint{}
		return rivalStep{memory: memory}
	}
	r := memory.rival
	if r.seenAt == 0 || r.token != view.epoch.current || r.leaseToken != lease.Token {
		rank, _ := state.RankOf(member)
		wait := rules.lease.duration + rules.lease.ChallengeDelay(rank)
		memory.rival = rivalMint{token: view.epoch.current, leaseToken: lease.Token, seenAt: nowMillis, until: nowMillis + wait.Milliseconds()}
		return rivalStep{step: &campaignStep{action: campaignWait, until: memory.rival.until, notes: noteRivalMint, memory: memory}}
	}
	// The rival's mint stood for its whole wait, and no lease of it landed.
	memory.rival = rivalMint{}
	return rivalStep{memory: memory, notes: noteRivalGivenUp}
}

// watchFencer returns what a deposed member learns of the token that
// fenced it from the coordinator's answer: its token when it is not the
// lease's (the lease names the member under the fenced token). A deposed
// member asks once per call, so the question costs one DescribeEpoch after
// a fence, and none on a handover or a failover of a member that held
// nothing. When the member challenges (the lease's deadline passed) and no
// lease under that token came to the partition meanwhile, the loop counts
// a mint without a lease (noteFencerUnwritten): the second within ten
// lease durations is a [ForeignEpochError].
func watchFencer(state RoleState, epoch epochAnswer) fencerWatch {
	if epoch.err != nil || !epoch.held || state.Lease == nil || epoch.current == state.Lease.Token {
		return fencerWatch{asked: true}
	}
	return fencerWatch{asked: true, token: epoch.current}
}

// tryStep is what the one round of [TryAcquire] does: challenge, or refuse
// with a [TurnError] of this rank, retry instant and reason.
type tryStep struct {
	challenge bool
	rank      int
	retryAt   int64 // in ms
	reason    string
	// keepRegistration: the registration key may be a live duplicate's
	// too, so the refusal writes no tombstone on it.
	keepRegistration bool
}

// decideTry decides the one round of [TryAcquire] on the role state that
// it read at nowMillis: the rules of [Evaluate], with a refusal where
// AcquireLeadership would wait. It refuses while the round's registration
// is not visible (retry one poll interval later), while Evaluate says wait
// (retry at its instant), and while an open transaction hides the newest
// records of the partition (one poll interval). A live lease that names
// the member is an earlier incarnation, which the round fences (the
// specification), unless this process saw its token fenced (a standby:
// evaluateDeposed), or the duplicate-member watch is on and this transport
// did not mint its token: the round then refuses until the lease's
// deadline, and leaves the registration, which may be that process's too.
// The rank is [RoleState.RankOf]'s.
func decideTry(state RoleState, member MemberID, view campaignView, rules campaignRules, nowMillis int64) tryStep {
	poll := nowMillis + rules.pollInterval.Milliseconds()
	if entry, ok := state.Entry(member); !ok || entry.RegisteredAt != view.registeredAt {
		return tryStep{retryAt: poll, reason: fmt.Sprintf("its registration is not visible in %s yet", view.partition)}
	}
	rank, _ := state.RankOf(member)
	refuse := func(retryAt int64, format string, args ...any) tryStep {
		return tryStep{rank: rank, retryAt: retryAt, reason: fmt.Sprintf(format, args...)}
	}
	decision := Evaluate(state, member, nowMillis, rules.lease)
	lease := state.Lease
	live := lease != nil && rules.lease.Timing(*lease).LiveAt(nowMillis)
	switch own := classifyOwnLease(state, member, view.leaseFenced, rules.duplicateCheck); {
	case own == ownLeaseDeposed:
		decision = evaluateDeposed(state, member, nowMillis, rules.lease) // a successor minted: no failback
	case own == ownLeaseEarlier && live:
		decision = Decision{Action: ActionChallenge} // the specification's restart path
	case own == ownLeaseWatch && live && !view.leaseMinted:
		step := refuse(lease.Deadline, "the live lease names this member under %s, which this transport did not mint: an earlier incarnation, or another live process with this member id", lease.Token)
		step.keepRegistration = true
		return step
	case own == ownLeaseWatch && live:
		decision = Decision{Action: ActionChallenge} // an earlier leadership of this process: take it back
	}
	switch decision.Action {
	case ActionChallenge:
	case ActionWait:
		if live {
			return refuse(decision.WaitUntil, "role held by %s under %s until %d ms, and this member ranks %d", lease.Member, lease.Token, lease.Deadline, rank)
		}
		return refuse(decision.WaitUntil, "this member ranks %d, and the stagger of its rank has not passed", rank)
	default:
		return refuse(poll, "the rules say %s", decision.Action)
	}
	if _, hold, _ := view.memory.watchStable(view.stable, nowMillis, rules.lease); hold {
		return refuse(poll, "an open transaction hides the newest records of %s, so an expired lease may have been renewed", view.partition)
	}
	return tryStep{challenge: true, rank: rank}
}

// mintAttemptBound bounds one InitProducerId attempt of a challenge: the
// poll interval, and at least minMintAttempt so that a cold client on a
// loaded machine can finish a healthy mint, doubled for each of timeouts,
// the attempts in a row that ran out of it, up to the lease duration: a
// cluster whose mints are slow still serves one, and a challenge never
// waits longer than a lease for a mint whose reason may be gone.
func mintAttemptBound(pollInterval, leaseDuration time.Duration, timeouts int) time.Duration {
	bound := max(pollInterval, minMintAttempt)
	for range min(timeouts, 16) {
		bound *= 2
	}
	return max(min(bound, leaseDuration), minMintAttempt)
}

// minMintAttempt is the floor of mintAttemptBound.
const minMintAttempt = 500 * time.Millisecond

// epochServesAgain reports whether the epoch that a challenge minted may
// serve the next challenge of the same call after the first lease write
// under it failed with err: not after a fence ([ErrFenced]) or a lost
// producer ([ErrProducerLost]), under which no later write can land; after
// any other failure (a timeout, an unreachable partition leader) the
// epoch may still be the newest, and minting again would only use one up.
func epochServesAgain(err error) bool {
	return !errors.Is(err, ErrFenced) && !errors.Is(err, ErrProducerLost)
}

// duplicateWatchMargin is what the watch of a standby registration before
// the registration (decideBeforeRegister) adds to the heartbeat interval
// and the poll interval: a standby writes its heartbeat on the first wake
// of its loop past the due instant, which may wait for a read in flight,
// and the write and this call's read of it take time too. (The watch of a
// lease waits as long as decideNamedLease's quiet test: a renewal is due
// on the holder's own scheduler.)
const duplicateWatchMargin = time.Second

// duplicateWatch is what decideBeforeRegister remembers between the reads
// of its watch: the lease or the standby registration that names the
// member, as first seen, and the end of the watch.
type duplicateWatch struct {
	started bool
	lease   *Lease      // the live lease that names the member; nil when the watch is of a standby
	entry   RosterEntry // the standby registration of the member (lease nil)
	seenAt  int64       // when the watch began, in ms
	until   int64       // when it ends, in ms
	bar     int64       // a record at this offset or past it was written after the watch began; 0 for unknown (renewalBar)
}

// beforeRegisterStep is one decision of decideBeforeRegister.
type beforeRegisterStep struct {
	register bool  // register now: nothing names the member, or nobody renewed what does
	until    int64 // else, without err: read again by this instant, in ms
	err      error // the call's error: a live duplicate ([ErrDuplicateMember])
	watch    duplicateWatch
	memory   campaignMemory // the rules' memory that the campaign starts with
}

// decideBeforeRegister decides, with the duplicate-member watch on, whether
// a call may write its registration, before it writes anything. A
// registration would replace that of a second live process under the same
// member id (which ends that process's campaign), so the call first
// watches what names the member:
//
//   - a live lease that names the member, which this process did not mint
//     and did not see fenced: until one renew interval and one poll
//     interval pass (decideNamedLease's quiet test), or the lease expires. A renewal under
//     its token is a live duplicate: stop with [ErrDuplicateMember].
//     Without one, the call registers, and its campaign counts the lease
//     as quiet since the watch began (decideNamedLease challenges it
//     without a second wait);
//   - else, with heartbeats on, a standby registration of the member whose
//     rank has not lapsed: for one heartbeat interval, one poll interval
//     and duplicateWatchMargin. A newer heartbeat, or another registration of the
//     member, is a live duplicate; a registration that left the roster, or
//     no heartbeat, lets the call register (the crashed standby's key is
//     replaced).
//
// A renewal, heartbeat or registration counts only when written after
// the watch began (writtenSince, against the high watermark then): one
// that an open transaction hid then is what the watch watches from now on.
// Without the watch, or with nothing that names the member, the call
// registers at once.
func decideBeforeRegister(state RoleState, member MemberID, view campaignView, watch duplicateWatch, rules campaignRules, nowMillis int64) beforeRegisterStep {
	memory := view.memory
	if !rules.duplicateCheck {
		return beforeRegisterStep{register: true, memory: memory}
	}
	if !watch.started {
		lease := state.Lease
		entry, registered := state.Entry(member)
		switch {
		case lease != nil && lease.Member == member && nowMillis < lease.Deadline && !view.leaseMinted && !view.leaseFenced:
			seen := *lease
			until := nowMillis + (rules.lease.renewInterval + rules.pollInterval).Milliseconds()
			watch = duplicateWatch{started: true, lease: &seen, seenAt: nowMillis, until: min(until, lease.Deadline), bar: renewalBar(view)}
		case registered && rules.lease.HeartbeatInterval() > 0 && !entry.LapsedAt(nowMillis, rules.lease):
			until := nowMillis + (rules.lease.HeartbeatInterval() + rules.pollInterval + duplicateWatchMargin).Milliseconds()
			watch = duplicateWatch{started: true, entry: entry, seenAt: nowMillis, until: until, bar: renewalBar(view)}
		default:
			return beforeRegisterStep{register: true, memory: memory}
		}
		return beforeRegisterStep{until: watch.until, watch: watch, memory: memory}
	}
	if seen := watch.lease; seen != nil {
		if renewed := state.Lease; renewed != nil && renewed.Member == member && renewed.Token == seen.Token && renewed.GrantedAt > seen.GrantedAt {
			if writtenSince(view.leaseOffset, view.leaseOffsetKnown, watch.bar) {
				return beforeRegisterStep{watch: watch, memory: memory, err: fmt.Errorf("coordination: member %s of role %s is in use by another live process: it holds the role under token %s and renewed its lease while this call waited to register (granted at %d ms, then at %d ms); "+
					"two processes under one member id would fence each other: %w", member, view.role, seen.Token, seen.GrantedAt, renewed.GrantedAt, ErrDuplicateMember)}
			}
			// Hidden by an open transaction when the watch began: no sign
			// of a live process (writtenSince). It is the lease now.
			hidden := *renewed
			watch.lease, seen = &hidden, &hidden
		}
		if nowMillis >= watch.until {
			// Quiet since the watch began: the campaign need not watch it
			// again before it fences that earlier incarnation.
			memory.namedLease, memory.namedLeaseSeenAt, memory.namedLeaseBar = seen, watch.seenAt, watch.bar
			return beforeRegisterStep{register: true, watch: watch, memory: memory}
		}
		return beforeRegisterStep{until: watch.until, watch: watch, memory: memory}
	}
	entry, registered := state.Entry(member)
	if !registered {
		return beforeRegisterStep{register: true, watch: watch, memory: memory} // the other process left the roster
	}
	beat := entry.LastSeen > watch.entry.LastSeen
	again := entry.Offset != watch.entry.Offset
	if beat && writtenSince(view.heartbeatOffset, view.heartbeatOffsetKnown, watch.bar) || again && writtenSince(entry.Offset, true, watch.bar) {
		return beforeRegisterStep{watch: watch, memory: memory, err: fmt.Errorf("coordination: member %s of role %s is in use by another live process: it waits as a standby and was seen at %d ms (registered at %d ms) while this call waited to register; "+
			"two processes under one member id would end each other's campaign: %w", member, view.role, entry.LastSeen, entry.RegisteredAt, ErrDuplicateMember)}
	}
	if beat || again {
		// Hidden by an open transaction when the watch began: no sign of
		// a live process (writtenSince). It is the standby now.
		watch.entry = entry
	}
	if nowMillis >= watch.until {
		return beforeRegisterStep{register: true, watch: watch, memory: memory}
	}
	return beforeRegisterStep{until: watch.until, watch: watch, memory: memory}
}
