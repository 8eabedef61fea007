package main

// The output of elect and run: one event for every change of the
// member's state, a JSON line with --output json, or a line of text.

import (
	"fmt"
	"time"
)

// holderEvent is a line of elect and run with --output json: one for
// every change of the member's state. See json.md.
type holderEvent struct {
	At        timeJSON   `json:"at"`
	Event     string     `json:"event"`
	Role      string     `json:"role"`
	Member    string     `json:"member"`
	Topic     string     `json:"topic"`
	Partition int        `json:"partition"`
	Token     *tokenJSON `json:"token"`

	// CurrentToken is the coordinator's token after a fence, null
	// otherwise.
	CurrentToken *tokenJSON `json:"current_token"`

	// Deadline is the lease deadline that an event concerns, null when
	// none does.
	Deadline *timeJSON `json:"deadline"`

	// ExitCode is the exit code of run's command, null for other events.
	ExitCode *int   `json:"exit_code"`
	Message  string `json:"message"`
}

// report prints an event: a JSON line, or the text on stdout (on stderr
// when toStderr: a progress note rather than a result).
func (h *holder) report(event holderEvent, text string, toStderr bool) {
	if h.g.json() {
		event.At = newTimeJSON(time.Now().UnixMilli())
		event.Role, event.Member = h.role.String(), h.member.String()
		event.Topic, event.Partition = h.partition.Topic, h.partition.Partition
		if event.Message == "" {
			event.Message = text
		}
		_ = writeJSON(h.g.stdout, event)
		return
	}
	switch {
	case text == "":
	case toStderr:
		fmt.Fprintln(h.g.stderr, text)
	default:
		fmt.Fprintln(h.g.stdout, text)
	}
}
