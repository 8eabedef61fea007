package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Causes of a refusal with ErrFenced ([FenceAttribution]).
const (
	// FenceRivalAcquired: another member (or another incarnation of the
	// member) minted the pair that fenced the token, and acquired with it,
	// wrote a lease under it, or got it from a mint the proxy saw answered;
	// or, without pairs, acquired a newer term between the acquisition and
	// the copy life after the fence.
	FenceRivalAcquired = "rival-acquired"

	// FenceRivalLateCopy: an InitProducerId of another member was applied
	// without its answer reaching that member (a fault held and released
	// it, lost its answer or answered it with an error; or the client gave
	// up on it) and minted the pair that fenced the token, or, without
	// pairs, was applied between the acquisition and the fence.
	FenceRivalLateCopy = "rival-late-copy"

	// FenceOwnLateCopy: the same, for an InitProducerId of the fenced
	// member itself: a self-fence.
	FenceOwnLateCopy = "own-late-copy"

	// FenceFaultMade: the second copy of an InitProducerId that the proxy
	// duplicated fenced the token. TCP never duplicates a request and the
	// library never resends one without an answer, so the fence exists by
	// the fault's construction; it is counted apart.
	FenceFaultMade = "fault-made"

	// FenceUnexplained: none of the above.
	FenceUnexplained = "unexplained"
)

// FenceCauses counts the refusals with ErrFenced of a run by cause.
type FenceCauses struct {
	RivalAcquired int `json:"rival_acquired"`
	RivalLateCopy int `json:"rival_late_copy"`
	OwnLateCopy   int `json:"own_late_copy"`
	FaultMade     int `json:"fault_made"`
	Unexplained   int `json:"unexplained"`
}

func (c *FenceCauses) add(cause string) {
	switch cause {
	case FenceRivalAcquired:
		c.RivalAcquired++
	case FenceRivalLateCopy:
		c.RivalLateCopy++
	case FenceOwnLateCopy:
		c.OwnLateCopy++
	case FenceFaultMade:
		c.FaultMade++
	default:
		c.Unexplained++
	}
}

// FenceAttribution is the cause of one refusal with ErrFenced (an
// [EventFenced]): Cause is one of the Fence* constants, By names the rival
// member or the fault, Fault is the index of the fault in the nemesis log
// (-1 for none), and Evidence says how the cause was found: "pair P" when
// the pair that fenced the token (its producer id, its epoch + 1) was
// seen, "time" when only the instants tie them.
type FenceAttribution struct {
	Member      string `json:"member"`
	Incarnation int    `json:"inc"`
	Role        string `json:"role"`
	Token       string `json:"token"`
	Seq         int64  `json:"seq,omitempty"`
	AtMillis    int64  `json:"at"`
	Cause       string `json:"cause"`
	By          string `json:"by,omitempty"`
	Fault       int    `json:"fault"`
	Evidence    string `json:"evidence,omitempty"`
}

// mintLead is how long before its acquired event a member's mint may have
// been answered (its lease write and the first read of the state topic
// come in between): a copy applied after it and before the fence is tied
// to the fence by time when no pair tells.
const mintLead = 2 * time.Second

// defaultCopyLife stands in for [CheckConfig.CopyLife] when it is zero:
// the lease plus franz-go's longest read timeout.
const defaultCopyLife = 10 * time.Second

// mintCopy is one copy of a faulted InitProducerId that the broker
// applied.
type mintCopy struct {
	fault    Fault
	atMillis int64
	pair     string // "" when its answer was not read
	toClient bool   // the answer went to the member: its own mint
	second   bool   // the proxy's duplicate
}

// mintCopies lists the applied copies of the faulted InitProducerId
// requests of a role, in the order of their instants.
func mintCopies(faults []Fault, role string) []mintCopy {
	var out []mintCopy
	for _, f := range faults {
		h := f.Hit
		if f.Kind != FaultRequest || h == nil || h.Key != kmsg.InitProducerID.Int16() || h.TxnID != role {
			continue
		}
		if len(h.Mints) > 0 {
			answers := 0
			for _, m := range h.Mints {
				out = append(out, mintCopy{fault: f, atMillis: m.AtMillis, pair: m.Token(), toClient: m.ToClient,
					second: f.Request == RequestDuplicate && answers > 0})
				answers++
			}
			continue
		}
		// No answer read: an older log, or an answer that never came. The
		// copy was applied about when the proxy let it go.
		switch f.Request {
		case RequestHold, RequestResetHold:
			if h.ReleasedMillis > 0 && h.ClientGone {
				out = append(out, mintCopy{fault: f, atMillis: h.ReleasedMillis})
			}
		case RequestDuplicate:
			out = append(out, mintCopy{fault: f, atMillis: h.AtMillis, second: true})
		case RequestLoseAnswer, RequestAppliedError:
			out = append(out, mintCopy{fault: f, atMillis: h.AtMillis})
		}
	}
	slices.SortStableFunc(out, func(a, b mintCopy) int { return cmp.Compare(a.atMillis, b.atMillis) })
	return out
}

// attributeFence finds the cause of the refusal ev (an EventFenced):
// first by the pair that fenced its token (the same producer id, the
// epoch + 1, else + 2), among the copies of faulted InitProducerId
// requests, the rivals' acquisitions, the lease records and the mint log;
// then, when no pair tells, by time: the first faulted copy, or mint of
// another producer id, applied from mintLead before the acquisition of the
// token to the fence, else an acquisition of a newer term by a rival up to
// the copy life after the fence.
func attributeFence(in CheckInput, ev Event, starts map[string]int64) FenceAttribution {
	a := FenceAttribution{Member: ev.Member, Incarnation: ev.Incarnation, Role: ev.Role, Token: ev.Token, Seq: ev.Seq,
		AtMillis: ev.WallMillis, Fault: -1}
	copies := mintCopies(in.Faults, ev.Role)
	fromCopy := func(c mintCopy, evidence string) FenceAttribution {
		a.Fault, a.Evidence = c.fault.Index, evidence
		a.By = fmt.Sprintf("fault %d (%s of InitProducerId, member %s)", c.fault.Index, c.fault.Request, c.fault.Target)
		switch {
		case c.second:
			a.Cause = FenceFaultMade
		case c.toClient:
			a.Cause = FenceRivalAcquired // the rival's own mint, which the proxy saw answered
			if c.fault.Target == ev.Member {
				a.Cause = FenceUnexplained // the member's own answered mint cannot fence its token
			}
		case c.fault.Target == ev.Member:
			a.Cause = FenceOwnLateCopy
		default:
			a.Cause = FenceRivalLateCopy
		}
		return a
	}
	rival := func(member string, incarnation int) bool {
		return member != ev.Member || incarnation != ev.Incarnation
	}

	// The pair of the next epoch, else the one after it: a mint while the
	// holder's transaction is open makes the coordinator abort it under
	// the next epoch (that abort fences the holder, and nobody is answered
	// its pair), and the mint's retry gets the epoch after.
	if tok, err := coordination.ParseFencingToken(ev.Token); err == nil {
		for step, note := range []string{"", ", after the coordinator's abort of the open transaction under the epoch before"} {
			if int(tok.ProducerEpoch())+step+1 > 1<<15-1 {
				break
			}
			next, _ := coordination.NewFencingToken(tok.ProducerID(), tok.ProducerEpoch()+int16(step)+1) //nolint:gosec // bounded above
			if found, ok := attributeByPair(in, ev, copies, next, fromCopy, rival); ok {
				found.Evidence += note
				if step == 1 {
					return abortedBy(in, ev, starts, found)
				}
				return found
			}
		}
	}

	since, ok := starts[ev.Token]
	if !ok {
		since = ev.WallMillis - in.Config.Lease.Milliseconds()
	}
	for _, c := range copies {
		if c.pair == "" && c.atMillis >= since-mintLead.Milliseconds() && c.atMillis <= ev.WallMillis {
			return fromCopy(c, "time")
		}
	}
	for _, m := range in.Mints {
		if m.TxnID != ev.Role || m.Code != 0 || m.AtMillis < since-mintLead.Milliseconds() || m.AtMillis > ev.WallMillis || m.Member == ev.Member && m.ToClient {
			continue
		}
		if tok, err := coordination.ParseFencingToken(ev.Token); err == nil && tok.ProducerID() == m.Producer {
			continue // of the same producer id, the pair told: not the fencing mint
		}
		return fromMint(a, ev, m, in.Faults, "time (mint log)")
	}
	life := in.Config.CopyLife
	if life <= 0 {
		life = in.Config.Lease + defaultCopyLife
	}
	first, by := int64(0), ""
	for _, e := range in.Events {
		if e.Kind != EventAcquired || e.Role != ev.Role || e.Token == ev.Token || !rival(e.Member, e.Incarnation) {
			continue
		}
		if e.WallMillis >= since && e.WallMillis <= ev.WallMillis+life.Milliseconds() && (by == "" || e.WallMillis < first) {
			first, by = e.WallMillis, e.Member
		}
	}
	if by != "" {
		a.Cause, a.By, a.Evidence = FenceRivalAcquired, by, "time"
		return a
	}
	a.Cause = FenceUnexplained
	return a
}

// fromMint attributes the fence ev to a mint of the mint log: the second
// answer of the proxy's duplicate, a rival's mint answered to it, a copy
// that went nowhere (a rival's or the member's own, applied after its
// client gave up), or the member's own answered mint, which nothing above
// explains. A mint that a request fault took names the fault: the latest
// of its member, mode and role taken at or before the answer.
func fromMint(a FenceAttribution, ev Event, m Mint, faults []Fault, evidence string) FenceAttribution {
	a.Evidence = evidence
	a.By = fmt.Sprintf("%s's InitProducerId (%s, answer to the client %t)", m.Member, m.Token(), m.ToClient)
	if m.Fault != "" {
		for _, f := range faults {
			if f.Kind == FaultRequest && f.Target == m.Member && f.Request == m.Fault && f.Hit != nil && f.Hit.TxnID == m.TxnID &&
				f.Hit.Key == kmsg.InitProducerID.Int16() && f.Hit.AtMillis <= m.AtMillis {
				a.Fault = f.Index
			}
		}
		a.By = fmt.Sprintf("%s's InitProducerId under a %s fault (%s, answer to the client %t)", m.Member, m.Fault, m.Token(), m.ToClient)
	}
	switch {
	case m.Fault == RequestDuplicate && !m.ToClient:
		a.Cause = FenceFaultMade
	case m.Member != ev.Member && m.ToClient:
		a.Cause, a.By = FenceRivalAcquired, m.Member
	case m.Member != ev.Member:
		a.Cause = FenceRivalLateCopy
	case !m.ToClient:
		a.Cause = FenceOwnLateCopy
	default:
		a.Cause = FenceUnexplained
	}
	return a
}

// attributeByPair attributes the fence ev to the mint of the pair next:
// a copy of a faulted InitProducerId, a rival's acquisition, a rival's
// lease record or a line of the mint log; it reports false when none has
// it.
func attributeByPair(in CheckInput, ev Event, copies []mintCopy, next coordination.FencingToken,
	fromCopy func(mintCopy, string) FenceAttribution, rival func(string, int) bool,
) (FenceAttribution, bool) {
	a := FenceAttribution{Member: ev.Member, Incarnation: ev.Incarnation, Role: ev.Role, Token: ev.Token, Seq: ev.Seq,
		AtMillis: ev.WallMillis, Fault: -1}
	fencing := next.String()
	evidence := "pair " + fencing
	for _, c := range copies {
		if c.pair == fencing {
			return fromCopy(c, evidence), true
		}
	}
	for _, e := range in.Events {
		if e.Kind == EventAcquired && e.Role == ev.Role && e.Token == fencing && rival(e.Member, e.Incarnation) {
			a.Cause, a.By, a.Evidence = FenceRivalAcquired, e.Member, evidence
			return a, true
		}
	}
	for _, l := range in.Leases[ev.Role] {
		if !l.Tombstone && l.Lease.Token == next && l.Lease.Member.String() != ev.Member {
			a.Cause, a.By, a.Evidence = FenceRivalAcquired, l.Lease.Member.String(), evidence+" (lease record)"
			return a, true
		}
	}
	for _, m := range in.Mints {
		if m.TxnID == ev.Role && m.Code == 0 && m.Token() == fencing {
			return fromMint(a, ev, m, in.Faults, evidence+" (mint log)"), true
		}
	}
	return a, false
}

// abortedBy refines found, a fence by the pair after next: the next epoch
// went to the coordinator's abort of the holder's open transaction, which
// the first InitProducerId of the role that the coordinator answered with
// an error from the acquisition to the fence set off. When no client saw
// that answer, a copy that its member had given up on made the abort: a
// late copy of a rival, or of the member itself.
func abortedBy(in CheckInput, ev Event, starts map[string]int64, found FenceAttribution) FenceAttribution {
	since, ok := starts[ev.Token]
	if !ok {
		since = ev.WallMillis - in.Config.Lease.Milliseconds()
	}
	first := -1
	for i, m := range in.Mints {
		if m.TxnID != ev.Role || m.Code == 0 || m.AtMillis < since-mintLead.Milliseconds() || m.AtMillis > ev.WallMillis ||
			m.Member == ev.Member && m.ToClient { // the member's own attempts, answered, came before its mint
			continue
		}
		if first < 0 || m.AtMillis < in.Mints[first].AtMillis {
			first = i
		}
	}
	if first >= 0 {
		m := in.Mints[first]
		if m.ToClient {
			return found // the rival's first attempt, answered: its mint
		}
		a := fromMint(found, ev, m, in.Faults, found.Evidence+"; the abort set off by a copy answered code "+strconv.Itoa(int(m.Code)))
		a.By = fmt.Sprintf("%s's InitProducerId (answered code %d, to the client %t)", m.Member, m.Code, m.ToClient)
		if m.Fault != "" {
			a.By = fmt.Sprintf("%s's InitProducerId under a %s fault (answered code %d, to the client %t)", m.Member, m.Fault, m.Code, m.ToClient)
		}
		return a
	}
	return found
}
