package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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
}

func newRootCommand(stdout, stderr io.Writer, getenv func(string) string) *cobra.Command {
	root, _ := newRoot(stdout, stderr, getenv)
	return root
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
role); 4 cluster unreachable, credentials refused, or the state topic
missing, with another partition count, or not compacted. run exits with its
command's code (3 after a fence), and 0 when a signal stops it before it
was elected.`,
		Example: `  krabka-coord demo
  export KRABKA_BROKERS=127.0.0.1:9092
  krabka-coord create-topic
  krabka-coord elect controller node-1
  krabka-coord describe controller --output json`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
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
		return role, usageError("invalid ROLE %s: %s", quoteName(name), nameProblem(err, coordination.MaxRoleLen))
	}
	return role, nil
}

// parseMember validates a member id.
func parseMember(name string) (coordination.MemberID, error) {
	member, err := coordination.NewMemberID(name)
	if err != nil {
		return member, usageError("invalid MEMBER %s: %s", quoteName(name), nameProblem(err, coordination.MaxMemberIDLen))
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

// nameProblem says what is wrong with a name and what to do.
func nameProblem(err error, limit int) string {
	text := err.Error()
	switch {
	case strings.HasSuffix(text, "empty"):
		return "empty; pass a non-empty name such as controller"
	case strings.Contains(text, "the maximum is"):
		return fmt.Sprintf("longer than %d bytes; pass a shorter name", limit)
	case strings.Contains(text, "not UTF-8"):
		return "not valid UTF-8; pass the name in UTF-8"
	}
	return strings.TrimPrefix(text, "coordination: ")
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
	probe, _ := coordination.NewRole("probe")
	if _, err := coordination.RoleTopicPartition(probe, g.coordOptions()...); err != nil {
		return usageError("--topic %q: %s", g.topic, strings.TrimPrefix(err.Error(), "coordination: "))
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
	case "plain":
		return kgo.SASL(plain.Auth{User: g.saslUser, Pass: password}.AsMechanism()), nil
	case "scram-sha-256":
		return kgo.SASL(scram.Auth{User: g.saslUser, Pass: password}.AsSha256Mechanism()), nil
	case "scram-sha-512":
		return kgo.SASL(scram.Auth{User: g.saslUser, Pass: password}.AsSha512Mechanism()), nil
	}
	return nil, usageError("--sasl-mechanism %q: want plain, scram-sha-256 or scram-sha-512", g.saslMechanism)
}

// cluster is a connection to the brokers, checked at start.
type cluster struct {
	g       *globals
	brokers []string
	opts    []kgo.Opt
}

// connect validates the connection flags and checks, within
// --connect-timeout, that a broker answers. A cluster that does not answer
// is an error with exit code 4, so a wrong address fails fast instead of
// in franz-go's long retries.
func (g *globals) connect(ctx context.Context) (*cluster, error) {
	brokers, err := g.brokerList()
	if err != nil {
		return nil, err
	}
	opts, err := g.clientOptions()
	if err != nil {
		return nil, err
	}
	c := &cluster{g: g, brokers: brokers, opts: opts}
	client, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, usageError("--brokers %s: %v", strings.Join(brokers, ","), err)
	}
	defer client.Close()
	pingCtx, cancel := context.WithTimeout(ctx, g.connectTimeout)
	defer cancel()
	if err := client.Ping(pingCtx); err != nil {
		return nil, c.unreachable(err)
	}
	return c, nil
}

// clientOpts are the options of a plain client of the cluster.
func (c *cluster) clientOpts() []kgo.Opt {
	return append(append([]kgo.Opt{}, c.opts...), kgo.SeedBrokers(c.brokers...))
}

// unreachable explains a failed ping.
func (c *cluster) unreachable(err error) error {
	where := strings.Join(c.brokers, ",")
	var hint string
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, kerr.IllegalSaslState), errors.Is(err, kerr.UnsupportedSaslMechanism),
		strings.Contains(err.Error(), "SASL"):
		hint = "check --sasl-mechanism, --sasl-user and --sasl-password (or $" + envSASLPassword + ") against the listener"
	case strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509:") || strings.Contains(err.Error(), "TLS"):
		hint = "check the --tls flags: the listener may not use TLS, or its certificate does not verify against --tls-ca and --tls-server-name"
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("no answer within --connect-timeout %v", c.g.connectTimeout)
		hint = "check --brokers (or $" + envBrokers + "), that the brokers run, and the TLS and SASL flags of the listener"
	default:
		hint = "check --brokers (or $" + envBrokers + ") and that the brokers run"
	}
	return clusterError("cannot reach Kafka at %s: %v; %s", where, err, hint)
}

// transport opens a KafkaTransport over the cluster.
func (c *cluster) transport(lease coordination.LeaseConfig) (*coordination.KafkaTransport, error) {
	transport, err := coordination.NewKafkaTransportWithOptions(lease, c.opts, c.brokers...)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return transport, nil
}

// onRole runs a one-shot command on the role that arg names: it parses the
// role, checks the topic flags, opens a checked transport under the request
// timeout, and hands both to do.
func (g *globals) onRole(cmd *cobra.Command, arg string, do func(context.Context, *coordination.KafkaTransport, coordination.Role) error) error {
	role, err := parseRole(arg)
	if err != nil {
		return err
	}
	if err := g.checkTopicFlags(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
	defer cancel()
	transport, err := g.openChecked(ctx, coordination.DefaultLeaseConfig())
	if err != nil {
		return err
	}
	defer transport.Close()
	return do(ctx, transport, role)
}

// openChecked connects to the cluster, opens a KafkaTransport with this
// lease policy, and checks the state topic, as every command that reads or
// writes a role does first. The caller closes the transport.
func (g *globals) openChecked(ctx context.Context, lease coordination.LeaseConfig) (*coordination.KafkaTransport, error) {
	c, err := g.connect(ctx)
	if err != nil {
		return nil, err
	}
	transport, err := c.transport(lease)
	if err != nil {
		return nil, err
	}
	if err := c.checkTopic(ctx, transport); err != nil {
		transport.Close()
		return nil, err
	}
	return transport, nil
}

// checkTopic checks the state topic as a member does at start, and turns a
// failure into an error that says which flag or command fixes it.
func (c *cluster) checkTopic(ctx context.Context, transport *coordination.KafkaTransport) error {
	err := transport.CheckStateTopic(ctx, c.g.coordOptions()...)
	if err == nil {
		return nil
	}
	if explained := c.explainTopic(ctx); explained != nil {
		return explained
	}
	return clusterError("%s", strings.TrimPrefix(err.Error(), "coordination: "))
}

// explainTopic finds what is wrong with the state topic, and returns nil
// when it finds nothing.
func (c *cluster) explainTopic(ctx context.Context) error {
	client, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	topic := c.g.topic
	partitions, _, err := topicMetadata(ctx, client, topic)
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return clusterError("the state topic %s does not exist: create it with 'krabka-coord create-topic --topic %s --partitions %d', or pass the --topic that the members use",
			topic, topic, c.g.partitions)
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return clusterError("cannot describe the state topic %s: %v; grant the user DESCRIBE and READ on the topic", topic, err)
	case err != nil:
		return nil
	case partitions != c.g.partitions:
		return clusterError("the state topic %s has %d partitions, but --partitions is %d: pass --partitions %d, the count the members use (a role lands on another partition under another count)",
			topic, partitions, c.g.partitions, partitions)
	}
	configs, err := admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil
	}
	config, err := configs.On(topic, nil)
	if err != nil || config.Err != nil {
		return nil
	}
	for _, entry := range config.Configs {
		if entry.Key == "cleanup.policy" && entry.Value != nil && !strings.Contains(*entry.Value, "compact") {
			return clusterError("the state topic %s has cleanup.policy=%s, but it must be compacted: "+
				"run 'kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact', or use another --topic",
				topic, *entry.Value, c.brokers[0], topic)
		}
	}
	return nil
}

// leaseFlags are the lease timing flags of a command that takes a role.
type leaseFlags struct {
	duration time.Duration
	renew    time.Duration
	stagger  time.Duration
	poll     time.Duration
}

// add registers the flags with the given defaults.
func (l *leaseFlags) add(f *pflag.FlagSet, duration, renew, stagger, poll time.Duration) {
	f.DurationVar(&l.duration, "lease-duration", duration, "extent of a lease; a standby challenges a silent holder after it (also the transaction timeout)")
	f.DurationVar(&l.renew, "renew-interval", renew, "gap between two renewals of the holder; at most a third of the lease duration")
	f.DurationVar(&l.stagger, "challenge-stagger", stagger, "extra wait of each rank of succession past the deadline")
	f.DurationVar(&l.poll, "poll-interval", poll, "longest gap between two reads of the state topic while a member waits")
}

// config validates the flags into a lease policy.
func (l *leaseFlags) config() (coordination.LeaseConfig, error) {
	config, err := coordination.NewLeaseConfig(l.duration, l.renew, l.stagger)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "coordination: ")
		return config, usageError("--lease-duration %v, --renew-interval %v, --challenge-stagger %v: %s", l.duration, l.renew, l.stagger, msg)
	}
	if l.poll <= 0 {
		return config, usageError("--poll-interval %v: want a duration above zero, such as 1s", l.poll)
	}
	return config, nil
}

// options are the library options of the lease flags.
func (l *leaseFlags) options(config coordination.LeaseConfig) []coordination.Option {
	return []coordination.Option{coordination.WithLeaseConfig(config), coordination.WithPollInterval(l.poll)}
}
