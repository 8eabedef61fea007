package main

// The holder: what elect and run share to take a role and hold it: their
// flags, the setup and the checks before a member registers, the read
// probe behind /healthz, and the close. The campaign, the end of a
// leadership, the step-down and the output are in the holder_*.go files.

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// holdFlags are the flags of the commands that take a role: elect and run.
type holdFlags struct {
	lease          leaseFlags
	listen         string
	wait           time.Duration
	rejoin         bool
	stepDownRemote bool

	// The planned transfer (holder_transfer.go).
	successor       string
	successorPolicy string
	transferTimeout time.Duration
}

func (h *holdFlags) add(f *pflag.FlagSet) {
	h.lease.add(f, coordination.DefaultLeaseDuration, coordination.DefaultRenewInterval, coordination.DefaultChallengeStagger, coordination.DefaultPollInterval)
	f.StringVar(&h.listen, "listen", "", "serve Prometheus metrics on /metrics and the health of the member on /healthz at this address, such as :9464")
	f.DurationVar(&h.wait, "wait", 0, "give up when not elected within this long, and exit 1 (default: wait until a signal)")
	f.BoolVar(&h.rejoin, "rejoin", false, "keep campaigning after a fence or a lost leadership, at the tail of the roster, as a supervisor loop would (counted in krabka_coord_rejoins_total)")
	f.BoolVar(&h.stepDownRemote, "step-down-endpoint", false, "accept POST /step-down, POST /transfer and POST /drain on --listen, as 'krabka-coord step-down', 'transfer' and 'drain' send them")
	f.StringVar(&h.successor, "successor", "", "on a stop (a signal; for run, also the command's exit), hand the role to this member (Leadership.TransferTo) instead of resigning to the first standby; a transfer that fails resigns")
	f.StringVar(&h.successorPolicy, "successor-policy", "", "as --successor, with the member chosen at the stop: \"newest\", the live standby registered last (in a rolling restart, a member already restarted)")
	f.DurationVar(&h.transferTimeout, "transfer-timeout", 0, "how long a transfer waits for the named member to take the role before the holder takes it back (default: the library's, max(3 × --challenge-stagger, --renew-interval + 2 × --poll-interval), below the lease)")
}

// holder takes a role for elect and run.
type holder struct {
	g         *globals
	flags     *holdFlags
	role      coordination.Role
	member    coordination.MemberID
	config    coordination.LeaseConfig
	partition coordination.TopicPartition
	session   *session
	transport *coordination.KafkaTransport
	metrics   *memberMetrics

	// metered is the transport of the leaderships: the KafkaTransport,
	// timed for the metrics (metrics.go). The tombstones that run writes
	// after a renew deadline go through it too.
	metered coordination.Transport

	// renewDeadline is run's lease guard ([leaseGuard.option]), passed to
	// every AcquireLeadership; nil for elect, whose leadership has no
	// renew deadline.
	renewDeadline coordination.Option

	// stepDownRequests receives a POST /step-down of --listen.
	stepDownRequests chan struct{}

	// operatorRequests receives a POST /transfer or /drain of --listen
	// (holder_transfer.go); successorID is --successor.
	operatorRequests chan operatorRequest
	successorID      coordination.MemberID

	// handingOver is set while a POST /transfer or /drain is under way
	// (from ask's hand-off to its answer): a second one is refused as
	// busy at once instead of queueing behind it.
	handingOver atomic.Bool

	// stop ends the metrics server and the read probe; done closes when
	// the probe returned.
	stop      context.CancelFunc
	probeDone chan struct{}
}

// prepareHolder validates the arguments and flags, connects, checks the
// state topic, reads the role's partition and epoch once (so that a
// missing READ or transactional-id ACL shows before the member registers),
// and starts the metrics server and the read probe.
func prepareHolder(ctx context.Context, g *globals, flags *holdFlags, roleName, memberName string) (*holder, error) {
	role, err := parseRole(roleName)
	if err != nil {
		return nil, err
	}
	member, err := parseMember(memberName)
	if err != nil {
		return nil, err
	}
	config, err := flags.lease.config()
	if err != nil {
		return nil, err
	}
	if err := g.checkTopicFlags(); err != nil {
		return nil, err
	}
	if flags.wait < 0 {
		return nil, usageError("--wait %v: want 0 (until a signal) or a duration above zero", flags.wait)
	}
	if flags.stepDownRemote && flags.listen == "" {
		return nil, usageError("--step-down-endpoint needs --listen, the address it is served on")
	}
	successor, err := checkSuccessorFlags(flags, member, config)
	if err != nil {
		return nil, err
	}
	partition, _ := coordination.RoleTopicPartition(role, g.coordOptions()...)
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := g.openChecked(setup, config)
	if err != nil {
		return nil, err
	}
	h := &holder{g: g, flags: flags, role: role, member: member, config: config, partition: partition, session: s, transport: s.transport,
		metrics: newMemberMetrics(role, partition, config.Duration()), stepDownRequests: make(chan struct{}, 1),
		operatorRequests: make(chan operatorRequest), successorID: successor}
	h.metered = &meteredTransport{ExtendedTransport: s.transport, metrics: h.metrics}
	if err := h.preflight(setup); err != nil {
		s.close()
		return nil, err
	}
	var background context.Context
	background, h.stop = context.WithCancel(context.Background())
	h.probeDone = make(chan struct{})
	go h.probe(background)
	if flags.listen != "" {
		var endpoints *operatorEndpoints
		if flags.stepDownRemote {
			endpoints = &operatorEndpoints{stepDown: h.requestStepDown, ask: h.ask}
		}
		addr, err := h.metrics.serve(background, flags.listen, endpoints)
		if err != nil {
			h.close()
			return nil, err
		}
		fmt.Fprintf(g.stderr, "krabka-coord: metrics on http://%s/metrics, health on http://%s/healthz\n", addr, addr)
	}
	return h, nil
}

// preflight reads the role's partition and epoch once, and checks the
// lease against the brokers' transaction.max.timeout.ms when the cluster
// tells it.
func (h *holder) preflight(ctx context.Context) error {
	err := retryTransient(ctx, func(ctx context.Context) error {
		_, _, err := h.transport.ReadRolesFrom(ctx, h.partition, []coordination.Role{h.role}, 0)
		return err
	})
	switch {
	case interruptedBy(ctx):
		return interruptedError("before member " + h.shownMember() + " registered")
	case isDenied(err):
		return h.session.deniedError("read "+h.partition.String(), topicACL(opRead, h.g.topic), err)
	case err != nil:
		return clusterError("read %s: %s", h.partition, oneLine(errText(err)))
	}
	h.metrics.partitionRead(nil)
	err = retryTransient(ctx, func(ctx context.Context) error {
		_, err := coordination.DescribeLeadership(ctx, h.transport, h.role)
		return err
	})
	switch {
	case interruptedBy(ctx):
		return interruptedError("before member " + h.shownMember() + " registered")
	case isDenied(err):
		// A member needs WRITE on the transactional id to mint; WRITE
		// implies the DESCRIBE that DescribeTransactions needs.
		return h.session.deniedError("describe the epoch of role "+h.shownRole(), roleACL(opWrite, h.role), err)
	case err != nil:
		return h.session.epochError(h.role, err)
	}
	if limit, ok := h.session.maxTransactionTimeout(ctx); ok && h.config.Duration() > limit {
		return clusterError("--lease-duration %v is above the brokers' transaction.max.timeout.ms (%v), and the lease is the transaction timeout of the role: pass --lease-duration %v or less, or raise transaction.max.timeout.ms on the brokers",
			h.config.Duration(), limit, limit)
	}
	return nil
}

// probe reads the role's partition every few seconds, so that /healthz of
// a standby tells whether it can follow the role. It returns when ctx ends.
func (h *holder) probe(ctx context.Context) {
	defer close(h.probeDone)
	interval := min(max(h.config.RenewInterval(), time.Second), 5*time.Second)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	next := int64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		read, cancel := context.WithTimeout(ctx, interval)
		_, n, err := h.transport.ReadRolesFrom(read, h.partition, []coordination.Role{h.role}, next)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			next = n
		}
		h.metrics.partitionRead(err)
	}
}

// shownRole and shownMember are the names for text output: see showName.
func (h *holder) shownRole() string   { return showName(h.role.String()) }
func (h *holder) shownMember() string { return showName(h.member.String()) }

// close stops the metrics server and the probe, and releases the
// transport, within two closeBounds.
func (h *holder) close() {
	if h.stop != nil {
		h.stop()
		// A read in flight to a broker that drops packets may outlast its
		// cancellation; the probe then ends when its own bound passes.
		select {
		case <-h.probeDone:
		case <-time.After(closeBound):
		}
	}
	h.session.close()
}
