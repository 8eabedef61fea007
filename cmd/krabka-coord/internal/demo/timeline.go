package demo

// The output of demo: the timeline of events as text rows while it runs,
// and the checks; or, with --output json, one document at the end.

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"
	"github.com/krabka-io/krabka-streams-go/coordination"
)

// timeline prints the events of the demo as they happen, or collects them
// for the JSON document.
type timeline struct {
	mu     sync.Mutex
	w      io.Writer
	json   bool
	start  time.Time
	width  int // of the token column
	events []timelineEvent
}

// timelineEvent is one row of the timeline. See json.md.
type timelineEvent struct {
	At        clifmt.TimeJSON   `json:"at"`
	ElapsedMs int64             `json:"elapsed_ms"`
	Member    string            `json:"member"` // "-" for the log itself
	Event     string            `json:"event"`
	Token     *clifmt.TokenJSON `json:"token"`

	// Rank is the member's standing: leader, deposed, a rank of succession,
	// or "-".
	Rank    string `json:"rank"`
	Message string `json:"message"`

	token string // the token column of the text row
}

func (t *timeline) header(d *demo) {
	if t.json {
		return
	}
	fmt.Fprintf(t.w, "krabka-coord demo: 3 members compete for role %s on %s\n", clifmt.ShowName(d.role.String()), d.cluster)
	fmt.Fprintf(t.w, "lease %v, renew every %v, challenge stagger %v; state on %s, commands to %s\n\n",
		d.config.Duration(), d.config.RenewInterval(), d.config.ChallengeStagger(), d.part, d.commands)
	// kfake derives a producer id from a hash of the transactional id, so
	// its tokens are wide; Kafka allocates small ids.
	t.width = 9
	if !d.real {
		t.width = 21
	}
	fmt.Fprintf(t.w, "%8s  %-7s  %-*s  %-7s  %s\n", "ELAPSED", "MEMBER", t.width, "TOKEN", "RANK", "EVENT")
}

func (t *timeline) add(member, event, token, rank, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	e := timelineEvent{At: clifmt.NewTimeJSON(now.UnixMilli()), ElapsedMs: now.Sub(t.start).Milliseconds(), Member: member, Event: event, Rank: rank, Message: message, token: token}
	if parsed, err := coordination.ParseFencingToken(token); err == nil {
		e.Token = clifmt.NewTokenJSON(parsed)
	}
	t.events = append(t.events, e)
	if !t.json {
		fmt.Fprint(t.w, formatTimelineRow(e, t.width))
	}
}

// formatTimelineRow writes one row of the timeline.
func formatTimelineRow(e timelineEvent, width int) string {
	return fmt.Sprintf("%7.2fs  %-7s  %-*s  %-7s  %s\n", float64(e.ElapsedMs)/1000, e.Member, width, e.token, e.Rank, e.Message)
}

// demoJSON is the document of demo --output json.
type demoJSON struct {
	OK           bool              `json:"ok"`
	DurationMs   int64             `json:"duration_ms"`
	Cluster      string            `json:"cluster"`
	Role         string            `json:"role"`
	StateTopic   string            `json:"state_topic"`
	Partition    int               `json:"partition"`
	CommandTopic string            `json:"command_topic"`
	LeaseMs      int64             `json:"lease_ms"`
	RenewMs      int64             `json:"renew_ms"`
	StaggerMs    int64             `json:"stagger_ms"`
	Events       []timelineEvent   `json:"events"`
	Commands     []demoCommandJSON `json:"commands"`
	Checks       []checkJSON       `json:"checks"`
}

// demoCommandJSON is a command as the demo's JSON document shows it: the
// record's value, with the token as an object, and the record's offset.
type demoCommandJSON struct {
	Seq    int               `json:"seq"`
	Member string            `json:"member"`
	Token  *clifmt.TokenJSON `json:"token"`
	Offset int64             `json:"offset"`
}

// demoCommands converts the commands read back for the JSON document.
func demoCommands(commands []commandJSON) []demoCommandJSON {
	out := make([]demoCommandJSON, len(commands))
	for i, c := range commands {
		out[i] = demoCommandJSON{Seq: c.Seq, Member: c.Member, Offset: c.Offset}
		if token, err := coordination.ParseFencingToken(c.Token); err == nil {
			out[i].Token = clifmt.NewTokenJSON(token)
		}
	}
	return out
}

// finish prints the checks, and reports whether all of them held.
func (t *timeline) finish(d *demo, commands []commandJSON, elapsed time.Duration) bool {
	d.mu.Lock()
	checks := append([]checkJSON(nil), d.checks...)
	d.mu.Unlock()
	ok := len(checks) > 0
	for _, c := range checks {
		ok = ok && c.OK
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.json {
		_ = clifmt.WriteJSON(t.w, demoJSON{
			OK: ok, DurationMs: elapsed.Milliseconds(), Cluster: d.cluster, Role: d.role.String(),
			StateTopic: d.part.Topic, Partition: d.part.Partition, CommandTopic: d.commands,
			LeaseMs: d.config.Duration().Milliseconds(), RenewMs: d.config.RenewInterval().Milliseconds(), StaggerMs: d.config.ChallengeStagger().Milliseconds(),
			Events: t.events, Commands: demoCommands(commands), Checks: checks,
		})
		return ok
	}
	fmt.Fprintf(t.w, "\ncheck: %s read back read_committed, against the acknowledged writes\n", d.commands)
	for _, c := range checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(t.w, "  %s  %-24s  %s\n", mark, c.Name, c.Detail)
	}
	verdict := "PASSED"
	if !ok {
		verdict = "FAILED"
	}
	fmt.Fprintf(t.w, "\ndemo %s in %s\n", verdict, clifmt.FormatSeconds(elapsed))
	return ok
}
