package main

// The command watch: it prints the state of roles, and then every change,
// until a signal or --for.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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
after it expired (restored: the holder renewed after an outage), a standby
whose rank lapsed (no registration or heartbeat seen for three
--heartbeat-interval periods: the others rank past it), and a new epoch at
the transaction coordinator (a challenge or a fence). Renewals are
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
			if heartbeat == 0 {
				heartbeat = coordination.DefaultLeaseDuration // Observe judges every role by one interval
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

// watcher follows roles of the state topic: what watch prints, and the
// coordinator's epoch of each role, which it polls. The fold of the state
// topic is coordination.Observe's.
type watcher struct {
	g        *globals
	s        *session
	roles    map[coordination.Role]bool
	statuses map[coordination.Role]coordination.LeadershipStatus
	printer  *eventPrinter
}

// observed is one value of coordination.Observe.
type observed struct {
	change coordination.RoleChange
	err    error
}

// watchRoles prints the state of the roles and then their changes until
// ctx ends. The changes come from coordination.Observe (ObserveAll with
// --all): the incremental fold of the state partitions, and the expiries
// and lapses by this host's clock, a lapse under the heartbeat interval of
// view. The coordinator's epoch comes from DescribeLeadership, polled.
func watchRoles(ctx context.Context, g *globals, roles []coordination.Role, all bool, duration time.Duration, view coordination.LeaseConfig) error {
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := g.openChecked(setup, coordination.DefaultLeaseConfig())
	if err != nil {
		return err
	}
	defer s.close()
	w := &watcher{g: g, s: s, roles: make(map[coordination.Role]bool),
		statuses: make(map[coordination.Role]coordination.LeadershipStatus),
		printer:  &eventPrinter{w: g.stdout, json: g.json(), verbose: g.verbose, withRole: all || len(roles) > 1}}

	observeCtx, stopObserving := context.WithCancel(ctx)
	options := append(g.coordOptions(), coordination.WithHeartbeatInterval(watchHeartbeat(view)), coordination.WithLogger(g.logger()))
	seq := coordination.ObserveAll(observeCtx, s.transport, options...)
	if !all {
		seq = coordination.Observe(observeCtx, s.transport, roles, options...)
	}
	changes := make(chan observed)
	var observer sync.WaitGroup
	defer func() { stopObserving(); observer.Wait() }()
	observer.Go(func() {
		defer close(changes)
		for change, err := range seq {
			select {
			case changes <- observed{change, err}:
			case <-observeCtx.Done():
				return
			}
		}
	})

	// The state of every role, once every partition was read.
	var states []coordination.RoleChange
	var lastErr observed
	for synced := false; !synced; {
		select {
		case <-setup.Done():
			if interruptedBy(ctx) {
				return nil
			}
			return w.readError(lastErr)
		case o, ok := <-changes:
			switch {
			case !ok:
				if interruptedBy(ctx) {
					return nil
				}
				return w.readError(lastErr) // a permission, or the topic
			case o.err != nil:
				lastErr = o
			case o.change.Kind == coordination.ChangeState:
				states = append(states, o.change)
				w.roles[o.change.Role] = true
			case o.change.Kind == coordination.ChangeSynced:
				synced = true
			}
		}
	}
	if !g.json() {
		what := "roles " + strings.Join(roleNames(w.sortedRoles()), ", ")
		if len(w.roles) == 1 {
			what = "role " + showName(w.sortedRoles()[0].String())
		}
		if all {
			what = fmt.Sprintf("every role of %s (%s now)", g.topic, fmtCount(len(w.roles), "role", "roles"))
		}
		fmt.Fprintf(g.stderr, "watching %s (Ctrl-C to stop)\n", what)
	}
	orderStates(states, w.printer)
	for _, change := range states {
		status, err := w.describeEpoch(setup, change.Role)
		if err != nil {
			if interruptedBy(ctx) {
				return nil
			}
			return err
		}
		w.statuses[change.Role] = status
		state := buildDescribe(change.Role, change.Partition, change.State, status, change.At, view)
		w.printer.print(roleEvent{At: newTimeJSON(change.At), Kind: eventState, Role: change.Role.String(), Message: summarize(state), State: &state})
	}

	// --for counts from here: a slow cluster's setup does not eat it.
	if duration > 0 {
		var cancelFor context.CancelFunc
		ctx, cancelFor = context.WithTimeout(ctx, duration)
		defer cancelFor()
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastEpochPoll := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case o, ok := <-changes:
			switch {
			case !ok:
				if ctx.Err() != nil {
					return nil
				}
				return w.readError(lastErr) // a permission, or the topic went away
			case o.err != nil:
				if ctx.Err() != nil {
					return nil
				}
				lastErr = o
				fmt.Fprintf(g.stderr, "krabka-coord: warning: %s; retrying\n", w.readText(o))
			default:
				if !o.change.Role.IsZero() {
					w.roles[o.change.Role] = true
				}
				if event, ok := eventOf(o.change, view); ok {
					w.printer.print(event)
				}
			}
		case now := <-tick.C:
			// One DescribeTransactions a second for a few roles, every five
			// seconds for many.
			every := time.Second
			if len(w.roles) > 16 {
				every = 5 * time.Second
			}
			if now.Sub(lastEpochPoll) < every {
				continue
			}
			lastEpochPoll = now
			roles := w.sortedRoles()
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

// orderStates puts the initial states in time order, and in name order at
// one instant (Observe yields them in name order, each stamped when its
// partition was read), and widens the printer's columns for every role and
// member that they name, so that the first lines align.
func orderStates(states []coordination.RoleChange, printer *eventPrinter) {
	slices.SortStableFunc(states, func(a, b coordination.RoleChange) int {
		if c := cmp.Compare(a.At, b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Role.String(), b.Role.String())
	})
	for _, change := range states {
		var members []string
		for _, entry := range change.State.Roster {
			members = append(members, entry.Member.String())
		}
		if holder, ok := change.State.Holder(); ok {
			members = append(members, holder.String())
		}
		printer.widen([]string{change.Role.String()}, members)
	}
}

// readText says what a read of coordination.Observe that failed was, in
// watch's words: "read PARTITION: the cause".
func (w *watcher) readText(o observed) string {
	step := "read " + w.g.topic
	if o.change.Partition != (coordination.TopicPartition{}) {
		step = "read " + o.change.Partition.String()
	}
	cause := errText(o.err)
	cause = strings.TrimPrefix(cause, "observe "+o.change.Partition.String()+": ")
	return step + ": " + oneLine(cause)
}

// readError is the error of a read of the state topic that watch gives up
// on: exit code 4, and for a missing permission the ACL that it lacks.
func (w *watcher) readError(o observed) error {
	if o.err == nil {
		return clusterError("read %s: no answer within %v", w.g.topic, requestTimeout)
	}
	if isDenied(o.err) {
		step := "read " + w.g.topic
		if o.change.Partition != (coordination.TopicPartition{}) {
			step = "read " + o.change.Partition.String()
		}
		return w.s.deniedError(step, topicACL(opRead, w.g.topic), o.err)
	}
	return clusterError("%s", w.readText(o))
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

// sortedRoles lists the followed roles in name order.
func (w *watcher) sortedRoles() []coordination.Role {
	roles := make([]coordination.Role, 0, len(w.roles))
	for role := range w.roles {
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

// eventPrinter writes the events of watch. In text its columns are as wide
// as the widest role and member that it has printed or was told of
// (widen): a longer name that comes later widens its column from then on.
type eventPrinter struct {
	w        io.Writer
	json     bool
	verbose  bool
	withRole bool // several roles: each text line names its role

	roleWidth, memberWidth int // in runes, as fmt pads
}

// minMemberWidth is the narrowest member column of watch's text.
const minMemberWidth = 10

// widen makes the role and member columns wide enough for names, as
// they are shown.
func (p *eventPrinter) widen(roles, members []string) {
	for _, role := range roles {
		p.roleWidth = max(p.roleWidth, utf8.RuneCountInString(showName(role)))
	}
	for _, member := range members {
		p.memberWidth = max(p.memberWidth, utf8.RuneCountInString(showName(member)))
	}
}

func (p *eventPrinter) print(event roleEvent) {
	if event.Kind == eventRenewed && !p.verbose {
		return
	}
	if p.json {
		_ = writeJSON(p.w, event)
		return
	}
	p.widen([]string{event.Role}, []string{event.Member})
	roleWidth := -1 // no role column
	if p.withRole {
		roleWidth = p.roleWidth
	}
	fmt.Fprint(p.w, formatEventIn(event, roleWidth, p.memberWidth))
}

// formatEvent writes an event as one line of text, without its role.
func formatEvent(event roleEvent) string { return formatEventIn(event, -1, 0) }

// formatEventIn writes an event as one line of text: the time, the role
// padded to roleWidth (no role column when it is negative), the kind, the
// member padded to memberWidth (at least minMemberWidth), and the message.
func formatEventIn(event roleEvent, roleWidth, memberWidth int) string {
	member := showName(event.Member)
	if member == "" {
		member = "-"
	}
	role := ""
	if roleWidth >= 0 {
		role = fmt.Sprintf("%-*s  ", roleWidth, showName(event.Role))
	}
	return fmt.Sprintf("%s  %s%-12s  %-*s  %s\n", formatClock(time.UnixMilli(event.At.Millis)), role, event.Kind, max(memberWidth, minMemberWidth), member, event.Message)
}

// watchHeartbeat is the heartbeat interval by which watch tells a lapsed
// standby: the members' (--heartbeat-interval), and the default lease
// duration without one. A standby that writes no heartbeats never lapses,
// whatever the interval.
func watchHeartbeat(view coordination.LeaseConfig) time.Duration {
	if heartbeat := view.HeartbeatInterval(); heartbeat > 0 {
		return heartbeat
	}
	return coordination.DefaultLeaseDuration
}
