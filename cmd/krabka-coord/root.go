package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Environment variables that stand in for flags.
const (
	envBrokers      = "KRABKA_BROKERS"
	envSASLPassword = "KRABKA_SASL_PASSWORD"
)

// Output formats.
const (
	outputText = "text"
	outputJSON = "json"
)

// globals holds the flags of every command, and what the commands share.
type globals struct {
	brokers        string
	topic          string
	partitions     int
	tls            bool
	tlsCA          string
	tlsCert        string
	tlsKey         string
	tlsServerName  string
	saslMechanism  string
	saslUser       string
	saslPassword   string
	output         string
	connectTimeout time.Duration
	verbose        bool

	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	flags  *pflag.FlagSet // the persistent flags, to ask which were set

	// dial, when set, opens every connection to a broker: the tests cut
	// a member's network with it.
	dial func(ctx context.Context, network, host string) (net.Conn, error)
}

// newRoot builds the command tree, and returns the globals that its flags
// set.
func newRoot(stdout, stderr io.Writer, getenv func(string) string) (*cobra.Command, *globals) {
	g := &globals{stdout: stdout, stderr: stderr, getenv: getenv}
	root := &cobra.Command{
		Use:   "krabka-coord",
		Short: "Leader election over Apache Kafka: demo and operator's tool",
		Long: `krabka-coord elects one leader per role over Apache Kafka, with package
github.com/krabka-io/krabka-streams-go/coordination, and shows the cluster's
view of a role. The leadership epoch is a producer epoch that Kafka's
transaction coordinator mints, so the broker itself refuses every write of a
deposed leader.

Start with the demo: it needs no cluster.

Exit codes: 0 success, and elect stopped by SIGINT, SIGTERM or SIGHUP;
1 failure; 2 usage or invalid input; 3 fenced (another member took the
role), or run's lease guard stopped its command; 4 cluster unreachable,
credentials or an ACL refused, or the state topic missing, with another
partition count, or not compacted. run exits with its command's code (3
after a fence), and 0 when a signal stops it before it was elected.

--output json writes one JSON object per line: see cmd/krabka-coord/json.md.`,
		Example: `  krabka-coord demo
  export KRABKA_BROKERS=127.0.0.1:9092
  krabka-coord create-topic
  krabka-coord elect controller node-1
  krabka-coord describe controller --output json`,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("krabka-coord {{.Version}}\n")
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if cmd.Name() == "run" {
			return usageError("%v: put -- between MEMBER and the command, as in 'krabka-coord run ROLE MEMBER -- COMMAND ARG...'", err)
		}
		return usageError("%v (see '%s --help')", err, cmd.CommandPath())
	})

	f := root.PersistentFlags()
	f.StringVar(&g.brokers, "brokers", "", "comma-separated host:port seed brokers (default $"+envBrokers+")")
	f.StringVar(&g.topic, "topic", coordination.StateTopic, "the compacted state topic")
	f.IntVar(&g.partitions, "partitions", coordination.DefaultPartitions, "partition count of the state topic; every member must use the topic's count")
	f.BoolVar(&g.tls, "tls", false, "connect with TLS (implied by the other --tls-* flags)")
	f.StringVar(&g.tlsCA, "tls-ca", "", "PEM file of the CA that signs the brokers' certificates (default: the system pool)")
	f.StringVar(&g.tlsCert, "tls-cert", "", "PEM file of the client certificate, for mutual TLS (with --tls-key)")
	f.StringVar(&g.tlsKey, "tls-key", "", "PEM file of the client key, for mutual TLS (with --tls-cert)")
	f.StringVar(&g.tlsServerName, "tls-server-name", "", "server name to verify the brokers' certificates against (default: the host of each broker)")
	f.StringVar(&g.saslMechanism, "sasl-mechanism", "", "SASL mechanism: plain, scram-sha-256 or scram-sha-512")
	f.StringVar(&g.saslUser, "sasl-user", "", "SASL user name")
	f.StringVar(&g.saslPassword, "sasl-password", "", "SASL password (default $"+envSASLPassword+")")
	f.StringVarP(&g.output, "output", "o", outputText, "output format: text or json")
	f.DurationVar(&g.connectTimeout, "connect-timeout", 5*time.Second, "how long to wait for the brokers to answer at start")
	f.BoolVarP(&g.verbose, "verbose", "v", false, "print more: lease renewals (watch, demo) and the library's log")
	g.flags = f

	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		switch g.output {
		case outputText, outputJSON:
		default:
			return usageError("--output %q: want text or json", g.output)
		}
		if g.connectTimeout <= 0 {
			return usageError("--connect-timeout %v: want a duration above zero, such as 5s", g.connectTimeout)
		}
		return nil
	}

	root.AddCommand(
		newDemoCommand(g),
		newCreateTopicCommand(g),
		newDescribeCommand(g),
		newWatchCommand(g),
		newElectCommand(g),
		newRunCommand(g),
		newFenceCommand(g),
		newListCommand(g),
		newStepDownCommand(g),
	)
	return root, g
}

// runE wraps the body of a command so that every error it returns carries an
// exit code; an error without one is a failure (exit code 1).
func runE(body func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return classified(body(cmd, args))
	}
}

// exactArgs checks the argument count, with the names of the arguments in
// the message.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(names) == 0 {
			return usageError("%s takes no arguments, and got %q (see '%s --help')", cmd.Name(), args, cmd.CommandPath())
		}
		return usageError("%s takes %d argument(s), %s, and got %d (see '%s --help')",
			cmd.Name(), len(names), strings.Join(names, " "), len(args), cmd.CommandPath())
	}
}

// json reports whether the output is JSON.
func (g *globals) json() bool { return g.output == outputJSON }

// logger is the logger of the library: warnings on stderr, everything with
// --verbose.
func (g *globals) logger() *slog.Logger {
	level := slog.LevelWarn
	if g.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
}

// parseRole validates a role name.
func parseRole(name string) (coordination.Role, error) {
	role, err := coordination.NewRole(name)
	if err != nil {
		return role, usageError("invalid ROLE %s: %s", quoteName(name), nameProblem(err, coordination.MaxRoleLen, "controller"))
	}
	return role, nil
}

// parseMember validates a member id.
func parseMember(name string) (coordination.MemberID, error) {
	member, err := coordination.NewMemberID(name)
	if err != nil {
		return member, usageError("invalid MEMBER %s: %s", quoteName(name), nameProblem(err, coordination.MaxMemberIDLen, "node-1"))
	}
	return member, nil
}

// quoteName quotes a name for an error message, and shortens a long one.
func quoteName(name string) string {
	if len(name) > 40 {
		return fmt.Sprintf("%q... (%d bytes)", name[:32], len(name))
	}
	return fmt.Sprintf("%q", name)
}

// nameProblem says what is wrong with a name and what to do; example is a
// good name of the kind. It compares the NameError's Fault, not the text.
func nameProblem(err error, limit int, example string) string {
	var nameErr *coordination.NameError
	if errors.As(err, &nameErr) {
		switch nameErr.Fault {
		case coordination.NameEmpty:
			return "empty; pass a non-empty name such as " + example
		case coordination.NameTooLong:
			return fmt.Sprintf("longer than %d bytes; pass a shorter name", limit)
		case coordination.NameNotUTF8:
			return "not valid UTF-8; pass the name in UTF-8"
		}
	}
	return errText(err)
}

// errText is the message of an error of the library for the CLI's own
// messages: without the "coordination: " prefix, which the CLI's own
// prefix replaces. Every message of the CLI that quotes a library error
// goes through it.
func errText(err error) string {
	return strings.TrimPrefix(err.Error(), "coordination: ")
}

// coordOptions are the options of the library that the global flags set.
func (g *globals) coordOptions() []coordination.Option {
	return []coordination.Option{coordination.WithTopic(g.topic), coordination.WithPartitions(g.partitions)}
}

// checkTopicFlags validates --topic and --partitions without a cluster.
func (g *globals) checkTopicFlags() error {
	if g.partitions < 1 {
		return usageError("--partitions %d: want at least 1 (the default is %d)", g.partitions, coordination.DefaultPartitions)
	}
	if problem := topicNameProblem(g.topic); problem != "" {
		return usageError("--topic %q: %s", g.topic, problem)
	}
	return nil
}

// brokerList returns the seed brokers of --brokers or KRABKA_BROKERS.
func (g *globals) brokerList() ([]string, error) {
	value := g.brokers
	if !g.flags.Changed("brokers") {
		value = g.getenv(envBrokers)
	}
	var brokers []string
	for b := range strings.SplitSeq(value, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		return nil, usageError("no brokers: pass --brokers host:port[,host:port...] or set %s", envBrokers)
	}
	return brokers, nil
}

// brokersGiven reports whether --brokers or KRABKA_BROKERS names a cluster.
func (g *globals) brokersGiven() bool {
	if g.flags.Changed("brokers") {
		return true
	}
	return strings.TrimSpace(g.getenv(envBrokers)) != ""
}

// clientOptions builds the franz-go options of the TLS and SASL flags.
func (g *globals) clientOptions() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.DialTimeout(g.connectTimeout)}
	if g.dial != nil {
		opts = append(opts, kgo.Dialer(g.dial))
	}
	tlsConfig, err := g.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsConfig))
	}
	mechanism, err := g.saslOption()
	if err != nil {
		return nil, err
	}
	if mechanism != nil {
		opts = append(opts, mechanism)
	}
	if g.verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(g.stderr, kgo.LogLevelWarn, func() string { return "kgo: " })))
	}
	return opts, nil
}

// tlsConfig builds the TLS config of the --tls flags, nil without TLS.
func (g *globals) tlsConfig() (*tls.Config, error) {
	if !g.tls && g.tlsCA == "" && g.tlsCert == "" && g.tlsKey == "" && g.tlsServerName == "" {
		return nil, nil
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: g.tlsServerName}
	if g.tlsCA != "" {
		pem, err := os.ReadFile(g.tlsCA)
		if err != nil {
			return nil, usageError("--tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageError("--tls-ca %s: no PEM certificate in the file", g.tlsCA)
		}
		config.RootCAs = pool
	}
	switch {
	case g.tlsCert != "" && g.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(g.tlsCert, g.tlsKey)
		if err != nil {
			return nil, usageError("--tls-cert/--tls-key: %v", err)
		}
		config.Certificates = []tls.Certificate{cert}
	case g.tlsCert != "" || g.tlsKey != "":
		return nil, usageError("--tls-cert and --tls-key go together: pass both for mutual TLS, or neither")
	}
	return config, nil
}

// saslOption builds the SASL option of the --sasl flags, nil without SASL.
func (g *globals) saslOption() (kgo.Opt, error) {
	password := g.saslPassword
	if !g.flags.Changed("sasl-password") {
		password = g.getenv(envSASLPassword)
	}
	if g.saslMechanism == "" {
		if g.saslUser != "" || g.flags.Changed("sasl-password") {
			return nil, usageError("--sasl-user and --sasl-password need --sasl-mechanism plain, scram-sha-256 or scram-sha-512")
		}
		return nil, nil
	}
	if g.saslUser == "" {
		return nil, usageError("--sasl-mechanism %s needs --sasl-user (and --sasl-password or $%s)", g.saslMechanism, envSASLPassword)
	}
	switch strings.ToLower(g.saslMechanism) {
	case "plain", "scram-sha-256", "scram-sha-512":
	default:
		return nil, usageError("--sasl-mechanism %q: want plain, scram-sha-256 or scram-sha-512", g.saslMechanism)
	}
	if password == "" {
		return nil, usageError("--sasl-mechanism %s needs a password: pass --sasl-password or set $%s", g.saslMechanism, envSASLPassword)
	}
	switch strings.ToLower(g.saslMechanism) {
	case "plain":
		return kgo.SASL(plain.Auth{User: g.saslUser, Pass: password}.AsMechanism()), nil
	case "scram-sha-256":
		return kgo.SASL(scram.Auth{User: g.saslUser, Pass: password}.AsSha256Mechanism()), nil
	case "scram-sha-512":
		return kgo.SASL(scram.Auth{User: g.saslUser, Pass: password}.AsSha512Mechanism()), nil
	}
	return nil, usageError("--sasl-mechanism %q: want plain, scram-sha-256 or scram-sha-512", g.saslMechanism)
}

// leaseFlags are the lease timing flags of a command that takes a role.
type leaseFlags struct {
	duration time.Duration
	renew    time.Duration
	stagger  time.Duration
	poll     time.Duration

	heartbeat time.Duration // 0: no heartbeats (the specification's layout)
}

// add registers the flags with the given defaults.
func (l *leaseFlags) add(f *pflag.FlagSet, duration, renew, stagger, poll time.Duration) {
	f.DurationVar(&l.duration, "lease-duration", duration, "extent of a lease, at least 1s; a standby challenges a silent holder after it (also the transaction timeout, at most the brokers' transaction.max.timeout.ms, 15m by default)")
	f.DurationVar(&l.renew, "renew-interval", renew, "gap between two renewals of the holder; at least 100ms and at most a third of the lease duration")
	f.DurationVar(&l.stagger, "challenge-stagger", stagger, "extra wait of each rank of succession past the deadline")
	f.DurationVar(&l.poll, "poll-interval", poll, "longest gap between two reads of the state topic while a member waits")
	f.DurationVar(&l.heartbeat, "heartbeat-interval", 0, "switch heartbeats on: a waiting standby writes a heartbeat record every interval, and one unseen for 3 of them loses its rank; every member of a role passes the same value (default 0: off, the specification's layout, which readers of older releases and other ports decode)")
}

// Bounds of the lease flags. A lease is one Kafka transaction timeout,
// and a renewal is one transaction, which takes tens of milliseconds on a
// healthy cluster and can take hundreds on a loaded one: a shorter lease
// is elected and then lost at its first late renewal.
const (
	minLeaseDuration = time.Second
	minRenewInterval = 100 * time.Millisecond
)

// config validates the flags into a lease policy: a lease of at least
// minLeaseDuration, renewed at least every third of it (so that two
// renewals may fail before the deadline), and a renew interval of at least
// minRenewInterval.
func (l *leaseFlags) config() (coordination.LeaseConfig, error) {
	switch {
	case l.duration < minLeaseDuration:
		return coordination.LeaseConfig{}, usageError("--lease-duration %v: want at least %v; a shorter lease is lost at the first renewal that takes longer than a third of it", l.duration, minLeaseDuration)
	case l.renew < minRenewInterval:
		return coordination.LeaseConfig{}, usageError("--renew-interval %v: want at least %v", l.renew, minRenewInterval)
	case l.renew > l.duration/3:
		return coordination.LeaseConfig{}, usageError("--renew-interval %v is above a third of --lease-duration %v: want at most %v, so that the holder may miss two renewals before its deadline",
			l.renew, l.duration, (l.duration / 3).Truncate(time.Millisecond))
	case l.stagger <= 0:
		return coordination.LeaseConfig{}, usageError("--challenge-stagger %v: want a duration above zero, such as 1s", l.stagger)
	case l.poll <= 0:
		return coordination.LeaseConfig{}, usageError("--poll-interval %v: want a duration above zero, such as 1s", l.poll)
	case l.heartbeat < 0 || (l.heartbeat > 0 && l.heartbeat < minRenewInterval):
		return coordination.LeaseConfig{}, usageError("--heartbeat-interval %v: want at least %v, or 0 for no heartbeats (the default)", l.heartbeat, minRenewInterval)
	}
	config, err := coordination.NewLeaseConfig(l.duration, l.renew, l.stagger)
	if err != nil {
		msg := errText(err)
		return config, usageError("--lease-duration %v, --renew-interval %v, --challenge-stagger %v: %s", l.duration, l.renew, l.stagger, msg)
	}
	return withHeartbeat(config, l.heartbeat)
}

// withHeartbeat switches heartbeats on at this interval; zero keeps the
// policy's own (off, unless the policy has them).
func withHeartbeat(config coordination.LeaseConfig, heartbeat time.Duration) (coordination.LeaseConfig, error) {
	if heartbeat == 0 {
		return config, nil
	}
	config, err := config.WithHeartbeatInterval(heartbeat)
	if err != nil {
		return config, usageError("--heartbeat-interval %v: %s", heartbeat, errText(err))
	}
	return config, nil
}

// options are the library options of the lease flags.
func (l *leaseFlags) options(config coordination.LeaseConfig) []coordination.Option {
	return []coordination.Option{coordination.WithLeaseConfig(config), coordination.WithPollInterval(l.poll)}
}

// addRosterLapseFlag registers --heartbeat-interval on a command that
// shows ranks: the members' heartbeat interval, from which it tells a
// lapsed standby.
func addRosterLapseFlag(f *pflag.FlagSet, heartbeat *time.Duration) {
	f.DurationVar(heartbeat, "heartbeat-interval", 0,
		"the members' heartbeat interval (their --heartbeat-interval): a standby whose heartbeats stopped for 3 of them is shown lapsed, without a rank; a standby that writes no heartbeats never lapses "+
			"(default: the lease duration of the role's lease record; 30s for a role without a lease, and for watch)")
}

// rosterView is the lease policy by which a command that shows ranks
// tells a lapsed standby. A heartbeat of 0 (the flag's default) gives the
// zero LeaseConfig, autoView: each role's own lease duration (lapseView).
func rosterView(heartbeat time.Duration) (coordination.LeaseConfig, error) {
	if heartbeat == 0 {
		return autoView, nil
	}
	if heartbeat < minRenewInterval {
		return coordination.LeaseConfig{}, usageError("--heartbeat-interval %v: want at least %v", heartbeat, minRenewInterval)
	}
	return withHeartbeat(coordination.DefaultLeaseConfig(), heartbeat)
}

// autoView is the view of rosterView without --heartbeat-interval: the
// roster lapse of a role follows the lease duration of its lease record.
var autoView = coordination.LeaseConfig{}

// lapseView returns the lease policy by which rankOrder tells a lapsed
// standby of the role: view itself, unless it is autoView; then the
// default policy with the heartbeat interval of the members' default, the
// lease duration that the role's lease record carries (its deadline minus
// its grant), and the default policy for a role without a lease.
func lapseView(state coordination.RoleState, view coordination.LeaseConfig) coordination.LeaseConfig {
	if view != autoView {
		return view
	}
	if lease := state.Lease; lease != nil {
		if d := time.Duration(lease.Deadline-lease.GrantedAt) * time.Millisecond; d >= minRenewInterval {
			if config, err := coordination.DefaultLeaseConfig().WithHeartbeatInterval(d); err == nil {
				return config
			}
		}
	}
	return coordination.DefaultLeaseConfig()
}

// topicNameProblem applies Kafka's rules for a topic name, and returns ""
// for a valid one or what is wrong.
func topicNameProblem(topic string) string {
	switch {
	case topic == "":
		return "empty; pass the state topic of the members, such as " + coordination.StateTopic
	case topic == "." || topic == "..":
		return `"." and ".." are not topic names`
	case len(topic) > 249:
		return fmt.Sprintf("%d bytes; a topic name has at most 249", len(topic))
	}
	for _, r := range topic {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("holds %q; a topic name has only the characters a-z, A-Z, 0-9, '.', '_' and '-'", r)
		}
	}
	return ""
}
