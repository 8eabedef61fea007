package coordination

// Benchmarks of the evaluation of a role state as the log grows, and of the
// codec. They run without a broker:
//
//	go test -run '^$' -bench . -benchmem ./coordination/
//
// A standby evaluates its role once for each new record of its partition.
// BenchmarkEvaluateIncremental and BenchmarkCampaignRead must not grow with
// the log (O(new records)); BenchmarkEvaluateRebuild, the fold of the whole
// partition that a poll from offset 0 costs, does. cmd/krabka-bench reports
// the first two next to the Kafka and etcd figures (docs/performance.md).

import (
	"fmt"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

var benchSizes = []int{100, 10_000, 1_000_000}

// benchLog is a partition of size records: registrations of other roles,
// then three registrations and a lease of role.
func benchLog(b *testing.B, role Role, size int) []StateRecord {
	b.Helper()
	other := mustBenchRole(b, "other-role")
	now := time.Now().UnixMilli()
	records := make([]StateRecord, 0, size)
	for i := range max(size-4, 0) {
		member := mustBenchMember(b, fmt.Sprintf("member-%08d", i))
		records = append(records, StateRecord{
			Offset: int64(len(records)),
			Key:    EncodeKey(RegistrationKey(other, member)),
			Value:  EncodeRegistration(Registration{Member: member, RegisteredAt: now}),
		})
	}
	for _, name := range []string{"a", "b", "c"} {
		member := mustBenchMember(b, name)
		records = append(records, StateRecord{
			Offset: int64(len(records)),
			Key:    EncodeKey(RegistrationKey(role, member)),
			Value:  EncodeRegistration(Registration{Member: member, RegisteredAt: now}),
		})
	}
	return append(records, benchRenewal(b, role, int64(len(records)), now))
}

// benchRenewal is a renewal by member a at offset.
func benchRenewal(b *testing.B, role Role, offset, now int64) StateRecord {
	token, err := NewFencingToken(7, 0)
	if err != nil {
		b.Fatal(err)
	}
	lease := DefaultLeaseConfig().Grant(mustBenchMember(b, "a"), token, now)
	return StateRecord{Offset: offset, Key: EncodeKey(LeaseKey(role)), Value: EncodeLease(lease)}
}

func mustBenchRole(b *testing.B, name string) Role {
	role, err := NewRole(name)
	if err != nil {
		b.Fatal(err)
	}
	return role
}

func mustBenchMember(b *testing.B, name string) MemberID {
	member, err := NewMemberID(name)
	if err != nil {
		b.Fatal(err)
	}
	return member
}

// BenchmarkEvaluateIncremental: one new record (a renewal) folded into a
// builder that holds the whole partition, then Build and Evaluate, as a
// waiting member does on each wake-up.
func BenchmarkEvaluateIncremental(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("log=%d", size), func(b *testing.B) {
			role, standby := mustBenchRole(b, "bench"), mustBenchMember(b, "b")
			now := time.Now().UnixMilli()
			builder := NewRoleStateBuilder(role)
			for _, r := range benchLog(b, role, size) {
				if err := builder.Apply(r); err != nil {
					b.Fatal(err)
				}
			}
			next := int64(size)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := builder.Apply(benchRenewal(b, role, next, now)); err != nil {
					b.Fatal(err)
				}
				next++
				if d := Evaluate(builder.Build(), standby, now, DefaultLeaseConfig()); d.Action != ActionWait {
					b.Fatalf("decision %v; want wait", d.Action)
				}
			}
		})
	}
}

// BenchmarkEvaluateRebuild: the fold of the whole partition and Evaluate,
// the cost of a reader that polls from offset 0.
func BenchmarkEvaluateRebuild(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("log=%d", size), func(b *testing.B) {
			role, standby := mustBenchRole(b, "bench"), mustBenchMember(b, "b")
			now := time.Now().UnixMilli()
			records := benchLog(b, role, size)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				state, err := BuildRoleState(role, records)
				if err != nil {
					b.Fatal(err)
				}
				_ = Evaluate(state, standby, now, DefaultLeaseConfig())
			}
		})
	}
}

// BenchmarkCampaignRead is the incremental path of a waiting member over
// KafkaTransport, without the network: a fetched record lands in the
// reader's compacted view of the partition (kafkawire.View), the member's
// ReadPartitionFrom copies the records from its next offset on and
// converts them (stateRecords), and the campaign folds them into its
// builder, builds and evaluates.
func BenchmarkCampaignRead(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("log=%d", size), func(b *testing.B) {
			role, standby := mustBenchRole(b, "bench"), mustBenchMember(b, "b")
			now := time.Now().UnixMilli()
			var view kafkawire.View
			builder := NewRoleStateBuilder(role)
			for _, r := range benchLog(b, role, size) {
				view.Add(r.Offset, r.Key, r.Value, 0)
				if err := builder.Apply(r); err != nil {
					b.Fatal(err)
				}
			}
			end := int64(size) // the offset after the last record of the view
			next := end
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				renewal := benchRenewal(b, role, end, now)
				view.Add(renewal.Offset, renewal.Key, renewal.Value, 0)
				end++
				records := stateRecords(view.Records(next, nil))
				next = end
				for _, r := range records {
					if err := builder.Apply(r); err != nil {
						b.Fatal(err)
					}
				}
				if d := Evaluate(builder.Build(), standby, now, DefaultLeaseConfig()); d.Action != ActionWait {
					b.Fatalf("decision %v; want wait", d.Action)
				}
			}
		})
	}
}

// BenchmarkCodec encodes and decodes a lease key and value, the record of
// every renewal.
func BenchmarkCodec(b *testing.B) {
	role, member := mustBenchRole(b, "bench"), mustBenchMember(b, "node-1")
	token, err := NewFencingToken(7, 3)
	if err != nil {
		b.Fatal(err)
	}
	lease := DefaultLeaseConfig().Grant(member, token, time.Now().UnixMilli())
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = EncodeKey(LeaseKey(role))
			_ = EncodeLease(lease)
		}
	})
	key, value := EncodeKey(LeaseKey(role)), EncodeLease(lease)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := DecodeKey(key); err != nil {
				b.Fatal(err)
			}
			if _, err := DecodeLease(value); err != nil {
				b.Fatal(err)
			}
		}
	})
}
