package coordination_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The tests of KafkaTransport.Preflight (issue 29, item 4): a cluster set
// up with one misconfiguration per test, on kfake where it can express it,
// on the real broker, on the 3-node cluster (replication, min.insync.replicas,
// unclean leader election) and on the SASL listener (ACLs). The helpers
// carry the pf prefix.

func TestPreflightFake(t *testing.T) {
	runPreflightSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Fake(t) })
}

func TestPreflightKafka(t *testing.T) {
	kafkatest.Kafka(t) // skip (or fail under CI) before any subtest
	runPreflightSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Kafka(t) })
}

func runPreflightSuite(t *testing.T, cluster func(*testing.T) *kafkatest.Cluster) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, *kafkatest.Cluster)
	}{
		{"HealthyTopic", pfHealthyTopic},
		{"MissingTopic", pfMissingTopic},
		{"DeletePolicy", pfDeletePolicy},
		{"WrongPartitionCount", pfWrongPartitionCount},
		{"LeaseAboveTransactionMaxTimeout", pfLeaseAboveTxnMaxTimeout},
		{"LeaseAboveTransactionalIDExpiration", pfLeaseAboveTxnIDExpiration},
		{"ShortLeaseAgainstSessionTimeout", pfShortLease},
		{"ProbesLeaveALiveRoleAlone", pfProbesLeaveALiveRoleAlone},
		{"MinInsyncReplicasAboveReplication", pfMinISRAboveReplication},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, cluster(t)) })
	}
}

// pfRun runs Preflight and logs its report.
func pfRun(t *testing.T, transport *coordination.KafkaTransport, roles []coordination.Role, commands []string, options ...coordination.Option) coordination.PreflightReport {
	t.Helper()
	report, err := transport.Preflight(ktContext(t), roles, commands, options...)
	if err != nil {
		t.Fatalf("Preflight: %v", err)
	}
	for _, c := range report.Checks {
		t.Logf("%-4s %-8s %s: %s", c.Level, c.Party, c.Check, c.Detail)
	}
	return report
}

// pfFind returns the check whose name contains check (and of party, when
// party is not empty), or fails the test.
func pfFind(t *testing.T, report coordination.PreflightReport, party, check string) coordination.PreflightCheck {
	t.Helper()
	for _, c := range report.Checks {
		if strings.Contains(c.Check, check) && (party == "" || c.Party == party) {
			return c
		}
	}
	t.Fatalf("the report has no check %q of party %q", check, party)
	return coordination.PreflightCheck{}
}

// pfWant checks the level of a check, and that its detail names every
// word of words.
func pfWant(t *testing.T, report coordination.PreflightReport, party, check string, level coordination.PreflightLevel, words ...string) coordination.PreflightCheck {
	t.Helper()
	c := pfFind(t, report, party, check)
	if c.Level != level {
		t.Fatalf("check %q of party %q = %s (%s); want %s", c.Check, party, c.Level, c.Detail, level)
	}
	for _, w := range words {
		if !strings.Contains(c.Detail, w) {
			t.Fatalf("check %q: detail %q does not name %q", c.Check, c.Detail, w)
		}
	}
	if level != coordination.PreflightOK && c.Fix == "" {
		t.Fatalf("check %q is %s without a fix", c.Check, level)
	}
	return c
}

// pfLease builds a lease policy, or fails the test.
func pfLease(t *testing.T, duration, renew time.Duration) coordination.LeaseConfig {
	t.Helper()
	lease, err := coordination.NewLeaseConfig(duration, renew, time.Second)
	if err != nil {
		t.Fatalf("NewLeaseConfig(%v, %v): %v", duration, renew, err)
	}
	return lease
}

// pfHealthyTopic: a compacted topic of the count the members expect, a
// lease the cluster allows: every check of the versions, the topic and
// the lease's limits passes, and transaction.version is the level the
// brokers advertise.
func pfHealthyTopic(t *testing.T, c *kafkatest.Cluster) {
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 4)
	report := pfRun(t, transport, nil, nil, append(options, coordination.WithLeaseConfig(coordination.DefaultLeaseConfig()))...)
	pfWant(t, report, "", "serves the library's requests", coordination.PreflightOK, "EndTxn v4", "Produce (transactional) v11", "Produce (plain) v", "AddPartitionsToTxn v3")
	pfWant(t, report, "", "exists", coordination.PreflightOK)
	pfWant(t, report, "", "partition count", coordination.PreflightOK)
	pfWant(t, report, "", "cleanup.policy", coordination.PreflightOK, "compact")
	pfWant(t, report, "", "transaction.max.timeout.ms", coordination.PreflightOK)
	pfWant(t, report, "", "transactional.id.expiration.ms", coordination.PreflightOK)
	pfWant(t, report, "", "broker.session.timeout.ms", coordination.PreflightOK)

	// The level the brokers advertise, read here with kadm.
	versions, err := c.Admin(t).ApiVersions(ktContext(t))
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	level := int16(0)
	for _, v := range versions.Sorted() {
		for _, f := range v.Raw().FinalizedFeatures {
			if f.Name == "transaction.version" {
				level = f.MaxVersionLevel
			}
		}
	}
	pfWant(t, report, "", "transaction.version", coordination.PreflightOK, fmt.Sprintf("transaction.version=%d", level))
	if got := report.Level("member"); got == coordination.PreflightFail {
		t.Fatalf("report.Level(member) = %s on a healthy topic; want no FAIL", got)
	}
	// No command topic named: a device's one need, READ on it, was not
	// tried, which is a WARN of the device only.
	pfWant(t, report, "device", "the ACLs on the command topics", coordination.PreflightWarn, "no command topic named")
}

// pfMissingTopic: the topic the options name does not exist.
func pfMissingTopic(t *testing.T, c *kafkatest.Cluster) {
	transport := ktTransport(t, c)
	name := kafkatest.TopicName("coord-missing")
	report := pfRun(t, transport, nil, nil, coordination.WithTopic(name))
	pfWant(t, report, "", "the state topic "+name+" exists", coordination.PreflightFail, "does not exist")
	if report.Level() != coordination.PreflightFail {
		t.Fatalf("report.Level() = %s; want FAIL", report.Level())
	}
}

// pfDeletePolicy: a state topic created with cleanup.policy=delete.
func pfDeletePolicy(t *testing.T, c *kafkatest.Cluster) {
	transport := ktTransport(t, c)
	name := c.CreateTopic(t, "coord-delete", 2, map[string]string{"cleanup.policy": "delete"})
	report := pfRun(t, transport, nil, nil, coordination.WithTopic(name), coordination.WithPartitions(2))
	pfWant(t, report, "", "cleanup.policy", coordination.PreflightFail, "cleanup.policy=delete")
}

// pfMinISRAboveReplication: a topic of one replica with
// min.insync.replicas=2 on a single broker of Kafka 3.7 or later, which
// takes the replication factor instead (KAFKA-15583): the writes pass, so
// it is no blocker (it was a FAIL that said every write is refused).
// kfake's ApiVersions read as Kafka 1.0, a release that refuses them: a
// FAIL there.
func pfMinISRAboveReplication(t *testing.T, c *kafkatest.Cluster) {
	transport := ktTransport(t, c)
	name := c.CreateTopic(t, "coord-isr-above", 2, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"})
	report := pfRun(t, transport, nil, nil, coordination.WithTopic(name), coordination.WithPartitions(2))
	if c.Fake != nil {
		pfWant(t, report, "", "min.insync.replicas", coordination.PreflightFail, "older than Kafka 3.7", "refuses every write")
		return
	}
	pfWant(t, report, "", "min.insync.replicas", coordination.PreflightOK, "min.insync.replicas=2 above the replication factor 1", "KAFKA-15583")
}

// TestPreflightFakeMinISRAboveReplicationOnOldBroker: the same topic on a
// broker of Kafka 3.6 (kfake's MaxVersions), which refuses every write of
// it, is a blocker.
func TestPreflightFakeMinISRAboveReplicationOnOldBroker(t *testing.T) {
	c := kafkatest.Fake(t, kfake.MaxVersions(kversion.V3_6_0()))
	transport := ktTransport(t, c)
	name := c.CreateTopic(t, "coord-isr-above-old", 2, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": "2"})
	report := pfRun(t, transport, nil, nil, coordination.WithTopic(name), coordination.WithPartitions(2))
	pfWant(t, report, "", "min.insync.replicas", coordination.PreflightFail, "older than Kafka 3.7", "refuses every write")
}

// pfWrongPartitionCount: the members expect 8 partitions, the topic has 4.
func pfWrongPartitionCount(t *testing.T, c *kafkatest.Cluster) {
	transport := ktTransport(t, c)
	name := c.CreateTopic(t, "coord-count", 4, map[string]string{"cleanup.policy": "compact"})
	report := pfRun(t, transport, nil, nil, coordination.WithTopic(name), coordination.WithPartitions(8))
	pfWant(t, report, "", "partition count", coordination.PreflightFail, "4 partitions", "configured for 8")
}

// pfLeaseAboveTxnMaxTimeout: a lease of 16 minutes crosses Kafka's
// default transaction.max.timeout.ms of 15 minutes (the brokers of the
// tests keep the default).
func pfLeaseAboveTxnMaxTimeout(t *testing.T, c *kafkatest.Cluster) {
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 2)
	report := pfRun(t, transport, nil, nil, append(options, coordination.WithLeaseConfig(pfLease(t, 16*time.Minute, 5*time.Minute)))...)
	pfWant(t, report, "", "transaction.max.timeout.ms", coordination.PreflightFail, "16m0s", "15m0s", "INVALID_TRANSACTION_TIMEOUT")
}

// pfLeaseAboveTxnIDExpiration: a lease of 8 days crosses Kafka's default
// transactional.id.expiration.ms of 7 days.
func pfLeaseAboveTxnIDExpiration(t *testing.T, c *kafkatest.Cluster) {
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 2)
	report := pfRun(t, transport, nil, nil, append(options, coordination.WithLeaseConfig(pfLease(t, 8*24*time.Hour, 24*time.Hour)))...)
	pfWant(t, report, "", "transactional.id.expiration.ms", coordination.PreflightFail, "168h0m0s", "INVALID_PRODUCER_ID_MAPPING")
}

// pfShortLease: a lease of 3 s renewed every 1 s is shorter than
// broker.session.timeout.ms + 1 s + 2 s for any session timeout (Kafka's
// default is 9 s, the test broker's 3 s): the warning that CheckStateTopic
// logs is a WARN of the report.
func pfShortLease(t *testing.T, c *kafkatest.Cluster) {
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 2)
	report := pfRun(t, transport, nil, nil, append(options, coordination.WithLeaseConfig(pfLease(t, 3*time.Second, time.Second)))...)
	pfWant(t, report, "", "broker.session.timeout.ms", coordination.PreflightWarn, "the lease 3s is shorter than", "renew interval 1s")
	if report.Level() == coordination.PreflightOK {
		t.Fatalf("report.Level() = OK with a WARN in it")
	}
}

// pfProbesLeaveALiveRoleAlone: a holder holds a role; Preflight of that
// role, with every probe of the ACLs, changes nothing: the holder's next
// guarded write and renewal pass under its token, and DescribeLeadership
// names the same token.
func pfProbesLeaveALiveRoleAlone(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 2)
	options = append(options, coordination.WithLeaseConfig(transport.LeaseConfig()))
	commands := c.CreateTopic(t, "coord-pf-commands", 1, nil)
	role := ktRole(t, "pf-live")
	leadership, err := coordination.AcquireLeadership(ctx, transport, role, fxMember(t, "node-1"), options...)
	if err != nil {
		t.Fatalf("AcquireLeadership: %v", err)
	}
	defer func() { _ = leadership.Resign(ctx) }()
	token := leadership.Token()

	other := ktTransport(t, c) // another process runs the check
	report := pfRun(t, other, []coordination.Role{role}, []string{commands}, options...)
	for _, check := range []string{"WRITE on the TransactionalId", "DESCRIBE on the TransactionalId", "WRITE on the state topic", "READ on the state topic", "WRITE on the command topic"} {
		pfWant(t, report, "member", check, coordination.PreflightOK)
	}
	pfWant(t, report, "device", "READ on the command topic", coordination.PreflightOK)

	if err := leadership.Write(ctx, coordination.GuardedRecord{Topic: commands, Partition: 0, Value: []byte("after the preflight")}); err != nil {
		t.Fatalf("the holder's guarded write after the preflight: %v", err)
	}
	if err := leadership.Renew(ctx); err != nil {
		t.Fatalf("the holder's renewal after the preflight: %v", err)
	}
	status, err := coordination.DescribeLeadership(ctx, other, role)
	if err != nil || !status.Authoritative(token) {
		t.Fatalf("DescribeLeadership after the preflight = %v, %v; want the holder's token %s", status, err, token)
	}
}

// TestPreflightFakeBrokerTooOld: a broker of Kafka 2.8 (kfake's
// MaxVersions) lacks DescribeTransactions, which the library needs: a
// blocker that names the request and the library's range.
func TestPreflightFakeBrokerTooOld(t *testing.T) {
	c := kafkatest.Fake(t, kfake.MaxVersions(kversion.V2_8_0()))
	transport := ktTransport(t, c)
	report := pfRun(t, transport, nil, nil)
	pfWant(t, report, "", "serves the library's requests", coordination.PreflightFail,
		"DescribeTransactions (key 65): the broker does not serve it; the library sends versions 0-")
}

// TestPreflightFakeBrokerDropsACappedVersion: a broker that serves EndTxn
// from version 5 only (a future Kafka that dropped the versions that keep
// the epoch) is a blocker that names both ranges.
func TestPreflightFakeBrokerDropsACappedVersion(t *testing.T) {
	c := kafkatest.Fake(t)
	c.Fake.ControlKey(kmsg.ApiVersions.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.Version = req.GetVersion()
		kversion.Stable().EachMaxKeyVersion(func(key, max int16) {
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = key, 0, max
			if key == kmsg.EndTxn.Int16() {
				k.MinVersion, k.MaxVersion = 5, 5
			}
			resp.ApiKeys = append(resp.ApiKeys, k)
		})
		return resp, nil, true
	})
	transport := ktTransport(t, c)
	report := pfRun(t, transport, nil, nil)
	pfWant(t, report, "", "serves the library's requests", coordination.PreflightFail,
		"EndTxn (key 26): the broker serves versions 5-5, the library sends 0-4")
}

// TestPreflightCluster runs the rows of durability on the 3-node cluster:
// a topic of replication factor 1 (FAIL), one with min.insync.replicas=1
// (WARN), one of 2 replicas with min.insync.replicas=3 (WARN: Kafka 4.4
// takes 2), one with unclean leader election on (FAIL), and a healthy one
// (replication factor 3, min.insync.replicas 2: OK).
func TestPreflightCluster(t *testing.T) {
	c := kafkatest.KafkaCluster(t)
	transport := ktTransport(t, c)
	admin := c.Admin(t)
	create := func(prefix string, rf int16, configs map[string]*string) string {
		t.Helper()
		name := kafkatest.TopicName(prefix)
		c.DeleteTopicAtCleanup(t, name)
		configs["cleanup.policy"] = kadm.StringPtr("compact")
		if _, err := admin.CreateTopic(ktContext(t), 2, rf, configs, name); err != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
		c.WaitTopicReady(t, name, 2)
		return name
	}
	run := func(name string) coordination.PreflightReport {
		t.Helper()
		return pfRun(t, transport, nil, nil, coordination.WithTopic(name), coordination.WithPartitions(2))
	}

	report := run(create("coord-pf-rf1", 1, map[string]*string{"min.insync.replicas": kadm.StringPtr("1")}))
	pfWant(t, report, "", "replication factor", coordination.PreflightFail, "1 on a cluster of 3 brokers")

	report = run(create("coord-pf-isr1", 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("1")}))
	pfWant(t, report, "", "replication factor", coordination.PreflightOK)
	pfWant(t, report, "", "min.insync.replicas", coordination.PreflightWarn, "min.insync.replicas=1", "3 brokers")

	above := create("coord-pf-isr-above", 2, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")})
	report = run(above)
	pfWant(t, report, "", "min.insync.replicas", coordination.PreflightWarn, "min.insync.replicas=3 is above the replication factor 2", "KAFKA-15583")
	// What the WARN says: the broker takes the replication factor, so an
	// acks=all write passes (before Kafka 3.7: NOT_ENOUGH_REPLICAS).
	if err := c.Client(t).ProduceSync(ktContext(t), &kgo.Record{Topic: above, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("an acks=all write to %s (2 replicas, min.insync.replicas 3): %v; want it to pass on Kafka 3.7 and later", above, err)
	}

	report = run(create("coord-pf-unclean", 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2"),
		"unclean.leader.election.enable": kadm.StringPtr("true")}))
	pfWant(t, report, "", "unclean.leader.election.enable", coordination.PreflightFail, "unclean.leader.election.enable=true")

	report = run(create("coord-pf-good", 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}))
	pfWant(t, report, "", "replication factor", coordination.PreflightOK)
	pfWant(t, report, "", "min.insync.replicas", coordination.PreflightOK)
	pfWant(t, report, "", "unclean.leader.election.enable", coordination.PreflightOK)
	for _, check := range report.Checks {
		if strings.Contains(check.Check, "serves the library's requests") && check.Level != coordination.PreflightOK {
			t.Fatalf("check %q = %s on the 3-node cluster", check.Check, check.Level)
		}
	}
}

// TestPreflightACL runs Preflight on the SASL listener as alice, who
// holds some of the ACLs of each party, and as bob, who holds none: each
// check names the ACL that is missing, with its party, and passes the
// ones held. The test grants the ACLs over the PLAINTEXT listener (a super
// user) and deletes them when it ends.
//
//   - alice: DESCRIBE and READ on the state topic, DESCRIBE on the role's
//     transactional id: an observer's ACLs, and no WRITE anywhere, no
//     DESCRIBE_CONFIGS, nothing on the command topic.
//   - bob: nothing.
func TestPreflightACL(t *testing.T) {
	c := kafkatest.Kafka(t)
	saslBrokers := kafkatest.SASLBrokers(t)
	ctx := ktContext(t)
	super := ktTransport(t, c)
	topic, options := ktStateTopic(t, c, super, 2)
	commands := c.CreateTopic(t, "coord-pf-acl-commands", 1, nil)
	role := ktRole(t, "pf-acl")
	admin := c.Admin(t)
	created := klGrant(t, admin,
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics(topic).
			Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:alice").AllowHosts().TransactionalIDs(role.String()).
			Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral),
	)
	t.Logf("created %d ACLs for alice", created)
	e := &klEnv{lease: ktLease}
	alice := klSASLTransport(t, e, saslBrokers, "alice", "alice-secret")
	bob := klSASLTransport(t, e, saslBrokers, "bob", "bob-secret")

	// The authorizer takes new ACLs up a moment after CreateAcls returns.
	var report coordination.PreflightReport
	klEventually(t, 30*time.Second, "alice's ACLs are in force", func() (bool, string) {
		r, err := alice.Preflight(ctx, []coordination.Role{role}, []string{commands}, options...)
		if err != nil {
			return false, err.Error()
		}
		report = r
		read := pfFind(t, r, "observer", "READ on the state topic")
		describe := pfFind(t, r, "observer", "DESCRIBE on the TransactionalId")
		return read.Level == coordination.PreflightOK && describe.Level == coordination.PreflightOK, read.Detail + "; " + describe.Detail
	})
	for _, c := range report.Checks {
		t.Logf("alice: %-4s %-8s %s: %s", c.Level, c.Party, c.Check, c.Detail)
	}
	pfWant(t, report, "observer", "READ on the state topic", coordination.PreflightOK)
	pfWant(t, report, "observer", "DESCRIBE on the TransactionalId", coordination.PreflightOK)
	pfWant(t, report, "member", "WRITE on the state topic", coordination.PreflightFail, "TOPIC_AUTHORIZATION_FAILED")
	pfWant(t, report, "member", "WRITE on the TransactionalId "+role.String(), coordination.PreflightFail, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
	pfWant(t, report, "member", "DESCRIBE_CONFIGS on the state topic", coordination.PreflightFail)
	pfWant(t, report, "device", "READ on the command topic "+commands, coordination.PreflightFail)
	pfWant(t, report, "member", "WRITE on the command topic "+commands, coordination.PreflightFail)
	if got := report.Level("observer"); got == coordination.PreflightFail {
		t.Fatalf("alice's report.Level(observer) = FAIL; she holds an observer's ACLs")
	}
	if got := report.Level("member"); got != coordination.PreflightFail {
		t.Fatalf("alice's report.Level(member) = %s; want FAIL", got)
	}

	report = pfRun(t, bob, []coordination.Role{role}, []string{commands}, options...)
	pfWant(t, report, "", "the state topic "+topic+" exists", coordination.PreflightFail, "may not describe")
	pfWant(t, report, "observer", "DESCRIBE on the TransactionalId", coordination.PreflightFail, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
	pfWant(t, report, "member", "WRITE on the TransactionalId", coordination.PreflightFail, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
	pfWant(t, report, "device", "READ on the command topic", coordination.PreflightFail)
}

// TestPreflightFakeTransactionVersionOne: a cluster whose
// transaction.version stays 1 (upgraded from Kafka 3 and never finalized
// to 2; kfake takes the level from UpdateFeatures) is reported as such,
// and is no blocker.
func TestPreflightFakeTransactionVersionOne(t *testing.T) {
	c := kafkatest.Fake(t)
	req := kmsg.NewPtrUpdateFeaturesRequest()
	update := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	update.Feature, update.MaxVersionLevel, update.UpgradeType = "transaction.version", 1, 2 // 2: a safe downgrade
	req.FeatureUpdates = append(req.FeatureUpdates, update)
	resp, err := req.RequestWith(ktContext(t), c.Client(t))
	if err != nil {
		t.Fatalf("UpdateFeatures: %v", err)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("UpdateFeatures of %s: code %d", r.Feature, r.ErrorCode)
		}
	}
	transport := ktTransport(t, c)
	report := pfRun(t, transport, nil, nil)
	pfWant(t, report, "", "transaction.version", coordination.PreflightOK, "transaction.version=1")
}
