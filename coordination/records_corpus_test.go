package coordination

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// testdata/records.json is the frozen corpus of state-topic records: whole
// records (a key and a value, or a key and a tombstone), each with the
// fields it decodes to. Every release of this package must decode every
// record to those fields, and its encoder must reproduce the bytes. Unlike
// testdata/vectors.json, which the code regenerates (-update), the corpus
// has no generator: it is frozen. A record is added by hand (its bytes from
// the encoder of the release that adds it) and never changed, so a change
// of any byte the encoder writes fails TestRecordCorpusEncodes.
// internal/chaos's mixed-release test (cmd/krabka-chaos, TestMixedReleases)
// decodes the same file with the pinned previous release.
const recordCorpusPath = "testdata/records.json"

// corpusFile is testdata/records.json.
type corpusFile struct {
	About   string         `json:"about"`
	Records []corpusRecord `json:"records"`
}

// corpusRecord is one record of the corpus: its bytes (hex), and what they
// decode to. Value is nil for an absent value; both an absent and an empty
// value are tombstones. The value fields of the other kinds are absent.
type corpusRecord struct {
	What  string  `json:"what"`
	Key   string  `json:"key"`
	Value *string `json:"value"`

	Kind      string `json:"kind"`
	Role      string `json:"role"`
	Member    string `json:"member"`
	Tombstone bool   `json:"tombstone"`

	ValueMember   string `json:"value_member,omitempty"`
	RegisteredAt  *int64 `json:"registered_at,omitempty"`
	SeenAt        *int64 `json:"seen_at,omitempty"`
	ProducerID    *int64 `json:"producer_id,omitempty"`
	ProducerEpoch *int16 `json:"producer_epoch,omitempty"`
	GrantedAt     *int64 `json:"granted_at,omitempty"`
	Deadline      *int64 `json:"deadline,omitempty"`
}

func readRecordCorpus(t *testing.T) corpusFile {
	t.Helper()
	data, err := os.ReadFile(recordCorpusPath)
	if err != nil {
		t.Fatal(err)
	}
	var file corpusFile
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&file); err != nil {
		t.Fatalf("%s: %v", recordCorpusPath, err)
	}
	if len(file.Records) == 0 {
		t.Fatalf("%s holds no record", recordCorpusPath)
	}
	return file
}

// bytes returns the key and the value of the record; value is nil for an
// absent value.
func (r corpusRecord) bytes(t *testing.T) (key, value []byte) {
	t.Helper()
	key = mustHex(t, r.Key)
	if r.Value != nil {
		value = mustHex(t, *r.Value)
		if value == nil {
			value = []byte{}
		}
	}
	return key, value
}

// decodeCorpusRecord decodes a record into the fields of the corpus, or
// fails with the decoder's error.
func decodeCorpusRecord(key, value []byte) (corpusRecord, error) {
	k, err := DecodeKey(key)
	if err != nil {
		return corpusRecord{}, err
	}
	out := corpusRecord{Kind: k.Kind.String(), Role: k.Role.String(), Member: k.Member.String()}
	if IsTombstone(value) {
		out.Tombstone = true
		return out, nil
	}
	switch k.Kind {
	case KindRegistration:
		v, err := DecodeRegistration(value)
		if err != nil {
			return corpusRecord{}, err
		}
		out.ValueMember, out.RegisteredAt = v.Member.String(), &v.RegisteredAt
	case KindLease:
		v, err := DecodeLease(value)
		if err != nil {
			return corpusRecord{}, err
		}
		id, epoch := v.Token.ProducerID(), v.Token.ProducerEpoch()
		out.ValueMember, out.ProducerID, out.ProducerEpoch = v.Member.String(), &id, &epoch
		out.GrantedAt, out.Deadline = &v.GrantedAt, &v.Deadline
	case KindHeartbeat:
		v, err := DecodeHeartbeat(value)
		if err != nil {
			return corpusRecord{}, err
		}
		out.ValueMember, out.SeenAt = v.Member.String(), &v.SeenAt
	}
	return out, nil
}

// decoded is the part of a record that its bytes decode to, as one
// comparable text.
func (r corpusRecord) decoded() string {
	r.What, r.Key, r.Value = "", "", nil
	data, _ := json.Marshal(r)
	return string(data)
}

// encodeCorpusRecord encodes the fields of a corpus record with this
// release's encoder.
func encodeCorpusRecord(t *testing.T, r corpusRecord) (key, value []byte) {
	t.Helper()
	role := mustVectorRole(t, r.Role)
	var k Key
	switch r.Kind {
	case "registration":
		k = RegistrationKey(role, mustVectorMember(t, r.Member))
	case "lease":
		k = LeaseKey(role)
	case "heartbeat":
		k = HeartbeatKey(role, mustVectorMember(t, r.Member))
	default:
		t.Fatalf("%s: unknown kind %q", r.What, r.Kind)
	}
	key = EncodeKey(k)
	if r.Tombstone {
		return key, nil
	}
	switch r.Kind {
	case "registration":
		value = EncodeRegistration(Registration{Member: mustVectorMember(t, r.ValueMember), RegisteredAt: *r.RegisteredAt})
	case "lease":
		value = EncodeLease(Lease{Member: mustVectorMember(t, r.ValueMember), Token: mustVectorToken(t, *r.ProducerID, *r.ProducerEpoch),
			GrantedAt: *r.GrantedAt, Deadline: *r.Deadline})
	case "heartbeat":
		value = EncodeHeartbeat(Heartbeat{Member: mustVectorMember(t, r.ValueMember), SeenAt: *r.SeenAt})
	}
	return key, value
}

// TestRecordCorpusDecodes decodes every record of the frozen corpus and
// compares the fields with the corpus's.
func TestRecordCorpusDecodes(t *testing.T) {
	for _, r := range readRecordCorpus(t).Records {
		key, value := r.bytes(t)
		got, err := decodeCorpusRecord(key, value)
		if err != nil {
			t.Errorf("%s: %v", r.What, err)
			continue
		}
		if got.decoded() != r.decoded() {
			t.Errorf("%s: decodes to\n\t%s\nthe corpus says\n\t%s", r.What, got.decoded(), r.decoded())
		}
	}
}

// TestRecordCorpusEncodes encodes the fields of every record of the frozen
// corpus and compares the bytes: a change of any byte the encoder writes, in
// any key or value kind, fails here.
func TestRecordCorpusEncodes(t *testing.T) {
	for _, r := range readRecordCorpus(t).Records {
		wantKey, wantValue := r.bytes(t)
		key, value := encodeCorpusRecord(t, r)
		if !bytes.Equal(key, wantKey) {
			t.Errorf("%s: the key encodes to %x, the corpus holds %x", r.What, key, wantKey)
		}
		if !bytes.Equal(value, wantValue) {
			t.Errorf("%s: the value encodes to %x, the corpus holds %x", r.What, value, wantValue)
		}
	}
}

// TestRecordCorpusPinsEveryByte shows that the corpus pins every byte of
// every record it holds: a change of any one byte of a key or a value
// either fails to decode or decodes to other fields, so no byte of the
// encoder's output is left unchecked by TestRecordCorpusEncodes.
func TestRecordCorpusPinsEveryByte(t *testing.T) {
	for _, r := range readRecordCorpus(t).Records {
		key, value := r.bytes(t)
		want := r.decoded()
		for part, data := range map[string][]byte{"key": key, "value": value} {
			for i := range data {
				for _, flip := range []byte{0x01, 0x80, 0xff} {
					mutated := bytes.Clone(data)
					mutated[i] ^= flip
					k, v := key, value
					if part == "key" {
						k = mutated
					} else {
						v = mutated
					}
					got, err := decodeCorpusRecord(k, v)
					if err == nil && got.decoded() == want {
						t.Errorf("%s: byte %d of the %s xor %#x still decodes to the same fields", r.What, i, part, flip)
					}
				}
			}
		}
	}
}

// TestRecordCorpusCoversTheLayout asserts what the corpus must hold: every
// key and value kind of the layout with its tombstone, names at the
// 249-byte bound, multi-byte UTF-8 names, the largest producer epoch, large
// producer ids, zero and negative instants, and an empty as well as an
// absent tombstone value.
func TestRecordCorpusCoversTheLayout(t *testing.T) {
	want := []struct {
		what string
		has  func(r corpusRecord) bool
	}{
		{"a registration", func(r corpusRecord) bool { return r.Kind == "registration" && !r.Tombstone }},
		{"a registration tombstone", func(r corpusRecord) bool { return r.Kind == "registration" && r.Tombstone }},
		{"a lease", func(r corpusRecord) bool { return r.Kind == "lease" && !r.Tombstone }},
		{"a lease tombstone", func(r corpusRecord) bool { return r.Kind == "lease" && r.Tombstone }},
		{"a heartbeat (kind 2)", func(r corpusRecord) bool { return r.Kind == "heartbeat" && !r.Tombstone }},
		{"a heartbeat tombstone", func(r corpusRecord) bool { return r.Kind == "heartbeat" && r.Tombstone }},
		{"a tombstone with an absent value", func(r corpusRecord) bool { return r.Tombstone && r.Value == nil }},
		{"a tombstone with an empty value", func(r corpusRecord) bool { return r.Tombstone && r.Value != nil && *r.Value == "" }},
		{"a role of 249 bytes", func(r corpusRecord) bool { return len(r.Role) == MaxRoleLen }},
		{"a role of 249 bytes of multi-byte runes", func(r corpusRecord) bool {
			return len(r.Role) == MaxRoleLen && utf8.RuneCountInString(r.Role) < MaxRoleLen/2
		}},
		{"a key member of 249 bytes", func(r corpusRecord) bool { return len(r.Member) == MaxMemberIDLen }},
		{"a value member of 249 bytes in a lease", func(r corpusRecord) bool { return r.Kind == "lease" && len(r.ValueMember) == MaxMemberIDLen }},
		{"a non-ASCII role", func(r corpusRecord) bool { return strings.ContainsFunc(r.Role, func(c rune) bool { return c > 127 }) }},
		{"a four-byte rune in a member", func(r corpusRecord) bool {
			return strings.ContainsFunc(r.Member+r.ValueMember, func(c rune) bool { return utf8.RuneLen(c) == 4 })
		}},
		{"the largest producer epoch", func(r corpusRecord) bool { return r.ProducerEpoch != nil && *r.ProducerEpoch == math.MaxInt16 }},
		{"producer epoch 0", func(r corpusRecord) bool { return r.ProducerEpoch != nil && *r.ProducerEpoch == 0 }},
		{"a producer id above 2^32", func(r corpusRecord) bool { return r.ProducerID != nil && *r.ProducerID > math.MaxUint32 }},
		{"the largest producer id", func(r corpusRecord) bool { return r.ProducerID != nil && *r.ProducerID == math.MaxInt64 }},
		{"producer id 0", func(r corpusRecord) bool { return r.ProducerID != nil && *r.ProducerID == 0 }},
		{"instant 0", func(r corpusRecord) bool { return isAny(r, func(v int64) bool { return v == 0 }) }},
		{"a negative instant", func(r corpusRecord) bool { return isAny(r, func(v int64) bool { return v < 0 }) }},
		{"the smallest instant", func(r corpusRecord) bool { return isAny(r, func(v int64) bool { return v == math.MinInt64 }) }},
		{"the largest instant", func(r corpusRecord) bool { return isAny(r, func(v int64) bool { return v == math.MaxInt64 }) }},
	}
	records := readRecordCorpus(t).Records
	for _, w := range want {
		found := false
		for _, r := range records {
			if w.has(r) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("the corpus holds no record with %s", w.what)
		}
	}
	seen := map[string]bool{}
	for _, r := range records {
		if seen[r.What] {
			t.Errorf("two records are named %q", r.What)
		}
		seen[r.What] = true
	}
}

// isAny reports whether any instant of the record satisfies f.
func isAny(r corpusRecord, f func(int64) bool) bool {
	for _, v := range []*int64{r.RegisteredAt, r.SeenAt, r.GrantedAt, r.Deadline} {
		if v != nil && f(*v) {
			return true
		}
	}
	return false
}
