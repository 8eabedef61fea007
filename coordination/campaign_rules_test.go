package coordination

// The table tests of the rules of a campaign (campaign_rules.go): every
// branch that the loop of AcquireLeadership and the round of TryAcquire
// decide, with and without each extension's option that changes it.

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"testing"
	"time"
)

// rulesT is the instant of the table's decisions, in ms.
const rulesT int64 = 1_000_000

// rulesFixture is what the rows of the table share.
type rulesFixture struct {
	role              Role
	n1, me, n3        MemberID
	older, tok, newer FencingToken // older: a lease of me from before; tok: the holder n1's; newer: a later mint
	spec, heartbeats  LeaseConfig  // heartbeats: every 2 s, so a rank lapses after 6 s
	anchor            LeaseConfig
}

func newRulesFixture(t *testing.T) rulesFixture {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var f rulesFixture
	var err error
	f.role, err = NewRole("controller")
	must(err)
	f.n1, err = NewMemberID("node-1")
	must(err)
	f.me, err = NewMemberID("node-2")
	must(err)
	f.n3, err = NewMemberID("node-3")
	must(err)
	f.older, err = NewFencingToken(1000, 2)
	must(err)
	f.tok, err = NewFencingToken(1000, 3)
	must(err)
	f.newer, err = NewFencingToken(1000, 4)
	must(err)
	f.spec = DefaultLeaseConfig() // 30 s, 10 s, 5 s
	f.heartbeats, err = f.spec.WithHeartbeatInterval(2 * time.Second)
	must(err)
	f.anchor = f.spec.WithResignationAnchor()
	return f
}

// entry is a roster entry registered at registeredAt, at offset.
func entry(member MemberID, offset, registeredAt int64) RosterEntry {
	return RosterEntry{Member: member, Offset: offset, RegisteredAt: registeredAt}
}

// seenAt is e with its newest heartbeat at lastSeen.
func seenAt(e RosterEntry, lastSeen int64) RosterEntry {
	e.LastSeen = lastSeen
	return e
}

// leaseOf is a lease of the default duration (30 s) granted at grantedAt.
func leaseOf(member MemberID, token FencingToken, grantedAt int64) *Lease {
	return &Lease{Member: member, Token: token, GrantedAt: grantedAt, Deadline: grantedAt + 30_000}
}

func TestCampaignRules(t *testing.T) {
	f := newRulesFixture(t)
	const T = rulesT
	meAt := T - 10_000 // the RegisteredAt of this call's registration in most rows
	roster := []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 1, meAt), entry(f.n3, 2, T-5_000)}
	live := leaseOf(f.n1, f.tok, T-10_000)          // n1 holds until T+20 s
	expired := leaseOf(f.n1, f.tok, T-30_000)       // n1's lease expires at T exactly
	mine := leaseOf(f.me, f.older, T-5_000)         // a live lease of me, until T+25 s, that this call did not write
	mineExpired := leaseOf(f.me, f.older, T-30_000) // expired at T

	spec := campaignRules{lease: f.spec, pollInterval: time.Second}
	heartbeats := campaignRules{lease: f.heartbeats, pollInterval: time.Second}
	anchor := campaignRules{lease: f.anchor, pollInterval: time.Second}
	watch := campaignRules{lease: f.spec, pollInterval: time.Second, duplicateCheck: true}
	watchHeartbeats := campaignRules{lease: f.heartbeats, pollInterval: time.Second, duplicateCheck: true}
	rival := campaignRules{lease: f.spec, pollInterval: time.Second, rivalWatch: true}

	// seen is the view of a call whose registration the roster showed.
	seen := campaignView{role: f.role, registeredAt: meAt, appendedAt: meAt, memory: campaignMemory{ownRegistrationSeen: true}}
	with := func(v campaignView, change func(*campaignView)) campaignView {
		change(&v)
		return v
	}
	asked := func(current FencingToken, held bool, err error) func(*campaignView) {
		return func(v *campaignView) { v.epoch = epochAnswer{asked: true, current: current, held: held, err: err} }
	}
	prior := func(lease *Lease) func(*campaignView) {
		return func(v *campaignView) { v.priorLease = lease }
	}
	offer := leaseOf(f.me, f.tok, T-1_000) // n1's offer of the role to me, until T+29 s
	namedSeen := func(lease *Lease, at int64) func(*campaignView) {
		return func(v *campaignView) { v.memory.namedLease, v.memory.namedLeaseSeenAt = lease, at }
	}
	// positions: the lease record at offset leaseAt, the partition's high
	// watermark (no open transaction now) at high, and the watch's bar
	// (the high watermark when it first saw the lease) at bar.
	positions := func(leaseAt, high, bar int64) func(*campaignView) {
		return func(v *campaignView) {
			v.leaseOffset, v.leaseOffsetKnown = leaseAt, true
			v.stable = stableOffsets{reported: true, stable: high, high: high}
			v.memory.namedLeaseBar = bar
		}
	}
	hiddenRenewal := leaseOf(f.me, f.older, T-1_000) // mine renewed: before the watch began, or during it

	type row struct {
		branch  string
		options string // the option set: spec, heartbeats, anchor, watch, watch+heartbeats
		rules   campaignRules
		state   RoleState
		view    campaignView
		now     int64

		action    campaignAction
		until     int64 // campaignWait
		notes     campaignNote
		err       error           // campaignStop: what the error wraps
		memory    *campaignMemory // checked when set
		notBefore int64
	}
	rows := []row{
		// 1. Duplicate registration.
		{branch: "another registration replaced this call's", options: "watch", rules: watch,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 3, T-3_000)}}, view: seen, now: T,
			action: campaignStop, err: ErrDuplicateMember},
		{branch: "another registration replaced this call's: ranks on it", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 3, T-3_000)}}, view: seen, now: T,
			action: campaignWait, until: T - 3_000 + 5_000},

		// 2. Registration removed.
		{branch: "registration removed", options: "spec", rules: spec,
			state: RoleState{Roster: roster[:1]}, view: seen, now: T,
			action: campaignRegister, notes: noteRegistrationRemoved, memory: &campaignMemory{}},
		{branch: "registration removed, before a due heartbeat", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: roster[:1]}, view: seen, now: T,
			action: campaignRegister, notes: noteRegistrationRemoved, memory: &campaignMemory{}},

		// 3. Registration not visible.
		{branch: "registration not visible yet", options: "spec", rules: spec,
			state: RoleState{Roster: roster[:1]}, view: with(seen, func(v *campaignView) { v.memory.ownRegistrationSeen = false; v.appendedAt = T - 1_000 }), now: T,
			action: campaignWait, until: T + 1_000, memory: &campaignMemory{}},
		{branch: "only an older registration visible", options: "watch", rules: watch,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 1, T-50_000)}},
			view:  with(seen, func(v *campaignView) { v.memory.ownRegistrationSeen = false }), now: T,
			action: campaignWait, until: T + 1_000},
		{branch: "only an older registration visible", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 1, T-50_000)}},
			view:  with(seen, func(v *campaignView) { v.memory.ownRegistrationSeen = false }), now: T,
			action: campaignWait, until: T + 1_000},
		{branch: "registration invisible for two lease durations", options: "spec", rules: spec,
			state: RoleState{Roster: roster[:1]}, view: with(seen, func(v *campaignView) { v.memory.ownRegistrationSeen = false; v.appendedAt = T - 60_000 }), now: T,
			action: campaignAppendAgain, notes: noteRegistrationInvisible},
		{branch: "registration invisible one ms short of two lease durations", options: "spec", rules: spec,
			state: RoleState{Roster: roster[:1]}, view: with(seen, func(v *campaignView) { v.memory.ownRegistrationSeen = false; v.appendedAt = T - 59_999 }), now: T,
			action: campaignWait, until: T + 1_000},

		// 4. Heartbeat.
		{branch: "registration seen first, heartbeat due", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: roster, Lease: live}, view: with(seen, func(v *campaignView) { v.memory.ownRegistrationSeen = false }), now: T,
			action: campaignHeartbeat, memory: &campaignMemory{ownRegistrationSeen: true}},
		{branch: "heartbeat not due: the wait ends at the next one", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: roster, Lease: live}, view: with(seen, func(v *campaignView) { v.heartbeatDue = T + 500 }), now: T,
			action: campaignWait, until: T + 500},
		{branch: "no heartbeat: the wait ends at the deadline", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: live}, view: seen, now: T,
			action: campaignWait, until: T + 20_000},

		// 5. Rank lapsed.
		{branch: "own rank lapsed", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.me, 1, meAt), T-7_000)}, Lease: live},
			view:  with(seen, func(v *campaignView) { v.heartbeatDue = T + 500 }), now: T,
			action: campaignRegister, notes: noteRankLapsed, memory: &campaignMemory{}},
		{branch: "own heartbeat old: no lapse", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.me, 1, meAt), T-7_000)}, Lease: live},
			view:  seen, now: T,
			action: campaignWait, until: T + 20_000},
		{branch: "the standby ahead lapsed: rank 0 at the deadline", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.n3, 1, T-15_000), T-7_000), entry(f.me, 2, meAt)}, Lease: expired},
			view:  with(seen, func(v *campaignView) { v.heartbeatDue = T + 500 }), now: T,
			action: campaignChallenge},
		{branch: "the standby ahead lapsed: rank 1 waits one stagger", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.n3, 1, T-15_000), T-7_000), entry(f.me, 2, meAt)}, Lease: expired},
			view:  seen, now: T,
			action: campaignWait, until: T + 5_000},
		{branch: "the standby ahead lapses before the stagger", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.n3, 1, T-15_000), T-3_000), entry(f.me, 2, meAt)}, Lease: live},
			view:  with(seen, func(v *campaignView) { v.heartbeatDue = T + 5_000 }), now: T,
			action: campaignWait, until: T - 3_000 + 6_000 + 1},

		// 6. Minted.
		{branch: "minted: write the lease, whatever the gates", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: live},
			view: with(seen, func(v *campaignView) {
				v.minted, v.notBefore, v.stable = true, T+5_000, stableOffsets{reported: true, stable: 10, high: 12}
			}), now: T,
			action: campaignChallenge},

		// 7. A lease that names this member.
		{branch: "own live lease: an earlier incarnation, fenced at once", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: mine}, view: seen, now: T,
			action: campaignChallenge},
		{branch: "own live lease, token seen fenced, first sight: ask the coordinator which token fenced it", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, func(v *campaignView) { v.leaseFenced = true }), now: T,
			action: campaignDescribeEpoch},
		{branch: "own live lease, token seen fenced: a standby at its rank, the fencer remembered", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: mine}, view: with(with(seen, func(v *campaignView) { v.leaseFenced = true }), asked(f.newer, true, nil)), now: T,
			action: campaignWait, until: T + 25_000 + 5_000,
			memory: &campaignMemory{ownRegistrationSeen: true, fencer: fencerWatch{asked: true, token: f.newer}}},
		{branch: "own live lease, token seen fenced, the coordinator cannot answer: a standby, no fencer", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: mine}, view: with(with(seen, func(v *campaignView) { v.leaseFenced = true }), asked(FencingToken{}, false, errors.New("coordinator not available"))), now: T,
			action: campaignWait, until: T + 25_000 + 5_000,
			memory: &campaignMemory{ownRegistrationSeen: true, fencer: fencerWatch{asked: true}}},
		{branch: "own live lease, token seen fenced: the fence wins over the watch", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, func(v *campaignView) { v.leaseFenced, v.memory.fencer.asked = true, true }), now: T,
			action: campaignWait, until: T + 25_000 + 5_000},
		{branch: "own live lease, token seen fenced, own rank lapsed: read again", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.me, 1, meAt), T-7_000)}, Lease: mine},
			view:  with(seen, func(v *campaignView) { v.leaseFenced, v.memory.fencer.asked, v.heartbeatDue = true, true, T+500 }), now: T,
			action: campaignWait, until: T + 1_000},
		{branch: "own expired lease, token seen fenced, no lease of the fencer came: challenge, and note it once", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: mineExpired},
			view: with(seen, func(v *campaignView) {
				v.leaseFenced, v.memory.fencer = true, fencerWatch{asked: true, token: f.newer}
			}), now: T,
			action: campaignChallenge, notes: noteFencerUnwritten,
			memory: &campaignMemory{ownRegistrationSeen: true, fencer: fencerWatch{asked: true, token: f.newer, noted: true}}},
		{branch: "own expired lease, token seen fenced, noted already: challenge without a note", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: mineExpired},
			view: with(seen, func(v *campaignView) {
				v.leaseFenced, v.memory.fencer = true, fencerWatch{asked: true, token: f.newer, noted: true}
			}), now: T,
			action: campaignChallenge},
		{branch: "the fencer's lease came: remembered, so no note when the member challenges later", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: leaseOf(f.n1, f.newer, T-5_000)},
			view:  with(seen, func(v *campaignView) { v.memory.fencer = fencerWatch{asked: true, token: f.newer} }), now: T,
			action: campaignWait, until: T + 25_000,
			memory: &campaignMemory{ownRegistrationSeen: true, fencer: fencerWatch{asked: true, token: f.newer, landed: true}}},
		{branch: "own live lease: ask the coordinator first", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, func(v *campaignView) { v.memory.ownRegistrationSeen = false }), now: T,
			action: campaignDescribeEpoch, memory: &campaignMemory{ownRegistrationSeen: true}},
		{branch: "own live lease, the coordinator holds a newer token: a standby", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, asked(f.newer, true, nil)), now: T,
			action: campaignWait, until: T + 25_000 + 5_000, notes: noteLeaseSuperseded,
			memory: &campaignMemory{ownRegistrationSeen: true, namedLease: mine, namedLeaseSeenAt: T}},
		{branch: "own live lease, superseded, seen before: no note", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(with(seen, asked(f.newer, true, nil)), namedSeen(mine, T-2_000)), now: T,
			action: campaignWait, until: T + 25_000 + 5_000,
			memory: &campaignMemory{ownRegistrationSeen: true, namedLease: mine, namedLeaseSeenAt: T}},
		{branch: "own live lease minted by this transport: take it back", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(with(seen, asked(f.older, true, nil)), func(v *campaignView) { v.leaseMinted = true }), now: T,
			action: campaignChallenge},
		{branch: "own live lease, first sight: wait a renew and a poll interval", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, asked(f.older, true, nil)), now: T,
			action: campaignWait, until: T + 11_000,
			memory: &campaignMemory{ownRegistrationSeen: true, namedLease: mine, namedLeaseSeenAt: T}},
		{branch: "own live lease, first sight: the wait ends at the next heartbeat", options: "watch+heartbeats", rules: watchHeartbeats,
			state: RoleState{Roster: roster, Lease: mine}, view: with(with(seen, asked(f.older, true, nil)), func(v *campaignView) { v.heartbeatDue = T + 2_000 }), now: T,
			action: campaignWait, until: T + 2_000},
		{branch: "own lease renewed while this call waits: a live duplicate", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: leaseOf(f.me, f.older, T-1_000)}, view: with(with(seen, asked(f.older, true, nil)), namedSeen(mine, T-4_000)), now: T,
			action: campaignStop, err: ErrDuplicateMember},
		{branch: "own lease renewal that an open transaction hid when the watch began: no duplicate, the quiet test goes on", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: hiddenRenewal}, view: with(with(with(seen, asked(f.older, true, nil)), namedSeen(mine, T-4_000)), positions(10, 20, 12)), now: T,
			action: campaignWait, until: T + 7_000,
			memory: &campaignMemory{ownRegistrationSeen: true, namedLease: hiddenRenewal, namedLeaseSeenAt: T - 4_000, namedLeaseBar: 12}},
		{branch: "own lease renewal that an open transaction hid, quiet since the watch began: challenge", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: hiddenRenewal}, view: with(with(with(seen, asked(f.older, true, nil)), namedSeen(mine, T-11_000)), positions(10, 20, 12)), now: T,
			action: campaignChallenge},
		{branch: "own lease renewed past the watch's bar: a live duplicate", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: hiddenRenewal}, view: with(with(with(seen, asked(f.older, true, nil)), namedSeen(mine, T-4_000)), positions(12, 20, 12)), now: T,
			action: campaignStop, err: ErrDuplicateMember},
		{branch: "own live lease, first sight: the bar is the high watermark", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(with(seen, asked(f.older, true, nil)), positions(5, 20, 0)), now: T,
			action: campaignWait, until: T + 11_000,
			memory: &campaignMemory{ownRegistrationSeen: true, namedLease: mine, namedLeaseSeenAt: T, namedLeaseBar: 20}},
		{branch: "own live lease quiet for a renew and a poll interval", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(with(seen, asked(f.older, true, nil)), namedSeen(mine, T-11_000)), now: T,
			action: campaignChallenge},
		{branch: "own live lease quiet one ms short", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(with(seen, asked(f.older, true, nil)), namedSeen(mine, T-10_999)), now: T,
			action: campaignWait, until: T + 1},
		{branch: "own expired lease, first sight: challenge at once", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mineExpired}, view: with(seen, asked(f.older, true, nil)), now: T,
			action: campaignChallenge},
		{branch: "own live lease, DescribeEpoch refused", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, asked(FencingToken{}, false, fmt.Errorf("describe: %w", ErrNotAuthorized))), now: T,
			action: campaignStop, err: ErrNotAuthorized},
		{branch: "own live lease, DescribeEpoch failed: the quiet test alone", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, asked(f.newer, true, errors.New("coordinator not available"))), now: T,
			action: campaignWait, until: T + 11_000, notes: noteEpochUnknown},
		{branch: "own live lease, the coordinator holds no token", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, asked(FencingToken{}, false, nil)), now: T,
			action: campaignWait, until: T + 11_000},
		// 7b. A holder's offer of a planned transfer (offeredTo): a lease
		// that names this member under the holder's token, after a lease of
		// the holder under the same token.
		{branch: "an offer: to the specification, an earlier incarnation, challenged at once", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: offer}, view: with(seen, prior(live)), now: T,
			action: campaignChallenge},
		{branch: "an offer: ask the coordinator first", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: offer}, view: with(seen, prior(live)), now: T,
			action: campaignDescribeEpoch},
		{branch: "an offer under the coordinator's token: take it at once, remembered", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: offer}, view: with(with(seen, prior(live)), asked(f.tok, true, nil)), now: T,
			action: campaignChallenge, memory: &campaignMemory{ownRegistrationSeen: true, offer: *offer}},
		{branch: "an offer remembered by value: taken without the lease before it", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: offer}, view: with(with(seen, asked(f.tok, true, nil)), func(v *campaignView) { v.memory.offer = *offer }), now: T,
			action: campaignChallenge},
		{branch: "an offer whose token the coordinator no longer holds: a standby", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: offer}, view: with(with(seen, prior(live)), asked(f.newer, true, nil)), now: T,
			action: campaignWait, until: T + 29_000 + 5_000, notes: noteLeaseSuperseded},
		{branch: "an offer, the coordinator cannot answer: the quiet test", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: offer}, view: with(with(seen, prior(live)), asked(FencingToken{}, false, errors.New("coordinator not available"))), now: T,
			action: campaignWait, until: T + 11_000, notes: noteEpochUnknown},
		{branch: "an offer granted before this call's registration: no offer, the quiet test", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: leaseOf(f.me, f.tok, meAt-1)}, view: with(with(seen, prior(live)), asked(f.tok, true, nil)), now: T,
			action: campaignWait, until: T + 11_000},
		{branch: "a duplicate's renewal (the lease before it names this member too): still a live duplicate", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: leaseOf(f.me, f.older, T-1_000)}, view: with(with(with(seen, prior(mine)), asked(f.older, true, nil)), namedSeen(mine, T-4_000)), now: T,
			action: campaignStop, err: ErrDuplicateMember},
		{branch: "a duplicate's first lease (the lease before it is under another token): no offer, the quiet test", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: leaseOf(f.me, f.newer, T-1_000)}, view: with(with(seen, prior(live)), asked(f.newer, true, nil)), now: T,
			action: campaignWait, until: T + 11_000},
		{branch: "an offer that this transport minted the token of: its own, taken back", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: offer}, view: with(with(with(seen, prior(live)), asked(f.tok, true, nil)), func(v *campaignView) { v.leaseMinted = true }), now: T,
			action: campaignChallenge, memory: &campaignMemory{ownRegistrationSeen: true}},
		{branch: "an offer does not wait for records that an open transaction hides", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: offer}, view: with(with(seen, prior(live)), func(v *campaignView) { v.stable = stableOffsets{reported: true, stable: 10, high: 12} }), now: T,
			action: campaignChallenge, memory: &campaignMemory{ownRegistrationSeen: true, offer: *offer}},
		{branch: "an offer taken with the watch does not wait for hidden records either", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: offer}, view: with(with(with(seen, prior(live)), asked(f.tok, true, nil)), func(v *campaignView) { v.stable = stableOffsets{reported: true, stable: 10, high: 12} }), now: T,
			action: campaignChallenge},
		{branch: "an earlier incarnation's lease waits for hidden records (no offer)", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: mine}, view: with(seen, func(v *campaignView) { v.stable = stableOffsets{reported: true, stable: 10, high: 12} }), now: T,
			action: campaignWait, until: T + 1_000, notes: noteViewHeld},
		{branch: "an offer naming another member: a bystander waits for its deadline and its stagger", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: leaseOf(f.n3, f.tok, T-1_000)}, view: with(seen, prior(live)), now: T,
			action: campaignWait, until: T + 29_000 + 5_000},
		{branch: "another member's live lease: nothing to ask", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: live}, view: seen, now: T,
			action: campaignWait, until: T + 20_000},

		// 8. Evaluate's answer and the gates of a challenge.
		{branch: "rank 1 behind a live lease", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.n3, 1, T-15_000), entry(f.me, 2, meAt)}, Lease: live}, view: seen, now: T,
			action: campaignWait, until: T + 25_000},
		{branch: "rank 0 at the deadline", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: expired}, view: seen, now: T,
			action: campaignChallenge},
		{branch: "rank 0 at the deadline, the coordinator holds a newer token: the specification challenges", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: expired}, view: with(seen, asked(f.newer, true, nil)), now: T,
			action: campaignChallenge},
		{branch: "rank 0 at the deadline: ask the coordinator first", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired}, view: seen, now: T,
			action: campaignDescribeEpoch},
		{branch: "rank 0 at the deadline, the coordinator holds the lease's token", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired}, view: with(seen, asked(f.tok, true, nil)), now: T,
			action: campaignChallenge},

		// 8b. A rival's mint (watchRival).
		{branch: "expired lease, the coordinator holds a newer token: wait a lease (rank 0: no stagger)", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired}, view: with(seen, asked(f.newer, true, nil)), now: T + 5_000,
			action: campaignWait, until: T + 5_000 + 30_000, notes: noteRivalMint,
			memory: &campaignMemory{ownRegistrationSeen: true, rival: rivalMint{token: f.newer, leaseToken: f.tok, seenAt: T + 5_000, until: T + 35_000}}},
		{branch: "expired lease, a newer token, rank 1: wait a lease and one stagger", options: "rival", rules: rival,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.n3, 1, T-15_000), entry(f.me, 2, meAt)}, Lease: expired},
			view:  with(seen, asked(f.newer, true, nil)), now: T + 5_000,
			action: campaignWait, until: T + 5_000 + 30_000 + 5_000, notes: noteRivalMint},
		{branch: "waiting for the rival's lease: no question on the next read", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired},
			view: with(seen, func(v *campaignView) {
				v.memory.rival = rivalMint{token: f.newer, leaseToken: f.tok, seenAt: T + 5_000, until: T + 40_000}
			}), now: T + 20_000,
			action: campaignWait, until: T + 40_000},
		{branch: "the rival's wait passed: ask again", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired},
			view: with(seen, func(v *campaignView) {
				v.memory.rival = rivalMint{token: f.newer, leaseToken: f.tok, seenAt: T + 5_000, until: T + 40_000}
			}), now: T + 40_000,
			action: campaignDescribeEpoch},
		{branch: "the rival's mint stood its wait with no lease: challenge", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired},
			view: with(with(seen, asked(f.newer, true, nil)), func(v *campaignView) {
				v.memory.rival = rivalMint{token: f.newer, leaseToken: f.tok, seenAt: T + 5_000, until: T + 40_000}
			}), now: T + 40_000,
			action: campaignChallenge, notes: noteRivalGivenUp, memory: &campaignMemory{ownRegistrationSeen: true}},
		{branch: "another rival minted meanwhile: wait anew", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired},
			view: with(with(seen, asked(f.older, true, nil)), func(v *campaignView) {
				v.memory.rival = rivalMint{token: f.newer, leaseToken: f.tok, seenAt: T + 5_000, until: T + 40_000}
			}), now: T + 40_000,
			action: campaignWait, until: T + 40_000 + 30_000, notes: noteRivalMint},
		{branch: "the newer token is this transport's own abandoned mint: challenge", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired}, view: with(with(seen, asked(f.newer, true, nil)), func(v *campaignView) { v.ownMint = true }), now: T,
			action: campaignChallenge, memory: &campaignMemory{ownRegistrationSeen: true}},
		{branch: "the coordinator cannot answer: the specification's challenge", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired}, view: with(seen, asked(FencingToken{}, false, errors.New("coordinator not available"))), now: T,
			action: campaignChallenge},
		{branch: "the coordinator holds no token: challenge", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired}, view: with(seen, asked(FencingToken{}, false, nil)), now: T,
			action: campaignChallenge},
		{branch: "a rival's lease landed: a live lease, Evaluate waits", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: leaseOf(f.n3, f.newer, T)},
			view: with(seen, func(v *campaignView) {
				v.memory.rival = rivalMint{token: f.newer, leaseToken: f.tok, seenAt: T - 1_000, until: T + 29_000}
			}), now: T + 1_000,
			action: campaignWait, until: T + 35_000},
		{branch: "rank 0 one ms before the deadline", options: "rival", rules: rival,
			state: RoleState{Roster: roster, Lease: expired}, view: seen, now: T - 1,
			action: campaignWait, until: T},
		{branch: "no lease, rank 0", options: "rival", rules: rival,
			state: RoleState{Roster: roster[1:]}, view: seen, now: T,
			action: campaignChallenge},
		{branch: "no lease, rank 1: anchored on the registration", options: "rival", rules: rival,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 1, T-1_000)}},
			view:  with(seen, func(v *campaignView) { v.registeredAt = T - 1_000 }), now: T,
			action: campaignWait, until: T + 4_000},
		{branch: "after a resignation, rank 1: anchored on the tombstone", options: "anchor", rules: anchor,
			state: RoleState{Roster: roster, LeaseClearedAt: T - 500}, view: seen, now: T,
			action: campaignWait, until: T + 4_500},
		{branch: "after a resignation, rank 1: anchored on the registration", options: "rival", rules: rival,
			state: RoleState{Roster: roster, LeaseClearedAt: T - 500}, view: seen, now: T,
			action: campaignChallenge},
		{branch: "challenge lost a moment ago: not before", options: "rival", rules: rival,
			state: RoleState{Roster: roster[1:]}, view: with(seen, func(v *campaignView) { v.notBefore = T + 700 }), now: T,
			action: campaignWait, until: T + 700},
		{branch: "challenge lost, not-before passed", options: "rival", rules: rival,
			state: RoleState{Roster: roster[1:]}, view: with(seen, func(v *campaignView) { v.notBefore = T }), now: T,
			action: campaignChallenge},
		{branch: "an open transaction hides records: hold", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: expired}, view: with(seen, func(v *campaignView) { v.stable = stableOffsets{reported: true, stable: 10, high: 12} }), now: T,
			action: campaignWait, until: T + 1_000, notes: noteViewHeld,
			memory: &campaignMemory{ownRegistrationSeen: true, stuckStable: 10, stuckSince: T, stuckHigh: 12}},
		{branch: "the last stable offset reached the high watermark of the hold's start: challenge, though newer transactions are open", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: expired},
			view: with(seen, func(v *campaignView) {
				v.stable, v.memory.stuckStable, v.memory.stuckSince, v.memory.stuckHigh = stableOffsets{reported: true, stable: 12, high: 15}, 11, T-500, 12
			}), now: T,
			action: campaignChallenge, memory: &campaignMemory{ownRegistrationSeen: true, stuckStable: 11}},
		{branch: "the last stable offset moves, short of the high watermark of the hold's start: hold", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: expired},
			view: with(seen, func(v *campaignView) {
				v.stable, v.memory.stuckStable, v.memory.stuckSince, v.memory.stuckHigh = stableOffsets{reported: true, stable: 11, high: 15}, 10, T-500, 12
			}), now: T,
			action: campaignWait, until: T + 1_000, notes: noteViewHeld,
			memory: &campaignMemory{ownRegistrationSeen: true, stuckStable: 11, stuckSince: T, stuckHigh: 12}},
		{branch: "an open transaction, held short of a lease duration plus the sweep", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: expired},
			view: with(seen, func(v *campaignView) {
				v.stable, v.memory.stuckStable, v.memory.stuckSince = stableOffsets{reported: true, stable: 10, high: 12}, 10, T-39_999
			}), now: T,
			action: campaignWait, until: T + 1_000,
			memory: &campaignMemory{ownRegistrationSeen: true, stuckStable: 10, stuckSince: T - 39_999}},
		{branch: "an open transaction, held for a lease duration plus the sweep: challenge", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: expired},
			view: with(seen, func(v *campaignView) {
				v.stable, v.memory.stuckStable, v.memory.stuckSince = stableOffsets{reported: true, stable: 10, high: 12}, 10, T-40_000
			}), now: T,
			action: campaignChallenge, notes: noteViewGivenUp},
		{branch: "the last stable offset moved: hold anew", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: expired},
			view: with(seen, func(v *campaignView) {
				v.stable, v.memory.stuckStable, v.memory.stuckSince = stableOffsets{reported: true, stable: 10, high: 12}, 8, T-40_000
			}), now: T,
			action: campaignWait, until: T + 1_000, notes: noteViewHeld,
			memory: &campaignMemory{ownRegistrationSeen: true, stuckStable: 10, stuckSince: T}},
		{branch: "the view is complete again", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:], Lease: expired},
			view: with(seen, func(v *campaignView) {
				v.stable, v.memory.stuckStable, v.memory.stuckSince = stableOffsets{reported: true, stable: 12, high: 12}, 10, T-5_000
			}), now: T,
			action: campaignChallenge, memory: &campaignMemory{ownRegistrationSeen: true, stuckStable: 10}},
		{branch: "an open transaction, no lease, first in the roster: every hidden record ranks behind, challenge", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:]}, view: with(seen, func(v *campaignView) { v.stable = stableOffsets{reported: true, stable: 10, high: 12} }), now: T,
			action: campaignChallenge, memory: &campaignMemory{ownRegistrationSeen: true}},
		{branch: "an open transaction, no lease, second in the roster: hold", options: "spec", rules: spec,
			state: RoleState{Roster: roster}, view: with(seen, func(v *campaignView) { v.stable = stableOffsets{reported: true, stable: 10, high: 12} }), now: meAt + 20_000,
			action: campaignWait, until: meAt + 21_000, notes: noteViewHeld,
			memory: &campaignMemory{ownRegistrationSeen: true, stuckStable: 10, stuckSince: meAt + 20_000, stuckHigh: 12}},
	}

	actions := map[campaignAction]bool{}
	var notes campaignNote
	for _, r := range rows {
		t.Run(r.options+"/"+r.branch, func(t *testing.T) {
			got := decideCampaign(r.state, f.me, r.view, r.rules, r.now)
			actions[got.action], notes = true, notes|got.notes
			checkStep(t, got, r.action, r.until, r.notBefore, r.notes, r.err)
			if r.memory != nil && !sameMemory(got.memory, *r.memory) {
				t.Errorf("memory = %+v; want %+v", got.memory, *r.memory)
			}
		})
	}

	failures := []struct {
		stage  campaignStage
		err    error
		action campaignAction
		until  int64
		notBef int64
	}{
		{stageRegister, fmt.Errorf("append: %w", ErrNotAuthorized), campaignStop, 0, 0},
		{stageRegister, fmt.Errorf("append: %w", ErrMisconfigured), campaignStop, 0, 0},
		{stageRegister, errors.New("broker not available"), campaignWait, T + 1_000, 0},
		{stageRead, wrapf(ErrNotAuthorized, nil, "read"), campaignStop, 0, 0},
		{stageRead, fmt.Errorf("read: %w", ErrFenced), campaignWait, T + 1_000, 0},
		{stageRead, fmt.Errorf("read: %w", ErrMisconfigured), campaignStop, 0, 0},
		{stageRead, errors.New("broker not available"), campaignWait, T + 1_000, 0},
		{stageChallenge, fmt.Errorf("mint: %w", ErrNotAuthorized), campaignStop, 0, 0},
		{stageChallenge, fmt.Errorf("mint: %w", ErrMisconfigured), campaignStop, 0, 0},
		{stageChallenge, wrapf(ErrFenced, nil, "first lease"), campaignRead, 0, T + 1_000},
		{stageChallenge, fmt.Errorf("first lease: %w", ErrProducerLost), campaignWait, T + 1_000, 0},
		{stageChallenge, errors.New("coordinator not available"), campaignWait, T + 1_000, 0},
	}
	for _, r := range failures {
		t.Run(fmt.Sprintf("failure/%s/%v", failedCalls[r.stage], r.err), func(t *testing.T) {
			got := decideFailure(r.stage, r.err, spec, T)
			actions[got.action] = true
			var want error
			if r.action == campaignStop {
				want = r.err
			}
			checkStep(t, got, r.action, r.until, r.notBef, 0, want)
		})
	}

	// Every action and every note is some row's answer: a step that
	// decideCampaign or decideFailure can take and no row takes is a
	// branch without a test.
	for a := campaignWait; a <= campaignStop; a++ {
		if !actions[a] {
			t.Errorf("no row takes the action %v", a)
		}
	}
	for n := campaignNote(1); n <= noteFencerUnwritten; n <<= 1 {
		if notes&n == 0 {
			t.Errorf("no row takes the note %d (bit %d)", n, bits.TrailingZeros(uint(n)))
		}
	}
}

// checkStep compares a step with what the row wants: its action, the
// instant of a wait, the not-before of a read, its notes, and the error of
// a stop, which must wrap wantErr.
func checkStep(t *testing.T, got campaignStep, action campaignAction, until, notBefore int64, notes campaignNote, wantErr error) {
	t.Helper()
	if got.action != action {
		t.Fatalf("action = %v (until %d, err %v); want %v", got.action, got.until, got.err, action)
	}
	if action == campaignWait && got.until != until {
		t.Errorf("wait until %d; want %d (%+d ms)", got.until, until, until-got.until)
	}
	if action != campaignWait && got.until != 0 {
		t.Errorf("until = %d on a %v; want 0", got.until, action)
	}
	if got.notBefore != notBefore {
		t.Errorf("notBefore = %d; want %d", got.notBefore, notBefore)
	}
	if got.notes != notes {
		t.Errorf("notes = %b; want %b", got.notes, notes)
	}
	switch {
	case wantErr == nil && got.err != nil:
		t.Errorf("err = %v; want none", got.err)
	case wantErr != nil && !errors.Is(got.err, wantErr):
		t.Errorf("err = %v; want one that wraps %v", got.err, wantErr)
	}
}

// sameMemory compares two memories, the named lease by value.
func sameMemory(a, b campaignMemory) bool {
	if (a.namedLease == nil) != (b.namedLease == nil) || a.namedLease != nil && *a.namedLease != *b.namedLease {
		return false
	}
	a.namedLease, b.namedLease = nil, nil
	return a == b
}

func TestTryRules(t *testing.T) {
	f := newRulesFixture(t)
	const T = rulesT
	meAt := T - 10_000
	roster := []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 1, meAt), entry(f.n3, 2, T-5_000)}
	live := leaseOf(f.n1, f.tok, T-10_000)
	expired := leaseOf(f.n1, f.tok, T-30_000)
	mine := leaseOf(f.me, f.older, T-5_000)
	mineExpired := leaseOf(f.me, f.older, T-30_000)

	spec := campaignRules{lease: f.spec, pollInterval: time.Second}
	heartbeats := campaignRules{lease: f.heartbeats, pollInterval: time.Second}
	anchor := campaignRules{lease: f.anchor, pollInterval: time.Second}
	watch := campaignRules{lease: f.spec, pollInterval: time.Second, duplicateCheck: true}

	partition := TopicPartition{Topic: StateTopic, Partition: 12}
	round := campaignView{role: f.role, partition: partition, registeredAt: meAt, appendedAt: meAt}
	with := func(change func(*campaignView)) campaignView {
		v := round
		change(&v)
		return v
	}
	rows := []struct {
		branch  string
		options string
		rules   campaignRules
		state   RoleState
		view    campaignView

		challenge bool
		rank      int
		retryAt   int64
		reason    string // a part of the reason
		keep      bool
	}{
		{branch: "registration not visible", options: "spec", rules: spec,
			state: RoleState{Roster: roster[:1], Lease: live}, view: round,
			retryAt: T + 1_000, reason: "its registration is not visible in " + partition.String()},
		{branch: "only an older registration visible", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 1, T-50_000)}}, view: round,
			retryAt: T + 1_000, reason: "not visible"},
		{branch: "rank 0 behind a live lease", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: live}, view: round,
			retryAt: T + 20_000, reason: "role held by node-1 under " + f.tok.String()},
		{branch: "rank 1 behind a live lease", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.n3, 1, T-15_000), entry(f.me, 2, meAt)}, Lease: live}, view: round,
			rank: 1, retryAt: T + 25_000, reason: "this member ranks 1"},
		{branch: "rank 0 at the deadline", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: expired}, view: round,
			challenge: true},
		{branch: "no lease, rank 0", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:]}, view: round,
			challenge: true},
		{branch: "no lease, rank 1 within its stagger", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), entry(f.me, 1, T-1_000)}}, view: with(func(v *campaignView) { v.registeredAt = T - 1_000 }),
			rank: 1, retryAt: T + 4_000, reason: "the stagger of its rank has not passed"},
		{branch: "after a resignation, rank 1", options: "anchor", rules: anchor,
			state: RoleState{Roster: roster, LeaseClearedAt: T - 500}, view: round,
			rank: 1, retryAt: T + 4_500, reason: "the stagger of its rank has not passed"},
		{branch: "after a resignation, rank 1", options: "spec", rules: spec,
			state: RoleState{Roster: roster, LeaseClearedAt: T - 500}, view: round,
			rank: 1, challenge: true},
		{branch: "the standby ahead lapsed", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.n3, 1, T-15_000), T-7_000), entry(f.me, 2, meAt)}, Lease: expired}, view: round,
			rank: 1, challenge: true},
		{branch: "the standby ahead lapsed", options: "spec", rules: spec,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.n3, 1, T-15_000), T-7_000), entry(f.me, 2, meAt)}, Lease: expired}, view: round,
			rank: 1, retryAt: T + 5_000, reason: "the stagger of its rank has not passed"},
		{branch: "own rank lapsed", options: "heartbeats", rules: heartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.me, 1, meAt), T-7_000)}, Lease: live}, view: round,
			retryAt: T + 1_000, reason: "the rules say not registered"},
		{branch: "own live lease: an earlier incarnation, fenced at once", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: mine}, view: round,
			rank: 0, challenge: true},
		{branch: "own live lease, token seen fenced: a standby", options: "spec", rules: spec,
			state: RoleState{Roster: roster, Lease: mine}, view: with(func(v *campaignView) { v.leaseFenced = true }),
			rank: 0, retryAt: T + 30_000, reason: "role held by node-2"},
		{branch: "own live lease, token seen fenced, own rank lapsed", options: "heartbeats", rules: heartbeats,
			state:   RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000), seenAt(entry(f.me, 1, meAt), T-7_000)}, Lease: mine},
			view:    with(func(v *campaignView) { v.leaseFenced = true }),
			retryAt: T + 1_000, reason: "the rules say not registered"},
		{branch: "own live lease not minted here", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: round,
			retryAt: T + 25_000, reason: "which this transport did not mint", keep: true},
		{branch: "own live lease minted here", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mine}, view: with(func(v *campaignView) { v.leaseMinted = true }),
			challenge: true},
		{branch: "own expired lease", options: "watch", rules: watch,
			state: RoleState{Roster: roster, Lease: mineExpired}, view: round,
			challenge: true},
		{branch: "an open transaction hides records", options: "spec", rules: spec,
			state: RoleState{Roster: roster[1:]}, view: with(func(v *campaignView) { v.stable = stableOffsets{reported: true, stable: 10, high: 12} }),
			retryAt: T + 1_000, reason: "an open transaction hides the newest records of " + partition.String()},
	}
	for _, r := range rows {
		t.Run(r.options+"/"+r.branch, func(t *testing.T) {
			got := decideTry(r.state, f.me, r.view, r.rules, T)
			if got.challenge != r.challenge {
				t.Fatalf("challenge = %v (reason %q); want %v", got.challenge, got.reason, r.challenge)
			}
			if got.rank != r.rank || got.retryAt != r.retryAt || got.keepRegistration != r.keep {
				t.Errorf("rank %d, retry at %d, keep the registration %v; want %d, %d, %v", got.rank, got.retryAt, got.keepRegistration, r.rank, r.retryAt, r.keep)
			}
			if !strings.Contains(got.reason, r.reason) || r.challenge && got.reason != "" {
				t.Errorf("reason %q; want one with %q", got.reason, r.reason)
			}
		})
	}
}

// TestMintRules: the bound of a mint attempt doubles per attempt that ran
// out, from max(poll, 500 ms) up to the lease; and a minted epoch serves
// the next challenge unless its write was fenced or its producer lost.
func TestMintRules(t *testing.T) {
	for _, c := range []struct {
		poll, lease time.Duration
		timeouts    int
		want        time.Duration
	}{
		{time.Second, 30 * time.Second, 0, time.Second},                       // the default poll
		{100 * time.Millisecond, 30 * time.Second, 0, 500 * time.Millisecond}, // the floor
		{100 * time.Millisecond, 30 * time.Second, 2, 2 * time.Second},        // doubled twice
		{time.Second, 6 * time.Second, 5, 6 * time.Second},                    // capped at the lease
		{time.Second, 30 * time.Second, 1000, 30 * time.Second},               // no overflow
		{time.Second, 200 * time.Millisecond, 3, 500 * time.Millisecond},      // the floor wins over a shorter lease
	} {
		if got := mintAttemptBound(c.poll, c.lease, c.timeouts); got != c.want {
			t.Errorf("mintAttemptBound(poll %v, lease %v, %d timeouts) = %v, want %v", c.poll, c.lease, c.timeouts, got, c.want)
		}
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("write: %w", ErrFenced), false},
		{fmt.Errorf("write: %w", ErrProducerLost), false},
		{context.DeadlineExceeded, true},
		{errors.New("the partition leader is unreachable"), true},
	} {
		if got := epochServesAgain(c.err); got != c.want {
			t.Errorf("epochServesAgain(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}

// TestBeforeRegisterRules: decideBeforeRegister, the watch of what names
// the member before a call writes its registration (issue 30: the CLI's
// check moved into the library, behind WithDuplicateMemberCheck).
func TestBeforeRegisterRules(t *testing.T) {
	f := newRulesFixture(t)
	const T = rulesT
	spec := campaignRules{lease: f.spec, pollInterval: time.Second}
	heartbeats := campaignRules{lease: f.heartbeats, pollInterval: time.Second}
	watch := campaignRules{lease: f.spec, pollInterval: time.Second, duplicateCheck: true}
	watchHeartbeats := campaignRules{lease: f.heartbeats, pollInterval: time.Second, duplicateCheck: true}

	mine := leaseOf(f.me, f.older, T-5_000) // live until T+25 s
	nearDeadline := leaseOf(f.me, f.older, T-25_000)
	renewed := leaseOf(f.me, f.older, T+5_000)
	expired := leaseOf(f.me, f.older, T-30_000)
	standby := seenAt(entry(f.me, 1, T-10_000), T-1_000) // a heartbeat a second ago
	lapsed := seenAt(entry(f.me, 1, T-10_000), T-7_000)  // none for 7 s: lapsed after 6 s
	holder := leaseOf(f.n1, f.tok, T-5_000)
	view := campaignView{role: f.role}
	minted := campaignView{role: f.role, leaseMinted: true}
	fenced := campaignView{role: f.role, leaseFenced: true}
	watchingLease := duplicateWatch{started: true, lease: mine, seenAt: T - 11_000, until: T}
	watchingStandby := duplicateWatch{started: true, entry: standby, seenAt: T - 4_000, until: T}
	// The watch began at high watermark 12; the renewal's record sits at
	// offset 10 (hidden then by an open transaction) or 12 (written since).
	watchingLeaseAt12 := watchingLease
	watchingLeaseAt12.bar = 12
	renewedAt := func(offset int64) campaignView {
		return campaignView{role: f.role, leaseOffset: offset, leaseOffsetKnown: true, stable: stableOffsets{reported: true, stable: 20, high: 20}}
	}
	watchingStandbyAt12 := watchingStandby
	watchingStandbyAt12.bar = 12
	beatAt := func(offset int64) campaignView {
		return campaignView{role: f.role, heartbeatOffset: offset, heartbeatOffsetKnown: true, stable: stableOffsets{reported: true, stable: 20, high: 20}}
	}

	for _, tc := range []struct {
		name   string
		rules  campaignRules
		state  RoleState
		view   campaignView
		watch  duplicateWatch
		now    int64
		wantOK bool  // register
		until  int64 // else, without err
		err    error
	}{
		{name: "without the watch a live lease of the member is no reason to wait (the specification)", rules: spec,
			state: RoleState{Lease: mine}, view: view, now: T, wantOK: true},
		{name: "without the watch a live standby of the member is no reason to wait", rules: heartbeats,
			state: RoleState{Roster: []RosterEntry{standby}, Lease: holder}, view: view, now: T, wantOK: true},
		{name: "nothing names the member: register at once", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.n1, 0, T-20_000)}, Lease: holder}, view: view, now: T, wantOK: true},
		{name: "a live lease of the member: watch one renew interval and one poll interval", rules: watch,
			state: RoleState{Lease: mine}, view: view, now: T, until: T + 11_000},
		{name: "a live lease of the member: the watch ends at its deadline", rules: watch,
			state: RoleState{Lease: nearDeadline}, view: view, now: T, until: T + 5_000},
		{name: "a lease that this process minted: register at once", rules: watch,
			state: RoleState{Lease: mine}, view: minted, now: T, wantOK: true},
		{name: "a lease that this process saw fenced: register at once", rules: watch,
			state: RoleState{Lease: mine}, view: fenced, now: T, wantOK: true},
		{name: "an expired lease of the member: register at once", rules: watch,
			state: RoleState{Lease: expired}, view: view, now: T, wantOK: true},
		{name: "the watched lease was renewed: a live duplicate", rules: watch,
			state: RoleState{Lease: renewed}, view: view, watch: watchingLease, now: T - 1, err: ErrDuplicateMember},
		{name: "the watched lease's renewal was hidden by an open transaction when the watch began: no duplicate, wait", rules: watch,
			state: RoleState{Lease: renewed}, view: renewedAt(10), watch: watchingLeaseAt12, now: T - 1, until: T},
		{name: "the watched lease's renewal was hidden when the watch began, the watch is over: register", rules: watch,
			state: RoleState{Lease: renewed}, view: renewedAt(10), watch: watchingLeaseAt12, now: T, wantOK: true},
		{name: "the watched lease was renewed past the watch's bar: a live duplicate", rules: watch,
			state: RoleState{Lease: renewed}, view: renewedAt(12), watch: watchingLeaseAt12, now: T - 1, err: ErrDuplicateMember},
		{name: "the watched lease stays quiet: wait for the end of the watch", rules: watch,
			state: RoleState{Lease: mine}, view: view, watch: watchingLease, now: T - 1, until: T},
		{name: "the watched lease stayed quiet: register", rules: watch,
			state: RoleState{Lease: mine}, view: view, watch: watchingLease, now: T, wantOK: true},
		{name: "a standby of the member with heartbeats: watch one heartbeat interval, one poll interval and a second", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{standby}, Lease: holder}, view: view, now: T, until: T + 4_000},
		{name: "a standby of the member without heartbeats on: register at once", rules: watch,
			state: RoleState{Roster: []RosterEntry{standby}, Lease: holder}, view: view, now: T, wantOK: true},
		{name: "a lapsed standby of the member: register at once", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{lapsed}, Lease: holder}, view: view, now: T, wantOK: true},
		{name: "the watched standby heartbeated: a live duplicate", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{seenAt(standby, T-500)}, Lease: holder}, view: view, watch: watchingStandby, now: T - 1, err: ErrDuplicateMember},
		{name: "the watched standby registered again: a live duplicate", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.me, 5, T-500)}, Lease: holder}, view: view, watch: watchingStandby, now: T - 1, err: ErrDuplicateMember},
		{name: "the watched standby's heartbeat was hidden by an open transaction when the watch began: no duplicate, wait", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{seenAt(standby, T-500)}, Lease: holder}, view: beatAt(10), watch: watchingStandbyAt12, now: T - 1, until: T},
		{name: "the watched standby heartbeated past the watch's bar: a live duplicate", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{seenAt(standby, T-500)}, Lease: holder}, view: beatAt(12), watch: watchingStandbyAt12, now: T - 1, err: ErrDuplicateMember},
		{name: "the watched standby's registration was hidden when the watch began: no duplicate, wait", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.me, 5, T-500)}, Lease: holder}, view: beatAt(3), watch: watchingStandbyAt12, now: T - 1, until: T},
		{name: "the watched standby registered again past the watch's bar: a live duplicate", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{entry(f.me, 13, T-500)}, Lease: holder}, view: beatAt(3), watch: watchingStandbyAt12, now: T - 1, err: ErrDuplicateMember},
		{name: "the watched standby left the roster: register", rules: watchHeartbeats,
			state: RoleState{Lease: holder}, view: view, watch: watchingStandby, now: T - 1, wantOK: true},
		{name: "the watched standby stays quiet: wait for the end of the watch", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{standby}, Lease: holder}, view: view, watch: watchingStandby, now: T - 1, until: T},
		{name: "the watched standby stayed quiet: register in its place", rules: watchHeartbeats,
			state: RoleState{Roster: []RosterEntry{standby}, Lease: holder}, view: view, watch: watchingStandby, now: T, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideBeforeRegister(tc.state, f.me, tc.view, tc.watch, tc.rules, tc.now)
			if got.register != tc.wantOK || (!tc.wantOK && tc.err == nil && got.until != tc.until) || !errors.Is(got.err, tc.err) || (tc.err == nil && got.err != nil) {
				t.Fatalf("decideBeforeRegister = register %t, until %d, err %v; want register %t, until %d, err %v", got.register, got.until, got.err, tc.wantOK, tc.until, tc.err)
			}
		})
	}

	// A lease that stayed quiet through the watch is quiet for the
	// campaign too: decideNamedLease challenges it without a second wait.
	got := decideBeforeRegister(RoleState{Lease: mine}, f.me, view, watchingLease, watch, T)
	if got.memory.namedLease == nil || *got.memory.namedLease != *mine || got.memory.namedLeaseSeenAt != T-11_000 {
		t.Fatalf("memory after a quiet watch = %+v; want the lease, seen when the watch began", got.memory)
	}
	// The watch's bar is the high watermark when it began, and the
	// campaign keeps it, with the renewal that came to light as the lease.
	if got := decideBeforeRegister(RoleState{Lease: mine}, f.me, renewedAt(5), duplicateWatch{}, watch, T); got.watch.bar != 20 {
		t.Fatalf("the watch began with bar %d; want the high watermark, 20", got.watch.bar)
	}
	if got := decideBeforeRegister(RoleState{Roster: []RosterEntry{standby}, Lease: holder}, f.me, beatAt(5), duplicateWatch{}, watchHeartbeats, T); got.watch.bar != 20 {
		t.Fatalf("the watch of a standby began with bar %d; want the high watermark, 20", got.watch.bar)
	}
	got = decideBeforeRegister(RoleState{Lease: renewed}, f.me, renewedAt(10), watchingLeaseAt12, watch, T)
	if got.memory.namedLease == nil || *got.memory.namedLease != *renewed || got.memory.namedLeaseBar != 12 {
		t.Fatalf("memory after a watch with a hidden renewal = %+v; want the renewal, bar 12", got.memory)
	}
}

// TestDuplicateWatchOffsets: the offsets that the duplicate-member watch
// compares with its bar (writtenSince): the newest lease record's, and the
// member's own newest heartbeat record's, as the campaign's fold keeps them.
func TestDuplicateWatchOffsets(t *testing.T) {
	f := newRulesFixture(t)
	mine, renewed := leaseOf(f.me, f.older, 1_000), leaseOf(f.me, f.older, 2_000)
	beat := func(member MemberID, offset int64) StateRecord {
		return StateRecord{Offset: offset, Key: EncodeKey(HeartbeatKey(f.role, member)), Value: EncodeHeartbeat(Heartbeat{Member: member, SeenAt: offset})}
	}
	var leases leaseHistory
	var beats heartbeatOffset
	records := []StateRecord{
		{Offset: 3, Key: EncodeKey(LeaseKey(f.role)), Value: EncodeLease(*mine)},
		beat(f.me, 4),
		beat(f.n1, 5), // another member's
		{Offset: 6, Key: EncodeKey(LeaseKey(f.role)), Value: EncodeLease(*renewed)},
		beat(f.me, 4), // seen already
	}
	for _, r := range records {
		leases.apply(f.role, r)
		beats.apply(f.role, f.me, r)
	}
	if offset, ok := leases.offsetOf(*renewed); !ok || offset != 6 {
		t.Fatalf("offsetOf(the newest lease) = %d, %t; want 6, true", offset, ok)
	}
	if _, ok := leases.offsetOf(*mine); ok {
		t.Fatal("offsetOf(a lease that is not the newest) is known")
	}
	if !beats.known || beats.offset != 4 {
		t.Fatalf("the member's heartbeat at %d (known %t); want 4", beats.offset, beats.known)
	}
	if writtenSince(5, true, 6) || !writtenSince(6, true, 6) || !writtenSince(5, false, 6) || !writtenSince(5, true, 0) {
		t.Fatal("writtenSince: a record counts at the bar or past it, or when either offset is unknown")
	}
}
