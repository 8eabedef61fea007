package chaos

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Change is one leadership change of a role: a term that began after the
// first term of the role in the fault phase.
type Change struct {
	// Role names the role; Token and Member name the new term and its
	// holder, From and FromMember the term before it.
	Role       string `json:"role"`
	Token      string `json:"token"`
	Member     string `json:"member,omitempty"`
	From       string `json:"from"`
	FromMember string `json:"from_member,omitempty"`

	// AtMillis is the host time at which the new term began: its acquired
	// event, or its first command if that came earlier.
	AtMillis int64 `json:"at"`

	// Fault is the index of the fault whose window holds the change (the
	// latest to begin, if several do), and Kind its kind; Fault is -1 and
	// Kind empty for a change that no fault explains, a needless failover.
	Fault int    `json:"fault"`
	Kind  string `json:"kind,omitempty"`
}

// FaultImpact is what one fault cost: the leadership changes in its window
// and the longest gap without an acknowledged command that overlaps it.
// The window of a fault runs from its start to its end (the heal; for a
// cluster fault, the recovery of the cluster) plus the failover bound.
type FaultImpact struct {
	Fault  int    `json:"fault"`
	Kind   string `json:"kind"`
	Target string `json:"target,omitempty"`

	// StartMillis and EndMillis bound the window, in host milliseconds.
	StartMillis int64 `json:"start"`
	EndMillis   int64 `json:"end"`

	// Changes counts the changes attributed to the fault, over all roles,
	// and RoleChanges the most of them in one role: a fault of a broker
	// that two roles need costs each role its own failover.
	Changes     int `json:"changes"`
	RoleChanges int `json:"role_changes"`

	// Handovers counts the changes that gave the role to another member.
	Handovers int `json:"handovers"`

	// LongestGapMillis is the longest time between two acknowledged
	// commands of one role that overlaps the window.
	LongestGapMillis int64 `json:"longest_gap_ms"`

	// GapFromMillis and GapToMillis place the longest gap: the instants of
	// the acknowledgements around it, relative to the start of the fault
	// (GapFromMillis may be negative: the last acknowledgement before the
	// fault). Both are 0 when no gap overlaps the window.
	GapFromMillis int64 `json:"gap_from_ms"`
	GapToMillis   int64 `json:"gap_to_ms"`

	// EndedMillis is the first end of a leadership in the window (an
	// ended or a fenced event), and AcquiredMillis the first acquisition,
	// relative to the start of the fault; -1 when there is none.
	EndedMillis    int64 `json:"ended_ms"`
	AcquiredMillis int64 `json:"acquired_ms"`

	// Epochs is the most producer epochs that one role used up in the
	// window: the epoch of its last term begun in the window less the
	// epoch of its term before the fault (a mint that won nothing counts
	// too), or, across a change of producer id, the terms begun in it.
	Epochs int `json:"epochs"`

	// Unknown counts the guarded writes of unknown outcome in the window.
	Unknown int `json:"unknown"`

	// DetectMillis is how long after the start of the fault Kafka noticed
	// it, from the nodes' logs ([KafkaEvent]): the fence of the node that
	// was killed or cut, or a new active controller after a stop; -1 when
	// the logs show nothing (a rolling restart is graceful; a cut of the
	// members' path to a node is invisible to Kafka; no logs were read).
	DetectMillis int64 `json:"detect_ms"`
}

// KindImpact summarises the faults of one kind.
type KindImpact struct {
	Kind   string `json:"kind"`
	Faults int    `json:"faults"`

	// ChangesP50 and ChangesMax are the median (nearest rank, the lower of
	// two middle values) and the largest count of changes of one role in
	// the window of one fault ([FaultImpact].RoleChanges), and Changes the
	// sum of the changes of every fault of the kind over all roles.
	ChangesP50 int `json:"changes_p50"`
	ChangesMax int `json:"changes_max"`
	Changes    int `json:"changes"`

	// Handovers counts the changes among Changes whose new term went to
	// another member; the others are a new epoch of the same member.
	Handovers int `json:"handovers"`

	// GapP50Millis and GapMaxMillis are the median and the largest longest
	// gap without an acknowledged command of one fault.
	GapP50Millis int64 `json:"gap_p50_ms"`
	GapMaxMillis int64 `json:"gap_max_ms"`

	// EpochsP50 and EpochsMax are the median and the largest
	// [FaultImpact].Epochs, and Unknown the sum of the writes of unknown
	// outcome.
	EpochsP50 int `json:"epochs_p50"`
	EpochsMax int `json:"epochs_max"`
	Unknown   int `json:"unknown"`

	// Detected counts the faults whose detection by Kafka the logs show,
	// and DetectP50Millis and DetectMaxMillis are the median and the
	// largest [FaultImpact].DetectMillis among them.
	Detected        int   `json:"detected"`
	DetectP50Millis int64 `json:"detect_p50_ms"`
	DetectMaxMillis int64 `json:"detect_max_ms"`
}

// measureImpact attributes the leadership changes of the fault phase to
// the faults whose windows hold them, and measures the gaps without an
// acknowledged command.
func measureImpact(in CheckInput, streams map[string][]located, r *Report) {
	tail := in.Config.FailoverBound().Milliseconds()
	type window struct {
		f        Fault
		from, to int64
	}
	windows := make([]window, 0, len(in.Faults))
	for _, f := range in.Faults {
		windows = append(windows, window{f: f, from: f.StartMillis, to: max(f.EndMillis, f.StartMillis) + tail})
	}
	holder := func(at int64) int {
		best := -1
		for i, w := range windows {
			if w.from <= at && at <= w.to && (best < 0 || w.from >= windows[best].from) {
				best = i
			}
		}
		return best
	}
	impacts := make([]FaultImpact, len(windows))
	perRole := make([]map[string]int, len(windows))
	for i, w := range windows {
		impacts[i] = FaultImpact{Fault: w.f.Index, Kind: w.f.Kind, Target: w.f.Target, StartMillis: w.from, EndMillis: w.to}
	}

	// The changes: the terms of each role in the order in which they began.
	starts := termStarts(in, streams)
	holders := make(map[string]map[string]string) // role -> token -> member
	for _, ev := range in.Events {
		if ev.Kind == EventAcquired {
			if holders[ev.Role] == nil {
				holders[ev.Role] = make(map[string]string)
			}
			holders[ev.Role][ev.Token] = ev.Member
		}
	}
	for role, stream := range streams {
		for _, c := range stream {
			if holders[role] == nil {
				holders[role] = make(map[string]string)
			}
			holders[role][c.cmd.Token] = c.cmd.Member
		}
	}
	for _, role := range in.Roles {
		type term struct {
			token string
			at    int64
		}
		var terms []term
		for token, at := range starts[role] {
			terms = append(terms, term{token, at})
		}
		slices.SortFunc(terms, func(a, b term) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.token, b.token)) })
		for i := 1; i < len(terms); i++ {
			if terms[i].at < in.Config.StartMillis {
				continue // a change before the fault phase: the run was setting up
			}
			ch := Change{Role: role, Token: terms[i].token, Member: holders[role][terms[i].token],
				From: terms[i-1].token, FromMember: holders[role][terms[i-1].token], AtMillis: terms[i].at, Fault: -1}
			if w := holder(ch.AtMillis); w >= 0 {
				ch.Fault, ch.Kind = windows[w].f.Index, windows[w].f.Kind
				impacts[w].Changes++
				if ch.Member != ch.FromMember {
					impacts[w].Handovers++
				}
				if perRole[w] == nil {
					perRole[w] = make(map[string]int)
				}
				perRole[w][role]++
				impacts[w].RoleChanges = max(impacts[w].RoleChanges, perRole[w][role])
			} else {
				r.ChangesWithoutFault++
			}
			r.Changes = append(r.Changes, ch)
		}
	}
	slices.SortFunc(r.Changes, func(a, b Change) int { return cmp.Compare(a.AtMillis, b.AtMillis) })

	// The gaps: between two acknowledged commands of one role.
	acks := make(map[string][]int64)
	for _, ack := range in.Acks {
		acks[ack.Role] = append(acks[ack.Role], ack.AckMillis)
	}
	for _, role := range in.Roles {
		times := acks[role]
		slices.Sort(times)
		for i := 1; i < len(times); i++ {
			a, b := times[i-1], times[i]
			if b < in.Config.StartMillis {
				continue
			}
			inWindow := false
			for k, w := range windows {
				if b > w.from && a < w.to {
					inWindow = true
					if b-a > impacts[k].LongestGapMillis {
						impacts[k].LongestGapMillis = b - a
						impacts[k].GapFromMillis, impacts[k].GapToMillis = a-w.from, b-w.from
					}
				}
			}
			if !inWindow {
				r.LongestGapNoFaultMillis = max(r.LongestGapNoFaultMillis, b-a)
			}
			r.LongestGapMillis = max(r.LongestGapMillis, b-a)
		}
	}
	for i, w := range windows {
		impacts[i].DetectMillis = detectionMillis(w.f, in.KafkaEvents)
		impacts[i].EndedMillis, impacts[i].AcquiredMillis = -1, -1
		for _, ev := range in.Events {
			if ev.WallMillis < w.from || ev.WallMillis > w.to {
				continue
			}
			at := ev.WallMillis - w.from
			switch ev.Kind {
			case EventWriteError:
				impacts[i].Unknown++
			case EventEnded, EventFenced:
				if impacts[i].EndedMillis < 0 || at < impacts[i].EndedMillis {
					impacts[i].EndedMillis = at
				}
			case EventAcquired:
				if impacts[i].AcquiredMillis < 0 || at < impacts[i].AcquiredMillis {
					impacts[i].AcquiredMillis = at
				}
			}
		}
		for _, role := range in.Roles {
			impacts[i].Epochs = max(impacts[i].Epochs, epochsUsed(starts[role], w.f.StartMillis, w.from, w.to))
		}
	}
	r.Impacts = impacts

	for _, kind := range AllFaults {
		var changes, gaps, epochs, detects []int64
		k := KindImpact{Kind: kind}
		for _, im := range impacts {
			if im.Kind != kind {
				continue
			}
			k.Faults++
			k.Changes += im.Changes
			k.Handovers += im.Handovers
			changes = append(changes, int64(im.RoleChanges))
			gaps = append(gaps, im.LongestGapMillis)
			epochs = append(epochs, int64(im.Epochs))
			k.Unknown += im.Unknown
			if im.DetectMillis >= 0 {
				detects = append(detects, im.DetectMillis)
			}
		}
		if k.Faults == 0 {
			continue
		}
		slices.Sort(changes)
		slices.Sort(gaps)
		slices.Sort(epochs)
		k.EpochsP50, k.EpochsMax = int(percentile(epochs, 50)), int(epochs[len(epochs)-1])
		if len(detects) > 0 {
			slices.Sort(detects)
			k.Detected, k.DetectP50Millis, k.DetectMaxMillis = len(detects), percentile(detects, 50), detects[len(detects)-1]
		}
		k.ChangesP50, k.ChangesMax = int(percentile(changes, 50)), int(changes[len(changes)-1])
		k.GapP50Millis, k.GapMaxMillis = percentile(gaps, 50), gaps[len(gaps)-1]
		r.ByKind = append(r.ByKind, k)
	}
}

// epochsUsed returns the producer epochs that one role used up in
// [from, to]: starts maps each token to the instant its term began. The
// term before the fault is the last one begun before at.
func epochsUsed(starts map[string]int64, at, from, to int64) int {
	var before coordination.FencingToken
	haveBefore, beforeAt := false, int64(0)
	var within []coordination.FencingToken
	for text, began := range starts {
		tok, err := coordination.ParseFencingToken(text)
		if err != nil {
			continue
		}
		switch {
		case began < at && (!haveBefore || began > beforeAt):
			before, beforeAt, haveBefore = tok, began, true
		case began >= from && began <= to:
			within = append(within, tok)
		}
	}
	if len(within) == 0 {
		return 0
	}
	if !haveBefore {
		return len(within)
	}
	top := before.ProducerEpoch()
	for _, tok := range within {
		if tok.ProducerID() != before.ProducerID() {
			return len(within)
		}
		top = max(top, tok.ProducerEpoch())
	}
	return int(top - before.ProducerEpoch())
}

// KindImpactOf returns the summary of one fault kind, and false when the
// run had no fault of that kind.
func (r *Report) KindImpactOf(kind string) (KindImpact, bool) {
	for _, k := range r.ByKind {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindImpact{}, false
}

func (c Change) String() string {
	cause := "no fault"
	if c.Fault >= 0 {
		cause = fmt.Sprintf("fault %d %s", c.Fault, c.Kind)
	}
	return fmt.Sprintf("%s %s: %s (%s) -> %s (%s), %s", formatMillis(c.AtMillis), c.Role, c.From, c.FromMember, c.Token, c.Member, cause)
}
