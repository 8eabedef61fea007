package coordination_test

import (
	"context"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// TestWriteChecksTheRecordsBeforeAnything: Leadership.Write refuses a call
// whose records fail the one check (checkGuardedRecords, transport.go)
// before it queues or sends anything, and the leadership goes on. The
// leadership's own state topic (WithTopic) is refused by the write path
// itself: the in-memory transport refuses only StateTopic.
func TestWriteChecksTheRecordsBeforeAnything(t *testing.T) {
	scBothPaths(t, func(t *testing.T, e *scEnv) {
		node1 := e.member("node-1")
		holder := e.acquireNow(node1, coordination.WithTopic("own-state"))
		if got := holder.Partition().Topic; got != "own-state" {
			t.Fatalf("the leadership's topic is %s, want own-state", got)
		}
		ctx := context.Background()
		if e.plain {
			// A transport without ExtendedTransport refuses every Write.
			if err := holder.Write(ctx, scCommands); err == nil || !strings.Contains(err.Error(), "does not implement ExtendedTransport") {
				t.Fatalf("Write over a plain transport = %v, want an error naming ExtendedTransport", err)
			}
			e.resign(holder)
			return
		}
		calls := node1.raw.Calls(coordinationtest.OpWriteGuarded)
		for _, c := range []struct {
			records []coordination.GuardedRecord
			want    string
		}{
			{nil, "no records"},
			{[]coordination.GuardedRecord{scCommands, {Topic: "own-state", Value: []byte("forged")}}, "record 1 is for the state topic own-state"},
			{[]coordination.GuardedRecord{{Topic: coordination.StateTopic}}, "record 0 is for the state topic " + coordination.StateTopic},
			{[]coordination.GuardedRecord{{Partition: 2}}, "record 0 has no topic"},
			{[]coordination.GuardedRecord{{Topic: "commands", Partition: -1}}, "record 0 has the partition -1"},
		} {
			err := holder.Write(ctx, c.records...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Write(%v) = %v, want an error with %q", c.records, err, c.want)
			}
		}
		if got := node1.raw.Calls(coordinationtest.OpWriteGuarded); got != calls {
			t.Fatalf("refused writes sent %d guarded writes, want none", got-calls)
		}
		if err := holder.Write(ctx, scCommands); err != nil {
			t.Fatalf("Write of a command after the refusals: %v", err)
		}
		scHolds(t, holder)
		e.resign(holder)
	})
}
