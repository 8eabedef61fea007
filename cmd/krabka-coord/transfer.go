package main

// The commands transfer and drain: they ask the holders of roles, at their
// --listen addresses, to hand a role to a named member (POST /transfer) or
// to empty a member (POST /drain), and follow the roles until the change
// shows in the state topic. The holder's side is holder_transfer.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func newTransferCommand(g *globals) *cobra.Command {
	var at, to string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "transfer ROLE --to MEMBER --at ADDR",
		Short: "Hand a role to a named member of its roster",
		Long: `transfer asks the holder of ROLE to hand it to MEMBER: it sends POST
/transfer to the holder's --listen address (elect or run started with
--listen ADDR and --step-down-endpoint), and the holder calls
Leadership.TransferTo. The holder writes a lease that names MEMBER (an
offer) and stops renewing; MEMBER, a standby that campaigns for the role,
mints at once (its new epoch fences the holder, so there is never a moment
with two authoritative writers) and writes its own lease; the other
standbys see a live lease and do not challenge. run stops its command
before the offer, so two copies never run. The member that handed the role
over campaigns again, at the tail of the roster, as after a step-down.

The holder refuses at once, and keeps the role, when MEMBER is not in the
roster (fault not_member), is the holder (to_self), is known dead
(member_dead: with --heartbeat-interval, its rank lapsed), or another
transfer is under way (busy). When MEMBER does not take the role within the
holder's --transfer-timeout, the holder writes its own lease again and
keeps leading, with no epoch used (not_taken); run starts its command
again. transfer then prints the fault and the reason.

Exit codes: 0 MEMBER holds the role; 1 the holder refused or MEMBER did not
take it (the holder keeps the role), or the lease did not show MEMBER within
--wait; 2 usage, MEMBER not in the roster or the holder itself; 4 cluster
unreachable.`,
		Example: `  krabka-coord transfer controller --to node-2 --at node-1.internal:9464
  krabka-coord transfer controller --to node-3 --at node-1.internal:9464 --output json`,
		Args: exactArgs("ROLE"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			if at == "" {
				return usageError("transfer needs --at, the --listen address of the holder (started with --step-down-endpoint)")
			}
			if to == "" {
				return usageError("transfer needs --to, the member of the roster to hand the role to")
			}
			target, err := coordination.NewMemberID(to)
			if err != nil {
				return usageError("invalid --to %s: %s", quoteName(to), nameProblem(err, coordination.MaxMemberIDLen, "node-2"))
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
					return failure("role %s has no lease: no member holds it, so none can hand it over", showName(role.String()))
				}
				waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
				defer cancel()
				var result handoverJSON
				status, err := postOperator(waitCtx, at, "/transfer?role="+url.QueryEscape(role.String())+"&to="+url.QueryEscape(target.String()), &result)
				if err != nil {
					return err
				}
				if status != http.StatusOK || !result.Moved {
					return transferRefused(g, role, result)
				}
				// The holder saw the new lease; describe shows it too once
				// the read catches up.
				for {
					after, err := describeRole(waitCtx, s, role, coordination.DefaultLeaseConfig())
					if err == nil && after.Lease != nil && after.Lease.Holder == target.String() && after.Lease.Token.Token != before.Lease.Token.Token {
						result.Token = &after.Lease.Token
						return printTransfer(g, result)
					}
					select {
					case <-waitCtx.Done():
						return failure("the holder %s of role %s handed it to %s, but the lease did not show %s within --wait %v", showName(result.Member), showName(role.String()), showName(result.To), showName(result.To), wait)
					case <-time.After(100 * time.Millisecond):
					}
				}
			})
		}),
	}
	cmd.Flags().StringVar(&at, "at", "", "host:port of the holder's --listen")
	cmd.Flags().StringVar(&to, "to", "", "the member to hand the role to: a standby of the role that campaigns for it")
	cmd.Flags().DurationVar(&wait, "wait", 60*time.Second, "how long to wait for the holder's answer and the new lease")
	return cmd
}

// transferRefused prints a refused transfer and returns its exit code.
func transferRefused(g *globals, role coordination.Role, result handoverJSON) error {
	if g.json() {
		_ = writeJSON(g.stdout, result)
	}
	code := exitFailure
	if result.Fault == "not_member" || result.Fault == "to_self" {
		code = exitUsage
	}
	keeps := "it keeps the role"
	if result.Fault == "not_holder" {
		keeps = "it holds nothing to transfer"
	}
	return &exitError{code: code, err: fmt.Errorf("transfer of role %s from %s to %s refused: %s: %s; %s",
		showName(role.String()), showName(result.Member), showName(result.To), result.Fault, result.Reason, keeps)}
}

func printTransfer(g *globals, result handoverJSON) error {
	if g.json() {
		return writeJSON(g.stdout, result)
	}
	fmt.Fprintf(g.stdout, "%s handed role %s (token %s) to %s in %d ms; %s holds it now with token %s\n",
		showName(result.Member), showName(result.Role), result.PreviousToken.Token, showName(result.To), result.TookMillis, showName(result.To), result.Token.Token)
	return nil
}

// postOperator sends POST path to the --listen address at, and decodes
// a JSON answer into result. It returns the HTTP status; an answer that
// is not JSON is an error that quotes it.
func postOperator(ctx context.Context, at, path string, result any) (int, error) {
	target := at
	if !strings.Contains(target, "://") {
		target = "http://" + target
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(target, "/")+path, nil)
	if err != nil {
		return 0, usageError("--at %s: %v", at, err)
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "?")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, failure("POST /%s to %s: %v; check --at, and that the member runs with --listen and --step-down-endpoint", name, at, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		return 0, failure("%s does not take POST /%s (%s): start the member with --step-down-endpoint, of this release or later", at, name, resp.Status)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return 0, failure("%s refused POST /%s: %s: %s", at, name, resp.Status, oneLine(string(body)))
	}
	if err := json.Unmarshal(body, result); err != nil {
		return 0, failure("%s answered POST /%s with %s that does not decode: %v", at, name, resp.Status, err)
	}
	return resp.StatusCode, nil
}
