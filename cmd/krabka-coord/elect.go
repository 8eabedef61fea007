package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
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
}

func (h *holdFlags) add(f *pflag.FlagSet) {
	h.lease.add(f, coordination.DefaultLeaseDuration, coordination.DefaultRenewInterval, coordination.DefaultChallengeStagger, coordination.DefaultPollInterval)
	f.StringVar(&h.listen, "listen", "", "serve Prometheus metrics on /metrics and the health of the member on /healthz at this address, such as :9464")
	f.DurationVar(&h.wait, "wait", 0, "give up when not elected within this long, and exit 1 (default: wait until a signal)")
	f.BoolVar(&h.rejoin, "rejoin", false, "keep campaigning after a fence or a lost leadership, at the tail of the roster, as a supervisor loop would (counted in krabka_coord_rejoins_total)")
	f.BoolVar(&h.stepDownRemote, "step-down-endpoint", false, "accept POST /step-down on --listen, as 'krabka-coord step-down ROLE --at ADDR' sends it")
}

// resignTimeout bounds a resignation: two tombstones that take
// milliseconds on a healthy cluster. A cluster that does not answer within
// it leaves the lease to expire, and the standbys take over at its
// deadline.
const resignTimeout = 2 * time.Second

func newElectCommand(g *globals) *cobra.Command {
	flags := &holdFlags{}
	cmd := &cobra.Command{
		Use:   "elect ROLE MEMBER",
		Short: "Take a role, print the token, and hold it until a signal or a fence",
		Long: `elect registers MEMBER for ROLE, waits for its turn under the succession rules,
takes the role (the transaction coordinator mints a new epoch), prints the
fencing token, and holds the role: it renews the lease every
--renew-interval.

On SIGINT, SIGTERM or SIGHUP it resigns (a lease tombstone, so the first
standby takes over at once) and exits 0; a resignation that the cluster does
not confirm within 2 s is left to the lease deadline, with a warning, and a
second signal exits at once. A SIGHUP that was ignored when it started
(nohup) stays ignored.

On SIGUSR1, or on POST /step-down with --listen and --step-down-endpoint
('krabka-coord step-down ROLE --at ADDR'), the holder steps down: it
resigns, so the first standby takes over at once, and campaigns again at
the tail of the roster, without exiting (a drain).

When a renewal is refused because another member minted a newer epoch (a
fence, or a takeover after this process stalled past its lease), it leaves
the roster and exits 3; so it does when the producer of its epoch fails in a
way that no write under the token can recover from (ErrProducerLost). With
--rejoin it campaigns again instead, at the tail of the roster.

A second live process under the same ROLE and MEMBER is refused (exit 2):
each would fence the other. elect and run switch the library's duplicate-
member watch on (WithDuplicateMemberCheck). A restart under the MEMBER of
a live lease waits, before it writes anything, up to one --renew-interval
plus one --poll-interval and a second (12s with the defaults, never past
the lease's deadline) for a renewal by another live process; none means a
crashed earlier run, whose role it then takes back at once, for one epoch.
With --heartbeat-interval, a process that finds a standby registration of
its own MEMBER also waits up to one interval (plus a poll and a second) for
that standby's heartbeat: none means a crashed earlier run, whose place it
takes, at the tail.

elect and run also switch the resignation anchor on
(WithResignationAnchor): after a resignation or a step-down the standbys
challenge in rank order, one --challenge-stagger apart from the
resignation, so the first standby takes the role at once and the others
mint nothing.

Heartbeats are off by default, as the specification's topic layout has no
heartbeat record. --heartbeat-interval D switches them on: a waiting standby
writes a heartbeat record every D, and a standby unseen for 3 intervals
loses its rank, and registers again at the tail if it comes back. Switch it
on only when every reader of the state topic is of this release or later,
and pass every member of a role (and describe, list, watch) the same D.

With --listen it serves Prometheus metrics on /metrics (is-leader, token,
leadership changes, rejoins, renewal latency and failures, partition reads)
and /healthz, which answers 503 while this member believes it leads but has
not renewed within the lease duration, or while a standby cannot read the
partition of the role.

Exit codes: 0 resigned on a signal, or interrupted before it was elected;
1 not elected within --wait, or another failure; 2 usage, or a live
duplicate of MEMBER; 3 fenced or leadership lost; 4 cluster unreachable,
state topic misconfigured, an ACL missing, or a lease above the brokers'
transaction.max.timeout.ms.`,
		Example: `  krabka-coord elect controller node-1 --brokers 127.0.0.1:9092
  krabka-coord elect controller node-2 --lease-duration 6s --renew-interval 2s --challenge-stagger 1s
  krabka-coord elect controller node-1 --rejoin --listen :9464 --output json
  kill -USR1 $(pgrep -f 'elect controller node-1')   # step down, stay a standby`,
		Args: exactArgs("ROLE", "MEMBER"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			signals := followSignals(cmd.Context())
			defer signals.stop()
			h, err := prepareHolder(signals.ctx, g, flags, args[0], args[1])
			if err != nil {
				return err
			}
			defer h.close()
			for {
				leadership, err := h.acquire(signals.ctx, signals.stepDown)
				if err != nil || leadership == nil {
					return err
				}
				select {
				case <-signals.ctx.Done():
					return h.resign(leadership, signals.again)
				case <-leadership.Done():
					if err := h.lost(leadership); !h.rejoinAfter(err) {
						return err
					}
				case <-signals.stepDown:
					if err := h.stepDown(leadership, "SIGUSR1"); err != nil {
						return err
					}
				case <-h.stepDownRequests:
					if err := h.stepDown(leadership, "POST /step-down"); err != nil {
						return err
					}
				}
			}
		}),
	}
	flags.add(cmd.Flags())
	return cmd
}

// holder takes a role for elect and run.
type holder struct {
	// leaseWatched is set when refuseLiveHolder watched a live lease of
	// this member and saw no renewal: the next acquisition needs no
	// duplicate watch of its own (it would wait as long again).
	leaseWatched bool

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
	partition, _ := coordination.RoleTopicPartition(role, g.coordOptions()...)
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := g.openChecked(setup, config)
	if err != nil {
		return nil, err
	}
	h := &holder{g: g, flags: flags, role: role, member: member, config: config, partition: partition, session: s, transport: s.transport,
		metrics: newMemberMetrics(role, partition, config.Duration()), stepDownRequests: make(chan struct{}, 1)}
	h.metered = &meteredTransport{KafkaTransport: s.transport, metrics: h.metrics}
	if err := h.preflight(setup); err != nil {
		s.close()
		return nil, err
	}
	var background context.Context
	background, h.stop = context.WithCancel(context.Background())
	h.probeDone = make(chan struct{})
	go h.probe(background)
	if flags.listen != "" {
		var stepDown func() error
		if flags.stepDownRemote {
			stepDown = h.requestStepDown
		}
		addr, err := h.metrics.serve(background, flags.listen, stepDown)
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
	var records []coordination.StateRecord
	err := retryTransient(ctx, func(ctx context.Context) (err error) {
		records, _, err = h.transport.ReadPartitionFrom(ctx, h.partition, 0)
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
	if err := h.refuseLiveHolder(ctx, records); err != nil {
		return err
	}
	if limit, ok := h.session.maxTransactionTimeout(ctx); ok && h.config.Duration() > limit {
		return clusterError("--lease-duration %v is above the brokers' transaction.max.timeout.ms (%v), and the lease is the transaction timeout of the role: pass --lease-duration %v or less, or raise transaction.max.timeout.ms on the brokers",
			h.config.Duration(), limit, limit)
	}
	return nil
}

// refuseLiveHolder refuses, before anything is written, a member whose
// name another live process uses: a live lease that names the member and
// keeps being renewed, or a standby registration of the member that is not
// lapsed and keeps getting heartbeats. Registering would replace that
// process's registration (which ends that process's campaign), and leaving
// again would take it out of the roster. A lease that is not renewed
// within half its extent, or a standby that writes no heartbeat within one
// heartbeat interval and one poll interval, is a crashed earlier
// incarnation, which the campaign takes over as usual.
func (h *holder) refuseLiveHolder(ctx context.Context, records []coordination.StateRecord) error {
	builder := coordination.NewRoleStateBuilder(h.role)
	for _, record := range records {
		_ = builder.Apply(record)
	}
	state := builder.Build()
	now := time.Now().UnixMilli()
	lease := state.Lease
	entry, registered := state.Entry(h.member)
	var watch time.Duration
	switch {
	case lease != nil && lease.Member == h.member:
		if now >= lease.Deadline {
			return nil
		}
		// A live holder renews at least every renew interval, and a poll
		// later this process sees it: the library's duplicate watch waits
		// as long (WithDuplicateMemberCheck).
		watch = min(h.config.RenewInterval()+h.flags.lease.poll+time.Second, time.Until(time.UnixMilli(lease.Deadline)))
		h.report(holderEvent{Event: "checking_duplicate"}, fmt.Sprintf("krabka-coord: the live lease of role %s names member %s: waiting up to %v for a renewal, to tell another live process under this member id from a crashed earlier run",
			h.shownRole(), h.shownMember(), watch), true)
	case registered && h.config.HeartbeatInterval() > 0 && !entry.LapsedAt(now, h.config):
		// A standby writes a heartbeat at least every heartbeat interval
		// plus one poll interval: the wait reads this process's clock only.
		watch = h.config.HeartbeatInterval() + h.flags.lease.poll + time.Second
		h.report(holderEvent{Event: "checking_duplicate"}, fmt.Sprintf("krabka-coord: member %s of role %s is registered as a standby (last seen %s): waiting up to %v for its next heartbeat, to tell another live process under this member id from a crashed earlier run",
			h.shownMember(), h.shownRole(), formatAgo(entry.LastSeen, now), watch), true)
	default:
		return nil
	}
	watchCtx, cancel := context.WithTimeout(ctx, watch)
	defer cancel()
	next := int64(0)
	if len(records) > 0 {
		next = records[len(records)-1].Offset + 1
	}
	changed, stop := h.transport.WatchPartition(h.partition)
	defer stop()
	for {
		more, n, err := h.transport.ReadPartitionFrom(watchCtx, h.partition, next)
		if err == nil {
			next = n
			for _, record := range more {
				_ = builder.Apply(record)
			}
			state := builder.Build()
			if renewed := state.Lease; lease != nil && lease.Member == h.member && renewed != nil && renewed.Member == h.member && renewed.Token == lease.Token && renewed.GrantedAt > lease.GrantedAt {
				return usageError("member %s of role %s is in use by another live process: it holds the role under token %s and renewed its lease at %s; two processes under one member id would fence each other: give this process another MEMBER, or stop the other one",
					h.shownMember(), h.shownRole(), lease.Token, formatMillis(renewed.GrantedAt))
			}
			if seen, ok := state.Entry(h.member); lease == nil || lease.Member != h.member {
				if ok && (seen.LastSeen > entry.LastSeen || seen.Offset != entry.Offset) {
					return usageError("member %s of role %s is in use by another live process: it waits as a standby and was seen at %s; two processes under one member id would end each other's campaign: give this process another MEMBER, or stop the other one",
						h.shownMember(), h.shownRole(), formatMillis(seen.LastSeen))
				}
				if !ok {
					return nil // the other process left the roster
				}
			}
		}
		select {
		case <-watchCtx.Done():
			if interruptedBy(ctx) {
				return interruptedError("before member " + h.shownMember() + " registered")
			}
			h.leaseWatched = lease != nil && lease.Member == h.member
			return nil
		case <-changed:
		}
	}
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
		_, n, err := h.transport.ReadPartitionFrom(read, h.partition, next)
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

// requestStepDown asks the holder to step down; the HTTP handler of POST
// /step-down calls it.
func (h *holder) requestStepDown() error {
	if !h.metrics.isLeading() {
		return fmt.Errorf("member %s does not hold role %s: nothing to step down from", h.member, h.role)
	}
	select {
	case h.stepDownRequests <- struct{}{}:
	default: // one is pending already
	}
	return nil
}

// acquire waits for the role. It returns nil and nil when a signal ended
// the wait (the member left the roster), and an error with exit code 1 when
// --wait passed. A SIGUSR1 while it waits finds no leadership to step down
// from: it is reported and dropped, so that it does not step down the
// leadership that comes later.
func (h *holder) acquire(ctx context.Context, stepDown <-chan os.Signal) (*coordination.Leadership, error) {
	waiting, stopWaiting := context.WithCancel(ctx)
	dropped := make(chan struct{})
	go func() {
		defer close(dropped)
		for {
			select {
			case <-stepDown:
				h.report(holderEvent{Event: "step_down_ignored", Message: "SIGUSR1 while a standby: nothing to step down from"},
					fmt.Sprintf("krabka-coord: SIGUSR1: member %s does not hold role %s, it waits for it: nothing to step down from", h.shownMember(), h.shownRole()), true)
			case <-h.stepDownRequests:
				// A POST /step-down accepted while the leadership that it
				// was for ended: stale now.
			case <-waiting.Done():
				return
			}
		}
	}()
	defer func() {
		stopWaiting()
		<-dropped
	}()
	h.report(holderEvent{Event: "campaigning"}, fmt.Sprintf("krabka-coord: member %s campaigns for role %s on %s (lease %v, renew every %v); waiting for its turn",
		h.shownMember(), h.shownRole(), h.partition, h.config.Duration(), h.config.RenewInterval()), true)
	wait := ctx
	if h.flags.wait > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, h.flags.wait)
		defer cancel()
	}
	options := append(h.g.coordOptions(), h.flags.lease.options(h.config)...)
	// The CLI switches two extensions of the library on (see the help): the
	// duplicate-member watch, so a second live process under one MEMBER is
	// refused instead of fenced, and the resignation anchor, so a step-down
	// hands the role to the first standby. Neither writes another record.
	options = append(options, coordination.WithLogger(h.g.logger()), coordination.WithResignationAnchor())
	if h.leaseWatched {
		// refuseLiveHolder watched the lease that names this member and saw
		// no renewal: the campaign takes the role back at once, for one
		// epoch, as the specification's restart rule says.
		h.leaseWatched = false
	} else {
		options = append(options, coordination.WithDuplicateMemberCheck())
	}
	if h.renewDeadline != nil {
		options = append(options, h.renewDeadline)
	}
	leadership, err := coordination.AcquireLeadership(wait, h.metered, h.role, h.member, options...)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		h.report(holderEvent{Event: "interrupted"}, fmt.Sprintf("krabka-coord: interrupted before member %s was elected for role %s; it left the roster", h.shownMember(), h.shownRole()), true)
		return nil, nil
	case wait.Err() != nil:
		return nil, failure("member %s was not elected for role %s within --wait %v; it left the roster", h.shownMember(), h.shownRole(), h.flags.wait)
	case errors.Is(err, coordination.ErrDuplicateMember):
		return nil, usageError("member %s of role %s is in use by another live process, and two processes under one member id would fence each other: give this process another MEMBER, or stop the other one",
			h.shownMember(), h.shownRole())
	case isDenied(err):
		need := memberDenial(err, h.role, h.g.topic, true)
		return nil, h.session.deniedError(fmt.Sprintf("member %s campaigns for role %s", h.shownMember(), h.shownRole()), need, err)
	case errors.Is(err, coordination.ErrMisconfigured):
		return nil, clusterError("the cluster refuses the configuration of role %s: %s (a lease above the brokers' transaction.max.timeout.ms, 15m by default, is refused: pass a shorter --lease-duration)",
			h.shownRole(), oneLine(errText(err)))
	default:
		return nil, failure("%s", oneLine(errText(err)))
	}
	h.metrics.acquired(leadership.Token())
	lease := leadership.Lease()
	h.report(holderEvent{Event: "elected", Token: newTokenJSON(leadership.Token()), Deadline: timePtr(lease.Deadline)},
		fmt.Sprintf("elected: member %s holds role %s with token %s", h.shownMember(), h.shownRole(), leadership.Token()), false)
	return leadership, nil
}

// resign gives the role up after a signal, within resignTimeout; a second
// signal (again) stops waiting for the cluster.
func (h *holder) resign(leadership *coordination.Leadership, again <-chan os.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	resigned := make(chan error, 1)
	go func() { resigned <- h.resignLeadership(ctx, leadership) }()
	var err error
	select {
	case err = <-resigned:
	case <-again:
		cancel()
		<-resigned // Resign returns within 250 ms of its context
		h.metrics.ended("resigned")
		h.report(holderEvent{Event: "resigned", Token: newTokenJSON(leadership.Token()), Message: "second signal: exit without a confirmed resignation"},
			fmt.Sprintf("krabka-coord: second signal: member %s exits without waiting for its resignation of role %s; the standbys take over at the lease deadline at the latest", h.shownMember(), h.shownRole()), true)
		return nil
	}
	if cause := endedBefore(leadership, err); cause != nil {
		return h.lostTo(leadership, cause) // a fence or a lost producer came first
	}
	h.metrics.ended("resigned")
	if err != nil {
		h.report(holderEvent{Event: "resigned", Token: newTokenJSON(leadership.Token()), Message: "resignation not confirmed: " + oneLine(errText(err))},
			fmt.Sprintf("krabka-coord: warning: member %s stopped leading role %s, but the cluster did not confirm its resignation within %v (%s); the standbys take over at the lease deadline, %s",
				h.shownMember(), h.shownRole(), resignTimeout, oneLine(errText(err)), formatMillis(leadership.Lease().Deadline)), true)
		return nil
	}
	h.report(holderEvent{Event: "resigned", Token: newTokenJSON(leadership.Token())},
		fmt.Sprintf("resigned: member %s gave up role %s (token %s); the first standby, if any, takes over now", h.shownMember(), h.shownRole(), leadership.Token()), false)
	return nil
}

// stepDown resigns and goes on as a standby: the caller campaigns again,
// at the tail of the roster. It returns an error only when the leadership
// had ended otherwise and the member does not rejoin.
func (h *holder) stepDown(leadership *coordination.Leadership, by string) error {
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	err := h.resignLeadership(ctx, leadership)
	if cause := endedBefore(leadership, err); cause != nil {
		if err := h.lostTo(leadership, cause); !h.rejoinAfter(err) {
			return err
		}
		return nil
	}
	h.metrics.ended("stepped_down")
	h.metrics.rejoined("step_down")
	note := "the first standby, if any, takes over now"
	if err != nil {
		note = fmt.Sprintf("the cluster did not confirm the resignation (%s), so the standbys take over at the lease deadline", oneLine(errText(err)))
	}
	h.report(holderEvent{Event: "stepped_down", Token: newTokenJSON(leadership.Token()), Message: by},
		fmt.Sprintf("stepped down: member %s gave up role %s (token %s) on %s; %s; it campaigns again at the tail of the roster", h.shownMember(), h.shownRole(), leadership.Token(), by, note), false)
	return nil
}

// resignLeadership resigns the leadership, as [coordination.Leadership.Resign]
// does. A leadership that run's renew deadline ended
// ([coordination.ErrRenewDeadline]) writes nothing any more, but its token
// may still be the newest, and the lease still names the member: for it,
// run writes the tombstones that Resign would have written (the lease's
// under the token, the registration's and the heartbeat's), so that the
// first standby takes over at once rather than at the lease deadline, and
// the member leaves the roster, as it did when run's own timer stopped the
// command of a live leadership. The broker refuses the lease's tombstone
// when another member minted a newer epoch: the error then wraps
// [coordination.ErrFenced]. Resign first waits for the write in flight of
// the leadership, so the tombstones never race a renewal on the role's
// producer.
func (h *holder) resignLeadership(ctx context.Context, leadership *coordination.Leadership) error {
	err := leadership.Resign(ctx)
	if err == nil || !errors.Is(leadership.Err(), coordination.ErrRenewDeadline) {
		return err // resigned, or ended otherwise
	}
	if ctx.Err() != nil {
		return err
	}
	var registrationErr error
	var tombstones sync.WaitGroup
	tombstones.Go(func() {
		registrationErr = h.metered.Append(ctx, h.partition, coordination.EncodeKey(coordination.RegistrationKey(h.role, h.member)), nil)
	})
	tombstones.Go(func() {
		// Hygiene only, as in Resign: a heartbeat without a registration
		// counts for nothing. run cannot tell whether the campaign wrote
		// one, and a tombstone on a key never written changes no fold.
		_ = h.metered.Append(ctx, h.partition, coordination.EncodeKey(coordination.HeartbeatKey(h.role, h.member)), nil)
	})
	leaseErr := h.metered.WriteLease(ctx, h.partition, leadership.Token(), coordination.EncodeKey(coordination.LeaseKey(h.role)), nil)
	tombstones.Wait()
	if leaseErr != nil && errors.Is(leaseErr, coordination.ErrFenced) {
		return fmt.Errorf("coordination: resignation of role %s by %s under %s: %w", h.role, h.member, leadership.Token(), leaseErr)
	}
	if err := errors.Join(leaseErr, registrationErr); err != nil {
		return fmt.Errorf("coordination: resign role %s: %w", h.role, err)
	}
	return nil
}

// endedBefore is the cause that ended the leadership before the
// resignation that returned err, or nil when the resignation ended it:
// a resignation ([coordination.ErrNotHeld]), or the renew deadline of run
// whose tombstones resignLeadership wrote (the fence that one of them met
// is the cause).
func endedBefore(leadership *coordination.Leadership, err error) error {
	cause := leadership.Err()
	switch {
	case cause == nil, errors.Is(cause, coordination.ErrNotHeld):
		return nil
	case errors.Is(cause, coordination.ErrRenewDeadline):
		if errors.Is(err, coordination.ErrFenced) {
			return err
		}
		return nil
	}
	return cause
}

// rejoinAfter reports whether the member campaigns again after the end
// that lost returned: with --rejoin after a fence, a lost producer or the
// lease guard of run, and never after a refused permission.
func (h *holder) rejoinAfter(err error) bool {
	var exit *exitError
	if !h.flags.rejoin || !errors.As(err, &exit) || exit.code != exitFenced {
		return false
	}
	fmt.Fprintf(h.g.stderr, "krabka-coord: %s; --rejoin: it campaigns again\n", oneLine(exit.err.Error()))
	return true
}

// lost handles a leadership that ended without a resignation: it leaves
// the roster, and returns exit code 3 for a fence or a lost producer, and 4
// for a permission that the cluster refused.
func (h *holder) lost(leadership *coordination.Leadership) error {
	return h.lostTo(leadership, leadership.Err())
}

// lostTo is lost for the cause that ended the leadership: Err, or the
// fence that a tombstone of resignLeadership met.
func (h *holder) lostTo(leadership *coordination.Leadership, cause error) error {
	reason := endReason(cause)
	h.metrics.ended(reason)
	if h.flags.rejoin && (reason == "fenced" || reason == "lost") {
		h.metrics.rejoined(reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	// A fenced member writes no lease, but it may still leave the roster:
	// a registration needs no epoch.
	left := "it left the roster"
	if err := h.transport.Append(ctx, h.partition, coordination.EncodeKey(coordination.RegistrationKey(h.role, h.member)), nil); err != nil {
		// The tombstone did not land (the broker is unreachable, say):
		// the registration stays until its heartbeats stop counting.
		left = fmt.Sprintf("its registration could not be removed (%s), so it stays in the roster until it lapses (three heartbeat intervals)",
			oneLine(errText(err)))
	}
	var current *tokenJSON
	if status, err := coordination.DescribeLeadership(ctx, h.transport, h.role); err == nil && status.Held {
		current = newTokenJSON(status.Token)
	}
	h.report(holderEvent{Event: reason, Token: newTokenJSON(leadership.Token()), CurrentToken: current, Message: shortCause(cause)}, "", false)
	switch {
	case errors.Is(cause, coordination.ErrNotAuthorized):
		need := memberDenial(cause, h.role, h.g.topic, true)
		return h.session.deniedError(fmt.Sprintf("member %s lost role %s", h.shownMember(), h.shownRole()), need, cause)
	case errors.Is(cause, coordination.ErrProducerLost):
		return fencedError("lost: member %s lost role %s under token %s: the producer of its epoch is lost (%s), so no write under the token can land; %s; run it again to compete (or run with --rejoin)",
			h.shownMember(), h.shownRole(), leadership.Token(), oneLine(errText(cause)), left)
	case !errors.Is(cause, coordination.ErrFenced):
		return failure("member %s lost role %s: %s", h.shownMember(), h.shownRole(), oneLine(fmt.Sprint(cause)))
	}
	newer := "another member minted a newer epoch"
	if current != nil && current.Token != leadership.Token().String() {
		newer = "the coordinator holds " + current.Token + " now"
	}
	return fencedError("fenced: member %s lost role %s under token %s: %s, and the broker refused this member's renewal; %s",
		h.shownMember(), h.shownRole(), leadership.Token(), newer, left)
}

// holderEvent is a line of elect and run with --output json: one for
// every change of the member's state. See json.md.
type holderEvent struct {
	At        timeJSON   `json:"at"`
	Event     string     `json:"event"`
	Role      string     `json:"role"`
	Member    string     `json:"member"`
	Topic     string     `json:"topic"`
	Partition int        `json:"partition"`
	Token     *tokenJSON `json:"token"`

	// CurrentToken is the coordinator's token after a fence, null
	// otherwise.
	CurrentToken *tokenJSON `json:"current_token"`

	// Deadline is the lease deadline that an event concerns, null when
	// none does.
	Deadline *timeJSON `json:"deadline"`

	// ExitCode is the exit code of run's command, null for other events.
	ExitCode *int   `json:"exit_code"`
	Message  string `json:"message"`
}

// report prints an event: a JSON line, or the text on stdout (on stderr
// when toStderr: a progress note rather than a result).
func (h *holder) report(event holderEvent, text string, toStderr bool) {
	if h.g.json() {
		event.At = newTimeJSON(time.Now().UnixMilli())
		event.Role, event.Member = h.role.String(), h.member.String()
		event.Topic, event.Partition = h.partition.Topic, h.partition.Partition
		if event.Message == "" {
			event.Message = text
		}
		_ = writeJSON(h.g.stdout, event)
		return
	}
	switch {
	case text == "":
	case toStderr:
		fmt.Fprintln(h.g.stderr, text)
	default:
		fmt.Fprintln(h.g.stdout, text)
	}
}

// timePtr is a timeJSON of an instant, for an optional field.
func timePtr(millis int64) *timeJSON {
	t := newTimeJSON(millis)
	return &t
}

// endReason names why a leadership ended, for the metrics and the JSON
// events: fenced, lost (the producer of the epoch), denied (a permission),
// or resigned.
func endReason(cause error) string {
	switch {
	case errors.Is(cause, coordination.ErrFenced):
		return "fenced"
	case errors.Is(cause, coordination.ErrProducerLost):
		return "lost"
	case errors.Is(cause, coordination.ErrNotAuthorized):
		return "denied"
	}
	return "resigned"
}
