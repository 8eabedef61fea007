package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// signalContext ends on SIGINT, SIGTERM or SIGHUP: the terminal or the
// session that started the process went away, and an unattended elect or
// run would otherwise die of it without resigning, and leave the command of
// run running. A SIGHUP that was ignored at start (nohup) stays ignored.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	signals := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		signals = append(signals, syscall.SIGHUP)
	}
	return signal.NotifyContext(parent, signals...)
}

// holdFlags are the flags of the commands that take a role: elect and run.
type holdFlags struct {
	lease  leaseFlags
	listen string
	wait   time.Duration
}

func (h *holdFlags) add(f *pflag.FlagSet) {
	h.lease.add(f, coordination.DefaultLeaseDuration, coordination.DefaultRenewInterval, coordination.DefaultChallengeStagger, coordination.DefaultPollInterval)
	f.StringVar(&h.listen, "listen", "", "serve Prometheus metrics on /metrics and the health of the leadership on /healthz at this address, such as :9464")
	f.DurationVar(&h.wait, "wait", 0, "give up when not elected within this long, and exit 1 (default: wait until a signal)")
}

func newElectCommand(g *globals) *cobra.Command {
	flags := &holdFlags{}
	cmd := &cobra.Command{
		Use:   "elect ROLE MEMBER",
		Short: "Take a role, print the token, and hold it until a signal or a fence",
		Long: `elect registers MEMBER for ROLE, waits for its turn under the succession rules,
takes the role (the transaction coordinator mints a new epoch), prints the
fencing token, and holds the role: it renews the lease every
--renew-interval. On SIGINT, SIGTERM or SIGHUP it resigns (a lease
tombstone, so the first standby takes over at once) and exits 0; a SIGHUP
that was ignored when it started (nohup) stays ignored. When a renewal is refused
because another member minted a newer epoch (a fence, or a takeover after
this process stalled past its lease), it leaves the roster and exits 3. So
it does when the producer of its epoch fails in a way that no write under
the token can recover from (ErrProducerLost: run it again to compete).

With --listen it serves Prometheus metrics on /metrics (is-leader, token,
leadership changes, renewal latency and failures) and /healthz, which
answers 503 while this member believes it leads but has not renewed within
the lease duration.

Exit codes: 0 resigned on a signal, or interrupted (SIGINT, SIGTERM,
SIGHUP) before it was elected, as run;
1 not elected within --wait, or another failure; 2 usage; 3 fenced or
leadership lost; 4 cluster unreachable, state topic misconfigured, or an
ACL missing.`,
		Example: `  krabka-coord elect controller node-1 --brokers 127.0.0.1:9092
  krabka-coord elect controller node-2 --lease-duration 6s --renew-interval 2s --challenge-stagger 1s
  krabka-coord elect controller node-1 --listen :9464 --output json`,
		Args: exactArgs("ROLE", "MEMBER"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			h, err := prepareHolder(ctx, g, flags, args[0], args[1])
			if err != nil {
				return err
			}
			defer h.close()
			leadership, err := h.acquire(ctx)
			if err != nil || leadership == nil {
				return err
			}
			select {
			case <-ctx.Done():
				return h.resign(leadership)
			case <-leadership.Done():
				return h.lost(leadership)
			}
		}),
	}
	flags.add(cmd.Flags())
	return cmd
}

// holder takes a role for elect and run.
type holder struct {
	g         *globals
	flags     *holdFlags
	role      coordination.Role
	member    coordination.MemberID
	config    coordination.LeaseConfig
	partition coordination.TopicPartition
	transport *coordination.KafkaTransport
	metered   *meteredTransport
	metrics   *memberMetrics
	stopHTTP  context.CancelFunc
}

// prepareHolder validates the arguments and flags, connects, checks the
// state topic, and starts the metrics server.
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
	partition, _ := coordination.RoleTopicPartition(role, g.coordOptions()...)
	setup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	transport, err := g.openChecked(setup, config)
	if err != nil {
		return nil, err
	}
	h := &holder{g: g, flags: flags, role: role, member: member, config: config, partition: partition, transport: transport,
		metrics: newMemberMetrics(role, config.Duration())}
	h.metered = &meteredTransport{KafkaTransport: transport, metrics: h.metrics}
	if flags.listen != "" {
		var serveCtx context.Context
		serveCtx, h.stopHTTP = context.WithCancel(context.Background())
		addr, err := h.metrics.serve(serveCtx, flags.listen)
		if err != nil {
			h.close()
			return nil, err
		}
		fmt.Fprintf(g.stderr, "krabka-coord: metrics on http://%s/metrics, health on http://%s/healthz\n", addr, addr)
	}
	return h, nil
}

// shownRole and shownMember are the names for text output: see showName.
func (h *holder) shownRole() string   { return showName(h.role.String()) }
func (h *holder) shownMember() string { return showName(h.member.String()) }

// close releases the transport and the metrics server.
func (h *holder) close() {
	if h.stopHTTP != nil {
		h.stopHTTP()
	}
	h.transport.Close()
}

// acquire waits for the role. It returns nil and nil when a signal ended
// the wait (the member left the roster), and an error with exit code 1 when
// --wait passed.
func (h *holder) acquire(ctx context.Context) (*coordination.Leadership, error) {
	if !h.g.json() {
		fmt.Fprintf(h.g.stderr, "krabka-coord: member %s campaigns for role %s on %s (lease %v, renew every %v); waiting for its turn\n",
			h.shownMember(), h.shownRole(), h.partition, h.config.Duration(), h.config.RenewInterval())
	}
	wait := ctx
	if h.flags.wait > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, h.flags.wait)
		defer cancel()
	}
	options := append(h.g.coordOptions(), h.flags.lease.options(h.config)...)
	options = append(options, coordination.WithLogger(h.g.logger()))
	leadership, err := coordination.AcquireLeadership(wait, h.metered, h.role, h.member, options...)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		fmt.Fprintf(h.g.stderr, "krabka-coord: interrupted before member %s was elected for role %s; it left the roster\n", h.shownMember(), h.shownRole())
		return nil, nil
	case wait.Err() != nil:
		return nil, failure("member %s was not elected for role %s within --wait %v; it left the roster", h.shownMember(), h.shownRole(), h.flags.wait)
	case errors.Is(err, coordination.ErrNotAuthorized):
		return nil, clusterError("%s", strings.TrimPrefix(err.Error(), "coordination: "))
	default:
		return nil, failure("%s", strings.TrimPrefix(err.Error(), "coordination: "))
	}
	h.metrics.acquired(leadership.Token())
	h.report("elected", leadership.Token(), "", fmt.Sprintf("elected: member %s holds role %s with token %s", h.shownMember(), h.shownRole(), leadership.Token()))
	return leadership, nil
}

// resign gives the role up after a signal.
func (h *holder) resign(leadership *coordination.Leadership) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := leadership.Resign(ctx)
	if cause := leadership.Err(); cause != nil && !errors.Is(cause, coordination.ErrNotHeld) {
		return h.lost(leadership) // a fence or a lost producer came first
	}
	h.metrics.ended("resigned")
	if err != nil {
		return failure("resign role %s: %s; the standbys take over at the lease deadline instead", h.shownRole(), strings.TrimPrefix(err.Error(), "coordination: "))
	}
	h.report("resigned", leadership.Token(), "", fmt.Sprintf("resigned: member %s gave up role %s (token %s); the first standby, if any, takes over now", h.shownMember(), h.shownRole(), leadership.Token()))
	return nil
}

// lost handles a leadership that ended without a resignation: it leaves
// the roster, and returns exit code 3 for a fence or a lost producer, and 4
// for a permission that the cluster refused.
func (h *holder) lost(leadership *coordination.Leadership) error {
	cause := leadership.Err()
	h.metrics.ended(endReason(cause))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A fenced member writes no lease, but it may still leave the roster:
	// a registration needs no epoch.
	_ = h.transport.Append(ctx, h.partition, coordination.EncodeKey(coordination.RegistrationKey(h.role, h.member)), nil)
	current := ""
	if status, err := coordination.DescribeLeadership(ctx, h.transport, h.role); err == nil && status.Held {
		current = status.Token.String()
	}
	h.report(endReason(cause), leadership.Token(), current, "")
	switch {
	case errors.Is(cause, coordination.ErrNotAuthorized):
		return clusterError("member %s lost role %s: the cluster refused a permission: %s; it left the roster",
			h.shownMember(), h.shownRole(), strings.TrimPrefix(cause.Error(), "coordination: "))
	case errors.Is(cause, coordination.ErrProducerLost):
		return fencedError("lost: member %s lost role %s under token %s: the producer of its epoch is lost (%s), so no write under the token can land; it left the roster, run it again to compete",
			h.shownMember(), h.shownRole(), leadership.Token(), strings.TrimPrefix(cause.Error(), "coordination: "))
	case !errors.Is(cause, coordination.ErrFenced):
		return failure("member %s lost role %s: %v", h.shownMember(), h.shownRole(), cause)
	}
	newer := "another member minted a newer epoch"
	if current != "" && current != leadership.Token().String() {
		newer = "the coordinator holds " + current + " now"
	}
	return fencedError("fenced: member %s lost role %s under token %s: %s, and the broker refused this member's renewal; it left the roster",
		h.shownMember(), h.shownRole(), leadership.Token(), newer)
}

// holderEvent is a line of elect and run with --output json.
type holderEvent struct {
	Time   string `json:"time"`
	Event  string `json:"event"`
	Role   string `json:"role"`
	Member string `json:"member"`
	tokenJSON
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`

	// CurrentToken is the coordinator's token after a fence.
	CurrentToken string `json:"current_token,omitempty"`
}

// report prints an event: the text on stdout, or a JSON line. A fence is
// reported as JSON only; its text is the error line on stderr.
func (h *holder) report(event string, token coordination.FencingToken, current, text string) {
	if h.g.json() {
		_ = writeJSON(h.g.stdout, holderEvent{
			Time: time.Now().UTC().Format(time.RFC3339Nano), Event: event, Role: h.role.String(), Member: h.member.String(),
			tokenJSON: *newTokenJSON(token), Topic: h.partition.Topic, Partition: h.partition.Partition, CurrentToken: current,
		})
		return
	}
	if text != "" {
		fmt.Fprintln(h.g.stdout, text)
	}
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
