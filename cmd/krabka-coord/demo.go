package main

// The command demo: its flags and help, and one run of it, which opens
// the cluster (demo_broker.go), plays the scenario (demo_scenario.go) with
// three members (demo_member.go), and checks the result (demo_checks.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

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
	g           *globals
	flags       *demoFlags
	out         *timeline
	role        coordination.Role
	config      coordination.LeaseConfig
	options     []coordination.Option
	brokers     []string
	kopts       []kgo.Opt
	cluster     string // what the header says about the cluster
	real        bool
	commands    string // the command topic
	stateTopic  string // the state topic, unless --topic
	defaultRole string // the role, unless --role
	part        coordination.TopicPartition
	members     []*demoMember
	ledger      ledger
	observer    *coordination.KafkaTransport

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
	closeCluster, err := d.openCluster(ctx)
	if err != nil {
		return err
	}
	defer closeCluster()
	stateTopic := d.stateTopic
	if topicSet {
		stateTopic = g.topic
	}
	roleName := flags.role
	if roleName == "" {
		roleName = d.defaultRole
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
