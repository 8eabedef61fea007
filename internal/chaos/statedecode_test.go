package chaos

import (
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// stateLog builds the records of one partition of the state topic, with
// offsets in order and the timestamps given.
type stateLog struct {
	t       *testing.T
	role    coordination.Role
	records []coordination.StateRecord
}

func newStateLog(t *testing.T) *stateLog {
	t.Helper()
	role, err := coordination.NewRole("controller")
	if err != nil {
		t.Fatal(err)
	}
	return &stateLog{t: t, role: role}
}

func (l *stateLog) add(key, value []byte, atMillis int64) {
	l.records = append(l.records, coordination.StateRecord{Offset: int64(len(l.records)), Key: key, Value: value, Timestamp: atMillis})
}

func (l *stateLog) member(name string) coordination.MemberID {
	l.t.Helper()
	id, err := coordination.NewMemberID(name)
	if err != nil {
		l.t.Fatal(err)
	}
	return id
}

func (l *stateLog) register(name string, atMillis int64) {
	id := l.member(name)
	l.add(coordination.EncodeKey(coordination.RegistrationKey(l.role, id)),
		coordination.EncodeRegistration(coordination.Registration{Member: id, RegisteredAt: atMillis}), atMillis)
}

func (l *stateLog) lease(name string, producerID int64, atMillis, deadline int64) {
	l.t.Helper()
	tok, err := coordination.NewFencingToken(producerID, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	l.add(coordination.EncodeKey(coordination.LeaseKey(l.role)),
		coordination.EncodeLease(coordination.Lease{Member: l.member(name), Token: tok, GrantedAt: atMillis, Deadline: deadline}), atMillis)
}

func (l *stateLog) resign(atMillis int64) {
	l.add(coordination.EncodeKey(coordination.LeaseKey(l.role)), nil, atMillis)
}

func TestHandoversTellAResignationFromALapse(t *testing.T) {
	l := newStateLog(t)
	l.register("m1", 0)
	l.register("m2", 10)
	l.lease("m1", 1, 100, 6100)
	l.lease("m1", 1, 2100, 8100) // a renewal: no change
	l.resign(3000)
	l.lease("m2", 2, 3040, 9040) // a handover, 40 ms after the tombstone
	l.lease("m1", 3, 9500, 15500)
	// a lapse: no tombstone, the next lease 460 ms after m2's deadline

	got, err := Handovers(l.role, l.records)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Handovers = %v; want 2", got)
	}
	if h := got[0]; h.From != "m1" || h.To != "m2" || !h.Tombstone || h.TombstoneOffset != 4 || h.GapMillis != 40 || h.FromDeadline != 8100 || h.ToOffset != 5 {
		t.Errorf("first change %+v; want m1 -> m2 after the tombstone at offset 4, gap 40 ms, deadline 8100", h)
	}
	if h := got[1]; h.From != "m2" || h.To != "m1" || h.Tombstone || h.GapMillis != 460 {
		t.Errorf("second change %+v; want m2 -> m1 without a tombstone, 460 ms after the deadline", h)
	}
	if s := got[0].String(); !strings.Contains(s, "tombstone at offset 4") {
		t.Errorf("String() = %q", s)
	}
}

func TestHandoversIgnoreOtherRolesAndFailOnMalformedRecords(t *testing.T) {
	l := newStateLog(t)
	l.lease("m1", 1, 100, 6100)
	other, err := coordination.NewRole("archiver")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := coordination.NewFencingToken(9, 0)
	l.add(coordination.EncodeKey(coordination.LeaseKey(other)),
		coordination.EncodeLease(coordination.Lease{Member: l.member("m2"), Token: tok, GrantedAt: 200, Deadline: 6200}), 200)
	l.lease("m1", 1, 2100, 8100)
	if got, err := Handovers(l.role, l.records); err != nil || len(got) != 0 {
		t.Errorf("Handovers = %v, %v; want no change (the other role's lease is not this role's)", got, err)
	}
	l.add([]byte{0, 0, 0, 7}, []byte{1}, 300)
	if _, err := Handovers(l.role, l.records); err == nil || !strings.Contains(err.Error(), "offset 3") {
		t.Errorf("Handovers over a malformed key = %v; want an error naming offset 3", err)
	}
}

func TestDecodeStateRecord(t *testing.T) {
	l := newStateLog(t)
	l.register("m1", 42)
	l.lease("m1", 7, 100, 6100)
	l.resign(200)
	reg := DecodeStateRecord(l.records[0].Key, l.records[0].Value)
	if reg.Kind != "registration" || reg.Member != "m1" || reg.ValueMember != "m1" || reg.RegisteredAt == nil || *reg.RegisteredAt != 42 || reg.Error != "" {
		t.Errorf("registration decodes to %+v", reg)
	}
	lease := DecodeStateRecord(l.records[1].Key, l.records[1].Value)
	if lease.Kind != "lease" || lease.ProducerID == nil || *lease.ProducerID != 7 || lease.Deadline == nil || *lease.Deadline != 6100 {
		t.Errorf("lease decodes to %+v", lease)
	}
	if tomb := DecodeStateRecord(l.records[2].Key, nil); !tomb.Tombstone || tomb.Kind != "lease" {
		t.Errorf("tombstone decodes to %+v", tomb)
	}
	for _, bad := range []struct{ key, value []byte }{
		{nil, nil},
		{[]byte{0, 0, 0, 9, 0, 1, 'r', 0, 0}, nil},
		{l.records[1].Key, l.records[0].Value},
		{l.records[0].Key, []byte{0}},
	} {
		if got := DecodeStateRecord(bad.key, bad.value); got.Error == "" || got.Kind != "" {
			t.Errorf("DecodeStateRecord(%x, %x) = %+v; want only an error", bad.key, bad.value, got)
		}
	}
}
