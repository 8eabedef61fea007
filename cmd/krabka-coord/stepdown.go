package main

// The command step-down: it asks the holder of a role, at its --listen
// address, to step down, and follows the role until the next holder. The
// holder's side of it is holder_stepdown.go.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func newStepDownCommand(g *globals) *cobra.Command {
	var at string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "step-down ROLE --at ADDR",
		Short: "Drain: ask the holder of a role to resign and stay a standby",
		Long: `step-down asks the holder of ROLE to step down: it sends POST /step-down to
the holder's --listen address (elect or run started with --listen ADDR and
--step-down-endpoint). The holder resigns (run stops its command first,
with SIGTERM and its grace), so the first standby takes over at once, and it
campaigns again at the tail of the roster without exiting. step-down then
follows the role until another member, or none, holds the lease, and prints
who took over.

Sending SIGUSR1 to the holder's process does the same locally.

Unlike fence, which deposes the holder by minting a new epoch and lets its
command run until its next renewal, a step-down never lets two copies of
run's command act at once.

Exit codes: 0 the holder stepped down; 1 it did not within --wait, or it
refused (not the holder, another role, a transfer or drain of the holder
under way); 2 usage; 4 cluster unreachable.`,
		Example: `  krabka-coord step-down controller --at node-1.internal:9464
  kill -USR1 <pid of 'krabka-coord elect controller node-1'>`,
		Args: exactArgs("ROLE"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if at == "" {
				return usageError("step-down needs --at, the --listen address of the holder (started with --step-down-endpoint); or send SIGUSR1 to the holder's process")
			}
			if wait <= 0 {
				return usageError("--wait %v: want a duration above zero, such as 30s", wait)
			}
			return g.onRoles(cmd, args, func(ctx context.Context, s *session, roles []coordination.Role) error {
				role := roles[0]
				before, err := describeRole(ctx, s, role, coordination.DefaultLeaseConfig())
				if err != nil {
					return err
				}
				if before.Lease == nil {
					return failure("role %s has no lease: no member holds it, so none can step down", showName(role.String()))
				}
				if err := postStepDown(ctx, at, role); err != nil {
					return err
				}
				waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
				defer cancel()
				// Wait for the next holder; a role with no standby may stay
				// without one until the member that stepped down takes it
				// back from the tail.
				var last *describeJSON
				for {
					after, err := describeRole(waitCtx, s, role, coordination.DefaultLeaseConfig())
					if err == nil {
						last = &after
						if after.Lease != nil && after.Lease.Token.Token != before.Lease.Token.Token {
							return printStepDown(g, before, after)
						}
					}
					select {
					case <-waitCtx.Done():
						if last != nil && last.Lease == nil {
							return printStepDown(g, before, *last)
						}
						return failure("the holder %s of role %s accepted the step-down, but the lease did not change within --wait %v", showName(before.Lease.Holder), showName(role.String()), wait)
					case <-time.After(200 * time.Millisecond):
					}
				}
			})
		}),
	}
	cmd.Flags().StringVar(&at, "at", "", "host:port of the holder's --listen")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the lease to change")
	return cmd
}

// postStepDown sends the request to the holder.
func postStepDown(ctx context.Context, at string, role coordination.Role) error {
	target := at
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(target, "/")+"/step-down?role="+url.QueryEscape(role.String()), nil)
	if err != nil {
		return usageError("--at %s: %v", at, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return failure("POST /step-down to %s: %v; check --at, and that the holder runs with --listen and --step-down-endpoint", at, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusAccepted:
		return nil
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return failure("%s does not take POST /step-down (%s): start the holder with --step-down-endpoint", at, resp.Status)
	}
	return failure("%s refused the step-down: %s: %s", at, resp.Status, oneLine(string(body)))
}

// stepDownJSON is the result of step-down.
type stepDownJSON struct {
	Role        string     `json:"role"`
	Previous    string     `json:"previous_holder"`
	PreviousTok *tokenJSON `json:"previous_token"`
	Holder      string     `json:"holder"` // "" when no member holds the role now
	Token       *tokenJSON `json:"token"`
}

func printStepDown(g *globals, before, after describeJSON) error {
	result := stepDownJSON{Role: before.Role, Previous: before.Lease.Holder, PreviousTok: &before.Lease.Token}
	if after.Lease != nil {
		result.Holder, result.Token = after.Lease.Holder, &after.Lease.Token
	}
	if g.json() {
		return writeJSON(g.stdout, result)
	}
	if result.Holder == "" {
		fmt.Fprintf(g.stdout, "%s stepped down from role %s (token %s); no member holds it yet\n", showName(result.Previous), showName(result.Role), result.PreviousTok.Token)
		return nil
	}
	fmt.Fprintf(g.stdout, "%s stepped down from role %s (token %s); %s holds it now with token %s\n",
		showName(result.Previous), showName(result.Role), result.PreviousTok.Token, showName(result.Holder), result.Token.Token)
	return nil
}
