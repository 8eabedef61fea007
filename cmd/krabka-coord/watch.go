package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func newWatchCommand(g *globals) *cobra.Command {
	var duration time.Duration
	var all bool
	var heartbeat time.Duration
	cmd := &cobra.Command{
		Use:   "watch ROLE... | watch --all",
		Short: "Follow roles and print each change as it happens",
		Long: `watch prints the state of each ROLE (with --all, of every role on the state
topic, and of each role that appears later), then follows the partitions of
the state topic that hold them, and prints every change as it lands: a
registration, a deregistration, a lease granted, a takeover, a holder that
took the role again under a new token (reacquired), a resignation (the lease
cleared), a lease that expired without a renewal, a lease that comes back
after it expired (restored: the holder renewed after an outage), and a new
epoch at the transaction coordinator (a challenge or a fence). Renewals are
printed with --verbose. With --output json it prints one JSON object per
line.

It reads the compacted view of the partition, so changes to one key that
land within one fetch show as one: a resignation and the grant right after
it may show as a takeover. It takes no epoch and joins no group. It runs
until SIGINT, SIGTERM or SIGHUP (exit 0), or for --for.`,
		Example: `  krabka-coord watch controller --brokers 127.0.0.1:9092
  krabka-coord watch controller scheduler --verbose      # renewals too
  krabka-coord watch --all --output json | jq -c 'select(.event=="takeover")'`,
		Args: rolesOrAll(&all),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			roles := make([]coordination.Role, 0, len(args))
			for _, arg := range args {
				role, err := parseRole(arg)
				if err != nil {
					return err
				}
				roles = append(roles, role)
			}
			if err := g.checkTopicFlags(); err != nil {
				return err
			}
			if duration < 0 {
				return usageError("--for %v: want 0 (until a signal) or a duration above zero", duration)
			}
			view, err := rosterView(heartbeat)
			if err != nil {
				return err
			}
			signals := followSignals(cmd.Context())
			defer signals.stop()
			return watchRoles(signals.ctx, g, roles, all, duration, view)
		}),
	}
	cmd.Flags().DurationVar(&duration, "for", 0, "stop this long after the state of the roles is printed (default: until a signal)")
	cmd.Flags().BoolVar(&all, "all", false, "every role of the state topic, and every role that appears later")
	addRosterLapseFlag(cmd.Flags(), &heartbeat)
	return cmd
}

// watcher follows roles of the state topic.
type watcher struct {
	g        *globals
	s        *session
	all      bool
	trackers map[coordination.Role]*roleTracker
	statuses map[coordination.Role]coordination.LeadershipStatus
	next     map[coordination.TopicPartition]int64
	printer  *eventPrinter
}

// watchRoles prints the state of the roles and then their changes until
// ctx ends.
func watchRoles(ctx context.Context, g *globals, roles []coordination.Role, all bool, duration time.Duration, view coordination.LeaseConfig) error {
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := g.openChecked(setup, coordination.DefaultLeaseConfig())
	if err != nil {
		return err
	}
	defer s.close()
	w := &watcher{g: g, s: s, all: all, trackers: make(map[coordination.Role]*roleTracker),
		statuses: make(map[coordination.Role]coordination.LeadershipStatus), next: make(map[coordination.TopicPartition]int64),
		printer: &eventPrinter{w: g.stdout, json: g.json(), verbose: g.verbose, withRole: all || len(roles) > 1}}
	var partitions []coordination.TopicPartition
	if all {
		for p := range g.partitions {
			partitions = append(partitions, coordination.TopicPartition{Topic: g.topic, Partition: p})
		}
	} else {
		seen := make(map[coordination.TopicPartition]bool)
		for _, role := range roles {
			w.trackers[role] = newRoleTracker(role)
			partition, _ := coordination.RoleTopicPartition(role, g.coordOptions()...)
			if !seen[partition] {
				seen[partition] = true
				partitions = append(partitions, partition)
			}
		}
	}

	// Subscribe before the first read, so that no change between the read
	// and the wait is missed.
	wake := make(chan struct{}, 1)
	var dirtyMu sync.Mutex
	dirty := make(map[coordination.TopicPartition]bool)
	var followers sync.WaitGroup
	followCtx, stopFollowing := context.WithCancel(ctx)
	defer func() { stopFollowing(); followers.Wait() }()
	for _, partition := range partitions {
		changed, stop := s.transport.WatchPartition(partition)
		followers.Go(func() {
			defer stop()
			for {
				select {
				case <-followCtx.Done():
					return
				case <-changed:
					dirtyMu.Lock()
					dirty[partition] = true
					dirtyMu.Unlock()
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
		})
	}

	for _, partition := range partitions {
		if _, err := w.read(setup, partition, false); err != nil {
			if interruptedBy(ctx) {
				return nil
			}
			return err
		}
	}
	if !g.json() {
		what := "roles " + strings.Join(roleNames(w.roles()), ", ")
		if len(w.trackers) == 1 {
			what = "role " + showName(w.roles()[0].String())
		}
		if all {
			what = fmt.Sprintf("every role of %s (%s now)", g.topic, fmtCount(len(w.trackers), "role", "roles"))
		}
		fmt.Fprintf(g.stderr, "watching %s (Ctrl-C to stop)\n", what)
	}
	now := time.Now()
	for _, role := range w.roles() {
		status, err := w.describeEpoch(setup, role)
		if err != nil {
			if interruptedBy(ctx) {
				return nil
			}
			return err
		}
		w.statuses[role] = status
		tracker := w.trackers[role]
		partition, _ := coordination.RoleTopicPartition(role, g.coordOptions()...)
		state := buildDescribe(role, partition, tracker.state(), status, now.UnixMilli(), view)
		tracker.checkLapses(now, view, false) // shown in the state already
		w.printer.print(roleEvent{At: newTimeJSON(now.UnixMilli()), Kind: eventState, Role: role.String(), Message: summarize(state), State: &state})
		if lease := tracker.lease; lease != nil && now.UnixMilli() >= lease.Deadline {
			tracker.expired = lease.Deadline // reported in the state already
		}
	}

	// --for counts from here: a slow cluster's setup does not eat it.
	if duration > 0 {
		var cancelFor context.CancelFunc
		ctx, cancelFor = context.WithTimeout(ctx, duration)
		defer cancelFor()
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastEpochPoll := now
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
			dirtyMu.Lock()
			var changed []coordination.TopicPartition
			for partition := range dirty {
				changed = append(changed, partition)
			}
			clear(dirty)
			dirtyMu.Unlock()
			for _, partition := range changed {
				if _, err := w.read(ctx, partition, true); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					fmt.Fprintf(g.stderr, "krabka-coord: warning: read %s: %s; retrying\n", partition, oneLine(err.Error()))
					dirtyMu.Lock()
					dirty[partition] = true
					dirtyMu.Unlock()
				}
			}
		case now := <-tick.C:
			for _, role := range w.roles() {
				if event, ok := w.trackers[role].checkExpiry(now); ok {
					w.printer.print(event)
				}
				for _, event := range w.trackers[role].checkLapses(now, view, true) {
					w.printer.print(event)
				}
			}
			// One DescribeTransactions a second for a few roles, every five
			// seconds for many.
			every := time.Second
			if len(w.trackers) > 16 {
				every = 5 * time.Second
			}
			if now.Sub(lastEpochPoll) < every {
				continue
			}
			lastEpochPoll = now
			roles := w.roles()
			poll, cancel := context.WithTimeout(ctx, 5*time.Second)
			statuses, errs := describeEpochs(poll, s, roles)
			cancel()
			for i, role := range roles {
				if errs[i] != nil {
					continue
				}
				previous := w.statuses[role]
				if statuses[i].Held != previous.Held || statuses[i].Token != previous.Token {
					w.printer.print(epochEvent(role, previous, statuses[i], time.Now()))
					w.statuses[role] = statuses[i]
				}
			}
		}
	}
}

// read folds the new records of a partition into the trackers, and prints
// their events when report. With --all, a role that a record names for the
// first time gets a tracker.
func (w *watcher) read(ctx context.Context, partition coordination.TopicPartition, report bool) (int, error) {
	var records []coordination.StateRecord
	var next int64
	err := retryTransient(ctx, func(ctx context.Context) (err error) {
		records, next, err = w.s.transport.ReadPartitionFrom(ctx, partition, w.next[partition])
		return err
	})
	if err != nil {
		if isDenied(err) {
			return 0, w.s.deniedError("read "+partition.String(), topicACL(opRead, w.g.topic), err)
		}
		return 0, clusterError("read %s: %s", partition, oneLine(strings.TrimPrefix(err.Error(), "coordination: ")))
	}
	w.next[partition] = next
	now := time.Now()
	events := 0
	for _, record := range records {
		key, err := coordination.DecodeKey(record.Key)
		if err != nil {
			continue
		}
		tracker := w.trackers[key.Role]
		if tracker == nil {
			if !w.all {
				continue
			}
			tracker = newRoleTracker(key.Role)
			w.trackers[key.Role] = tracker
		}
		for _, event := range tracker.apply([]coordination.StateRecord{record}, now) {
			if report {
				w.printer.print(event)
				events++
			}
		}
	}
	return events, nil
}

// describeEpoch asks for the epoch of a role, retrying what a dead broker
// fails.
func (w *watcher) describeEpoch(ctx context.Context, role coordination.Role) (coordination.LeadershipStatus, error) {
	var status coordination.LeadershipStatus
	err := retryTransient(ctx, func(ctx context.Context) (err error) {
		status, err = coordination.DescribeLeadership(ctx, w.s.transport, role)
		return err
	})
	if err != nil {
		return status, w.s.epochError(role, err)
	}
	return status, nil
}

// roles lists the tracked roles in name order.
func (w *watcher) roles() []coordination.Role {
	roles := make([]coordination.Role, 0, len(w.trackers))
	for role := range w.trackers {
		roles = append(roles, role)
	}
	slices.SortFunc(roles, func(a, b coordination.Role) int { return strings.Compare(a.String(), b.String()) })
	return roles
}

// roleNames writes roles for text output.
func roleNames(roles []coordination.Role) []string {
	names := make([]string, len(roles))
	for i, role := range roles {
		names[i] = showName(role.String())
	}
	return names
}

// summarize describes a state in one line.
func summarize(r describeJSON) string {
	var b strings.Builder
	if l := r.Lease; l != nil {
		live := "live, deadline " + formatAgo(l.Deadline.Millis, r.ObservedAt.Millis)
		if !l.Live {
			live = "EXPIRED " + formatAgo(l.Deadline.Millis, r.ObservedAt.Millis)
		}
		fmt.Fprintf(&b, "%s holds token %s (%s)", showName(l.Holder), l.Token.Token, live)
	} else {
		b.WriteString("no lease")
	}
	var standbys []string
	for _, m := range r.Roster {
		switch {
		case m.Lapsed:
			standbys = append(standbys, fmt.Sprintf("%s (lapsed)", showName(m.Member)))
		case !m.Holder:
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
	w        io.Writer
	json     bool
	verbose  bool
	withRole bool // several roles: each text line names its role
}

func (p *eventPrinter) print(event roleEvent) {
	if event.Kind == eventRenewed && !p.verbose {
		return
	}
	if p.json {
		_ = writeJSON(p.w, event)
		return
	}
	line := formatEvent(event)
	if p.withRole {
		line = formatClock(time.UnixMilli(event.At.Millis)) + "  " + showName(event.Role) + " " + strings.TrimPrefix(line, formatClock(time.UnixMilli(event.At.Millis)))
	}
	fmt.Fprint(p.w, line)
}

// formatEvent writes an event as one line of text.
func formatEvent(event roleEvent) string {
	member := showName(event.Member)
	if member == "" {
		member = "-"
	}
	return fmt.Sprintf("%s  %-12s  %-10s  %s\n", formatClock(time.UnixMilli(event.At.Millis)), event.Kind, member, event.Message)
}
