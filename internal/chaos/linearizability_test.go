package chaos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// linHistory builds a hand-made history of one role and its final read.
type linHistory struct {
	t       *testing.T
	in      LinearizabilityInput
	n       map[string]int64
	seq     map[string]int64
	offset  int64
	pending map[string]HistoryEntry // the last invocation of each member
}

func newLinHistory(t *testing.T) *linHistory {
	return &linHistory{t: t, in: LinearizabilityInput{Roles: []string{"r"}, Commands: map[string][]CommandRecord{}, Timeout: time.Minute},
		n: map[string]int64{}, seq: map[string]int64{}, pending: map[string]HistoryEntry{}}
}

// acquire logs an acquisition of member that runs over [from, to] (ms)
// and wins tok.
func (h *linHistory) acquire(member, tok string, from, to int64) {
	h.n[member]++
	n := h.n[member]
	h.in.History = append(h.in.History,
		HistoryEntry{Op: OpAcquire, Phase: PhaseInvoke, Member: member, Incarnation: 1, N: n, Role: "r", Nanos: from * 1e6},
		HistoryEntry{Op: OpAcquire, Phase: PhaseReturn, Member: member, Incarnation: 1, N: n, Role: "r", Token: tok, Nanos: to * 1e6, Result: ResultOK})
}

// write logs a write of member under tok over [from, to] with result
// (to < 0: no return, the member died) and returns its command.
func (h *linHistory) write(member, tok string, from, to int64, result string) Command {
	h.n[member]++
	h.seq[member]++
	n := h.n[member]
	cmd := Command{Role: "r", Member: member, Incarnation: 1, Seq: h.seq[member], Token: tok, WallMillis: from}
	h.in.History = append(h.in.History,
		HistoryEntry{Op: OpWrite, Phase: PhaseInvoke, Member: member, Incarnation: 1, N: n, Role: "r", Seq: cmd.Seq, Token: tok, Nanos: from * 1e6})
	if to >= 0 {
		h.in.History = append(h.in.History,
			HistoryEntry{Op: OpWrite, Phase: PhaseReturn, Member: member, Incarnation: 1, N: n, Role: "r", Seq: cmd.Seq, Token: tok, Nanos: to * 1e6, Result: result})
	}
	return cmd
}

// read appends commands to the final read of the role.
func (h *linHistory) read(cmds ...Command) {
	for _, cmd := range cmds {
		value, err := json.Marshal(cmd)
		if err != nil {
			h.t.Fatal(err)
		}
		h.in.Commands["r"] = append(h.in.Commands["r"], CommandRecord{Offset: h.offset, Value: value})
		h.offset += 2 // a record and its commit marker
	}
}

func (h *linHistory) check() Linearizability {
	h.t.Helper()
	return CheckLinearizable(h.in)
}

// validFailover: m1 leads, m2 takes over, m1's next write is refused, a
// write of m1 of unknown outcome landed and one did not, and a killed
// member's last write (no return) landed.
func validFailover(h *linHistory) (c [8]Command) {
	h.acquire("m1", "5:1", 0, 10)
	c[0] = h.write("m1", "5:1", 20, 30, ResultOK)
	c[1] = h.write("m1", "5:1", 40, 50, ResultUnknown) // landed after its return
	c[2] = h.write("m1", "5:1", 60, 70, ResultOK)
	c[3] = h.write("m1", "5:1", 80, 90, ResultUnknown) // did not land
	h.acquire("m2", "5:2", 50, 200)
	c[4] = h.write("m1", "5:1", 210, 220, ResultFenced)
	c[5] = h.write("m2", "5:2", 230, 240, ResultOK)
	c[6] = h.write("m2", "5:2", 250, -1, "") // m2 was killed in the call; it landed
	h.acquire("m3", "5:3", 240, 400)
	c[7] = h.write("m3", "5:3", 410, 420, ResultOK)
	return c
}

func TestLinearizablePassesAValidHistory(t *testing.T) {
	h := newLinHistory(t)
	c := validFailover(h)
	h.read(c[0], c[2], c[1], c[5], c[6], c[7])
	got := h.check()
	if got.Result != LinearOK {
		t.Fatalf("CheckLinearizable = %+v; want ok", got)
	}
	if got.Unknown != 3 {
		t.Errorf("Unknown = %d; want 3 (two unknown returns, one without a return)", got.Unknown)
	}
	if got.Ops != 10 || got.Inert != 2 {
		t.Errorf("Ops, Inert = %d, %d; want 10 (3 acquisitions, 6 writes, 1 read) and 2 (a refused write, an unknown one not in the read)", got.Ops, got.Inert)
	}
}

// TestLinearizableCatchesViolations shows the checker hand-made histories
// that break the model, each a small change of a valid one.
func TestLinearizableCatchesViolations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(h *linHistory)
		want  string // in Detail
	}{
		{"an acknowledged write is missing", func(h *linHistory) {
			c := validFailover(h)
			h.read(c[0], c[1], c[5], c[6], c[7]) // c[2] lost
		}, "role r"},
		{"a refused write is visible", func(h *linHistory) {
			c := validFailover(h)
			h.read(c[0], c[2], c[4], c[5], c[7])
		}, "5:1"},
		{"an acknowledged write is visible twice", func(h *linHistory) {
			c := validFailover(h)
			h.read(c[0], c[2], c[2], c[5], c[7])
		}, "m1/1/3"},
		{"a write of unknown outcome is visible twice", func(h *linHistory) {
			c := validFailover(h)
			h.read(c[0], c[1], c[2], c[1], c[5], c[7])
		}, "m1/1/2"},
		{"a write of the deposed token follows its successor's first write", func(h *linHistory) {
			c := validFailover(h)
			h.read(c[0], c[5], c[2], c[7]) // c[2] of 5:1 after c[5] of 5:2
		}, "role r"},
		{"an acknowledged write under a token the coordinator no longer holds", func(h *linHistory) {
			h.acquire("m1", "5:1", 0, 10)
			a := h.write("m1", "5:1", 20, 30, ResultOK)
			h.acquire("m2", "5:2", 25, 40)
			b := h.write("m1", "5:1", 50, 60, ResultOK) // invoked after 5:2 was won
			h.read(a, b)
		}, "m1/1/2"},
		{"a record that no write made", func(h *linHistory) {
			c := validFailover(h)
			ghost := Command{Role: "r", Member: "m9", Incarnation: 1, Seq: 1, Token: "5:2"}
			h.read(c[0], c[2], c[5], ghost, c[7])
		}, "m9/1/1"},
		{"a record under another token than its write", func(h *linHistory) {
			c := validFailover(h)
			c[5].Token = "5:3"
			h.read(c[0], c[2], c[5], c[7])
		}, "role r"},
		{"a deposed token won again", func(h *linHistory) {
			h.acquire("m1", "5:1", 0, 10)
			a := h.write("m1", "5:1", 20, 30, ResultOK)
			h.acquire("m2", "5:2", 40, 50)
			h.acquire("m3", "5:1", 60, 70)
			h.read(a)
		}, "role r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLinHistory(t)
			tc.build(h)
			got := h.check()
			if got.Result != LinearIllegal {
				t.Fatalf("CheckLinearizable = %+v; want illegal", got)
			}
			if got.OK() {
				t.Errorf("OK() = true for an illegal history")
			}
			if text := strings.Join(got.Detail, "\n"); !strings.Contains(text, tc.want) {
				t.Errorf("Detail = %q; want it to name %q", text, tc.want)
			}
		})
	}
}

func TestLinearizableWithoutHistoryIsAbsent(t *testing.T) {
	got := CheckLinearizable(LinearizabilityInput{Roles: []string{"r"}})
	if got.Result != LinearAbsent || !got.OK() {
		t.Fatalf("CheckLinearizable(no history) = %+v; want absent, OK", got)
	}
}

// TestLinearizableChecksRolesApart: a violation in one role fails the
// check, whatever the other role does, and the detail names that role.
func TestLinearizableChecksRolesApart(t *testing.T) {
	h := newLinHistory(t)
	c := validFailover(h)
	h.read(c[0], c[2], c[1], c[5], c[6], c[7])
	h.in.Roles = append(h.in.Roles, "s")
	h.in.History = append(h.in.History,
		HistoryEntry{Op: OpWrite, Phase: PhaseInvoke, Member: "m4", Incarnation: 1, N: 1, Role: "s", Seq: 1, Token: "7:1", Nanos: 1},
		HistoryEntry{Op: OpWrite, Phase: PhaseReturn, Member: "m4", Incarnation: 1, N: 1, Role: "s", Seq: 1, Token: "7:1", Nanos: 2, Result: ResultOK})
	got := h.check()
	if got.Result != LinearIllegal {
		t.Fatalf("CheckLinearizable = %+v; want illegal (role s lost an acknowledged write)", got)
	}
	if len(got.Detail) != 1 || !strings.HasPrefix(got.Detail[0], "role s:") {
		t.Errorf("Detail = %q; want one line, for role s", got.Detail)
	}
}

// writeParts logs a write of a command of parts records, as write does.
func (h *linHistory) writeParts(member, tok string, from, to int64, result string, parts int) Command {
	cmd := h.write(member, tok, from, to, result)
	cmd.Parts = parts
	for i := len(h.in.History) - 1; i >= 0 && h.in.History[i].Seq == cmd.Seq && h.in.History[i].Member == member; i-- {
		h.in.History[i].Parts = parts
	}
	return cmd
}

// readParts appends the listed parts of a command (nil: every part) to
// the final read, part i on partition i%2.
func (h *linHistory) readParts(cmd Command, parts []int) {
	if parts == nil {
		for i := range cmd.PartCount() {
			parts = append(parts, i)
		}
	}
	for _, part := range parts {
		cmd.Part = part
		value, err := json.Marshal(cmd)
		if err != nil {
			h.t.Fatal(err)
		}
		h.in.Commands["r"] = append(h.in.Commands["r"], CommandRecord{Partition: int32(part % 2), Offset: h.offset, Value: value})
		h.offset += 2
	}
}

// multiPart: m1 leads and writes commands of 2 and 3 records on two
// partitions: acknowledged ones, one of unknown outcome that landed, one
// of unknown outcome and one reported as not committed that did not; m2
// takes over.
func multiPart(h *linHistory) (c [6]Command) {
	h.acquire("m1", "5:1", 0, 10)
	c[0] = h.writeParts("m1", "5:1", 20, 30, ResultOK, 2)
	c[1] = h.writeParts("m1", "5:1", 40, 50, ResultUnknown, 3) // landed
	c[2] = h.writeParts("m1", "5:1", 60, 70, ResultUnknown, 2) // did not land
	c[3] = h.writeParts("m1", "5:1", 80, 90, ResultNotCommitted, 3)
	h.acquire("m2", "5:2", 100, 200)
	c[4] = h.writeParts("m2", "5:2", 210, 220, ResultOK, 3)
	c[5] = h.writeParts("m2", "5:2", 230, 240, ResultOK, 2)
	return c
}

func TestLinearizablePassesMultiRecordWrites(t *testing.T) {
	h := newLinHistory(t)
	c := multiPart(h)
	for _, i := range []int{0, 1, 4, 5} {
		h.readParts(c[i], nil)
	}
	if got := h.check(); got.Result != LinearOK {
		t.Fatalf("CheckLinearizable = %+v; want ok", got)
	}
}

// TestLinearizableCatchesTearingAndFalseReports shows the Porcupine model
// hand-made histories of multi-record writes that break the promise of a
// guarded write; each must be illegal, and say why.
func TestLinearizableCatchesTearingAndFalseReports(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(h *linHistory, c [6]Command)
		want string // in Detail
	}{
		{"an acknowledged write visible in part", func(h *linHistory, c [6]Command) {
			h.readParts(c[0], nil)
			h.readParts(c[1], nil)
			h.readParts(c[4], []int{0, 1})
			h.readParts(c[5], nil)
		}, "m2/1/1 part 0 of 3 under 5:2: its write (ok) is visible in part: 2 of 3 parts (torn)"},
		{"a write of unknown outcome visible in part", func(h *linHistory, c [6]Command) {
			h.readParts(c[0], nil)
			h.readParts(c[1], []int{1})
			h.readParts(c[4], nil)
			h.readParts(c[5], nil)
		}, "its write (unknown) is visible in part: 1 of 3 parts (torn)"},
		{"a write reported as not committed visible", func(h *linHistory, c [6]Command) {
			h.readParts(c[0], nil)
			h.readParts(c[1], nil)
			h.readParts(c[3], nil)
			h.readParts(c[4], nil)
			h.readParts(c[5], nil)
		}, "m1/1/4 part 0 of 3 under 5:1: it is visible, and its write was reported as not committed (a false report)"},
		{"an acknowledged write missing", func(h *linHistory, c [6]Command) {
			h.readParts(c[0], nil)
			h.readParts(c[1], nil)
			h.readParts(c[4], nil)
		}, "its write was acknowledged, and it is missing from the read"},
		{"an acknowledged write doubled", func(h *linHistory, c [6]Command) {
			h.readParts(c[0], nil)
			h.readParts(c[1], nil)
			h.readParts(c[4], nil)
			h.readParts(c[5], nil)
			h.readParts(c[5], nil)
		}, "m2/1/2 part 0 of 2 under 5:2: its write (ok) is visible twice: 4 records for 2 parts (doubled)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newLinHistory(t)
			tc.read(h, multiPart(h))
			got := h.check()
			if got.Result != LinearIllegal {
				t.Fatalf("CheckLinearizable = %+v; want illegal", got)
			}
			if text := strings.Join(got.Detail, "\n"); !strings.Contains(text, tc.want) {
				t.Errorf("Detail = %q; want it to say %q", text, tc.want)
			}
		})
	}
}
