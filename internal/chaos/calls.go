package chaos

import (
	"fmt"
	"time"
)

// CallStats summarises the calls of one kind ([Call]): how far past its
// context a call returned. The figure is that no call returns more
// than one second after the end of its context.
type CallStats struct {
	// Call is one of the Call* constants.
	Call string `json:"call"`

	// Count counts the calls, Bounded those whose context had a deadline,
	// and Ended those that returned after their context had ended (its
	// deadline passed or it was cancelled).
	Count   int `json:"count"`
	Bounded int `json:"bounded"`
	Ended   int `json:"ended"`

	// MaxOverMillis is the longest time from the end of a call's context
	// to its return, and Worst names that call.
	MaxOverMillis int64  `json:"max_over_ms"`
	Worst         string `json:"worst,omitempty"`

	// MaxTookMillis is the longest call.
	MaxTookMillis int64 `json:"max_took_ms"`

	// Excluded counts the calls left out because a pause (SIGSTOP) of
	// their member overlapped them: a stopped process cannot return.
	Excluded int `json:"excluded_paused"`
}

// measureCalls summarises the call logs by kind of call.
func measureCalls(in CheckInput, r *Report) {
	byKind := make(map[string]*CallStats)
	order := []string{CallAcquire, CallWrite, CallResign, CallTransfer, CallClose}
	for _, c := range in.Calls {
		st := byKind[c.Call]
		if st == nil {
			st = &CallStats{Call: c.Call}
			byKind[c.Call] = st
		}
		end := c.WallMillis + c.TookMillis
		if pausedDuring(in.Faults, c.Member, c.WallMillis, end) {
			st.Excluded++
			continue
		}
		st.Count++
		if c.BudgetMillis > 0 {
			st.Bounded++
		}
		st.MaxTookMillis = max(st.MaxTookMillis, c.TookMillis)
		if c.OverMillis >= 0 {
			st.Ended++
			if c.OverMillis >= st.MaxOverMillis {
				st.MaxOverMillis = c.OverMillis
				st.Worst = fmt.Sprintf("%s/%d %s at %s: budget %s, took %s (%s)", c.Member, c.Incarnation, c.Role,
					formatMillis(c.WallMillis), time.Duration(c.BudgetMillis)*time.Millisecond,
					time.Duration(c.TookMillis)*time.Millisecond, c.Error)
			}
		}
	}
	for _, kind := range order {
		if st := byKind[kind]; st != nil {
			r.Calls = append(r.Calls, *st)
			r.MaxCallOverMillis = max(r.MaxCallOverMillis, st.MaxOverMillis)
			delete(byKind, kind)
		}
	}
	for _, st := range byKind {
		r.Calls = append(r.Calls, *st)
		r.MaxCallOverMillis = max(r.MaxCallOverMillis, st.MaxOverMillis)
	}
}

// pausedDuring reports whether a pause of the member overlaps [from, to].
func pausedDuring(faults []Fault, member string, from, to int64) bool {
	for _, f := range faults {
		if f.Kind == FaultPause && f.Target == member && f.StartMillis <= to && f.EndMillis >= from {
			return true
		}
	}
	return false
}
