package chaos

import (
	"strings"
	"testing"
)

// TestCheckAttributesChangesToFaults: a change in the window of a fault
// counts against that fault, a change in no window is a needless failover,
// and the gaps without an ack are measured per fault and outside every
// fault.
func TestCheckAttributesChangesToFaults(t *testing.T) {
	h := clean(t) // m1 7:0 until 1400, kill of m1 at 1450, m2 7:1 from 4500, pause of m2 at 4950, m3 7:2 from 8950
	h.in.Config.StartMillis = 500
	// A coordinator kill from 20000 to 25000 (recovered), during which m3
	// keeps the role, then a state-leader kill from 40000 to 44000, which
	// costs two changes (m1, then m2).
	for i := range 30 {
		h.write("m3", "7:2", 10000+int64(i)*1000) // acks every second to 39005
	}
	h.in.Faults = append(h.in.Faults,
		Fault{Index: 2, Kind: FaultCoordinatorKill, Target: "node 2", StartMillis: 20000, HealMillis: 22000, EndMillis: 25000},
		Fault{Index: 3, Kind: FaultStateLeaderKill, Target: "node 3", StartMillis: 40000, HealMillis: 42000, EndMillis: 44000})
	h.lease("m1", "9:0")
	h.write("m1", "9:0", 41000)
	h.lease("m2", "1:0") // a pair that ranks below: the order is the time the term began
	for i := range 16 {
		h.write("m2", "1:0", 45000+int64(i)*1000) // to 60005
	}
	// A change far from every fault: a needless failover.
	h.lease("m3", "9:1")
	h.write("m3", "9:1", 80000)
	r := Check(h.in)
	if !r.OK() {
		t.Fatalf("violations %v, lost %v", r.Violations, r.Lost)
	}
	if len(r.Changes) != 5 || r.ChangesWithoutFault != 1 {
		t.Fatalf("changes = %v, %d without a fault; want 5 and 1", r.Changes, r.ChangesWithoutFault)
	}
	byFault := make(map[int]FaultImpact)
	for _, im := range r.Impacts {
		byFault[im.Fault] = im
	}
	// The window of a fault is its start to its end plus the bound (3 s +
	// 2 × 0.5 s + 2 s = 6 s).
	if im := byFault[2]; im.Changes != 0 || im.EndMillis != 31000 || im.LongestGapMillis != 1000 {
		t.Errorf("coordinator kill = %+v; want 0 changes, window to 31000, longest gap 1 s", im)
	}
	if im := byFault[3]; im.Changes != 2 || im.RoleChanges != 2 || im.LongestGapMillis != 45005-41005 {
		t.Errorf("state-leader kill = %+v; want 2 changes and the gap from 41005 to 45005", im)
	}
	// The window of the kill of m1 (to 9000) overlaps the gap that the
	// pause of m2 made, from 4905 to 8955.
	if im := byFault[0]; im.Changes != 1 || im.LongestGapMillis != 8955-4905 {
		t.Errorf("kill of m1 = %+v; want 1 change and the gap from 4905 to 8955", im)
	}
	k, ok := r.KindImpactOf(FaultStateLeaderKill)
	if !ok || k.Faults != 1 || k.ChangesP50 != 2 || k.ChangesMax != 2 || k.Handovers != 2 || k.GapMaxMillis != 4000 {
		t.Errorf("by kind %s = %+v, %v; want 1 fault, 2 changes, gap 4 s", FaultStateLeaderKill, k, ok)
	}
	if r.LongestGapNoFaultMillis != 80005-60005 || r.LongestGapMillis != 20000 {
		t.Errorf("longest gap = %d, outside every fault %d; want 20000 for both", r.LongestGapMillis, r.LongestGapNoFaultMillis)
	}
	var table strings.Builder
	if err := NewSummary(&RunInfo{Members: []string{"m1", "m2", "m3"}}, r).WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 (window of a fault", "state-leader-kill", "CHANGE", "-> 9:1 (m3), no fault"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("summary table lacks %q:\n%s", want, table.String())
		}
	}
}

// TestCheckMeasuresCallsPastTheirContext: the largest time from the end of
// a call's context to its return, per kind of call, leaving out a call that
// a pause of its member overlapped.
func TestCheckMeasuresCallsPastTheirContext(t *testing.T) {
	h := clean(t) // m2 is paused from 4950 to 9000
	h.in.Calls = []Call{
		{WallMillis: 1000, Member: "m1", Incarnation: 1, Call: CallWrite, BudgetMillis: 5000, TookMillis: 30, OverMillis: -1},
		{WallMillis: 2000, Member: "m1", Incarnation: 1, Call: CallWrite, BudgetMillis: 5000, TookMillis: 5400, OverMillis: 400, Error: "context deadline exceeded"},
		{WallMillis: 4900, Member: "m2", Incarnation: 1, Call: CallWrite, BudgetMillis: 5000, TookMillis: 9000, OverMillis: 4000}, // paused
		{WallMillis: 3000, Member: "m3", Incarnation: 1, Call: CallAcquire, TookMillis: 60000, OverMillis: 1500, Error: "context canceled"},
		{WallMillis: 3000, Member: "m3", Incarnation: 1, Call: CallResign, BudgetMillis: 5000, TookMillis: 20, OverMillis: -1},
	}
	r := Check(h.in)
	got := make(map[string]CallStats)
	for _, c := range r.Calls {
		got[c.Call] = c
	}
	if w := got[CallWrite]; w.Count != 2 || w.Bounded != 2 || w.Ended != 1 || w.MaxOverMillis != 400 || w.Excluded != 1 || w.MaxTookMillis != 5400 {
		t.Errorf("writes = %+v; want 2 counted, 1 past its deadline by 400 ms, 1 left out", w)
	}
	if a := got[CallAcquire]; a.Count != 1 || a.Bounded != 0 || a.MaxOverMillis != 1500 || !strings.Contains(a.Worst, "m3/1") {
		t.Errorf("acquires = %+v; want 1, returned 1.5 s after its cancellation", a)
	}
	if r.MaxCallOverMillis != 1500 || got[CallResign].Ended != 0 {
		t.Errorf("largest excess = %d, resign %+v; want 1500 and a resign within its context", r.MaxCallOverMillis, got[CallResign])
	}
}

func TestCheckSortsTheEndsOfLeaderships(t *testing.T) {
	h := clean(t)
	h.in.Events = append(h.in.Events,
		Event{Kind: EventEnded, Member: "m1", Error: "coordination: guarded write by member m1: the write held the role's producer past the due renewal of the lease, so the renewal cancelled it: ... the call's context ended (context canceled) with the transaction in flight, which did not end within 250ms more; ..."},
		Event{Kind: EventEnded, Member: "m2", Error: "coordination: renewal by member m2: lease write ...: the call's context ended (context deadline exceeded) with the transaction in flight, which did not end within 250ms more"},
		Event{Kind: EventEnded, Member: "m2", Error: "coordination: guarded write by member m2: ... the call's context ended (context deadline exceeded) with the transaction in flight, which did not end within 250ms more"},
		Event{Kind: EventFenced, Member: "m3", Error: "coordination: guarded write by member m3: ...: fenced: another member holds the role: PRODUCER_FENCED"},
		Event{Kind: EventFenced, Member: "m1", Error: "coordination: guarded write by member m1: ...: fenced: another member holds the role"},
		Event{Kind: EventEnded, Member: "m3", Error: "shutdown\n"},
	)
	r := Check(h.in)
	got := make(map[string]int)
	for _, c := range r.EndCauses {
		got[c.Cause] = c.Count
	}
	want := map[string]int{EndPreempted: 1, EndRenewalAbandoned: 1, EndWriteAbandoned: 1, EndFenced: 2, EndShutdown: 1}
	if len(got) != len(want) {
		t.Fatalf("end causes = %v; want %v", got, want)
	}
	for cause, n := range want {
		if got[cause] != n {
			t.Errorf("end causes = %v; want %v", got, want)
		}
	}
	if r.EndCauses[0].Cause != EndFenced {
		t.Errorf("end causes = %v; want the most common first", r.EndCauses)
	}
}
