package main

// The connection to the cluster: the seed brokers that answer at start,
// the session (a KafkaTransport over them), and the check of the state
// topic that every command that reads or writes a role makes first.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// cluster is a connection to the brokers, checked at start.
type cluster struct {
	g *globals

	// brokers are the seed brokers that answered at start: a seed that
	// does not answer is left out, because franz-go sends some requests
	// (FindCoordinator among them) to a seed in turn and does not retry
	// them elsewhere.
	brokers []string
	opts    []kgo.Opt
}

// connect validates the connection flags and asks every seed broker, in
// parallel and within --connect-timeout, for the cluster's metadata. The
// seeds that answer are the cluster's seeds from then on; one that does not
// is reported on stderr. A cluster of which no seed answers is an error
// with exit code 4, so a wrong address fails fast instead of in franz-go's
// long retries; a stop signal meanwhile ends the command with exit code 0.
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
	probe, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, usageError("--brokers %s: %v", strings.Join(brokers, ","), err)
	}
	probe.Close()
	timeoutCtx, cancel := context.WithTimeout(ctx, g.connectTimeout)
	defer cancel()
	// Once one seed answered, the others have slowSeedGrace more: a silent
	// seed (a host that is down drops the packets) costs a second, not the
	// whole --connect-timeout.
	pingCtx, cancelSlow := context.WithCancelCause(timeoutCtx)
	defer cancelSlow(nil)
	var firstAnswer sync.Once
	errs := make([]error, len(brokers))
	var wg sync.WaitGroup
	for i, seed := range brokers {
		wg.Go(func() {
			client, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...), kgo.SeedBrokers(seed))...)
			if err != nil {
				errs[i] = err
				return
			}
			defer client.Close()
			errs[i] = client.Ping(pingCtx)
			if errs[i] == nil {
				firstAnswer.Do(func() {
					time.AfterFunc(slowSeedGrace, func() {
						cancelSlow(fmt.Errorf("%w: no answer within %v after seed %s answered", errSlowSeed, slowSeedGrace, seed))
					})
				})
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && errors.Is(err, context.Canceled) && errors.Is(context.Cause(pingCtx), errSlowSeed) && ctx.Err() == nil {
			errs[i] = context.Cause(pingCtx)
		}
	}
	if interruptedBy(ctx) {
		return nil, interruptedError("while connecting to Kafka")
	}
	var answered []string
	var firstErr error
	for i, seed := range brokers {
		if errs[i] == nil {
			answered = append(answered, seed)
		} else if firstErr == nil {
			firstErr = errs[i]
		}
	}
	if len(answered) == 0 {
		return nil, c.unreachable(firstErr)
	}
	for i, seed := range brokers {
		if errs[i] != nil {
			fmt.Fprintf(g.stderr, "krabka-coord: warning: seed broker %s does not answer (%s); going on with %s\n",
				seed, oneLine(c.pingCause(errs[i])), strings.Join(answered, ","))
		}
	}
	c.brokers = answered
	return c, nil
}

// clientOpts are the options of a plain client of the cluster.
func (c *cluster) clientOpts() []kgo.Opt {
	return append(append([]kgo.Opt{}, c.opts...), kgo.SeedBrokers(c.brokers...))
}

// slowSeedGrace is how long the other seeds have to answer once one seed
// answered.
const slowSeedGrace = time.Second

// errSlowSeed marks a seed left out because it did not answer within
// slowSeedGrace of another seed.
var errSlowSeed = errors.New("slow seed")

// pingCause names why a ping failed.
func (c *cluster) pingCause(err error) string {
	if errors.Is(err, errSlowSeed) {
		return strings.TrimPrefix(err.Error(), errSlowSeed.Error()+": ")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within --connect-timeout %v", c.g.connectTimeout)
	}
	return err.Error()
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
		hint = "check --brokers (or $" + envBrokers + "), that the brokers run, and the TLS and SASL flags of the listener"
	default:
		hint = "check --brokers (or $" + envBrokers + ") and that the brokers run"
	}
	return clusterError("cannot reach Kafka at %s: %s; %s", where, c.pingCause(err), hint)
}

// transport opens a KafkaTransport over the cluster.
func (c *cluster) transport(lease coordination.LeaseConfig) (*coordination.KafkaTransport, error) {
	transport, err := coordination.NewKafkaTransportWithOptions(lease, c.opts, c.brokers...)
	if err != nil {
		return nil, usageError("%s", errText(err))
	}
	return transport, nil
}

// onRoles runs a one-shot command on the roles that args name: it parses
// them, checks the topic flags, opens a checked transport under the request
// timeout, and hands everything to do. A stop signal before do ends the
// command with exit code 0; do decides what a signal means once it runs.
func (g *globals) onRoles(cmd *cobra.Command, args []string, do func(context.Context, *session, []coordination.Role) error) error {
	roles := make([]coordination.Role, 0, len(args))
	for _, arg := range args {
		role, err := parseRole(arg)
		if err != nil {
			return err
		}
		roles = append(roles, role)
	}
	if err := g.checkTopicFlags(); err != nil {
		return err
	}
	signals := followSignals(cmd.Context())
	defer signals.stop()
	ctx, cancel := context.WithTimeout(signals.ctx, requestTimeout)
	defer cancel()
	s, err := g.openChecked(ctx, coordination.DefaultLeaseConfig())
	if err != nil {
		return err
	}
	defer s.close()
	return do(ctx, s, roles)
}

// session is a checked connection: the cluster and a KafkaTransport over
// it.
type session struct {
	*cluster
	transport *coordination.KafkaTransport
}

// closeBound bounds the close of a session: a broker that drops packets
// can hold a request of the transport's reader for its request timeout,
// and a command that is done has nothing left to wait for.
const closeBound = time.Second

// close closes the transport, and gives up waiting after closeBound; the
// goroutine that closes it then ends when the transport's requests time
// out, or with the process.
func (s *session) close() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.transport.Close()
	}()
	select {
	case <-done:
	case <-time.After(closeBound):
		if s.g.verbose {
			fmt.Fprintf(s.g.stderr, "krabka-coord: the connections to Kafka did not close within %v; leaving them\n", closeBound)
		}
	}
}

// openChecked connects to the cluster, opens a KafkaTransport with this
// lease policy, and checks the state topic, as every command that reads or
// writes a role does first. The caller closes the session.
func (g *globals) openChecked(ctx context.Context, lease coordination.LeaseConfig) (*session, error) {
	c, err := g.connect(ctx)
	if err != nil {
		return nil, err
	}
	transport, err := c.transport(lease)
	if err != nil {
		return nil, err
	}
	if err := c.checkTopic(ctx); err != nil {
		transport.Close()
		if interruptedBy(ctx) {
			return nil, interruptedError("while checking the state topic")
		}
		return nil, err
	}
	return &session{cluster: c, transport: transport}, nil
}

// checkTopic checks the state topic as a member does at start: it exists,
// its partition count is --partitions, and it is compacted. The metadata
// read needs DESCRIBE on the topic, which the READ that every caller needs
// next implies; the compaction check needs
// DESCRIBE_CONFIGS, which a member may lack without harm, so a refusal of
// it is a warning that names the ACL, and no error.
func (c *cluster) checkTopic(ctx context.Context) error {
	client, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return usageError("%v", err)
	}
	defer client.Close()
	topic := c.g.topic
	var partitions int
	err = retryTransient(ctx, func(ctx context.Context) (err error) {
		partitions, _, err = topicMetadata(ctx, client, topic)
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return permanent(err)
		}
		return err
	})
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return clusterError("the state topic %s does not exist: create it with 'krabka-coord create-topic --topic %s --partitions %d', or pass the --topic that the members use",
			topic, topic, c.g.partitions)
	case isDenied(err):
		// The command reads the topic next, and READ implies DESCRIBE:
		// naming DESCRIBE would only lead to the next refusal.
		return c.deniedError("describe the state topic "+topic, topicACL(opRead, topic), err)
	case err != nil:
		return clusterError("describe the state topic %s: %s", topic, oneLine(err.Error()))
	case partitions != c.g.partitions:
		return clusterError("the state topic %s has %s, but --partitions is %d: pass --partitions %d, the count the members use (a role lands on another partition under another count)",
			topic, fmtCount(partitions, "partition", "partitions"), c.g.partitions, partitions)
	}
	configs, err := topicConfigs(ctx, client, topic)
	switch {
	case isDenied(err):
		need := aclNeed{operation: opDescribeConfigs, resourceType: resTopic, resource: topic}
		fmt.Fprintf(c.g.stderr, "krabka-coord: warning: cannot check that the state topic %s is compacted: %s lacks %s; grant it with: %s\n",
			topic, c.g.principal(), need, need.grantCommand(c.g.principal(), c.brokers[0]))
		return nil
	case err != nil:
		return clusterError("describe the configs of the state topic %s: %s", topic, oneLine(err.Error()))
	}
	if policy := configs["cleanup.policy"]; !strings.Contains(policy, "compact") {
		return clusterError("the state topic %s has cleanup.policy=%s, but it must be compacted: "+
			"run 'kafka-configs.sh --bootstrap-server %s --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact', or use another --topic",
			topic, policy, c.brokers[0], topic)
	}
	return nil
}

// topicConfigs returns the configs of a topic, by key.
func topicConfigs(ctx context.Context, client *kgo.Client, topic string) (map[string]string, error) {
	var configs map[string]string
	err := retryTransient(ctx, func(ctx context.Context) error {
		described, err := kadm.NewClient(client).DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return err
		}
		config, err := described.On(topic, nil)
		if err != nil {
			return err
		}
		if config.Err != nil {
			return config.Err
		}
		configs = make(map[string]string, len(config.Configs))
		for _, entry := range config.Configs {
			if entry.Value != nil {
				configs[entry.Key] = *entry.Value
			}
		}
		return nil
	})
	return configs, err
}

// maxTransactionTimeout returns the brokers' transaction.max.timeout.ms,
// and false when the cluster does not tell (DESCRIBE_CONFIGS on the
// Cluster is missing).
func (c *cluster) maxTransactionTimeout(ctx context.Context) (time.Duration, bool) {
	ms, ok := c.brokerConfigInt(ctx, "transaction.max.timeout.ms")
	if !ok || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
