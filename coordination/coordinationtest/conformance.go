package coordinationtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// ConformanceTarget is a cluster that [TestTransport] runs its suite on.
type ConformanceTarget struct {
	// NewTransport opens a transport of a new member process on the
	// cluster, as a restarted process opens a new client. The target
	// closes it when the test ends (t.Cleanup). Required.
	NewTransport func(t *testing.T) coordination.Transport

	// Options name the state topic of the suite ([coordination.WithTopic],
	// [coordination.WithPartitions]): a compacted topic that exists, with
	// the partition count given. The suite writes only the records of
	// roles with random names to it, so a topic shared with other tests
	// does.
	Options []coordination.Option

	// GuardedTopic is an existing topic that the suite writes guarded
	// records to. Required for a transport of the whole
	// [coordination.ExtendedTransport].
	GuardedTopic string

	// StallNextMint, when set, makes the next mint request of role that
	// transport sends wait for the coordinator once (over Kafka: answered
	// CONCURRENT_TRANSACTIONS), so that the mint sends it again: the case
	// in which AcquireEpochUnless must refuse to mint over a rival. Nil for
	// a target that cannot stall a mint: the suite then checks only that
	// AcquireEpochUnless mints or refuses without minting.
	StallNextMint func(t *testing.T, transport coordination.Transport, role coordination.Role)

	// LoseNextMintReply, when set, makes the next mint request of role that
	// transport sends take effect at the coordinator while its caller gets
	// no answer within a second (a lost reply, or one that arrives later):
	// the late mint that LateMint reports. Nil: the suite does not check a
	// late mint.
	LoseNextMintReply func(t *testing.T, transport coordination.Transport, role coordination.Role)

	// Timeout bounds each call of the suite; 30 s when zero.
	Timeout time.Duration
}

// TestTransport runs the conformance suite of the transport contract on
// target, each check as a subtest: the four interfaces of
// [coordination.Transport] (mint, fence and describe of an epoch; appends,
// tombstones and reads in offset order; a lease key refused by Append;
// WriteLease refused under a fenced token or for another role), and, when
// the transport implements [coordination.ExtendedTransport], every method
// of it. It is the one suite that an adapter over another client passes;
// package coordination runs it over [coordination.KafkaTransport] (on
// kfake and on a real broker) and this package's [Transport]. Each check:
// see the package doc's section "The conformance suite".
//
// It fails t with a message that names the call and what differed.
func TestTransport(t *testing.T, target ConformanceTarget) {
	t.Helper()
	if target.NewTransport == nil {
		t.Fatal("coordinationtest.TestTransport: ConformanceTarget.NewTransport is nil")
	}
	s := &suite{target: target}
	if s.target.Timeout <= 0 {
		s.target.Timeout = 30 * time.Second
	}
	t.Run("MintAndDescribe", s.mintAndDescribe)
	t.Run("DescribeUnknownRole", s.describeUnknownRole)
	t.Run("AppendAndRead", s.appendAndRead)
	t.Run("AppendRefusesALeaseKey", s.appendRefusesALeaseKey)
	t.Run("WriteLease", s.writeLease)
	t.Run("WriteLeaseRefusesAnotherRolesKey", s.writeLeaseRefusesAnotherRolesKey)
	if _, ok := target.NewTransport(t).(coordination.ExtendedTransport); !ok {
		return // a transport of the specification's four interfaces
	}
	t.Run("ReadPartitionFrom", s.readPartitionFrom)
	t.Run("ReadRolesFrom", s.readRolesFrom)
	t.Run("WriteGuarded", s.writeGuarded)
	s.runExtended(t) // conformance_extended.go
}

// suite holds the target of one TestTransport run.
type suite struct{ target ConformanceTarget }

// extended returns transport as the [coordination.ExtendedTransport] that
// TestTransport found it to be.
func (s *suite) extended(t *testing.T, transport coordination.Transport) coordination.ExtendedTransport {
	t.Helper()
	extended, ok := transport.(coordination.ExtendedTransport)
	if !ok {
		t.Fatalf("NewTransport returned %T, no ExtendedTransport, after an ExtendedTransport", transport)
	}
	return extended
}

// ctx returns the context of one call.
func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.target.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// role returns a role with a random name: transactional ids are global to
// a cluster, and other tests may share it.
func (s *suite) role(t *testing.T) (coordination.Role, coordination.TopicPartition) {
	t.Helper()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	role, err := coordination.NewRole("conformance-" + hex.EncodeToString(suffix))
	if err != nil {
		t.Fatalf("NewRole: %v", err)
	}
	partition, err := coordination.RoleTopicPartition(role, s.target.Options...)
	if err != nil {
		t.Fatalf("RoleTopicPartition(%s): %v", role, err)
	}
	return role, partition
}

// member returns a member id.
func member(t *testing.T, name string) coordination.MemberID {
	t.Helper()
	id, err := coordination.NewMemberID(name)
	if err != nil {
		t.Fatalf("NewMemberID(%s): %v", name, err)
	}
	return id
}

// records reads the records of role in the partition.
func (s *suite) records(t *testing.T, transport coordination.Transport, role coordination.Role, partition coordination.TopicPartition) []coordination.StateRecord {
	t.Helper()
	all, err := transport.ReadPartition(s.ctx(t), partition)
	if err != nil {
		t.Fatalf("ReadPartition(%s): %v", partition, err)
	}
	var mine []coordination.StateRecord
	for _, record := range all {
		if key, err := coordination.DecodeKey(record.Key); err == nil && key.Role == role {
			mine = append(mine, record)
		}
	}
	for i := 1; i < len(all); i++ {
		if all[i].Offset <= all[i-1].Offset {
			t.Fatalf("ReadPartition(%s): offset %d after offset %d; want the records oldest first", partition, all[i].Offset, all[i-1].Offset)
		}
	}
	return mine
}

// mint mints an epoch of role on transport.
func (s *suite) mint(t *testing.T, transport coordination.Transport, role coordination.Role) coordination.FencingToken {
	t.Helper()
	token, err := transport.AcquireEpoch(s.ctx(t), role)
	if err != nil {
		t.Fatalf("AcquireEpoch(%s): %v", role, err)
	}
	if token == coordination.NoEpoch {
		t.Fatalf("AcquireEpoch(%s) = NoEpoch with no error", role)
	}
	return token
}

// lease encodes a lease of role for holder under token.
func lease(t *testing.T, holder string, token coordination.FencingToken) []byte {
	return coordination.EncodeLease(coordination.Lease{
		Member:    member(t, holder),
		Token:     token,
		GrantedAt: time.Now().UnixMilli(),
		Deadline:  time.Now().Add(time.Minute).UnixMilli(),
	})
}

func (s *suite) mintAndDescribe(t *testing.T) {
	first, second := s.target.NewTransport(t), s.target.NewTransport(t)
	role, _ := s.role(t)
	token := s.mint(t, first, role)
	described, held, err := first.DescribeEpoch(s.ctx(t), role)
	if err != nil || !held || described != token {
		t.Fatalf("DescribeEpoch after the mint of %s = %s, %t, %v; want %s, true, nil", token, described, held, err, token)
	}
	newer := s.mint(t, second, role)
	if newer == token {
		t.Fatalf("a second AcquireEpoch of %s returned the first token %s again", role, token)
	}
	described, held, err = second.DescribeEpoch(s.ctx(t), role)
	if err != nil || !held || described != newer {
		t.Fatalf("DescribeEpoch after the second mint = %s, %t, %v; want %s, true, nil", described, held, err, newer)
	}
	status, err := coordination.DescribeLeadership(s.ctx(t), first, role)
	if err != nil {
		t.Fatalf("DescribeLeadership: %v", err)
	}
	if status.Authoritative(token) || !status.Authoritative(newer) {
		t.Fatalf("DescribeLeadership = %v; want %s authoritative and the fenced %s not", status, newer, token)
	}
}

func (s *suite) describeUnknownRole(t *testing.T) {
	transport := s.target.NewTransport(t)
	role, _ := s.role(t)
	token, held, err := transport.DescribeEpoch(s.ctx(t), role)
	if err != nil || held || token != coordination.NoEpoch {
		t.Fatalf("DescribeEpoch of a role nobody took = %s, %t, %v; want NoEpoch, false, nil", token, held, err)
	}
}

func (s *suite) appendAndRead(t *testing.T) {
	transport := s.target.NewTransport(t)
	role, partition := s.role(t)
	registration := func(name string) []byte {
		return coordination.EncodeRegistration(coordination.Registration{Member: member(t, name), RegisteredAt: time.Now().UnixMilli()})
	}
	for _, name := range []string{"a", "b"} {
		key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, name)))
		if err := transport.Append(s.ctx(t), partition, key, registration(name)); err != nil {
			t.Fatalf("Append of the registration of %s: %v", name, err)
		}
	}
	tombstone := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, "a")))
	if err := transport.Append(s.ctx(t), partition, tombstone, nil); err != nil {
		t.Fatalf("Append of a tombstone: %v", err)
	}
	// A reader may return the log as compaction leaves it: the newest
	// record of each key at least, in offset order.
	records := s.records(t, transport, role, partition)
	newestOfA := -1
	for i, record := range records {
		if string(record.Key) == string(tombstone) {
			newestOfA = i
		}
	}
	if newestOfA < 0 || !coordination.IsTombstone(records[newestOfA].Value) {
		t.Fatalf("ReadPartition: the newest record of a's registration key is not the tombstone appended last")
	}
	state, err := coordination.BuildRoleState(role, records)
	if err != nil {
		t.Fatalf("BuildRoleState: %v", err)
	}
	if len(state.Roster) != 1 || state.Roster[0].Member != member(t, "b") {
		t.Fatalf("the roster after a, b and a's tombstone = %+v; want b alone", state.Roster)
	}
}

func (s *suite) appendRefusesALeaseKey(t *testing.T) {
	transport := s.target.NewTransport(t)
	role, partition := s.role(t)
	key := coordination.EncodeKey(coordination.LeaseKey(role))
	token, err := coordination.NewFencingToken(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := transport.Append(s.ctx(t), partition, key, lease(t, "forger", token)); err == nil {
		t.Fatalf("Append of a lease record outside a transaction succeeded; want a refusal")
	}
	if records := s.records(t, transport, role, partition); len(records) != 0 {
		t.Fatalf("a refused Append of a lease key left %d records", len(records))
	}
}

func (s *suite) writeLease(t *testing.T) {
	holder, rival := s.target.NewTransport(t), s.target.NewTransport(t)
	role, partition := s.role(t)
	key := coordination.EncodeKey(coordination.LeaseKey(role))
	token := s.mint(t, holder, role)
	if err := holder.WriteLease(s.ctx(t), partition, token, key, lease(t, "holder", token)); err != nil {
		t.Fatalf("WriteLease under the newest token %s: %v", token, err)
	}
	newer := s.mint(t, rival, role)
	err := holder.WriteLease(s.ctx(t), partition, token, key, lease(t, "fenced", token))
	if !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("WriteLease under %s after the rival minted %s = %v; want an error that wraps ErrFenced", token, newer, err)
	}
	s.eventually(t, "the holder's lease is read", func() (bool, string) {
		state := s.state(t, holder, role, partition)
		return state.Lease != nil, "no lease"
	})
	if state := s.state(t, holder, role, partition); state.Lease.Member != member(t, "holder") {
		t.Fatalf("the lease after a fenced WriteLease = %+v; want the holder's, unchanged", state.Lease)
	}
	if err := rival.WriteLease(s.ctx(t), partition, newer, key, nil); err != nil {
		t.Fatalf("WriteLease of a tombstone under the newest token %s: %v", newer, err)
	}
	// A commit is visible to a read_committed reader once the coordinator
	// has written its markers, a moment after EndTxn returned.
	s.eventually(t, "the lease tombstone is read", func() (bool, string) {
		state := s.state(t, holder, role, partition)
		return state.Lease == nil, fmt.Sprintf("lease %+v", state.Lease)
	})
}

// eventually polls cond until it holds, and fails t when the suite's
// timeout passes first.
func (s *suite) eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(s.target.Timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s (last: %s)", s.target.Timeout, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// state folds the records of role in the partition.
func (s *suite) state(t *testing.T, transport coordination.Transport, role coordination.Role, partition coordination.TopicPartition) coordination.RoleState {
	t.Helper()
	state, err := coordination.BuildRoleState(role, s.records(t, transport, role, partition))
	if err != nil {
		t.Fatalf("BuildRoleState: %v", err)
	}
	return state
}

func (s *suite) writeLeaseRefusesAnotherRolesKey(t *testing.T) {
	transport := s.target.NewTransport(t)
	role, partition := s.role(t)
	other, _ := s.role(t)
	token := s.mint(t, transport, role)
	key := coordination.EncodeKey(coordination.LeaseKey(other))
	if err := transport.WriteLease(s.ctx(t), partition, token, key, lease(t, "holder", token)); err == nil {
		t.Fatalf("WriteLease of the lease key of %s under the token of %s succeeded; want a refusal", other, role)
	}
	if records := s.records(t, transport, other, partition); len(records) != 0 {
		t.Fatalf("a refused WriteLease left %d records of %s", len(records), other)
	}
}

func (s *suite) readPartitionFrom(t *testing.T) {
	transport := s.target.NewTransport(t)
	follower := s.extended(t, transport)
	role, partition := s.role(t)
	key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, "a")))
	value := coordination.EncodeRegistration(coordination.Registration{Member: member(t, "a"), RegisteredAt: time.Now().UnixMilli()})
	if err := transport.Append(s.ctx(t), partition, key, value); err != nil {
		t.Fatalf("Append: %v", err)
	}
	records := s.records(t, transport, role, partition)
	if len(records) != 1 {
		t.Fatalf("ReadPartition holds %d records of the role; want 1", len(records))
	}
	at := records[0].Offset
	got, next, err := follower.ReadPartitionFrom(s.ctx(t), partition, at)
	if err != nil {
		t.Fatalf("ReadPartitionFrom(%d): %v", at, err)
	}
	if len(got) == 0 || got[0].Offset != at || next <= at {
		t.Fatalf("ReadPartitionFrom(%d) = %d records from offset %v, next %d; want the record at %d first and next past it", at, len(got), offsets(got), next, at)
	}
	again, after, err := follower.ReadPartitionFrom(s.ctx(t), partition, next)
	if err != nil {
		t.Fatalf("ReadPartitionFrom(%d): %v", next, err)
	}
	for _, record := range again {
		if record.Offset < next {
			t.Fatalf("ReadPartitionFrom(%d) returned offset %d", next, record.Offset)
		}
	}
	if after < next {
		t.Fatalf("ReadPartitionFrom(%d) returned next %d; want no step back", next, after)
	}
}

func (s *suite) readRolesFrom(t *testing.T) {
	transport := s.target.NewTransport(t)
	follower := s.extended(t, transport)
	role, partition := s.role(t)
	other := s.roleOn(t, partition)
	register := func(role coordination.Role, name string, at int64) {
		t.Helper()
		key := coordination.EncodeKey(coordination.RegistrationKey(role, member(t, name)))
		value := coordination.EncodeRegistration(coordination.Registration{Member: member(t, name), RegisteredAt: at})
		if err := transport.Append(s.ctx(t), partition, key, value); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	register(role, "a", 1)
	register(other, "b", 2)
	register(role, "c", 3)
	_, stop := follower.WatchRoles(partition, role)
	defer stop()
	register(other, "d", 4)
	register(role, "a", 5) // supersedes a's first registration
	check := func(role coordination.Role) {
		t.Helper()
		want, _ := coordination.BuildRoleState(role, s.records(t, transport, role, partition))
		got, next, err := follower.ReadRolesFrom(s.ctx(t), partition, []coordination.Role{role}, 0)
		if err != nil {
			t.Fatalf("ReadRolesFrom(%s): %v", role, err)
		}
		for _, record := range got {
			if key, err := coordination.DecodeKey(record.Key); err != nil || key.Role != role {
				t.Fatalf("ReadRolesFrom(%s) returned the record at %d of another role (%v)", role, record.Offset, err)
			}
		}
		state, _ := coordination.BuildRoleState(role, got)
		if !reflect.DeepEqual(state, want) || len(state.Roster) != 2 {
			t.Fatalf("ReadRolesFrom(%s) folds to %+v; ReadPartition folds to %+v", role, state, want)
		}
		if next <= got[len(got)-1].Offset {
			t.Fatalf("ReadRolesFrom(%s) returned next %d; want past its last record at %d", role, next, got[len(got)-1].Offset)
		}
	}
	check(role)  // watched before its last records landed
	check(other) // never watched
}

// roleOn returns a role of another random name on partition.
func (s *suite) roleOn(t *testing.T, partition coordination.TopicPartition) coordination.Role {
	t.Helper()
	for range 100000 {
		role, p := s.role(t)
		if p == partition {
			return role
		}
	}
	t.Fatalf("no role of a random name on %s", partition)
	return coordination.Role{}
}

func (s *suite) writeGuarded(t *testing.T) {
	holder, rival := s.target.NewTransport(t), s.target.NewTransport(t)
	guarded := s.extended(t, holder)
	if s.target.GuardedTopic == "" {
		t.Fatal("ConformanceTarget.GuardedTopic is empty: the checks of WriteGuarded need a topic")
	}
	role, partition := s.role(t)
	token := s.mint(t, holder, role)
	// The transport learns the state topic by its first use of it.
	if _, err := holder.ReadPartition(s.ctx(t), partition); err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}
	record := []coordination.GuardedRecord{{Topic: s.target.GuardedTopic, Value: []byte("command")}}
	if err := guarded.WriteGuarded(s.ctx(t), token, record); err != nil {
		t.Fatalf("WriteGuarded under the newest token %s: %v", token, err)
	}
	state := []coordination.GuardedRecord{{Topic: partition.Topic, Partition: partition.Partition, Value: []byte("forged")}}
	if err := guarded.WriteGuarded(s.ctx(t), token, state); err == nil {
		t.Fatalf("WriteGuarded of a record for the state topic %s succeeded; want a refusal", partition.Topic)
	}
	newer := s.mint(t, rival, role)
	if err := guarded.WriteGuarded(s.ctx(t), token, record); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("WriteGuarded under %s after the rival minted %s = %v; want an error that wraps ErrFenced", token, newer, err)
	}
}

// offsets lists the offsets of records.
func offsets(records []coordination.StateRecord) []int64 {
	out := make([]int64, len(records))
	for i, record := range records {
		out[i] = record.Offset
	}
	return out
}
