package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// FoldLog builds a state partition of size records: size-4 registrations
// of a dummy role, then three registrations and a lease of role.
func FoldLog(role coordination.Role, size int) []coordination.StateRecord {
	dummy := mustRole("bench-dummy")
	records := make([]coordination.StateRecord, 0, size)
	now := time.Now().UnixMilli()
	for i := range max(size-4, 0) {
		member := mustMember(fmt.Sprintf("dummy-%08d", i))
		records = append(records, coordination.StateRecord{
			Offset: int64(len(records)),
			Key:    coordination.EncodeKey(coordination.RegistrationKey(dummy, member)),
			Value:  coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: now}),
		})
	}
	for _, name := range []string{"a", "b", "c"} {
		member := mustMember(name)
		records = append(records, coordination.StateRecord{
			Offset: int64(len(records)),
			Key:    coordination.EncodeKey(coordination.RegistrationKey(role, member)),
			Value:  coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: now}),
		})
	}
	records = append(records, LeaseRecord(role, int64(len(records)), now))
	return records
}

// LeaseRecord is a renewal by member "a" at offset.
func LeaseRecord(role coordination.Role, offset, now int64) coordination.StateRecord {
	token, _ := coordination.NewFencingToken(1, 0)
	lease := coordination.DefaultLeaseConfig().Grant(mustMember("a"), token, now)
	return coordination.StateRecord{
		Offset: offset,
		Key:    coordination.EncodeKey(coordination.LeaseKey(role)),
		Value:  coordination.EncodeLease(lease),
	}
}

// FoldCost returns the cost in microseconds of one evaluation of the role
// state of a standby after one new record (a renewal) lands in a partition
// of size records: incrementally (RoleStateBuilder.Apply of the new record,
// Build, Evaluate), and by a full rebuild (BuildRoleState over the whole
// partition, Evaluate), as a poll from offset 0 does.
func FoldCost(size int) (incremental, full float64) {
	role := mustRole("bench-fold")
	standby := mustMember("b")
	config := coordination.DefaultLeaseConfig()
	log := FoldLog(role, size)
	now := time.Now().UnixMilli()
	inc := testing.Benchmark(func(b *testing.B) {
		builder := coordination.NewRoleStateBuilder(role)
		for _, r := range log {
			_ = builder.Apply(r)
		}
		next := int64(len(log))
		b.ResetTimer()
		for range b.N {
			_ = builder.Apply(LeaseRecord(role, next, now))
			next++
			_ = coordination.Evaluate(builder.Build(), standby, now, config)
		}
	})
	fullRun := testing.Benchmark(func(b *testing.B) {
		records := append(log, LeaseRecord(role, int64(len(log)), now))
		b.ResetTimer()
		for range b.N {
			state, _ := coordination.BuildRoleState(role, records)
			_ = coordination.Evaluate(state, standby, now, config)
		}
	})
	return float64(inc.NsPerOp()) / 1000, float64(fullRun.NsPerOp()) / 1000
}
