package chaos

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// DecodedRecord is what one record of the state topic decodes to, in the
// fields of the frozen corpus of coordination/testdata/records.json. Error
// holds the decoder's error, and the other fields are then empty; the value
// fields of the other kinds are absent. Two releases of package
// coordination that read the same bytes must produce equal values: the
// mixed-release test compares them (internal/chaos/decodestate, the
// command it builds of each release).
type DecodedRecord struct {
	Kind      string `json:"kind,omitempty"`
	Role      string `json:"role,omitempty"`
	Member    string `json:"member,omitempty"`
	Tombstone bool   `json:"tombstone,omitempty"`

	ValueMember   string `json:"value_member,omitempty"`
	RegisteredAt  *int64 `json:"registered_at,omitempty"`
	SeenAt        *int64 `json:"seen_at,omitempty"`
	ProducerID    *int64 `json:"producer_id,omitempty"`
	ProducerEpoch *int16 `json:"producer_epoch,omitempty"`
	GrantedAt     *int64 `json:"granted_at,omitempty"`
	Deadline      *int64 `json:"deadline,omitempty"`

	Error string `json:"error,omitempty"`
}

// DecodeStateRecord decodes one record of the state topic with this
// build's package coordination: the key, then the value of its kind, or a
// tombstone. It never panics; a record that does not decode comes back
// with Error set.
func DecodeStateRecord(key, value []byte) DecodedRecord {
	k, err := coordination.DecodeKey(key)
	if err != nil {
		return DecodedRecord{Error: err.Error()}
	}
	out := DecodedRecord{Kind: k.Kind.String(), Role: k.Role.String(), Member: k.Member.String()}
	if coordination.IsTombstone(value) {
		out.Tombstone = true
		return out
	}
	switch k.Kind {
	case coordination.KindRegistration:
		v, err := coordination.DecodeRegistration(value)
		if err != nil {
			return DecodedRecord{Error: err.Error()}
		}
		out.ValueMember, out.RegisteredAt = v.Member.String(), &v.RegisteredAt
	case coordination.KindLease:
		v, err := coordination.DecodeLease(value)
		if err != nil {
			return DecodedRecord{Error: err.Error()}
		}
		id, epoch := v.Token.ProducerID(), v.Token.ProducerEpoch()
		out.ValueMember, out.ProducerID, out.ProducerEpoch = v.Member.String(), &id, &epoch
		out.GrantedAt, out.Deadline = &v.GrantedAt, &v.Deadline
	default:
		// Every other kind this build's DecodeKey accepts has the value
		// of a registration (the heartbeat, kind 2).
		v, err := coordination.DecodeHeartbeat(value)
		if err != nil {
			return DecodedRecord{Error: err.Error()}
		}
		out.ValueMember, out.SeenAt = v.Member.String(), &v.SeenAt
	}
	return out
}

// Handover is one change of the holder of a role, read from the lease
// records of the state topic.
type Handover struct {
	// From and To are the members of the last lease of the old holder and
	// of the first lease of the new one.
	From string `json:"from"`
	To   string `json:"to"`

	// FromOffset and ToOffset are the offsets of those two lease records.
	FromOffset int64 `json:"from_offset"`
	ToOffset   int64 `json:"to_offset"`

	// FromDeadline is the deadline of the old holder's last lease, in
	// milliseconds since the Unix epoch.
	FromDeadline int64 `json:"from_deadline"`

	// Tombstone reports a lease tombstone between the two leases (the old
	// holder resigned); TombstoneOffset and TombstoneMillis are its offset
	// and record timestamp. Without a tombstone the new holder took the
	// role after the lease lapsed, or while it still ran.
	Tombstone       bool  `json:"tombstone"`
	TombstoneOffset int64 `json:"tombstone_offset,omitempty"`
	TombstoneMillis int64 `json:"tombstone_ms,omitempty"`

	// LeaseMillis is the record timestamp of the new holder's first lease,
	// and GapMillis the time from the tombstone to it (from the old
	// holder's deadline without a tombstone).
	LeaseMillis int64 `json:"lease_ms"`
	GapMillis   int64 `json:"gap_ms"`
}

// String describes the handover for a test log.
func (h Handover) String() string {
	how := "no tombstone"
	if h.Tombstone {
		how = fmt.Sprintf("tombstone at offset %d, %d ms before its deadline", h.TombstoneOffset, h.FromDeadline-h.TombstoneMillis)
	}
	return fmt.Sprintf("%s (offset %d) -> %s (offset %d): %s, gap %d ms", h.From, h.FromOffset, h.To, h.ToOffset, how, h.GapMillis)
}

// Handovers walks the lease records of one role in a partition of the state
// topic, in offset order, and returns every change of the leaseholder: a
// lease record that names another member than the lease record before it.
// Each record's Timestamp must be set (the writer's CreateTime). A record
// of the role that does not decode is an error.
func Handovers(role coordination.Role, records []coordination.StateRecord) ([]Handover, error) {
	records = slices.SortedStableFunc(slices.Values(records), func(a, b coordination.StateRecord) int { return cmp.Compare(a.Offset, b.Offset) })
	var out []Handover
	var last *coordination.StateRecord
	var lastLease coordination.Lease
	var tombstone *coordination.StateRecord
	for i := range records {
		record := &records[i]
		key, err := coordination.DecodeKey(record.Key)
		if err != nil {
			return nil, fmt.Errorf("state record at offset %d: %w", record.Offset, err)
		}
		if key.Role != role || key.Kind != coordination.KindLease {
			continue
		}
		if coordination.IsTombstone(record.Value) {
			if tombstone == nil {
				tombstone = record
			}
			continue
		}
		lease, err := coordination.DecodeLease(record.Value)
		if err != nil {
			return nil, fmt.Errorf("lease record at offset %d: %w", record.Offset, err)
		}
		if last != nil && lease.Member != lastLease.Member {
			h := Handover{
				From: lastLease.Member.String(), To: lease.Member.String(),
				FromOffset: last.Offset, ToOffset: record.Offset, FromDeadline: lastLease.Deadline,
				LeaseMillis: record.Timestamp, GapMillis: record.Timestamp - lastLease.Deadline,
			}
			if tombstone != nil {
				h.Tombstone, h.TombstoneOffset, h.TombstoneMillis = true, tombstone.Offset, tombstone.Timestamp
				h.GapMillis = record.Timestamp - tombstone.Timestamp
			}
			out = append(out, h)
		}
		last, lastLease, tombstone = record, lease, nil
	}
	return out, nil
}
