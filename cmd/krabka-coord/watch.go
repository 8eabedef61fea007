package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Kinds of the events of a role.
const (
	eventState        = "state"        // the state when watch starts
	eventRegistered   = "registered"   // a member joined the roster
	eventDeregistered = "deregistered" // a member left the roster
	eventGranted      = "granted"      // a lease where there was none
	eventRenewed      = "renewed"      // the holder renewed its lease
	eventTakeover     = "takeover"     // a lease of another token replaced a lease
	eventReleased     = "released"     // a lease tombstone: the holder resigned, or fence cleared it
	eventExpired      = "expired"      // the deadline of the lease passed without a renewal
	eventEpoch        = "epoch"        // the coordinator's token of the role changed
)

// roleEvent is one change of a role.
type roleEvent struct {
	At      time.Time `json:"-"`
	Time    string    `json:"time"`
	Kind    string    `json:"event"`
	Role    string    `json:"role"`
	Member  string    `json:"member,omitempty"`
	Offset  *int64    `json:"offset,omitempty"`
	Rank    *int      `json:"rank,omitempty"`
	Token   string    `json:"token,omitempty"`
	Message string    `json:"message"`

	// PreviousMember and PreviousToken name the lease that a takeover
	// replaced, or the epoch that an epoch event replaced.
	PreviousMember string `json:"previous_member,omitempty"`
	PreviousToken  string `json:"previous_token,omitempty"`

	// Deadline and GrantedAt are the instants of a lease, and
	// PreviousDeadline the deadline of the lease that a takeover replaced,
	// in ms since the Unix epoch.
	Deadline         int64 `json:"deadline_ms,omitempty"`
	GrantedAt        int64 `json:"granted_at_ms,omitempty"`
	PreviousDeadline int64 `json:"previous_deadline_ms,omitempty"`

	// State is the whole state, for a state event.
	State *describeJSON `json:"state,omitempty"`

	// roleState is the fold right after the record of the event.
	roleState coordination.RoleState
}

// roleTracker folds the records of one role, and says what each record
// changed.
type roleTracker struct {
	role    coordination.Role
	builder *coordination.RoleStateBuilder
	lease   *coordination.Lease
	next    int64 // the offset to read from next

	expired int64 // the deadline of the last lease reported as expired
}

func newRoleTracker(role coordination.Role) *roleTracker {
	return &roleTracker{role: role, builder: coordination.NewRoleStateBuilder(role)}
}

// state returns the folded state.
func (t *roleTracker) state() coordination.RoleState { return t.builder.Build() }

// apply folds records, and returns the events they make. Records below the
// offset already folded are skipped: the reader repeats them after
// compaction.
func (t *roleTracker) apply(records []coordination.StateRecord, now time.Time) []roleEvent {
	var events []roleEvent
	for _, record := range records {
		if record.Offset < t.next {
			continue
		}
		t.next = record.Offset + 1
		if event, ok := t.applyOne(record, now); ok {
			events = append(events, event)
		}
	}
	return events
}

func (t *roleTracker) applyOne(record coordination.StateRecord, now time.Time) (roleEvent, bool) {
	key, err := coordination.DecodeKey(record.Key)
	if err != nil || key.Role != t.role {
		return roleEvent{}, false
	}
	if err := t.builder.Apply(record); err != nil {
		return roleEvent{}, false
	}
	offset := record.Offset
	state := t.builder.Build()
	event := roleEvent{At: now, Role: t.role.String(), Offset: &offset, roleState: state}
	switch key.Kind {
	case coordination.KindRegistration:
		event.Member = key.Member.String()
		if coordination.IsTombstone(record.Value) {
			event.Kind = eventDeregistered
			event.Message = "left the roster"
			return event, true
		}
		rank, _ := state.RankOf(key.Member)
		event.Kind, event.Rank = eventRegistered, &rank
		event.Message = fmt.Sprintf("joined the roster at offset %d, rank %d", offset, rank)
		if holder, ok := state.Holder(); ok && holder == key.Member {
			event.Message = fmt.Sprintf("joined the roster at offset %d, and holds the lease", offset)
		}
		return event, true
	case coordination.KindLease:
		previous := t.lease
		if coordination.IsTombstone(record.Value) {
			t.lease = nil
			if previous == nil {
				return roleEvent{}, false
			}
			event.Kind, event.Member, event.Token = eventReleased, previous.Member.String(), previous.Token.String()
			event.Message = fmt.Sprintf("lease of %s (token %s) cleared: the holder resigned, or a fence released it; the first standby challenges at once",
				showName(previous.Member.String()), previous.Token)
			return event, true
		}
		lease := *state.Lease
		t.lease = &lease
		event.Member, event.Token, event.Deadline, event.GrantedAt = lease.Member.String(), lease.Token.String(), lease.Deadline, lease.GrantedAt
		switch {
		case previous == nil:
			event.Kind = eventGranted
			event.Message = fmt.Sprintf("%s took the role with token %s, lease until %s", showName(lease.Member.String()), lease.Token, formatMillis(lease.Deadline))
		case previous.Member == lease.Member && previous.Token == lease.Token:
			event.Kind = eventRenewed
			event.Message = fmt.Sprintf("%s renewed token %s, deadline %s", showName(lease.Member.String()), lease.Token, formatAgo(lease.Deadline, now.UnixMilli()))
		default:
			event.Kind = eventTakeover
			event.PreviousMember, event.PreviousToken, event.PreviousDeadline = previous.Member.String(), previous.Token.String(), previous.Deadline
			when := fmt.Sprintf("its lease expired %s before", formatShort(time.Duration(lease.GrantedAt-previous.Deadline)*time.Millisecond))
			if lease.GrantedAt < previous.Deadline {
				when = fmt.Sprintf("%s before its deadline", formatShort(time.Duration(previous.Deadline-lease.GrantedAt)*time.Millisecond))
			}
			event.Message = fmt.Sprintf("%s took over with token %s from %s (token %s, %s)",
				showName(lease.Member.String()), lease.Token, showName(previous.Member.String()), previous.Token, when)
		}
		return event, true
	}
	return roleEvent{}, false
}

// checkExpiry reports the lease whose deadline passed, once.
func (t *roleTracker) checkExpiry(now time.Time) (roleEvent, bool) {
	lease := t.lease
	if lease == nil || now.UnixMilli() < lease.Deadline || t.expired == lease.Deadline {
		return roleEvent{}, false
	}
	t.expired = lease.Deadline
	return roleEvent{
		At: now, Kind: eventExpired, Role: t.role.String(), Member: lease.Member.String(), Token: lease.Token.String(), Deadline: lease.Deadline,
		Message: fmt.Sprintf("lease of %s (token %s) expired at %s without a renewal; the first standby challenges now",
			showName(lease.Member.String()), lease.Token, formatMillis(lease.Deadline)),
	}, true
}

// epochEvent reports a change of the coordinator's token.
func epochEvent(role coordination.Role, previous, current coordination.LeadershipStatus, now time.Time) roleEvent {
	event := roleEvent{At: now, Kind: eventEpoch, Role: role.String()}
	if previous.Held {
		event.PreviousToken = previous.Token.String()
	}
	if current.Held {
		event.Token = current.Token.String()
		event.Message = fmt.Sprintf("the transaction coordinator holds epoch %s now (was %s): every writer under an older token is fenced",
			current.Token, orNone(event.PreviousToken))
	} else {
		event.Message = fmt.Sprintf("the transaction coordinator no longer knows an epoch of the role (was %s)", orNone(event.PreviousToken))
	}
	return event
}

func orNone(text string) string {
	if text == "" {
		return "none"
	}
	return text
}

func newWatchCommand(g *globals) *cobra.Command {
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "watch ROLE",
		Short: "Follow a role and print each change as it happens",
		Long: `watch prints the state of ROLE, then follows the partition of the state topic
that holds it, and prints every change as it lands: a registration, a
deregistration, a lease granted, a takeover, a resignation (the lease
cleared), a lease that expired without a renewal, and a new epoch at the
transaction coordinator (a challenge or a fence). Renewals are printed with
--verbose. With --output json it prints one JSON object per line.

It reads the compacted view of the partition, so changes to one key that
land within one fetch show as one: a resignation and the grant right after
it may show as a takeover. It takes no epoch and joins no group. It runs
until SIGINT or SIGTERM, or for --for.`,
		Example: `  krabka-coord watch controller --brokers 127.0.0.1:9092
  krabka-coord watch controller --verbose            # renewals too
  krabka-coord watch controller --output json | jq -c 'select(.event=="takeover")'`,
		Args: exactArgs("ROLE"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			role, err := parseRole(args[0])
			if err != nil {
				return err
			}
			if err := g.checkTopicFlags(); err != nil {
				return err
			}
			if duration < 0 {
				return usageError("--for %v: want 0 (until a signal) or a duration above zero", duration)
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			return watchRole(ctx, g, role)
		}),
	}
	cmd.Flags().DurationVar(&duration, "for", 0, "stop after this long (default: until SIGINT or SIGTERM)")
	return cmd
}

// watchRole prints the state of a role and then its changes until ctx ends.
func watchRole(ctx context.Context, g *globals, role coordination.Role) error {
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	transport, err := g.openChecked(setup, coordination.DefaultLeaseConfig())
	if err != nil {
		return err
	}
	defer transport.Close()
	partition, _ := coordination.RoleTopicPartition(role, g.coordOptions()...)

	changed, stopWatch := transport.WatchPartition(partition)
	defer stopWatch()
	tracker := newRoleTracker(role)
	records, _, err := transport.ReadPartitionFrom(setup, partition, 0)
	if err != nil {
		return clusterError("read %s: %s", partition, strings.TrimPrefix(err.Error(), "coordination: "))
	}
	tracker.apply(records, time.Now())
	status, err := coordination.DescribeLeadership(setup, transport, role)
	if err != nil {
		return clusterError("%s", strings.TrimPrefix(err.Error(), "coordination: "))
	}
	now := time.Now()
	state := buildDescribe(role, partition, tracker.state(), status, now.UnixMilli())
	printer := &eventPrinter{w: g.stdout, json: g.json(), verbose: g.verbose}
	if !g.json() {
		fmt.Fprintf(g.stderr, "watching role %s on %s (Ctrl-C to stop)\n", showName(role.String()), partition)
	}
	printer.print(roleEvent{At: now, Kind: eventState, Role: role.String(), Message: summarize(state), State: &state})
	if lease := tracker.lease; lease != nil && now.UnixMilli() >= lease.Deadline {
		tracker.expired = lease.Deadline // reported in the state already
	}

	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastEpochPoll := now
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			records, _, err := transport.ReadPartitionFrom(ctx, partition, tracker.next)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				fmt.Fprintf(g.stderr, "krabka-coord: warning: read %s: %s; retrying\n", partition, oneLine(err.Error()))
				continue
			}
			for _, event := range tracker.apply(records, time.Now()) {
				printer.print(event)
			}
		case now := <-tick.C:
			if event, ok := tracker.checkExpiry(now); ok {
				printer.print(event)
			}
			if now.Sub(lastEpochPoll) < time.Second {
				continue
			}
			lastEpochPoll = now
			poll, cancel := context.WithTimeout(ctx, 5*time.Second)
			current, err := coordination.DescribeLeadership(poll, transport, role)
			cancel()
			if err != nil {
				continue
			}
			if current.Held != status.Held || current.Token != status.Token {
				printer.print(epochEvent(role, status, current, time.Now()))
				status = current
			}
		}
	}
}

// summarize describes a state in one line.
func summarize(r describeJSON) string {
	var b strings.Builder
	if l := r.Lease; l != nil {
		live := "live, deadline " + formatAgo(l.Deadline.Millis, r.ObservedAt.Millis)
		if !l.Live {
			live = "EXPIRED " + formatAgo(l.Deadline.Millis, r.ObservedAt.Millis)
		}
		fmt.Fprintf(&b, "%s holds token %s (%s)", showName(l.Holder), l.Token, live)
	} else {
		b.WriteString("no lease")
	}
	var standbys []string
	for _, m := range r.Roster {
		if !m.Holder {
			standbys = append(standbys, fmt.Sprintf("%s (rank %d)", showName(m.Member), *m.Rank))
		}
	}
	if len(standbys) > 0 {
		fmt.Fprintf(&b, "; standbys %s", strings.Join(standbys, ", "))
	} else {
		b.WriteString("; no standby")
	}
	if r.Coordinator.Held {
		fmt.Fprintf(&b, "; coordinator epoch %s", r.Coordinator.Token.Token)
	} else {
		b.WriteString("; coordinator epoch none")
	}
	return b.String()
}

// eventPrinter writes the events of watch.
type eventPrinter struct {
	w       io.Writer
	json    bool
	verbose bool
}

func (p *eventPrinter) print(event roleEvent) {
	if event.Kind == eventRenewed && !p.verbose {
		return
	}
	event.Time = event.At.UTC().Format(time.RFC3339Nano)
	if p.json {
		_ = writeJSON(p.w, event)
		return
	}
	fmt.Fprint(p.w, formatEvent(event))
}

// formatEvent writes an event as one line of text.
func formatEvent(event roleEvent) string {
	member := showName(event.Member)
	if member == "" {
		member = "-"
	}
	return fmt.Sprintf("%s  %-12s  %-10s  %s\n", formatClock(event.At), event.Kind, member, event.Message)
}
