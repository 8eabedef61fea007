package main

// The command demo: its flags and help. The scenario itself is the package
// internal/demo, which the command calls with the flags (demo.Run).

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/demo"
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

// runDemo connects to --brokers when they are given, and runs the demo
// (internal/demo) with the flags; it maps the demo's errors to exit codes.
func runDemo(ctx context.Context, g *globals, flags *demoFlags, config coordination.LeaseConfig, topicSet bool) error {
	opts := demo.Options{
		Out: g.stdout, JSON: g.json(), Verbose: g.verbose,
		Partitions: g.partitions, Lease: config, LeaseOptions: flags.lease.options(config),
		Interval: flags.interval, Timeout: flags.timeout, KeepTopics: flags.keepTopics,
	}
	if topicSet {
		opts.StateTopic = g.topic
	}
	if flags.role != "" {
		role, err := parseRole(flags.role)
		if err != nil {
			return err
		}
		opts.Role = role
	}
	if g.verbose {
		opts.Logger = g.logger()
	}
	if g.brokersGiven() {
		c, err := g.connect(ctx)
		if err != nil {
			return err
		}
		opts.Brokers, opts.ClientOptions = c.brokers, c.opts
	}
	err := demo.Run(ctx, opts)
	var demoErr *demo.Error
	if !errors.As(err, &demoErr) {
		return err
	}
	switch demoErr.Class {
	case demo.ClassUsage:
		return usageError("%v", demoErr.Err)
	case demo.ClassCluster:
		return clusterError("%v", demoErr.Err)
	default:
		return failure("%v", demoErr.Err)
	}
}
