package coordinationtest_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

func mustRole(t testing.TB, name string) coordination.Role {
	t.Helper()
	role, err := coordination.NewRole(name)
	if err != nil {
		t.Fatalf("NewRole(%q): %v", name, err)
	}
	return role
}

func mustToken(t testing.TB, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	token, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatalf("NewFencingToken(%d, %d): %v", id, epoch, err)
	}
	return token
}

func acquire(t testing.TB, transport *coordinationtest.Transport, role coordination.Role) coordination.FencingToken {
	t.Helper()
	token, err := transport.AcquireEpoch(context.Background(), role)
	if err != nil {
		t.Fatalf("%s: AcquireEpoch(%s): %v", transport.Member(), role, err)
	}
	return token
}

var (
	stateTP    = coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 3}
	commandsTP = coordination.TopicPartition{Topic: "commands", Partition: 0}
)

func TestMintFirstTakesFreshProducerIDThenBumpsEpoch(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a, b := cluster.Transport("a"), cluster.Transport("b")
	controller, scheduler := mustRole(t, "controller"), mustRole(t, "scheduler")

	if got := cluster.Token(controller); got != coordination.NoEpoch {
		t.Fatalf("Token of a role never minted = %s, want NoEpoch", got)
	}
	steps := []struct {
		transport *coordinationtest.Transport
		role      coordination.Role
		want      coordination.FencingToken
	}{
		{a, controller, mustToken(t, coordinationtest.FirstProducerID, 0)},
		{b, controller, mustToken(t, coordinationtest.FirstProducerID, 1)},
		{a, scheduler, mustToken(t, coordinationtest.FirstProducerID+1, 0)},
		{a, controller, mustToken(t, coordinationtest.FirstProducerID, 2)},
	}
	for i, step := range steps {
		got := acquire(t, step.transport, step.role)
		if got != step.want {
			t.Fatalf("step %d: %s AcquireEpoch(%s) = %s, want %s", i, step.transport.Member(), step.role, got, step.want)
		}
		if token := cluster.Token(step.role); token != step.want {
			t.Fatalf("step %d: Token(%s) = %s, want %s", i, step.role, token, step.want)
		}
	}
}

func TestDescribeEpoch(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	role := mustRole(t, "controller")
	ctx := context.Background()

	token, held, err := a.DescribeEpoch(ctx, role)
	if err != nil || held || token != coordination.NoEpoch {
		t.Fatalf("DescribeEpoch of a role never minted = %s, %t, %v; want NoEpoch, false, nil", token, held, err)
	}
	minted := acquire(t, cluster.Transport("b"), role)
	token, held, err = a.DescribeEpoch(ctx, role)
	if err != nil || !held || token != minted {
		t.Fatalf("DescribeEpoch after a mint = %s, %t, %v; want %s, true, nil", token, held, err, minted)
	}
	if a.Calls(coordinationtest.OpAcquireEpoch) != 0 {
		t.Fatalf("DescribeEpoch counted as AcquireEpoch")
	}
}

func TestExhaustedEpochTakesFreshProducerID(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a, b := cluster.Transport("a"), cluster.Transport("b")
	role := mustRole(t, "controller")
	ctx := context.Background()

	old := acquire(t, a, role)
	exhausted := cluster.ExhaustEpoch(role)
	if want := mustToken(t, old.ProducerID(), math.MaxInt16); exhausted != want {
		t.Fatalf("ExhaustEpoch = %s, want %s", exhausted, want)
	}
	if err := a.WriteLease(ctx, stateTP, old, []byte("k"), []byte("v")); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("write under %s after ExhaustEpoch: %v, want ErrFenced", old, err)
	}
	fresh := acquire(t, b, role)
	if want := mustToken(t, old.ProducerID()+1, 0); fresh != want {
		t.Fatalf("mint after exhaustion = %s, want %s", fresh, want)
	}
	if !fresh.Supersedes(exhausted) || fresh.ProducerEpoch() > exhausted.ProducerEpoch() {
		t.Fatalf("fresh %s must supersede %s by producer id alone", fresh, exhausted)
	}
	if err := b.WriteLease(ctx, stateTP, fresh, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("write under the fresh token: %v", err)
	}

	other := mustRole(t, "never-minted")
	if got := cluster.ExhaustEpoch(other); got.ProducerID() != old.ProducerID()+2 || got.ProducerEpoch() != math.MaxInt16 {
		t.Fatalf("ExhaustEpoch of a role never minted = %s, want a fresh producer id at epoch %d", got, math.MaxInt16)
	}
}

// TestEpochExhaustsByMinting walks a role through every epoch of one
// producer id, so the wrap does not rest on ExhaustEpoch alone.
func TestEpochExhaustsByMinting(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	role := mustRole(t, "controller")
	var last coordination.FencingToken
	for range math.MaxInt16 + 1 {
		last = acquire(t, a, role)
	}
	if want := mustToken(t, coordinationtest.FirstProducerID, math.MaxInt16); last != want {
		t.Fatalf("mint %d = %s, want %s", math.MaxInt16+1, last, want)
	}
	if got, want := acquire(t, a, role), mustToken(t, coordinationtest.FirstProducerID+1, 0); got != want {
		t.Fatalf("mint after the last epoch = %s, want %s", got, want)
	}
}

func TestOffsetsPerPartitionFromZero(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	other := coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 4}
	for i, tp := range []coordination.TopicPartition{stateTP, stateTP, other, stateTP, other} {
		if err := a.Append(ctx, tp, []byte{byte(i)}, []byte{byte(i)}); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	check := func(tp coordination.TopicPartition, wantKeys ...byte) {
		t.Helper()
		records := cluster.Records(tp)
		if len(records) != len(wantKeys) {
			t.Fatalf("Records(%s) holds %d records, want %d", tp, len(records), len(wantKeys))
		}
		for i, record := range records {
			if record.Offset != int64(i) || record.Key[0] != wantKeys[i] {
				t.Fatalf("Records(%s)[%d] = offset %d key %v, want offset %d key %d", tp, i, record.Offset, record.Key, i, wantKeys[i])
			}
		}
		if got := cluster.EndOffset(tp); got != int64(len(wantKeys)) {
			t.Fatalf("EndOffset(%s) = %d, want %d", tp, got, len(wantKeys))
		}
	}
	check(stateTP, 0, 1, 3)
	check(other, 2, 4)
	if got := cluster.Records(commandsTP); len(got) != 0 {
		t.Fatalf("Records of a partition nothing wrote = %v, want none", got)
	}
	got, err := a.ReadPartition(ctx, commandsTP)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadPartition of a partition nothing wrote = %v, %v; want none, nil", got, err)
	}
}

func TestRecordsAreCopiedOnWriteAndRead(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	key, value := []byte("key"), []byte("value")
	if err := a.Append(ctx, stateTP, key, value); err != nil {
		t.Fatal(err)
	}
	key[0], value[0] = 'X', 'X'

	read, err := a.ReadPartition(ctx, stateTP)
	if err != nil {
		t.Fatal(err)
	}
	read[0].Key[1], read[0].Value[1] = 'Y', 'Y'
	cluster.Records(stateTP)[0].Key[2] = 'Z'
	cluster.Entries(stateTP)[0].Value[2] = 'Z'

	again := cluster.Records(stateTP)
	if string(again[0].Key) != "key" || string(again[0].Value) != "value" {
		t.Fatalf("the log holds %q=%q, want key=value: a caller's slice reached it", again[0].Key, again[0].Value)
	}
}

func TestTombstones(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	role := mustRole(t, "controller")
	token := acquire(t, a, role)
	if err := a.Append(ctx, stateTP, []byte("k"), nil); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteLease(ctx, stateTP, token, []byte("lease"), nil); err != nil {
		t.Fatal(err)
	}
	for _, record := range cluster.Records(stateTP) {
		if record.Value != nil || !coordination.IsTombstone(record.Value) {
			t.Fatalf("record at offset %d has value %v, want a nil tombstone", record.Offset, record.Value)
		}
	}
}

func TestCompact(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	writes := []struct {
		key, value []byte
	}{
		{[]byte("a"), []byte("a0")}, // 0: superseded by 3
		{[]byte("b"), []byte("b1")}, // 1: kept
		{[]byte("c"), []byte("c2")}, // 2: superseded by the tombstone at 4
		{[]byte("a"), []byte("a3")}, // 3: kept
		{[]byte("c"), nil},          // 4: a tombstone, dropped
		{nil, []byte("n5")},         // 5: no key, kept
		{[]byte("d"), []byte{}},     // 6: an empty value is a tombstone too
	}
	for _, w := range writes {
		if err := a.Append(ctx, stateTP, w.key, w.value); err != nil {
			t.Fatal(err)
		}
	}
	cluster.Compact(stateTP)
	cluster.Compact(commandsTP) // nothing there: no effect, no panic

	var offsets []int64
	for _, record := range cluster.Records(stateTP) {
		offsets = append(offsets, record.Offset)
	}
	if want := []int64{1, 3, 5}; !equalOffsets(offsets, want) {
		t.Fatalf("offsets after Compact = %v, want %v", offsets, want)
	}
	if got := cluster.EndOffset(stateTP); got != 7 {
		t.Fatalf("EndOffset after Compact = %d, want 7", got)
	}
	if err := a.Append(ctx, stateTP, []byte("e"), []byte("e7")); err != nil {
		t.Fatal(err)
	}
	records, next, err := a.ReadPartitionFrom(ctx, stateTP, 2)
	if err != nil {
		t.Fatal(err)
	}
	offsets = offsets[:0]
	for _, record := range records {
		offsets = append(offsets, record.Offset)
	}
	if want := []int64{3, 5, 7}; !equalOffsets(offsets, want) || next != 8 {
		t.Fatalf("ReadPartitionFrom(2) after Compact = offsets %v next %d, want %v next 8", offsets, next, want)
	}
}

func equalOffsets(got, want []int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestReadPartitionFrom(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	records, next, err := a.ReadPartitionFrom(ctx, stateTP, 0)
	if err != nil || len(records) != 0 || next != 0 {
		t.Fatalf("ReadPartitionFrom(0) of an empty partition = %d records, next %d, %v; want 0, 0, nil", len(records), next, err)
	}
	for i := range 3 {
		if err := a.Append(ctx, stateTP, []byte{byte(i)}, []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		from      int64
		wantCount int
		wantErr   bool
	}{
		{0, 3, false},
		{2, 1, false},
		{3, 0, false},
		{4, 0, true},
		{-1, 0, true},
	} {
		records, next, err := a.ReadPartitionFrom(ctx, stateTP, tc.from)
		if (err != nil) != tc.wantErr {
			t.Fatalf("ReadPartitionFrom(%d) error = %v, want error %t", tc.from, err, tc.wantErr)
		}
		if tc.wantErr {
			continue
		}
		if len(records) != tc.wantCount || next != 3 {
			t.Fatalf("ReadPartitionFrom(%d) = %d records, next %d; want %d, 3", tc.from, len(records), next, tc.wantCount)
		}
		if len(records) > 0 && records[0].Offset != tc.from {
			t.Fatalf("ReadPartitionFrom(%d) starts at offset %d", tc.from, records[0].Offset)
		}
	}
}

func TestWatchPartition(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a, b := cluster.Transport("a"), cluster.Transport("b")
	ctx := context.Background()
	changed, stop := a.WatchPartition(stateTP)
	if got := cluster.Watchers(stateTP); got != 1 {
		t.Fatalf("Watchers = %d, want 1", got)
	}
	pending := func() bool {
		select {
		case <-changed:
			return true
		default:
			return false
		}
	}
	if pending() {
		t.Fatal("a new subscription has a pending wake-up")
	}
	if err := b.Append(ctx, commandsTP, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if pending() {
		t.Fatal("an append to another partition woke the watcher")
	}
	for range 2 {
		if err := b.Append(ctx, stateTP, []byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if !pending() {
		t.Fatal("an append by another member did not wake the watcher")
	}
	if pending() {
		t.Fatal("two appends left two wake-ups: the channel holds at most one")
	}
	token := acquire(t, b, mustRole(t, "controller"))
	if err := b.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if !pending() {
		t.Fatal("a lease write did not wake the watcher")
	}
	stop()
	stop()
	if got := cluster.Watchers(stateTP); got != 0 {
		t.Fatalf("Watchers after stop = %d, want 0", got)
	}
	if err := b.Append(ctx, stateTP, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if pending() {
		t.Fatal("a stopped subscription was woken")
	}
}

// TestWritesUnderConcurrentMintsKeepTokenOrder checks the property that the
// loop's safety rests on: a write lands only under the newest token, so the
// tokens in the log never go down, however mints and writes interleave.
func TestWritesUnderConcurrentMintsKeepTokenOrder(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	role := mustRole(t, "controller")
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		transport := cluster.Transport(string(rune('a' + i)))
		wg.Go(func() {
			for range 50 {
				token, err := transport.AcquireEpoch(ctx, role)
				if err != nil {
					t.Error(err)
					return
				}
				for range 3 {
					err := transport.WriteLease(ctx, stateTP, token, []byte("lease"), []byte(token.String()))
					if err != nil && !errors.Is(err, coordination.ErrFenced) {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	entries := cluster.Entries(stateTP)
	for i := 1; i < len(entries); i++ {
		if entries[i].Token.Compare(entries[i-1].Token) < 0 {
			t.Fatalf("entry %d under %s follows entry %d under %s", i, entries[i].Token, i-1, entries[i-1].Token)
		}
		if !bytes.Equal(entries[i].Value, []byte(entries[i].Token.String())) {
			t.Fatalf("entry %d holds %q, written under %s", i, entries[i].Value, entries[i].Token)
		}
	}
	if got, want := cluster.Token(role), mustToken(t, coordinationtest.FirstProducerID, 8*50-1); got != want {
		t.Fatalf("Token after 400 mints = %s, want %s", got, want)
	}
}
