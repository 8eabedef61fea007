package coordination

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// testdata/vectors.json pins the frozen record layout and the partition rule
// for krabka-client-rs and krabka-streams-java, which replay it byte for
// byte. Regenerate it with
//
//	go test ./coordination -run TestVectors -update
//
// and review the diff: a change to a valid vector is a change to the frozen
// layout, and it needs the same change in both ports.
var updateVectors = flag.Bool("update", false, "rewrite testdata/vectors.json and testdata/partition-roles.txt")

const (
	vectorsPath        = "testdata/vectors.json"
	partitionRolesPath = "testdata/partition-roles.txt"
)

type vectorFile struct {
	Layout        string               `json:"layout"`
	Keys          []keyVector          `json:"keys"`
	Registrations []registrationVector `json:"registrations"`
	Leases        []leaseVector        `json:"leases"`
	Heartbeats    []heartbeatVector    `json:"heartbeats"`
	Invalid       []invalidVector      `json:"invalid"`
	Partitions    []partitionVector    `json:"partitions"`
}

type keyVector struct {
	Role   string `json:"role"`
	Kind   int16  `json:"kind"`
	Member string `json:"member"`
	Hex    string `json:"hex"`
}

type registrationVector struct {
	Member       string `json:"member"`
	RegisteredAt int64  `json:"registered_at"`
	Hex          string `json:"hex"`
}

type heartbeatVector struct {
	Member string `json:"member"`
	SeenAt int64  `json:"seen_at"`
	Hex    string `json:"hex"`
}

type leaseVector struct {
	Member        string `json:"member"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	GrantedAt     int64  `json:"granted_at"`
	Deadline      int64  `json:"deadline"`
	Hex           string `json:"hex"`
}

type invalidVector struct {
	Hex  string `json:"hex"`
	Part string `json:"part"`
	What string `json:"what"`
}

type partitionVector struct {
	Role       string         `json:"role"`
	Murmur2    int32          `json:"murmur2"`
	Positive   int32          `json:"positive"`
	Partitions map[string]int `json:"partitions"`
}

const vectorLayout = "Big-endian throughout. Every key and every value starts with an int16 version, 0 today. " +
	"A string is an int16 byte length followed by that many bytes of UTF-8. " +
	"key = version int16, kind int16 (0 registration, 1 lease, 2 heartbeat), role string, member string (empty for a lease key). " +
	"registration value = version int16, member string, registered_at int64. " +
	"lease value = version int16, member string, producer_id int64, producer_epoch int16, granted_at int64, deadline int64. " +
	"heartbeat value = version int16, member string, seen_at int64. " +
	"Instants are milliseconds since the Unix epoch. Roles and member ids are 1 to 249 bytes; producer id and epoch are never negative. " +
	"An empty or absent value is a tombstone. Decoders reject every vector under \"invalid\". " +
	"partition = (murmur2(UTF-8 role) & 0x7fffffff) % partitions, Kafka's Utils.murmur2 and Utils.toPositive; " +
	"murmur2 is given as a signed int32."

// vectorPartitionCounts are the partition counts of every partition vector,
// and the counts that scripts/murmur2/Murmur2Vectors.java prints.
var vectorPartitionCounts = []int{1, 2, 3, 7, 10, 16, 50, 100, 1000}

// vectorRoles are the roles of the partition vectors: ordinary names, Kafka's
// own murmur2 test strings, names with negative hashes, non-ASCII names, and
// names at the 249-byte bound, with every length modulo 4.
func vectorRoles() []string {
	roles := []string{
		"controller", "archiver", "scheduler", "node-1", "a", "ab", "abcd",
		"payments controller",
	}
	for _, c := range kafkaMurmur2Cases {
		roles = append(roles, c.input)
	}
	return append(roles,
		"é", "é-rôle", "日本", "日本語のロール", "🦀", "🦀-controller", "Ω≈ç√",
		strings.Repeat("r", 249),
		strings.Repeat("日", 83),         // 249 bytes
		strings.Repeat("é", 124)+"x",    // 249 bytes
		strings.Repeat("🦀", 62)+"x",     // 249 bytes
		strings.Repeat("role-", 49)+"z", // 246 bytes
	)
}

// vectorBytes builds a buffer of the layout by hand, for the invalid vectors.
type vectorBytes []byte

func (b vectorBytes) i16(v int16) vectorBytes { return binary.BigEndian.AppendUint16(b, uint16(v)) }
func (b vectorBytes) i64(v int64) vectorBytes { return binary.BigEndian.AppendUint64(b, uint64(v)) }
func (b vectorBytes) str(s string) vectorBytes {
	return append(b.i16(int16(len(s))), s...)
}

func mustVectorRole(t *testing.T, name string) Role {
	t.Helper()
	role, err := NewRole(name)
	if err != nil {
		t.Fatalf("NewRole(%q): %v", name, err)
	}
	return role
}

func mustVectorMember(t *testing.T, name string) MemberID {
	t.Helper()
	member, err := NewMemberID(name)
	if err != nil {
		t.Fatalf("NewMemberID(%q): %v", name, err)
	}
	return member
}

func mustVectorToken(t *testing.T, id int64, epoch int16) FencingToken {
	t.Helper()
	token, err := NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// generateVectors computes the vectors file from the code.
func generateVectors(t *testing.T) vectorFile {
	t.Helper()
	file := vectorFile{Layout: vectorLayout}
	long := strings.Repeat("x", 249)
	longRunes := strings.Repeat("日", 83)

	for _, k := range []struct {
		kind         RecordKind
		role, member string
	}{
		{KindRegistration, "controller", "node-1"},
		{KindLease, "controller", ""},
		{KindRegistration, "é-rôle", "日本"},
		{KindLease, "日本", ""},
		{KindRegistration, "🦀", "🦀-member"},
		{KindRegistration, "a", "b"},
		{KindRegistration, long, long},
		{KindLease, long, ""},
		{KindRegistration, longRunes, strings.Repeat("é", 124) + "x"},
		{KindHeartbeat, "controller", "node-1"},
		{KindHeartbeat, "日本", "🦀-member"},
	} {
		key := Key{Kind: k.kind, Role: mustVectorRole(t, k.role)}
		if k.member != "" {
			key.Member = mustVectorMember(t, k.member)
		}
		file.Keys = append(file.Keys, keyVector{Role: k.role, Kind: int16(k.kind), Member: k.member, Hex: hex.EncodeToString(EncodeKey(key))})
	}

	for _, r := range []struct {
		member string
		at     int64
	}{
		{"node-1", 1700000000000},
		{"node-2", 0},
		{"node-3", -1},
		{"日本", math.MinInt64},
		{"🦀", math.MaxInt64},
		{long, 1700000000001},
	} {
		value := EncodeRegistration(Registration{Member: mustVectorMember(t, r.member), RegisteredAt: r.at})
		file.Registrations = append(file.Registrations, registrationVector{Member: r.member, RegisteredAt: r.at, Hex: hex.EncodeToString(value)})
	}

	for _, l := range []leaseVector{
		{Member: "node-1", ProducerID: 4242, ProducerEpoch: 7, GrantedAt: 1700000000000, Deadline: 1700000030000},
		{Member: "node-1", ProducerID: 0, ProducerEpoch: 0, GrantedAt: 0, Deadline: 30000},
		{Member: "node-2", ProducerID: 4, ProducerEpoch: math.MaxInt16, GrantedAt: 1700000000000, Deadline: 1700000030000},
		{Member: "node-2", ProducerID: 5, ProducerEpoch: 0, GrantedAt: 1700000005000, Deadline: 1700000035000},
		{Member: "é-rôle", ProducerID: math.MaxInt64, ProducerEpoch: math.MaxInt16, GrantedAt: math.MinInt64, Deadline: math.MaxInt64},
		{Member: "🦀", ProducerID: 1 << 40, ProducerEpoch: 256, GrantedAt: -5, Deadline: -1},
		{Member: long, ProducerID: 11, ProducerEpoch: 1, GrantedAt: 0, Deadline: 30000},
	} {
		value := EncodeLease(Lease{Member: mustVectorMember(t, l.Member), Token: mustVectorToken(t, l.ProducerID, l.ProducerEpoch), GrantedAt: l.GrantedAt, Deadline: l.Deadline})
		l.Hex = hex.EncodeToString(value)
		file.Leases = append(file.Leases, l)
	}

	for _, h := range []heartbeatVector{
		{Member: "node-1", SeenAt: 1700000030000},
		{Member: "日本", SeenAt: 0},
		{Member: long, SeenAt: math.MaxInt64},
	} {
		h.Hex = hex.EncodeToString(EncodeHeartbeat(Heartbeat{Member: mustVectorMember(t, h.Member), SeenAt: h.SeenAt}))
		file.Heartbeats = append(file.Heartbeats, h)
	}

	var b vectorBytes
	validKey := EncodeKey(RegistrationKey(mustVectorRole(t, "controller"), mustVectorMember(t, "node-1")))
	validRegistration := EncodeRegistration(Registration{Member: mustVectorMember(t, "node-1"), RegisteredAt: 1700000000000})
	validLease := EncodeLease(Lease{Member: mustVectorMember(t, "node-1"), Token: mustVectorToken(t, 4242, 7), GrantedAt: 1700000000000, Deadline: 1700000030000})
	tooLong := strings.Repeat("x", 250)
	for _, v := range []struct {
		data       []byte
		part, what string
	}{
		{nil, "key", "empty buffer"},
		{validKey[:1], "key", "truncated inside the version"},
		{validKey[:4], "key", "truncated after the kind"},
		{validKey[:len(validKey)-1], "key", "truncated inside the member string"},
		{append(slices.Clone(validKey), 0), "key", "one trailing byte"},
		{b.i16(1).i16(0).str("controller").str("node-1"), "key", "unknown version 1"},
		{b.i16(-1).i16(0).str("controller").str("node-1"), "key", "unknown version -1"},
		{b.i16(0).i16(3).str("controller").str("node-1"), "key", "unknown kind 3"},
		{b.i16(0).i16(2).str("controller").str(""), "key", "heartbeat key with an empty member"},
		{b.i16(0).i16(-1).str("controller").str(""), "key", "unknown kind -1"},
		{b.i16(0).i16(0).i16(-1).str("node-1"), "key", "negative role length"},
		{b.i16(0).i16(0).str("controller").i16(-1), "key", "negative member length"},
		{b.i16(0).i16(0).str("").str("node-1"), "key", "empty role"},
		{b.i16(0).i16(1).str("").str(""), "key", "empty role in a lease key"},
		{b.i16(0).i16(0).str(tooLong).str("node-1"), "key", "role of 250 bytes"},
		{b.i16(0).i16(0).str("controller").str(""), "key", "registration key with an empty member"},
		{b.i16(0).i16(0).str("controller").str(tooLong), "key", "member of 250 bytes"},
		{b.i16(0).i16(1).str("controller").str("node-1"), "key", "lease key that names a member"},
		{b.i16(0).i16(0).str("role-\xff").str("node-1"), "key", "role that is not UTF-8"},
		{b.i16(0).i16(0).str("controller").str("node-\xc3"), "key", "member that is not UTF-8"},

		{nil, "registration value", "empty buffer (a tombstone is no registration)"},
		{validRegistration[:len(validRegistration)-1], "registration value", "truncated inside registered_at"},
		{append(slices.Clone(validRegistration), 0), "registration value", "one trailing byte"},
		{b.i16(1).str("node-1").i64(1700000000000), "registration value", "unknown version 1"},
		{b.i16(0).i16(-1).i64(1700000000000), "registration value", "negative member length"},
		{b.i16(0).str("").i64(1700000000000), "registration value", "empty member"},
		{b.i16(0).str(tooLong).i64(1700000000000), "registration value", "member of 250 bytes"},
		{validLease, "registration value", "a lease value"},
		{b.i16(0).str("\xffnode").i64(1700000000000), "registration value", "member that is not UTF-8"},

		{nil, "lease value", "empty buffer (a tombstone is no lease)"},
		{validLease[:35], "lease value", "truncated inside the deadline"},
		{validLease[:8], "lease value", "truncated inside the member string"},
		{append(slices.Clone(validLease), 0), "lease value", "one trailing byte"},
		{b.i16(1).str("node-1").i64(4242).i16(7).i64(1700000000000).i64(1700000030000), "lease value", "unknown version 1"},
		{b.i16(0).i16(-1).i64(4242).i16(7).i64(1700000000000).i64(1700000030000), "lease value", "negative member length"},
		{b.i16(0).str("").i64(4242).i16(7).i64(1700000000000).i64(1700000030000), "lease value", "empty member"},
		{b.i16(0).str(tooLong).i64(4242).i16(7).i64(1700000000000).i64(1700000030000), "lease value", "member of 250 bytes"},
		{b.i16(0).str("node-1").i64(-1).i16(7).i64(1700000000000).i64(1700000030000), "lease value", "negative producer id"},
		{b.i16(0).str("node-1").i64(4242).i16(-1).i64(1700000000000).i64(1700000030000), "lease value", "negative producer epoch"},
		{b.i16(0).str("node-1").i64(-1).i16(-1).i64(1700000000000).i64(1700000030000), "lease value", "the no-producer pair -1:-1"},
		{validRegistration, "lease value", "a registration value"},

		{nil, "heartbeat value", "empty buffer (a tombstone is no heartbeat)"},
		{validRegistration[:len(validRegistration)-1], "heartbeat value", "truncated inside seen_at"},
		{append(slices.Clone(validRegistration), 0), "heartbeat value", "one trailing byte"},
		{b.i16(1).str("node-1").i64(1700000000000), "heartbeat value", "unknown version 1"},
		{b.i16(0).str("").i64(1700000000000), "heartbeat value", "empty member"},
		{validLease, "heartbeat value", "a lease value"},
	} {
		file.Invalid = append(file.Invalid, invalidVector{Hex: hex.EncodeToString(v.data), Part: v.part, What: v.what})
	}

	for _, name := range vectorRoles() {
		role := mustVectorRole(t, name)
		hash := murmur2([]byte(name))
		vector := partitionVector{Role: name, Murmur2: hash, Positive: toPositive(hash), Partitions: map[string]int{}}
		for _, n := range vectorPartitionCounts {
			p, err := RolePartition(role, n)
			if err != nil {
				t.Fatal(err)
			}
			vector.Partitions[strconv.Itoa(n)] = p
		}
		file.Partitions = append(file.Partitions, vector)
	}
	return file
}

func marshalVectors(t *testing.T, file vectorFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(file); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func partitionRolesText(file vectorFile) []byte {
	var buf bytes.Buffer
	for _, p := range file.Partitions {
		buf.WriteString(p.Role)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func readVectors(t *testing.T) vectorFile {
	t.Helper()
	data, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("%v (generate it with: go test ./coordination -run TestVectors -update)", err)
	}
	var file vectorFile
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&file); err != nil {
		t.Fatalf("%s: %v", vectorsPath, err)
	}
	return file
}

func TestVectorsFileIsCurrent(t *testing.T) {
	generated := generateVectors(t)
	want := marshalVectors(t, generated)
	if *updateVectors {
		if err := os.WriteFile(vectorsPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(partitionRolesPath, partitionRolesText(generated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s and %s", vectorsPath, partitionRolesPath)
	}
	got, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("%v (generate it with: go test ./coordination -run TestVectors -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the code generates: a change to a vector is a change to the frozen layout or the partition rule, "+
			"and it needs the same change in krabka-client-rs and krabka-streams-java. Regenerate with -update and review the diff.", vectorsPath)
	}
}

func TestVectorsReplayKeys(t *testing.T) {
	file := readVectors(t)
	if len(file.Keys) == 0 {
		t.Fatal("no key vectors")
	}
	for _, v := range file.Keys {
		data := mustHex(t, v.Hex)
		key := Key{Kind: RecordKind(v.Kind), Role: mustVectorRole(t, v.Role)}
		if v.Member != "" {
			key.Member = mustVectorMember(t, v.Member)
		}
		if got := EncodeKey(key); !bytes.Equal(got, data) {
			t.Errorf("EncodeKey(%q, %d, %q) = %x, vector %s", v.Role, v.Kind, v.Member, got, v.Hex)
		}
		decoded, err := DecodeKey(data)
		if err != nil || decoded != key {
			t.Errorf("DecodeKey(%s) = %+v, %v; want %+v", v.Hex, decoded, err, key)
		}
	}
}

func TestVectorsReplayRegistrations(t *testing.T) {
	file := readVectors(t)
	if len(file.Registrations) == 0 {
		t.Fatal("no registration vectors")
	}
	for _, v := range file.Registrations {
		data := mustHex(t, v.Hex)
		registration := Registration{Member: mustVectorMember(t, v.Member), RegisteredAt: v.RegisteredAt}
		if got := EncodeRegistration(registration); !bytes.Equal(got, data) {
			t.Errorf("EncodeRegistration(%q, %d) = %x, vector %s", v.Member, v.RegisteredAt, got, v.Hex)
		}
		decoded, err := DecodeRegistration(data)
		if err != nil || decoded != registration {
			t.Errorf("DecodeRegistration(%s) = %+v, %v; want %+v", v.Hex, decoded, err, registration)
		}
	}
}

func TestVectorsReplayLeases(t *testing.T) {
	file := readVectors(t)
	if len(file.Leases) == 0 {
		t.Fatal("no lease vectors")
	}
	found36 := false
	for _, v := range file.Leases {
		data := mustHex(t, v.Hex)
		lease := Lease{Member: mustVectorMember(t, v.Member), Token: mustVectorToken(t, v.ProducerID, v.ProducerEpoch), GrantedAt: v.GrantedAt, Deadline: v.Deadline}
		if got := EncodeLease(lease); !bytes.Equal(got, data) {
			t.Errorf("EncodeLease(%+v) = %x, vector %s", v, got, v.Hex)
		}
		decoded, err := DecodeLease(data)
		if err != nil || decoded != lease {
			t.Errorf("DecodeLease(%s) = %+v, %v; want %+v", v.Hex, decoded, err, lease)
		}
		if v.Member == "node-1" && len(data) == 36 {
			found36 = true
		}
	}
	if !found36 {
		t.Error("no vector pins the 36-byte lease of node-1")
	}
}

func TestVectorsReplayHeartbeats(t *testing.T) {
	file := readVectors(t)
	if len(file.Heartbeats) == 0 {
		t.Fatal("no heartbeat vectors")
	}
	for _, v := range file.Heartbeats {
		data := mustHex(t, v.Hex)
		heartbeat := Heartbeat{Member: mustVectorMember(t, v.Member), SeenAt: v.SeenAt}
		if got := EncodeHeartbeat(heartbeat); !bytes.Equal(got, data) {
			t.Errorf("EncodeHeartbeat(%q, %d) = %x, vector %s", v.Member, v.SeenAt, got, v.Hex)
		}
		decoded, err := DecodeHeartbeat(data)
		if err != nil || decoded != heartbeat {
			t.Errorf("DecodeHeartbeat(%s) = %+v, %v; want %+v", v.Hex, decoded, err, heartbeat)
		}
	}
}

func TestVectorsReplayInvalid(t *testing.T) {
	file := readVectors(t)
	decoders := map[string]func([]byte) error{
		"key":                func(b []byte) error { _, err := DecodeKey(b); return err },
		"registration value": func(b []byte) error { _, err := DecodeRegistration(b); return err },
		"lease value":        func(b []byte) error { _, err := DecodeLease(b); return err },
		"heartbeat value":    func(b []byte) error { _, err := DecodeHeartbeat(b); return err },
	}
	parts := map[string]int{}
	for _, v := range file.Invalid {
		decode, ok := decoders[v.Part]
		if !ok {
			t.Errorf("invalid vector %q names the unknown part %q", v.What, v.Part)
			continue
		}
		parts[v.Part]++
		err := decode(mustHex(t, v.Hex))
		var formatError *FormatError
		if !errors.As(err, &formatError) || formatError.Part != v.Part {
			t.Errorf("%s %q (%s): error %v, want a *FormatError for the %s", v.Part, v.What, v.Hex, err, v.Part)
		}
	}
	for part := range decoders {
		if parts[part] == 0 {
			t.Errorf("no invalid vector for the %s", part)
		}
	}
}

func TestVectorsReplayPartitions(t *testing.T) {
	file := readVectors(t)
	kafka := map[string]int32{}
	for _, c := range kafkaMurmur2Cases {
		kafka[c.input] = c.want
	}
	var negative, nonASCII, long int
	for _, v := range file.Partitions {
		role := mustVectorRole(t, v.Role)
		if got := murmur2([]byte(v.Role)); got != v.Murmur2 {
			t.Errorf("murmur2(%q) = %d, vector %d", v.Role, got, v.Murmur2)
		}
		if want, ok := kafka[v.Role]; ok && v.Murmur2 != want {
			t.Errorf("vector murmur2(%q) = %d, Kafka's UtilsTest says %d", v.Role, v.Murmur2, want)
		}
		delete(kafka, v.Role)
		if v.Positive != v.Murmur2&0x7fffffff {
			t.Errorf("vector %q: positive %d is not murmur2 & 0x7fffffff", v.Role, v.Positive)
		}
		if len(v.Partitions) != len(vectorPartitionCounts) {
			t.Errorf("vector %q has %d partition counts, want %v", v.Role, len(v.Partitions), vectorPartitionCounts)
		}
		for count, want := range v.Partitions {
			n, err := strconv.Atoi(count)
			if err != nil {
				t.Fatalf("vector %q: partition count %q: %v", v.Role, count, err)
			}
			if got, err := RolePartition(role, n); err != nil || got != want {
				t.Errorf("RolePartition(%q, %d) = %d, %v; vector %d", v.Role, n, got, err, want)
			}
		}
		if v.Murmur2 < 0 {
			negative++
		}
		if strings.ContainsFunc(v.Role, func(r rune) bool { return r > 127 }) {
			nonASCII++
		}
		if len(v.Role) == MaxRoleLen {
			long++
		}
	}
	if len(kafka) != 0 {
		t.Errorf("Kafka's murmur2 test strings missing from the vectors: %v", kafka)
	}
	if negative < 3 || nonASCII < 3 || long < 3 {
		t.Errorf("the partition vectors hold %d negative hashes, %d non-ASCII names, %d names of 249 bytes; want at least 3 of each", negative, nonASCII, long)
	}
}

// TestPartitionRolesFileListsTheVectorRoles keeps testdata/partition-roles.txt,
// the input of scripts/murmur2-vectors.sh in CI, equal to the roles of the
// partition vectors.
func TestPartitionRolesFileListsTheVectorRoles(t *testing.T) {
	file := readVectors(t)
	got, err := os.ReadFile(partitionRolesPath)
	if err != nil {
		t.Fatalf("%v (generate it with: go test ./coordination -run TestVectors -update)", err)
	}
	if want := partitionRolesText(file); !bytes.Equal(got, want) {
		t.Fatalf("%s does not list exactly the roles of %s, one a line; regenerate with -update", partitionRolesPath, vectorsPath)
	}
}

// javaMurmur2 is one element of the output of scripts/murmur2-vectors.sh.
type javaMurmur2 struct {
	Role       string         `json:"role"`
	Murmur2    int32          `json:"murmur2"`
	Positive   int32          `json:"positive"`
	Partitions map[string]int `json:"partitions"`
}

// TestPartitionVectorsMatchKafkaJava checks the partition vectors against
// Apache Kafka's own Java implementation, org.apache.kafka.common.utils.Utils,
// whose output scripts/murmur2-vectors.sh writes.
func TestPartitionVectorsMatchKafkaJava(t *testing.T) {
	path := os.Getenv("KRABKA_JAVA_MURMUR2")
	if path == "" {
		const how = "KRABKA_JAVA_MURMUR2 is unset: produce Kafka's own murmur2 vectors with\n" +
			"\tscripts/murmur2-vectors.sh < coordination/testdata/partition-roles.txt > /tmp/murmur2.json\n" +
			"and run the test with KRABKA_JAVA_MURMUR2=/tmp/murmur2.json (an absolute path)"
		if os.Getenv("CI") != "" {
			t.Fatal(how)
		}
		t.Skip(how)
	}
	if !filepath.IsAbs(path) {
		t.Logf("KRABKA_JAVA_MURMUR2=%s is relative: it is read from the package directory", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var java []javaMurmur2
	if err := json.Unmarshal(data, &java); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	file := readVectors(t)
	byRole := map[string]javaMurmur2{}
	for _, j := range java {
		byRole[j.Role] = j
	}
	if len(java) != len(file.Partitions) || len(byRole) != len(file.Partitions) {
		t.Errorf("%s holds %d roles (%d distinct), %s holds %d", path, len(java), len(byRole), vectorsPath, len(file.Partitions))
	}
	for _, v := range file.Partitions {
		j, ok := byRole[v.Role]
		if !ok {
			t.Errorf("the Java output has no role %q", v.Role)
			continue
		}
		if j.Murmur2 != v.Murmur2 || j.Positive != v.Positive {
			t.Errorf("role %q: Java murmur2 %d (positive %d), vector %d (positive %d)", v.Role, j.Murmur2, j.Positive, v.Murmur2, v.Positive)
		}
		for count, want := range v.Partitions {
			got, ok := j.Partitions[count]
			if !ok {
				t.Errorf("role %q: the Java output has no partition count %s", v.Role, count)
				continue
			}
			if got != want {
				t.Errorf("role %q, %s partitions: Java %d, vector %d", v.Role, count, got, want)
			}
		}
		role := mustVectorRole(t, v.Role)
		for count, want := range j.Partitions {
			n, err := strconv.Atoi(count)
			if err != nil {
				t.Fatalf("Java partition count %q: %v", count, err)
			}
			if got, err := RolePartition(role, n); err != nil || got != want {
				t.Errorf("RolePartition(%q, %d) = %d, %v; Java says %d", v.Role, n, got, err, want)
			}
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
