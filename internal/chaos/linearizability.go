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

// logEntry is one command of the final read of a role, in offset order.
type logEntry struct {
	id     string // CommandID.String
	token  string
	offset int64
}

// linOp is the input of one operation of the model.
type linOp struct {
	kind   string // OpAcquire, OpWrite, or "read"
	role   string
	id     string // the command of a write
	token  string
	result string // of a write
	member string
	at     int64 // call instant, for the report
}

// linState is the state of the model of one role: how much of the final
// read the linearized writes have produced, the token the coordinator
// holds, and the tokens it deposed (sorted, "|"-joined, so that the state
// compares with ==).
type linState struct {
	matched int
	holder  string
	deposed string
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
// of one role. The final read of each role
// is known (logs): a write that lands must be the next record of that
// read, and the read is legal once every record of it was produced, so
// the state need not hold the log itself.
//
//   - An acquisition that wins token T makes T the token the coordinator
//     holds and deposes the one before; a token once deposed is never won
//     again.
//   - A write acknowledged under T lands, and it may only land under the
//     token the coordinator holds, as the next record of the read, once.
//   - A write refused (fenced, or not held) does not land.
//   - A write of unknown outcome lands if and only if the read holds it:
//     command ids are unique, so a record can be produced by one write
//     only, and the choice is no choice.
//   - Since a write lands only under the holder's token, and a deposed
//     token never comes back, no record of a deposed token follows the
//     first record of its successor.
func fencedLogModel(logs map[string][]logEntry, present map[string]bool) porcupine.Model {
	land := func(s linState, op linOp) (bool, linState) {
		log := logs[op.role]
		if s.matched >= len(log) || log[s.matched].id != op.id || log[s.matched].token != op.token {
			return false, s
		}
		if op.token != s.holder || s.isDeposed(op.token) {
			return false, s
		}
		s.matched++
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
				return s.matched == len(logs[op.role]), s
			}
			switch op.result {
			case ResultOK:
				return land(s, op)
			case ResultUnknown:
				if present[op.id] {
					return land(s, op)
				}
				return true, s
			default: // fenced, not held: nothing lands
				return true, s
			}
		},
		DescribeOperation: func(input, _ any) string {
			op := input.(linOp)
			switch op.kind {
			case OpAcquire:
				return fmt.Sprintf("%s acquire -> %s", op.member, op.token)
			case "read":
				return fmt.Sprintf("read %d records", len(logs[op.role]))
			}
			return fmt.Sprintf("write %s under %s -> %s", op.id, op.token, op.result)
		},
		DescribeState: func(state any) string {
			s := state.(linState)
			return fmt.Sprintf("%d records, holder %s, deposed %s", s.matched, s.holder, s.deposed)
		},
	}
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
	logs := make(map[string][]logEntry)
	present := make(map[string]bool)
	for _, role := range in.Roles {
		for _, rec := range in.Commands[role] {
			var cmd Command
			entry := logEntry{offset: rec.Offset, id: fmt.Sprintf("undecodable@%d", rec.Offset)}
			if err := json.Unmarshal(rec.Value, &cmd); err == nil {
				entry.id, entry.token = cmd.ID().String(), cmd.Token
			}
			logs[role] = append(logs[role], entry)
			present[entry.id] = true
		}
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
	for k, inv := range invokes {
		ret, returned := returns[k]
		op := linOp{kind: inv.Op, role: inv.Role, token: inv.Token, member: inv.Member, at: inv.Nanos}
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
			if op.result == ResultFenced || op.result == ResultNotHeld || op.result == ResultUnknown && !present[op.id] {
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
			out.Detail = append(out.Detail, explain(model, role, logs[role], info))
		}
	}
	out.Millis = time.Since(start).Milliseconds()
	return out
}

// explain replays the longest partial linearization of the history of a
// role that failed and says where it stopped.
func explain(model porcupine.Model, role string, log []logEntry, info porcupine.LinearizationInfo) string {
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
	if s.matched < len(log) {
		e := log[s.matched]
		next = fmt.Sprintf("the record at offset %d, command %s under %s", e.offset, e.id, e.token)
	}
	return fmt.Sprintf("role %s: the longest linearization takes %d operations and produces %d of %d records (holder %s, deposed [%s]); no operation produces %s",
		role, len(longest), s.matched, len(log), s.holder, s.deposed, next)
}
