package coordination_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// The fuzz targets of the codec and of the fold. Each keeps a seed corpus in
// testdata/fuzz/<FuzzName>/, and adds the encodings of fuzzSeedNames here.
// Run one with, for example:
//
//	go test -run='^$' -fuzz='^FuzzDecodeKey$' -fuzztime=60s ./coordination/

var fuzzSeedNames = []string{"controller", "node-1", "é-rôle", "日本", "🦀", strings.Repeat("x", 249)}

// checkDecodeError asserts the contract of every decoder error.
func checkDecodeError(t *testing.T, err error, part string) {
	t.Helper()
	var formatError *coordination.FormatError
	if !errors.As(err, &formatError) {
		t.Fatalf("error %v (%T) is no *FormatError", err, err)
	}
	if formatError.Part != part {
		t.Fatalf("FormatError.Part = %q, want %q", formatError.Part, part)
	}
	if !strings.Contains(err.Error(), "malformed "+part) {
		t.Fatalf("error %q does not name the part", err)
	}
}

func FuzzDecodeKey(f *testing.F) {
	for _, name := range fuzzSeedNames {
		role, _ := coordination.NewRole(name)
		member, _ := coordination.NewMemberID(name)
		f.Add(coordination.EncodeKey(coordination.RegistrationKey(role, member)))
		f.Add(coordination.EncodeKey(coordination.LeaseKey(role)))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 2, 0, 1, 'r', 0, 0})
	f.Add([]byte{0, 0, 0, 1, 0, 1, 'r', 0, 1, 'm'})
	f.Add([]byte{0, 0, 0, 0, 0xff, 0xff, 0, 1, 'm'})
	f.Fuzz(func(t *testing.T, data []byte) {
		key, err := coordination.DecodeKey(data)
		if err != nil {
			checkDecodeError(t, err, "key")
			return
		}
		if key.Role.IsZero() {
			t.Fatal("a decoded key has the zero role")
		}
		switch key.Kind {
		case coordination.KindRegistration:
			if key.Member.IsZero() {
				t.Fatal("a decoded registration key has the zero member")
			}
		case coordination.KindLease:
			if !key.Member.IsZero() {
				t.Fatalf("a decoded lease key names member %q", key.Member)
			}
		default:
			t.Fatalf("a decoded key has kind %d", key.Kind)
		}
		if again := coordination.EncodeKey(key); !bytes.Equal(again, data) {
			t.Fatalf("EncodeKey(DecodeKey(%x)) = %x", data, again)
		}
		if _, err := coordination.NewRole(key.Role.String()); err != nil {
			t.Fatalf("a decoded role is one NewRole rejects: %v", err)
		}
	})
}

func FuzzDecodeRegistration(f *testing.F) {
	for _, name := range fuzzSeedNames {
		member, _ := coordination.NewMemberID(name)
		f.Add(coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: 1700000000000}))
		f.Add(coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: -1}))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 1, 'm', 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		registration, err := coordination.DecodeRegistration(data)
		if err != nil {
			checkDecodeError(t, err, "registration value")
			return
		}
		if registration.Member.IsZero() {
			t.Fatal("a decoded registration has the zero member")
		}
		if again := coordination.EncodeRegistration(registration); !bytes.Equal(again, data) {
			t.Fatalf("EncodeRegistration(DecodeRegistration(%x)) = %x", data, again)
		}
	})
}

func FuzzDecodeLease(f *testing.F) {
	for _, name := range fuzzSeedNames {
		member, _ := coordination.NewMemberID(name)
		token, _ := coordination.NewFencingToken(4242, 7)
		f.Add(coordination.EncodeLease(coordination.Lease{Member: member, Token: token, GrantedAt: 1700000000000, Deadline: 1700000030000}))
	}
	f.Add([]byte{})
	// NoEpoch in a lease, which the decoder rejects.
	f.Add([]byte{0, 0, 0, 1, 'm', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		lease, err := coordination.DecodeLease(data)
		if err != nil {
			checkDecodeError(t, err, "lease value")
			return
		}
		if lease.Member.IsZero() {
			t.Fatal("a decoded lease has the zero member")
		}
		if lease.Token.ProducerID() < 0 || lease.Token.ProducerEpoch() < 0 || !lease.Token.Supersedes(coordination.NoEpoch) {
			t.Fatalf("a decoded lease carries token %s", lease.Token)
		}
		if again := coordination.EncodeLease(lease); !bytes.Equal(again, data) {
			t.Fatalf("EncodeLease(DecodeLease(%x)) = %x", data, again)
		}
	})
}

// fuzzProgram turns fuzz bytes into a record list of one partition. Every
// record takes one op byte and one offset byte, and some take more:
//
//	op bit 0     role: "r" (the role folded) or "other"
//	op bits 1-2  member: one of four names
//	op bits 3-4  key: 0 registration key; 1 heartbeat key; 2 lease key;
//	             3 raw bytes
//	op bits 5-7  value: 0 nil; 1 empty; 2, 3 registration (the layout of a
//	             heartbeat too); 4, 5 lease;
//	             6 raw bytes; 7 a lease cut short by one byte
//
// Raw bytes take a length byte and then that many bytes. A record whose
// offset an earlier record took is dropped, because a log holds one record
// at an offset.
func fuzzProgram(data []byte) []coordination.StateRecord {
	roles := [2]coordination.Role{}
	roles[0], _ = coordination.NewRole("r")
	roles[1], _ = coordination.NewRole("other")
	var members [4]coordination.MemberID
	for i, name := range []string{"m0", "m1", "日本", "🦀"} {
		members[i], _ = coordination.NewMemberID(name)
	}
	next := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n]
		data = data[n:]
		return b
	}
	nextByte := func() byte {
		if b := next(1); len(b) == 1 {
			return b[0]
		}
		return 0
	}
	nextInt := func(n int) int64 {
		var buf [8]byte
		copy(buf[8-n:], next(n))
		return int64(binary.BigEndian.Uint64(buf[:]))
	}
	raw := func() []byte { return bytes.Clone(next(int(nextByte()))) }

	var records []coordination.StateRecord
	seen := map[int64]bool{}
	for len(data) > 0 {
		op := nextByte()
		offset := int64(nextByte())
		role, member := roles[op&1], members[(op>>1)&3]
		var record coordination.StateRecord
		record.Offset = offset
		switch (op >> 3) & 3 {
		case 0:
			record.Key = coordination.EncodeKey(coordination.RegistrationKey(role, member))
		case 1:
			record.Key = coordination.EncodeKey(coordination.HeartbeatKey(role, member))
		case 2:
			record.Key = coordination.EncodeKey(coordination.LeaseKey(role))
		case 3:
			record.Key = raw()
		}
		switch op >> 5 {
		case 0:
			record.Value = nil
		case 1:
			record.Value = []byte{}
		case 2, 3:
			record.Value = coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: nextInt(2)})
		case 4, 5, 7:
			token, err := coordination.NewFencingToken(nextInt(1), int16(nextByte()&0x7f))
			if err != nil {
				panic(err)
			}
			grantedAt := nextInt(2)
			record.Value = coordination.EncodeLease(coordination.Lease{Member: member, Token: token, GrantedAt: grantedAt, Deadline: grantedAt + nextInt(1)})
			if op>>5 == 7 {
				record.Value = record.Value[:len(record.Value)-1]
			}
		case 6:
			record.Value = raw()
		}
		if seen[offset] {
			continue
		}
		seen[offset] = true
		records = append(records, record)
	}
	return records
}

// foldModel is an independent model of the fold: per key, the well-formed
// record of the highest offset. It also says whether a record of the role,
// or a key, is malformed.
func foldModel(role coordination.Role, records []coordination.StateRecord) (coordination.RoleState, bool) {
	type kept struct {
		offset int64
		record coordination.StateRecord
	}
	registrations := map[coordination.MemberID]kept{}
	heartbeats := map[coordination.MemberID]kept{}
	var lease *kept
	malformed := false
	for _, record := range records {
		key, err := coordination.DecodeKey(record.Key)
		if err != nil {
			malformed = true
			continue
		}
		if key.Role != role {
			continue
		}
		if !coordination.IsTombstone(record.Value) {
			var err error
			switch key.Kind {
			case coordination.KindRegistration:
				_, err = coordination.DecodeRegistration(record.Value)
			case coordination.KindHeartbeat:
				_, err = coordination.DecodeHeartbeat(record.Value)
			default:
				_, err = coordination.DecodeLease(record.Value)
			}
			if err != nil {
				malformed = true
				continue
			}
		}
		if key.Kind == coordination.KindRegistration {
			if k, ok := registrations[key.Member]; !ok || k.offset < record.Offset {
				registrations[key.Member] = kept{record.Offset, record}
			}
		} else if key.Kind == coordination.KindHeartbeat {
			if k, ok := heartbeats[key.Member]; !ok || k.offset < record.Offset {
				heartbeats[key.Member] = kept{record.Offset, record}
			}
		} else if lease == nil || lease.offset < record.Offset {
			lease = &kept{record.Offset, record}
		}
	}
	var state coordination.RoleState
	if lease != nil && !coordination.IsTombstone(lease.record.Value) {
		decoded, _ := coordination.DecodeLease(lease.record.Value)
		state.Lease = &decoded
	}
	for member, k := range registrations {
		if coordination.IsTombstone(k.record.Value) {
			continue
		}
		registration, _ := coordination.DecodeRegistration(k.record.Value)
		entry := coordination.RosterEntry{Member: member, Offset: k.offset, RegisteredAt: registration.RegisteredAt}
		// LastSeen is the newest heartbeat, and counts only after the
		// registration it follows; zero without one.
		if h, ok := heartbeats[member]; ok && h.offset > k.offset && !coordination.IsTombstone(h.record.Value) {
			heartbeat, _ := coordination.DecodeHeartbeat(h.record.Value)
			entry.LastSeen = heartbeat.SeenAt
		}
		state.Roster = append(state.Roster, entry)
	}
	slices.SortFunc(state.Roster, func(a, b coordination.RosterEntry) int { return int(a.Offset - b.Offset) })
	return state, malformed
}

func FuzzBuildRoleState(f *testing.F) {
	f.Add([]byte{})
	// Three registrations of "r", a lease, a tombstone, a rejoin.
	f.Add([]byte{0x40, 0, 0, 1, 0x42, 1, 0, 2, 0x44, 2, 0, 3, 0x90, 3, 9, 1, 0, 5, 30, 0x02, 4, 0x40, 5, 0, 9})
	// A record of another role, a raw key, a cut lease, a raw value.
	f.Add([]byte{0x41, 0, 0, 1, 0x18, 1, 3, 0, 0, 0, 0xf0, 2, 1, 1, 0, 0, 9, 0xc0, 3, 2, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		role, _ := coordination.NewRole("r")
		records := fuzzProgram(data)
		state, err := coordination.BuildRoleState(role, records)
		want, malformed := foldModel(role, records)
		if (err != nil) != malformed {
			t.Fatalf("BuildRoleState error %v, and the model says malformed=%t", err, malformed)
		}
		if err != nil {
			var formatError *coordination.FormatError
			if !errors.As(err, &formatError) {
				t.Fatalf("error %v wraps no *FormatError", err)
			}
		}
		if len(state.Roster) == 0 {
			state.Roster = nil
		}
		if !reflect.DeepEqual(state, want) {
			t.Fatalf("BuildRoleState = %s, the model says %s", describeState(state), describeState(want))
		}
		for i, entry := range state.Roster {
			if i > 0 && state.Roster[i-1].Offset >= entry.Offset {
				t.Fatalf("roster out of offset order at %d: %s", i, describeState(state))
			}
			if rank, ok := state.RankOf(entry.Member); !ok || rank < 0 || rank >= len(state.Roster) {
				t.Fatalf("RankOf(%s) = %d, %t", entry.Member, rank, ok)
			}
		}
		reversed := slices.Clone(records)
		slices.Reverse(reversed)
		again, againErr := coordination.BuildRoleState(role, reversed)
		if len(again.Roster) == 0 {
			again.Roster = nil
		}
		if !reflect.DeepEqual(again, state) || (againErr != nil) != (err != nil) {
			t.Fatalf("the reversed fold differs: %s (%v), want %s (%v)", describeState(again), againErr, describeState(state), err)
		}
	})
}
