package coordinationtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

func TestWriteLeaseFencesEveryTokenButTheNewest(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a, b := cluster.Transport("a"), cluster.Transport("b")
	role := mustRole(t, "controller")
	ctx := context.Background()

	first := acquire(t, a, role)
	if err := a.WriteLease(ctx, stateTP, first, []byte("lease"), []byte("a")); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	second := acquire(t, b, role)
	end := cluster.EndOffset(stateTP)

	cases := []struct {
		name      string
		transport *coordinationtest.Transport
		token     coordination.FencingToken
		wantText  string
	}{
		{"a deposed holder", a, first, "is not the current token"},
		{"the current token from a transport that did not mint it", a, second, "not minted by this transport"},
		{"an older token from the transport that holds the newest", b, first, "is not the current token"},
		{"NoEpoch", b, coordination.NoEpoch, "no role has producer id"},
		{"a forged epoch above the newest", b, mustToken(t, second.ProducerID(), second.ProducerEpoch()+1), "is not the current token"},
		{"a producer id never allocated", b, mustToken(t, 7, 0), "no role has producer id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.transport.WriteLease(ctx, stateTP, tc.token, []byte("lease"), []byte("x"))
			if !errors.Is(err, coordination.ErrFenced) || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("WriteLease = %v, want ErrFenced saying %q", err, tc.wantText)
			}
			err = tc.transport.WriteGuarded(ctx, tc.token, []coordination.GuardedRecord{{Topic: "commands", Value: []byte("x")}})
			if !errors.Is(err, coordination.ErrFenced) {
				t.Fatalf("WriteGuarded = %v, want ErrFenced", err)
			}
			if got := cluster.EndOffset(stateTP); got != end {
				t.Fatalf("a fenced write moved the end offset from %d to %d", end, got)
			}
			if got := cluster.Records(commandsTP); len(got) != 0 {
				t.Fatalf("a fenced guarded write left %d records", len(got))
			}
		})
	}
	if err := b.WriteLease(ctx, stateTP, second, []byte("lease"), []byte("b")); err != nil {
		t.Fatalf("the newest holder's write: %v", err)
	}
	if err := b.WriteLease(ctx, stateTP, second, []byte("lease"), nil); err != nil {
		t.Fatalf("the newest holder's tombstone: %v", err)
	}
}

func TestWriteGuardedIsAtomic(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	role := mustRole(t, "controller")
	ctx := context.Background()
	token := acquire(t, a, role)
	other := coordination.TopicPartition{Topic: "commands", Partition: 1}

	records := []coordination.GuardedRecord{
		{Topic: commandsTP.Topic, Partition: commandsTP.Partition, Key: []byte("k1"), Value: []byte("open")},
		{Topic: other.Topic, Partition: other.Partition, Key: []byte("k2"), Value: []byte("close")},
		{Topic: commandsTP.Topic, Partition: commandsTP.Partition, Value: []byte("vent")},
	}
	if err := a.WriteGuarded(ctx, token, records); err != nil {
		t.Fatal(err)
	}
	entries := cluster.Entries(commandsTP)
	if len(entries) != 2 || string(entries[0].Value) != "open" || string(entries[1].Value) != "vent" || entries[1].Offset != 1 {
		t.Fatalf("Entries(%s) = %+v, want open at 0 and vent at 1", commandsTP, entries)
	}
	for _, entry := range append(entries, cluster.Entries(other)...) {
		if entry.Token != token || entry.Writer != "a" {
			t.Fatalf("entry %+v, want token %s and writer a", entry, token)
		}
	}

	for _, bad := range []coordination.GuardedRecord{
		{Topic: "", Value: []byte("x")},
		{Topic: coordination.StateTopic, Value: []byte("x")},
		{Topic: "commands", Partition: -1, Value: []byte("x")},
	} {
		batch := []coordination.GuardedRecord{{Topic: "commands", Value: []byte("first")}, bad}
		if err := a.WriteGuarded(ctx, token, batch); err == nil || errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("WriteGuarded with %+v = %v, want an error that is not a fence", bad, err)
		}
		if got := len(cluster.Entries(commandsTP)); got != 2 {
			t.Fatalf("a rejected batch left records: %d in %s, want 2", got, commandsTP)
		}
	}
	if err := a.WriteGuarded(ctx, token, nil); err != nil {
		t.Fatalf("an empty batch under the newest token: %v", err)
	}
	acquire(t, cluster.Transport("b"), role)
	if err := a.WriteGuarded(ctx, token, nil); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("an empty batch under a deposed token = %v, want ErrFenced", err)
	}
}

func TestEntriesNameTheWriter(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	token := acquire(t, a, mustRole(t, "controller"))
	if err := a.Append(ctx, stateTP, []byte("registration"), []byte("r")); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("l")); err != nil {
		t.Fatal(err)
	}
	entries := cluster.Entries(stateTP)
	if entries[0].Token != coordination.NoEpoch || entries[1].Token != token {
		t.Fatalf("tokens = %s, %s; want NoEpoch for the append and %s for the lease", entries[0].Token, entries[1].Token, token)
	}
	if entries[0].Writer != "a" || entries[1].Writer != "a" {
		t.Fatalf("writers = %q, %q; want a, a", entries[0].Writer, entries[1].Writer)
	}
}

func TestInvalidArguments(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	if _, err := a.AcquireEpoch(ctx, coordination.Role{}); err == nil {
		t.Error("AcquireEpoch of the zero Role succeeded")
	}
	for _, tp := range []coordination.TopicPartition{{Topic: ""}, {Topic: "t", Partition: -1}} {
		if err := a.Append(ctx, tp, []byte("k"), []byte("v")); err == nil {
			t.Errorf("Append to %+v succeeded", tp)
		}
		if _, err := a.ReadPartition(ctx, tp); err == nil {
			t.Errorf("ReadPartition of %+v succeeded", tp)
		}
	}
}

func TestTransportsAreIndependentClients(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	role := mustRole(t, "controller")
	ctx := context.Background()
	first := cluster.Transport("node-1")
	token := acquire(t, first, role)
	restarted := cluster.Transport("node-1")
	if err := restarted.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("a new client of the same member wrote under the old client's token: %v", err)
	}
	if restarted.Calls(coordinationtest.OpWriteLease) != 1 || first.Calls(coordinationtest.OpWriteLease) != 0 {
		t.Fatal("calls counted on the wrong transport")
	}
}

func TestPlainHidesTheOptionalInterfaces(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	plain := coordinationtest.Plain(a)
	if _, ok := plain.(coordination.ExtendedTransport); ok {
		t.Error("Plain implements ExtendedTransport")
	}
	ctx := context.Background()
	token, err := plain.AcquireEpoch(ctx, mustRole(t, "controller"))
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")); err != nil {
		t.Fatalf("a write through Plain under the token it minted: %v", err)
	}
	if err := plain.Append(ctx, stateTP, []byte("r"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if records, err := plain.ReadPartition(ctx, stateTP); err != nil || len(records) != 2 {
		t.Fatalf("ReadPartition through Plain = %d records, %v; want 2", len(records), err)
	}
	for op, want := range map[coordinationtest.Op]int{
		coordinationtest.OpAcquireEpoch:  1,
		coordinationtest.OpWriteLease:    1,
		coordinationtest.OpAppend:        1,
		coordinationtest.OpReadPartition: 1,
	} {
		if got := a.Calls(op); got != want {
			t.Errorf("Calls(%s) through Plain = %d, want %d", op, got, want)
		}
	}
}

// TestWriteGuardedKeepsHeaders: the headers of a guarded record reach the
// log in order, as copies.
func TestWriteGuardedKeepsHeaders(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	token := acquire(t, a, mustRole(t, "controller"))
	headers := []coordination.RecordHeader{{Key: "trace-id", Value: []byte("4bf92f35")}, {Key: "content-type", Value: []byte("application/json")}, {Key: "trace-id", Value: nil}}
	if err := a.WriteGuarded(context.Background(), token, []coordination.GuardedRecord{{Topic: commandsTP.Topic, Value: []byte("open"), Headers: headers}}); err != nil {
		t.Fatal(err)
	}
	headers[0].Value[0] = 'X' // the log keeps its own copy
	entries := cluster.Entries(commandsTP)
	if len(entries) != 1 {
		t.Fatalf("%d entries, want 1", len(entries))
	}
	got := entries[0].Headers
	if len(got) != 3 || got[0].Key != "trace-id" || string(got[0].Value) != "4bf92f35" || got[1].Key != "content-type" || got[2].Key != "trace-id" || got[2].Value != nil {
		t.Fatalf("Headers = %+v, want trace-id, content-type, trace-id in order", got)
	}
}
