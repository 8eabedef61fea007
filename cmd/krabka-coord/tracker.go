package main

// The events of a role: the changes that coordination.Observe reports, as
// watch and demo print them, and the change of the coordinator's epoch.
// They live in internal/clifmt (events.go), which the demo shares.

import "github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"

// Kinds of the events of a role.
const (
	eventState        = clifmt.EventState
	eventRegistered   = clifmt.EventRegistered
	eventDeregistered = clifmt.EventDeregistered
	eventGranted      = clifmt.EventGranted
	eventRenewed      = clifmt.EventRenewed
	eventRestored     = clifmt.EventRestored
	eventReacquired   = clifmt.EventReacquired
	eventExpired      = clifmt.EventExpired
	eventLapsed       = clifmt.EventLapsed
	eventEpoch        = clifmt.EventEpoch
)

// roleEvent is one change of a role: a line of watch. See json.md.
type roleEvent = clifmt.RoleEvent

var (
	eventOf    = clifmt.EventOf
	epochEvent = clifmt.EpochEvent
)
