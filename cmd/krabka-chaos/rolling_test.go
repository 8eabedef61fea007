package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/chaos"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestRollingRestart runs a rolling restart of three members of one role
// on the real broker of KRABKA_KAFKA_BROKERS (issue 31, item 4), by both
// procedures in one run: transfer (the standbys first, the holder last,
// handing the role to a member already restarted) and, for comparison,
// resign (roster order, the holder first, each holder resigning). It
// asserts: no violation, no lost command, a history that linearizes
// (the harness's checker and Porcupine); the transfer procedure makes
// exactly one leadership change and one epoch, and its gap without an
// acknowledged command across the holder's stop is within the transfer's
// own time and two command intervals (the holder's last command before its
// stop, the new holder's first after its election) and a write's round
// trips; the resign procedure makes more than one change. The longest gap
// of each procedure anywhere (a slow write on a loaded machine counts too)
// is logged.
func TestRollingRestart(t *testing.T) {
	cluster := kafkatest.Kafka(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	member := goBuild(t, root, "./cmd/krabka-chaos", filepath.Join(t.TempDir(), "krabka-chaos"))
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var progress strings.Builder
	// A pace well under a transfer's time: the gap is the handover's.
	const interval = rollingCommandInterval
	run, err := chaos.OrchestrateRolling(ctx, chaos.RollingConfig{
		Brokers: cluster.Brokers, Executable: member, Members: 3,
		Lease: mixedLease, Renew: mixedRenew, Stagger: mixedStagger, Poll: 250 * time.Millisecond,
		CommandInterval: interval, WriteTimeout: 5 * time.Second,
		Hold: 2 * time.Second, Dir: dir, Progress: &progress, RefusedTransfers: true, TransferBurst: 10,
	})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		keepRunDir(t, dir)
		t.Fatalf("rolling run: %v", err)
	}
	summary, err := chaos.CheckRun(ctx, dir, nil, 30*time.Second)
	if err != nil {
		keepRunDir(t, dir)
		t.Fatalf("check: %v", err)
	}
	r := summary.Report
	for _, v := range r.Violations {
		t.Errorf("violation %s in role %s at offset %d: %s", v.Kind, v.Role, v.Offset, v.Detail)
	}
	for _, lost := range r.Lost {
		t.Errorf("lost acknowledged command %s", lost)
	}
	if r.Acknowledged == 0 {
		t.Error("no command was acknowledged")
	}
	if l := r.Linearizability; l.Result != chaos.LinearOK {
		t.Errorf("linearizability check: %s over %d operations: %v", l.Result, l.Ops, l.Detail)
	}
	// The refused transfers (issue 31's third target): a standby killed
	// and a name not in the roster, each refused with its typed error
	// within the bound, no epoch used, the holder writing on; the checkers
	// above ran over the whole history, these calls included.
	cases := map[string]bool{}
	for _, r := range run.Refused {
		t.Logf("refused transfer from %s to %s (%s): fault %q in %d ms (bound %d ms), %d acquisitions, %d holder acks after: %s",
			r.Holder, r.Target, r.Case, r.Fault, r.TookMillis, r.BoundMillis, r.Acquisitions, r.HolderAcks, r.Error)
		cases[r.Case] = true
		for _, p := range r.Problems {
			t.Errorf("refused transfer to %s (%s): %s", r.Target, r.Case, p)
		}
	}
	if !cases[chaos.RefusedDead] || !cases[chaos.RefusedNotMember] {
		t.Errorf("refused transfers %+v; want one to a dead standby and one to a name not in the roster", run.Refused)
	}
	phases, err := chaos.MeasureRolling(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(phases) != 3 {
		t.Fatalf("%d phases measured, want 3 (burst, transfer, resign): %+v", len(phases), phases)
	}
	for _, p := range phases {
		t.Logf("%s", p)
	}
	burst, transfer, resign := phases[0], phases[1], phases[2]
	if burst.Procedure != chaos.ProcedureBurst || len(run.BurstMillis) != 10 || burst.Changes != 10 || burst.Epochs != 10 {
		t.Errorf("burst: %s, %d transfers %v; want 10 transfers, each one leadership change and one epoch", burst, len(run.BurstMillis), run.BurstMillis)
	}
	if transfer.Procedure != chaos.ProcedureTransfer || resign.Procedure != chaos.ProcedureResign {
		t.Fatalf("procedures %s, %s; want transfer, resign", transfer.Procedure, resign.Procedure)
	}
	if transfer.Changes != 1 || transfer.Epochs != 1 {
		t.Errorf("transfer procedure: %d leadership changes, %d epochs; want 1 and 1", transfer.Changes, transfer.Epochs)
	}
	if len(transfer.TransferMillis) != 1+len(run.BurstMillis) {
		t.Fatalf("transfer procedure: %d transfers, want 1 (the holder's stop) and the burst's %d: %v", len(transfer.TransferMillis), len(run.BurstMillis), transfer.TransferMillis)
	}
	// The gap: the holder's last command (at most one interval before its
	// stop), the transfer, the new holder's first command (one interval
	// after its election) and that write's round trips.
	bound := time.Duration(transfer.TransferMillis[0])*time.Millisecond + 2*interval + 500*time.Millisecond
	if gap := time.Duration(transfer.HandoverGapMillis) * time.Millisecond; gap > bound {
		t.Errorf("transfer procedure: gap without an acknowledged command across the holder's stop %v; want at most %v (the transfer's %d ms, two command intervals and 500 ms for a write)",
			gap, bound, transfer.TransferMillis[0])
	}
	// Issue 31's gap target: the gaps against the transfer's p99 in the
	// same run (the holder's transfer and the burst's). Logged, not
	// asserted (docs/operations.md, "Rolling restart": the figures).
	t.Logf("gap target: gap across the holder's stop %d ms, longest gap of the procedure %d ms, transfer p99 %d ms over %d transfers: stop gap <= p99 %v, longest gap <= p99 %v",
		transfer.HandoverGapMillis, transfer.LongestGapMillis, transfer.TransferP99Millis, len(transfer.TransferMillis), transfer.GapWithinP99, transfer.LongestGapWithinP99)
	if resign.Changes < 2 {
		t.Errorf("resign procedure: %d leadership changes; the holder first in roster order hands the role to the member restarted next, so want at least 2", resign.Changes)
	}
	for _, step := range run.Steps {
		if step.Procedure == chaos.ProcedureTransfer && step.Holder {
			if step.Successor == "" || step.Successor == step.Member {
				t.Errorf("transfer procedure: holder %s's successor %q", step.Member, step.Successor)
			}
		}
	}
	if t.Failed() {
		keepRunDir(t, dir)
	}
}
