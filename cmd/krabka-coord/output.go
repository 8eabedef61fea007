package main

// The output that the commands share: JSON lines, names made safe for a
// terminal, and the formats of tokens, instants and durations. They live in
// internal/clifmt, which the demo (internal/demo) shares; these are the
// names the commands know them by.

import "github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"

type (
	tokenJSON = clifmt.TokenJSON
	timeJSON  = clifmt.TimeJSON
)

var (
	writeJSON     = clifmt.WriteJSON
	showName      = clifmt.ShowName
	newTokenJSON  = clifmt.NewTokenJSON
	newTimeJSON   = clifmt.NewTimeJSON
	formatMillis  = clifmt.FormatMillis
	formatClock   = clifmt.FormatClock
	formatSeconds = clifmt.FormatSeconds
	formatShort   = clifmt.FormatShort
	rosterLine    = clifmt.RosterLine
	formatAgo     = clifmt.FormatAgo
	tokenText     = clifmt.TokenText
	timePtr       = clifmt.TimePtr
	oneLine       = clifmt.OneLine
	errText       = clifmt.ErrText
)
