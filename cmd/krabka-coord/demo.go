package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// demoFlags are the flags of demo.
type demoFlags struct {
	lease      leaseFlags
	role       string
	interval   time.Duration
	timeout    time.Duration
	keepTopics bool
}

func newDemoCommand(g *globals) *cobra.Command {
	flags := &demoFlags{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Election, failover and fencing on an embedded cluster, checked at the end",
		Long: `demo runs three members, node-1, node-2 and node-3, that compete for the role
controller, with short timings, and prints a timeline. Without --brokers (or
KRABKA_BROKERS) it starts an embedded Kafka (kfake, in process); with
--brokers it runs the same scenario on a real cluster, in topics of its own
that it deletes at the end, and under a role of its own unless --role.

The leader dispatches numbered commands to a command topic through the
guarded write (Leadership.Write: a transaction under the role's epoch).

  1. election: node-1 registers first, ranks first, and takes the role;
  2. crash: node-1 stops renewing (its writes no longer leave the process,
     as in a long GC pause or a network partition) and does not resign;
  3. failover at the deadline: node-2, the first standby, challenges when
     node-1's lease expires and mints a newer epoch;
  4. fencing: node-1 wakes up and dispatches its next command, and the
     broker refuses it (ErrFenced);
  5. no failback: node-1 rejoins, and ranks last;
  6. handover: node-2 resigns, and node-3 takes over at once.

The members run with the options of krabka-coord elect: the library's
default options (the specification's) with the demo's short timings (the
flags below), the duplicate-member watch and the resignation anchor
switched on, and no heartbeats, so the state topic holds registrations and
leases only.

At the end demo reads the command topic read_committed and checks that
every command is there in order, that no command of a deposed leader
follows its successor's first, and that none was lost. It exits 0 only
when every check holds, and 1 otherwise.`,
		Example: `  krabka-coord demo
  go run ./cmd/krabka-coord demo --output json | jq .checks
  krabka-coord demo --brokers 127.0.0.1:9092`,
		Args: exactArgs(),
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if g.brokersGiven() {
				// A real broker on a loaded host: a mint or a renewal may
				// take hundreds of milliseconds, so the timings of the
				// embedded cluster would fail over by accident.
				for name, value := range map[string]string{"lease-duration": "6s", "renew-interval": "2s", "challenge-stagger": "2s", "timeout": "90s"} {
					if !cmd.Flags().Changed(name) {
						_ = cmd.Flags().Set(name, value)
					}
				}
			}
			config, err := flags.lease.config()
			if err != nil {
				return err
			}
			if err := g.checkTopicFlags(); err != nil {
				return err
			}
			if flags.interval <= 0 || flags.timeout <= 0 {
				return usageError("--interval and --timeout want durations above zero")
			}
			signals := followSignals(cmd.Context())
			defer signals.stop()
			return runDemo(signals.ctx, g, flags, config, cmd.Flags().Changed("topic"))
		}),
	}
	flags.lease.add(cmd.Flags(), 3*time.Second, time.Second, time.Second, 200*time.Millisecond) // 6s, 2s, 2s on a real cluster
	cmd.Flags().StringVar(&flags.role, "role", "", "role of the members (default: controller; on a real cluster controller-demo-<random>, so that no real role is fenced)")
	cmd.Flags().DurationVar(&flags.interval, "interval", 300*time.Millisecond, "gap between two commands of the leader")
	cmd.Flags().DurationVar(&flags.timeout, "timeout", 55*time.Second, "give up, and exit 1, when the scenario has not ended after this long (90s on a real cluster)")
	cmd.Flags().BoolVar(&flags.keepTopics, "keep-topics", false, "on a real cluster, keep the topics that the demo created (it never deletes a --topic you name)")
	return cmd
}

// demo is one run of the scenario.
type demo struct {
	g        *globals
	flags    *demoFlags
	out      *timeline
	role     coordination.Role
	config   coordination.LeaseConfig
	options  []coordination.Option
	brokers  []string
	kopts    []kgo.Opt
	cluster  string // what the header says about the cluster
	real     bool
	commands string // the command topic
	part     coordination.TopicPartition
	members  []*demoMember
	ledger   ledger
	observer *coordination.KafkaTransport

	elected chan *demoMember // a member took the role
	fenced  chan *demoMember // a member's guarded write was refused

	mu           sync.Mutex
	state        coordination.RoleState
	stateChanged chan struct{} // closed and replaced at every change of state
	registered   map[string]bool
	takeovers    []roleEvent // takeover and granted events, in order
	crashAt      time.Time
	crashed      *demoMember
	resignAt     time.Time
	resigned     *demoMember
	refusedSeq   int    // the command the deposed leader tried
	refusedToken string // under this token
	refusedCode  string // the broker's code, if the error carries one
	checks       []checkJSON
}

// runDemo sets the cluster up, plays the scenario and checks the result.
func runDemo(ctx context.Context, g *globals, flags *demoFlags, config coordination.LeaseConfig, topicSet bool) error {
	start := time.Now()
	d := &demo{
		g: g, flags: flags, config: config,
		out:          &timeline{w: g.stdout, json: g.json(), start: start},
		elected:      make(chan *demoMember, 8),
		fenced:       make(chan *demoMember, 8),
		stateChanged: make(chan struct{}),
		registered:   make(map[string]bool),
	}
	suffix := randomSuffix()
	stateTopic := "__coordination_state"
	d.commands = "demo-commands"
	roleName := flags.role
	if g.brokersGiven() {
		c, err := g.connect(ctx)
		if err != nil {
			return err
		}
		d.brokers, d.kopts, d.real = c.brokers, c.opts, true
		d.cluster = "Kafka at " + strings.Join(c.brokers, ",")
		stateTopic, d.commands = "krabka-demo-"+suffix, "krabka-demo-"+suffix+"-commands"
		if roleName == "" {
			roleName = "controller-demo-" + suffix
		}
	} else {
		fake, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return failure("start the embedded cluster: %v", err)
		}
		defer fake.Close()
		d.brokers = fake.ListenAddrs()
		d.cluster = "embedded kfake (in process, 1 broker)"
	}
	if topicSet {
		stateTopic = g.topic
	}
	if roleName == "" {
		roleName = "controller"
	}
	role, err := parseRole(roleName)
	if err != nil {
		return err
	}
	d.role = role
	// The demo's members run as krabka-coord elect does: the library's
	// defaults, with the duplicate-member watch and the resignation anchor
	// switched on (its help says so); no heartbeats, so the topic holds the
	// specification's two record kinds.
	d.options = append(flags.lease.options(config), coordination.WithTopic(stateTopic), coordination.WithPartitions(g.partitions),
		coordination.WithDuplicateMemberCheck(), coordination.WithResignationAnchor())
	logger := slog.New(slog.DiscardHandler)
	if g.verbose {
		logger = g.logger()
	}
	d.options = append(d.options, coordination.WithLogger(logger))
	d.part, err = coordination.RoleTopicPartition(role, d.options...)
	if err != nil {
		return usageError("%v", err)
	}

	runCtx, cancel := context.WithTimeout(ctx, flags.timeout)
	defer cancel()
	if err := d.setup(runCtx); err != nil {
		return err
	}
	if d.real && !flags.keepTopics {
		// Only the topics that the demo named itself: never a --topic of
		// the user's.
		owned := []string{d.commands}
		if !topicSet {
			owned = append(owned, stateTopic)
		}
		defer d.deleteTopics(owned...)
	}
	d.out.header(d)

	observeCtx, stopObserver := context.WithCancel(runCtx)
	observed, synced := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(observed)
		d.observe(observeCtx, synced)
	}()
	// The scenario's first wait for the state reports an observer that
	// cannot read; 10 s bounds the wait here.
	select {
	case <-synced:
	case <-runCtx.Done():
	case <-time.After(10 * time.Second):
	}
	scenarioErr := d.scenario(runCtx)
	d.stopMembers()
	// Let the observer print the last changes before the checks.
	settle, cancelSettle := context.WithTimeout(context.Background(), 3*time.Second)
	_ = d.waitState(settle, 3*time.Second, "the end", func(s coordination.RoleState) bool { return s.Lease == nil && len(s.Roster) == 0 })
	cancelSettle()
	stopObserver()
	<-observed
	d.closeTransports()
	if scenarioErr != nil {
		if ctx.Err() != nil {
			scenarioErr = errors.New("interrupted")
		} else if runCtx.Err() != nil {
			scenarioErr = fmt.Errorf("%w: the scenario did not end within --timeout %v", scenarioErr, flags.timeout)
		}
		d.check("scenario", false, scenarioErr.Error())
	}
	checkCtx, cancelCheck := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelCheck()
	commands := d.checkCommands(checkCtx)
	ok := d.out.finish(d, commands, time.Since(start))
	if !ok {
		return failure("demo failed: %d check(s) did not hold", d.failedChecks())
	}
	return nil
}

// randomSuffix names the topics and the role of a demo on a real cluster.
func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// setup creates the topics, the members and the observer.
func (d *demo) setup(ctx context.Context) error {
	setupTransport, err := coordination.NewKafkaTransportWithOptions(d.config, d.kopts, d.brokers...)
	if err != nil {
		return failure("%v", err)
	}
	defer setupTransport.Close()
	replication := 1
	if d.real {
		replication = -1
	}
	if err := setupTransport.CreateStateTopic(ctx, replication, 1, d.options...); err != nil {
		return clusterError("create the state topic: %s", errText(err))
	}
	client, err := kgo.NewClient(d.clientOpts()...)
	if err != nil {
		return failure("%v", err)
	}
	defer client.Close()
	if _, err := kadm.NewClient(client).CreateTopic(ctx, 1, int16(replication), nil, d.commands); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return clusterError("create the command topic %s: %v", d.commands, err)
	}
	if err := waitPartitionReady(ctx, client, d.commands); err != nil {
		return clusterError("the command topic %s is not ready: %v", d.commands, err)
	}
	d.observer, err = coordination.NewKafkaTransportWithOptions(d.config, d.kopts, d.brokers...)
	if err != nil {
		return failure("%v", err)
	}
	for i := 1; i <= 3; i++ {
		transport, err := coordination.NewKafkaTransportWithOptions(d.config, d.kopts, d.brokers...)
		if err != nil {
			return failure("%v", err)
		}
		name := fmt.Sprintf("node-%d", i)
		id, _ := coordination.NewMemberID(name)
		d.members = append(d.members, &demoMember{d: d, name: name, id: id, transport: transport, gate: &gatedTransport{KafkaTransport: transport}})
	}
	return nil
}

func (d *demo) clientOpts() []kgo.Opt {
	return append(append([]kgo.Opt{}, d.kopts...), kgo.SeedBrokers(d.brokers...))
}

// waitPartitionReady waits until partition 0 of a new topic answers at its
// leader: a produce before that waits out franz-go's metadata min age.
func waitPartitionReady(ctx context.Context, client *kgo.Client, topic string) error {
	for {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, client)
		if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			if err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deleteTopics removes the topics of a demo on a real cluster.
func (d *demo) deleteTopics(topics ...string) {
	client, err := kgo.NewClient(d.clientOpts()...)
	if err != nil {
		return
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(client).DeleteTopics(ctx, topics...)
}

// scenario plays the six steps.
func (d *demo) scenario(ctx context.Context) error {
	// 1. Election: the members register in order; node-1 ranks first.
	for _, m := range d.members {
		m.campaign(ctx)
		if err := d.waitState(ctx, 10*time.Second, "the registration of "+m.name, func(s coordination.RoleState) bool {
			_, ok := s.Entry(m.id)
			return ok
		}); err != nil {
			return err
		}
	}
	leader, err := d.waitElected(ctx, 15*time.Second, "the first election")
	if err != nil {
		return err
	}
	if err := d.waitCommands(ctx, leader, 4); err != nil {
		return err
	}

	// 2. Crash: the leader's writes stop leaving the process; no resignation.
	d.mu.Lock()
	d.crashAt, d.crashed = time.Now(), leader
	d.mu.Unlock()
	leader.gate.freeze()
	lease := leader.currentLeadership().Lease()
	d.out.add(leader.name, "crash", lease.Token.String(), "leader", fmt.Sprintf(
		"crashes: stops renewing, its writes no longer leave the process; it does not resign (lease deadline %s)",
		formatAgo(lease.Deadline, time.Now().UnixMilli())))

	// 3. Failover at the deadline.
	successor, err := d.waitElected(ctx, 2*d.config.Duration()+4*d.config.ChallengeStagger()+15*time.Second, "the failover")
	if err != nil {
		return err
	}
	if err := d.waitCommands(ctx, successor, 3); err != nil {
		return err
	}

	// 4. The deposed leader wakes, and its next guarded write is refused.
	d.out.add(leader.name, "wake", lease.Token.String(), "deposed", "wakes up, still believes it leads, and dispatches its next command")
	leader.gate.wake()
	select {
	case m := <-d.fenced:
		if m != leader {
			return fmt.Errorf("%s was fenced, not %s", m.name, leader.name)
		}
	case <-ctx.Done():
		return fmt.Errorf("waiting for the refusal of %s's write: %w", leader.name, ctx.Err())
	case <-time.After(15 * time.Second):
		return fmt.Errorf("the write of the deposed %s was not refused within 15s", leader.name)
	}

	// 5. It rejoins, and ranks last.
	before, _ := d.currentState().Entry(leader.id)
	leader.campaign(ctx)
	if err := d.waitState(ctx, 10*time.Second, "the new registration of "+leader.name, func(s coordination.RoleState) bool {
		entry, ok := s.Entry(leader.id)
		return ok && entry.Offset > before.Offset
	}); err != nil {
		return err
	}
	state := d.currentState()
	rank, _ := state.RankOf(leader.id)
	standbys := len(state.Roster) - 1
	if rank == standbys-1 {
		d.check("no failback", true, fmt.Sprintf("%s rejoined at rank %d of %d standbys (last)", leader.name, rank, standbys))
	} else {
		d.check("no failback", false, fmt.Sprintf("%s rejoined at rank %d of %d standbys; want rank %d, the last", leader.name, rank, standbys, standbys-1))
	}
	if err := d.waitCommands(ctx, successor, 5); err != nil {
		return err
	}

	// 6. The new leader resigns; the next takes over at once.
	d.mu.Lock()
	d.resignAt, d.resigned = time.Now(), successor
	d.mu.Unlock()
	l := successor.currentLeadership()
	d.out.add(successor.name, "resign", l.Token().String(), "leader", "resigns: clears its lease and leaves the roster")
	successor.stopDispatch()
	resignCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = l.Resign(resignCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("%s resigns: %w", successor.name, err)
	}
	third, err := d.waitElected(ctx, 10*time.Second, "the handover")
	if err != nil {
		return err
	}
	handover := third.electedTime().Sub(d.resignAt)
	switch {
	case third == leader:
		d.check("handover at once", false, fmt.Sprintf("%s, the deposed leader that rejoined last, took over after %s resigned; want %s, the first standby", third.name, successor.name, "the member of rank 0"))
	case handover >= d.config.Duration():
		d.check("handover at once", false, fmt.Sprintf("%s took over %s after %s resigned; want well within the lease %v, without waiting for a deadline (a mint on a loaded host can be slow: rerun with a longer --lease-duration)",
			third.name, formatShort(handover), successor.name, d.config.Duration()))
	default:
		d.check("handover at once", true, fmt.Sprintf("%s took over %s after %s resigned, without waiting for a deadline (lease %v)", third.name, formatShort(handover), successor.name, d.config.Duration()))
	}
	return d.waitCommands(ctx, third, 3)
}

// stopMembers ends every campaign and every leadership: a waiting member
// leaves the roster, a leader resigns.
func (d *demo) stopMembers() {
	var wg sync.WaitGroup
	for _, m := range d.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.stop()
		}()
	}
	wg.Wait()
}

// closeTransports closes the clients of the members and of the observer.
func (d *demo) closeTransports() {
	for _, m := range d.members {
		m.transport.Close()
	}
	if d.observer != nil {
		d.observer.Close()
	}
}

// waitElected waits for the next election, and then one renew interval
// more, so that an election that a later challenger fenced at once (two
// challengers on a loaded host) does not pass for the outcome: it returns
// the last member elected whose leadership still holds.
func (d *demo) waitElected(ctx context.Context, timeout time.Duration, what string) (*demoMember, error) {
	var elected *demoMember
	select {
	case elected = <-d.elected:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	case <-time.After(timeout):
		return nil, fmt.Errorf("no member took the role within %v of waiting for %s", timeout, what)
	}
	settle := time.After(d.config.RenewInterval())
	for {
		select {
		case m := <-d.elected:
			d.out.add(m.name, "note", m.currentToken().String(), "leader", fmt.Sprintf("a second election during %s: %s took the role from %s", what, m.name, elected.name))
			elected = m
		case <-settle:
			if l := elected.currentLeadership(); l == nil || l.Err() != nil {
				return nil, fmt.Errorf("%s was elected during %s, and lost the role at once: %v", elected.name, what, l.Err())
			}
			return elected, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// waitCommands waits until m dispatched n commands in its current term.
func (d *demo) waitCommands(ctx context.Context, m *demoMember, n int) error {
	deadline := time.Now().Add(time.Duration(n)*d.flags.interval + 15*time.Second)
	for m.termAcks() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s dispatched %d of %d commands in time", m.name, m.termAcks(), n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the commands of %s: %w", m.name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// currentState is the latest role state that the observer folded.
func (d *demo) currentState() coordination.RoleState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

// waitState waits until the observer's state satisfies ok.
func (d *demo) waitState(ctx context.Context, timeout time.Duration, what string, ok func(coordination.RoleState) bool) error {
	deadline := time.After(timeout)
	for {
		d.mu.Lock()
		state, changed := d.state, d.stateChanged
		d.mu.Unlock()
		if ok(state) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-deadline:
			return fmt.Errorf("%s did not show in the state topic within %v", what, timeout)
		}
	}
}

// observe follows the state partition with coordination.Observe, as
// watch does, and puts the registrations and expiries on the timeline. It
// closes synced once the first read of the partition is folded, so that
// the scenario starts only then: a registration the first read finds
// would be in the state only, not on the timeline. Read errors are
// retried by Observe; the demo's own checks report what they cost.
func (d *demo) observe(ctx context.Context, synced chan<- struct{}) {
	for change, err := range coordination.Observe(ctx, d.observer, []coordination.Role{d.role}, d.options...) {
		if err != nil {
			continue
		}
		if change.Kind == coordination.ChangeSynced {
			close(synced)
			continue
		}
		d.mu.Lock()
		d.state = change.State
		close(d.stateChanged)
		d.stateChanged = make(chan struct{})
		d.mu.Unlock()
		if event, ok := eventOf(change, d.config); ok {
			d.onRoleEvent(event)
		}
	}
}

// onRoleEvent puts an event of the state topic on the timeline.
func (d *demo) onRoleEvent(event roleEvent) {
	switch event.Kind {
	case eventRegistered:
		rank := fmt.Sprint(*event.Rank)
		d.mu.Lock()
		again := d.registered[event.Member]
		d.registered[event.Member] = true
		d.mu.Unlock()
		if again {
			d.out.add(event.Member, "rejoin", "-", rank, fmt.Sprintf("rejoins: registers again, at offset %d, so it ranks last: %s", *event.Offset, rosterLine(event.roleState)))
		} else {
			d.out.add(event.Member, "register", "-", rank, fmt.Sprintf("registers: its record lands at offset %d of %s, which ranks it %d", *event.Offset, d.part, *event.Rank))
		}
	case eventDeregistered:
		d.out.add(event.Member, "leave", "-", "-", "leaves the roster (registration tombstone)")
	case eventExpired:
		d.out.add(event.Member, "expire", tokenText(event.Token), "-", fmt.Sprintf("its lease expires: no renewal reached the log before the deadline %s", event.Deadline.Time))
	case eventGranted, eventTakeover, eventReacquired:
		d.mu.Lock()
		d.takeovers = append(d.takeovers, event)
		d.mu.Unlock()
		if d.g.verbose {
			d.out.add(event.Member, event.Kind, tokenText(event.Token), "leader", event.Message)
		}
		d.out.add("-", "roster", "-", "-", "the log now says: "+rosterLine(event.roleState))
	case eventRenewed, eventReleased, eventRestored:
		if d.g.verbose {
			d.out.add(event.Member, event.Kind, tokenText(event.Token), "-", event.Message)
		}
	}
}

// electedNote says how a member came to be elected.
func (d *demo) electedNote(m *demoMember, l *coordination.Leadership) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.resigned != nil && m != d.resigned && !d.resignAt.IsZero():
		return fmt.Sprintf("takes over %s after %s resigned (no deadline to wait for): mints a new epoch, writes its lease",
			formatShort(time.Since(d.resignAt)), d.resigned.name)
	case d.crashed != nil && m != d.crashed:
		return fmt.Sprintf("takes over at the deadline, %s after %s crashed: mints a new epoch, which fences %s",
			formatSeconds(time.Since(d.crashAt)), d.crashed.name, d.crashed.currentToken())
	}
	// The rank it had: its place among the registrations, as no lease
	// stood.
	rank := -1
	for i, entry := range d.state.Roster {
		if entry.Member == m.id {
			rank = i
		}
	}
	if rank <= 0 {
		return "elected: no lease yet, so rank 0 challenges at once: mints an epoch, writes the first lease"
	}
	return fmt.Sprintf("elected at rank %d: no lease yet, and no member of a lower rank took the role within %v of the challenge stagger (a slow mint on a loaded host): mints an epoch, writes the first lease",
		rank, d.config.ChallengeDelay(rank))
}

// check records the result of one check.
func (d *demo) check(name string, ok bool, detail string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checks = append(d.checks, checkJSON{Name: name, OK: ok, Detail: detail})
}

func (d *demo) failedChecks() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	failed := 0
	for _, c := range d.checks {
		if !c.OK {
			failed++
		}
	}
	return failed
}

// demoMember is one of the three members.
type demoMember struct {
	d         *demo
	name      string
	id        coordination.MemberID
	transport *coordination.KafkaTransport
	gate      *gatedTransport

	mu         sync.Mutex
	cancel     context.CancelFunc // ends the campaign and the dispatcher
	done       chan struct{}      // closed when the campaign goroutine returns
	leadership *coordination.Leadership
	token      coordination.FencingToken
	acks       int // commands of the current term
	stopped    chan struct{}
	electedAt  time.Time // of the current term
}

func (m *demoMember) electedTime() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.electedAt
}

// campaign starts AcquireLeadership; on election the member dispatches
// commands until its leadership ends.
func (m *demoMember) campaign(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	stopped := make(chan struct{})
	m.mu.Lock()
	m.cancel, m.done, m.stopped = cancel, done, stopped
	m.mu.Unlock()
	go func() {
		defer close(done)
		l, err := coordination.AcquireLeadership(ctx, m.gate, m.d.role, m.id, m.d.options...)
		if err != nil {
			return
		}
		m.mu.Lock()
		m.leadership, m.token, m.acks, m.electedAt = l, l.Token(), 0, time.Now()
		m.mu.Unlock()
		m.d.out.add(m.name, "elected", l.Token().String(), "leader", m.d.electedNote(m, l))
		m.d.elected <- m
		m.dispatch(ctx, l, stopped)
	}()
}

// dispatch writes numbered commands through the guarded write until the
// leadership ends, the dispatcher is stopped, or ctx ends.
func (m *demoMember) dispatch(ctx context.Context, l *coordination.Leadership, stopped <-chan struct{}) {
	seq := m.d.ledger.last() + 1
	token := l.Token()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stopped:
			return
		case <-l.Done():
			return
		case <-time.After(m.d.flags.interval):
		}
		if !m.gate.waitAwake(ctx) {
			return
		}
		value, _ := json.Marshal(commandJSON{Seq: seq, Member: m.name, Token: token.String()})
		write, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := l.Write(write, coordination.GuardedRecord{Topic: m.d.commands, Partition: 0, Key: fmt.Appendf(nil, "%d", seq), Value: value})
		cancel()
		switch {
		case err == nil:
			m.d.ledger.ack(commandJSON{Seq: seq, Member: m.name, Token: token.String()})
			m.mu.Lock()
			m.acks++
			m.mu.Unlock()
			m.d.out.add(m.name, "command", token.String(), "leader", fmt.Sprintf("dispatches command %d (guarded write committed)", seq))
			seq++
		case errors.Is(err, coordination.ErrFenced):
			code := brokerCode(err)
			m.d.mu.Lock()
			m.d.refusedSeq, m.d.refusedToken, m.d.refusedCode = seq, token.String(), code
			m.d.mu.Unlock()
			by := "refused"
			if code != "" {
				by = "refused by the broker with " + code
			}
			m.d.out.add(m.name, "fenced", token.String(), "-", fmt.Sprintf("command %d %s: ErrFenced, so it stops leading", seq, by))
			m.d.fenced <- m
			return
		case errors.Is(err, coordination.ErrProducerLost), errors.Is(err, coordination.ErrNotAuthorized):
			m.d.out.add(m.name, "lost", token.String(), "-", fmt.Sprintf("command %d failed, and the leadership ended: %s", seq, oneLine(err.Error())))
			return
		case errors.Is(err, coordination.ErrNotHeld), ctx.Err() != nil:
			return
		case errors.Is(err, coordination.ErrOutcomeUnknown):
			// It may commit yet: sending it again could dispatch it twice,
			// and the next number would leave a gap. The demo's dispatcher
			// stops, as a real one would until it read the command topic.
			m.d.out.add(m.name, "unknown", token.String(), "leader", fmt.Sprintf("command %d: outcome unknown (%s); the dispatcher stops", seq, oneLine(err.Error())))
			return
		default:
			m.d.out.add(m.name, "retry", token.String(), "leader", fmt.Sprintf("command %d failed (%s); retrying", seq, oneLine(err.Error())))
		}
	}
}

// brokerCode names the Kafka error code in err, or "".
func brokerCode(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return ""
}

// stopDispatch stops the dispatcher of the current term.
func (m *demoMember) stopDispatch() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped != nil {
		close(m.stopped)
		m.stopped = nil
	}
}

// stop ends the member: a leader resigns, a waiting member leaves the
// roster.
func (m *demoMember) stop() {
	m.stopDispatch()
	m.gate.wake()
	m.mu.Lock()
	cancel, done, l := m.cancel, m.done, m.leadership
	m.mu.Unlock()
	if l != nil && l.Err() == nil {
		m.d.out.add(m.name, "resign", l.Token().String(), "leader", "resigns at the end of the demo")
		ctx, cancelResign := context.WithTimeout(context.Background(), 5*time.Second)
		if err := l.Resign(ctx); err != nil {
			m.d.out.add(m.name, "error", l.Token().String(), "-", "resignation failed: "+oneLine(err.Error()))
		}
		cancelResign()
	}
	if cancel != nil {
		cancel()
		<-done
	}
}

func (m *demoMember) currentLeadership() *coordination.Leadership {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leadership
}

func (m *demoMember) currentToken() coordination.FencingToken {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

func (m *demoMember) termAcks() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.acks
}

// gatedTransport is the transport of a demo member. While the member is
// frozen, its writes fail at once and never leave the process, as in a long
// pause of the process or a network partition: the leader stops renewing,
// and it does not resign. When it wakes, its first guarded write goes out
// before any lease write, so the broker, and not a local check, is what
// refuses the deposed leader.
type gatedTransport struct {
	*coordination.KafkaTransport

	mu      sync.Mutex
	state   gateState
	awake   chan struct{} // closed on wake
	waiting bool          // woken, the first guarded write not done yet
}

type gateState int

const (
	gateOpen gateState = iota
	gateFrozen
)

var errFrozen = errors.New("demo: the member is frozen, and its writes do not leave the process")

func (t *gatedTransport) freeze() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state, t.awake = gateFrozen, make(chan struct{})
}

func (t *gatedTransport) wake() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == gateFrozen {
		t.state, t.waiting = gateOpen, true
		close(t.awake)
	}
}

// waitAwake blocks while the member is frozen. It returns false when ctx
// ends first.
func (t *gatedTransport) waitAwake(ctx context.Context) bool {
	t.mu.Lock()
	state, awake := t.state, t.awake
	t.mu.Unlock()
	if state != gateFrozen {
		return true
	}
	select {
	case <-awake:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaseBlocked reports whether a lease write must not go out now.
func (t *gatedTransport) leaseBlocked() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == gateFrozen || t.waiting
}

func (t *gatedTransport) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	if t.leaseBlocked() {
		return errFrozen
	}
	return t.KafkaTransport.WriteLease(ctx, partition, token, key, value)
}

func (t *gatedTransport) Append(ctx context.Context, partition coordination.TopicPartition, key, value []byte) error {
	t.mu.Lock()
	frozen := t.state == gateFrozen
	t.mu.Unlock()
	if frozen {
		return errFrozen
	}
	return t.KafkaTransport.Append(ctx, partition, key, value)
}

func (t *gatedTransport) WriteGuarded(ctx context.Context, token coordination.FencingToken, records []coordination.GuardedRecord) error {
	t.mu.Lock()
	frozen := t.state == gateFrozen
	t.mu.Unlock()
	if frozen {
		return errFrozen
	}
	err := t.KafkaTransport.WriteGuarded(ctx, token, records)
	t.mu.Lock()
	t.waiting = false
	t.mu.Unlock()
	return err
}

// ledger is the list of the commands that a leader dispatched and the
// broker acknowledged. A new leader continues the numbering from it.
type ledger struct {
	mu       sync.Mutex
	commands []commandJSON
}

func (l *ledger) ack(c commandJSON) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commands = append(l.commands, c)
}

func (l *ledger) last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.commands) == 0 {
		return 0
	}
	return l.commands[len(l.commands)-1].Seq
}

func (l *ledger) all() []commandJSON {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]commandJSON(nil), l.commands...)
}

// commandJSON is one command: the value of a record of the command topic.
type commandJSON struct {
	Seq    int    `json:"seq"`
	Member string `json:"member"`
	Token  string `json:"token"`
	Offset int64  `json:"offset"`
}

// demoCommandJSON is a command as the demo's JSON document shows it: the
// record's value, with the token as an object, and the record's offset.
type demoCommandJSON struct {
	Seq    int        `json:"seq"`
	Member string     `json:"member"`
	Token  *tokenJSON `json:"token"`
	Offset int64      `json:"offset"`
}

// checkJSON is the result of one check of the demo.
type checkJSON struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// endMarker is the key of the record that the check appends, outside any
// transaction, after every member stopped: a read_committed reader that
// reaches it has seen every decided transaction before it.
const endMarker = "demo-end"

// checkCommands reads the command topic read_committed and checks it
// against the acknowledged commands. It returns what it read.
func (d *demo) checkCommands(ctx context.Context) []commandJSON {
	acked := d.ledger.all()
	read, err := d.readCommands(ctx)
	if err != nil {
		d.check("read the command topic", false, err.Error())
		return nil
	}

	// Every command in order: 1, 2, 3, ... with no gap and no repeat.
	inOrder, detail := true, fmt.Sprintf("%d commands, 1 to %d, each once and in order", len(read), len(read))
	for i, c := range read {
		if c.Seq != i+1 {
			inOrder, detail = false, fmt.Sprintf("record %d (offset %d) holds command %d, want %d", i, c.Offset, c.Seq, i+1)
			break
		}
	}
	if len(read) == 0 {
		inOrder, detail = false, "no command in the topic"
	}
	d.check("in order", inOrder, detail)

	// None lost, and nothing that was not acknowledged.
	lost := 0
	present := make(map[string]bool, len(read))
	for _, c := range read {
		present[fmt.Sprintf("%d/%s/%s", c.Seq, c.Member, c.Token)] = true
	}
	for _, c := range acked {
		if !present[fmt.Sprintf("%d/%s/%s", c.Seq, c.Member, c.Token)] {
			lost++
		}
	}
	d.check("none lost", lost == 0 && len(read) == len(acked), fmt.Sprintf(
		"%d acknowledged, %d in the topic, %d acknowledged but missing", len(acked), len(read), lost))

	// No command of a deposed leader after its successor's first: along
	// the log, a token that another one followed never comes back. Commit
	// order in the log orders the terms; the producer ids of two
	// leaderships say nothing about their order.
	fencedOK, terms := true, []string{}
	superseded := make(map[string]bool)
	previous := ""
	for i, c := range read {
		if _, err := coordination.ParseFencingToken(c.Token); err != nil {
			fencedOK, terms = false, []string{fmt.Sprintf("command %d carries token %q: %v", c.Seq, c.Token, err)}
			break
		}
		if i > 0 && c.Token != previous {
			if superseded[c.Token] {
				fencedOK = false
				terms = append(terms, fmt.Sprintf("command %d under %s comes after commands under %s, which followed it: a deposed leader wrote after its successor", c.Seq, c.Token, previous))
				break
			}
			superseded[previous] = true
			terms[len(terms)-1] += fmt.Sprintf("-%d", read[i-1].Seq)
		}
		if i == 0 || c.Token != previous {
			terms = append(terms, fmt.Sprintf("%s %s: %d", c.Member, c.Token, c.Seq))
		}
		previous = c.Token
	}
	if fencedOK && len(read) > 0 {
		terms[len(terms)-1] += fmt.Sprintf("-%d", read[len(read)-1].Seq)
	}
	d.mu.Lock()
	refusedSeq, refusedToken, crashed := d.refusedSeq, d.refusedToken, d.crashed
	d.mu.Unlock()
	for _, c := range read {
		if crashed != nil && c.Member == crashed.name && c.Token == refusedToken && c.Seq >= refusedSeq {
			fencedOK = false
			terms = append(terms, fmt.Sprintf("the refused command %d of %s is in the topic", c.Seq, crashed.name))
		}
	}
	verdict := "; no token comes back after its successor's first command"
	if !fencedOK {
		verdict = "; want no command under a token after its successor's first"
	}
	d.check("no deposed writer", fencedOK, "terms "+strings.Join(terms, ", ")+verdict)

	// No failover before the crash: the holder renewed in time all along.
	d.mu.Lock()
	crashAt := d.crashAt
	early := []string{}
	for _, t := range d.takeovers {
		if (t.Kind == eventTakeover || t.Kind == eventReacquired) && !crashAt.IsZero() && t.At.Millis < crashAt.UnixMilli() {
			early = append(early, t.Message)
		}
	}
	d.mu.Unlock()
	if len(early) == 0 {
		d.check("no early failover", true, "the first leader renewed its lease in time until it crashed")
	} else {
		d.check("no early failover", false, fmt.Sprintf("the role changed hands before the crash (%s): a renewal did not land within the lease %v, renewed every %v; the host or the cluster is too slow for these timings: rerun with a longer --lease-duration and --renew-interval",
			strings.Join(early, "; "), d.config.Duration(), d.config.RenewInterval()))
	}

	// The refusal itself, and the failover at the deadline.
	if crashed != nil {
		d.check("fenced", refusedSeq > 0, fmt.Sprintf("the write of command %d by %s under %s after the failover was refused (ErrFenced) and is not in the topic",
			refusedSeq, crashed.name, refusedToken))
		d.mu.Lock()
		takeovers := append([]roleEvent(nil), d.takeovers...)
		d.mu.Unlock()
		for _, t := range takeovers {
			if t.Kind == eventTakeover && t.PreviousMember == crashed.name && t.GrantedAt != nil && t.PreviousDeadline != nil {
				early := t.PreviousDeadline.Millis - t.GrantedAt.Millis
				if early <= 0 {
					d.check("failover at the deadline", true, fmt.Sprintf("%s took over %s after %s's lease expired, not before", t.Member, formatShort(time.Duration(-early)*time.Millisecond), crashed.name))
				} else {
					d.check("failover at the deadline", false, fmt.Sprintf("%s's lease was granted %s BEFORE the deadline of %s's lease; want at or after it", t.Member, formatShort(time.Duration(early)*time.Millisecond), crashed.name))
				}
				break
			}
		}
	}
	return read
}

// readCommands appends the end marker and reads the command topic
// read_committed up to it.
func (d *demo) readCommands(ctx context.Context) ([]commandJSON, error) {
	producer, err := kgo.NewClient(append(d.clientOpts(), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: d.commands, Partition: 0, Key: []byte(endMarker)}).FirstErr(); err != nil {
		return nil, fmt.Errorf("append the end marker: %w", err)
	}
	consumer, err := kgo.NewClient(append(d.clientOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{d.commands: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var read []commandJSON
	for {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return read, fmt.Errorf("read %s: %w after %d commands", d.commands, ctx.Err(), len(read))
		}
		if err := fetches.Err(); err != nil {
			return read, fmt.Errorf("read %s: %w", d.commands, err)
		}
		end := false
		fetches.EachRecord(func(r *kgo.Record) {
			if end {
				return
			}
			if string(r.Key) == endMarker {
				end = true
				return
			}
			var c commandJSON
			if err := json.Unmarshal(r.Value, &c); err != nil {
				c = commandJSON{Seq: -1, Member: "?", Token: string(r.Value)}
			}
			c.Offset = r.Offset
			read = append(read, c)
		})
		if end {
			return read, nil
		}
	}
}

// demoCommands converts the commands read back for the JSON document.
func demoCommands(commands []commandJSON) []demoCommandJSON {
	out := make([]demoCommandJSON, len(commands))
	for i, c := range commands {
		out[i] = demoCommandJSON{Seq: c.Seq, Member: c.Member, Offset: c.Offset}
		if token, err := coordination.ParseFencingToken(c.Token); err == nil {
			out[i].Token = newTokenJSON(token)
		}
	}
	return out
}

// timeline prints the events of the demo as they happen, or collects them
// for the JSON document.
type timeline struct {
	mu     sync.Mutex
	w      io.Writer
	json   bool
	start  time.Time
	width  int // of the token column
	events []timelineEvent
}

// timelineEvent is one row of the timeline. See json.md.
type timelineEvent struct {
	At        timeJSON   `json:"at"`
	ElapsedMs int64      `json:"elapsed_ms"`
	Member    string     `json:"member"` // "-" for the log itself
	Event     string     `json:"event"`
	Token     *tokenJSON `json:"token"`

	// Rank is the member's standing: leader, deposed, a rank of succession,
	// or "-".
	Rank    string `json:"rank"`
	Message string `json:"message"`

	token string // the token column of the text row
}

func (t *timeline) header(d *demo) {
	if t.json {
		return
	}
	fmt.Fprintf(t.w, "krabka-coord demo: 3 members compete for role %s on %s\n", showName(d.role.String()), d.cluster)
	fmt.Fprintf(t.w, "lease %v, renew every %v, challenge stagger %v; state on %s, commands to %s\n\n",
		d.config.Duration(), d.config.RenewInterval(), d.config.ChallengeStagger(), d.part, d.commands)
	// kfake derives a producer id from a hash of the transactional id, so
	// its tokens are wide; Kafka allocates small ids.
	t.width = 9
	if !d.real {
		t.width = 21
	}
	fmt.Fprintf(t.w, "%8s  %-7s  %-*s  %-7s  %s\n", "ELAPSED", "MEMBER", t.width, "TOKEN", "RANK", "EVENT")
}

func (t *timeline) add(member, event, token, rank, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	e := timelineEvent{At: newTimeJSON(now.UnixMilli()), ElapsedMs: now.Sub(t.start).Milliseconds(), Member: member, Event: event, Rank: rank, Message: message, token: token}
	if parsed, err := coordination.ParseFencingToken(token); err == nil {
		e.Token = newTokenJSON(parsed)
	}
	t.events = append(t.events, e)
	if !t.json {
		fmt.Fprint(t.w, formatTimelineRow(e, t.width))
	}
}

// formatTimelineRow writes one row of the timeline.
func formatTimelineRow(e timelineEvent, width int) string {
	return fmt.Sprintf("%7.2fs  %-7s  %-*s  %-7s  %s\n", float64(e.ElapsedMs)/1000, e.Member, width, e.token, e.Rank, e.Message)
}

// demoJSON is the document of demo --output json.
type demoJSON struct {
	OK           bool              `json:"ok"`
	DurationMs   int64             `json:"duration_ms"`
	Cluster      string            `json:"cluster"`
	Role         string            `json:"role"`
	StateTopic   string            `json:"state_topic"`
	Partition    int               `json:"partition"`
	CommandTopic string            `json:"command_topic"`
	LeaseMs      int64             `json:"lease_ms"`
	RenewMs      int64             `json:"renew_ms"`
	StaggerMs    int64             `json:"stagger_ms"`
	Events       []timelineEvent   `json:"events"`
	Commands     []demoCommandJSON `json:"commands"`
	Checks       []checkJSON       `json:"checks"`
}

// finish prints the checks, and reports whether all of them held.
func (t *timeline) finish(d *demo, commands []commandJSON, elapsed time.Duration) bool {
	d.mu.Lock()
	checks := append([]checkJSON(nil), d.checks...)
	d.mu.Unlock()
	ok := len(checks) > 0
	for _, c := range checks {
		ok = ok && c.OK
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.json {
		_ = writeJSON(t.w, demoJSON{
			OK: ok, DurationMs: elapsed.Milliseconds(), Cluster: d.cluster, Role: d.role.String(),
			StateTopic: d.part.Topic, Partition: d.part.Partition, CommandTopic: d.commands,
			LeaseMs: d.config.Duration().Milliseconds(), RenewMs: d.config.RenewInterval().Milliseconds(), StaggerMs: d.config.ChallengeStagger().Milliseconds(),
			Events: t.events, Commands: demoCommands(commands), Checks: checks,
		})
		return ok
	}
	fmt.Fprintf(t.w, "\ncheck: %s read back read_committed, against the acknowledged writes\n", d.commands)
	for _, c := range checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(t.w, "  %s  %-24s  %s\n", mark, c.Name, c.Detail)
	}
	verdict := "PASSED"
	if !ok {
		verdict = "FAILED"
	}
	fmt.Fprintf(t.w, "\ndemo %s in %s\n", verdict, formatSeconds(elapsed))
	return ok
}
