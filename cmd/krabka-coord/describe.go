package main

// The command describe: the roster, the lease and the coordinator's
// epoch of roles, as text or as the describe document that watch and
// step-down reuse.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// requestTimeout bounds a one-shot command (describe, fence, create-topic)
// after the brokers answered the first ping.
const requestTimeout = 30 * time.Second

func newDescribeCommand(g *globals) *cobra.Command {
	var all bool
	var heartbeat time.Duration
	cmd := &cobra.Command{
		Use:   "describe ROLE... | describe --all",
		Short: "Show the roster, the lease and the epoch of roles",
		Long: `describe reads the partition of the state topic that holds each ROLE (with
--all, every role that a record of the state topic names), and asks the
transaction coordinator for the role's current epoch. It takes no epoch and
joins no group, so it is safe to run at any time.

It prints, for each role:
  - the roster in rank order: the holder, then the standbys in the order in
    which they challenge (member, offset of its registration record,
    registration time, and when the log last heard of the member: the
    holder's newest renewal, a standby's newest heartbeat, or its
    registration). A waiting standby writes a heartbeat every heartbeat
    interval (the members' --heartbeat-interval, by default their lease
    duration); one unseen for 3 intervals is shown "lapsed", without a
    rank: the members skip it, and it registers again at the tail if it
    comes back. Without --heartbeat-interval, describe takes the lease
    duration of the role's lease record (the members' default); pass the
    members' interval when they set one;
  - the lease: holder, token, granted, deadline, time left, live or expired;
  - the coordinator's current token (DescribeTransactions), and whether the
    lease's token is authoritative, that is equal to it. A lease whose token
    is older than the coordinator's names a holder that was fenced, or a
    challenge in progress;
  - the partition of the state topic.

A role that has no epoch, no lease and no member, and that no record of the
state topic names, was never taken: most likely a typo. describe prints the
roles it found and exits 2. One that a record names (members registered and
left before they were elected) is shown, as list shows it.

A broker that does not answer, or a transaction coordinator that moved with
its broker, is retried within 30 s: Kafka moves the partitions of a dead
broker within about ten seconds.`,
		Example: `  krabka-coord describe controller --brokers 127.0.0.1:9092
  krabka-coord describe controller scheduler
  krabka-coord describe --all --output json | jq -c '{role, holder: .lease.holder}'
  KRABKA_BROKERS=kafka-1:9093 krabka-coord describe controller --tls --sasl-mechanism scram-sha-512 --sasl-user ops`,
		Args: rolesOrAll(&all),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			view, err := rosterView(heartbeat)
			if err != nil {
				return err
			}
			return g.onRoles(cmd, args, func(ctx context.Context, s *session, roles []coordination.Role) error {
				if all {
					scanned, skipped, err := scanRoles(ctx, s)
					if err != nil {
						return err
					}
					for _, u := range skipped {
						fmt.Fprintf(g.stderr, "krabka-coord: warning: %s\n", u.warning())
					}
					roles = roles[:0]
					for _, fold := range scanned {
						roles = append(roles, fold.role)
					}
					if len(roles) == 0 && !g.json() {
						fmt.Fprintf(g.stdout, "no role on %s\n", g.topic) // as list says it
						return nil
					}
				}
				var unknown []string
				for i, role := range roles {
					result, err := describeRole(ctx, s, role, view)
					if err != nil {
						return err
					}
					if !result.Coordinator.Held && result.Lease == nil && len(result.Roster) == 0 && !all {
						// list shows a role that a record names; describe
						// shows it too, and refuses only a name that no
						// record carries.
						trace, err := traceRole(ctx, s, role)
						if err != nil {
							return err
						}
						if trace == traceNone {
							unknown = append(unknown, role.String())
							continue
						}
					}
					if g.json() {
						if err := writeJSON(g.stdout, result); err != nil {
							return err
						}
						continue
					}
					if i > 0 {
						fmt.Fprintln(g.stdout)
					}
					printDescribe(g.stdout, result)
				}
				if len(unknown) > 0 {
					return neverSeen(unknown)
				}
				return nil
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "every role that a record of the state topic names")
	addRosterLapseFlag(cmd.Flags(), &heartbeat)
	return cmd
}

// rolesOrAll checks the arguments of a command that takes ROLE... or
// --all.
func rolesOrAll(all *bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case *all && len(args) > 0:
			return usageError("%s takes ROLE... or --all, not both (see '%s --help')", cmd.Name(), cmd.CommandPath())
		case !*all && len(args) == 0:
			return usageError("%s takes at least one ROLE, or --all (see '%s --help')", cmd.Name(), cmd.CommandPath())
		}
		return nil
	}
}

// describeJSON is the result of describe: the state of one role.
type describeJSON struct {
	Role        string          `json:"role"`
	Topic       string          `json:"topic"`
	Partition   int             `json:"partition"`
	ObservedAt  timeJSON        `json:"observed_at"`
	Roster      []rosterJSON    `json:"roster"`
	Lease       *leaseJSON      `json:"lease"`
	Coordinator coordinatorJSON `json:"coordinator"`

	// LastStableOffset and HighWatermark are the offsets of the partition
	// as the read saw them, null when unknown; a high watermark above the
	// last stable offset means an open transaction hides newer records.
	LastStableOffset *int64   `json:"last_stable_offset"`
	HighWatermark    *int64   `json:"high_watermark"`
	Warnings         []string `json:"warnings"`
}

// rosterJSON is one member of the roster.
type rosterJSON struct {
	Member string `json:"member"`
	Holder bool   `json:"holder"`

	// Rank is the rank of succession of a standby, from 0; the holder has
	// none (null).
	Rank         *int     `json:"rank"`
	Offset       int64    `json:"offset"`
	RegisteredAt timeJSON `json:"registered_at"`

	// LastSeen is the member's newest sign of life in the log: the
	// holder's newest renewal, a standby's newest heartbeat or its
	// registration.
	LastSeen timeJSON `json:"last_seen"`

	// Lapsed: a standby unseen for 3 heartbeat intervals; it has no rank
	// (null), and the standbys behind it move up.
	Lapsed bool `json:"lapsed"`
}

// leaseJSON is the lease of a role.
type leaseJSON struct {
	Holder     string    `json:"holder"`
	Token      tokenJSON `json:"token"`
	GrantedAt  timeJSON  `json:"granted_at"`
	Deadline   timeJSON  `json:"deadline"`
	TimeLeftMs int64     `json:"time_left_ms"`
	Live       bool      `json:"live"`

	// Authoritative: the lease's token is the coordinator's current one.
	Authoritative bool `json:"authoritative"`
}

// coordinatorJSON is the epoch that the transaction coordinator holds.
type coordinatorJSON struct {
	Held  bool       `json:"held"`
	Token *tokenJSON `json:"token"`
}

// describeRole reads the state and the epoch of a role, and retries what a
// dead broker or a moved coordinator fails.
func describeRole(ctx context.Context, s *session, role coordination.Role, view coordination.LeaseConfig) (describeJSON, error) {
	g := s.g
	partition, err := coordination.RoleTopicPartition(role, g.coordOptions()...)
	if err != nil {
		return describeJSON{}, usageError("%v", err)
	}
	var warnings []string
	var state coordination.RoleState
	err = retryTransient(ctx, func(ctx context.Context) (err error) {
		state, err = coordination.DescribeRoleState(ctx, s.transport, role, g.coordOptions()...)
		return err
	})
	if err != nil {
		var format *coordination.FormatError
		switch {
		case errors.As(err, &format):
			warnings = append(warnings, "skipped a record that does not decode: "+errText(err))
		case isDenied(err):
			return describeJSON{}, s.deniedError("read "+partition.String(), topicACL(opRead, g.topic), err)
		case interruptedBy(ctx):
			return describeJSON{}, interruptedError("while reading " + partition.String())
		default:
			return describeJSON{}, clusterError("read %s: %s", partition, oneLine(errText(err)))
		}
	}
	var status coordination.LeadershipStatus
	err = retryTransient(ctx, func(ctx context.Context) (err error) {
		status, err = coordination.DescribeLeadership(ctx, s.transport, role)
		return err
	})
	if err != nil {
		if interruptedBy(ctx) {
			return describeJSON{}, interruptedError("while describing the epoch of role " + showName(role.String()))
		}
		return describeJSON{}, s.epochError(role, err)
	}
	result := buildDescribe(role, partition, state, status, time.Now().UnixMilli(), view)
	result.Warnings = append(result.Warnings, warnings...)
	if lastStable, high, ok := s.transport.StableOffsets(partition); ok {
		result.LastStableOffset, result.HighWatermark = &lastStable, &high
		if high > lastStable {
			result.Warnings = append(result.Warnings, fmt.Sprintf(
				"an open transaction hides the records from offset %d on (high watermark %d): this view may be older than the log", lastStable, high))
		}
	}
	return result, nil
}

// buildDescribe assembles the result from what the cluster said.
func buildDescribe(role coordination.Role, partition coordination.TopicPartition, state coordination.RoleState,
	status coordination.LeadershipStatus, nowMillis int64, view coordination.LeaseConfig) describeJSON {
	result := describeJSON{
		Role:       role.String(),
		Topic:      partition.Topic,
		Partition:  partition.Partition,
		ObservedAt: newTimeJSON(nowMillis),
		Roster:     rankOrder(state, nowMillis, view),
		Warnings:   []string{},
	}
	if status.Held {
		result.Coordinator = coordinatorJSON{Held: true, Token: newTokenJSON(status.Token)}
	}
	if lease := state.Lease; lease != nil {
		left := max(lease.Deadline-nowMillis, 0)
		result.Lease = &leaseJSON{
			Holder:        lease.Member.String(),
			Token:         *newTokenJSON(lease.Token),
			GrantedAt:     newTimeJSON(lease.GrantedAt),
			Deadline:      newTimeJSON(lease.Deadline),
			TimeLeftMs:    left,
			Live:          nowMillis < lease.Deadline,
			Authoritative: status.Authoritative(lease.Token),
		}
	}
	return result
}

// lastSeen is the newest sign of life of a roster entry in the log: the
// holder's newest renewal, a standby's newest heartbeat (with heartbeats
// on), or its registration.
func lastSeen(state coordination.RoleState, e coordination.RosterEntry) int64 {
	seen := max(e.LastSeen, e.RegisteredAt)
	if state.Lease != nil && state.Lease.Member == e.Member {
		seen = max(seen, state.Lease.GrantedAt)
	}
	return seen
}

// rankOrder lists the roster in rank order: the holder first, then the
// live standbys from rank 0, then the lapsed ones (no rank) under the
// roster lapse of view.
func rankOrder(state coordination.RoleState, nowMillis int64, view coordination.LeaseConfig) []rosterJSON {
	view = lapseView(state, view)
	holder, hasHolder := state.Holder()
	roster := make([]rosterJSON, 0, len(state.Roster))
	entry := func(e coordination.RosterEntry) rosterJSON {
		return rosterJSON{Member: e.Member.String(), Offset: e.Offset, RegisteredAt: newTimeJSON(e.RegisteredAt), LastSeen: newTimeJSON(lastSeen(state, e))}
	}
	for _, e := range state.Roster {
		if hasHolder && e.Member == holder {
			m := entry(e)
			m.Holder = true
			roster = append(roster, m)
		}
	}
	var lapsed []rosterJSON
	for _, e := range state.Roster {
		if hasHolder && e.Member == holder {
			continue
		}
		m := entry(e)
		if rank, live := state.RankAt(e.Member, nowMillis, view); live {
			m.Rank = &rank
			roster = append(roster, m)
		} else {
			m.Lapsed = true
			lapsed = append(lapsed, m)
		}
	}
	return append(roster, lapsed...)
}

// printDescribe writes the result as text.
func printDescribe(w io.Writer, r describeJSON) {
	fmt.Fprintf(w, "role:        %s\n", showName(r.Role))
	fmt.Fprintf(w, "partition:   %s-%d\n", r.Topic, r.Partition)
	if r.Coordinator.Held {
		fmt.Fprintf(w, "coordinator: epoch %s (the token that the transaction coordinator holds now)\n", r.Coordinator.Token.Token)
	} else {
		fmt.Fprintf(w, "coordinator: no epoch (no member has taken the role, or its transactional id expired)\n")
	}
	if l := r.Lease; l != nil {
		state := "live, " + formatSeconds(time.Duration(l.TimeLeftMs)*time.Millisecond) + " left"
		if !l.Live {
			state = "EXPIRED " + formatAgo(l.Deadline.Millis, r.ObservedAt.Millis)
		}
		fmt.Fprintf(w, "lease:       held by %s, token %s, %s\n", showName(l.Holder), l.Token.Token, state)
		fmt.Fprintf(w, "             granted %s, deadline %s\n", l.GrantedAt.Time, l.Deadline.Time)
		switch {
		case l.Authoritative:
			fmt.Fprintf(w, "             token %s is authoritative: the coordinator holds it\n", l.Token.Token)
		case r.Coordinator.Held:
			fmt.Fprintf(w, "             token %s is NOT authoritative: the coordinator holds %s, so %s is fenced or a challenger is taking over\n",
				l.Token.Token, r.Coordinator.Token.Token, showName(l.Holder))
		default:
			fmt.Fprintf(w, "             token %s is NOT authoritative: the coordinator knows no epoch of the role\n", l.Token.Token)
		}
	} else {
		fmt.Fprintf(w, "lease:       none (no member holds the role; the first standby challenges at once)\n")
	}
	if len(r.Roster) == 0 {
		fmt.Fprintf(w, "roster:      empty (no member is registered)\n")
	} else {
		fmt.Fprintf(w, "roster (rank order):\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  RANK\tMEMBER\tOFFSET\tREGISTERED AT\tLAST SEEN\n")
		for _, m := range r.Roster {
			ago := formatAgo(m.LastSeen.Millis, r.ObservedAt.Millis)
			rank, seen := "holder", "renewed "+ago
			switch {
			case m.Holder:
			case m.Lapsed:
				rank, seen = "lapsed", "last seen "+ago+": no heartbeat for 3 intervals, so it has no rank"
			case m.LastSeen.Millis > m.RegisteredAt.Millis:
				rank, seen = fmt.Sprint(*m.Rank), "heartbeat "+ago
			default:
				rank, seen = fmt.Sprint(*m.Rank), "registered "+ago
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", rank, showName(m.Member), m.Offset, m.RegisteredAt.Time, seen)
		}
		tw.Flush()
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}
