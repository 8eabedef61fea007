package main

// The campaign of elect and run: the wait for the role under the
// succession rules, with the CLI's two extensions of the library on, and
// what each way of its end means for the exit code.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// acquire waits for the role. It returns nil and nil when a signal ended
// the wait (the member left the roster), and an error with exit code 1 when
// --wait passed. A SIGUSR1 while it waits finds no leadership to step down
// from: it is reported and dropped, so that it does not step down the
// leadership that comes later.
func (h *holder) acquire(ctx context.Context, stepDown <-chan os.Signal) (*coordination.Leadership, error) {
	// campaign ends the campaign on a POST /drain: the member leaves the
	// roster (holder_transfer.go).
	campaign, cancelCampaign := context.WithCancel(ctx)
	defer cancelCampaign()
	waiting, stopWaiting := context.WithCancel(ctx)
	dropped := make(chan struct{})
	var drain *operatorRequest // set by the goroutine below; read after dropped closes
	go func() {
		defer close(dropped)
		for {
			select {
			case <-stepDown:
				h.report(holderEvent{Event: "step_down_ignored", Message: "SIGUSR1 while a standby: nothing to step down from"},
					fmt.Sprintf("krabka-coord: SIGUSR1: member %s does not hold role %s, it waits for it: nothing to step down from", h.shownMember(), h.shownRole()), true)
			case <-h.stepDownRequests:
				// A POST /step-down accepted while the leadership that it
				// was for ended: stale now.
			case req := <-h.operatorRequests:
				switch {
				case !req.drain:
					h.notHolder(req)
				case drain != nil:
					req.reply <- operatorReply{status: http.StatusConflict, body: "a drain of this member is under way"}
				default:
					drain = &req
					cancelCampaign()
				}
			case <-waiting.Done():
				return
			}
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopWaiting()
			<-dropped
		}
	}
	defer stop()
	h.report(holderEvent{Event: "campaigning"}, fmt.Sprintf("krabka-coord: member %s campaigns for role %s on %s (lease %v, renew every %v); waiting for its turn",
		h.shownMember(), h.shownRole(), h.partition, h.config.Duration(), h.config.RenewInterval()), true)
	wait := campaign
	if h.flags.wait > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(campaign, h.flags.wait)
		defer cancel()
	}
	options := append(h.g.coordOptions(), h.flags.lease.options(h.config)...)
	// The CLI switches two extensions of the library on (see the help): the
	// duplicate-member watch, so a second live process under one MEMBER is
	// refused instead of fenced, and the resignation anchor, so a step-down
	// hands the role to the first standby. Neither writes another record;
	// the watch refuses a second live process before anything is written (a
	// live lease of the member that is renewed, or a standby registration
	// of it that gets heartbeats).
	options = append(options, coordination.WithLogger(h.g.logger()), coordination.WithResignationAnchor(), coordination.WithDuplicateMemberCheck())
	if h.renewDeadline != nil {
		options = append(options, h.renewDeadline)
	}
	if h.flags.transferTimeout > 0 {
		options = append(options, coordination.WithTransferTimeout(h.flags.transferTimeout))
	}
	leadership, err := coordination.AcquireLeadership(wait, h.metered, h.role, h.member, options...)
	stop()
	switch {
	case err == nil:
	case drain != nil && ctx.Err() == nil:
		h.withdraw(*drain)
		return nil, errDrained
	case ctx.Err() != nil:
		h.report(holderEvent{Event: "interrupted"}, fmt.Sprintf("krabka-coord: interrupted before member %s was elected for role %s; it left the roster", h.shownMember(), h.shownRole()), true)
		return nil, nil
	case wait.Err() != nil:
		return nil, failure("member %s was not elected for role %s within --wait %v; it left the roster", h.shownMember(), h.shownRole(), h.flags.wait)
	case errors.Is(err, coordination.ErrDuplicateMember):
		return nil, usageError("%s: give this process another MEMBER, or stop the other one", oneLine(errText(err)))
	case isDenied(err):
		need := memberDenial(err, h.role, h.g.topic, true)
		return nil, h.session.deniedError(fmt.Sprintf("member %s campaigns for role %s", h.shownMember(), h.shownRole()), need, err)
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return nil, clusterError("the cluster refuses the configuration of role %s: %s (a lease above the brokers' transaction.max.timeout.ms, 15m by default, is refused: pass a shorter --lease-duration)",
			h.shownRole(), oneLine(errText(err)))
	case errors.Is(err, coordination.ErrMisconfigured):
		// The state topic (created again with another partition count, say)
		// or another application under the role name.
		return nil, clusterError("the cluster refuses the configuration of role %s: %s", h.shownRole(), oneLine(errText(err)))
	default:
		return nil, failure("%s", oneLine(errText(err)))
	}
	h.metrics.acquired(leadership.Token())
	lease := leadership.Lease()
	h.report(holderEvent{Event: "elected", Token: newTokenJSON(leadership.Token()), Deadline: timePtr(lease.Deadline)},
		fmt.Sprintf("elected: member %s holds role %s with token %s", h.shownMember(), h.shownRole(), leadership.Token()), false)
	if drain != nil && !h.handover(leadership, *drain) {
		return nil, errDrained // elected as the drain came: handed over at once
	}
	return leadership, nil
}
