// Package clifmt is the output that the commands of krabka-coord and its
// demo (internal/demo) share: JSON lines, names made safe for a
// terminal, and the formats of tokens, instants and durations.
package clifmt

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

// WriteJSON writes one value as one line of JSON.
func WriteJSON(w io.Writer, value any) error {
	line, err := json.Marshal(value)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// ShowName writes a role or member name for text output: as it is when
// every rune is printable (the ASCII space included, no other whitespace),
// and quoted with strconv.Quote otherwise, so that a name from the state
// topic cannot move the cursor, clear the operator's screen or split a
// line. JSON output carries the names as they are: its encoder escapes
// them.
func ShowName(name string) string {
	for _, r := range name {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(name)
		}
	}
	return name
}

// TokenJSON is a fencing token in JSON: the canonical text and the pair.
type TokenJSON struct {
	Token         string `json:"token"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
}

// NewTokenJSON is the TokenJSON of a token.
func NewTokenJSON(token coordination.FencingToken) *TokenJSON {
	return &TokenJSON{Token: token.String(), ProducerID: token.ProducerID(), ProducerEpoch: token.ProducerEpoch()}
}

// TimeJSON is an instant in JSON: RFC 3339 with milliseconds, and the
// milliseconds since the Unix epoch that the records carry.
type TimeJSON struct {
	Time   string `json:"time"`
	Millis int64  `json:"ms"`
}

// NewTimeJSON is the TimeJSON of an instant in milliseconds since the
// Unix epoch.
func NewTimeJSON(millis int64) TimeJSON {
	return TimeJSON{Time: FormatMillis(millis), Millis: millis}
}

// FormatMillis writes an instant of a record as RFC 3339 in UTC with
// milliseconds.
func FormatMillis(millis int64) string {
	return time.UnixMilli(millis).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// FormatClock writes the local time of day with milliseconds, for a line of
// watch.
func FormatClock(t time.Time) string {
	return t.Format("15:04:05.000")
}

// FormatSeconds writes an extent in seconds with two decimals: "2.48s".
func FormatSeconds(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// FormatShort writes a short extent in milliseconds, and a longer one as
// FormatSeconds does: "4ms", "2.48s".
func FormatShort(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return FormatSeconds(d)
}

// RosterLine describes the roster in rank order in one line.
func RosterLine(state coordination.RoleState) string {
	var b strings.Builder
	if holder, ok := state.Holder(); ok {
		fmt.Fprintf(&b, "holder %s", ShowName(holder.String()))
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
		standbys = append(standbys, fmt.Sprintf("%s (rank %d)", ShowName(entry.Member.String()), rank))
	}
	if len(standbys) == 0 {
		b.WriteString("; no standby")
	} else {
		b.WriteString("; standbys " + strings.Join(standbys, ", "))
	}
	return b.String()
}

// FormatAgo writes how long ago or ahead an instant is: "in 2.48s", "1.20s
// ago".
func FormatAgo(millis, nowMillis int64) string {
	d := time.Duration(millis-nowMillis) * time.Millisecond
	if d > 0 {
		return "in " + FormatSeconds(d)
	}
	return FormatSeconds(-d) + " ago"
}

// TokenText writes a token of a JSON field for text output: "-" for none.
func TokenText(token *TokenJSON) string {
	if token == nil {
		return "-"
	}
	return token.Token
}

// TimePtr is a TimeJSON of an instant, for an optional field.
func TimePtr(millis int64) *TimeJSON {
	t := NewTimeJSON(millis)
	return &t
}

// OneLine folds a message onto one line.
func OneLine(message string) string {
	message = strings.TrimSpace(message)
	message = strings.ReplaceAll(message, "\r\n", "; ")
	return strings.ReplaceAll(message, "\n", "; ")
}

// ErrText is the message of an error of the library for the CLI's own
// messages: without the "coordination: " prefix, which the CLI's own
// prefix replaces. Every message of the CLI that quotes a library error
// goes through it.
func ErrText(err error) string {
	return strings.TrimPrefix(err.Error(), "coordination: ")
}
