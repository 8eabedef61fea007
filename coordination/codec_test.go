package coordination_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// fxBytes builds a buffer of the frozen layout by hand, independently of the
// encoders, so a test can write bytes that no encoder writes.
type fxBytes []byte

func (b fxBytes) i16(v int16) fxBytes { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func (b fxBytes) i64(v int64) fxBytes { return binary.BigEndian.AppendUint64(b, uint64(v)) }
func (b fxBytes) str(s string) fxBytes {
	return append(b.i16(int16(len(s))), s...)
}
func (b fxBytes) raw(p ...byte) fxBytes { return append(b, p...) }

func fxHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEncodeGoldenBytes(t *testing.T) {
	role := fxRole(t, "controller")
	member := fxMember(t, "node-1")
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{
			"registration key",
			coordination.EncodeKey(coordination.RegistrationKey(role, member)),
			"0000 0000 000a 636f6e74726f6c6c6572 0006 6e6f64652d31",
		},
		{
			"lease key",
			coordination.EncodeKey(coordination.LeaseKey(role)),
			"0000 0001 000a 636f6e74726f6c6c6572 0000",
		},
		{
			"registration value",
			coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: 1700000000000}),
			"0000 0006 6e6f64652d31 0000018bcfe56800",
		},
		{
			"lease value",
			coordination.EncodeLease(coordination.Lease{
				Member:    member,
				Token:     fxToken(t, 4242, 7),
				GrantedAt: 1700000000000,
				Deadline:  1700000030000,
			}),
			"0000 0006 6e6f64652d31 0000000000001092 0007 0000018bcfe56800 0000018bcfe5dd30",
		},
	}
	for _, test := range tests {
		if want := fxHex(t, test.want); !bytes.Equal(test.got, want) {
			t.Errorf("%s = %x, want %x", test.name, test.got, want)
		}
	}
}

func TestLeaseOfNode1Is36Bytes(t *testing.T) {
	lease := coordination.Lease{Member: fxMember(t, "node-1"), Token: fxToken(t, 4242, 7), GrantedAt: 1, Deadline: 2}
	if n := len(coordination.EncodeLease(lease)); n != 36 {
		t.Fatalf("lease value of node-1 is %d bytes, the spec says 36", n)
	}
}

func TestEncodeKeyWritesNoMemberForALease(t *testing.T) {
	role := fxRole(t, "controller")
	key := coordination.Key{Kind: coordination.KindLease, Role: role, Member: fxMember(t, "node-1")}
	got := coordination.EncodeKey(key)
	if want := coordination.EncodeKey(coordination.LeaseKey(role)); !bytes.Equal(got, want) {
		t.Fatalf("EncodeKey(lease key naming node-1) = %x, want %x", got, want)
	}
	decoded, err := coordination.DecodeKey(got)
	if err != nil {
		t.Fatal(err)
	}
	if !decoded.Member.IsZero() || decoded.Kind != coordination.KindLease || decoded.Role != role {
		t.Errorf("DecodeKey = %+v, want the lease key of %s with the zero member", decoded, role)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	names := []string{"a", "controller", "é-rôle", "日本", "🦀", strings.Repeat("x", 249), strings.Repeat("日", 83)}
	instants := []int64{0, 1, 1700000000000, -1, math.MinInt64, math.MaxInt64}
	for _, name := range names {
		role, member := fxRole(t, name), fxMember(t, name)
		for _, key := range []coordination.Key{coordination.RegistrationKey(role, member), coordination.LeaseKey(role)} {
			got, err := coordination.DecodeKey(coordination.EncodeKey(key))
			if err != nil || got != key {
				t.Errorf("DecodeKey(EncodeKey(%+v)) = %+v, %v", key, got, err)
			}
		}
		for _, at := range instants {
			registration := coordination.Registration{Member: member, RegisteredAt: at}
			got, err := coordination.DecodeRegistration(coordination.EncodeRegistration(registration))
			if err != nil || got != registration {
				t.Errorf("registration round trip of %+v = %+v, %v", registration, got, err)
			}
			lease := coordination.Lease{Member: member, Token: fxToken(t, math.MaxInt64, math.MaxInt16), GrantedAt: at, Deadline: -at}
			gotLease, err := coordination.DecodeLease(coordination.EncodeLease(lease))
			if err != nil || gotLease != lease {
				t.Errorf("lease round trip of %+v = %+v, %v", lease, gotLease, err)
			}
		}
	}
}

func TestRecordKindString(t *testing.T) {
	for kind, want := range map[coordination.RecordKind]string{
		coordination.KindRegistration: "registration",
		coordination.KindLease:        "lease",
		coordination.KindHeartbeat:    "heartbeat",
		3:                             "kind(3)",
		-1:                            "kind(-1)",
	} {
		if got := kind.String(); got != want {
			t.Errorf("RecordKind(%d).String() = %q, want %q", int16(kind), got, want)
		}
	}
	if coordination.KindRegistration != 0 || coordination.KindLease != 1 {
		t.Errorf("the frozen layout gives registration kind 0 and lease kind 1")
	}
}

func TestIsTombstone(t *testing.T) {
	if !coordination.IsTombstone(nil) || !coordination.IsTombstone([]byte{}) {
		t.Errorf("nil and empty values must both be tombstones")
	}
	if coordination.IsTombstone([]byte{0}) {
		t.Errorf("a one-byte value is not a tombstone")
	}
}

// decoder runs one decoder on a buffer and returns its error.
type decoder struct {
	part   string
	decode func([]byte) error
}

var (
	keyDecoder = decoder{"key", func(b []byte) error {
		_, err := coordination.DecodeKey(b)
		return err
	}}
	registrationDecoder = decoder{"registration value", func(b []byte) error {
		_, err := coordination.DecodeRegistration(b)
		return err
	}}
	leaseDecoder = decoder{"lease value", func(b []byte) error {
		_, err := coordination.DecodeLease(b)
		return err
	}}
)

// checkFormatError asserts that err is a *FormatError for the part.
func checkFormatError(t testing.TB, err error, part, what string) *coordination.FormatError {
	t.Helper()
	if err == nil {
		t.Errorf("%s: %s decoded, want a *FormatError", what, part)
		return nil
	}
	var formatError *coordination.FormatError
	if !errors.As(err, &formatError) {
		t.Errorf("%s: error %v (%T) is no *FormatError", what, err, err)
		return nil
	}
	if formatError.Part != part {
		t.Errorf("%s: FormatError.Part = %q, want %q", what, formatError.Part, part)
	}
	if !strings.Contains(err.Error(), "malformed "+part) {
		t.Errorf("%s: error %q does not name the part %q", what, err, part)
	}
	return formatError
}

func TestDecodersRejectEveryTruncation(t *testing.T) {
	role, member := fxRole(t, "controller"), fxMember(t, "node-1")
	valid := []struct {
		decoder
		data []byte
	}{
		{keyDecoder, coordination.EncodeKey(coordination.RegistrationKey(role, member))},
		{keyDecoder, coordination.EncodeKey(coordination.LeaseKey(role))},
		{registrationDecoder, coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: 42})},
		{leaseDecoder, coordination.EncodeLease(coordination.Lease{Member: member, Token: fxToken(t, 1, 2), GrantedAt: 3, Deadline: 4})},
	}
	for _, v := range valid {
		if err := v.decode(v.data); err != nil {
			t.Fatalf("%s %x: %v", v.part, v.data, err)
		}
		for n := range len(v.data) {
			checkFormatError(t, v.decode(v.data[:n]), v.part, "prefix "+hex.EncodeToString(v.data[:n]))
		}
		checkFormatError(t, v.decode(append(bytes.Clone(v.data), 0)), v.part, "one trailing byte")
		checkFormatError(t, v.decode(append(bytes.Clone(v.data), v.data...)), v.part, "the record twice")
	}
}

func TestDecodersRejectMalformedRecords(t *testing.T) {
	var b fxBytes
	long := strings.Repeat("x", 250)
	tests := []struct {
		what string
		decoder
		data    fxBytes
		wrapped bool // the fault is a name that a constructor rejects
	}{
		{"key: empty buffer", keyDecoder, nil, false},
		{"key: unknown version 1", keyDecoder, b.i16(1).i16(0).str("r").str("m"), false},
		{"key: version -1", keyDecoder, b.i16(-1).i16(0).str("r").str("m"), false},
		{"key: unknown kind 3", keyDecoder, b.i16(0).i16(3).str("r").str("m"), false},
		{"key: heartbeat key with an empty member", keyDecoder, b.i16(0).i16(2).str("r").str(""), true},
		{"key: unknown kind -1", keyDecoder, b.i16(0).i16(-1).str("r").str(""), false},
		{"key: negative role length", keyDecoder, b.i16(0).i16(0).i16(-1).str("m"), false},
		{"key: role length past the end", keyDecoder, b.i16(0).i16(0).i16(5).raw('r').str("m"), false},
		{"key: negative member length", keyDecoder, b.i16(0).i16(0).str("r").i16(-2), false},
		{"key: min int16 member length", keyDecoder, b.i16(0).i16(0).str("r").i16(math.MinInt16), false},
		{"key: empty role", keyDecoder, b.i16(0).i16(0).str("").str("m"), true},
		{"key: empty role of a lease", keyDecoder, b.i16(0).i16(1).str("").str(""), true},
		{"key: role of 250 bytes", keyDecoder, b.i16(0).i16(0).str(long).str("m"), true},
		{"key: empty member of a registration", keyDecoder, b.i16(0).i16(0).str("r").str(""), true},
		{"key: member of 250 bytes", keyDecoder, b.i16(0).i16(0).str("r").str(long), true},
		{"key: lease key that names a member", keyDecoder, b.i16(0).i16(1).str("r").str("node-1"), false},
		{"key: trailing bytes", keyDecoder, b.i16(0).i16(1).str("r").str("").raw(0, 0), false},

		{"registration: empty buffer", registrationDecoder, nil, false},
		{"registration: unknown version", registrationDecoder, b.i16(7).str("m").i64(1), false},
		{"registration: negative member length", registrationDecoder, b.i16(0).i16(-1).i64(1), false},
		{"registration: empty member", registrationDecoder, b.i16(0).str("").i64(1), true},
		{"registration: member of 250 bytes", registrationDecoder, b.i16(0).str(long).i64(1), true},
		{"registration: short instant", registrationDecoder, b.i16(0).str("m").raw(0, 0, 0, 0), false},
		{"registration: trailing byte", registrationDecoder, b.i16(0).str("m").i64(1).raw(9), false},

		{"lease: empty buffer", leaseDecoder, nil, false},
		{"lease: unknown version", leaseDecoder, b.i16(1).str("m").i64(1).i16(1).i64(1).i64(2), false},
		{"lease: negative member length", leaseDecoder, b.i16(0).i16(-3).i64(1).i16(1).i64(1).i64(2), false},
		{"lease: empty member", leaseDecoder, b.i16(0).str("").i64(1).i16(1).i64(1).i64(2), true},
		{"lease: member of 250 bytes", leaseDecoder, b.i16(0).str(long).i64(1).i16(1).i64(1).i64(2), true},
		{"lease: producer id -1", leaseDecoder, b.i16(0).str("m").i64(-1).i16(1).i64(1).i64(2), true},
		{"lease: producer epoch -1", leaseDecoder, b.i16(0).str("m").i64(1).i16(-1).i64(1).i64(2), true},
		{"lease: NoEpoch", leaseDecoder, b.i16(0).str("m").i64(-1).i16(-1).i64(1).i64(2), true},
		{"lease: min producer id", leaseDecoder, b.i16(0).str("m").i64(math.MinInt64).i16(0).i64(1).i64(2), true},
		{"lease: no deadline", leaseDecoder, b.i16(0).str("m").i64(1).i16(1).i64(1), false},
		{"lease: trailing byte", leaseDecoder, b.i16(0).str("m").i64(1).i16(1).i64(1).i64(2).raw(0), false},
		{"lease: a registration value", leaseDecoder, b.i16(0).str("m").i64(1), false},
	}
	for _, test := range tests {
		t.Run(test.what, func(t *testing.T) {
			formatError := checkFormatError(t, test.decode(test.data), test.part, test.what)
			if formatError == nil {
				return
			}
			if wrapped := errors.Unwrap(formatError) != nil; wrapped != test.wrapped {
				t.Errorf("Unwrap() != nil is %t, want %t: the constructor error is wrapped only for a rejected name or token", wrapped, test.wrapped)
			}
		})
	}
}

// TestDecodersRejectTheOtherParts pins that each decoder reads its
// own layout only: a valid key is no valid value and the other way round.
func TestDecodersRejectTheOtherParts(t *testing.T) {
	role, member := fxRole(t, "controller"), fxMember(t, "node-1")
	key := coordination.EncodeKey(coordination.RegistrationKey(role, member))
	registration := coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: 5})
	lease := coordination.EncodeLease(coordination.Lease{Member: member, Token: fxToken(t, 1, 1), GrantedAt: 1, Deadline: 2})
	checkFormatError(t, keyDecoder.decode(registration), "key", "a registration value as a key")
	checkFormatError(t, keyDecoder.decode(lease), "key", "a lease value as a key")
	checkFormatError(t, registrationDecoder.decode(key), "registration value", "a key as a registration")
	checkFormatError(t, registrationDecoder.decode(lease), "registration value", "a lease as a registration")
	checkFormatError(t, leaseDecoder.decode(key), "lease value", "a key as a lease")
	checkFormatError(t, leaseDecoder.decode(registration), "lease value", "a registration as a lease")
}
