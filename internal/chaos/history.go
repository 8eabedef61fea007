package chaos

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Operations of a [HistoryEntry].
const (
	// OpAcquire is a call of coordination.AcquireLeadership; its return
	// names the token it won.
	OpAcquire = "acquire"

	// OpWrite is a call of Leadership.Write of one command.
	OpWrite = "write"
)

// Phases of a [HistoryEntry].
const (
	PhaseInvoke = "invoke"
	PhaseReturn = "return"
)

// Results of a [HistoryEntry] of the return phase.
const (
	// ResultOK: the write was acknowledged (its transaction committed), or
	// the acquisition won the role.
	ResultOK = "ok"

	// ResultFenced: the broker refused the write with
	// [coordination.ErrFenced]; nothing of it may be visible.
	ResultFenced = "fenced"

	// ResultNotHeld: the write returned [coordination.ErrNotHeld], before
	// anything went to the broker; nothing of it may be visible.
	ResultNotHeld = "not-held"

	// ResultUnknown: the write's error says that its outcome is unknown
	// (see outcomeUnknown); it may or may not be visible, as a whole, and
	// its effect may land after its return (a transaction that ends in the
	// background).
	ResultUnknown = "unknown"

	// ResultNotCommitted: the write failed with an error that says nothing
	// committed (any error but a fence, a not-held and an unknown
	// outcome); nothing of it may be visible.
	ResultNotCommitted = "not-committed"

	// ResultFailed: the acquisition returned an error. It may have minted
	// an epoch; the linearizability check does not count on either.
	ResultFailed = "failed"
)

// HistoryEntry is one line of the history log of a member
// (members/<id>.history): the invocation or the return of one guarded call,
// the input of the linearizability check ([CheckLinearizable]). The member
// writes the invocation before the call and the return after it, each as
// one write(2), so a member killed inside a call leaves an invocation
// without a return: a call of unknown outcome.
type HistoryEntry struct {
	// Op is OpAcquire or OpWrite, and Phase PhaseInvoke or PhaseReturn.
	Op    string `json:"op"`
	Phase string `json:"ph"`

	// Member and Incarnation name the process, and N numbers its calls
	// from 1: an invocation and its return carry the same N.
	Member      string `json:"member"`
	Incarnation int    `json:"inc"`
	N           int64  `json:"n"`

	// Role is the role of the call.
	Role string `json:"role"`

	// Seq is the sequence number of the command of a write ([Command]),
	// and Parts the number of its records (0 for one record).
	Seq   int64 `json:"seq,omitempty"`
	Parts int   `json:"parts,omitempty"`

	// Token is the token of the leadership of a write, and the token won by
	// an acquisition (on its return).
	Token string `json:"token,omitempty"`

	// Nanos is the host time of the invocation or of the return, in
	// nanoseconds since the Unix epoch.
	Nanos int64 `json:"ns"`

	// Result is one of the Result* constants, on a return.
	Result string `json:"res,omitempty"`
}

// historian writes the history log of one member incarnation. A nil
// historian writes nothing.
type historian struct {
	log         *LineLog
	member      string
	incarnation int
	n           atomic.Int64
}

// invoke logs the invocation of a call and returns its number.
func (h *historian) invoke(op, role string, seq int64, parts int, token string) int64 {
	if h == nil {
		return 0
	}
	n := h.n.Add(1)
	h.append(HistoryEntry{Op: op, Phase: PhaseInvoke, N: n, Role: role, Seq: seq, Parts: parts, Token: token})
	return n
}

// done logs the return of call n.
func (h *historian) done(op string, n int64, role string, seq int64, token, result string) {
	if h == nil {
		return
	}
	h.append(HistoryEntry{Op: op, Phase: PhaseReturn, N: n, Role: role, Seq: seq, Token: token, Result: result})
}

func (h *historian) append(e HistoryEntry) {
	e.Member, e.Incarnation, e.Nanos = h.member, h.incarnation, time.Now().UnixNano()
	if err := h.log.Append(e); err != nil {
		panic("chaos: history log: " + err.Error()) // a call that is not logged breaks the check
	}
}

// writeResult classifies the error of a guarded write: acknowledged, not
// held, of unknown outcome, fenced, or not committed. The contract of
// [coordination.ExtendedTransport.WriteGuarded] is that an error that wraps none of
// ErrFenced, ErrProducerLost and ErrOutcomeUnknown means that nothing
// committed; a lost producer says in its words whether anything may have
// (see outcomeUnknown).
func writeResult(err error) string {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, coordination.ErrNotHeld):
		return ResultNotHeld // the leadership had ended: nothing went out
	case outcomeUnknown(err):
		return ResultUnknown
	case errors.Is(err, coordination.ErrFenced):
		return ResultFenced
	default:
		return ResultNotCommitted
	}
}

// outcomeUnknown reports an error of a guarded write that says its records
// may have committed: one that wraps coordination.ErrOutcomeUnknown. It is
// the one place of that decision. Every other error of a write (a lost
// producer that says "nothing committed" included) means that nothing
// committed, and the checker fails a history where such a write is visible.
func outcomeUnknown(err error) bool {
	return errors.Is(err, coordination.ErrOutcomeUnknown)
}
