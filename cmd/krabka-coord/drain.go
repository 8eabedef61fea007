package main

// The command drain: it empties a member before maintenance. It asks each
// process of the member, at its --listen address, to hand its role over or
// withdraw its standby registration (POST /drain), and reads the state
// topic until the member holds no role and is in no roster.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// drainAtOnce bounds the drain requests in flight.
const drainAtOnce = 32

func newDrainCommand(g *globals) *cobra.Command {
	var at []string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "drain MEMBER --at ADDR[,ADDR...]",
		Short: "Empty a member: hand every role it holds to another live member",
		Long: `drain empties MEMBER before maintenance. It sends POST /drain to each --at
address, the --listen address of a process of MEMBER (elect or run with
--listen and --step-down-endpoint; one process per role). A process that
holds its role hands it to a live standby, the first by rank that takes
it (Leadership.TransferTo; a lapsed standby, one unseen for 3 heartbeat
intervals, is skipped, and so is one that refuses or does not take it
within the holder's --transfer-timeout); run stops its command first. A
process that waits as a standby withdraws its registration. Either way the
process then stays out of the roster, holding nothing, until it gets a
signal (exit 0): stop it then.

drain then reads every role of the state topic until MEMBER holds no lease
and is in no roster (or every role left is one whose process said it could
not move it, or, when every --at address answered, one that none of them
serves), up to --wait. It prints one line per process (and per
role that MEMBER still holds or waits for with no --at address for it):
where the role went, or what could not move and why.

Exit codes: 0 MEMBER holds nothing and is in no roster; 1 a role could not
be moved (no live standby, none took it, no --at address for it, a process
did not answer), with the reasons; 2 usage; 4 cluster unreachable.`,
		Example: `  krabka-coord drain node-1 --at node-1.internal:9464,node-1.internal:9465
  krabka-coord drain node-1 --at node-1.internal:9464 --at node-1.internal:9465 --output json`,
		Args: exactArgs("MEMBER"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			member, err := parseMember(args[0])
			if err != nil {
				return err
			}
			if len(at) == 0 {
				return usageError("drain needs --at, the --listen address of each process of %s (started with --step-down-endpoint)", showName(member.String()))
			}
			if wait <= 0 {
				return usageError("--wait %v: want a duration above zero, such as 60s", wait)
			}
			return g.onRoles(cmd, nil, func(ctx context.Context, s *session, _ []coordination.Role) error {
				start := time.Now()
				waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
				defer cancel()
				answers := drainAll(waitCtx, at, member)
				var problems []string
				answered := make(map[string]bool)
				allAnswered := true
				for _, a := range answers {
					if a.err != nil {
						allAnswered = false
						problems = append(problems, fmt.Sprintf("%s: %s", a.at, oneLine(errText(a.err))))
						// Its line too: one per --at address (json.md).
						result := handoverJSON{Member: member.String(), Fault: "no_answer", Reason: oneLine(errText(a.err))}
						if err := printDrainLine(g, a.at, result); err != nil {
							return err
						}
						continue
					}
					answered[a.result.Role] = a.result.Moved
					if !a.result.Moved {
						problems = append(problems, fmt.Sprintf("role %s (%s): %s: %s", showName(a.result.Role), a.at, a.result.Fault, a.result.Reason))
					}
					if err := printDrainLine(g, a.at, a.result); err != nil {
						return err
					}
				}
				// The state topic: every role that still names the member. The
				// last read that succeeded decides: a read cut short by the end
				// of --wait does not hide the roles it found before.
				var left []string
				read := false
				for {
					roles, err := rolesOf(waitCtx, s, member)
					if err == nil {
						left, read = roles, true
						if settled(left, answered, allAnswered) {
							break // every role left is one that no process of this drain will move
						}
					} else if !read && waitCtx.Err() != nil {
						problems = append(problems, "the state topic could not be read: "+oneLine(errText(err)))
					}
					if waitCtx.Err() != nil {
						break
					}
					select {
					case <-waitCtx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
				for _, role := range left {
					if _, ok := answered[role]; ok {
						continue // its process answered: its line says why
					}
					result := handoverJSON{Role: role, Member: member.String(), Fault: "no_endpoint", Reason: "no --at address serves this role"}
					problems = append(problems, fmt.Sprintf("role %s: %s", showName(role), result.Reason))
					if err := printDrainLine(g, "", result); err != nil {
						return err
					}
				}
				if len(problems) > 0 || len(left) > 0 {
					if len(left) > 0 && len(problems) == 0 {
						problems = append(problems, "the state topic still names it for role(s) "+strings.Join(left, ", ")+" after --wait "+wait.String())
					}
					return failure("member %s is not drained: %s", showName(member.String()), strings.Join(problems, "; "))
				}
				if !g.json() {
					fmt.Fprintf(g.stdout, "member %s drained in %.1f s: it holds no role and is in no roster\n", showName(member.String()), time.Since(start).Seconds())
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringSliceVar(&at, "at", nil, "host:port of the --listen of a process of MEMBER; repeat it, or separate with commas, for each process")
	cmd.Flags().DurationVar(&wait, "wait", 120*time.Second, "how long to wait for the processes' answers and for the member to leave every roster")
	return cmd
}

// settled reports whether the drain has nothing more to wait for: every
// role that still names the member is one whose process said it could not
// move it, or, when every --at address answered, one that no process of
// the drain serves (no_endpoint: nothing here will move it, so waiting
// out --wait would only delay the answer).
func settled(left []string, moved map[string]bool, allAnswered bool) bool {
	for _, role := range left {
		ok, answered := moved[role]
		if ok || !answered && !allAnswered {
			return false
		}
	}
	return true
}

// drainAnswer is one process's answer to POST /drain.
type drainAnswer struct {
	at     string
	result handoverJSON
	err    error
}

// drainAll sends POST /drain to every address, drainAtOnce at a time, and
// returns the answers in the order of the addresses.
func drainAll(ctx context.Context, at []string, member coordination.MemberID) []drainAnswer {
	answers := make([]drainAnswer, len(at))
	slots := make(chan struct{}, drainAtOnce)
	var wg sync.WaitGroup
	for i, addr := range at {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			answers[i].at = addr
			status, err := postOperator(ctx, addr, "/drain?member="+url.QueryEscape(member.String()), &answers[i].result)
			if err == nil && status != http.StatusOK && answers[i].result.Fault == "" {
				err = fmt.Errorf("answered %d", status)
			}
			answers[i].err = err
		})
	}
	wg.Wait()
	return answers
}

// rolesOf returns the roles, in name order, whose lease names member or
// whose roster holds it.
func rolesOf(ctx context.Context, s *session, member coordination.MemberID) ([]string, error) {
	folds, _, err := scanRoles(ctx, s)
	if err != nil {
		return nil, err
	}
	var roles []string
	for _, fold := range folds {
		holder, held := fold.state.Holder()
		_, registered := fold.state.Entry(member)
		if registered || held && holder == member {
			roles = append(roles, fold.role.String())
		}
	}
	sort.Strings(roles)
	return roles, nil
}

// printDrainLine prints one process's answer, or a role left without one.
func printDrainLine(g *globals, at string, r handoverJSON) error {
	if g.json() {
		return writeJSON(g.stdout, drainJSON{At: at, handoverJSON: r})
	}
	switch {
	case r.Fault == "no_answer":
		fmt.Fprintf(g.stdout, "%s: no drain answer: %s\n", at, r.Reason)
	case r.Moved && r.Held:
		fmt.Fprintf(g.stdout, "role %s: %s handed it to %s in %d ms\n", showName(r.Role), showName(r.Member), showName(r.To), r.TookMillis)
	case r.Moved:
		fmt.Fprintf(g.stdout, "role %s: %s withdrew its standby registration (%s)\n", showName(r.Role), showName(r.Member), r.Reason)
	default:
		where := ""
		if at != "" {
			where = " at " + at
		}
		fmt.Fprintf(g.stdout, "role %s: %s%s could not move it: %s: %s\n", showName(r.Role), showName(r.Member), where, r.Fault, r.Reason)
	}
	return nil
}

// drainJSON is one line of drain: the process's address ("" for a role
// that no --at address serves) and its answer.
type drainJSON struct {
	At string `json:"at"`
	handoverJSON
}
