package main

// The command tree: the root command of krabka-coord with its global
// flags, the globals that every command shares, and the helpers of a
// command's arguments and errors.

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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

	// mintBound, when set, bounds fence's mint instead of requestTimeout:
	// the tests of a mint that never gets an answer.
	mintBound time.Duration
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
after a fence), and 0 when a signal stops it before it was elected. doctor
exits 0 when all is well, 1 on warnings, 2 on a blocker or when a signal
stops it before its checks end.

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
		newDoctorCommand(g),
		newDescribeCommand(g),
		newWatchCommand(g),
		newElectCommand(g),
		newRunCommand(g),
		newFenceCommand(g),
		newListCommand(g),
		newStepDownCommand(g),
		newTransferCommand(g),
		newDrainCommand(g),
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
