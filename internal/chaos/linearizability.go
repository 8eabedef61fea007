package chaos

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability is the verdict of the independent checker
// ([CheckLinearizable]) on the history of a run.
type Linearizability struct {
	// Result is "ok", "illegal" (no linearization exists), "timeout" (the
	// search ran out of time: no verdict), or "absent" (the run has no
	// history log, as a run made before the log existed).
	Result string `json:"result"`

	// Ops counts the operations checked: acquisitions, writes and one
	// final read per role. Unknown counts the writes of unknown outcome (a
	// return of ResultUnknown, or no return at all), and Inert the writes
	// left out of the search because they can change nothing: refused
	// writes, and writes of unknown outcome that are not in the read.
	Ops     int `json:"ops"`
	Unknown int `json:"unknown"`
	Inert   int `json:"inert"`

	// Millis is how long the search took.
	Millis int64 `json:"ms"`

	// Detail explains an illegal history: for each role that failed, how
	// far the longest partial linearization reached.
	Detail []string `json:"detail,omitempty"`
}

// Linearizability results.
const (
	LinearOK      = "ok"
	LinearIllegal = "illegal"
	LinearTimeout = "timeout"
	LinearAbsent  = "absent"
)

// OK reports a verdict that is not a failure: ok, or no history to check.
func (l Linearizability) OK() bool { return l.Result == LinearOK || l.Result == LinearAbsent }

// logEntry is one record of the final read of a role, in offset order
// within its partition.
type logEntry struct {
	id        string // CommandID.String
	token     string
	part      int
	parts     int // Command.PartCount
	partition int32
	offset    int64
}

// maxRolePartitions bounds the partitions of one role that the model
// follows (the state holds one count per partition, in an array, so that
// states compare with ==).
const maxRolePartitions = 8

// roleLog is the final read of one role: a log per partition (the
// partitions in order), and where the records of each command sit.
type roleLog struct {
	partitions []int32
	logs       [][]logEntry
	at         map[string][]logPos // command id -> its records
}

// logPos places one record: the index of its partition in roleLog, and its
// index in that partition's log.
type logPos struct{ p, i int }

// total counts the records of the read.
func (l *roleLog) total() int {
	n := 0
	for _, log := range l.logs {
		n += len(log)
	}
	return n
}

// linOp is the input of one operation of the model.
type linOp struct {
	kind   string // OpAcquire, OpWrite, or "read"
	role   string
	id     string // the command of a write
	parts  int    // the records of a write's command (1 or more)
	token  string
	result string // of a write
	member string
	at     int64 // call instant, for the report
}

// linState is the state of the model of one role: how much of each
// partition of the final read the linearized writes have produced, the
// token the coordinator holds, and the tokens it deposed (sorted,
// "|"-joined, so that the state compares with ==).
type linState struct {
	matched [maxRolePartitions]int
	holder  string
	deposed string
}

func (s linState) produced() int {
	n := 0
	for _, m := range s.matched {
		n += m
	}
	return n
}

func (s linState) isDeposed(token string) bool {
	return token != "" && strings.Contains("|"+s.deposed+"|", "|"+token+"|")
}

func (s linState) depose(token string) linState {
	if token == "" || s.isDeposed(token) {
		return s
	}
	all := []string{token}
	if s.deposed != "" {
		all = append(all, strings.Split(s.deposed, "|")...)
	}
	slices.Sort(all)
	s.deposed = strings.Join(all, "|")
	return s
}

// fencedLogModel is the sequential specification of a fenced command log
// of one role. The final read of each role is known (logs): a write that
// lands must produce the next records of that read, and the read is legal
// once every record of it was produced, so the state need not hold the log
// itself.
//
//   - An acquisition that wins token T makes T the token the coordinator
//     holds and deposes the one before; a token once deposed is never won
//     again.
//   - A write is one transaction of the parts of its command: it lands
//     whole or not at all. It lands as the next records of each partition
//     it writes, every part once, under the token the coordinator holds. A
//     command visible in part, or a part visible twice, can never land.
//   - A write acknowledged lands.
//   - A write refused (fenced, not held) or reported as not committed does
//     not land, so a record of it in the read is produced by nothing.
//   - A write of unknown outcome lands if and only if the read holds it:
//     command ids are unique, so a record can be produced by one write
//     only, and the choice is no choice.
//   - Since a write lands only under the holder's token, and a deposed
//     token never comes back, no record of a deposed token follows the
//     first record of its successor in a partition.
func fencedLogModel(logs map[string]*roleLog, present map[string]bool) porcupine.Model {
	land := func(s linState, op linOp) (bool, linState) {
		log := logs[op.role]
		if log == nil || !landable(log, op) || op.token != s.holder || s.isDeposed(op.token) {
			return false, s
		}
		counts := make(map[int]int)
		for _, pos := range log.at[op.id] {
			counts[pos.p]++
		}
		for _, pos := range log.at[op.id] {
			if pos.i < s.matched[pos.p] || pos.i >= s.matched[pos.p]+counts[pos.p] {
				return false, s // not the next records of its partition
			}
		}
		for p, n := range counts {
			s.matched[p] += n
		}
		return true, s
	}
	return porcupine.Model{
		Init: func() any { return linState{} },
		Step: func(state, input, _ any) (bool, any) {
			s, op := state.(linState), input.(linOp)
			switch op.kind {
			case OpAcquire:
				if s.isDeposed(op.token) {
					return false, s
				}
				if op.token != s.holder {
					s = s.depose(s.holder)
					s.holder = op.token
				}
				return true, s
			case "read":
				log := logs[op.role]
				return log == nil || s.produced() == log.total(), s
			}
			switch op.result {
			case ResultOK:
				return land(s, op)
			case ResultUnknown:
				if present[op.id] {
					return land(s, op)
				}
				return true, s
			default: // fenced, not held, not committed: nothing lands
				return true, s
			}
		},
		DescribeOperation: func(input, _ any) string {
			op := input.(linOp)
			switch op.kind {
			case OpAcquire:
				return fmt.Sprintf("%s acquire -> %s", op.member, op.token)
			case "read":
				return fmt.Sprintf("read %d records", logs[op.role].total())
			}
			return fmt.Sprintf("write %s (%d parts) under %s -> %s", op.id, op.parts, op.token, op.result)
		},
		DescribeState: func(state any) string {
			s := state.(linState)
			return fmt.Sprintf("%d records, holder %s, deposed %s", s.produced(), s.holder, s.deposed)
		},
	}
}

// landable reports whether the read holds the command of a write whole:
// each of its op.parts parts once, all under the write's token, and the
// records of one partition next to each other.
func landable(log *roleLog, op linOp) bool {
	at := log.at[op.id]
	if len(at) != op.parts {
		return false
	}
	seen := make(map[int]bool)
	last := make(map[int]int)
	for _, pos := range at {
		e := log.logs[pos.p][pos.i]
		if e.token != op.token || e.part >= op.parts || seen[e.part] {
			return false
		}
		seen[e.part] = true
		if prev, ok := last[pos.p]; ok && pos.i != prev+1 {
			return false
		}
		last[pos.p] = pos.i
	}
	return true
}

// LinearizabilityInput is what [CheckLinearizable] reads: the history of
// every call and the final read_committed read of each role.
type LinearizabilityInput struct {
	// Roles lists the roles; Commands holds the final read of each.
	Roles    []string
	Commands map[string][]CommandRecord

	// History holds the history logs of every member.
	History []HistoryEntry

	// Timeout bounds the search; 0 means no bound.
	Timeout time.Duration
}

// CheckLinearizable checks the history of a run with Porcupine
// (github.com/anishathalye/porcupine) against the model of a fenced command
// log (see fencedLogModel): every acquisition and guarded write with its
// invocation and return instants and its result, and a final read of each
// role after the last return. A write without a return (its member was
// killed) and a write of unknown outcome return at infinity: their effect
// may come at any time after their invocation. An acquisition that failed
// or never returned is left out: it may have minted an epoch, and leaving
// it out only weakens the check.
//
// It shares no code with [Check] but the decoding of a command.
func CheckLinearizable(in LinearizabilityInput) Linearizability {
	out := Linearizability{}
	if len(in.History) == 0 {
		out.Result = LinearAbsent
		return out
	}
	logs := make(map[string]*roleLog)
	present := make(map[string]bool)
	for _, role := range in.Roles {
		records := slices.Clone(in.Commands[role])
		slices.SortStableFunc(records, func(a, b CommandRecord) int {
			return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
		})
		log := &roleLog{at: make(map[string][]logPos)}
		for _, rec := range records {
			if len(log.partitions) == 0 || log.partitions[len(log.partitions)-1] != rec.Partition {
				log.partitions = append(log.partitions, rec.Partition)
				log.logs = append(log.logs, nil)
			}
			var cmd Command
			entry := logEntry{partition: rec.Partition, offset: rec.Offset, parts: 1, id: fmt.Sprintf("undecodable@%d/%d", rec.Partition, rec.Offset)}
			if err := json.Unmarshal(rec.Value, &cmd); err == nil {
				entry.id, entry.token, entry.part, entry.parts = cmd.ID().String(), cmd.Token, cmd.Part, cmd.PartCount()
			}
			p := len(log.logs) - 1
			log.at[entry.id] = append(log.at[entry.id], logPos{p: p, i: len(log.logs[p])})
			log.logs[p] = append(log.logs[p], entry)
			present[entry.id] = true
		}
		if len(log.partitions) > maxRolePartitions {
			out.Result = LinearIllegal
			out.Detail = append(out.Detail, fmt.Sprintf("role %s: %d partitions, more than the model follows (%d)", role, len(log.partitions), maxRolePartitions))
			return out
		}
		logs[role] = log
	}

	type key struct {
		member string
		inc    int
		n      int64
	}
	invokes := make(map[key]HistoryEntry)
	returns := make(map[key]HistoryEntry)
	for _, e := range in.History {
		k := key{e.Member, e.Incarnation, e.N}
		if e.Phase == PhaseInvoke {
			invokes[k] = e
		} else {
			returns[k] = e
		}
	}
	clients := make(map[string]int)
	client := func(member string, inc int) int {
		name := fmt.Sprintf("%s/%d", member, inc)
		if id, ok := clients[name]; ok {
			return id
		}
		clients[name] = len(clients)
		return clients[name]
	}
	var ops []porcupine.Operation
	var last int64
	writes := make(map[string]linOp) // command id -> its write
	for k, inv := range invokes {
		ret, returned := returns[k]
		op := linOp{kind: inv.Op, role: inv.Role, token: inv.Token, member: inv.Member, at: inv.Nanos, parts: max(inv.Parts, 1)}
		o := porcupine.Operation{ClientId: client(inv.Member, inv.Incarnation), Call: inv.Nanos, Return: math.MaxInt64}
		last = max(last, inv.Nanos)
		if returned {
			last = max(last, ret.Nanos)
		}
		switch inv.Op {
		case OpAcquire:
			if !returned || ret.Result != ResultOK {
				continue
			}
			op.token, o.Return = ret.Token, ret.Nanos
		case OpWrite:
			op.id = CommandID{Member: inv.Member, Incarnation: inv.Incarnation, Seq: inv.Seq}.String()
			op.result = ResultUnknown
			if returned {
				op.result = ret.Result
			}
			if op.result == ResultUnknown {
				out.Unknown++
			} else {
				o.Return = ret.Nanos
			}
			// A write that cannot land (refused), or of unknown outcome
			// that did not land, is legal in every state and changes none:
			// it linearizes anywhere in its interval, so leaving it out
			// changes no verdict, and spares the search a choice of
			// places for it. A record of it in the read still fails the
			// check: no operation produces it.
			writes[op.id] = op
			if op.result == ResultFenced || op.result == ResultNotHeld || op.result == ResultNotCommitted && !present[op.id] ||
				op.result == ResultUnknown && !present[op.id] {
				out.Inert++
				continue
			}
		default:
			continue
		}
		o.Input = op
		ops = append(ops, o)
	}
	for _, role := range in.Roles {
		ops = append(ops, porcupine.Operation{ClientId: len(clients), Input: linOp{kind: "read", role: role},
			Call: last + 1, Return: last + 2})
	}
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	out.Ops = len(ops)

	model := fencedLogModel(logs, present)
	byRole := make(map[string][]porcupine.Operation)
	for _, op := range ops {
		role := op.Input.(linOp).role
		byRole[role] = append(byRole[role], op)
	}
	start := time.Now()
	out.Result = LinearOK
	for _, role := range in.Roles {
		timeout := time.Duration(0)
		if in.Timeout > 0 {
			timeout = max(in.Timeout-time.Since(start), time.Millisecond)
		}
		result, info := porcupine.CheckOperationsVerbose(model, byRole[role], timeout)
		switch result {
		case porcupine.Ok:
		case porcupine.Unknown:
			if out.Result == LinearOK {
				out.Result = LinearTimeout
			}
			out.Detail = append(out.Detail, fmt.Sprintf("role %s: the search ran out of time (%s)", role, in.Timeout))
		default:
			out.Result = LinearIllegal
			out.Detail = append(out.Detail, explain(model, role, logs[role], writes, info))
		}
	}
	out.Millis = time.Since(start).Milliseconds()
	return out
}

// explain replays the longest partial linearization of the history of a
// role that failed and says where it stopped, and why the write of the
// record it stopped at cannot produce it.
func explain(model porcupine.Model, role string, log *roleLog, writes map[string]linOp, info porcupine.LinearizationInfo) string {
	var longest []porcupine.Operation
	for _, partials := range info.PartialLinearizationsOperations() {
		for _, p := range partials {
			if len(p) > len(longest) {
				longest = p
			}
		}
	}
	state := model.Init()
	for _, op := range longest {
		_, state = model.Step(state, op.Input, op.Output)
	}
	s := state.(linState)
	next := "the final read (every record was produced)"
	var why string
	// The next record of each partition: the first whose write cannot
	// produce it says why, else the first.
	for p, entries := range log.logs {
		if s.matched[p] >= len(entries) {
			continue
		}
		e := entries[s.matched[p]]
		w := whyNot(log, writes, e.id)
		if why == "" && (w != "" || next == "the final read (every record was produced)") {
			next = fmt.Sprintf("the record at %d/%d, command %s part %d of %d under %s", e.partition, e.offset, e.id, e.part, e.parts, e.token)
			why = w
		}
	}
	if why == "" {
		// Every record was produced, or the next one is a write's that could
		// land: name an acknowledged write that did not.
		for _, op := range writes {
			if op.role == role && op.result == ResultOK && !landable(log, op) {
				why = whyNot(log, writes, op.id)
				break
			}
		}
	}
	if why != "" {
		why = ": " + why
	}
	return fmt.Sprintf("role %s: the longest linearization takes %d operations and produces %d of %d records (holder %s, deposed [%s]); no operation produces %s%s",
		role, len(longest), s.produced(), log.total(), s.holder, s.deposed, next, why)
}

// whyNot says why the write of a command cannot produce its records.
func whyNot(log *roleLog, writes map[string]linOp, id string) string {
	op, ok := writes[id]
	if !ok {
		return "no write of it is in the history"
	}
	at := log.at[id]
	parts := make(map[int]int)
	for _, pos := range at {
		parts[log.logs[pos.p][pos.i].part]++
	}
	switch {
	case op.result == ResultOK && len(at) == 0:
		return "its write was acknowledged, and it is missing from the read"
	case op.result == ResultNotCommitted:
		return "it is visible, and its write was reported as not committed (a false report)"
	case op.result == ResultFenced || op.result == ResultNotHeld:
		return fmt.Sprintf("it is visible, and its write was refused (%s)", op.result)
	case len(parts) < op.parts:
		return fmt.Sprintf("its write (%s) is visible in part: %d of %d parts (torn)", op.result, len(parts), op.parts)
	case len(at) > op.parts:
		return fmt.Sprintf("its write (%s) is visible twice: %d records for %d parts (doubled)", op.result, len(at), op.parts)
	case !landable(log, op):
		return fmt.Sprintf("its write (%s) cannot produce its records as read (another token, or other records between its parts)", op.result)
	}
	return ""
}
