package coordination

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// This file holds the preflight check over KafkaTransport: what the
// cluster and the state topic must be for the members, observers and
// devices of some roles, checked before they start (the command
// krabka-coord doctor prints it). kafkawire's preflight.go sends the
// requests and the probes; docs/preflight.md says what each check reads,
// each probe sends, and how each check is graded.

// PreflightLevel grades a check of [KafkaTransport.Preflight]: PreflightOK,
// PreflightWarn (it works, but a fault costs more than it needs to, or
// the check could not be made), or PreflightFail (a blocker: the library
// refuses the cluster, or its guarantees do not hold there).
type PreflightLevel string

// The grades of a check, in rising order of gravity.
const (
	PreflightOK   PreflightLevel = "OK"
	PreflightWarn PreflightLevel = "WARN"
	PreflightFail PreflightLevel = "FAIL"
)

// PreflightCheck is one line of a [PreflightReport]: Check names what was
// checked, Detail what was found and why it matters, and Fix what to do
// (empty when Level is PreflightOK; a kafka-acls.sh or kafka-configs.sh
// line in it holds the placeholders <broker> and User:<principal>). Party is "member", "observer" or
// "device" for a check of an ACL that only that party needs, and empty for
// a check that concerns everyone.
type PreflightCheck struct {
	Level  PreflightLevel
	Party  string
	Check  string
	Detail string
	Fix    string
}

// PreflightReport is the answer of [KafkaTransport.Preflight]: its checks,
// in the order they ran.
type PreflightReport struct {
	Checks []PreflightCheck
}

// Level returns the gravest level of the checks that concern every party
// and of those of the parties named ("member", "observer", "device"); with
// no party named, of every check.
func (r PreflightReport) Level(parties ...string) PreflightLevel {
	level := PreflightOK
	for _, c := range r.Checks {
		if c.Party != "" && len(parties) > 0 && !slices.Contains(parties, c.Party) {
			continue
		}
		switch c.Level {
		case PreflightFail:
			return PreflightFail
		case PreflightWarn:
			level = PreflightWarn
		}
	}
	return level
}

// Preflight checks the cluster, the state topic and the ACLs of the
// connecting principal for the roles named, and commandTopics (the topics
// of guarded writes and of devices; none is fine), as the options of the
// members set them ([WithTopic], [WithPartitions], [WithLeaseConfig]):
// each broker's request versions against the library's, transaction.version,
// the lease against transaction.max.timeout.ms, broker.session.timeout.ms
// and transactional.id.expiration.ms, the topic's partition count,
// cleanup.policy, replication factor, min.insync.replicas and unclean
// leader election, and the ACLs, by trying them. No probe writes a record,
// mints or bumps an epoch, or begins a transaction, so it is safe on a live
// role; docs/preflight.md says what each request does.
//
// The error is for invalid options, a closed transport, and a cluster of
// which no broker answers; everything else is a check of the report.
func (t *KafkaTransport) Preflight(ctx context.Context, roles []Role, commandTopics []string, options ...Option) (PreflightReport, error) {
	s, err := newSettings(options)
	if err != nil {
		return PreflightReport{}, err
	}
	for i, role := range roles {
		if role == (Role{}) {
			return PreflightReport{}, fmt.Errorf("coordination: Preflight: role %d is the zero Role: build it with NewRole", i)
		}
	}
	for i, topic := range commandTopics {
		if topic == "" {
			return PreflightReport{}, fmt.Errorf("coordination: Preflight: command topic %d is empty", i)
		}
	}
	if t.isClosed() {
		return PreflightReport{}, errTransportClosed
	}
	p := &preflight{t: t, s: s, roles: roles, commandTopics: commandTopics}
	brokers, err := t.wire.BrokerVersionsAll(ctx)
	if err != nil {
		return PreflightReport{}, kafkaError(err)
	}
	p.brokers = len(brokers)
	p.versions = brokers
	p.checkVersions(brokers)
	p.checkTransactionVersion(brokers)
	p.checkLease(ctx, brokers)
	p.checkTopics(ctx)
	p.checkACLs(ctx, brokers)
	return PreflightReport{Checks: p.checks}, nil
}

// preflight is one run of Preflight.
type preflight struct {
	t             *KafkaTransport
	s             *settings
	roles         []Role
	commandTopics []string
	checks        []PreflightCheck
	brokers       int                        // the brokers of the cluster's Metadata answer
	versions      []kafkawire.BrokerVersions // their ApiVersions answers

	state       *kafkawire.TopicFacts            // the state topic, nil when it could not be described
	stateDenied bool                             // DESCRIBE on the state topic was refused
	commands    map[string]*kafkawire.TopicFacts // the command topics described; nil for one that DESCRIBE was refused
}

func (p *preflight) add(level PreflightLevel, party, check, detail, fix string) {
	if level == PreflightOK {
		fix = ""
	}
	p.checks = append(p.checks, PreflightCheck{Level: level, Party: party, Check: check, Detail: detail, Fix: fix})
}

// checkVersions compares each broker's ApiVersions with the versions the
// library sends: a request is served when the newest version both sides
// have is at least the oldest version both need.
func (p *preflight) checkVersions(brokers []kafkawire.BrokerVersions) {
	needs := p.t.wire.Requests()
	for _, b := range brokers {
		check := fmt.Sprintf("broker %d (%s:%d) serves the library's requests", b.ID, b.Host, b.Port)
		if b.Err != nil {
			p.add(PreflightWarn, "", check, "no ApiVersions answer: "+kafkawire.Brief(b.Err),
				"check that the broker runs and that this host reaches its advertised listener")
			continue
		}
		var missing, optional, negotiated []string
		for _, n := range needs {
			r, ok := b.Ranges[n.Key]
			lib := fmt.Sprintf("%d-%d", n.Min, n.Max)
			var problem string
			switch {
			case !ok:
				problem = fmt.Sprintf("%s (key %d): the broker does not serve it; the library sends versions %s (%s)", n.Name(), n.Key, lib, n.Why)
			case min(n.Max, r[1]) < max(n.Min, r[0]):
				problem = fmt.Sprintf("%s (key %d): the broker serves versions %d-%d, the library sends %s (%s)", n.Name(), n.Key, r[0], r[1], lib, n.Why)
			default:
				negotiated = append(negotiated, fmt.Sprintf("%s v%d", n.Name(), min(n.Max, r[1])))
				continue
			}
			if n.Optional {
				optional = append(optional, problem)
			} else {
				missing = append(missing, problem)
			}
		}
		release := "Kafka " + strings.TrimPrefix(b.Guess, "v") + " (guessed from its ApiVersions; Kafka sends no version of its own)"
		switch {
		case len(missing) > 0:
			p.add(PreflightFail, "", check, release+": "+strings.Join(append(missing, optional...), "; "),
				"upgrade the broker to Kafka 3.0 or later (the library is tested on 3.9 and 4.x), or pin this library to a release that the broker serves")
		case len(optional) > 0:
			p.add(PreflightWarn, "", check, release+": "+strings.Join(optional, "; "),
				"create the state topic with the broker's own tools (kafka-topics.sh)")
		default:
			p.add(PreflightOK, "", check, release+": every request at a version both sides serve: "+strings.Join(negotiated, ", "), "")
		}
	}
}

// checkTransactionVersion reports the finalized transaction.version.
func (p *preflight) checkTransactionVersion(brokers []kafkawire.BrokerVersions) {
	levels := map[int16][]string{}
	for _, b := range brokers {
		if b.Err != nil {
			continue
		}
		levels[b.Finalized["transaction.version"]] = append(levels[b.Finalized["transaction.version"]], strconv.Itoa(int(b.ID)))
	}
	const check = "transaction.version (the finalized feature level)"
	switch len(levels) {
	case 0:
		return
	case 1:
		for level := range levels {
			var detail string
			switch {
			case level >= 2:
				detail = fmt.Sprintf("transaction.version=%d: the coordinator bumps the epoch at an EndTxn of version 5 or later (KIP-890 part 2); the library caps EndTxn at 4, so a token stays the minted pair", level)
			default:
				detail = fmt.Sprintf("transaction.version=%d (not finalized to 2): the transaction protocol of Kafka 3, which keeps the epoch at every commit", level)
			}
			p.add(PreflightOK, "", check, detail, "")
		}
	default:
		var parts []string
		for level, ids := range levels {
			parts = append(parts, fmt.Sprintf("%d on broker(s) %s", level, strings.Join(ids, ",")))
		}
		slices.Sort(parts)
		p.add(PreflightWarn, "", check, "the brokers report different finalized levels: "+strings.Join(parts, "; ")+" (an upgrade in progress?)",
			"finish the upgrade ('kafka-features.sh upgrade --feature transaction.version=2'), then run doctor again")
	}
}

// The broker configs the lease is checked against, and Kafka's defaults.
const (
	configTxnMaxTimeout = "transaction.max.timeout.ms"
	configSession       = "broker.session.timeout.ms"
	configTxnIDExpiry   = "transactional.id.expiration.ms"

	defaultTxnMaxTimeout = 15 * time.Minute
	defaultTxnIDExpiry   = 7 * 24 * time.Hour
)

// checkLease checks the lease against the brokers' configs: the
// strictest broker's value of each.
func (p *preflight) checkLease(ctx context.Context, brokers []kafkawire.BrokerVersions) {
	var ids []int32
	for _, b := range brokers {
		if b.Err == nil {
			ids = append(ids, b.ID)
		}
	}
	lease, renew := p.s.lease.duration, p.s.lease.renewInterval
	txnTimeout := max(lease, p.t.lease.Duration()) // the transport's lease is the transaction timeout of its mints
	configs, err := p.t.wire.BrokerConfigs(ctx, ids, configTxnMaxTimeout, configSession, configTxnIDExpiry)
	if err != nil || len(ids) == 0 {
		cause := "no broker answered"
		if err != nil {
			cause = kafkawire.Brief(err)
		}
		for _, key := range []string{configTxnMaxTimeout, configSession, configTxnIDExpiry} {
			p.add(PreflightWarn, "", "the lease against "+key,
				"cannot read the brokers' "+key+": "+cause,
				"kafka-acls.sh --bootstrap-server <broker> --add --allow-principal User:<principal> --operation DescribeConfigs --cluster (or compare the lease with the brokers' config by hand)")
		}
		return
	}
	// strictest returns the smallest value of key over the brokers, the
	// broker that has it, and where it comes from.
	strictest := func(key string, fallback time.Duration) (time.Duration, int32, string) {
		least, at, source := time.Duration(-1), ids[0], "default"
		for _, id := range ids {
			value, source1 := fallback, "default"
			if c, ok := configs[id][key]; ok {
				if ms, ok := kafkawire.ConfigMillis(c.Value); ok {
					value, source1 = time.Duration(ms)*time.Millisecond, c.Source
				}
			}
			if least < 0 || value < least {
				least, at, source = value, id, source1
			}
		}
		return least, at, source
	}

	maxTimeout, at, source := strictest(configTxnMaxTimeout, defaultTxnMaxTimeout)
	check := "the lease against " + configTxnMaxTimeout
	if txnTimeout > maxTimeout {
		p.add(PreflightFail, "", check,
			fmt.Sprintf("the lease %v is the transaction timeout of every role, above broker %d's %s=%v (%s): the coordinator refuses every mint with INVALID_TRANSACTION_TIMEOUT, so no member is ever elected", txnTimeout, at, configTxnMaxTimeout, maxTimeout, source),
			fmt.Sprintf("pick a lease of at most %v, or raise %s on every broker", maxTimeout, configTxnMaxTimeout))
	} else {
		p.add(PreflightOK, "", check, fmt.Sprintf("the lease %v is within %s=%v (broker %d, %s)", txnTimeout, configTxnMaxTimeout, maxTimeout, at, source), "")
	}

	session, at, source := strictest(configSession, kafkawire.DefaultSessionTimeout)
	least := MinLeaseForFailureDetection(session, renew)
	check = "the lease against " + configSession
	if lease < least {
		p.add(PreflightWarn, "", check,
			fmt.Sprintf("the lease %v is shorter than %s=%v (broker %d, %s) + the renew interval %v + %v = %v: the cluster needs that long to notice a dead broker and move its partitions, so every broker fault costs a leadership change (a shorter lease stays safe)",
				lease, configSession, session, at, source, renew, kafkawire.BrokerRecoveryAllowance, least),
			fmt.Sprintf("pick a lease of at least %v, or lower %s on the controllers", least, configSession))
	} else {
		p.add(PreflightOK, "", check, fmt.Sprintf("the lease %v rides out a broker's loss: %s=%v + renew interval %v + %v = %v", lease, configSession, session, renew, kafkawire.BrokerRecoveryAllowance, least), "")
	}

	expiry, at, source := strictest(configTxnIDExpiry, defaultTxnIDExpiry)
	check = "the lease against " + configTxnIDExpiry
	if lease >= expiry {
		p.add(PreflightFail, "", check,
			fmt.Sprintf("the lease %v is not shorter than broker %d's %s=%v (%s): the coordinator forgets a transactional id that wrote nothing for that long, so a holder whose renewals lapse within its lease finds its producer id gone (INVALID_PRODUCER_ID_MAPPING, a fence), and DescribeLeadership and the Gate see no holder while its lease runs",
				lease, at, configTxnIDExpiry, expiry, source),
			fmt.Sprintf("pick a lease (and a renew interval) well below %v, or raise %s on every broker", expiry, configTxnIDExpiry))
	} else {
		p.add(PreflightOK, "", check, fmt.Sprintf("the lease %v and the renew interval %v are below %s=%v: a holder's renewals keep its transactional id alive", lease, renew, configTxnIDExpiry, expiry), "")
	}
}

// checkTopics describes the state topic and the command topics, and
// checks the state topic's layout and durability.
func (p *preflight) checkTopics(ctx context.Context) {
	p.commands = map[string]*kafkawire.TopicFacts{}
	p.checkStateTopic(ctx)
	for _, topic := range p.commandTopics {
		facts, err := p.t.wire.DescribeTopic(ctx, topic)
		check := "the command topic " + topic + " exists"
		switch {
		case kafkawire.ClassOf(err) == kafkawire.Missing:
			p.add(PreflightFail, "", check, "the topic does not exist: guarded writes fail, and a device reads nothing",
				fmt.Sprintf("create it: 'krabka-coord create-topic --topic %s --partitions 1 --cleanup-policy delete%s' (or kadm's CreateTopic)", topic, p.replicationFlags()))
		case kafkawire.ClassOf(err) == kafkawire.NotAuthorized:
			p.commands[topic] = nil // the ACL checks say what is missing
		case err != nil:
			p.add(PreflightFail, "", check, "cannot describe it: "+kafkawire.Brief(err), "check that the cluster is healthy, then run doctor again")
		default:
			p.commands[topic] = &facts
			p.add(PreflightOK, "", check, plural(facts.Partitions, "partition"), "")
		}
	}
}

// checkStateTopic describes the state topic and checks its layout and
// durability.
func (p *preflight) checkStateTopic(ctx context.Context) {
	topic := p.s.topic
	facts, err := p.t.wire.DescribeTopic(ctx, topic)
	check := "the state topic " + topic + " exists"
	switch {
	case kafkawire.ClassOf(err) == kafkawire.Missing:
		p.add(PreflightFail, "", check, "the topic does not exist: no member can register",
			fmt.Sprintf("create it: 'krabka-coord create-topic --topic %s --partitions %d%s' (or CreateStateTopic)", topic, p.s.partitions, p.replicationFlags()))
		return
	case kafkawire.ClassOf(err) == kafkawire.NotAuthorized:
		p.stateDenied = true // the ACL checks say which
		p.add(PreflightFail, "", check, "this principal may not describe the topic ("+kafkawire.Brief(err)+"), so its layout is unknown",
			"grant DESCRIBE (READ implies it) on the topic, or run doctor as an operator's principal")
		return
	case err != nil:
		p.add(PreflightFail, "", check, "cannot describe it: "+kafkawire.Brief(err), "check that the cluster is healthy, then run doctor again")
		return
	}
	p.state = &facts
	p.add(PreflightOK, "", check, fmt.Sprintf("%s on a cluster of %s", plural(facts.Partitions, "partition"), brokerCount(facts.Brokers)), "")

	check = "the state topic's partition count"
	if facts.Partitions != p.s.partitions {
		p.add(PreflightFail, "", check,
			fmt.Sprintf("the topic has %s, but the members are configured for %d: members with different counts put a role on different partitions and never see each other's leases; CheckStateTopic refuses the topic", plural(facts.Partitions, "partition"), p.s.partitions),
			fmt.Sprintf("pass WithPartitions(%d) (--partitions %d) to every member, the topic's count", facts.Partitions, facts.Partitions))
	} else {
		p.add(PreflightOK, "", check, fmt.Sprintf("%d, as the members expect", facts.Partitions), "")
	}

	multi := facts.Brokers > 1
	check = "the state topic's replication factor"
	switch rf := facts.ReplicationFactor; {
	case !multi:
		p.add(PreflightOK, "", check, fmt.Sprintf("%d on a single broker: a test setup, where the broker's loss stops everything anyway", rf), "")
	case rf == 1:
		p.add(PreflightFail, "", check,
			fmt.Sprintf("1 on a cluster of %d brokers: the loss of one broker makes its partitions of the roster unavailable (no renewal, no failover) or loses them", facts.Brokers),
			"recreate the topic with 3 replicas (kafka-reassign-partitions.sh can add replicas in place)")
	case rf < 3:
		p.add(PreflightWarn, "", check,
			fmt.Sprintf("%d: with min.insync.replicas 2 the loss of one broker stops the writes, with 1 a write lives on one disk until it is copied", rf),
			"add a third replica (kafka-reassign-partitions.sh)")
	default:
		p.add(PreflightOK, "", check, strconv.Itoa(rf), "")
	}

	if facts.ConfigsErr != nil {
		p.add(PreflightWarn, "", "the state topic's configs", "cannot read them: "+kafkawire.Brief(facts.ConfigsErr),
			"grant DESCRIBE_CONFIGS on the topic (a member needs it: CheckStateTopic reads cleanup.policy), or run doctor as an operator")
	} else {
		p.checkTopicConfigs(facts, multi)
	}
}

// checkTopicConfigs checks cleanup.policy, min.insync.replicas and unclean
// leader election of the state topic.
func (p *preflight) checkTopicConfigs(facts kafkawire.TopicFacts, multi bool) {
	policy := facts.Configs["cleanup.policy"]
	check := "the state topic's cleanup.policy"
	compact := false
	for _, part := range strings.Split(policy, ",") {
		compact = compact || strings.TrimSpace(part) == "compact"
	}
	if !compact {
		p.add(PreflightFail, "", check,
			fmt.Sprintf("cleanup.policy=%s: retention deletes the registrations and leases that rank the members; CheckStateTopic refuses the topic", policy),
			fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact", p.s.topic))
	} else {
		p.add(PreflightOK, "", check, "cleanup.policy="+policy, "")
	}

	check = "the state topic's min.insync.replicas"
	isr, ok := kafkawire.ConfigMillis(facts.Configs["min.insync.replicas"])
	rf := int64(facts.ReplicationFactor)
	switch {
	case !ok:
		p.add(PreflightWarn, "", check, fmt.Sprintf("min.insync.replicas=%q is not a count", facts.Configs["min.insync.replicas"]), "set min.insync.replicas=2 on the topic")
	case isr > rf && !p.minISRCapped():
		p.add(PreflightFail, "", check, fmt.Sprintf("min.insync.replicas=%d is above the replication factor %d, on a broker older than Kafka 3.7 by its ApiVersions (or of unknown release): such a broker refuses every write (NOT_ENOUGH_REPLICAS)", isr, rf),
			fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=%d", p.s.topic, max(1, min(2, rf))))
	case isr > rf && multi:
		p.add(PreflightWarn, "", check, fmt.Sprintf("min.insync.replicas=%d is above the replication factor %d: Kafka 3.7 and later take the replication factor instead (KAFKA-15583), so the writes pass, but the loss of any replica stops every write of its partitions", isr, rf),
			fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=%d", p.s.topic, max(1, min(2, rf-1))))
	case isr > rf:
		p.add(PreflightOK, "", check, fmt.Sprintf("min.insync.replicas=%d above the replication factor %d on a single broker: Kafka 3.7 and later take %d (KAFKA-15583)", isr, rf, rf), "")
	case multi && isr < 2:
		p.add(PreflightWarn, "", check,
			fmt.Sprintf("min.insync.replicas=%d on a cluster of %d brokers: a lease or a command acknowledged by one replica is lost with that broker, so the promise \"durable in a quorum before the dispatch\" does not hold", isr, facts.Brokers),
			fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name %s --add-config min.insync.replicas=2", p.s.topic))
	case multi && isr == rf:
		p.add(PreflightWarn, "", check, fmt.Sprintf("min.insync.replicas=%d equals the replication factor: the loss of any broker stops every write of its partitions", isr),
			"add a replica, or lower min.insync.replicas to one below the replication factor")
	default:
		p.add(PreflightOK, "", check, fmt.Sprintf("min.insync.replicas=%d with replication factor %d", isr, rf), "")
	}

	check = "the state topic's unclean.leader.election.enable"
	unclean := facts.Configs["unclean.leader.election.enable"]
	switch {
	case unclean == "true" && multi:
		p.add(PreflightFail, "", check,
			"unclean.leader.election.enable=true: a replica that missed acknowledged writes can become leader and truncate them, losing registrations, leases and guarded commands that the members saw committed",
			fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --alter --entity-type topics --entity-name %s --add-config unclean.leader.election.enable=false", p.s.topic))
	case unclean == "true":
		p.add(PreflightOK, "", check, "true, but moot on a single broker", "")
	default:
		p.add(PreflightOK, "", check, "unclean.leader.election.enable="+cmpOr(unclean, "false"), "")
	}
}

// minISRCapped reports whether every broker that answered ApiVersions
// runs Kafka 3.7 or later by franz-go's guess from its ranges: since 3.7
// (KAFKA-15583) a broker takes min(min.insync.replicas, the partition's
// replicas) as the minimum ISR of an acks=all write, where an older one
// refuses every write of a topic whose min.insync.replicas is above its
// replication factor. An unknown release counts as older.
func (p *preflight) minISRCapped() bool {
	answered := 0
	for _, b := range p.versions {
		if b.Err != nil {
			continue
		}
		answered++
		m := releaseGuess.FindStringSubmatch(b.Guess)
		if m == nil || strings.HasPrefix(b.Guess, "not even") {
			return false
		}
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		if major < 3 || major == 3 && minor < 7 {
			return false
		}
	}
	return answered > 0
}

// releaseGuess finds the first release of a kversion guess ("v3.9",
// "at least v4.4", "between v3.7 and v3.8").
var releaseGuess = regexp.MustCompile(`v(\d+)\.(\d+)`)

// brokerCount is "1 broker" or "n brokers".
func brokerCount(n int) string {
	return plural(n, "broker")
}

// plural is "1 noun" or "n nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// replicationFlags are the flags of create-topic that a fix names for a
// new topic: 3 replicas and min.insync.replicas 2 on a cluster of 3 or
// more brokers, as many replicas as brokers on a smaller one (create-topic
// refuses a replication factor above the live brokers), and none on a
// single broker, whose defaults are the only values it takes.
func (p *preflight) replicationFlags() string {
	switch {
	case p.brokers >= 3:
		return " --replication-factor 3 --min-insync-replicas 2"
	case p.brokers == 2:
		return " --replication-factor 2 --min-insync-replicas 1"
	default:
		return ""
	}
}

func cmpOr(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}

// checkACLs probes the ACLs of the connecting principal, and reports them
// for each party that needs them.
func (p *preflight) checkACLs(ctx context.Context, brokers []kafkawire.BrokerVersions) {
	anyBroker := int32(-1)
	for _, b := range brokers {
		if b.Err == nil {
			anyBroker = b.ID
			break
		}
	}
	if anyBroker < 0 {
		return
	}
	// probeBroker is the leader of partition 0, or any broker.
	probeBroker := func(facts *kafkawire.TopicFacts) int32 {
		if facts != nil && len(facts.Leaders) > 0 && facts.Leaders[0] >= 0 {
			return facts.Leaders[0]
		}
		return anyBroker
	}
	type acl struct {
		parties []string
		check   string
		probe   kafkawire.Probe
		how     string
		grant   string // the kafka-acls.sh arguments that grant it
	}
	var acls []acl
	topicACL := func(topic string, op string) string {
		return fmt.Sprintf("--add --allow-principal User:<principal> --operation %s --topic %s", op, topic)
	}
	txnACL := func(role Role, op string) string {
		return fmt.Sprintf("--add --allow-principal User:<principal> --operation %s --transactional-id %s", op, role)
	}

	if p.stateDenied {
		topic := p.s.topic
		denied := kafkawire.Probe{Denied: true, Err: errors.New("TOPIC_AUTHORIZATION_FAILED on Metadata")}
		acls = append(acls,
			acl{[]string{"member", "observer"}, "READ on the state topic " + topic, denied, "a Metadata request of the topic (READ implies DESCRIBE)", topicACL(topic, "Read")},
			acl{[]string{"member"}, "WRITE on the state topic " + topic, denied, "a Metadata request of the topic (WRITE implies DESCRIBE)", topicACL(topic, "Write")})
	}
	if p.state != nil {
		topic, facts := p.s.topic, p.state
		acls = append(acls,
			acl{[]string{"member", "observer"}, "READ on the state topic " + topic, p.t.wire.ProbeRead(ctx, probeBroker(facts), topic, facts.ID),
				"a Fetch of partition 0 at offset 0, 1 byte, no wait", topicACL(topic, "Read")},
			acl{[]string{"member"}, "WRITE on the state topic " + topic, p.t.wire.ProbeWrite(ctx, probeBroker(facts), topic, facts.ID),
				"a Produce of partition 0 without a record batch, which the broker refuses as INVALID_RECORD after the ACL", topicACL(topic, "Write")},
		)
		configsProbe := kafkawire.Probe{}
		if facts.ConfigsErr != nil {
			configsProbe = kafkawire.Probe{Denied: kafkawire.ClassOf(facts.ConfigsErr) == kafkawire.NotAuthorized, Err: facts.ConfigsErr}
		}
		acls = append(acls, acl{[]string{"member"}, "DESCRIBE_CONFIGS on the state topic " + topic, configsProbe,
			"the DescribeConfigs of the topic check", topicACL(topic, "DescribeConfigs")})
	}
	for _, topic := range p.commandTopics {
		facts, ok := p.commands[topic]
		if !ok {
			continue
		}
		if facts == nil { // DESCRIBE refused
			denied := kafkawire.Probe{Denied: true, Err: errors.New("TOPIC_AUTHORIZATION_FAILED on Metadata")}
			acls = append(acls,
				acl{[]string{"device"}, "READ on the command topic " + topic, denied, "a Metadata request of the topic", topicACL(topic, "Read")},
				acl{[]string{"member"}, "WRITE on the command topic " + topic, denied, "a Metadata request of the topic", topicACL(topic, "Write")})
			continue
		}
		acls = append(acls,
			acl{[]string{"device"}, "READ on the command topic " + topic, p.t.wire.ProbeRead(ctx, probeBroker(facts), topic, facts.ID),
				"a Fetch of partition 0 at offset 0, 1 byte, no wait", topicACL(topic, "Read")},
			acl{[]string{"member"}, "WRITE on the command topic " + topic, p.t.wire.ProbeWrite(ctx, probeBroker(facts), topic, facts.ID),
				"a Produce of partition 0 without a record batch, refused as INVALID_RECORD after the ACL", topicACL(topic, "Write")})
	}
	for _, role := range p.roles {
		describe, state := p.t.wire.ProbeTxnDescribe(ctx, role.String())
		how := "FindCoordinator and DescribeTransactions of the transactional id"
		if describe.Err == nil {
			how += ": " + cmpOr(state, "never minted")
		}
		acls = append(acls, acl{[]string{"member", "observer", "device"}, "DESCRIBE on the TransactionalId " + role.String(), describe, how, txnACL(role, "Describe")})
		partition := kafkawire.Partition{Topic: p.s.topic}
		if n, err := rolePartition32(role, p.s.partitions); err == nil {
			partition.Partition = n
		}
		write, _ := p.t.wire.ProbeTxnWrite(ctx, anyBroker, role.String(), partition)
		acls = append(acls, acl{[]string{"member"}, "WRITE on the TransactionalId " + role.String(), write,
			"an AddPartitionsToTxn under producer id -1, which the coordinator refuses (INVALID_PRODUCER_ID_MAPPING) after the ACL: nothing is minted, no transaction begins",
			txnACL(role, "Write")})
	}
	if len(p.roles) == 0 {
		p.add(PreflightWarn, "", "the ACLs on the roles' transactional ids", "no role named, so WRITE and DESCRIBE on a TransactionalId were not tried",
			"name the roles the members take (krabka-coord doctor ROLE...)")
	}
	if len(p.commandTopics) == 0 {
		// A device reads nothing but its command topics: without one, none
		// of its ACLs on them was tried. A member's guarded writes are
		// optional, and its state topic's ACLs are tried above.
		p.add(PreflightWarn, "device", "the ACLs on the command topics", "no command topic named, so READ on the topic that devices read was not tried",
			"name the command topics (krabka-coord doctor --command-topic TOPIC, or the commandTopics of Preflight)")
	}
	for _, a := range acls {
		for _, party := range a.parties {
			switch {
			case a.probe.Denied:
				p.add(PreflightFail, party, a.check, fmt.Sprintf("refused (%s), tried with %s", kafkawire.Brief(a.probe.Err), a.how),
					"kafka-acls.sh --bootstrap-server <broker> "+a.grant)
			case a.probe.Err != nil:
				p.add(PreflightWarn, party, a.check, fmt.Sprintf("not decided (%s), tried with %s", kafkawire.Brief(a.probe.Err), a.how),
					"run doctor again once the cluster is healthy")
			default:
				p.add(PreflightOK, party, a.check, "allowed, tried with "+a.how, "")
			}
		}
	}
}
