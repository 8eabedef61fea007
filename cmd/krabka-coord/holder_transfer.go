package main

// The planned transfer of a holder (issue 31): POST /transfer, which
// 'krabka-coord transfer' sends, hands the role to a named member with
// Leadership.TransferTo; POST /drain, which 'krabka-coord drain' sends,
// hands it to the first live standby that takes it (or withdraws a
// standby's registration), and the member then stays out of the roster
// until it stops; --successor and --successor-policy hand the role over at
// a shutdown instead of resigning to whoever ranks first.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Successor policies of --successor-policy.
const (
	successorNewest = "newest" // the live standby registered last: in a rolling restart, one already restarted
)

// errDrained is what acquire returns when a drain ended the member's
// campaign, or handed over the role it had just taken: the member then
// idles.
var errDrained = errors.New("drained")

// operatorRequest is a POST /transfer or POST /drain, handed from the HTTP
// handler to the loop of elect or run, which answers on reply.
type operatorRequest struct {
	drain  bool
	member string                // the member a drain is for: it must be this process's
	to     coordination.MemberID // the named member of a transfer
	reply  chan operatorReply    // buffered: the loop never waits for the handler
}

// operatorReply is the answer to an operatorRequest: an HTTP status and the
// JSON body.
type operatorReply struct {
	status int
	body   any
}

// handoverJSON is the answer of POST /transfer and POST /drain, and the
// JSON line of 'krabka-coord transfer'.
type handoverJSON struct {
	Role   string `json:"role"`
	Member string `json:"member"` // the member that was asked
	Held   bool   `json:"held"`   // it held the role when it was asked
	To     string `json:"to"`     // the member the role went to, or was offered to
	Moved  bool   `json:"moved"`  // the role went to To (a drained standby: its registration withdrawn)

	// Fault is the TransferError's fault when the role did not move:
	// not_member, to_self, member_dead, busy, not_taken; "not_holder"
	// when the member does not hold the role; "" otherwise.
	Fault         string     `json:"fault"`
	Reason        string     `json:"reason"`
	PreviousToken *tokenJSON `json:"previous_token"`
	Token         *tokenJSON `json:"token"` // the new holder's, when known
	TookMillis    int64      `json:"took_ms"`
}

// faultName is the JSON name of a transfer fault.
func faultName(f coordination.TransferFault) string {
	switch f {
	case coordination.TransferNotMember:
		return "not_member"
	case coordination.TransferToSelf:
		return "to_self"
	case coordination.TransferMemberDead:
		return "member_dead"
	case coordination.TransferBusy:
		return "busy"
	case coordination.TransferNotTaken:
		return "not_taken"
	}
	return "unknown"
}

// operatorBound is how long the HTTP handler waits for the loop's answer:
// the bound of a transfer of every standby of a drain is not known to it,
// so it waits for a few transfer bounds, and the client's own timeout.
func (h *holder) operatorBound() time.Duration {
	return 4*h.transferBound() + 10*time.Second
}

// transferBound is the bound of one transfer: --transfer-timeout, or the
// library's default.
func (h *holder) transferBound() time.Duration {
	if h.flags.transferTimeout > 0 {
		return h.flags.transferTimeout
	}
	bound := max(3*h.config.ChallengeStagger(), h.config.RenewInterval()+2*h.flags.lease.poll)
	return min(bound, h.config.Duration()-h.config.RenewInterval())
}

// ask hands a request to the loop and waits for its answer; the handlers of
// POST /transfer and POST /drain call it.
func (h *holder) ask(ctx context.Context, req operatorRequest) operatorReply {
	req.reply = make(chan operatorReply, 1)
	if req.drain && req.member != h.member.String() {
		return operatorReply{status: http.StatusConflict, body: fmt.Sprintf("this process is member %q, not %q: drain nothing here", h.member, req.member)}
	}
	if !h.handingOver.CompareAndSwap(false, true) {
		// One at a time, refused at once as TransferTo refuses a second
		// transfer (TransferBusy): a request queued behind a transfer would
		// run later against a roster the operator no longer sees.
		return operatorReply{status: http.StatusConflict, body: handoverJSON{Role: h.role.String(), Member: h.member.String(), Held: h.metrics.isLeading(),
			To: req.to.String(), Fault: faultName(coordination.TransferBusy), Reason: "another transfer or drain of this member is under way"}}
	}
	defer h.handingOver.Store(false)
	bound := time.NewTimer(h.operatorBound())
	defer bound.Stop()
	select {
	case h.operatorRequests <- req:
	case <-ctx.Done():
		return operatorReply{status: http.StatusServiceUnavailable, body: "the request ended before the member took it"}
	case <-bound.C:
		return operatorReply{status: http.StatusServiceUnavailable, body: "the member did not take the request (busy)"}
	}
	select {
	case reply := <-req.reply:
		return reply
	case <-bound.C:
		return operatorReply{status: http.StatusGatewayTimeout, body: "the member did not answer within " + h.operatorBound().String()}
	}
}

// notHolder answers a transfer asked of a member that does not hold the
// role.
func (h *holder) notHolder(req operatorRequest) {
	req.reply <- operatorReply{status: http.StatusConflict, body: handoverJSON{Role: h.role.String(), Member: h.member.String(), To: req.to.String(),
		Fault: "not_holder", Reason: fmt.Sprintf("member %s does not hold role %s: nothing to transfer", h.member, h.role)}}
}

// handover carries out a transfer or a drain of a leadership that this
// member holds. It reports whether the member still holds the role (a
// transfer that failed: the holder keeps leading), and it answers req.
func (h *holder) handover(leadership *coordination.Leadership, req operatorRequest) (held bool) {
	start := time.Now()
	result := handoverJSON{Role: h.role.String(), Member: h.member.String(), Held: true, PreviousToken: newTokenJSON(leadership.Token())}
	var candidates []coordination.MemberID
	if req.drain {
		var reasons []string
		candidates, reasons = h.standbys(leadership)
		if len(candidates) == 0 {
			result.Fault, result.Reason = "not_member", "no live standby to hand the role to"
			if len(reasons) > 0 {
				result.Reason += " (" + joinReasons(reasons) + ")"
			}
		}
	} else {
		candidates = []coordination.MemberID{req.to}
	}
	var tried []string
	for _, to := range candidates {
		result.To = to.String()
		err := h.transferTo(leadership, to)
		if err == nil {
			result.Moved, result.Fault, result.Reason = true, "", ""
			break
		}
		var te *coordination.TransferError
		if errors.As(err, &te) {
			result.Fault, result.Reason = faultName(te.Fault), te.Reason
			if te.Err != nil {
				result.Reason += ": " + oneLine(errText(te.Err))
			}
		} else {
			result.Fault, result.Reason = "failed", oneLine(errText(err))
		}
		tried = append(tried, fmt.Sprintf("%s: %s", to, result.Reason))
		if leadership.Err() != nil {
			break // the leadership ended otherwise (a fence): no other try
		}
	}
	if !result.Moved && len(tried) > 1 {
		result.Reason = joinReasons(tried)
	}
	result.TookMillis = time.Since(start).Milliseconds()
	status := http.StatusOK
	if !result.Moved {
		status = http.StatusConflict
	}
	req.reply <- operatorReply{status: status, body: result}
	return !result.Moved && leadership.Err() == nil
}

// transferTo hands the leadership to one member and reports it.
func (h *holder) transferTo(leadership *coordination.Leadership, to coordination.MemberID) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.transferBound()+resignTimeout)
	defer cancel()
	err := leadership.TransferTo(ctx, to)
	if err != nil {
		h.report(holderEvent{Event: "transfer_failed", Token: newTokenJSON(leadership.Token()), Message: oneLine(errText(err))},
			fmt.Sprintf("krabka-coord: member %s could not hand role %s to %s: %s", h.shownMember(), h.shownRole(), showName(to.String()), oneLine(errText(err))), true)
		return err
	}
	h.metrics.ended("transferred")
	h.report(holderEvent{Event: "transferred", Token: newTokenJSON(leadership.Token()), Message: to.String()},
		fmt.Sprintf("transferred: member %s handed role %s (token %s) to %s", h.shownMember(), h.shownRole(), leadership.Token(), showName(to.String())), false)
	return nil
}

// standbys returns the live standbys of the role in rank order, and why
// each other one is left out.
func (h *holder) standbys(leadership *coordination.Leadership) ([]coordination.MemberID, []string) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	state, err := coordination.DescribeRoleState(ctx, h.transport, h.role, append(h.g.coordOptions(), h.flags.lease.options(h.config)...)...)
	if err != nil {
		return nil, []string{"the roster could not be read: " + oneLine(errText(err))}
	}
	now := time.Now().UnixMilli()
	var live []coordination.MemberID
	var reasons []string
	for _, e := range state.Roster {
		switch {
		case e.Member == h.member:
		case e.LapsedAt(now, h.config):
			reasons = append(reasons, fmt.Sprintf("%s lapsed (no heartbeat for 3 intervals)", e.Member))
		default:
			live = append(live, e.Member)
		}
	}
	return live, reasons
}

// successor is the member that a shutdown hands the role to: --successor,
// or the --successor-policy's choice; "" to resign.
func (h *holder) successor(leadership *coordination.Leadership) coordination.MemberID {
	if h.successorID.String() != "" || h.flags.successorPolicy != successorNewest {
		return h.successorID
	}
	live, _ := h.standbys(leadership)
	if len(live) == 0 {
		return coordination.MemberID{}
	}
	return live[len(live)-1] // rank order: the last registered
}

// transferOnShutdown hands the role to the successor at a shutdown. It
// reports whether it did; when it did not, the caller resigns. A second
// signal (again) stops waiting.
func (h *holder) transferOnShutdown(leadership *coordination.Leadership, again <-chan os.Signal) bool {
	if h.successorID.String() == "" && h.flags.successorPolicy == "" {
		return false
	}
	to := h.successor(leadership)
	if to.String() == "" {
		h.report(holderEvent{Event: "transfer_failed", Token: newTokenJSON(leadership.Token()), Message: "no live standby"},
			fmt.Sprintf("krabka-coord: --successor-policy %s: no live standby of role %s; it resigns", h.flags.successorPolicy, h.shownRole()), true)
		return false
	}
	done := make(chan error, 1)
	go func() { done <- h.transferTo(leadership, to) }()
	select {
	case err := <-done:
		return err == nil
	case <-again:
		return false // TransferTo takes the role back by its bound; resign now
	}
}

// idle is a drained member: it holds nothing and is not in the roster,
// and it waits for a signal to exit 0, answering every other drain (it is
// drained already) and transfer (it holds nothing).
func (h *holder) idle(ctx context.Context) error {
	h.report(holderEvent{Event: "drained"}, fmt.Sprintf("drained: member %s holds role %s no more and left its roster; it waits for a signal to exit", h.shownMember(), h.shownRole()), false)
	for {
		select {
		case <-ctx.Done():
			return nil
		case req := <-h.operatorRequests:
			if !req.drain {
				h.notHolder(req)
				continue
			}
			req.reply <- operatorReply{status: http.StatusOK, body: handoverJSON{Role: h.role.String(), Member: h.member.String(), Moved: true, Reason: "drained already"}}
		}
	}
}

// withdraw answers the drain of a standby, whose campaign ended: it left
// the roster.
func (h *holder) withdraw(req operatorRequest) {
	req.reply <- operatorReply{status: http.StatusOK, body: handoverJSON{Role: h.role.String(), Member: h.member.String(), Moved: true,
		Reason: "a standby: its registration is withdrawn"}}
}

func joinReasons(reasons []string) string { return strings.Join(reasons, "; ") }

// checkSuccessorFlags validates --successor, --successor-policy and
// --transfer-timeout, and returns --successor's member ("" for none).
func checkSuccessorFlags(flags *holdFlags, member coordination.MemberID, config coordination.LeaseConfig) (coordination.MemberID, error) {
	if flags.successor != "" && flags.successorPolicy != "" {
		return coordination.MemberID{}, usageError("--successor and --successor-policy: pass one of them")
	}
	if flags.successorPolicy != "" && flags.successorPolicy != successorNewest {
		return coordination.MemberID{}, usageError("--successor-policy %q: want %q (the live standby registered last)", flags.successorPolicy, successorNewest)
	}
	if flags.transferTimeout < 0 || (flags.transferTimeout > 0 && flags.transferTimeout >= config.Duration()) {
		return coordination.MemberID{}, usageError("--transfer-timeout %v: want above zero and below --lease-duration %v, or 0 for the default", flags.transferTimeout, config.Duration())
	}
	if flags.successor == "" {
		return coordination.MemberID{}, nil
	}
	successor, err := coordination.NewMemberID(flags.successor)
	if err != nil {
		return coordination.MemberID{}, usageError("invalid --successor %s: %s", quoteName(flags.successor), nameProblem(err, coordination.MaxMemberIDLen, "node-2"))
	}
	if successor == member {
		return coordination.MemberID{}, usageError("--successor %s is this MEMBER: name another member of the role", quoteName(flags.successor))
	}
	return successor, nil
}
