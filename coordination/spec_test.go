package coordination_test

// The conformance suite of the specification,
// ../shared/spec/coordination-package-doc.txt as the project received it:
// one TestSpec… function per rule, error and default, written from the
// specification alone, over the in-memory transport of
// spec_transport_test.go (the four interfaces of Transport and nothing
// else) and the specification's names, options and defaults. An extension
// that changes an answer that the specification promises fails here; it
// belongs behind an option (see "Extensions and errata" in doc.go).
//
// The loop tests run in a synctest bubble with the default SystemClock, so
// the defaults are exactly the specification's and the bubble's fake time
// moves only when every goroutine waits.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func specRole(t testing.TB, name string) coordination.Role {
	t.Helper()
	role, err := coordination.NewRole(name)
	if err != nil {
		t.Fatal(err)
	}
	return role
}

func specMember(t testing.TB, name string) coordination.MemberID {
	t.Helper()
	member, err := coordination.NewMemberID(name)
	if err != nil {
		t.Fatal(err)
	}
	return member
}

func specToken(t testing.TB, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	token, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func specConfig(t testing.TB, duration, renew, stagger time.Duration) coordination.LeaseConfig {
	t.Helper()
	config, err := coordination.NewLeaseConfig(duration, renew, stagger)
	if err != nil {
		t.Fatal(err)
	}
	return config
}

func specRegistration(t testing.TB, role coordination.Role, member string, offset, registeredAt int64) coordination.StateRecord {
	t.Helper()
	m := specMember(t, member)
	return coordination.StateRecord{Offset: offset,
		Key:   coordination.EncodeKey(coordination.RegistrationKey(role, m)),
		Value: coordination.EncodeRegistration(coordination.Registration{Member: m, RegisteredAt: registeredAt})}
}

func specLease(t testing.TB, role coordination.Role, member string, offset, grantedAt, deadline int64) coordination.StateRecord {
	t.Helper()
	return coordination.StateRecord{Offset: offset,
		Key: coordination.EncodeKey(coordination.LeaseKey(role)),
		Value: coordination.EncodeLease(coordination.Lease{Member: specMember(t, member), Token: specToken(t, 11, 1),
			GrantedAt: grantedAt, Deadline: deadline})}
}

func specTombstone(key []byte, offset int64) coordination.StateRecord {
	return coordination.StateRecord{Offset: offset, Key: key}
}

// specState is a hand-built role state, as a caller of Evaluate writes
// one: entries with Member, Offset and RegisteredAt only.
func specState(t testing.TB, members []string, registeredAt []int64, holder string, deadline int64) coordination.RoleState {
	t.Helper()
	var state coordination.RoleState
	for i, name := range members {
		state.Roster = append(state.Roster, coordination.RosterEntry{Member: specMember(t, name), Offset: int64(i), RegisteredAt: registeredAt[i]})
	}
	if holder != "" {
		state.Lease = &coordination.Lease{Member: specMember(t, holder), Token: specToken(t, 11, 1), GrantedAt: deadline - 30000, Deadline: deadline}
	}
	return state
}

func specWait(until int64) coordination.Decision {
	return coordination.Decision{Action: coordination.ActionWait, WaitUntil: until}
}

var (
	specHold      = coordination.Decision{Action: coordination.ActionHold}
	specChallenge = coordination.Decision{Action: coordination.ActionChallenge}
	specAbsent    = coordination.Decision{Action: coordination.ActionNotRegistered}
)

func specEvaluate(t *testing.T, state coordination.RoleState, member string, now int64, config coordination.LeaseConfig, want coordination.Decision) {
	t.Helper()
	if got := coordination.Evaluate(state, specMember(t, member), now, config); got != want {
		t.Errorf("Evaluate(%s at %d) = %s %d, want %s %d", member, now, got.Action, got.WaitUntil, want.Action, want.WaitUntil)
	}
}

// Rule 1: a member that is not in the roster gets ActionNotRegistered.
func TestSpecEvaluateRule1NotRegistered(t *testing.T) {
	config := coordination.DefaultLeaseConfig()
	three, at := []string{"node-1", "node-2", "node-3"}, []int64{1000, 2000, 3000}
	specEvaluate(t, coordination.RoleState{}, "node-1", 0, config, specAbsent)
	specEvaluate(t, specState(t, three, at, "", 0), "node-9", 50000, config, specAbsent)
	specEvaluate(t, specState(t, three, at, "node-9", 30000), "node-9", 0, config, specAbsent) // the lease names it, the roster does not
}

// Rule 2: a member that the lease names, while that lease is live, gets
// ActionHold; from the deadline on the lease is expired.
func TestSpecEvaluateRule2Hold(t *testing.T) {
	config := coordination.DefaultLeaseConfig()
	three, at := []string{"node-1", "node-2", "node-3"}, []int64{1000, 2000, 3000}
	specEvaluate(t, specState(t, three, at, "node-2", 30000), "node-2", 0, config, specHold)
	specEvaluate(t, specState(t, three, at, "node-2", 30000), "node-2", 29999, config, specHold)
	specEvaluate(t, specState(t, three, at, "node-2", 30000), "node-2", 30000, config, specChallenge)
}

// Rule 3 with a lease: rank n challenges from the deadline plus n
// staggers on, and the member of an expired lease keeps rank 0.
func TestSpecEvaluateRule3WithLease(t *testing.T) {
	config := coordination.DefaultLeaseConfig() // stagger 5 s
	three, at := []string{"node-1", "node-2", "node-3"}, []int64{1000, 2000, 3000}
	held := specState(t, three, at, "node-1", 30000)
	specEvaluate(t, held, "node-2", 30000, config, specChallenge) // rank 0 at the deadline
	specEvaluate(t, held, "node-3", 34999, config, specWait(35000))
	specEvaluate(t, held, "node-3", 35000, config, specChallenge) // rank 1 one stagger later
	specEvaluate(t, held, "node-1", 30000, config, specChallenge) // the expired holder keeps rank 0
	middle := specState(t, three, at, "node-2", 30000)
	specEvaluate(t, middle, "node-1", 30000, config, specChallenge) // the holder leaves the rank order
	specEvaluate(t, middle, "node-3", 34999, config, specWait(35000))
}

// Rule 3 without a lease: the anchor is the member's own registration
// instant, never the current instant, so rank 0 challenges at once and a
// member registered long ago challenges at once too, whatever the time
// since (no roster lapse in the specification).
func TestSpecEvaluateRule3NoLease(t *testing.T) {
	config := coordination.DefaultLeaseConfig()
	three, at := []string{"node-1", "node-2", "node-3"}, []int64{1000, 2000, 3000}
	free := specState(t, three, at, "", 0)
	specEvaluate(t, free, "node-1", 1000, config, specChallenge)
	specEvaluate(t, free, "node-2", 6999, config, specWait(7000))
	specEvaluate(t, free, "node-2", 7000, config, specChallenge)
	specEvaluate(t, free, "node-3", 3000, config, specWait(13000))
	// Registered more than three lease durations ago: still rule 3.
	specEvaluate(t, free, "node-1", 1000+4*30000, config, specChallenge)
	specEvaluate(t, free, "node-2", 10_000_000, config, specChallenge)
	// The anchor does not move with the instant: the same wait at every
	// instant before it.
	for now := int64(0); now < 13000; now += 250 {
		specEvaluate(t, free, "node-3", now, config, specWait(13000))
	}
}

// Rule 3 after a resignation: the lease tombstone leaves no lease, so the
// anchor is the registration instant, and every standby registered more
// than its staggers ago challenges at once (the specification; the
// resignation anchor is an option).
func TestSpecEvaluateRule3AfterResignation(t *testing.T) {
	role := specRole(t, "controller")
	leaseKey := coordination.EncodeKey(coordination.LeaseKey(role))
	state, err := coordination.BuildRoleState(role, []coordination.StateRecord{
		specRegistration(t, role, "node-1", 0, 1000),
		specRegistration(t, role, "node-2", 1, 2000),
		specRegistration(t, role, "node-3", 2, 3000),
		specLease(t, role, "node-1", 3, 4000, 34000),
		specTombstone(coordination.EncodeKey(coordination.RegistrationKey(role, specMember(t, "node-1"))), 4),
		specTombstone(leaseKey, 5),
	})
	if err != nil {
		t.Fatal(err)
	}
	config := coordination.DefaultLeaseConfig()
	specEvaluate(t, state, "node-2", 20000, config, specChallenge)
	specEvaluate(t, state, "node-3", 20000, config, specChallenge) // rank 1: 3000 + 5000 passed
}

// Rule 4: the wait carries the earliest instant at which the answer
// changes for an unchanged role state. Checked by brute force over a small
// world, and for the rank-1 standby behind a live lease with a 2 s
// stagger.
func TestSpecEvaluateRule4WaitUntil(t *testing.T) {
	three, at := []string{"node-1", "node-2", "node-3"}, []int64{1000, 2000, 3000}
	config := specConfig(t, 30*time.Second, 10*time.Second, 2*time.Second)
	specEvaluate(t, specState(t, three, at, "node-1", 30000), "node-3", 0, config, specWait(32000))
	specEvaluate(t, specState(t, three, at, "node-1", 30000), "node-2", 0, config, specWait(30000))

	small := specConfig(t, 30*time.Millisecond, 10*time.Millisecond, 5*time.Millisecond)
	states := map[string]coordination.RoleState{
		"held":  specState(t, three, []int64{1, 2, 3}, "node-1", 30),
		"free":  specState(t, three, []int64{1, 2, 3}, "", 0),
		"mid":   specState(t, three, []int64{1, 2, 3}, "node-2", 40),
		"alien": specState(t, three, []int64{1, 2, 3}, "node-9", 20),
	}
	for name, state := range states {
		for _, member := range append(three, "node-9") {
			for now := int64(0); now < 80; now++ {
				d := coordination.Evaluate(state, specMember(t, member), now, small)
				if d.Action != coordination.ActionWait {
					if d.WaitUntil != 0 {
						t.Errorf("%s: Evaluate(%s at %d) = %s with WaitUntil %d; WaitUntil carries a value for a wait only", name, member, now, d.Action, d.WaitUntil)
					}
					continue
				}
				if d.WaitUntil <= now {
					t.Fatalf("%s: Evaluate(%s at %d) waits until %d, not later than now", name, member, now, d.WaitUntil)
				}
				for between := now; between < d.WaitUntil; between++ {
					if got := coordination.Evaluate(state, specMember(t, member), between, small); got != d {
						t.Fatalf("%s: Evaluate(%s) at %d = %v, at %d = %v: the answer changed before WaitUntil", name, member, now, d, between, got)
					}
				}
				if got := coordination.Evaluate(state, specMember(t, member), d.WaitUntil, small); got == d {
					t.Fatalf("%s: Evaluate(%s) at WaitUntil %d is still %v", name, member, d.WaitUntil, got)
				}
			}
		}
	}
}

// The Output of the specification's Evaluate example.
func TestSpecEvaluateExample(t *testing.T) {
	role := specRole(t, "controller")
	config := specConfig(t, 30*time.Second, 10*time.Second, 5*time.Second)
	state, err := coordination.BuildRoleState(role, []coordination.StateRecord{
		specRegistration(t, role, "node-1", 0, 0),
		specRegistration(t, role, "node-2", 1, 0),
		specRegistration(t, role, "node-3", 2, 0),
		specLease(t, role, "node-1", 3, 0, 30000),
	})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, name := range []string{"node-1", "node-2", "node-3"} {
		rank, _ := state.RankOf(specMember(t, name))
		d := coordination.Evaluate(state, specMember(t, name), 30000, config)
		out.WriteString(name + " rank " + itoa(int64(rank)) + ": " + d.Action.String() + " " + itoa(d.WaitUntil) + "\n")
	}
	want := "node-1 rank 0: challenge 0\nnode-2 rank 0: challenge 0\nnode-3 rank 1: wait 35000\n"
	if out.String() != want {
		t.Fatalf("the example prints\n%s\nwant\n%s", out.String(), want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// RankOf: the index in the roster after the removal of the holder; the
// holder keeps rank 0; Evaluate ranks the same way for a hand-built state
// whose entries carry no more than the specification's three fields.
func TestSpecRankOf(t *testing.T) {
	three, at := []string{"node-1", "node-2", "node-3"}, []int64{1000, 2000, 3000}
	config := coordination.DefaultLeaseConfig()
	for _, tt := range []struct {
		holder string
		ranks  map[string]int
	}{
		{"", map[string]int{"node-1": 0, "node-2": 1, "node-3": 2}},
		{"node-1", map[string]int{"node-1": 0, "node-2": 0, "node-3": 1}},
		{"node-2", map[string]int{"node-1": 0, "node-2": 0, "node-3": 1}},
		{"node-9", map[string]int{"node-1": 0, "node-2": 1, "node-3": 2}},
	} {
		state := specState(t, three, at, tt.holder, 30000)
		for member, want := range tt.ranks {
			rank, ok := state.RankOf(specMember(t, member))
			if !ok || rank != want {
				t.Errorf("holder %q: RankOf(%s) = %d, %t; want %d, true", tt.holder, member, rank, ok, want)
			}
			// Long after every instant of the state, Evaluate's rank is RankOf's.
			now := int64(10_000_000)
			var challengeAt int64
			if tt.holder != "" {
				challengeAt = 30000 + int64(want)*5000
			} else {
				challengeAt = at[want] + int64(want)*5000
			}
			d := coordination.Evaluate(state, specMember(t, member), now, config)
			if d.Action != coordination.ActionChallenge || challengeAt > now {
				t.Errorf("holder %q: Evaluate(%s) long after = %v; want challenge by rank %d", tt.holder, member, d, want)
			}
		}
		if _, ok := state.RankOf(specMember(t, "node-9")); ok && tt.holder != "node-9" {
			t.Errorf("RankOf of an unregistered member reports it registered")
		}
	}
}

// BuildRoleState: the roster in offset order; the record of the highest
// offset of every key wins, whatever order the records come in; a later
// registration moves the member to the tail (no failback); a registration
// tombstone removes the member; a lease tombstone clears the lease; a
// record of another role is dropped.
func TestSpecBuildRoleStateFold(t *testing.T) {
	role, other := specRole(t, "controller"), specRole(t, "archiver")
	records := []coordination.StateRecord{
		specRegistration(t, role, "node-1", 0, 1000),
		specRegistration(t, role, "node-2", 1, 2000),
		specRegistration(t, role, "node-3", 2, 3000),
		specLease(t, role, "node-1", 3, 3000, 33000),
		specRegistration(t, other, "node-9", 4, 4000),
		specRegistration(t, role, "node-1", 5, 5000), // node-1 recovered: the tail
		specTombstone(coordination.EncodeKey(coordination.RegistrationKey(role, specMember(t, "node-3"))), 6),
		specLease(t, role, "node-2", 7, 7000, 37000),
	}
	want := []coordination.RosterEntry{
		{Member: specMember(t, "node-2"), Offset: 1, RegisteredAt: 2000},
		{Member: specMember(t, "node-1"), Offset: 5, RegisteredAt: 5000},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		shuffled := append([]coordination.StateRecord(nil), records...)
		if i > 0 {
			rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		}
		state, err := coordination.BuildRoleState(role, shuffled)
		if err != nil {
			t.Fatal(err)
		}
		if len(state.Roster) != len(want) {
			t.Fatalf("order %d: roster %+v, want %+v", i, state.Roster, want)
		}
		for j := range want {
			if state.Roster[j] != want[j] {
				t.Fatalf("order %d: roster %+v, want %+v", i, state.Roster, want)
			}
		}
		if state.Lease == nil || state.Lease.Member != specMember(t, "node-2") || state.Lease.Deadline != 37000 {
			t.Fatalf("order %d: lease %+v, want node-2's until 37000", i, state.Lease)
		}
		if holder, ok := state.Holder(); !ok || holder != specMember(t, "node-2") {
			t.Fatalf("order %d: Holder() = %s, %t", i, holder, ok)
		}
	}
	cleared, err := coordination.BuildRoleState(role, append(records, specTombstone(coordination.EncodeKey(coordination.LeaseKey(role)), 8)))
	if err != nil || cleared.Lease != nil {
		t.Fatalf("after a lease tombstone: lease %+v, %v; want none", cleared.Lease, err)
	}
	if _, ok := cleared.Holder(); ok {
		t.Fatalf("a role without a lease reports a holder")
	}
	builder := coordination.NewRoleStateBuilder(role)
	if builder.Role() != role {
		t.Fatalf("Role() = %s", builder.Role())
	}
	for _, r := range records {
		if err := builder.Apply(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := builder.Build(); len(got.Roster) != 2 || got.Roster[1].Member != specMember(t, "node-1") {
		t.Fatalf("the builder folds to %+v", got)
	}
}

// BuildRoleState reports the first record that does not decode.
func TestSpecBuildRoleStateReportsTheFirstMalformedRecord(t *testing.T) {
	role := specRole(t, "controller")
	_, err := coordination.BuildRoleState(role, []coordination.StateRecord{
		specRegistration(t, role, "node-1", 0, 1000),
		{Offset: 1, Key: []byte{0, 0, 0}},
		{Offset: 2, Key: coordination.EncodeKey(coordination.LeaseKey(role)), Value: []byte{0, 0, 1}},
	})
	var format *coordination.FormatError
	if !errors.As(err, &format) || format.Part != "key" {
		t.Fatalf("BuildRoleState = %v; want the *FormatError of the key at offset 1", err)
	}
}

// The layout: big-endian, an int16 version 0 first, strings as an int16
// length and UTF-8 bytes; a lease key carries the empty member string.
func TestSpecCodecLayout(t *testing.T) {
	role, member := specRole(t, "controller"), specMember(t, "node-1")
	str := func(s string) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(s))), s...) }
	i16 := func(v int16) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
	i64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

	if got, want := coordination.EncodeKey(coordination.RegistrationKey(role, member)), cat(i16(0), i16(0), str("controller"), str("node-1")); !bytes.Equal(got, want) {
		t.Errorf("registration key = %x, want %x", got, want)
	}
	lease := coordination.Key{Kind: coordination.KindLease, Role: role, Member: member} // EncodeKey drops the member
	if got, want := coordination.EncodeKey(lease), cat(i16(0), i16(1), str("controller"), str("")); !bytes.Equal(got, want) {
		t.Errorf("lease key = %x, want %x", got, want)
	}
	if got, want := coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: 1700000000000}), cat(i16(0), str("node-1"), i64(1700000000000)); !bytes.Equal(got, want) {
		t.Errorf("registration value = %x, want %x", got, want)
	}
	value := coordination.EncodeLease(coordination.Lease{Member: member, Token: specToken(t, 4242, 7), GrantedAt: 1700000000000, Deadline: 1700000030000})
	if want := cat(i16(0), str("node-1"), i64(4242), i16(7), i64(1700000000000), i64(1700000030000)); !bytes.Equal(value, want) {
		t.Errorf("lease value = %x, want %x", value, want)
	}
	if len(value) != 36 {
		t.Errorf("a lease of node-1 takes %d bytes, want 36", len(value))
	}
	read, err := coordination.DecodeLease(value)
	if err != nil || read.Member != member || read.Token != specToken(t, 4242, 7) || read.Deadline != 1700000030000 {
		t.Errorf("DecodeLease = %+v, %v", read, err)
	}
	key, err := coordination.DecodeKey(coordination.EncodeKey(coordination.RegistrationKey(role, member)))
	if err != nil || key != coordination.RegistrationKey(role, member) {
		t.Errorf("DecodeKey of a registration key = %+v, %v", key, err)
	}
	if key, err := coordination.DecodeKey(coordination.EncodeKey(lease)); err != nil || key != coordination.LeaseKey(role) || !key.Member.IsZero() {
		t.Errorf("DecodeKey of a lease key = %+v, %v; want the zero member", key, err)
	}
	if coordination.KindRegistration != 0 || coordination.KindLease != 1 {
		t.Errorf("the kinds are %d and %d, want 0 and 1", coordination.KindRegistration, coordination.KindLease)
	}
	if !coordination.IsTombstone(nil) || !coordination.IsTombstone([]byte{}) || coordination.IsTombstone(value) {
		t.Errorf("IsTombstone: an empty and a nil value are tombstones, a lease is not")
	}
}

// The decoders return a *FormatError that names the part, for every fault
// the specification lists.
func TestSpecCodecErrors(t *testing.T) {
	role, member := specRole(t, "controller"), specMember(t, "node-1")
	str := func(s string) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(s))), s...) }
	i16 := func(v int16) []byte { return binary.BigEndian.AppendUint16(nil, uint16(v)) }
	i64 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	good := coordination.EncodeKey(coordination.RegistrationKey(role, member))
	keys := map[string][]byte{
		"truncated":              good[:len(good)-1],
		"trailing bytes":         append(append([]byte(nil), good...), 0),
		"unknown version":        cat(i16(1), i16(0), str("controller"), str("node-1")),
		"unknown kind 3":         cat(i16(0), i16(3), str("controller"), str("node-1")),
		"unknown kind -1":        cat(i16(0), i16(-1), str("controller"), str("node-1")),
		"unknown kind 7":         cat(i16(0), i16(7), str("controller"), str("node-1")),
		"negative string length": cat(i16(0), i16(0), i16(-1)),
		"empty role":             cat(i16(0), i16(0), str(""), str("node-1")),
		"role too long":          cat(i16(0), i16(0), str(strings.Repeat("r", coordination.MaxRoleLen+1)), str("node-1")),
		"empty member":           cat(i16(0), i16(0), str("controller"), str("")),
		"lease key names member": cat(i16(0), i16(1), str("controller"), str("node-1")),
		"empty":                  nil,
	}
	for name, data := range keys {
		_, err := coordination.DecodeKey(data)
		var format *coordination.FormatError
		if !errors.As(err, &format) || format.Part != "key" || !strings.Contains(err.Error(), "key") {
			t.Errorf("DecodeKey(%s) = %v; want a *FormatError of part \"key\"", name, err)
		}
	}
	registration := coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: 1})
	for name, data := range map[string][]byte{
		"truncated":              registration[:len(registration)-1],
		"trailing bytes":         append(append([]byte(nil), registration...), 0),
		"unknown version":        cat(i16(9), str("node-1"), i64(1)),
		"negative string length": cat(i16(0), i16(-3)),
		"empty member":           cat(i16(0), str(""), i64(1)),
	} {
		_, err := coordination.DecodeRegistration(data)
		var format *coordination.FormatError
		if !errors.As(err, &format) || format.Part != "registration value" {
			t.Errorf("DecodeRegistration(%s) = %v; want a *FormatError of part \"registration value\"", name, err)
		}
	}
	lease := coordination.EncodeLease(coordination.Lease{Member: member, Token: specToken(t, 1, 1), GrantedAt: 1, Deadline: 2})
	for name, data := range map[string][]byte{
		"truncated":              lease[:len(lease)-1],
		"trailing bytes":         append(append([]byte(nil), lease...), 0),
		"unknown version":        cat(i16(2), str("node-1"), i64(1), i16(1), i64(1), i64(2)),
		"negative string length": cat(i16(0), i16(-1)),
		"empty member":           cat(i16(0), str(""), i64(1), i16(1), i64(1), i64(2)),
		"negative producer id":   cat(i16(0), str("node-1"), i64(-1), i16(1), i64(1), i64(2)),
		"negative epoch":         cat(i16(0), str("node-1"), i64(1), i16(-1), i64(1), i64(2)),
	} {
		_, err := coordination.DecodeLease(data)
		var format *coordination.FormatError
		if !errors.As(err, &format) || format.Part != "lease value" {
			t.Errorf("DecodeLease(%s) = %v; want a *FormatError of part \"lease value\"", name, err)
		}
	}
}

// LeaseTiming: every method in ms since the Unix epoch; live before the
// deadline, expired from it on; rank n at the deadline plus n staggers;
// RenewAt is the grant plus the renew interval and never passes the
// deadline; RemainingAt is the extent left, zero after the deadline.
func TestSpecLeaseTiming(t *testing.T) {
	config := specConfig(t, 30*time.Second, 10*time.Second, 5*time.Second)
	lease := config.Grant(specMember(t, "node-1"), specToken(t, 7, 3), 1000)
	if lease.GrantedAt != 1000 || lease.Deadline != 31000 || lease.Token != specToken(t, 7, 3) {
		t.Fatalf("Grant = %+v; want granted at 1000, deadline 31000", lease)
	}
	timing := config.Timing(lease)
	if timing != coordination.NewLeaseTiming(lease, config) || timing.Lease() != lease {
		t.Fatalf("Timing and NewLeaseTiming disagree")
	}
	for _, tt := range []struct {
		what      string
		got, want int64
	}{
		{"ExpiresAt", timing.ExpiresAt(), 31000},
		{"ChallengeAt(0)", timing.ChallengeAt(0), 31000},
		{"ChallengeAt(2)", timing.ChallengeAt(2), 41000},
		{"RenewAt", timing.RenewAt(), 11000},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.what, tt.got, tt.want)
		}
	}
	if huge := timing.ChallengeAt(math.MaxInt); huge < timing.ChallengeAt(2) {
		t.Errorf("ChallengeAt of a huge rank = %d wrapped below ChallengeAt(2)", huge)
	}
	if !timing.LiveAt(30999) || timing.LiveAt(31000) {
		t.Errorf("LiveAt: live before the deadline, expired from it on")
	}
	if timing.RenewDueAt(10999) || !timing.RenewDueAt(11000) {
		t.Errorf("RenewDueAt: due from RenewAt on")
	}
	if got := timing.RemainingAt(30000); got != time.Second {
		t.Errorf("RemainingAt(30000) = %v, want 1s", got)
	}
	if got := timing.RemainingAt(40000); got != 0 {
		t.Errorf("RemainingAt after the deadline = %v, want 0", got)
	}
	tight := specConfig(t, 30*time.Second, 29*time.Second, time.Second)
	if got := tight.Timing(coordination.Lease{GrantedAt: 0, Deadline: 5000}).RenewAt(); got != 5000 {
		t.Errorf("RenewAt past the deadline = %d, want the deadline 5000", got)
	}
	if config.ChallengeDelay(0) != 0 || config.ChallengeDelay(3) != 15*time.Second || config.ChallengeDelay(math.MaxInt) != time.Duration(math.MaxInt64) {
		t.Errorf("ChallengeDelay: 0 for rank 0, n staggers for rank n, saturated for a huge rank")
	}
	if !config.RenewsWithMargin() || tight.RenewsWithMargin() {
		t.Errorf("RenewsWithMargin: at most a third of the lease duration")
	}
}

// NewLeaseConfig rejects an extent at or below zero and a renew interval at
// or above the lease duration, and nothing else.
func TestSpecNewLeaseConfig(t *testing.T) {
	for _, bad := range [][3]time.Duration{
		{0, time.Second, time.Second}, {time.Second, 0, time.Second}, {time.Second, time.Millisecond, 0},
		{-time.Second, time.Millisecond, time.Second}, {time.Second, time.Second, time.Second}, {time.Second, 2 * time.Second, time.Second},
	} {
		if _, err := coordination.NewLeaseConfig(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("NewLeaseConfig(%v, %v, %v) gave no error", bad[0], bad[1], bad[2])
		}
	}
	config, err := coordination.NewLeaseConfig(900*time.Microsecond, 300*time.Microsecond, time.Nanosecond)
	if err != nil {
		t.Fatalf("NewLeaseConfig of extents above zero below 1 ms: %v", err)
	}
	if config.Duration() != 900*time.Microsecond || config.RenewInterval() != 300*time.Microsecond || config.ChallengeStagger() != time.Nanosecond {
		t.Errorf("the config does not hold its extents: %v %v %v", config.Duration(), config.RenewInterval(), config.ChallengeStagger())
	}
}

// The constants and the defaults.
func TestSpecDefaultConstants(t *testing.T) {
	config := coordination.DefaultLeaseConfig()
	if config.Duration() != 30*time.Second || config.RenewInterval() != 10*time.Second || config.ChallengeStagger() != 5*time.Second {
		t.Errorf("DefaultLeaseConfig = %v / %v / %v, want 30s / 10s / 5s", config.Duration(), config.RenewInterval(), config.ChallengeStagger())
	}
	if coordination.DefaultLeaseDuration != 30*time.Second || coordination.DefaultRenewInterval != 10*time.Second || coordination.DefaultChallengeStagger != 5*time.Second {
		t.Errorf("the default timings changed")
	}
	if coordination.DefaultPartitions != 16 || coordination.DefaultPollInterval != time.Second || coordination.StateTopic != "__coordination_state" {
		t.Errorf("DefaultPartitions %d, DefaultPollInterval %v, StateTopic %q", coordination.DefaultPartitions, coordination.DefaultPollInterval, coordination.StateTopic)
	}
	if coordination.MaxRoleLen != 249 || coordination.MaxMemberIDLen != 249 {
		t.Errorf("MaxRoleLen %d, MaxMemberIDLen %d, want 249", coordination.MaxRoleLen, coordination.MaxMemberIDLen)
	}
	if coordination.NoEpoch.ProducerID() != -1 || coordination.NoEpoch.ProducerEpoch() != -1 {
		t.Errorf("NoEpoch = %s, want -1:-1", coordination.NoEpoch)
	}
	if got := (coordination.Decision{Action: coordination.ActionChallenge}).Action.String(); got != "challenge" {
		t.Errorf("ActionChallenge.String() = %q", got)
	}
	if coordination.ActionWait.String() != "wait" || coordination.ActionHold.String() == coordination.ActionNotRegistered.String() {
		t.Errorf("Action.String names the actions apart")
	}
}

// RolePartition: Kafka's murmur2 rule; it rejects a partition count below
// one; RoleTopicPartition changes only with WithTopic and WithPartitions.
func TestSpecRolePartition(t *testing.T) {
	role := specRole(t, "controller")
	if p, err := coordination.RolePartition(role, 16); err != nil || p != 12 {
		t.Fatalf("RolePartition(controller, 16) = %d, %v; want 12, as the example prints", p, err)
	}
	for _, n := range []int{0, -1} {
		if _, err := coordination.RolePartition(role, n); err == nil {
			t.Errorf("RolePartition(controller, %d) gave no error", n)
		}
	}
	if _, err := coordination.RolePartition(coordination.Role{}, 16); err != nil {
		t.Errorf("RolePartition(Role{}, 16) = %v; the specification rejects a partition count only", err)
	}
	tp, err := coordination.RoleTopicPartition(role)
	if err != nil || tp != (coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 12}) {
		t.Fatalf("RoleTopicPartition(controller) = %v, %v", tp, err)
	}
	want, _ := coordination.RolePartition(role, 7)
	tp, err = coordination.RoleTopicPartition(role, coordination.WithTopic("other"), coordination.WithPartitions(7),
		coordination.WithLeaseDuration(time.Second), coordination.WithPollInterval(time.Hour), coordination.WithChallengeStagger(time.Second))
	if err != nil || tp != (coordination.TopicPartition{Topic: "other", Partition: want}) {
		t.Fatalf("RoleTopicPartition with options = %v, %v; want other-%d: only WithTopic and WithPartitions change the answer", tp, err, want)
	}
}

// NewRole and NewMemberID reject an empty name and one longer than 249
// bytes, and accept 249 bytes.
func TestSpecNames(t *testing.T) {
	for _, name := range []string{"", strings.Repeat("x", 250)} {
		if _, err := coordination.NewRole(name); err == nil {
			t.Errorf("NewRole of %d bytes gave no error", len(name))
		}
		if _, err := coordination.NewMemberID(name); err == nil {
			t.Errorf("NewMemberID of %d bytes gave no error", len(name))
		}
	}
	long := strings.Repeat("x", 249)
	if role, err := coordination.NewRole(long); err != nil || role.String() != long {
		t.Errorf("NewRole of 249 bytes = %v", err)
	}
	if member, err := coordination.NewMemberID(long); err != nil || member.String() != long {
		t.Errorf("NewMemberID of 249 bytes = %v", err)
	}
}

// FencingToken: the pair, compared lexicographically with the producer id
// first; NoEpoch below every minted token; the producer_id:producer_epoch
// form; NewFencingToken rejects a negative value.
func TestSpecFencingToken(t *testing.T) {
	if _, err := coordination.NewFencingToken(-1, 0); err == nil {
		t.Error("NewFencingToken(-1, 0) gave no error")
	}
	if _, err := coordination.NewFencingToken(0, -1); err == nil {
		t.Error("NewFencingToken(0, -1) gave no error")
	}
	exhausted, fresh := specToken(t, 4, math.MaxInt16), specToken(t, 5, 0)
	if !fresh.Supersedes(exhausted) || exhausted.Supersedes(fresh) || fresh.Compare(exhausted) <= 0 || exhausted.Compare(fresh) >= 0 {
		t.Error("5:0 must supersede 4:32767")
	}
	if specToken(t, 4, 7).Compare(specToken(t, 4, 6)) <= 0 || specToken(t, 4, 7).Compare(specToken(t, 4, 7)) != 0 {
		t.Error("one producer id: the epoch orders")
	}
	if !specToken(t, 0, 0).Supersedes(coordination.NoEpoch) {
		t.Error("NoEpoch ranks below every minted token")
	}
	if got := fresh.String(); got != "5:0" {
		t.Errorf("String() = %q", got)
	}
	parsed, err := coordination.ParseFencingToken("4242:7")
	if err != nil || parsed != specToken(t, 4242, 7) || parsed.ProducerID() != 4242 || parsed.ProducerEpoch() != 7 {
		t.Errorf("ParseFencingToken(4242:7) = %v, %v", parsed, err)
	}
	for _, bad := range []string{"", "4242", "a:b", "-1:0", "1:-1", "1:70000"} {
		if _, err := coordination.ParseFencingToken(bad); err == nil {
			t.Errorf("ParseFencingToken(%q) gave no error", bad)
		}
	}
}

// DescribeLeadership asks the coordinator only, and Authoritative is the
// one question of a third party.
func TestSpecDescribeLeadership(t *testing.T) {
	cluster := newSpecCluster()
	client := cluster.client()
	role := specRole(t, "controller")
	status, err := coordination.DescribeLeadership(context.Background(), client, role)
	if err != nil || status.Held || status.Token != coordination.NoEpoch || status.Role != role {
		t.Fatalf("DescribeLeadership of a role nobody took = %+v, %v; want not held, NoEpoch", status, err)
	}
	token, err := client.AcquireEpoch(context.Background(), role)
	if err != nil {
		t.Fatal(err)
	}
	status, err = coordination.DescribeLeadership(context.Background(), client, role)
	if err != nil || !status.Held || !status.Authoritative(token) || status.Authoritative(coordination.NoEpoch) {
		t.Fatalf("DescribeLeadership = %+v, %v; want %s authoritative", status, err, token)
	}
	if got, want := status.String(), "role controller: epoch "+token.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if cluster.count("ReadPartition") != 0 || cluster.count("Append") != 0 || cluster.mintCount(role) != 1 {
		t.Errorf("DescribeLeadership read or wrote the topic, or minted")
	}
}

// ManualClock: a wait receives when Set or Advance reaches its instant; a
// due wait at once; a move backwards releases nothing.
func TestSpecManualClock(t *testing.T) {
	clock := coordination.NewManualClock(1000)
	if clock.NowMillis() != 1000 {
		t.Fatalf("NowMillis = %d", clock.NowMillis())
	}
	select {
	case <-clock.After(0):
	default:
		t.Fatal("After(0) did not receive at once")
	}
	wait := clock.After(2 * time.Second)
	clock.Set(500)
	clock.Advance(2 * time.Second) // 2500: short of 3000
	select {
	case <-wait:
		t.Fatal("the wait received before its instant")
	default:
	}
	clock.Set(3000)
	select {
	case <-wait:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not receive at its instant")
	}
}

// specAcquire runs AcquireLeadership in a goroutine and returns a channel
// with its result.
type specResult struct {
	leadership *coordination.Leadership
	err        error
}

func specAcquire(ctx context.Context, transport coordination.Transport, role coordination.Role, member coordination.MemberID, options ...coordination.Option) <-chan specResult {
	done := make(chan specResult, 1)
	go func() {
		l, err := coordination.AcquireLeadership(ctx, transport, role, member, options...)
		done <- specResult{l, err}
	}()
	return done
}

// specKinds returns the record kinds of a partition, and fails on a record
// that does not decode with the specification's layout.
func specKinds(t *testing.T, records []coordination.StateRecord) map[coordination.RecordKind]int {
	t.Helper()
	kinds := make(map[coordination.RecordKind]int)
	for _, r := range records {
		key, err := coordination.DecodeKey(r.Key)
		if err != nil {
			t.Fatalf("record at offset %d does not decode: %v", r.Offset, err)
		}
		if key.Kind != coordination.KindRegistration && key.Kind != coordination.KindLease {
			t.Fatalf("record at offset %d has kind %d: the layout has two kinds", r.Offset, key.Kind)
		}
		kinds[key.Kind]++
	}
	return kinds
}

// The first member: AcquireLeadership registers it, mints one epoch, and
// writes the first lease, under the defaults: StateTopic, partition
// RolePartition(role, 16), a 30 s lease granted now by the system clock.
func TestSpecAcquireLeadershipFirstMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role, member := specRole(t, "controller"), specMember(t, "node-1")
		l, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, member)
		if err != nil {
			t.Fatal(err)
		}
		partition := coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 12}
		if l.Partition() != partition || l.Role() != role || l.Member() != member {
			t.Fatalf("the leadership is %s of %s on %s; want node-1 of controller on %s", l.Member(), l.Role(), l.Partition(), partition)
		}
		if token, _ := cluster.token(role); l.Token() != token || cluster.mintCount(role) != 1 {
			t.Fatalf("the leadership holds %s after %d mints; want the coordinator's token after one", l.Token(), cluster.mintCount(role))
		}
		lease := l.Lease()
		if lease.GrantedAt != time.Now().UnixMilli() || lease.Deadline-lease.GrantedAt != 30000 || lease.Token != l.Token() || lease.Member != member {
			t.Fatalf("the first lease = %+v; want granted now, for 30 s, under the token", lease)
		}
		records := cluster.records(partition)
		if kinds := specKinds(t, records); kinds[coordination.KindRegistration] != 1 || kinds[coordination.KindLease] != 1 || len(records) != 2 {
			t.Fatalf("the partition holds %v; want one registration and one lease", kinds)
		}
		state, err := coordination.DescribeRoleState(context.Background(), cluster.client(), role)
		if err != nil || state.Lease == nil || *state.Lease != lease || len(state.Roster) != 1 {
			t.Fatalf("DescribeRoleState = %+v, %v", state, err)
		}
		if err := l.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// The restart path: a process restarts under the member id that the live
// lease names. Its AcquireLeadership challenges at once (no wait: the
// bubble's clock does not move), mints exactly one epoch, and that epoch
// fences the earlier incarnation at its next renewal. A DescribeEpoch that
// fails does not stop the challenge.
func TestSpecAcquireLeadershipRestartCostsOneEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role, member := specRole(t, "controller"), specMember(t, "node-1")
		earlier, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, member)
		if err != nil {
			t.Fatal(err)
		}
		standby := specAcquire(context.Background(), cluster.client(), role, specMember(t, "node-2"))
		time.Sleep(3 * time.Second) // the earlier incarnation holds; the standby waits
		synctest.Wait()

		cluster.fail("DescribeEpoch", errSpecInjected)
		start := time.Now()
		restarted, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, member)
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the restarted member waited %v before it took the role; want no wait", waited)
		}
		if got := cluster.mintCount(role); got != 2 {
			t.Fatalf("the role used %d epochs; want 2: one for the earlier incarnation, one for the restart", got)
		}
		if !restarted.Token().Supersedes(earlier.Token()) {
			t.Fatalf("%s does not supersede %s", restarted.Token(), earlier.Token())
		}
		time.Sleep(10 * time.Second) // the earlier incarnation's renewal
		synctest.Wait()
		select {
		case <-earlier.Done():
		default:
			t.Fatal("the earlier incarnation's leadership did not end at its renewal")
		}
		if !errors.Is(earlier.Err(), coordination.ErrFenced) {
			t.Fatalf("the earlier incarnation ended with %v; want ErrFenced", earlier.Err())
		}
		select {
		case r := <-standby:
			t.Fatalf("the standby took the role: %v", r.err)
		default:
		}
		if err := restarted.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := <-standby // the resignation: the standby challenges at once
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.leadership.Resign(context.Background())
	})
}

// AcquireLeadership returns the context error itself when the wait ends.
func TestSpecAcquireLeadershipReturnsTheContextError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role := specRole(t, "controller")
		holder, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, specMember(t, "node-1"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = coordination.AcquireLeadership(ctx, cluster.client(), role, specMember(t, "node-2"))
		if err != context.DeadlineExceeded {
			t.Fatalf("AcquireLeadership past its deadline = %v; want context.DeadlineExceeded itself", err)
		}
		holder.Resign(context.Background())
	})
}

// A fenced first lease write is not a win: another member minted after
// this one. AcquireLeadership finds the fence with errors.Is, returns no
// error, and holds no leadership under the fenced epoch; it competes on.
func TestSpecAcquireLeadershipFencedFirstLeaseWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role := specRole(t, "controller")
		interloper := cluster.client()
		var fencedBy coordination.FencingToken
		cluster.before("WriteLease", func() {
			// Between the challenger's mint and its first lease write.
			token, err := interloper.AcquireEpoch(context.Background(), role)
			if err != nil {
				panic(err)
			}
			fencedBy = token
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := specAcquire(ctx, cluster.client(), role, specMember(t, "node-1"))
		r := <-done
		if r.err != nil {
			t.Fatalf("AcquireLeadership after a fenced first lease write = %v; want it to compete on and win", r.err)
		}
		if !r.leadership.Token().Supersedes(fencedBy) {
			t.Fatalf("the leadership holds %s; want a token minted after the interloper's %s", r.leadership.Token(), fencedBy)
		}
		for _, rec := range cluster.records(r.leadership.Partition()) {
			key, _ := coordination.DecodeKey(rec.Key)
			if key.Kind == coordination.KindLease {
				lease, err := coordination.DecodeLease(rec.Value)
				if err != nil || lease.Token != r.leadership.Token() {
					t.Fatalf("a lease under %s reached the log; want only the winner's %s", lease.Token, r.leadership.Token())
				}
			}
		}
		r.leadership.Resign(context.Background())
	})
}

// Done and Err: a fence closes Done and Err wraps ErrFenced; Resign closes
// Done, Err wraps ErrNotHeld, and the lease tombstone lets the first
// standby challenge at once; a renewal after the end writes nothing.
func TestSpecLeadershipDoneAndErr(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role := specRole(t, "controller")
		holder, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, specMember(t, "node-1"))
		if err != nil {
			t.Fatal(err)
		}
		if holder.Err() != nil {
			t.Fatalf("Err of a live leadership = %v", holder.Err())
		}
		if _, err := cluster.client().AcquireEpoch(context.Background(), role); err != nil { // an operator mints
			t.Fatal(err)
		}
		err = holder.Renew(context.Background())
		if !errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("Renew after a newer mint = %v; want ErrFenced", err)
		}
		<-holder.Done()
		if !errors.Is(holder.Err(), coordination.ErrFenced) {
			t.Fatalf("Err after the fence = %v", holder.Err())
		}
		if err := holder.Renew(context.Background()); err == nil {
			t.Fatal("Renew of an ended leadership gave no error")
		}

		// A resignation, on another role: Done closes, Err wraps ErrNotHeld,
		// and the first standby challenges at once.
		other := specRole(t, "archiver")
		second, err := coordination.AcquireLeadership(context.Background(), cluster.client(), other, specMember(t, "node-2"))
		if err != nil {
			t.Fatal(err)
		}
		standby := specAcquire(context.Background(), cluster.client(), other, specMember(t, "node-3"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		before := time.Now()
		if err := second.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-second.Done()
		if !errors.Is(second.Err(), coordination.ErrNotHeld) {
			t.Fatalf("Err after Resign = %v; want ErrNotHeld", second.Err())
		}
		if err := second.Renew(context.Background()); !errors.Is(err, coordination.ErrNotHeld) {
			t.Fatalf("Renew after Resign = %v; want ErrNotHeld", err)
		}
		r := <-standby
		if r.err != nil {
			t.Fatal(r.err)
		}
		if waited := time.Since(before); waited > coordination.DefaultPollInterval {
			t.Fatalf("the first standby took a resigned role %v after the resignation; want at once (within a poll)", waited)
		}
		r.leadership.Resign(context.Background())
	})
}

// Renew writes a fresh lease under the same epoch; the background loop
// renews at every renew interval (10 s by default).
func TestSpecLeadershipRenew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role := specRole(t, "controller")
		l, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, specMember(t, "node-1"))
		if err != nil {
			t.Fatal(err)
		}
		first := l.Lease()
		time.Sleep(2 * time.Second)
		if err := l.Renew(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := l.Lease(); got.Token != first.Token || got.GrantedAt != first.GrantedAt+2000 || got.Deadline != got.GrantedAt+30000 {
			t.Fatalf("after Renew the lease = %+v; want the same token, granted 2 s later", got)
		}
		time.Sleep(8*time.Second - time.Millisecond) // 1 ms before the first grant's renew interval
		synctest.Wait()
		if got := l.Lease(); got.GrantedAt != first.GrantedAt+2000 {
			t.Fatalf("the loop renewed before the renew interval: %+v", got)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := l.Lease(); got.GrantedAt != first.GrantedAt+10000 {
			t.Fatalf("the loop did not renew at the renew interval: %+v", got)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := l.Lease(); got.GrantedAt != first.GrantedAt+20000 {
			t.Fatalf("the loop did not renew one renew interval later: %+v", got)
		}
		l.Resign(context.Background())
	})
}

// The defaults of the options, each seen in what AcquireLeadership does:
// the poll interval (1 s) bounds the reads of a waiting member, the
// stagger (5 s) delays rank 1 after a dead rank 0, and the lease (30 s)
// is the extent after which a standby takes over a quiet holder.
func TestSpecAcquireLeadershipDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role := specRole(t, "controller")
		holderClient := cluster.client()
		holder, err := coordination.AcquireLeadership(context.Background(), holderClient, role, specMember(t, "node-1"))
		if err != nil {
			t.Fatal(err)
		}
		granted := time.Now()
		// A member that registers and never challenges: the dead rank 0.
		dead := specMember(t, "ghost")
		partition, _ := coordination.RoleTopicPartition(role)
		if err := cluster.client().Append(context.Background(), partition, coordination.EncodeKey(coordination.RegistrationKey(role, dead)),
			coordination.EncodeRegistration(coordination.Registration{Member: dead, RegisteredAt: time.Now().UnixMilli()})); err != nil {
			t.Fatal(err)
		}
		reads := cluster.count("ReadPartition")
		standby := specAcquire(context.Background(), cluster.client(), role, specMember(t, "node-2"))
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if got := cluster.count("ReadPartition") - reads; got < 9 || got > 13 {
			t.Fatalf("a waiting member read the partition %d times in 10 s; want about 10, one a poll interval of 1 s", got)
		}
		holderClient.setCut(true) // the holder goes quiet; its last renewal was at 10 s
		r := <-standby
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got, want := time.Since(granted), 10*time.Second+30*time.Second+5*time.Second; got != want {
			t.Fatalf("rank 1 took the role %v after the first grant; want %v: the last renewal at 10 s, the lease 30 s, one stagger 5 s", got, want)
		}
		if got := cluster.mintCount(role); got != 2 {
			t.Fatalf("%d epochs; want 2", got)
		}
		holder.Resign(context.Background()) // cut: it ends the leadership all the same
		r.leadership.Resign(context.Background())
	})
}

// The options change what they name: WithTopic, WithPartitions,
// WithLeaseDuration, WithRenewInterval, WithChallengeStagger,
// WithPollInterval, WithLeaseConfig and WithClock.
func TestSpecOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role := specRole(t, "controller")
		clock := coordination.NewManualClock(1_700_000_000_000)
		l, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, specMember(t, "node-1"),
			coordination.WithTopic("coordination-other"), coordination.WithPartitions(4), coordination.WithClock(clock),
			coordination.WithLeaseDuration(12*time.Second), coordination.WithRenewInterval(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := coordination.RolePartition(role, 4)
		if l.Partition() != (coordination.TopicPartition{Topic: "coordination-other", Partition: want}) {
			t.Fatalf("partition %s, want coordination-other-%d", l.Partition(), want)
		}
		if lease := l.Lease(); lease.GrantedAt != 1_700_000_000_000 || lease.Deadline != 1_700_000_012_000 {
			t.Fatalf("lease %+v; want granted at the manual clock's instant for 12 s", lease)
		}
		l.Resign(context.Background())

		config := specConfig(t, 8*time.Second, 2*time.Second, 3*time.Second)
		l, err = coordination.AcquireLeadership(context.Background(), cluster.client(), role, specMember(t, "node-1"), coordination.WithLeaseConfig(config))
		if err != nil {
			t.Fatal(err)
		}
		if lease := l.Lease(); lease.Deadline-lease.GrantedAt != 8000 {
			t.Fatalf("WithLeaseConfig: lease %+v, want 8 s", lease)
		}
		l.Resign(context.Background())

		for _, bad := range []coordination.Option{
			coordination.WithLeaseDuration(0), coordination.WithRenewInterval(-1), coordination.WithChallengeStagger(0),
			coordination.WithPollInterval(0), coordination.WithPartitions(0), coordination.WithClock(nil),
			coordination.WithLeaseConfig(coordination.LeaseConfig{}), coordination.WithTopic(""),
		} {
			if _, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, specMember(t, "node-1"), bad); err == nil {
				t.Errorf("an invalid option gave no error")
			}
		}
	})
}

// A holder and a waiting standby for ten lease durations with the
// defaults: the topic holds the layout's two kinds only, one epoch was
// minted, and the standby never challenged the renewing holder.
func TestSpecHolderAndStandbyForTenLeaseDurations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cluster := newSpecCluster()
		role := specRole(t, "controller")
		holder, err := coordination.AcquireLeadership(context.Background(), cluster.client(), role, specMember(t, "node-1"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		standby := specAcquire(ctx, cluster.client(), role, specMember(t, "node-2"))
		time.Sleep(10 * coordination.DefaultLeaseDuration)
		synctest.Wait()
		select {
		case r := <-standby:
			t.Fatalf("the standby returned while the holder renewed: %v", r.err)
		case <-holder.Done():
			t.Fatalf("the holder's leadership ended: %v", holder.Err())
		default:
		}
		records := cluster.records(holder.Partition())
		kinds := specKinds(t, records)
		if kinds[coordination.KindRegistration] != 2 || kinds[coordination.KindLease] < 30 {
			t.Fatalf("the partition holds %v; want the two registrations and a lease every 10 s", kinds)
		}
		if got := cluster.mintCount(role); got != 1 {
			t.Fatalf("%d epochs in ten lease durations; want 1", got)
		}
		state, err := coordination.BuildRoleState(role, records)
		if err != nil || len(state.Roster) != 2 {
			t.Fatalf("a reader of the specification folds %+v, %v", state, err)
		}
		cancel()
		if r := <-standby; r.err != context.Canceled {
			t.Fatalf("the cancelled standby returned %v", r.err)
		}
		holder.Resign(context.Background())
	})
}
