package main

// The output that the commands share: JSON lines, names made safe for a
// terminal, and the formats of tokens, instants and durations.

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// writeJSON writes one value as one line of JSON.
func writeJSON(w io.Writer, value any) error {
	line, err := json.Marshal(value)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// showName writes a role or member name for text output: as it is when
// every rune is printable (the ASCII space included, no other whitespace),
// and quoted with strconv.Quote otherwise, so that a name from the state
// topic cannot move the cursor, clear the operator's screen or split a
// line. JSON output carries the names as they are: its encoder escapes
// them.
func showName(name string) string {
	for _, r := range name {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(name)
		}
	}
	return name
}

// tokenJSON is a fencing token in JSON: the canonical text and the pair.
type tokenJSON struct {
	Token         string `json:"token"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
}

func newTokenJSON(token coordination.FencingToken) *tokenJSON {
	return &tokenJSON{Token: token.String(), ProducerID: token.ProducerID(), ProducerEpoch: token.ProducerEpoch()}
}

// timeJSON is an instant in JSON: RFC 3339 with milliseconds, and the
// milliseconds since the Unix epoch that the records carry.
type timeJSON struct {
	Time   string `json:"time"`
	Millis int64  `json:"ms"`
}

func newTimeJSON(millis int64) timeJSON {
	return timeJSON{Time: formatMillis(millis), Millis: millis}
}

// formatMillis writes an instant of a record as RFC 3339 in UTC with
// milliseconds.
func formatMillis(millis int64) string {
	return time.UnixMilli(millis).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// formatClock writes the local time of day with milliseconds, for a line of
// watch.
func formatClock(t time.Time) string {
	return t.Format("15:04:05.000")
}

// formatSeconds writes an extent in seconds with two decimals: "2.48s".
func formatSeconds(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// formatShort writes a short extent in milliseconds, and a longer one as
// formatSeconds does: "4ms", "2.48s".
func formatShort(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return formatSeconds(d)
}

// rosterLine describes the roster in rank order in one line.
func rosterLine(state coordination.RoleState) string {
	var b strings.Builder
	if holder, ok := state.Holder(); ok {
		fmt.Fprintf(&b, "holder %s", showName(holder.String()))
	} else {
		b.WriteString("no holder")
	}
	// The ranks of the log's order: the demo's story, in which no standby
	// lapses.
	var standbys []string
	holder, hasHolder := state.Holder()
	for _, entry := range state.Roster {
		if hasHolder && entry.Member == holder {
			continue
		}
		rank, _ := state.RankOf(entry.Member)
		standbys = append(standbys, fmt.Sprintf("%s (rank %d)", showName(entry.Member.String()), rank))
	}
	if len(standbys) == 0 {
		b.WriteString("; no standby")
	} else {
		b.WriteString("; standbys " + strings.Join(standbys, ", "))
	}
	return b.String()
}

// formatAgo writes how long ago or ahead an instant is: "in 2.48s", "1.20s
// ago".
func formatAgo(millis, nowMillis int64) string {
	d := time.Duration(millis-nowMillis) * time.Millisecond
	if d > 0 {
		return "in " + formatSeconds(d)
	}
	return formatSeconds(-d) + " ago"
}

// tokenText writes a token of a JSON field for text output: "-" for none.
func tokenText(token *tokenJSON) string {
	if token == nil {
		return "-"
	}
	return token.Token
}
