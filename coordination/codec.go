package coordination

import (
	"encoding/binary"
	"fmt"
)

// The record layout of [StateTopic] is frozen: any implementation that
// reads or writes the topic, in Go or another language, must produce the
// same bytes, and testdata/vectors.json pins them. It follows
// Kafka's own wire conventions. Every integer is big-endian, every key and
// every value starts with an int16 version (0 today), and a string is an
// int16 byte length followed by that many bytes of UTF-8.
//
//	key                 version int16, kind int16, role string, member string
//	registration value  version int16, member string, registered_at int64
//	lease value         version int16, member string, producer_id int64,
//	                    producer_epoch int16, granted_at int64, deadline int64
//	heartbeat value     version int16, member string, seen_at int64
//
// A lease key carries the empty member string. Instants are milliseconds
// since the Unix epoch. The specification's layout has kinds 0 and 1, and
// with the defaults this package writes nothing else. The heartbeat (kind
// 2) is an extension that only [WithHeartbeatInterval] writes; it changes
// no byte of the two first kinds. A reader that knows only kinds 0 and 1
// (the specification's, an older release, another port) rejects its key as
// malformed (DecodeKey: unknown kind), so heartbeats go on only once every
// reader of the topic decodes kind 2, as this release's [DecodeKey] does.
const layoutVersion int16 = 0

// RecordKind names the record of [StateTopic] that a key holds. The key
// carries the kind, so one topic holds every kind and one compaction key
// covers each record of one member or one role.
type RecordKind int16

const (
	// KindRegistration marks the record that one member writes to announce
	// that it is available. A registration carries no authority.
	KindRegistration RecordKind = 0

	// KindLease marks the record that names the member that holds a role now,
	// and the time the claim of that member ends.
	KindLease RecordKind = 1

	// KindHeartbeat marks the record that a waiting standby writes at a
	// slow interval to show that it is alive (see [Heartbeat]), only with
	// heartbeats on ([WithHeartbeatInterval]): an extension of the
	// specification's two kinds. It has a key of its own, so a heartbeat
	// never replaces the registration whose offset gives the member its
	// rank.
	KindHeartbeat RecordKind = 2
)

// String names the kind: "registration", "lease", "heartbeat", or
// "kind(N)" for a value outside the layout.
func (k RecordKind) String() string {
	switch k {
	case KindRegistration:
		return "registration"
	case KindLease:
		return "lease"
	case KindHeartbeat:
		return "heartbeat"
	}
	return fmt.Sprintf("kind(%d)", int16(k))
}

// Key is the decoded key of one record of [StateTopic]. The key is the
// compaction key, so the topic keeps the last record of every role and every
// member.
type Key struct {
	// Kind names the record that the key holds.
	Kind RecordKind

	// Role is the role that the record belongs to.
	Role Role

	// Member is the member of a registration or heartbeat key. A lease key carries the
	// zero [MemberID], because a lease belongs to the role and not to one
	// member.
	Member MemberID
}

// RegistrationKey builds the key of the registration of one member of a
// role.
func RegistrationKey(role Role, member MemberID) Key {
	return Key{Kind: KindRegistration, Role: role, Member: member}
}

// HeartbeatKey builds the key of the heartbeat of one member of a role.
func HeartbeatKey(role Role, member MemberID) Key {
	return Key{Kind: KindHeartbeat, Role: role, Member: member}
}

// LeaseKey builds the key of the lease of a role. It carries no member.
func LeaseKey(role Role) Key {
	return Key{Kind: KindLease, Role: role}
}

// Registration is the value of a record that announces one member of a
// role. A member writes a registration when it joins, and it writes a
// tombstone on the same key when it leaves.
type Registration struct {
	// Member is the member that registered.
	Member MemberID

	// RegisteredAt is the time the member registered, in milliseconds since
	// the Unix epoch.
	RegisteredAt int64
}

// Heartbeat is the value of a record that shows a waiting member alive.
//
// A registration is written once, and its offset is the member's rank, so a
// refresh of the registration itself would move the member to the tail of
// the roster. A standby that waits writes a heartbeat instead, at the
// heartbeat interval of [LeaseConfig.HeartbeatInterval], on a key of its
// own. The fold takes the newest heartbeat that follows the member's
// registration as the member's last sign of life ([RosterEntry.LastSeen]),
// and a standby not seen for [LeaseConfig.RosterLapse] loses its rank (see
// [RoleState.RankAt]). A member writes a tombstone on its heartbeat key
// when it deregisters after it wrote a heartbeat.
type Heartbeat struct {
	// Member is the member that is alive.
	Member MemberID

	// SeenAt is the time the member wrote the heartbeat, by its own clock,
	// in milliseconds since the Unix epoch.
	SeenAt int64
}

// Lease is the value of a record that names the member that holds a role
// now, and the time the claim of that member ends.
//
// Token is the authority. The broker fences a write that carries an older
// token, and no clock takes part in that check. Deadline is an anti-flap
// device. A standby waits for the deadline to pass before it challenges the
// holder, so a short pause does not move the role.
type Lease struct {
	// Member is the member that holds the role.
	Member MemberID

	// Token is the quorum-minted proof of the claim of the holder.
	Token FencingToken

	// GrantedAt is the time the holder took the lease, in milliseconds since
	// the Unix epoch. A renewal moves it forward.
	GrantedAt int64

	// Deadline is the time the lease expires, in milliseconds since the Unix
	// epoch.
	Deadline int64
}

// FormatError reports a malformed record of [StateTopic]. Every decoder of
// this package returns one, so a caller finds it with [errors.As] and reads
// the part that failed.
type FormatError struct {
	// Part names the record part that failed to decode. It is "key",
	// "registration value", "lease value", or "heartbeat value".
	Part string

	reason string
	err    error
}

// Error describes the fault and names the record part that carries it, such
// as "coordination: malformed lease value: truncated at byte 12 of 20".
func (e *FormatError) Error() string {
	if e.err != nil {
		return "coordination: malformed " + e.Part + ": " + e.reason + ": " + e.err.Error()
	}
	return "coordination: malformed " + e.Part + ": " + e.reason
}

// Unwrap returns the constructor error behind a rejected role or member id,
// and nil for a fault of the layout itself.
func (e *FormatError) Unwrap() error { return e.err }

// IsTombstone reports whether a record value is a tombstone. A tombstone of
// a registration key deregisters one member, and a tombstone of a lease key
// clears the lease of one role. No value of this topic is legally empty, so
// an empty value and a nil value are both tombstones.
func IsTombstone(value []byte) bool { return len(value) == 0 }

// EncodeKey encodes a key of [StateTopic].
//
// The function writes the empty member string for a lease key, whatever
// key.Member holds, because the frozen layout gives a lease no member.
func EncodeKey(key Key) []byte {
	member := key.Member.name
	if key.Kind == KindLease {
		member = ""
	}
	var w writer
	w.buf = make([]byte, 0, 8+len(key.Role.name)+len(member))
	w.int16(layoutVersion)
	w.int16(int16(key.Kind))
	w.string(key.Role.name)
	w.string(member)
	return w.buf
}

// EncodeRegistration encodes the value of a registration record.
func EncodeRegistration(registration Registration) []byte {
	var w writer
	w.buf = make([]byte, 0, 12+len(registration.Member.name))
	w.int16(layoutVersion)
	w.string(registration.Member.name)
	w.int64(registration.RegisteredAt)
	return w.buf
}

// EncodeHeartbeat encodes the value of a heartbeat record. It has the
// layout of a registration value, with seen_at for registered_at.
func EncodeHeartbeat(heartbeat Heartbeat) []byte {
	var w writer
	w.buf = make([]byte, 0, 12+len(heartbeat.Member.name))
	w.int16(layoutVersion)
	w.string(heartbeat.Member.name)
	w.int64(heartbeat.SeenAt)
	return w.buf
}

// EncodeLease encodes the value of a lease record. A lease of member
// "node-1" takes 36 bytes.
func EncodeLease(lease Lease) []byte {
	var w writer
	w.buf = make([]byte, 0, 30+len(lease.Member.name))
	w.int16(layoutVersion)
	w.string(lease.Member.name)
	w.int64(lease.Token.producerID)
	w.int16(lease.Token.producerEpoch)
	w.int64(lease.GrantedAt)
	w.int64(lease.Deadline)
	return w.buf
}

// DecodeKey decodes a key of [StateTopic]. It returns a *[FormatError] for a
// truncated buffer, for trailing bytes, for an unknown version, for an
// unknown kind, for a negative string length, for a role or a member id that
// its constructor rejects, and for a lease key that names a member.
func DecodeKey(data []byte) (Key, error) {
	r := reader{part: "key", buf: data}
	r.version()
	kind := RecordKind(r.int16())
	if r.err == nil && kind != KindRegistration && kind != KindLease && kind != KindHeartbeat {
		r.fail(fmt.Sprintf("unknown record kind %d", int16(kind)), nil)
	}
	roleName := r.string()
	memberName := r.string()
	r.end()
	if r.err != nil {
		return Key{}, r.err
	}
	role, err := NewRole(roleName)
	if err != nil {
		return Key{}, &FormatError{Part: "key", reason: "role", err: err}
	}
	key := Key{Kind: kind, Role: role}
	switch kind {
	case KindLease:
		if memberName != "" {
			return Key{}, &FormatError{Part: "key", reason: fmt.Sprintf("lease key names member %q", memberName)}
		}
	case KindRegistration, KindHeartbeat:
		member, err := NewMemberID(memberName)
		if err != nil {
			return Key{}, &FormatError{Part: "key", reason: "member", err: err}
		}
		key.Member = member
	}
	return key, nil
}

// keyRole returns the bytes of the role name in a key of [StateTopic],
// without decoding the rest: the string after the version and the kind
// (see EncodeKey). It returns nil for a key too short to hold one, or with
// a negative length. A key that names a role but does not decode (another
// version, an unknown kind) still returns its role, so that a reader of
// that role's records sees it, and reports it, as a walk of the log does.
// The transport's views keep the records of a partition by it (the
// KafkaTransport's ReadRolesFrom).
func keyRole(data []byte) []byte {
	if len(data) < 6 {
		return nil
	}
	n := int(int16(binary.BigEndian.Uint16(data[4:6]))) //nolint:gosec // the int16 of the layout, read as its two's complement bits
	if n < 0 || len(data) < 6+n {
		return nil
	}
	return data[6 : 6+n]
}

// DecodeRegistration decodes the value of a registration record. It returns
// a *[FormatError] for a truncated buffer, for trailing bytes, for an unknown
// version, for a negative string length, and for a member id that its
// constructor rejects. A tombstone is no registration: test the value with
// [IsTombstone] first.
func DecodeRegistration(data []byte) (Registration, error) {
	r := reader{part: "registration value", buf: data}
	r.version()
	memberName := r.string()
	registeredAt := r.int64()
	r.end()
	if r.err != nil {
		return Registration{}, r.err
	}
	member, err := NewMemberID(memberName)
	if err != nil {
		return Registration{}, &FormatError{Part: r.part, reason: "member", err: err}
	}
	return Registration{Member: member, RegisteredAt: registeredAt}, nil
}

// DecodeHeartbeat decodes the value of a heartbeat record. It returns a
// *[FormatError] for a truncated buffer, for trailing bytes, for an unknown
// version, for a negative string length, and for a member id that its
// constructor rejects. A tombstone is no heartbeat: test the value with
// [IsTombstone] first.
func DecodeHeartbeat(data []byte) (Heartbeat, error) {
	r := reader{part: "heartbeat value", buf: data}
	r.version()
	memberName := r.string()
	seenAt := r.int64()
	r.end()
	if r.err != nil {
		return Heartbeat{}, r.err
	}
	member, err := NewMemberID(memberName)
	if err != nil {
		return Heartbeat{}, &FormatError{Part: r.part, reason: "member", err: err}
	}
	return Heartbeat{Member: member, SeenAt: seenAt}, nil
}

// DecodeLease decodes the value of a lease record. It returns a
// *[FormatError] for a truncated buffer, for trailing bytes, for an unknown
// version, for a negative string length, for a member id that its
// constructor rejects, and for a negative producer id or producer epoch. A
// tombstone is no lease: test the value with [IsTombstone] first.
func DecodeLease(data []byte) (Lease, error) {
	r := reader{part: "lease value", buf: data}
	r.version()
	memberName := r.string()
	producerID := r.int64()
	producerEpoch := r.int16()
	grantedAt := r.int64()
	deadline := r.int64()
	r.end()
	if r.err != nil {
		return Lease{}, r.err
	}
	member, err := NewMemberID(memberName)
	if err != nil {
		return Lease{}, &FormatError{Part: r.part, reason: "member", err: err}
	}
	token, err := NewFencingToken(producerID, producerEpoch)
	if err != nil {
		return Lease{}, &FormatError{Part: r.part, reason: "token", err: err}
	}
	return Lease{Member: member, Token: token, GrantedAt: grantedAt, Deadline: deadline}, nil
}

// writer appends the big-endian primitives of the layout.
type writer struct{ buf []byte }

// The layout's signed fields are written as their two's complement bits.
func (w *writer) int16(v int16) { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v)) } //nolint:gosec // two's complement bits
func (w *writer) int64(v int64) { w.buf = binary.BigEndian.AppendUint64(w.buf, uint64(v)) } //nolint:gosec // two's complement bits

// string writes an int16 length and the bytes. The constructors of Role and
// MemberID bound every name far below the int16 range.
func (w *writer) string(s string) {
	w.int16(int16(len(s))) //nolint:gosec // NewRole and NewMemberID bound a name to 249 bytes
	w.buf = append(w.buf, s...)
}

// reader consumes the layout and keeps the first fault, so a decoder reads
// every field and checks once.
type reader struct {
	part string
	buf  []byte
	off  int
	err  *FormatError
}

func (r *reader) fail(reason string, err error) {
	if r.err == nil {
		r.err = &FormatError{Part: r.part, reason: reason, err: err}
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.buf)-r.off < n {
		r.fail(fmt.Sprintf("truncated at byte %d of %d, %d more bytes wanted", len(r.buf), r.off+n, r.off+n-len(r.buf)), nil)
		return nil
	}
	b := r.buf[r.off : r.off+n]
	r.off += n
	return b
}

func (r *reader) int16() int16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b)) //nolint:gosec // two's complement bits
}

func (r *reader) int64() int64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b)) //nolint:gosec // two's complement bits
}

func (r *reader) version() {
	if v := r.int16(); r.err == nil && v != layoutVersion {
		r.fail(fmt.Sprintf("unknown version %d, this reader knows version %d", v, layoutVersion), nil)
	}
}

func (r *reader) string() string {
	n := r.int16()
	if r.err != nil {
		return ""
	}
	if n < 0 {
		r.fail(fmt.Sprintf("negative string length %d at byte %d", n, r.off-2), nil)
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) end() {
	if r.err == nil && r.off != len(r.buf) {
		r.fail(fmt.Sprintf("%d trailing bytes after byte %d", len(r.buf)-r.off, r.off), nil)
	}
}
