package main

// The command elect: it takes a role, prints the fencing token, and holds
// the role until a signal or a fence. What elect shares with run is the
// holder (holder.go and the holder_*.go files).

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func newElectCommand(g *globals) *cobra.Command {
	flags := &holdFlags{}
	cmd := &cobra.Command{
		Use:   "elect ROLE MEMBER",
		Short: "Take a role, print the token, and hold it until a signal or a fence",
		Long: `elect registers MEMBER for ROLE, waits for its turn under the succession rules,
takes the role (the transaction coordinator mints a new epoch), prints the
fencing token, and holds the role: it renews the lease every
--renew-interval.

On SIGINT, SIGTERM or SIGHUP it resigns (a lease tombstone, so the first
standby takes over at once) and exits 0; a resignation that the cluster does
not confirm within 2 s is left to the lease deadline, with a warning, and a
second signal exits at once (one within 250 ms of the first is the same
stop, delivered twice, and is dropped). A SIGHUP that was ignored when it started
(nohup) stays ignored.

On SIGUSR1, or on POST /step-down with --listen and --step-down-endpoint
('krabka-coord step-down ROLE --at ADDR'), the holder steps down: it
resigns, so the first standby takes over at once, and campaigns again at
the tail of the roster, without exiting (a drain).

POST /transfer ('krabka-coord transfer ROLE --to MEMBER --at ADDR') hands
the role to a named standby (Leadership.TransferTo), and the member then
campaigns again at the tail; POST /drain ('krabka-coord drain MEMBER --at
ADDR') hands it to the first live standby that takes it, or withdraws a
standby's registration, and the member then holds nothing until a signal.
With --successor MEMBER (or --successor-policy newest, the live standby
registered last) a stop hands the role to that member instead of resigning
to the first standby, and resigns when the transfer fails: the rolling
restart of docs/operations.md.

When a renewal is refused because another member minted a newer epoch (a
fence, or a takeover after this process stalled past its lease), it leaves
the roster and exits 3; so it does when the producer of its epoch fails in a
way that no write under the token can recover from (ErrProducerLost). With
--rejoin it campaigns again instead, at the tail of the roster.

A second live process under the same ROLE and MEMBER is refused (exit 2):
each would fence the other. elect and run switch the library's duplicate-
member watch on (WithDuplicateMemberCheck). A restart under the MEMBER of
a live lease waits, before it writes anything, up to one --renew-interval
plus one --poll-interval (11s with the defaults, never past the lease's
deadline) for a renewal by another live process; none means a
crashed earlier run, whose role it then takes back at once, for one epoch.
With --heartbeat-interval, a process that finds a standby registration of
its own MEMBER also waits up to one interval (plus a poll and a second) for
that standby's heartbeat: none means a crashed earlier run, whose place it
takes, at the tail.

elect and run also switch the resignation anchor on
(WithResignationAnchor): after a resignation or a step-down the standbys
challenge in rank order, one --challenge-stagger apart from the
resignation, so the first standby takes the role at once and the others
mint nothing.

Heartbeats are off by default, as the specification's topic layout has no
heartbeat record. --heartbeat-interval D switches them on: a waiting standby
writes a heartbeat record every D, and a standby unseen for 3 intervals
loses its rank, and registers again at the tail if it comes back. Switch it
on only when every reader of the state topic is of this release or later,
and pass every member of a role (and describe, list, watch) the same D.

With --listen it serves Prometheus metrics on /metrics (is-leader, token,
leadership changes, rejoins, renewal latency and failures, partition reads)
and /healthz, which answers 503 while this member believes it leads but has
not renewed within the lease duration, or while a standby cannot read the
partition of the role.

Exit codes: 0 resigned on a signal, or interrupted before it was elected;
1 not elected within --wait, or another failure; 2 usage, or a live
duplicate of MEMBER; 3 fenced or leadership lost; 4 cluster unreachable,
state topic misconfigured, an ACL missing, or a lease above the brokers'
transaction.max.timeout.ms.`,
		Example: `  krabka-coord elect controller node-1 --brokers 127.0.0.1:9092
  krabka-coord elect controller node-2 --lease-duration 6s --renew-interval 2s --challenge-stagger 1s
  krabka-coord elect controller node-1 --rejoin --listen :9464 --output json
  kill -USR1 $(pgrep -f 'elect controller node-1')   # step down, stay a standby`,
		Args: exactArgs("ROLE", "MEMBER"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			signals := followSignals(cmd.Context())
			defer signals.stop()
			h, err := prepareHolder(signals.ctx, g, flags, args[0], args[1])
			if err != nil {
				return err
			}
			defer h.close()
			for {
				leadership, err := h.acquire(signals.ctx, signals.stepDown)
				if errors.Is(err, errDrained) {
					return h.idle(signals.ctx)
				}
				if err != nil || leadership == nil {
					return err
				}
				held := true
				for held {
					held = false
					select {
					case <-signals.ctx.Done():
						return h.resign(leadership, signals.again)
					case <-leadership.Done():
						if err := h.lost(leadership); !h.rejoinAfter(err) {
							return err
						}
					case <-signals.stepDown:
						if err := h.stepDown(leadership, "SIGUSR1"); err != nil {
							return err
						}
					case <-h.stepDownRequests:
						if err := h.stepDown(leadership, "POST /step-down"); err != nil {
							return err
						}
					case req := <-h.operatorRequests:
						// A transfer: the member campaigns again, at the
						// tail; a drain: it idles. A failed one keeps the role.
						held = h.handover(leadership, req)
						if !held && req.drain && errors.Is(leadership.Err(), coordination.ErrTransferred) {
							return h.idle(signals.ctx)
						}
						switch {
						case held:
						case errors.Is(leadership.Err(), coordination.ErrTransferred):
							h.metrics.rejoined("transfer")
						default:
							if err := h.lost(leadership); !h.rejoinAfter(err) {
								return err
							}
						}
					}
				}
			}
		}),
	}
	flags.add(cmd.Flags())
	return cmd
}
