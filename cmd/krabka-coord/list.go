package main

// The command list: every role of the state topic, one row each, with
// its holder, token, lease and standbys.

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func newListCommand(g *globals) *cobra.Command {
	var heartbeat time.Duration
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every role of the state topic: holder, token, lease, standbys",
		Long: `list reads every partition of the state topic, folds every role that a
record names, and asks the transaction coordinator for the epoch of each
(DescribeTransactions, eight at a time). It prints one row per role, in name
order: the holder, the lease's token, the lease state (live, expired, or
none), whether the token is authoritative (the coordinator holds it), and
the count of standbys (live ones; a standby unseen for 3 heartbeat intervals
is counted apart, as lapsed: see describe). It takes no epoch and joins no
group.

A role whose epoch the user may not describe (DESCRIBE on its transactional
id) is listed without it, with a warning on stderr that names the ACL.
Records whose key does not decode (another writer's, or a newer layout)
name no role: a warning on stderr counts them per partition.
'krabka-coord describe ROLE' shows one role in full.`,
		Example: `  krabka-coord list --brokers 127.0.0.1:9092
  krabka-coord list --output json | jq -c 'select(.lease_state=="expired")'`,
		Args: exactArgs(),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			view, err := rosterView(heartbeat)
			if err != nil {
				return err
			}
			return g.onRoles(cmd, nil, func(ctx context.Context, s *session, _ []coordination.Role) error {
				folds, skipped, err := scanRoles(ctx, s)
				if err != nil {
					if interruptedBy(ctx) {
						return interruptedError("while reading the state topic")
					}
					return err
				}
				for _, u := range skipped {
					fmt.Fprintf(g.stderr, "krabka-coord: warning: %s\n", u.warning())
				}
				roles := make([]coordination.Role, len(folds))
				for i, fold := range folds {
					roles[i] = fold.role
				}
				statuses, errs := describeEpochs(ctx, s, roles)
				now := time.Now().UnixMilli()
				rows := make([]listJSON, len(folds))
				for i, fold := range folds {
					rows[i] = buildListRow(fold, statuses[i], errs[i] == nil, now, view)
					if errs[i] != nil {
						if interruptedBy(ctx) {
							return interruptedError("while describing the epochs")
						}
						fmt.Fprintf(g.stderr, "krabka-coord: warning: %s\n", oneLine(s.epochError(fold.role, errs[i]).Error()))
					}
				}
				if g.json() {
					for _, row := range rows {
						if err := writeJSON(g.stdout, row); err != nil {
							return err
						}
					}
					return nil
				}
				printList(g.stdout, rows, s.g.topic)
				return nil
			})
		}),
	}
	addRosterLapseFlag(cmd.Flags(), &heartbeat)
	return cmd
}

// listJSON is one row of list: the summary of one role.
type listJSON struct {
	Role      string `json:"role"`
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`

	// Holder is the member that the lease names, "" without a lease.
	Holder string     `json:"holder"`
	Token  *tokenJSON `json:"token"`

	// LeaseState is live, expired or none; Deadline is null without a
	// lease.
	LeaseState string    `json:"lease_state"`
	Deadline   *timeJSON `json:"deadline"`

	// Coordinator is the coordinator's token, null when it holds none or
	// could not be asked (CoordinatorKnown false).
	Coordinator      *tokenJSON `json:"coordinator_token"`
	CoordinatorKnown bool       `json:"coordinator_known"`
	Authoritative    bool       `json:"authoritative"`
	// Standbys counts the live standbys; LapsedStandbys those unseen for
	// 3 heartbeat intervals, which have no rank.
	Standbys       int `json:"standbys"`
	LapsedStandbys int `json:"lapsed_standbys"`
	SkippedRecords int `json:"skipped_records"`
}

// buildListRow summarizes one role.
func buildListRow(fold roleFold, status coordination.LeadershipStatus, known bool, nowMillis int64, view coordination.LeaseConfig) listJSON {
	row := listJSON{Role: fold.role.String(), Topic: fold.partition.Topic, Partition: fold.partition.Partition,
		LeaseState: "none", CoordinatorKnown: known, SkippedRecords: fold.skipped}
	for _, m := range rankOrder(fold.state, nowMillis, view) {
		switch {
		case m.Lapsed:
			row.LapsedStandbys++
		case !m.Holder:
			row.Standbys++
		}
	}
	if known && status.Held {
		row.Coordinator = newTokenJSON(status.Token)
	}
	if lease := fold.state.Lease; lease != nil {
		row.Holder, row.Token, row.Deadline = lease.Member.String(), newTokenJSON(lease.Token), timePtr(lease.Deadline)
		row.LeaseState = "live"
		if nowMillis >= lease.Deadline {
			row.LeaseState = "expired"
		}
		row.Authoritative = known && status.Authoritative(lease.Token)
	}
	return row
}

// printList writes the rows as a table.
func printList(w io.Writer, rows []listJSON, topic string) {
	if len(rows) == 0 {
		fmt.Fprintf(w, "no role on %s\n", topic)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ROLE\tPARTITION\tHOLDER\tTOKEN\tLEASE\tAUTHORITATIVE\tSTANDBYS\n")
	now := time.Now().UnixMilli()
	for _, r := range rows {
		holder, lease, authoritative := "-", "none", "-"
		if r.Holder != "" {
			holder = showName(r.Holder)
			lease = "live, " + formatAgo(r.Deadline.Millis, now)
			if r.LeaseState == "expired" {
				lease = "EXPIRED " + formatAgo(r.Deadline.Millis, now)
			}
			authoritative = "no"
			switch {
			case !r.CoordinatorKnown:
				authoritative = "unknown"
			case r.Authoritative:
				authoritative = "yes"
			}
		}
		standbys := fmt.Sprint(r.Standbys)
		if r.LapsedStandbys > 0 {
			standbys += fmt.Sprintf(" (+%d lapsed)", r.LapsedStandbys)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", showName(r.Role), r.Partition, holder, tokenText(r.Token), lease, authoritative, standbys)
	}
	tw.Flush()
}
