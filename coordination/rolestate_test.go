package coordination_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// rosterNames lists the members of a roster in roster order.
func rosterNames(state coordination.RoleState) []string {
	names := make([]string, 0, len(state.Roster))
	for _, entry := range state.Roster {
		names = append(names, entry.Member.String())
	}
	return names
}

func fold(t *testing.T, role coordination.Role, records ...coordination.StateRecord) coordination.RoleState {
	t.Helper()
	state, err := coordination.BuildRoleState(role, records)
	if err != nil {
		t.Fatalf("BuildRoleState: %v", err)
	}
	return state
}

func TestBuildRoleStateEmpty(t *testing.T) {
	state := fold(t, fxRole(t, "controller"))
	if len(state.Roster) != 0 || state.Lease != nil {
		t.Fatalf("empty fold = %+v", state)
	}
	if _, ok := state.Holder(); ok {
		t.Error("an empty state has a holder")
	}
	if _, ok := state.RankOf(fxMember(t, "node-1")); ok {
		t.Error("an empty state ranks a member")
	}
	if _, ok := state.Entry(fxMember(t, "node-1")); ok {
		t.Error("an empty state has an entry")
	}
}

func TestBuildRoleStateRosterInOffsetOrder(t *testing.T) {
	role := fxRole(t, "controller")
	state := fold(t, role,
		fxRegistration(t, role, "node-3", 30, 3000),
		fxRegistration(t, role, "node-1", 10, 1000),
		fxRegistration(t, role, "node-2", 20, 2000),
	)
	if got := rosterNames(state); !reflect.DeepEqual(got, []string{"node-1", "node-2", "node-3"}) {
		t.Fatalf("roster = %v, want offset order node-1, node-2, node-3", got)
	}
	want := coordination.RosterEntry{Member: fxMember(t, "node-2"), Offset: 20, RegisteredAt: 2000} // LastSeen 0: no heartbeat
	if entry, ok := state.Entry(fxMember(t, "node-2")); !ok || entry != want {
		t.Errorf("Entry(node-2) = %+v, %t; want %+v", entry, ok, want)
	}
	if state.Lease != nil {
		t.Errorf("no lease record, yet Lease = %+v", state.Lease)
	}
}

func TestBuildRoleStateNoFailbackRejoin(t *testing.T) {
	role := fxRole(t, "controller")
	records := []coordination.StateRecord{
		fxRegistration(t, role, "node-1", 0, 1000),
		fxRegistration(t, role, "node-2", 1, 1001),
		fxRegistration(t, role, "node-3", 2, 1002),
		fxLease(t, role, "node-2", 3, 5000, 35000),
		// node-1 recovers and registers again.
		fxRegistration(t, role, "node-1", 4, 40000),
	}
	state := fold(t, role, records...)
	if got := rosterNames(state); !reflect.DeepEqual(got, []string{"node-2", "node-3", "node-1"}) {
		t.Fatalf("roster = %v, want node-1 at the tail", got)
	}
	entry, _ := state.Entry(fxMember(t, "node-1"))
	if entry.Offset != 4 || entry.RegisteredAt != 40000 {
		t.Errorf("node-1 entry = %+v, want the re-registration (offset 4, at 40000)", entry)
	}
	for name, want := range map[string]int{"node-2": 0, "node-3": 0, "node-1": 1} {
		if rank, ok := state.RankOf(fxMember(t, name)); !ok || rank != want {
			t.Errorf("RankOf(%s) = %d, %t; want %d", name, rank, ok, want)
		}
	}
	// The rejoined member takes the last rank, so it does not preempt the
	// member that replaced it: node-3 challenges before node-1.
	config := coordination.DefaultLeaseConfig()
	if d := coordination.Evaluate(state, fxMember(t, "node-1"), 35000, config); d.Action != coordination.ActionWait || d.WaitUntil != 40000 {
		t.Errorf("rejoined node-1 at the deadline: %+v, want wait until 40000", d)
	}
	if d := coordination.Evaluate(state, fxMember(t, "node-3"), 35000, config); d.Action != coordination.ActionChallenge {
		t.Errorf("node-3 at the deadline: %+v, want challenge", d)
	}
	// The same holds for a fold in any order.
	reversed := fold(t, role, records[4], records[3], records[2], records[1], records[0])
	if !reflect.DeepEqual(reversed, state) {
		t.Errorf("reversed fold = %+v, want %+v", reversed, state)
	}
}

func TestBuildRoleStateRegistrationTombstones(t *testing.T) {
	role := fxRole(t, "controller")
	reg1 := fxRegistration(t, role, "node-1", 10, 1000)
	reg2 := fxRegistration(t, role, "node-2", 11, 1001)
	tests := []struct {
		name    string
		records []coordination.StateRecord
		want    []string
	}{
		{"tombstone at a higher offset deregisters", []coordination.StateRecord{reg1, reg2, fxDeregistration(t, role, "node-1", 12)}, []string{"node-2"}},
		{"higher tombstone applied first still deregisters", []coordination.StateRecord{fxDeregistration(t, role, "node-1", 12), reg1, reg2}, []string{"node-2"}},
		{"tombstone at a lower offset loses", []coordination.StateRecord{reg1, reg2, fxDeregistration(t, role, "node-1", 5)}, []string{"node-1", "node-2"}},
		{"lower tombstone applied first loses", []coordination.StateRecord{fxDeregistration(t, role, "node-1", 5), reg1, reg2}, []string{"node-1", "node-2"}},
		{"registration after a tombstone rejoins at the tail", []coordination.StateRecord{reg1, reg2, fxDeregistration(t, role, "node-1", 12), fxRegistration(t, role, "node-1", 13, 2000)}, []string{"node-2", "node-1"}},
		{"tombstone of a member that never registered", []coordination.StateRecord{reg1, fxDeregistration(t, role, "node-9", 12)}, []string{"node-1"}},
		{"nil and empty values are both tombstones", []coordination.StateRecord{reg1, reg2, {Offset: 12, Key: reg1.Key, Value: nil}, {Offset: 13, Key: reg2.Key, Value: []byte{}}}, []string{}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if got := rosterNames(fold(t, role, test.records...)); !reflect.DeepEqual(got, test.want) {
				t.Errorf("roster = %v, want %v", got, test.want)
			}
		})
	}
}

func TestBuildRoleStateLeaseRecords(t *testing.T) {
	role := fxRole(t, "controller")
	reg := fxRegistration(t, role, "node-1", 0, 0)
	older := fxLease(t, role, "node-1", 5, 1000, 31000)
	newer := fxLease(t, role, "node-2", 9, 2000, 32000)
	tests := []struct {
		name    string
		records []coordination.StateRecord
		holder  string // "" for no lease
	}{
		{"one lease", []coordination.StateRecord{reg, older}, "node-1"},
		{"the higher offset wins", []coordination.StateRecord{reg, older, newer}, "node-2"},
		{"the higher offset wins in any order", []coordination.StateRecord{newer, reg, older}, "node-2"},
		{"tombstone at a higher offset clears", []coordination.StateRecord{reg, older, fxLeaseTombstone(role, 6)}, ""},
		{"higher tombstone applied first clears", []coordination.StateRecord{fxLeaseTombstone(role, 6), reg, older}, ""},
		{"tombstone at a lower offset loses", []coordination.StateRecord{reg, older, fxLeaseTombstone(role, 4)}, "node-1"},
		{"lower tombstone applied first loses", []coordination.StateRecord{fxLeaseTombstone(role, 4), older, reg}, "node-1"},
		{"a lease after a tombstone", []coordination.StateRecord{older, fxLeaseTombstone(role, 6), newer}, "node-2"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			state := fold(t, role, test.records...)
			holder, ok := state.Holder()
			switch {
			case test.holder == "" && (ok || state.Lease != nil):
				t.Errorf("Holder() = %s, Lease = %+v; want no lease", holder, state.Lease)
			case test.holder != "" && (!ok || holder.String() != test.holder || state.Lease == nil || state.Lease.Member != holder):
				t.Errorf("Holder() = %s, %t; want %s", holder, ok, test.holder)
			}
		})
	}
	state := fold(t, role, reg, newer)
	want := coordination.Lease{Member: fxMember(t, "node-2"), Token: fxToken(t, 11, 1), GrantedAt: 2000, Deadline: 32000}
	if *state.Lease != want {
		t.Errorf("Lease = %+v, want %+v", *state.Lease, want)
	}
}

func TestBuildRoleStateDropsOtherRoles(t *testing.T) {
	role, other := fxRole(t, "controller"), fxRole(t, "archiver")
	state := fold(t, role,
		fxRegistration(t, other, "node-0", 0, 0),
		fxRegistration(t, role, "node-1", 1, 0),
		fxLease(t, other, "node-0", 2, 0, 30000),
		fxRegistration(t, other, "node-2", 3, 0),
		fxDeregistration(t, other, "node-1", 4),
		fxLeaseTombstone(other, 5),
	)
	if got := rosterNames(state); !reflect.DeepEqual(got, []string{"node-1"}) {
		t.Errorf("roster = %v, want only node-1 of controller", got)
	}
	if state.Lease != nil {
		t.Errorf("the lease of another role leaked in: %+v", state.Lease)
	}
	withLease := fold(t, role, fxLease(t, role, "node-1", 1, 0, 30000), fxLeaseTombstone(other, 5))
	if withLease.Lease == nil {
		t.Error("the lease tombstone of another role cleared this role's lease")
	}
	if b := coordination.NewRoleStateBuilder(role); b.Role() != role {
		t.Errorf("Role() = %s", b.Role())
	}
}

func TestBuildRoleStateTakesTheMemberFromTheKey(t *testing.T) {
	role := fxRole(t, "controller")
	record := fxRegistration(t, role, "node-1", 0, 1000)
	record.Value = coordination.EncodeRegistration(coordination.Registration{Member: fxMember(t, "impostor"), RegisteredAt: 1000})
	state := fold(t, role, record)
	if got := rosterNames(state); !reflect.DeepEqual(got, []string{"node-1"}) {
		t.Errorf("roster = %v, want the key's member node-1", got)
	}
}

func TestBuildRoleStateReportsMalformedRecords(t *testing.T) {
	role := fxRole(t, "controller")
	good := []coordination.StateRecord{
		fxRegistration(t, role, "node-1", 0, 1000),
		fxRegistration(t, role, "node-2", 2, 1002),
		fxLease(t, role, "node-1", 4, 1000, 31000),
	}
	regKey := coordination.EncodeKey(coordination.RegistrationKey(role, fxMember(t, "node-3")))
	leaseKey := coordination.EncodeKey(coordination.LeaseKey(role))
	tests := []struct {
		name string
		bad  coordination.StateRecord
		part string
	}{
		{"bad key", coordination.StateRecord{Offset: 7, Key: []byte{0, 9}, Value: []byte{1}}, "key"},
		{"empty key", coordination.StateRecord{Offset: 7}, "key"},
		{"bad registration value", coordination.StateRecord{Offset: 7, Key: regKey, Value: []byte{0, 0, 0}}, "registration value"},
		{"a lease value under a registration key", coordination.StateRecord{Offset: 7, Key: regKey, Value: good[2].Value}, "registration value"},
		{"bad lease value", coordination.StateRecord{Offset: 7, Key: leaseKey, Value: good[0].Value}, "lease value"},
	}
	want := fold(t, role, good...)
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			records := []coordination.StateRecord{good[0], good[1], test.bad, good[2]}
			state, err := coordination.BuildRoleState(role, records)
			if err == nil {
				t.Fatal("BuildRoleState reported no error")
			}
			var formatError *coordination.FormatError
			if !errors.As(err, &formatError) || formatError.Part != test.part {
				t.Errorf("error %v: want a *FormatError for the %s", err, test.part)
			}
			if !strings.Contains(err.Error(), "offset 7") {
				t.Errorf("error %q does not name the offset 7", err)
			}
			if !reflect.DeepEqual(state, want) {
				t.Errorf("state next to the error = %+v, want the fold of the well-formed records %+v", state, want)
			}
		})
	}

	// A malformed record at a higher offset does not displace the kept
	// record of its key.
	malformedLease := coordination.StateRecord{Offset: 9, Key: leaseKey, Value: []byte{0, 0}}
	state, err := coordination.BuildRoleState(role, append(good, malformedLease))
	if err == nil || state.Lease == nil || *state.Lease != *want.Lease {
		t.Errorf("a malformed lease at a higher offset: state %+v, err %v; want the kept lease and an error", state, err)
	}

	// A malformed record is reported in any order, also after a record of a
	// higher offset has replaced it.
	superseded := coordination.StateRecord{Offset: 1, Key: good[2].Key, Value: []byte{0, 0, 0, 0}}
	state, err = coordination.BuildRoleState(role, append(append([]coordination.StateRecord(nil), good...), superseded))
	if err == nil || !strings.Contains(err.Error(), "offset 1") {
		t.Errorf("a malformed lease below the kept one, applied last: error %v, want the record at offset 1", err)
	}
	if !reflect.DeepEqual(state, want) {
		t.Errorf("state = %+v, want %+v", state, want)
	}

	// BuildRoleState reports the first malformed record it applies.
	first := coordination.StateRecord{Offset: 3, Key: []byte{1}}
	second := coordination.StateRecord{Offset: 8, Key: []byte{2}}
	_, err = coordination.BuildRoleState(role, []coordination.StateRecord{good[0], first, second})
	if err == nil || !strings.Contains(err.Error(), "offset 3") {
		t.Errorf("error = %v, want the record at offset 3", err)
	}

	// Apply reports the same error and leaves the fold as it was.
	builder := coordination.NewRoleStateBuilder(role)
	for _, record := range good {
		if err := builder.Apply(record); err != nil {
			t.Fatal(err)
		}
	}
	var formatError *coordination.FormatError
	if err := builder.Apply(tests[2].bad); !errors.As(err, &formatError) {
		t.Errorf("Apply(malformed) = %v, want a *FormatError", err)
	}
	if got := builder.Build(); !reflect.DeepEqual(got, want) {
		t.Errorf("Build after a malformed Apply = %+v, want %+v", got, want)
	}
}

func TestRoleStateBuilderBuildSharesNoMemory(t *testing.T) {
	role := fxRole(t, "controller")
	builder := coordination.NewRoleStateBuilder(role)
	for _, record := range []coordination.StateRecord{
		fxRegistration(t, role, "node-1", 0, 0),
		fxLease(t, role, "node-1", 1, 0, 30000),
	} {
		if err := builder.Apply(record); err != nil {
			t.Fatal(err)
		}
	}
	first := builder.Build()
	first.Roster[0].Offset = 99
	first.Lease.Deadline = 99
	second := builder.Build()
	if second.Roster[0].Offset != 0 || second.Lease.Deadline != 30000 {
		t.Fatalf("a change to one built state reached the builder: %+v", second)
	}
	if err := builder.Apply(fxRegistration(t, role, "node-2", 2, 0)); err != nil {
		t.Fatal(err)
	}
	if err := builder.Apply(fxLeaseTombstone(role, 3)); err != nil {
		t.Fatal(err)
	}
	if len(second.Roster) != 1 || second.Lease == nil {
		t.Errorf("folding more records changed an earlier state: %+v", second)
	}
}

func TestRankOf(t *testing.T) {
	role := fxRole(t, "controller")
	regs := []coordination.StateRecord{
		fxRegistration(t, role, "node-1", 0, 0),
		fxRegistration(t, role, "node-2", 1, 0),
		fxRegistration(t, role, "node-3", 2, 0),
		fxRegistration(t, role, "node-4", 3, 0),
	}
	tests := []struct {
		name  string
		lease *coordination.StateRecord
		ranks map[string]int
	}{
		{"no lease: the roster index", nil, map[string]int{"node-1": 0, "node-2": 1, "node-3": 2, "node-4": 3}},
		{"holder first: removed from the others' count, keeps 0", ptr(fxLease(t, role, "node-1", 4, 0, 1)), map[string]int{"node-1": 0, "node-2": 0, "node-3": 1, "node-4": 2}},
		{"holder in the middle", ptr(fxLease(t, role, "node-3", 4, 0, 1)), map[string]int{"node-1": 0, "node-2": 1, "node-3": 0, "node-4": 2}},
		{"holder last", ptr(fxLease(t, role, "node-4", 4, 0, 1)), map[string]int{"node-1": 0, "node-2": 1, "node-3": 2, "node-4": 0}},
		{"holder not in the roster", ptr(fxLease(t, role, "node-9", 4, 0, 1)), map[string]int{"node-1": 0, "node-2": 1, "node-3": 2, "node-4": 3}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			records := append([]coordination.StateRecord(nil), regs...)
			if test.lease != nil {
				records = append(records, *test.lease)
			}
			state := fold(t, role, records...)
			for name, want := range test.ranks {
				if rank, ok := state.RankOf(fxMember(t, name)); !ok || rank != want {
					t.Errorf("RankOf(%s) = %d, %t; want %d", name, rank, ok, want)
				}
			}
			if rank, ok := state.RankOf(fxMember(t, "node-9")); ok {
				t.Errorf("RankOf(unregistered node-9) = %d, true", rank)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// randomRecords builds a log of one partition that holds two roles, with a
// unique offset for every record, registrations, tombstones, leases, and a
// few malformed records.
func randomRecords(t *testing.T, rng *rand.Rand, role, other coordination.Role, n int) []coordination.StateRecord {
	members := []string{"node-0", "node-1", "node-2", "node-3", "node-4", "日本", "é"}
	offsets := rng.Perm(4 * n)
	records := make([]coordination.StateRecord, 0, n)
	for i := range n {
		offset := int64(offsets[i])
		r := role
		if rng.IntN(5) == 0 {
			r = other
		}
		member := members[rng.IntN(len(members))]
		var record coordination.StateRecord
		switch k := rng.IntN(20); {
		case k < 9:
			record = fxRegistration(t, r, member, offset, rng.Int64N(100000))
		case k < 12:
			record = fxDeregistration(t, r, member, offset)
		case k < 16:
			record = fxLease(t, r, member, offset, rng.Int64N(100000), rng.Int64N(100000))
		case k < 18:
			record = fxLeaseTombstone(r, offset)
		case k < 19:
			record = coordination.StateRecord{Offset: offset, Key: []byte{0, 0, 0}, Value: []byte{1}}
		default:
			record = fxRegistration(t, r, member, offset, 0)
			record.Value = record.Value[:len(record.Value)-1]
		}
		records = append(records, record)
	}
	return records
}

func TestBuildRoleStateIsOrderIndependent(t *testing.T) {
	role, other := fxRole(t, "controller"), fxRole(t, "archiver")
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0x6b72616b6b61))
		records := randomRecords(t, rng, role, other, 1+rng.IntN(40))
		want, wantErr := coordination.BuildRoleState(role, records)
		for permutation := range 10 {
			shuffled := append([]coordination.StateRecord(nil), records...)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			got, err := coordination.BuildRoleState(role, shuffled)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d permutation %d: state %s, want %s", seed, permutation, describeState(got), describeState(want))
			}
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("seed %d permutation %d: error %v, want %v", seed, permutation, err, wantErr)
			}
		}
	}
}

func describeState(state coordination.RoleState) string {
	var b strings.Builder
	for _, entry := range state.Roster {
		fmt.Fprintf(&b, "%s@%d(%d) ", entry.Member, entry.Offset, entry.RegisteredAt)
	}
	if state.Lease != nil {
		fmt.Fprintf(&b, "lease %+v", *state.Lease)
	}
	return b.String()
}

// fxHeartbeat builds the heartbeat record of a member at an offset.
func fxHeartbeat(t testing.TB, role coordination.Role, member string, offset, seenAt int64) coordination.StateRecord {
	t.Helper()
	return coordination.StateRecord{
		Offset: offset,
		Key:    coordination.EncodeKey(coordination.HeartbeatKey(role, fxMember(t, member))),
		Value:  coordination.EncodeHeartbeat(coordination.Heartbeat{Member: fxMember(t, member), SeenAt: seenAt}),
	}
}

// TestBuildRoleStateHeartbeats: a heartbeat moves the member's LastSeen and
// never its offset (its rank); a heartbeat below the registration belongs
// to an earlier incarnation; a tombstone of the heartbeat key drops it;
// LastSeen is zero for an entry with no heartbeat (the holder's renewals
// are no heartbeat: the holder never lapses).
func TestBuildRoleStateHeartbeats(t *testing.T) {
	role := fxRole(t, "controller")
	heartbeatKey := coordination.EncodeKey(coordination.HeartbeatKey(role, fxMember(t, "node-3")))
	state := fold(t, role,
		fxRegistration(t, role, "node-1", 0, 1000),
		fxRegistration(t, role, "node-2", 1, 2000),
		fxHeartbeat(t, role, "node-4", 2, 2500), // before node-4's registration
		fxRegistration(t, role, "node-3", 3, 3000),
		fxRegistration(t, role, "node-4", 4, 4000),
		fxLease(t, role, "node-1", 5, 1000, 31000),
		fxHeartbeat(t, role, "node-2", 6, 60000),
		fxHeartbeat(t, role, "node-3", 7, 61000),
		coordination.StateRecord{Offset: 8, Key: heartbeatKey}, // node-3's heartbeat tombstone
		fxLease(t, role, "node-1", 9, 50000, 80000),
		fxHeartbeat(t, role, "node-2", 10, 70000),
	)
	if got := rosterNames(state); !reflect.DeepEqual(got, []string{"node-1", "node-2", "node-3", "node-4"}) {
		t.Fatalf("roster = %v: a heartbeat must not move a member", got)
	}
	for member, want := range map[string]struct{ offset, seen int64 }{
		"node-1": {0, 0},     // the holder wrote no heartbeat
		"node-2": {1, 70000}, // the newest heartbeat
		"node-3": {3, 0},     // the heartbeat was deregistered
		"node-4": {4, 0},     // the heartbeat came before the registration
	} {
		entry, ok := state.Entry(fxMember(t, member))
		if !ok || entry.Offset != want.offset || entry.LastSeen != want.seen {
			t.Errorf("Entry(%s) = %+v, %t; want offset %d, last seen %d", member, entry, ok, want.offset, want.seen)
		}
	}
}

// TestRankAtSkipsLapsedStandbys: a standby unseen for the roster lapse (3
// heartbeat intervals) ranks nobody behind it, a live standby keeps its
// offset order, the holder never lapses, and a lapsed member has no rank.
func TestRankAtSkipsLapsedStandbys(t *testing.T) {
	role := fxRole(t, "controller")
	config, err := fxConfig(t, 30000, 10000, 5000).WithHeartbeatInterval(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := config.RosterLapse(); got != 30*time.Second {
		t.Fatalf("RosterLapse = %v, want 3 heartbeat intervals, 30s", got)
	}
	state := fold(t, role,
		fxRegistration(t, role, "holder", 0, 0),
		fxRegistration(t, role, "dead", 1, 1000),
		fxRegistration(t, role, "live", 2, 2000),
		fxRegistration(t, role, "late", 3, 3000),
		fxLease(t, role, "holder", 4, 0, 30000), // the holder dies: no renewal
		fxHeartbeat(t, role, "dead", 5, 1000),   // each standby heartbeats right after its registration
		fxHeartbeat(t, role, "live", 6, 40000),
		fxHeartbeat(t, role, "late", 7, 40000),
		fxRegistration(t, role, "other-port", 8, 500), // never heartbeats: never lapses
	)
	for _, tt := range []struct {
		member string
		now    int64
		rank   int
		ok     bool
	}{
		{"dead", 31000, 0, true},       // seen 30 s ago: not lapsed yet
		{"live", 31000, 1, true},       // behind it
		{"dead", 31001, 0, false},      // lapsed
		{"live", 31001, 0, true},       // rank 0 now
		{"late", 31001, 1, true},       // the live order holds
		{"holder", 99999, 0, true},     // the lease is the holder's sign of life
		{"live", 70001, 0, false},      // its heartbeats stopped too
		{"other-port", 70001, 0, true}, // no heartbeat ever: the specification's rank, ahead of nobody lapsed
	} {
		rank, ok := state.RankAt(fxMember(t, tt.member), tt.now, config)
		if rank != tt.rank || ok != tt.ok {
			t.Errorf("RankAt(%s, %d) = %d, %t; want %d, %t", tt.member, tt.now, rank, ok, tt.rank, tt.ok)
		}
	}
	if rank, ok := state.RankOf(fxMember(t, "live")); rank != 1 || !ok {
		t.Errorf("RankOf(live) = %d, %t; want 1, true: RankOf knows no lapse", rank, ok)
	}
	// Without heartbeats in the config nothing lapses: RankAt is RankOf.
	for _, member := range []string{"dead", "live", "late", "other-port"} {
		want, _ := state.RankOf(fxMember(t, member))
		if rank, ok := state.RankAt(fxMember(t, member), 1<<40, fxConfig(t, 30000, 10000, 5000)); rank != want || !ok {
			t.Errorf("RankAt(%s) without heartbeats = %d, %t; want RankOf's %d, true", member, rank, ok, want)
		}
	}
}
