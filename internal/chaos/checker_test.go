package chaos

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// history builds the synthetic log of one role: a stream of commands, the
// leases behind their terms, and the acks of their writers.
type history struct {
	t      *testing.T
	role   string
	in     CheckInput
	offset int64
	seq    map[string]int64
}

func newHistory(t *testing.T) *history {
	t.Helper()
	return &history{
		t:    t,
		role: "controller",
		in: CheckInput{
			Roles:    []string{"controller"},
			Commands: map[string][]CommandRecord{},
			Leases:   map[string][]LeaseRecord{},
			Config:   CheckConfig{Members: 3, Lease: 3 * time.Second, Stagger: 500 * time.Millisecond, Slack: 2 * time.Second},
		},
		seq: map[string]int64{},
	}
}

func token(t *testing.T, text string) coordination.FencingToken {
	t.Helper()
	tok, err := coordination.ParseFencingToken(text)
	if err != nil {
		t.Fatalf("ParseFencingToken(%q): %v", text, err)
	}
	return tok
}

// lease records a lease of member under tok.
func (h *history) lease(member, tok string) {
	h.t.Helper()
	id, err := coordination.NewMemberID(member)
	if err != nil {
		h.t.Fatal(err)
	}
	h.in.Leases[h.role] = append(h.in.Leases[h.role], LeaseRecord{
		Offset: int64(len(h.in.Leases[h.role])),
		Lease:  coordination.Lease{Member: id, Token: token(h.t, tok)},
	})
}

// write appends a command of member under tok, built at wall, and acks it.
func (h *history) write(member, tok string, wall int64) Command {
	h.t.Helper()
	h.seq[member]++
	cmd := Command{Role: h.role, Member: member, Incarnation: 1, Seq: h.seq[member], Token: tok, WallMillis: wall}
	h.append(cmd)
	h.in.Acks = append(h.in.Acks, Ack{Command: cmd, AckMillis: wall + 5})
	return cmd
}

// append appends a command record as it is, with no ack.
func (h *history) append(cmd Command) {
	h.t.Helper()
	value, err := json.Marshal(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	h.in.Commands[h.role] = append(h.in.Commands[h.role], CommandRecord{Offset: h.offset, Value: value})
	h.offset++
}

// clean builds a run with three terms: m1, then m2 after a kill of m1, then
// m3 after a pause of m2.
func clean(t *testing.T) *history {
	h := newHistory(t)
	h.lease("m1", "7:0")
	for i := range 5 {
		h.write("m1", "7:0", 1000+int64(i)*100)
	}
	h.in.Faults = append(h.in.Faults, Fault{Index: 0, Kind: FaultKill, Target: "m1", StartMillis: 1450, EndMillis: 3000})
	h.lease("m2", "7:1")
	for i := range 5 {
		h.write("m2", "7:1", 4500+int64(i)*100)
	}
	h.in.Faults = append(h.in.Faults, Fault{Index: 1, Kind: FaultPause, Target: "m2", StartMillis: 4950, EndMillis: 9000})
	h.lease("m3", "7:2")
	for i := range 5 {
		h.write("m3", "7:2", 8950+int64(i)*100)
	}
	return h
}

func kinds(r *Report) []string {
	var out []string
	for _, v := range r.Violations {
		out = append(out, v.Kind)
	}
	return out
}

func TestCheckPassesACleanRun(t *testing.T) {
	r := Check(clean(t).in)
	if !r.OK() {
		t.Fatalf("Check(clean run): violations %v, lost %v; want none", r.Violations, r.Lost)
	}
	if r.LeadershipChanges != 2 || r.Acknowledged != 15 || r.Commands != 15 || r.LeaseTerms != 3 {
		t.Errorf("Check(clean run) = %d changes, %d acked, %d commands, %d lease terms; want 2, 15, 15, 3",
			r.LeadershipChanges, r.Acknowledged, r.Commands, r.LeaseTerms)
	}
	st := r.FailoverStats
	if st.Measured != 2 || st.P50Millis != 3050 || st.MaxMillis != 4000 || st.OverBound != 0 {
		t.Errorf("failovers = %+v; want 2 measured, p50 3.05s, max 4s, none over the bound", st)
	}
}

func TestCheckCatchesAnInterleaving(t *testing.T) {
	h := clean(t)
	// A deposed leader's write lands after its successor's first command.
	h.write("m1", "7:0", 9500)
	r := Check(h.in)
	if got := kinds(r); len(got) != 1 || got[0] != ViolationInterleave {
		t.Fatalf("Check(stale write after a newer term) violations = %v; want one %s", r.Violations, ViolationInterleave)
	}
	if !strings.Contains(r.Violations[0].Detail, "7:0") || r.Violations[0].Offset != 15 {
		t.Errorf("violation = %+v; want the stale token 7:0 at offset 15", r.Violations[0])
	}
}

func TestCheckComparesTheProducerIDFirst(t *testing.T) {
	h := newHistory(t)
	h.lease("m1", "4:32767")
	h.write("m1", "4:32767", 1000)
	// The epoch wrapped: Kafka gave a fresh producer id with epoch 0.
	h.lease("m2", "5:0")
	h.write("m2", "5:0", 2000)
	if r := Check(h.in); !r.OK() || r.LeadershipChanges != 1 {
		t.Fatalf("Check(epoch exhaustion) = %v, %d changes; want no violation and 1 change", r.Violations, r.LeadershipChanges)
	}
	h.write("m1", "4:32767", 3000)
	if got := kinds(Check(h.in)); len(got) != 1 || got[0] != ViolationInterleave {
		t.Fatalf("Check(old producer id after the new one) violations = %v; want one %s", got, ViolationInterleave)
	}
}

func TestCheckCatchesALostAck(t *testing.T) {
	h := clean(t)
	// The writer saw the commit, and the command is not in the log.
	h.in.Acks = append(h.in.Acks, Ack{Command: Command{Role: h.role, Member: "m3", Incarnation: 1, Seq: 99, Token: "7:2"}})
	r := Check(h.in)
	if len(r.Lost) != 1 || !strings.HasPrefix(r.Lost[0], "m3/1/99") || r.OK() {
		t.Fatalf("Check(acked command missing) lost = %v, ok %v; want m3/1/99 lost and not ok", r.Lost, r.OK())
	}
}

func TestCheckCatchesADuplicate(t *testing.T) {
	h := clean(t)
	commands := h.in.Commands[h.role]
	var dup Command
	if err := json.Unmarshal(commands[len(commands)-1].Value, &dup); err != nil {
		t.Fatal(err)
	}
	h.append(dup)
	r := Check(h.in)
	got := kinds(r)
	if len(got) == 0 || got[0] != ViolationDuplicate && got[len(got)-1] != ViolationDuplicate {
		t.Fatalf("Check(command twice) violations = %v; want %s", r.Violations, ViolationDuplicate)
	}
	if r.OK() {
		t.Fatal("Check(command twice).OK() = true; want false")
	}
}

func TestCheckCatchesARefusedCommandThatLanded(t *testing.T) {
	h := clean(t)
	cmd := Command{Role: h.role, Member: "m3", Incarnation: 1, Seq: 50, Token: "7:2", WallMillis: 9500}
	h.append(cmd)
	h.in.Events = append(h.in.Events, Event{Kind: EventFenced, Member: "m3", Incarnation: 1, Role: h.role, Seq: 50, Token: "7:2"})
	r := Check(h.in)
	if got := kinds(r); len(got) != 1 || got[0] != ViolationRefusedVisible {
		t.Fatalf("Check(refused command present) violations = %v; want one %s", r.Violations, ViolationRefusedVisible)
	}
	if r.Refused != 1 {
		t.Errorf("Refused = %d; want 1", r.Refused)
	}
}

func TestCheckAcceptsAWriteOfUnknownOutcomeOnce(t *testing.T) {
	h := clean(t)
	cmd := Command{Role: h.role, Member: "m3", Incarnation: 1, Seq: 50, Token: "7:2", WallMillis: 9500}
	h.append(cmd)
	h.in.Events = append(h.in.Events,
		Event{Kind: EventWriteError, Member: "m3", Incarnation: 1, Role: h.role, Seq: 50},
		Event{Kind: EventWriteError, Member: "m3", Incarnation: 1, Role: h.role, Seq: 51})
	r := Check(h.in)
	if !r.OK() || r.Unknown != 2 || r.UnknownPresent != 1 || r.Unacknowledged != 0 {
		t.Fatalf("Check(unknown outcomes) = %v, unknown %d, present %d, unacked %d; want ok, 2, 1, 0",
			r.Violations, r.Unknown, r.UnknownPresent, r.Unacknowledged)
	}
}

func TestCheckCatchesAReorderedWriter(t *testing.T) {
	h := newHistory(t)
	h.lease("m1", "7:0")
	h.append(Command{Role: h.role, Member: "m1", Incarnation: 1, Seq: 2, Token: "7:0", WallMillis: 1000})
	h.append(Command{Role: h.role, Member: "m1", Incarnation: 1, Seq: 1, Token: "7:0", WallMillis: 900})
	if got := kinds(Check(h.in)); len(got) != 1 || got[0] != ViolationReorder {
		t.Fatalf("Check(seq 2 before seq 1) violations = %v; want one %s", got, ViolationReorder)
	}
}

func TestCheckCatchesTwoWritersUnderOneToken(t *testing.T) {
	h := newHistory(t)
	h.lease("m1", "7:0")
	h.write("m1", "7:0", 1000)
	h.write("m2", "7:0", 1100)
	if got := kinds(Check(h.in)); len(got) == 0 || got[0] != ViolationSharedToken {
		t.Fatalf("Check(two writers under 7:0) violations = %v; want %s", got, ViolationSharedToken)
	}
}

func TestCheckCatchesATermWithoutALease(t *testing.T) {
	h := newHistory(t)
	h.lease("m1", "7:0")
	h.write("m1", "7:0", 1000)
	h.write("m2", "7:1", 2000)
	if got := kinds(Check(h.in)); len(got) != 1 || got[0] != ViolationTermWithoutLease {
		t.Fatalf("Check(term with no lease) violations = %v; want one %s", got, ViolationTermWithoutLease)
	}
}

func TestCheckCatchesALeaseThatGoesBack(t *testing.T) {
	h := newHistory(t)
	h.lease("m1", "7:0")
	h.lease("m1", "7:0")
	// The successor's pair ranks below under Compare: the role's
	// coordinator moved to a broker with a lower block of producer ids.
	// That is no regression; the order is the commit order.
	h.lease("m2", "1001:32766")
	h.lease("m3", "2:0")
	if got := kinds(Check(h.in)); len(got) != 0 {
		t.Fatalf("Check(leases 7:0, 1001:32766, 2:0 in commit order) violations = %v; want none", got)
	}
	h.lease("m1", "7:0")
	if got := kinds(Check(h.in)); len(got) != 1 || got[0] != ViolationLeaseRegress {
		t.Fatalf("Check(lease 7:0 after its successors) violations = %v; want one %s", got, ViolationLeaseRegress)
	}
}

func TestCheckOrdersTermsByTheLogNotByCompare(t *testing.T) {
	h := newHistory(t)
	h.lease("m1", "1001:32766")
	h.write("m1", "1001:32766", 1000)
	// The legitimate successor got 2:0 from a coordinator on another
	// broker, as seen on a two-broker Kafka 4.4 cluster.
	h.lease("m2", "2:0")
	h.write("m2", "2:0", 2000)
	h.write("m2", "2:0", 2100)
	if r := Check(h.in); !r.OK() || r.LeadershipChanges != 1 {
		t.Fatalf("Check(1001:32766 then 2:0) = %v, %d changes; want no violation and 1 change", r.Violations, r.LeadershipChanges)
	}
	h.write("m1", "1001:32766", 3000)
	if got := kinds(Check(h.in)); len(got) != 1 || got[0] != ViolationInterleave {
		t.Fatalf("Check(the deposed 1001:32766 after 2:0) violations = %v; want one %s", got, ViolationInterleave)
	}
}

func TestCheckCatchesAMalformedCommand(t *testing.T) {
	h := clean(t)
	h.in.Commands[h.role] = append(h.in.Commands[h.role], CommandRecord{Offset: 99, Value: []byte("{")})
	if got := kinds(Check(h.in)); len(got) != 1 || got[0] != ViolationMalformed {
		t.Fatalf("Check(malformed record) violations = %v; want one %s", got, ViolationMalformed)
	}
}

func TestCheckFailovers(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(h *history)
		outcome string
		ms      int64
		over    int
	}{
		{
			name:    "a kill of the leader is measured from the fault",
			edit:    func(*history) {},
			outcome: OutcomeMeasured, ms: 3050,
		},
		{
			name: "a failover past the bound is counted",
			edit: func(h *history) {
				h.in.Config.Lease, h.in.Config.Slack = time.Second, 0
			},
			outcome: OutcomeMeasured, ms: 3050, over: 2,
		},
		{
			name: "a skew in force widens the bound",
			edit: func(h *history) {
				h.in.Config.Lease, h.in.Config.Slack = time.Second, 0
				h.in.Faults = append(h.in.Faults, Fault{Index: 9, Kind: FaultSkew, Target: "m3", StartMillis: 0, EndMillis: 20000, SkewMillis: -2000})
			},
			outcome: OutcomeMeasured, ms: 3050,
		},
		{
			name: "a broker restart in the window excludes the failover",
			edit: func(h *history) {
				h.in.Faults = append(h.in.Faults, Fault{Index: 9, Kind: FaultBrokerRestart, StartMillis: 2000, EndMillis: 2500})
			},
			outcome: OutcomeExcluded, ms: 3050,
		},
		{
			name: "a fault of a standby is no failover",
			edit: func(h *history) {
				h.in.Faults[0].Target = "m3"
			},
			outcome: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := clean(t)
			tt.edit(h)
			r := Check(h.in)
			var first *Failover
			for i := range r.Failovers {
				if r.Failovers[i].Fault == 0 {
					first = &r.Failovers[i]
				}
			}
			switch {
			case tt.outcome == "" && first != nil:
				t.Fatalf("failover of fault 0 = %+v; want none", *first)
			case tt.outcome == "":
			case first == nil:
				t.Fatalf("no failover of fault 0 in %+v", r.Failovers)
			case first.Outcome != tt.outcome || first.Millis != tt.ms:
				t.Fatalf("failover of fault 0 = %s %dms; want %s %dms", first.Outcome, first.Millis, tt.outcome, tt.ms)
			}
			if r.FailoverStats.OverBound != tt.over {
				t.Errorf("over bound = %d; want %d (failovers %+v)", r.FailoverStats.OverBound, tt.over, r.Failovers)
			}
		})
	}
}

func TestCheckFailoverRetainedWhenTheLeaderWritesOn(t *testing.T) {
	h := newHistory(t)
	h.lease("m1", "7:0")
	h.write("m1", "7:0", 1000)
	// A short cut: m1 keeps the role and writes again afterwards.
	h.in.Faults = append(h.in.Faults, Fault{Index: 0, Kind: FaultCut, Target: "m1", StartMillis: 1050, EndMillis: 2000})
	h.write("m1", "7:0", 2100)
	h.lease("m2", "7:1")
	h.write("m2", "7:1", 9000)
	r := Check(h.in)
	if len(r.Failovers) != 1 || r.Failovers[0].Outcome != OutcomeRetained || r.FailoverStats.Measured != 0 {
		t.Fatalf("failovers = %+v; want one retained and none measured", r.Failovers)
	}
}

func TestSummaryTable(t *testing.T) {
	h := clean(t)
	h.write("m1", "7:0", 9500)
	info := &RunInfo{RunID: "r", Seed: 3, Members: []string{"m1", "m2", "m3"}, StartMillis: 0, EndMillis: 65000,
		Lease: 3 * time.Second, Renew: time.Second, Stagger: 500 * time.Millisecond}
	s := NewSummary(info, Check(h.in))
	var b strings.Builder
	if err := s.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"duration  ", "1m5s", "violations", "VIOLATION interleave", "verdict", "FAIL", "kill=1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary table lacks %q:\n%s", want, b.String())
		}
	}
	if s.OK {
		t.Error("summary OK = true with a violation")
	}
}

func TestPercentile(t *testing.T) {
	sorted := make([]int64, 100)
	for i := range sorted {
		sorted[i] = int64(i + 1)
	}
	for _, tt := range []struct {
		p    int
		want int64
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}} {
		if got := percentile(sorted, tt.p); got != tt.want {
			t.Errorf("percentile(1..100, %d) = %d; want %d", tt.p, got, tt.want)
		}
	}
	if got := percentile([]int64{7}, 99); got != 7 {
		t.Errorf("percentile([7], 99) = %d; want 7", got)
	}
}

func ExampleCommandID_String() {
	fmt.Println(Command{Member: "m2", Incarnation: 3, Seq: 41}.ID())
	// Output: m2/3/41
}

func TestCheckCountsRefusalsBeforeAnyNewerTerm(t *testing.T) {
	h := clean(t)
	h.in.Events = append(h.in.Events,
		// m3 is refused while nobody holds a newer term: the transport gave up.
		Event{Kind: EventFenced, WallMillis: 9500, Member: "m3", Incarnation: 1, Role: h.role, Token: "7:2", Seq: 60},
		// m1 is refused after m2 acquired 7:1: a real fence.
		Event{Kind: EventAcquired, WallMillis: 4400, Member: "m2", Incarnation: 1, Role: h.role, Token: "7:1"},
		Event{Kind: EventFenced, WallMillis: 4450, Member: "m1", Incarnation: 1, Role: h.role, Token: "7:0", Seq: 61})
	r := Check(h.in)
	if !r.OK() || r.Refused != 2 || r.SelfFenced != 1 {
		t.Fatalf("Check = %v, refused %d, self-fenced %d; want ok, 2, 1", r.Violations, r.Refused, r.SelfFenced)
	}
}

// writeParts appends the records of a command of parts parts, part i on
// partition i%2 (the two partitions of the role), and returns it; the
// caller logs its outcome. visible lists the parts that are appended, nil
// for every part.
func (h *history) writeParts(member, tok string, wall int64, parts int, visible []int) Command {
	h.t.Helper()
	h.seq[member]++
	cmd := Command{Role: h.role, Member: member, Incarnation: 1, Seq: h.seq[member], Token: tok, WallMillis: wall, Parts: parts}
	if visible == nil {
		for i := range parts {
			visible = append(visible, i)
		}
	}
	for _, part := range visible {
		h.appendPart(cmd, part)
	}
	return cmd
}

// appendPart appends one part of a command on partition part%2.
func (h *history) appendPart(cmd Command, part int) {
	h.t.Helper()
	cmd.Part = part
	value, err := json.Marshal(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	h.in.Commands[h.role] = append(h.in.Commands[h.role], CommandRecord{Partition: int32(part % 2), Offset: h.offset, Value: value})
	h.offset++
}

func (h *history) ack(cmd Command) {
	h.in.Acks = append(h.in.Acks, Ack{Command: cmd, AckMillis: cmd.WallMillis + 5})
}

func (h *history) event(kind string, cmd Command, text string) {
	h.in.Events = append(h.in.Events, Event{WallMillis: cmd.WallMillis + 5, Kind: kind, Member: cmd.Member, Incarnation: cmd.Incarnation,
		Role: h.role, Seq: cmd.Seq, Token: cmd.Token, Error: text})
}

var none = []int{} // no part visible

// cleanParts builds a run of multi-record writes over two partitions: m1
// writes acknowledged commands of 2 and 3 parts, one of unknown outcome
// that landed whole and one that did not land, and one reported as not
// committed that did not land; m2 takes over after a kill of m1.
func cleanParts(t *testing.T) *history {
	h := newHistory(t)
	h.lease("m1", "7:0")
	for i := range 4 {
		h.ack(h.writeParts("m1", "7:0", 1000+int64(i)*100, 2+i%2, nil))
	}
	h.event(EventWriteError, h.writeParts("m1", "7:0", 1400, 3, nil), "the outcome of the write is unknown")
	h.event(EventWriteError, h.writeParts("m1", "7:0", 1420, 2, none), "the outcome of the write is unknown")
	h.event(EventWriteFailed, h.writeParts("m1", "7:0", 1440, 2, none), "record too large, nothing committed")
	h.in.Faults = append(h.in.Faults, Fault{Index: 0, Kind: FaultKill, Target: "m1", StartMillis: 1450, EndMillis: 3000})
	h.lease("m2", "7:1")
	for i := range 4 {
		h.ack(h.writeParts("m2", "7:1", 4500+int64(i)*100, 2+i%2, nil))
	}
	return h
}

func TestCheckPassesACleanRunOfMultiRecordWrites(t *testing.T) {
	r := Check(cleanParts(t).in)
	if !r.OK() {
		t.Fatalf("Check(clean run) violations %v, lost %v; want none", r.Violations, r.Lost)
	}
	if r.Acknowledged != 8 || r.Unknown != 2 || r.UnknownPresent != 1 || r.NotCommitted != 1 || r.LeadershipChanges != 1 {
		t.Errorf("Check(clean run) = %d acked, %d unknown (%d present), %d not committed, %d changes; want 8, 2 (1), 1, 1",
			r.Acknowledged, r.Unknown, r.UnknownPresent, r.NotCommitted, r.LeadershipChanges)
	}
}

// TestCheckCatchesTearingAndFalseReports shows Check hand-made runs of
// multi-record writes that break the promise of a guarded write, each a
// small change of a clean one, and the violation each must get.
func TestCheckCatchesTearingAndFalseReports(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(h *history)
		want  string // the violation kinds, sorted, joined by commas; "lost" for a lost ack
	}{
		{"an acknowledged write visible in part", func(h *history) {
			h.ack(h.writeParts("m2", "7:1", 5000, 3, []int{0, 2}))
		}, ViolationTorn},
		{"a write of unknown outcome visible in part", func(h *history) {
			h.event(EventWriteError, h.writeParts("m2", "7:1", 5000, 2, []int{1}), "the outcome of the write is unknown")
		}, ViolationTorn},
		{"a write reported as not committed visible in part", func(h *history) {
			h.event(EventWriteFailed, h.writeParts("m2", "7:1", 5000, 2, []int{0}), "nothing committed; the abort failed too")
		}, ViolationFalseReport + "," + ViolationTorn},
		{"a write reported as not committed visible whole", func(h *history) {
			h.event(EventWriteFailed, h.writeParts("m2", "7:1", 5000, 2, nil), "nothing committed")
		}, ViolationFalseReport},
		{"an acknowledged write missing", func(h *history) {
			h.ack(h.writeParts("m2", "7:1", 5000, 2, none))
		}, "lost"},
		{"an acknowledged write doubled", func(h *history) {
			cmd := h.writeParts("m2", "7:1", 5000, 2, nil)
			h.ack(cmd)
			h.appendPart(cmd, 0)
			h.appendPart(cmd, 1)
		}, ViolationDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cleanParts(t)
			tc.build(h)
			r := Check(h.in)
			if r.OK() {
				t.Fatal("Check(...).OK() = true; want false")
			}
			got := kinds(r)
			if tc.want == "lost" {
				if len(r.Lost) != 1 || len(got) != 0 {
					t.Fatalf("Check(...) lost %v, violations %v; want one lost command and no violation", r.Lost, r.Violations)
				}
				return
			}
			slices.Sort(got)
			if strings.Join(slices.Compact(got), ",") != tc.want || len(r.Lost) != 0 {
				t.Fatalf("Check(...) violations = %v, lost %v; want %s and nothing lost", r.Violations, r.Lost, tc.want)
			}
		})
	}
}

func TestWriteResultClassifiesTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ResultOK},
		{fmt.Errorf("coordination: write: %w", coordination.ErrNotHeld), ResultNotHeld},
		{fmt.Errorf("coordination: write: %w", coordination.ErrFenced), ResultFenced},
		{fmt.Errorf("coordination: write: %w: context deadline exceeded", coordination.ErrOutcomeUnknown), ResultUnknown},
		{fmt.Errorf("coordination: commit: the commit failed and its outcome is unknown: %w", errors.Join(coordination.ErrOutcomeUnknown, coordination.ErrProducerLost)), ResultUnknown},
		// A lost producer that does not wrap ErrOutcomeUnknown committed nothing, whatever its words say.
		{fmt.Errorf("coordination: renew: the transaction coordinator aborted it at its timeout: %w", coordination.ErrProducerLost), ResultNotCommitted},
		{fmt.Errorf("coordination: write to t-1 under 5:1, nothing committed: %w", coordination.ErrProducerLost), ResultNotCommitted},
		{fmt.Errorf("coordination: write: MESSAGE_TOO_LARGE"), ResultNotCommitted},
	} {
		if got := writeResult(tc.err); got != tc.want {
			t.Errorf("writeResult(%v) = %s; want %s", tc.err, got, tc.want)
		}
	}
}
