// Package demo is the scenario of krabka-coord demo: three members compete
// for a role on an embedded kfake cluster or a real one, the first one
// crashes, is fenced, rejoins, and the second one hands over; at the end
// the demo reads the command topic back and checks it. The command in
// cmd/krabka-coord parses the flags and calls Run.
package demo

// One run of the demo: it opens the cluster (broker.go), plays the
// scenario (scenario.go) with three members (member.go), and checks the
// result (checks.go); timeline.go prints it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"
	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Options are the settings of one run: the flags of krabka-coord demo.
// Lease and LeaseOptions are the timings (the options of the timing
// flags); Interval (the gap between two commands) and Timeout (of the
// whole scenario) must be above zero.
type Options struct {
	Out     io.Writer    // the timeline and the checks
	JSON    bool         // one document at the end (json.md) in place of the text
	Verbose bool         // renewals and the events' messages on the timeline too
	Logger  *slog.Logger // the library's log; nil discards it

	// Brokers and ClientOptions name a real cluster (its seeds that
	// answered, and the connection's options); no Brokers starts an
	// embedded kfake cluster of one broker in process.
	Brokers       []string
	ClientOptions []kgo.Opt

	// StateTopic, when not "", is the state topic (--topic), which the
	// demo never deletes; Role, when not zero, is the role (--role).
	StateTopic string
	Partitions int
	Role       coordination.Role

	Lease        coordination.LeaseConfig
	LeaseOptions []coordination.Option
	Interval     time.Duration
	Timeout      time.Duration
	KeepTopics   bool // on a real cluster, keep the topics the demo created
}

// Class is the kind of an Error: the CLI's exit code follows it.
type Class int

// The classes of an Error.
const (
	ClassFailed  Class = iota // a check did not hold, or another failure
	ClassUsage                // the options do not fit together
	ClassCluster              // the cluster or one of its topics failed
)

// Error is an error of Run, with its Class.
type Error struct {
	Class Class
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the error that e classes.
func (e *Error) Unwrap() error { return e.Err }

func failure(format string, args ...any) error {
	return &Error{Class: ClassFailed, Err: fmt.Errorf(format, args...)}
}

func clusterError(format string, args ...any) error {
	return &Error{Class: ClassCluster, Err: fmt.Errorf(format, args...)}
}

func usageError(format string, args ...any) error {
	return &Error{Class: ClassUsage, Err: fmt.Errorf(format, args...)}
}

// demo is one run of the scenario.
type demo struct {
	opts        Options
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
	takeovers    []clifmt.RoleEvent // takeover and granted events, in order
	crashAt      time.Time
	crashed      *demoMember
	resignAt     time.Time
	resigned     *demoMember
	refusedSeq   int    // the command the deposed leader tried
	refusedToken string // under this token
	refusedCode  string // the broker's code, if the error carries one
	checks       []checkJSON
}

// Run sets the cluster up, plays the scenario and checks the result. It
// returns nil when every check held, and an *Error otherwise; a cancelled
// ctx ends the scenario, and its checks report "interrupted".
func Run(ctx context.Context, opts Options) error {
	if opts.Out == nil || opts.Interval <= 0 || opts.Timeout <= 0 {
		return usageError("demo: Out, Interval and Timeout are required, the durations above zero")
	}
	start := time.Now()
	d := &demo{
		opts: opts, config: opts.Lease,
		out:          &timeline{w: opts.Out, json: opts.JSON, start: start},
		elected:      make(chan *demoMember, 8),
		fenced:       make(chan *demoMember, 8),
		stateChanged: make(chan struct{}),
		registered:   make(map[string]bool),
	}
	closeCluster, err := d.openCluster()
	if err != nil {
		return err
	}
	defer closeCluster()
	stateTopic := d.stateTopic
	topicSet := opts.StateTopic != ""
	if topicSet {
		stateTopic = opts.StateTopic
	}
	role := opts.Role
	if role == (coordination.Role{}) {
		if role, err = coordination.NewRole(d.defaultRole); err != nil {
			return failure("%v", err)
		}
	}
	d.role = role
	// The demo's members run as krabka-coord elect does: the library's
	// defaults, with the duplicate-member watch and the resignation anchor
	// switched on (its help says so); no heartbeats, so the topic holds the
	// specification's two record kinds.
	d.options = append(append([]coordination.Option{}, opts.LeaseOptions...), coordination.WithTopic(stateTopic), coordination.WithPartitions(opts.Partitions),
		coordination.WithDuplicateMemberCheck(), coordination.WithResignationAnchor())
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d.options = append(d.options, coordination.WithLogger(logger))
	d.part, err = coordination.RoleTopicPartition(role, d.options...)
	if err != nil {
		return usageError("%v", err)
	}

	runCtx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := d.setup(runCtx); err != nil {
		return err
	}
	if d.real && !opts.KeepTopics {
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
			scenarioErr = fmt.Errorf("%w: the scenario did not end within --timeout %v", scenarioErr, opts.Timeout)
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
