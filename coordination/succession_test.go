package coordination_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func TestActionString(t *testing.T) {
	for action, want := range map[coordination.Action]string{
		coordination.ActionNotRegistered: "not registered",
		coordination.ActionHold:          "hold",
		coordination.ActionChallenge:     "challenge",
		coordination.ActionWait:          "wait",
		coordination.Action(9):           "action(9)",
	} {
		if got := action.String(); got != want {
			t.Errorf("Action(%d).String() = %q, want %q", int(action), got, want)
		}
	}
}

// fxState builds a role state directly: members registered in this order at
// offsets 0, 1, 2, ..., each at the instant given, and a lease when holder is
// not empty.
func fxState(t testing.TB, members []string, registeredAt []int64, holder string, deadline int64) coordination.RoleState {
	t.Helper()
	var state coordination.RoleState
	for i, name := range members {
		state.Roster = append(state.Roster, coordination.RosterEntry{Member: fxMember(t, name), Offset: int64(i), RegisteredAt: registeredAt[i]})
	}
	if holder != "" {
		state.Lease = &coordination.Lease{Member: fxMember(t, holder), Token: fxToken(t, 11, 1), GrantedAt: deadline - 30000, Deadline: deadline}
	}
	return state
}

// fxSeen gives one member the last sign of life seen, as a heartbeat would.
func fxSeen(t testing.TB, state coordination.RoleState, member string, seen int64) coordination.RoleState {
	t.Helper()
	state.Roster = slices.Clone(state.Roster)
	for i := range state.Roster {
		if state.Roster[i].Member == fxMember(t, member) {
			state.Roster[i].LastSeen = seen
		}
	}
	return state
}

func TestEvaluateRules(t *testing.T) {
	config := fxConfig(t, 30000, 10000, 5000)
	three := []string{"node-1", "node-2", "node-3"}
	at := []int64{1000, 2000, 3000}
	late := []int64{math.MaxInt64 - 30, math.MaxInt64 - 20, math.MaxInt64 - 15}
	var (
		wait = func(until int64) coordination.Decision {
			return coordination.Decision{Action: coordination.ActionWait, WaitUntil: until}
		}
		hold      = coordination.Decision{Action: coordination.ActionHold}
		challenge = coordination.Decision{Action: coordination.ActionChallenge}
		absent    = coordination.Decision{Action: coordination.ActionNotRegistered}
	)
	tests := []struct {
		name   string
		state  coordination.RoleState
		member string
		now    int64
		want   coordination.Decision
	}{
		// Rule 1: not registered.
		{"not registered, no lease", fxState(t, three, at, "", 0), "node-9", 50000, absent},
		{"not registered, live lease of another", fxState(t, three, at, "node-1", 30000), "node-9", 0, absent},
		{"not registered, the lease names it", fxState(t, three, at, "node-9", 30000), "node-9", 0, absent},
		{"not registered, empty roster", coordination.RoleState{}, "node-1", 0, absent},

		// Rule 2: hold while the lease is live.
		{"holder, long before the deadline", fxState(t, three, at, "node-1", 30000), "node-1", 0, hold},
		{"holder, 1 ms before the deadline", fxState(t, three, at, "node-1", 30000), "node-1", 29999, hold},
		{"holder in the middle of the roster", fxState(t, three, at, "node-2", 30000), "node-2", 29999, hold},
		{"holder last in the roster", fxState(t, three, at, "node-3", 30000), "node-3", 29999, hold},

		// Rule 3 with a lease: the holder of an expired lease keeps rank 0.
		{"holder at exactly the deadline challenges", fxState(t, three, at, "node-1", 30000), "node-1", 30000, challenge},
		{"holder after the deadline challenges", fxState(t, three, at, "node-1", 30000), "node-1", 99999, challenge},
		{"last-registered holder keeps rank 0", fxState(t, three, at, "node-3", 30000), "node-3", 30000, challenge},

		// Rule 3 and 4 with a lease: rank n at the deadline plus n staggers.
		{"rank 0 standby, 1 ms early", fxState(t, three, at, "node-1", 30000), "node-2", 29999, wait(30000)},
		{"rank 0 standby at the deadline", fxState(t, three, at, "node-1", 30000), "node-2", 30000, challenge},
		{"rank 1 standby while the lease is live", fxState(t, three, at, "node-1", 30000), "node-3", 0, wait(35000)},
		{"rank 1 standby at the deadline", fxState(t, three, at, "node-1", 30000), "node-3", 30000, wait(35000)},
		{"rank 1 standby, 1 ms early", fxState(t, three, at, "node-1", 30000), "node-3", 34999, wait(35000)},
		{"rank 1 standby at deadline+stagger", fxState(t, three, at, "node-1", 30000), "node-3", 35000, challenge},
		{"holder in the middle: first standby rank 0", fxState(t, three, at, "node-2", 30000), "node-1", 30000, challenge},
		{"holder in the middle: node-3 rank 1", fxState(t, three, at, "node-2", 30000), "node-3", 34999, wait(35000)},

		// A lease that names a member outside the roster: every member keeps
		// its roster index.
		{"foreign holder: rank 0", fxState(t, three, at, "node-9", 30000), "node-1", 30000, challenge},
		{"foreign holder: rank 1", fxState(t, three, at, "node-9", 30000), "node-2", 34999, wait(35000)},
		{"foreign holder: rank 2", fxState(t, three, at, "node-9", 30000), "node-3", 39999, wait(40000)},
		{"foreign holder: rank 2 at its instant", fxState(t, three, at, "node-9", 30000), "node-3", 40000, challenge},

		// Rule 3 and 4 without a lease: the anchor is the member's own
		// registration instant.
		{"no lease: rank 0 challenges at once", fxState(t, three, at, "", 0), "node-1", 1000, challenge},
		{"no lease: rank 0 later", fxState(t, three, at, "", 0), "node-1", 50000, challenge},
		{"no lease: rank 1, 1 ms early", fxState(t, three, at, "", 0), "node-2", 6999, wait(7000)},
		{"no lease: rank 1 at its registration plus a stagger", fxState(t, three, at, "", 0), "node-2", 7000, challenge},
		{"no lease: rank 2", fxState(t, three, at, "", 0), "node-3", 3000, wait(13000)},
		{"no lease: rank 2 at its instant", fxState(t, three, at, "", 0), "node-3", 13000, challenge},
		{"no lease: sole member challenges at once", fxState(t, []string{"solo"}, []int64{5}, "", 0), "solo", 5, challenge},

		// Saturation: an anchor near the end of time does not wrap.
		{"deadline near MaxInt64, rank 1", fxState(t, three, late, "node-1", math.MaxInt64-10), "node-3", math.MaxInt64 - 1, wait(math.MaxInt64)},
		{"deadline near MaxInt64, rank 1 at MaxInt64", fxState(t, three, late, "node-1", math.MaxInt64-10), "node-3", math.MaxInt64, challenge},
		{"registration near MaxInt64, rank 2", fxState(t, three, []int64{math.MaxInt64 - 30, math.MaxInt64 - 20, math.MaxInt64 - 10}, "", 0), "node-3", math.MaxInt64 - 10, wait(math.MaxInt64)},
		// Without heartbeats (the specification) nothing lapses: an entry
		// registered long ago keeps its rank, and the wait ends at the
		// challenge instant.
		{"no heartbeats: a standby registered long ago challenges by rule 3", fxState(t, three, at, "", 0), "node-1", 10_000_000, challenge},
		{"no heartbeats: rank 1 behind a live lease waits for its stagger", fxState(t, three, at, "node-1", 30000), "node-3", 20000, wait(35000)},
	}
	// Heartbeats (an extension: WithHeartbeatInterval, every 30 s, so a
	// roster lapse of 90 s): rule 1 and the ranks skip a standby whose
	// heartbeats stopped; an entry that never heartbeated never lapses.
	heartbeats, err := config.WithHeartbeatInterval(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hbTests := []struct {
		name   string
		state  coordination.RoleState
		member string
		now    int64
		want   coordination.Decision
	}{
		// Before the lapse of the two ahead of it, the decision of node-3
		// changes when they lapse, 90 s after their heartbeat.
		{"registration near MaxInt64, the two ahead lapse first", fxSeen(t, fxSeen(t, fxState(t, three, []int64{1, 1, math.MaxInt64 - 10}, "", 0), "node-1", 1), "node-2", 1), "node-3", 0, wait(90002)},
		{"lapsed rank 0 standby is skipped: rank 1 is rank 0", fxSeen(t, fxSeen(t, fxState(t, three, at, "node-1", 30000), "node-2", 2000), "node-3", 95000), "node-3", 100000, challenge},
		{"standbys seen by a heartbeat keep their ranks", fxSeen(t, fxSeen(t, fxState(t, three, at, "node-1", 200000), "node-2", 150000), "node-3", 150000), "node-3", 180000, wait(205000)},
		{"a lapsed standby registers again", fxSeen(t, fxState(t, three, at, "node-1", 30000), "node-2", 2000), "node-2", 100000, absent},
		{"a standby that never heartbeated never lapses", fxState(t, three, at, "node-1", 30000), "node-2", 100000, challenge},
		{"a holder never lapses", fxSeen(t, fxState(t, three, at, "node-1", 30000), "node-1", 1000), "node-1", 99999999, challenge},
		{"the wait of rank 1 ends when rank 0 lapses", fxSeen(t, fxState(t, three, []int64{1000, 2000, 3000}, "node-1", 300000), "node-2", 2000), "node-3", 50000, wait(92001)},
		{"the wait of rank 1 ignores a rank 0 that cannot lapse", fxState(t, three, []int64{1000, 2000, 3000}, "node-1", 300000), "node-3", 50000, wait(305000)},
	}
	for _, test := range hbTests {
		t.Run("heartbeats/"+test.name, func(t *testing.T) {
			got := coordination.Evaluate(test.state, fxMember(t, test.member), test.now, heartbeats)
			if got != test.want {
				t.Errorf("Evaluate(%s at %d) = %s %d, want %s %d", test.member, test.now, got.Action, got.WaitUntil, test.want.Action, test.want.WaitUntil)
			}
		})
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got := coordination.Evaluate(test.state, fxMember(t, test.member), test.now, config)
			if got != test.want {
				t.Errorf("Evaluate(%s at %d) = %s %d, want %s %d", test.member, test.now, got.Action, got.WaitUntil, test.want.Action, test.want.WaitUntil)
			}
		})
	}
}

// TestEvaluateWaitUntilIsTheEarliestChange checks rule 4 by brute force: in
// a world of small instants, every instant from a Wait decision up to
// WaitUntil-1 gives the identical decision, and WaitUntil gives another. The
// same sweep checks that the anchor never moves with the current instant,
// and that every decision other than Wait changes only when the rules say.
func TestEvaluateWaitUntilIsTheEarliestChange(t *testing.T) {
	config := fxConfig(t, 30, 10, 7)
	members := []string{"a", "b", "c", "d", "e"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 2))
		n := 1 + rng.IntN(len(members))
		at := make([]int64, n)
		for i := range at {
			at[i] = rng.Int64N(60) - 10
		}
		holder, deadline := "", int64(0)
		switch rng.IntN(3) {
		case 0: // a member of the roster holds the lease
			holder, deadline = members[rng.IntN(n)], rng.Int64N(80)-10
		case 1: // a lease of a member outside the roster
			holder, deadline = "z", rng.Int64N(80)-10
		}
		state := fxState(t, members[:n], at, holder, deadline)
		for _, name := range append(members[:n:n], "z") {
			member := fxMember(t, name)
			checkDecisionsOverTime(t, fmt.Sprintf("seed %d member %s", seed, name), state, member, config)
		}
	}
}

func checkDecisionsOverTime(t *testing.T, label string, state coordination.RoleState, member coordination.MemberID, config coordination.LeaseConfig) {
	t.Helper()
	const from, to = -20, 200
	decisions := make([]coordination.Decision, 0, to-from)
	for now := int64(from); now < to; now++ {
		decisions = append(decisions, coordination.Evaluate(state, member, now, config))
	}
	for i, d := range decisions {
		now := int64(from + i)
		switch d.Action {
		case coordination.ActionWait:
			if d.WaitUntil <= now {
				t.Fatalf("%s at %d: wait until %d, not after now", label, now, d.WaitUntil)
			}
			before := coordination.Evaluate(state, member, d.WaitUntil-1, config)
			if before != d {
				t.Fatalf("%s at %d: wait until %d, but at %d the decision is %+v", label, now, d.WaitUntil, d.WaitUntil-1, before)
			}
			// At WaitUntil the decision changes: to a challenge, or, when a
			// standby ahead lapses there, to a wait of a lower rank.
			if after := coordination.Evaluate(state, member, d.WaitUntil, config); after == d {
				t.Fatalf("%s at %d: wait until %d, and at %d still %+v", label, now, d.WaitUntil, d.WaitUntil, after)
			}
			if i > 0 && decisions[i-1].Action == coordination.ActionWait && decisions[i-1] != d && decisions[i-1].WaitUntil != now {
				t.Fatalf("%s: the wait moved from %d to %d between %d and %d", label, decisions[i-1].WaitUntil, d.WaitUntil, now-1, now)
			}
		default:
			if d.WaitUntil != 0 {
				t.Fatalf("%s at %d: %s carries WaitUntil %d", label, now, d.Action, d.WaitUntil)
			}
		}
		// Once a member may challenge, it may challenge for ever after,
		// while the role state stays as it is, until its own rank lapses
		// (it then registers again).
		entry, _ := state.Entry(member)
		lapsed := entry.LapsedAt(now, config)
		if i > 0 && decisions[i-1].Action == coordination.ActionChallenge && d.Action != coordination.ActionChallenge && !(lapsed && d.Action == coordination.ActionNotRegistered) {
			t.Fatalf("%s: challenge at %d, then %s at %d", label, now-1, d.Action, now)
		}
		// A member never goes from wait or challenge back to hold.
		if i > 0 && decisions[i-1].Action != coordination.ActionHold && d.Action == coordination.ActionHold {
			t.Fatalf("%s: %s at %d, then hold at %d", label, decisions[i-1].Action, now-1, now)
		}
		// Hold changes to challenge at exactly the deadline.
		if d.Action == coordination.ActionHold && (state.Lease == nil || now >= state.Lease.Deadline) {
			t.Fatalf("%s: hold at %d with lease %+v", label, now, state.Lease)
		}
		if i > 0 && decisions[i-1].Action == coordination.ActionHold && d.Action != coordination.ActionHold &&
			(d.Action != coordination.ActionChallenge || now != state.Lease.Deadline) {
			t.Fatalf("%s: hold until %d, then %s; want challenge at the deadline %d", label, now-1, d.Action, state.Lease.Deadline)
		}
	}
}

func TestEvaluateDefaultStaggers(t *testing.T) {
	// The spec's narrative with the default config: a holder that stops
	// renewing at its deadline is challenged by rank 0 at once and by rank
	// n after n times 5 s.
	config := coordination.DefaultLeaseConfig()
	names := []string{"holder", "s0", "s1", "s2", "s3"}
	registered := make([]int64, len(names))
	for i := range registered {
		registered[i] = 1_700_000_000_000 // seen within the roster lapse
	}
	state := fxState(t, names, registered, "holder", 1_700_000_030_000)
	for rank, name := range names[1:] {
		want := 1_700_000_030_000 + int64(rank)*5000
		member := fxMember(t, name)
		if d := coordination.Evaluate(state, member, want-1, config); d.Action != coordination.ActionWait || d.WaitUntil != want {
			t.Errorf("%s (rank %d) 1 ms before: %+v, want wait until %d", name, rank, d, want)
		}
		if d := coordination.Evaluate(state, member, want, config); d.Action != coordination.ActionChallenge {
			t.Errorf("%s (rank %d) at %d: %+v, want challenge", name, rank, want, d)
		}
	}
}
