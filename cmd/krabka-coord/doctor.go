package main

// The command doctor: the preflight check of a cluster and a state topic
// (coordination's KafkaTransport.Preflight), one line per check, and an
// exit code by the gravest.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// The exit codes of doctor: all is well, warnings, a blocker. A cluster
// that does not answer exits 4 (exitCluster), as every command does.
const (
	doctorOK      = 0
	doctorWarn    = 1
	doctorBlocker = 2
)

// doctorParties are the parties whose ACLs doctor can check.
var doctorParties = []string{"member", "observer", "device"}

func newDoctorCommand(g *globals) *cobra.Command {
	flags := &leaseFlags{}
	var commandTopics []string
	var parties []string
	cmd := &cobra.Command{
		Use:   "doctor [ROLE...]",
		Short: "Check a cluster and its state topic before the members start",
		Long: `doctor checks what the members of the ROLEs need of the cluster, as the
principal of the connection flags, and prints one line per check: OK, WARN
or FAIL, what it found, and what to do.

  - each broker's request versions against those the library sends (a
    request it does not serve is named with both ranges), and
    transaction.version;
  - the lease (--lease-duration, --renew-interval) against the brokers'
    transaction.max.timeout.ms, broker.session.timeout.ms and
    transactional.id.expiration.ms;
  - the state topic (--topic): it exists with --partitions partitions,
    cleanup.policy=compact, its replication factor, min.insync.replicas
    (2 or more on a cluster of several brokers) and unclean leader
    election off;
  - the ACLs of the parties that --as names, by trying them: READ, WRITE
    and DESCRIBE_CONFIGS on the state topic, WRITE and DESCRIBE on each
    ROLE's transactional id, and READ or WRITE on each --command-topic.

No probe writes a record, mints or bumps an epoch, or begins a
transaction, so doctor is safe against a live role: WRITE on a
transactional id is tried with an AddPartitionsToTxn under producer id -1,
which the coordinator refuses after the ACL; WRITE on a topic with a
Produce without a record batch, which the broker refuses after the ACL;
READ with a Fetch of one byte. docs/preflight.md says more.

Exit codes: 0 all is well; 1 warnings; 2 a blocker (or bad usage, or a
stop signal before the checks ended: nothing is known); 4 no broker
answers.`,
		Example: `  krabka-coord doctor controller
  krabka-coord doctor controller scheduler --command-topic commands --as member,device
  krabka-coord doctor controller --lease-duration 10s --renew-interval 3s --output json`,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
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
			for _, party := range parties {
				if !slices.Contains(doctorParties, party) {
					return usageError("--as %q: want member, observer or device, or a list of them", party)
				}
			}
			for _, topic := range commandTopics {
				if topic == "" {
					return usageError("--command-topic \"\": empty; pass the name of a topic of guarded writes, such as commands")
				}
				if problem := topicNameProblem(topic); problem != "" {
					return usageError("--command-topic %q: %s", topic, problem)
				}
			}
			lease, err := flags.config()
			if err != nil {
				return err
			}
			signals := followSignals(cmd.Context())
			defer signals.stop()
			ctx, cancel := context.WithTimeout(signals.ctx, requestTimeout)
			defer cancel()
			c, err := g.connect(ctx)
			if err != nil {
				if interruptedBy(ctx) {
					return doctorInterrupted("while connecting to Kafka")
				}
				return err
			}
			transport, err := c.transport(lease)
			if err != nil {
				return err
			}
			s := &session{cluster: c, transport: transport}
			defer s.close()
			options := append(g.coordOptions(), flags.options(lease)...)
			report, err := transport.Preflight(ctx, roles, commandTopics, options...)
			if interruptedBy(ctx) {
				return doctorInterrupted("before doctor finished")
			}
			if err != nil {
				return clusterError("doctor: %s", errText(err))
			}
			return c.printDoctor(report, parties, roles, commandTopics, lease)
		}),
	}
	flags.add(cmd.Flags(), coordination.DefaultLeaseDuration, coordination.DefaultRenewInterval, coordination.DefaultChallengeStagger, coordination.DefaultPollInterval)
	cmd.Flags().StringSliceVar(&commandTopics, "command-topic", nil, "a topic of guarded writes that devices read (repeat, or a comma-separated list); its ACLs are checked")
	cmd.Flags().StringSliceVar(&parties, "as", []string{"member"}, "the parties this principal acts as, whose ACLs are checked: member, observer, device (a comma-separated list)")
	return cmd
}

// doctorInterrupted is the end of a doctor that a stop signal
// interrupted: exit code 2, as a blocker, not the 0 that other commands
// give an interruption that changed nothing, because doctor's 0 says the
// cluster passed every check, and a script that gates a deployment on it
// must not go on with a cluster that was not checked.
func doctorInterrupted(what string) error {
	return &exitError{code: doctorBlocker, err: fmt.Errorf("interrupted %s: the cluster was not checked (exit %d, as a blocker); run doctor again", what, doctorBlocker)}
}

// doctorJSON is the result of doctor.
type doctorJSON struct {
	Level         string            `json:"level"`
	ExitCode      int               `json:"exit_code"`
	Topic         string            `json:"topic"`
	Partitions    int               `json:"partitions"`
	Roles         []string          `json:"roles"`
	CommandTopics []string          `json:"command_topics"`
	Parties       []string          `json:"parties"`
	Principal     string            `json:"principal"`
	LeaseMillis   int64             `json:"lease_ms"`
	RenewMillis   int64             `json:"renew_ms"`
	Checks        []doctorCheckJSON `json:"checks"`
}

// doctorCheckJSON is one check of doctor.
type doctorCheckJSON struct {
	Level  string `json:"level"`
	Party  string `json:"party"`
	Check  string `json:"check"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// printDoctor prints the checks of the parties, and returns the exit code
// of the gravest.
func (c *cluster) printDoctor(report coordination.PreflightReport, parties []string, roles []coordination.Role, commandTopics []string, lease coordination.LeaseConfig) error {
	principal := c.g.principal()
	out := doctorJSON{Topic: c.g.topic, Partitions: c.g.partitions, Roles: []string{}, CommandTopics: append([]string{}, commandTopics...),
		Parties: parties, Principal: principal, LeaseMillis: lease.Duration().Milliseconds(), RenewMillis: lease.RenewInterval().Milliseconds(),
		Checks: []doctorCheckJSON{}}
	for _, role := range roles {
		out.Roles = append(out.Roles, role.String())
	}
	counts := map[coordination.PreflightLevel]int{}
	for _, check := range report.Checks {
		if check.Party != "" && !slices.Contains(parties, check.Party) {
			continue
		}
		// The kafka-acls.sh and kafka-configs.sh lines of the fixes, as
		// the other commands write them: this connection's broker, and
		// for an ACL the admin's client config (grantCommand).
		fix := strings.ReplaceAll(check.Fix, "User:<principal>", principal)
		fix = strings.ReplaceAll(fix, "kafka-acls.sh --bootstrap-server <broker>", "kafka-acls.sh --bootstrap-server "+shellQuote(c.brokers[0])+" --command-config admin.properties")
		fix = strings.ReplaceAll(fix, "--bootstrap-server <broker>", "--bootstrap-server "+shellQuote(c.brokers[0]))
		counts[check.Level]++
		out.Checks = append(out.Checks, doctorCheckJSON{Level: string(check.Level), Party: check.Party, Check: check.Check, Detail: check.Detail, Fix: fix})
	}
	level := report.Level(parties...)
	code := doctorOK
	switch level {
	case coordination.PreflightWarn:
		code = doctorWarn
	case coordination.PreflightFail:
		code = doctorBlocker
	}
	out.Level, out.ExitCode = string(level), code
	if c.g.json() {
		if err := writeJSON(c.g.stdout, out); err != nil {
			return err
		}
		return exitCode(code)
	}
	for _, check := range out.Checks {
		what := check.Check
		if check.Party != "" {
			what = check.Party + ": " + what
		}
		line := fmt.Sprintf("%-4s  %s: %s", check.Level, what, check.Detail)
		if check.Fix != "" {
			line += "; fix: " + check.Fix
		}
		fmt.Fprintln(c.g.stdout, oneLine(line))
	}
	who := principal
	if principal == unknownPrincipal {
		// Kafka has no request that names the principal of a connection:
		// without SASL it is the listener's (User:ANONYMOUS on plaintext,
		// the certificate's name on mutual TLS).
		who = "the connection's principal (no --sasl-user; User:ANONYMOUS on a plaintext listener)"
	}
	verdict := map[int]string{doctorOK: "all is well", doctorWarn: "warnings: the members work, but read the WARN lines", doctorBlocker: "a blocker: fix the FAIL lines before the members start"}[code]
	fmt.Fprintf(c.g.stdout, "doctor: %d FAIL, %d WARN, %d OK as %s (%s): %s\n",
		counts[coordination.PreflightFail], counts[coordination.PreflightWarn], counts[coordination.PreflightOK],
		who, strings.Join(parties, ", "), verdict)
	return exitCode(code)
}
