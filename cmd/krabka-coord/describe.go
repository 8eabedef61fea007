package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// requestTimeout bounds a one-shot command (describe, fence, create-topic)
// after the brokers answered the first ping.
const requestTimeout = 30 * time.Second

func newDescribeCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe ROLE",
		Short: "Show the roster, the lease and the epoch of a role",
		Long: `describe reads the partition of the state topic that holds ROLE, and asks
the transaction coordinator for the role's current epoch. It takes no epoch
and joins no group, so it is safe to run at any time.

It prints:
  - the roster in rank order: the holder, then the standbys in the order in
    which they challenge (member, offset of its registration record,
    registration time);
  - the lease: holder, token, granted, deadline, time left, live or expired;
  - the coordinator's current token (DescribeTransactions), and whether the
    lease's token is authoritative, that is equal to it. A lease whose token
    is older than the coordinator's names a holder that was fenced, or a
    challenge in progress;
  - the partition of the state topic.`,
		Example: `  krabka-coord describe controller --brokers 127.0.0.1:9092
  krabka-coord describe controller --output json | jq .lease
  KRABKA_BROKERS=kafka-1:9093 krabka-coord describe controller --tls --sasl-mechanism scram-sha-512 --sasl-user ops`,
		Args: exactArgs("ROLE"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return g.onRole(cmd, args[0], func(ctx context.Context, transport *coordination.KafkaTransport, role coordination.Role) error {
				result, err := describeRole(ctx, g, transport, role)
				if err != nil {
					return err
				}
				if g.json() {
					return writeJSON(g.stdout, result)
				}
				printDescribe(g.stdout, result)
				return nil
			})
		}),
	}
}

// describeJSON is the result of describe.
type describeJSON struct {
	Role        string          `json:"role"`
	Topic       string          `json:"topic"`
	Partition   int             `json:"partition"`
	ObservedAt  timeJSON        `json:"observed_at"`
	Roster      []rosterJSON    `json:"roster"`
	Lease       *leaseJSON      `json:"lease"`
	Coordinator coordinatorJSON `json:"coordinator"`

	// LastStableOffset and HighWatermark are the offsets of the partition
	// as the read saw them; a high watermark above the last stable offset
	// means an open transaction hides newer records.
	LastStableOffset *int64   `json:"last_stable_offset,omitempty"`
	HighWatermark    *int64   `json:"high_watermark,omitempty"`
	Warnings         []string `json:"warnings,omitempty"`
}

// rosterJSON is one member of the roster.
type rosterJSON struct {
	Member string `json:"member"`
	Holder bool   `json:"holder"`

	// Rank is the rank of succession of a standby, from 0; the holder has
	// none, and JSON leaves it out.
	Rank         *int     `json:"rank,omitempty"`
	Offset       int64    `json:"offset"`
	RegisteredAt timeJSON `json:"registered_at"`
}

// leaseJSON is the lease of a role.
type leaseJSON struct {
	Holder string `json:"holder"`
	tokenJSON
	GrantedAt  timeJSON `json:"granted_at"`
	Deadline   timeJSON `json:"deadline"`
	TimeLeftMs int64    `json:"time_left_ms"`
	Live       bool     `json:"live"`

	// Authoritative: the lease's token is the coordinator's current one.
	Authoritative bool `json:"authoritative"`
}

// coordinatorJSON is the epoch that the transaction coordinator holds.
type coordinatorJSON struct {
	Held  bool       `json:"held"`
	Token *tokenJSON `json:"token"`
}

// describeRole reads the state and the epoch of a role.
func describeRole(ctx context.Context, g *globals, transport *coordination.KafkaTransport, role coordination.Role) (describeJSON, error) {
	partition, err := coordination.RoleTopicPartition(role, g.coordOptions()...)
	if err != nil {
		return describeJSON{}, usageError("%v", err)
	}
	var warnings []string
	state, err := coordination.DescribeRoleState(ctx, transport, role, g.coordOptions()...)
	if err != nil {
		var format *coordination.FormatError
		if !errors.As(err, &format) {
			return describeJSON{}, clusterError("read %s: %s", partition, strings.TrimPrefix(err.Error(), "coordination: "))
		}
		warnings = append(warnings, "skipped a record that does not decode: "+strings.TrimPrefix(err.Error(), "coordination: "))
	}
	status, err := coordination.DescribeLeadership(ctx, transport, role)
	if err != nil {
		return describeJSON{}, clusterError("%s", strings.TrimPrefix(err.Error(), "coordination: "))
	}
	result := buildDescribe(role, partition, state, status, time.Now().UnixMilli())
	result.Warnings = append(result.Warnings, warnings...)
	if lastStable, high, ok := transport.StableOffsets(partition); ok {
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
	status coordination.LeadershipStatus, nowMillis int64) describeJSON {
	result := describeJSON{
		Role:       role.String(),
		Topic:      partition.Topic,
		Partition:  partition.Partition,
		ObservedAt: newTimeJSON(nowMillis),
		Roster:     rankOrder(state),
	}
	if status.Held {
		result.Coordinator = coordinatorJSON{Held: true, Token: newTokenJSON(status.Token)}
	}
	if lease := state.Lease; lease != nil {
		left := max(lease.Deadline-nowMillis, 0)
		result.Lease = &leaseJSON{
			Holder:        lease.Member.String(),
			tokenJSON:     *newTokenJSON(lease.Token),
			GrantedAt:     newTimeJSON(lease.GrantedAt),
			Deadline:      newTimeJSON(lease.Deadline),
			TimeLeftMs:    left,
			Live:          nowMillis < lease.Deadline,
			Authoritative: status.Authoritative(lease.Token),
		}
	}
	return result
}

// rankOrder lists the roster in rank order: the holder first, then the
// standbys from rank 0.
func rankOrder(state coordination.RoleState) []rosterJSON {
	holder, hasHolder := state.Holder()
	roster := make([]rosterJSON, 0, len(state.Roster))
	for _, entry := range state.Roster {
		if hasHolder && entry.Member == holder {
			roster = append(roster, rosterJSON{Member: entry.Member.String(), Holder: true, Offset: entry.Offset, RegisteredAt: newTimeJSON(entry.RegisteredAt)})
		}
	}
	for _, entry := range state.Roster {
		if hasHolder && entry.Member == holder {
			continue
		}
		rank, _ := state.RankOf(entry.Member)
		roster = append(roster, rosterJSON{Member: entry.Member.String(), Rank: &rank, Offset: entry.Offset, RegisteredAt: newTimeJSON(entry.RegisteredAt)})
	}
	return roster
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
		fmt.Fprintf(w, "lease:       held by %s, token %s, %s\n", showName(l.Holder), l.Token, state)
		fmt.Fprintf(w, "             granted %s, deadline %s\n", l.GrantedAt.Time, l.Deadline.Time)
		switch {
		case l.Authoritative:
			fmt.Fprintf(w, "             token %s is authoritative: the coordinator holds it\n", l.Token)
		case r.Coordinator.Held:
			fmt.Fprintf(w, "             token %s is NOT authoritative: the coordinator holds %s, so %s is fenced or a challenger is taking over\n",
				l.Token, r.Coordinator.Token.Token, showName(l.Holder))
		default:
			fmt.Fprintf(w, "             token %s is NOT authoritative: the coordinator knows no epoch of the role\n", l.Token)
		}
	} else {
		fmt.Fprintf(w, "lease:       none (no member holds the role; the first standby challenges at once)\n")
	}
	if len(r.Roster) == 0 {
		fmt.Fprintf(w, "roster:      empty (no member is registered)\n")
	} else {
		fmt.Fprintf(w, "roster (rank order):\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "  RANK\tMEMBER\tOFFSET\tREGISTERED AT\n")
		for _, m := range r.Roster {
			rank := "holder"
			if m.Rank != nil {
				rank = fmt.Sprint(*m.Rank)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", rank, showName(m.Member), m.Offset, m.RegisteredAt.Time)
		}
		tw.Flush()
	}
	for _, warning := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
}
