package main

// The step-down of a holder, on SIGUSR1 or on POST /step-down (which
// 'krabka-coord step-down' sends): it resigns, so the first standby takes
// over at once, and campaigns again at the tail of the roster.

import (
	"context"
	"fmt"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// requestStepDown asks the holder to step down; the HTTP handler of POST
// /step-down calls it.
func (h *holder) requestStepDown() error {
	if !h.metrics.isLeading() {
		return fmt.Errorf("member %s does not hold role %s: nothing to step down from", h.member, h.role)
	}
	if h.handingOver.Load() {
		// Accepted, it would wait behind the handover and be dropped
		// when the role moved, while 'krabka-coord step-down' reported
		// the transfer's new holder as its own.
		return fmt.Errorf("member %s is handing role %s over (a transfer or a drain): step down after it, if it still holds the role", h.member, h.role)
	}
	select {
	case h.stepDownRequests <- struct{}{}:
	default: // one is pending already
	}
	return nil
}

// stepDown resigns and goes on as a standby: the caller campaigns again,
// at the tail of the roster. It returns an error only when the leadership
// had ended otherwise and the member does not rejoin.
func (h *holder) stepDown(leadership *coordination.Leadership, by string) error {
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	err := h.resignLeadership(ctx, leadership)
	if cause := endedBefore(leadership, err); cause != nil {
		if err := h.lostTo(leadership, cause); !h.rejoinAfter(err) {
			return err
		}
		return nil
	}
	h.metrics.ended("stepped_down")
	h.metrics.rejoined("step_down")
	note := "the first standby in the roster, if any, takes over at once if it is alive"
	if err != nil {
		note = fmt.Sprintf("the cluster did not confirm the resignation (%s), so the standbys take over at the lease deadline", oneLine(errText(err)))
	}
	h.report(holderEvent{Event: "stepped_down", Token: newTokenJSON(leadership.Token()), Message: by},
		fmt.Sprintf("stepped down: member %s gave up role %s (token %s) on %s; %s; it campaigns again at the tail of the roster", h.shownMember(), h.shownRole(), leadership.Token(), by, note), false)
	return nil
}
