package coordination_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The integration suite of KafkaTransport. It is written once, over a
// kafkatest.Cluster, and runs twice:
//
//   - TestKafkaTransportFake runs it against kfake, franz-go's in-process
//     fake broker, in every plain `go test ./...`, with no setup;
//   - TestKafkaTransportKafka runs it against the real Apache Kafka broker
//     of KRABKA_KAFKA_BROKERS (scripts/kafka-start.sh), and skips without it
//     (and fails under CI).
//
// kfake is not Kafka, and the suite asserts on it only what both do. The
// differences that matter here:
//
//   - Producer ids. Kafka allocates producer ids from a monotonic block
//     allocator, so a new producer id always ranks above the old one. kfake
//     derives the id from a hash of the transactional id, and picks a random
//     id when the epoch of one is exhausted. The rank of two tokens
//     (FencingToken.Supersedes) is asserted on Kafka only; on kfake only
//     that they differ.
//   - CONCURRENT_TRANSACTIONS. kfake completes every transaction inline and
//     never answers it, so the retry of AcquireEpoch runs on Kafka only.
//   - Epoch checks. kfake's InitProducerId accepts any epoch at or below its
//     own (a stale one too) and mints a newer one, where Kafka answers
//     PRODUCER_FENCED. A transport that re-initialised after a fence would
//     mint a new epoch for a deposed member on kfake: the fence tests catch
//     that on kfake too, through DescribeEpoch.
//   - Fence codes. kfake answers every stale epoch at the coordinator with
//     PRODUCER_FENCED, and INVALID_PRODUCER_EPOCH only on produce. The tests
//     assert errors.Is(err, ErrFenced), never a code.
//   - Timing. kfake aborts a timed-out transaction on a timer at the exact
//     timeout; Kafka's coordinator sweeps every
//     transaction.abort.timed.out.transaction.cleanup.interval.ms (1 s in
//     scripts/kafka-start.sh, 10 s by default). Timing bounds are asserted
//     on Kafka only, and logged on both.

func TestKafkaTransportFake(t *testing.T) {
	runKafkaTransportSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Fake(t) })
}

func TestKafkaTransportKafka(t *testing.T) {
	kafkatest.Kafka(t) // skip (or fail under CI) before any subtest
	runKafkaTransportSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Kafka(t) })
}

// ktLease is the lease of the transports of the suite. Its duration is the
// transaction timeout of every role.
var ktLease = func() coordination.LeaseConfig {
	lease, err := coordination.NewLeaseConfig(6*time.Second, 2*time.Second, time.Second)
	if err != nil {
		panic(err)
	}
	return lease
}()

func runKafkaTransportSuite(t *testing.T, cluster func(*testing.T) *kafkatest.Cluster) {
	tests := []struct {
		name string
		run  func(*testing.T, *kafkatest.Cluster)
	}{
		{"UncappedClientsEpochFollowsTheTransactionVersion", ktUncappedClientMovesTheEpoch},
		{"MintThenFiftyRenewalsKeepTheToken", ktMintThenFiftyRenewalsKeepTheToken},
		{"SecondMintFencesTheFirstTransport", ktSecondMintFencesTheFirstTransport},
		{"NewerMintOfTheSameTransportRetiresTheOlderToken", ktNewerMintRetiresTheOlderToken},
		{"TokenOfAnotherTransportIsRefused", ktTokenOfAnotherTransportIsRefused},
		{"TombstonesCommitTogetherUnderTheToken", ktTombstonesCommitTogether},
		{"DescribeEpochOfAnUnknownRole", ktDescribeEpochOfAnUnknownRole},
		{"StateTopicCheck", ktStateTopicCheck},
		{"CampaignsShareTheStateTopicCheck", ktCampaignsShareTheStateTopicCheck},
		{"ReadPartitionSeesCommittedRecordsOnly", ktReadPartitionSeesCommittedRecordsOnly},
		{"StalledTransactionHidesTheOtherRoleOnPartition12", ktStalledTransactionHidesTheOtherRole},
		{"IncrementalReadAndWatch", ktIncrementalReadAndWatch},
		{"GuardedWriteIsAtomic", ktGuardedWriteIsAtomic},
		{"TransientFailureAbortsAndKeepsTheToken", ktTransientFailureAbortsAndKeepsTheToken},
		{"CloseIsIdempotentAndEndsEveryToken", ktCloseIsIdempotentAndEndsEveryToken},
		{"AcquireEpochTakesOverAnOpenTransaction", ktAcquireEpochTakesOverAnOpenTransaction},
		{"MissingACLIsAPermanentError", ktMissingACLIsAPermanentError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, cluster(t)) })
	}
}

// ktTransport opens a transport over the cluster, closed when the test ends.
// The client options go to every client of the transport.
func ktTransport(t *testing.T, c *kafkatest.Cluster, options ...kgo.Opt) *coordination.KafkaTransport {
	t.Helper()
	if os.Getenv("KRABKA_TEST_KGO_DEBUG") != "" { // franz-go's debug log, to stderr
		options = append(options, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000 ") })))
	}
	transport, err := coordination.NewKafkaTransportWithOptions(ktLease, options, c.Brokers...)
	if err != nil {
		t.Fatalf("NewKafkaTransport: %v", err)
	}
	t.Cleanup(transport.Close)
	return transport
}

// ktContext is the context of one test: generous, so that a hang fails
// with a message rather than at the test binary's timeout.
func ktContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ktStateTopic creates a compacted state topic with a random name and the
// partition count, through the transport, and deletes it when the test
// ends. It returns the options that name it.
func ktStateTopic(t *testing.T, c *kafkatest.Cluster, transport *coordination.KafkaTransport, partitions int) (string, []coordination.Option) {
	t.Helper()
	name := kafkatest.TopicName("coord-state")
	options := []coordination.Option{coordination.WithTopic(name), coordination.WithPartitions(partitions)}
	c.DeleteTopicAtCleanup(t, name)
	if err := transport.CreateStateTopic(ktContext(t), 1, 1, options...); err != nil {
		t.Fatalf("CreateStateTopic(%s, %d partitions): %v", name, partitions, err)
	}
	return name, options
}

// ktRole returns a role with a random name: transactional ids are global
// to the broker, and tests of other packages may run at the same time.
func ktRole(t *testing.T, prefix string) coordination.Role {
	t.Helper()
	return fxRole(t, kafkatest.TopicName(prefix))
}

// ktPartition returns the partition of the state topic of the role.
func ktPartition(t *testing.T, role coordination.Role, options []coordination.Option) coordination.TopicPartition {
	t.Helper()
	tp, err := coordination.RoleTopicPartition(role, options...)
	if err != nil {
		t.Fatalf("RoleTopicPartition(%s): %v", role, err)
	}
	return tp
}

// ktLeaseRecord encodes a lease of the role for the member under token.
func ktLeaseRecord(t *testing.T, role coordination.Role, member string, token coordination.FencingToken, nowMillis int64) (key, value []byte) {
	t.Helper()
	lease := ktLease.Grant(fxMember(t, member), token, nowMillis)
	return coordination.EncodeKey(coordination.LeaseKey(role)), coordination.EncodeLease(lease)
}

// ktLeaseOf folds a partition and returns the lease of the role.
func ktLeaseOf(t *testing.T, role coordination.Role, records []coordination.StateRecord) *coordination.Lease {
	t.Helper()
	state, err := coordination.BuildRoleState(role, records)
	if err != nil {
		t.Fatalf("BuildRoleState(%s): %v", role, err)
	}
	return state.Lease
}

// ktMustFence checks that err wraps ErrFenced.
func ktMustFence(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("%s: got error %v, want one that wraps ErrFenced", what, err)
	}
}

// ktMintThenFiftyRenewalsKeepTheToken proves the KIP-890 cap: on Kafka 4
// with transaction.version=2 an EndTxn of version 5 bumps the epoch at every
// commit, so without the cap the token would change at the first renewal
// and DescribeEpoch would stop matching it.
func ktMintThenFiftyRenewalsKeepTheToken(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 16)
	role := ktRole(t, "renew")
	tp := ktPartition(t, role, options)

	start := time.Now()
	token, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch(%s): %v", role, err)
	}
	t.Logf("minted %s in %v", token, time.Since(start))
	if token == coordination.NoEpoch {
		t.Fatalf("AcquireEpoch(%s) = NoEpoch", role)
	}

	start = time.Now()
	const renewals = 50
	for i := range renewals {
		key, value := ktLeaseRecord(t, role, "node-1", token, int64(1_000+i))
		if err := transport.WriteLease(ctx, tp, token, key, value); err != nil {
			t.Fatalf("renewal %d under %s: %v", i, token, err)
		}
		described, held, err := transport.DescribeEpoch(ctx, role)
		if err != nil || !held || described != token {
			t.Fatalf("after renewal %d: DescribeEpoch(%s) = %s, %t, %v; want the minted %s, true, nil", i, role, described, held, err, token)
		}
	}
	t.Logf("%d renewals with a DescribeEpoch after each in %v", renewals, time.Since(start))

	// Kafka answers EndTxn once the commit is in the transaction log and
	// writes the markers after: a read at once may stop at a last stable
	// offset below the last renewal (seen on 4.2.2 and 4.4.0 in the broker
	// matrix). The renewal is visible once the markers are written.
	var lease *coordination.Lease
	deadline := time.Now().Add(5 * time.Second)
	for reads := 1; ; reads++ {
		records, err := transport.ReadPartition(ctx, tp)
		if err != nil {
			t.Fatalf("ReadPartition(%s): %v", tp, err)
		}
		lease = ktLeaseOf(t, role, records)
		if lease != nil && lease.GrantedAt == 1_000+renewals-1 {
			t.Logf("the last renewal visible at read %d", reads)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of %s 5 s after %d renewals = %+v; want the last renewal under %s", role, renewals, lease, token)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lease.Token != token {
		t.Fatalf("lease of %s after %d renewals = %+v; want the last renewal under %s", role, renewals, lease, token)
	}
}

// ktUncappedClientMovesTheEpoch is the control of the KIP-890 test above,
// chosen by the feature the broker advertises (ApiVersions' finalized
// transaction.version), never skipped: at level 2 a franz-go client
// without the version cap gets a new epoch from every commit, so the 50
// renewals under one token prove the cap; at level 1 or 0 (Kafka 3.x, a
// cluster upgraded from 3.x and never finalized) the broker keeps the epoch
// over commits whatever the client sends, and the test asserts that. It is
// asserted on Kafka only; kfake's emulation is logged.
func ktUncappedClientMovesTheEpoch(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	topic := c.CreateTopic(t, "coord-kip890", 1, nil)
	client := c.Client(t, kgo.TransactionalID(kafkatest.TopicName("uncapped")), kgo.DefaultProduceTopic(topic))
	id, epoch, err := client.ProducerID(ctx)
	if err != nil {
		t.Fatalf("ProducerID: %v", err)
	}
	for range 3 {
		if err := client.BeginTransaction(); err != nil {
			t.Fatalf("BeginTransaction: %v", err)
		}
		if err := client.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if err := client.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	after, afterEpoch, err := client.ProducerID(ctx)
	if err != nil {
		t.Fatalf("ProducerID after the commits: %v", err)
	}
	t.Logf("an uncapped client minted %d:%d and holds %d:%d after 3 commits", id, epoch, after, afterEpoch)
	if !c.Real {
		return
	}
	moved := after != id || afterEpoch != epoch
	switch tv := c.Features(t).TransactionVersion(); {
	case tv >= 2 && !moved:
		t.Fatalf("the uncapped client kept %d:%d over 3 commits on a cluster that finalized transaction.version=%d: an EndTxn of version 5 must bump the epoch (KIP-890 part 2)", id, epoch, tv)
	case tv < 2 && moved:
		t.Fatalf("the uncapped client moved from %d:%d to %d:%d over 3 commits on a cluster at transaction.version=%d: only level 2 bumps the epoch at a commit", id, epoch, after, afterEpoch, tv)
	default:
		t.Logf("transaction.version=%d: the epoch moved at the commits: %t, as that level implies", tv, moved)
	}
}

// ktSecondMintFencesTheFirstTransport is the fence as it happens: the
// deposed member learns it from its next write, and from nothing else.
func ktSecondMintFencesTheFirstTransport(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	inits := new(ktInitCounter)
	first, second, third := ktTransport(t, c, kgo.WithHooks(inits)), ktTransport(t, c), ktTransport(t, c)
	_, options := ktStateTopic(t, c, first, 16)
	commands := c.CreateTopic(t, "coord-commands", 2, nil)
	role := ktRole(t, "fence")
	tp := ktPartition(t, role, options)
	command := []coordination.GuardedRecord{{Topic: commands, Partition: 0, Value: []byte("open valve 7")}}

	old, err := first.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("first AcquireEpoch: %v", err)
	}
	key, value := ktLeaseRecord(t, role, "node-1", old, 1)
	if err := first.WriteLease(ctx, tp, old, key, value); err != nil {
		t.Fatalf("first WriteLease under %s: %v", old, err)
	}
	if err := first.WriteGuarded(ctx, old, command); err != nil {
		t.Fatalf("first WriteGuarded under %s: %v", old, err)
	}

	newer, err := second.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("second AcquireEpoch: %v", err)
	}
	if newer == old {
		t.Fatalf("second AcquireEpoch = %s, the token of the first", newer)
	}
	if c.Real && !newer.Supersedes(old) {
		t.Fatalf("second AcquireEpoch = %s, which does not supersede %s", newer, old)
	}

	// The deposed member's next lease write and guarded write fail, and
	// every write after them too, without a new epoch.
	start := time.Now()
	err = first.WriteLease(ctx, tp, old, key, value)
	ktMustFence(t, "WriteLease of the deposed member", err)
	t.Logf("the deposed member's lease write failed after %v: %v", time.Since(start), err)
	ktMustFence(t, "WriteGuarded of the deposed member", first.WriteGuarded(ctx, old, command))
	ktMustFence(t, "second WriteLease of the deposed member", first.WriteLease(ctx, tp, old, key, value))

	// The deposed member sent no InitProducerId after its mint. One that
	// re-initialised its producer would now hold a newer epoch than the
	// second member (kfake mints one for a stale epoch), and the coordinator
	// would no longer hold the second member's token.
	if n := inits.n.Load(); n != 1 {
		t.Fatalf("the first transport wrote %d InitProducerId requests; want 1, its mint", n)
	}
	if described, held, err := first.DescribeEpoch(ctx, role); err != nil || !held || described != newer {
		t.Fatalf("DescribeEpoch after the fenced writes = %s, %t, %v; want %s, true, nil", described, held, err, newer)
	}
	key, value = ktLeaseRecord(t, role, "node-2", newer, 2)
	if err := second.WriteLease(ctx, tp, newer, key, value); err != nil {
		t.Fatalf("WriteLease of the new holder under %s: %v", newer, err)
	}

	// The guarded write alone, as the first write after a fence, fails too.
	if _, err := third.AcquireEpoch(ctx, role); err != nil {
		t.Fatalf("third AcquireEpoch: %v", err)
	}
	start = time.Now()
	err = second.WriteGuarded(ctx, newer, command)
	ktMustFence(t, "WriteGuarded as the first write after the fence", err)
	t.Logf("the deposed member's guarded write failed after %v: %v", time.Since(start), err)

	// Only the first holder's command, written before the fence, is visible.
	start = time.Now()
	got := ktReadCommitted(t, c, commands, 1)
	t.Logf("read commands in %v", time.Since(start))
	if len(got) != 1 || string(got[0].Value) != "open valve 7" {
		t.Fatalf("committed commands = %v; want the one written before the fence", ktValues(got))
	}
}

// ktInitCounter counts the InitProducerId requests that the clients of a
// transport write.
type ktInitCounter struct{ n atomic.Int64 }

func (c *ktInitCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == kmsg.InitProducerID.Int16() {
		c.n.Add(1)
	}
}

// ktNewerMintRetiresTheOlderToken: each AcquireEpoch mints, and the older
// token of the same transport can no longer write.
func ktNewerMintRetiresTheOlderToken(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 16)
	role := ktRole(t, "remint")
	tp := ktPartition(t, role, options)

	older, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	newer, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("second AcquireEpoch: %v", err)
	}
	if newer == older || (c.Real && !newer.Supersedes(older)) {
		t.Fatalf("second AcquireEpoch = %s after %s; want a newer token", newer, older)
	}
	key, value := ktLeaseRecord(t, role, "node-1", older, 1)
	ktMustFence(t, "WriteLease under the older token", transport.WriteLease(ctx, tp, older, key, value))
	key, value = ktLeaseRecord(t, role, "node-1", newer, 2)
	if err := transport.WriteLease(ctx, tp, newer, key, value); err != nil {
		t.Fatalf("WriteLease under the newer token %s: %v", newer, err)
	}
}

// ktTokenOfAnotherTransportIsRefused: a transport writes only under its own
// mints, even with the coordinator's current token in hand.
func ktTokenOfAnotherTransportIsRefused(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	holder, other := ktTransport(t, c), ktTransport(t, c)
	_, options := ktStateTopic(t, c, holder, 16)
	role := ktRole(t, "foreign")
	tp := ktPartition(t, role, options)
	token, err := holder.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	key, value := ktLeaseRecord(t, role, "node-1", token, 1)
	ktMustFence(t, "WriteLease under another transport's token", other.WriteLease(ctx, tp, token, key, value))
	ktMustFence(t, "WriteGuarded under another transport's token", other.WriteGuarded(ctx, token, nil))

	otherRole := ktRole(t, "other")
	if err := holder.WriteLease(ctx, tp, token, coordination.EncodeKey(coordination.LeaseKey(otherRole)), value); err == nil {
		t.Fatalf("WriteLease of a lease key of role %s under the token of role %s succeeded", otherRole, role)
	}
}

// ktTombstonesCommitTogether: WriteTombstones refuses an empty list, a key
// of another role and a key that does not decode before any request, and a
// deposed token's call is fenced with none of its tombstones visible; the
// holder's call commits every tombstone in one transaction, in the order
// given, under the token.
func ktTombstonesCommitTogether(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	first, second := ktTransport(t, c), ktTransport(t, c)
	topic, options := ktStateTopic(t, c, first, 16)
	role := ktRole(t, "tombstones")
	tp := ktPartition(t, role, options)
	member, err := coordination.NewMemberID("node-1")
	if err != nil {
		t.Fatal(err)
	}
	leaseKey := coordination.EncodeKey(coordination.LeaseKey(role))
	registrationKey := coordination.EncodeKey(coordination.RegistrationKey(role, member))
	if err := first.Append(ctx, tp, registrationKey, coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: 1})); err != nil {
		t.Fatalf("Append of the registration: %v", err)
	}
	old, err := first.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	if err := first.WriteTombstones(ctx, tp, old); err == nil {
		t.Fatal("WriteTombstones of no key succeeded")
	}
	if err := first.WriteTombstones(ctx, tp, old, coordination.EncodeKey(coordination.LeaseKey(ktRole(t, "other")))); err == nil {
		t.Fatal("WriteTombstones of another role's lease key succeeded")
	}
	if err := first.WriteTombstones(ctx, tp, old, []byte("not a key")); err == nil {
		t.Fatal("WriteTombstones of a key that does not decode succeeded")
	}
	token, err := second.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("the second AcquireEpoch: %v", err)
	}
	ktMustFence(t, "WriteTombstones under the deposed token", first.WriteTombstones(ctx, tp, old, leaseKey, registrationKey))
	if err := second.WriteTombstones(ctx, tp, token, leaseKey, registrationKey); err != nil {
		t.Fatalf("WriteTombstones under the holder's token: %v", err)
	}
	records := ktReadCommitted(t, c, topic, 3) // the registration, then the two tombstones
	var tombstones []*kgo.Record
	for _, r := range records {
		if r.Partition == int32(tp.Partition) && r.Value == nil {
			tombstones = append(tombstones, r)
		}
	}
	if len(tombstones) != 2 {
		t.Fatalf("%d tombstones in %v; want the holder's 2, and none of the deposed token's", len(tombstones), tp)
	}
	if !bytes.Equal(tombstones[0].Key, leaseKey) || !bytes.Equal(tombstones[1].Key, registrationKey) || tombstones[1].Offset != tombstones[0].Offset+1 {
		t.Fatalf("tombstones %q at %d and %q at %d; want the lease key, then the registration key at the next offset",
			tombstones[0].Key, tombstones[0].Offset, tombstones[1].Key, tombstones[1].Offset)
	}
	for _, r := range tombstones {
		if r.ProducerID != token.ProducerID() || r.ProducerEpoch != token.ProducerEpoch() {
			t.Fatalf("a tombstone at offset %d came from producer %d:%d; want %s", r.Offset, r.ProducerID, r.ProducerEpoch, token)
		}
	}
}

func ktDescribeEpochOfAnUnknownRole(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	role := ktRole(t, "never-taken")
	token, held, err := transport.DescribeEpoch(ctx, role)
	if err != nil || held || token != coordination.NoEpoch {
		t.Fatalf("DescribeEpoch(%s) = %s, %t, %v; want NoEpoch, false, nil", role, token, held, err)
	}
	status, err := coordination.DescribeLeadership(ctx, transport, role)
	if err != nil || status.Held {
		t.Fatalf("DescribeLeadership(%s) = %v, %v; want a role that is not held", role, status, err)
	}
}

func ktStateTopicCheck(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	name, options := ktStateTopic(t, c, transport, 16)

	if err := transport.CheckStateTopic(ctx, options...); err != nil {
		t.Fatalf("CheckStateTopic of the topic just created: %v", err)
	}
	if err := transport.CreateStateTopic(ctx, 1, 1, options...); err != nil {
		t.Fatalf("CreateStateTopic of an existing, matching topic: %v", err)
	}

	err := transport.CheckStateTopic(ctx, coordination.WithTopic(name), coordination.WithPartitions(8))
	if err == nil || !strings.Contains(err.Error(), "has 16 partitions") || !strings.Contains(err.Error(), "configured for 8") {
		t.Fatalf("CheckStateTopic with 8 partitions against 16 = %v; want an error that names both counts", err)
	}
	var topicErr *coordination.StateTopicError
	if !errors.As(err, &topicErr) || topicErr.Topic != name || topicErr.Partitions != 16 || topicErr.WantPartitions != 8 || !errors.Is(err, coordination.ErrMisconfigured) {
		t.Fatalf("CheckStateTopic with 8 partitions against 16 = %#v; want a *StateTopicError of %s, 16 and 8 partitions, that wraps ErrMisconfigured", err, name)
	}
	if err := transport.CreateStateTopic(ctx, 1, 1, coordination.WithTopic(name), coordination.WithPartitions(8)); err == nil {
		t.Fatalf("CreateStateTopic with 8 partitions of an existing topic of 16 succeeded")
	}

	// The options start from the specification's defaults, as
	// AcquireLeadership's do: with the transport's 6 s policy passed, a
	// renew deadline valid for it is no option error that would hide the
	// partition count that differs; without it, the deadline is checked
	// against the default 30 s lease and refused.
	short, err := coordination.NewKafkaTransportWithOptions(klConfig(t, 6*time.Second, 2*time.Second, time.Second), nil, c.Brokers...)
	if err != nil {
		t.Fatalf("NewKafkaTransport: %v", err)
	}
	t.Cleanup(short.Close)
	if err := short.CheckStateTopic(ctx, coordination.WithTopic(name), coordination.WithPartitions(16), coordination.WithRenewDeadline(3*time.Second)); err == nil || !strings.Contains(err.Error(), "WithRenewDeadline") {
		t.Fatalf("CheckStateTopic with WithRenewDeadline(3s) over the default 30 s / 10 s policy = %v; want the option's error", err)
	}
	policy, deadline := coordination.WithLeaseConfig(short.LeaseConfig()), coordination.WithRenewDeadline(3*time.Second)
	if err := short.CheckStateTopic(ctx, coordination.WithTopic(name), coordination.WithPartitions(16), policy, deadline); err != nil {
		t.Fatalf("CheckStateTopic over a 6 s lease with WithRenewDeadline(3s): %v", err)
	}
	if err := short.CheckStateTopic(ctx, coordination.WithTopic(name), coordination.WithPartitions(8), policy, deadline); !errors.As(err, &topicErr) || topicErr.WantPartitions != 8 {
		t.Fatalf("CheckStateTopic over a 6 s lease with WithRenewDeadline(3s) and 8 partitions against 16 = %v; want a *StateTopicError", err)
	}

	deleting := c.CreateTopic(t, "coord-not-compacted", 16, map[string]string{"cleanup.policy": "delete"})
	err = transport.CheckStateTopic(ctx, coordination.WithTopic(deleting), coordination.WithPartitions(16))
	if err == nil || !strings.Contains(err.Error(), "compact") {
		t.Fatalf("CheckStateTopic of a topic with cleanup.policy=delete = %v; want an error about compaction", err)
	}
	if !errors.As(err, &topicErr) || topicErr.CleanupPolicy != "delete" {
		t.Fatalf("CheckStateTopic of a topic with cleanup.policy=delete = %#v; want a *StateTopicError with CleanupPolicy delete", err)
	}

	missing := kafkatest.TopicName("coord-missing")
	err = transport.CheckStateTopic(ctx, coordination.WithTopic(missing))
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("CheckStateTopic of a missing topic = %v; want an error that says it does not exist", err)
	}
	if !errors.As(err, &topicErr) || !topicErr.Missing || topicErr.Topic != missing {
		t.Fatalf("CheckStateTopic of a missing topic = %#v; want a *StateTopicError with Missing set", err)
	}
	if _, err := transport.ReadPartition(ctx, coordination.TopicPartition{Topic: missing, Partition: 0}); err == nil {
		t.Fatalf("ReadPartition of a missing topic succeeded")
	}
}

// ktReadPartitionSeesCommittedRecordsOnly: a registration, a committed
// lease and a tombstone are visible; a record of an aborted transaction is
// not.
func ktReadPartitionSeesCommittedRecordsOnly(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	name, options := ktStateTopic(t, c, transport, 4)
	role := ktRole(t, "committed")
	tp := ktPartition(t, role, options)

	registration := coordination.EncodeKey(coordination.RegistrationKey(role, fxMember(t, "node-1")))
	if err := transport.Append(ctx, tp, registration, coordination.EncodeRegistration(coordination.Registration{Member: fxMember(t, "node-1"), RegisteredAt: 7})); err != nil {
		t.Fatalf("Append: %v", err)
	}
	token, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	key, value := ktLeaseRecord(t, role, "node-1", token, 10)
	if err := transport.WriteLease(ctx, tp, token, key, value); err != nil {
		t.Fatalf("WriteLease: %v", err)
	}

	// An aborted transaction of another producer on the same partition.
	aborted := kafkatest.TopicName("aborted")
	client := c.Client(t, kgo.TransactionalID(aborted), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := client.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction: %v", err)
	}
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: int32(tp.Partition), Key: []byte("aborted-key"), Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatalf("produce in the transaction to abort: %v", err)
	}
	if err := client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("abort: %v", err)
	}
	// A tombstone of the registration, after the aborted record.
	if err := transport.Append(ctx, tp, registration, nil); err != nil {
		t.Fatalf("Append of a tombstone: %v", err)
	}

	records, err := transport.ReadPartition(ctx, tp)
	if err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}
	var sawLease, sawTombstone bool
	for _, r := range records {
		switch {
		case string(r.Key) == "aborted-key":
			t.Fatalf("ReadPartition returned the record of an aborted transaction at offset %d", r.Offset)
		case bytes.Equal(r.Key, key):
			sawLease = bytes.Equal(r.Value, value)
		case bytes.Equal(r.Key, registration):
			sawTombstone = r.Value == nil
		}
	}
	// The specification: every committed record, oldest first, so the
	// registration that the tombstone superseded too; never the aborted one.
	if !sawLease || !sawTombstone || len(records) != 3 || !slices.IsSortedFunc(records, func(a, b coordination.StateRecord) int { return cmp.Compare(a.Offset, b.Offset) }) {
		t.Fatalf("ReadPartition = %d records (lease %t, registration tombstone %t); want the registration, the lease and the tombstone, in offset order", len(records), sawLease, sawTombstone)
	}
}

// ktStalledTransactionHidesTheOtherRole: roles controller and archiver share
// partition 12 of 16. An open transaction of archiver hides a newer,
// committed lease of controller from every read_committed reader until the
// archiver's transaction ends, by its own abort or by the coordinator at its
// transaction timeout.
func ktStalledTransactionHidesTheOtherRole(t *testing.T, c *kafkatest.Cluster) {
	// The transactional ids controller and archiver are cluster-wide: no
	// other test process may mint them during the stall.
	c.LockTransactionalIDs(t, "archiver", "controller")
	ctx := ktContext(t)
	holder, reader := ktTransport(t, c), ktTransport(t, c)
	name, options := ktStateTopic(t, c, holder, 16)
	controller, archiver := fxRole(t, "controller"), fxRole(t, "archiver")
	tp := ktPartition(t, controller, options)
	if archiverTP := ktPartition(t, archiver, options); tp.Partition != 12 || archiverTP != tp {
		t.Fatalf("controller on %s and archiver on %s; want both on partition 12", tp, archiverTP)
	}

	token, err := holder.AcquireEpoch(ctx, controller)
	if err != nil {
		t.Fatalf("AcquireEpoch(controller): %v", err)
	}
	firstKey, first := ktLeaseRecord(t, controller, "node-1", token, 1)
	if err := holder.WriteLease(ctx, tp, token, firstKey, first); err != nil {
		t.Fatalf("WriteLease(controller): %v", err)
	}

	visible := int64(1) // the GrantedAt of the controller lease that readers see
	for _, how := range []string{"aborted by its holder", "aborted at its transaction timeout"} {
		// The archiver stalls in the middle of a lease transaction.
		stallTimeout := 3 * time.Second
		stalled := c.Client(t, kgo.TransactionalID(archiver.String()), kgo.TransactionTimeout(stallTimeout),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxVersions(ktLeaseVersions()))
		if err := stalled.BeginTransaction(); err != nil {
			t.Fatalf("archiver BeginTransaction: %v", err)
		}
		archiverKey := coordination.EncodeKey(coordination.LeaseKey(archiver))
		if err := stalled.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: int32(tp.Partition), Key: archiverKey, Value: []byte("stalled")}).FirstErr(); err != nil {
			t.Fatalf("archiver produce: %v", err)
		}
		stalledAt := time.Now()

		// The healthy controller renews after the stall began.
		key, renewal := ktLeaseRecord(t, controller, "node-1", token, stalledAt.UnixMilli())
		if err := holder.WriteLease(ctx, tp, token, key, renewal); err != nil {
			t.Fatalf("controller renewal during the stall: %v", err)
		}
		changed, stop := reader.WatchPartition(tp)
		records, err := reader.ReadPartition(ctx, tp)
		if err != nil {
			t.Fatalf("ReadPartition during the stall: %v", err)
		}
		if lease := ktLeaseOf(t, controller, records); lease == nil || lease.GrantedAt != visible {
			t.Fatalf("%s: the controller lease read during the stall = %+v; want the one before the stall (the renewal is hidden)", how, lease)
		}
		ktWaitForOffsets(t, reader, tp, how+": during the stall", func(stable, high int64) bool { return high > stable })

		if how == "aborted by its holder" {
			if err := stalled.EndTransaction(ctx, kgo.TryAbort); err != nil {
				t.Fatalf("archiver abort: %v", err)
			}
		}
		hidden := ktWaitForLease(t, ctx, reader, changed, controller, tp, stalledAt.UnixMilli())
		stop()
		visible = stalledAt.UnixMilli()
		t.Logf("%s: the controller renewal was hidden for %v after the stall began (transaction timeout %v)", how, hidden, stallTimeout)

		if how == "aborted at its transaction timeout" {
			if hidden < stallTimeout/2 {
				t.Fatalf("the renewal became visible %v after the stall began, long before the transaction timeout %v", hidden, stallTimeout)
			}
			if c.Real && hidden > stallTimeout+10*time.Second {
				t.Fatalf("the renewal became visible only %v after the stall began; want the transaction timeout %v plus the abort sweep", hidden, stallTimeout)
			}
			// The stalled archiver is fenced when it wakes: the coordinator
			// bumped its epoch when it aborted the transaction.
			if err := stalled.EndTransaction(ctx, kgo.TryCommit); err == nil {
				t.Fatalf("the archiver committed a transaction that the coordinator aborted at its timeout")
			} else {
				t.Logf("the archiver's commit after the timeout: %v", err)
			}
		}
		ktWaitForOffsets(t, reader, tp, how+": after the stall", func(stable, high int64) bool { return high == stable })
	}
}

// ktWaitForOffsets waits until StableOffsets of the partition satisfies
// want. The offsets come from the reader's latest long poll, so they may be
// one max wait old (1 s with ktLease).
func ktWaitForOffsets(t *testing.T, reader *coordination.KafkaTransport, tp coordination.TopicPartition, what string, want func(stable, high int64) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stable, high, ok := reader.StableOffsets(tp)
		if ok && want(stable, high) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: StableOffsets = %d, %d, %t after 5 s", what, stable, high, ok)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ktWaitForLease waits until the reader sees the controller lease granted
// at grantedAt, and returns how long after grantedAt that was.
func ktWaitForLease(t *testing.T, ctx context.Context, reader *coordination.KafkaTransport, changed <-chan struct{}, role coordination.Role, tp coordination.TopicPartition, grantedAt int64) time.Duration {
	t.Helper()
	for {
		records, err := reader.ReadPartition(ctx, tp)
		if err != nil {
			t.Fatalf("ReadPartition: %v", err)
		}
		if lease := ktLeaseOf(t, role, records); lease != nil && lease.GrantedAt == grantedAt {
			return time.Since(time.UnixMilli(grantedAt))
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		case <-ctx.Done():
			t.Fatalf("the lease of %s granted at %d never became visible: %v", role, grantedAt, ctx.Err())
		}
	}
}

// ktLeaseVersions caps EndTxn at 4 and Produce at 11, as KafkaTransport
// does, so the stalled test client behaves like a transport's producer.
func ktLeaseVersions() *kversion.Versions {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	versions.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	return versions
}

// ktIncrementalReadAndWatch: ReadPartitionFrom returns only what is new, and
// WatchPartition wakes on a new record.
func ktIncrementalReadAndWatch(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	writer, reader := ktTransport(t, c), ktTransport(t, c)
	_, options := ktStateTopic(t, c, writer, 4)
	role := ktRole(t, "watch")
	tp := ktPartition(t, role, options)
	register := func(member string, at int64) {
		t.Helper()
		key := coordination.EncodeKey(coordination.RegistrationKey(role, fxMember(t, member)))
		value := coordination.EncodeRegistration(coordination.Registration{Member: fxMember(t, member), RegisteredAt: at})
		if err := writer.Append(ctx, tp, key, value); err != nil {
			t.Fatalf("Append(%s): %v", member, err)
		}
	}
	register("node-1", 1)
	register("node-2", 2)

	changed, stop := reader.WatchPartition(tp)
	defer stop()
	records, next, err := reader.ReadPartitionFrom(ctx, tp, 0)
	if err != nil || len(records) != 2 {
		t.Fatalf("ReadPartitionFrom(0) = %d records, %d, %v; want the 2 registrations", len(records), next, err)
	}
	ktDrain(changed)

	start := time.Now()
	register("node-3", 3)
	select {
	case <-changed:
		t.Logf("WatchPartition woke %v after the append began", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatalf("WatchPartition did not wake within 10 s of an append")
	}
	records, next2, err := reader.ReadPartitionFrom(ctx, tp, next)
	if err != nil || len(records) != 1 || next2 <= next {
		t.Fatalf("ReadPartitionFrom(%d) = %d records, %d, %v; want the 1 new registration", next, len(records), next2, err)
	}
	state, err := coordination.BuildRoleState(role, records)
	if err != nil || len(state.Roster) != 1 || state.Roster[0].Member.String() != "node-3" {
		t.Fatalf("the new records fold to %+v, %v; want node-3", state, err)
	}

	// A newer record of node-1 supersedes the older one in the view. The
	// read follows the wake-up, as a waiting member's does: ReadPartitionFrom
	// serves the view while the long poll is current, so a record of
	// another transport reaches it with the long poll's answer, which wakes
	// the watch.
	ktDrain(changed)
	register("node-1", 4)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatalf("WatchPartition did not wake within 10 s of the append of node-1")
	}
	records, _, err = reader.ReadPartitionFrom(ctx, tp, 0)
	if err != nil || len(records) != 3 {
		t.Fatalf("ReadPartitionFrom(0) after re-registering node-1 = %d records, %v; want 3, the newest of each key", len(records), err)
	}
	state, _ = coordination.BuildRoleState(role, records)
	if got := ktRoster(state); got != "node-2,node-3,node-1" {
		t.Fatalf("roster = %s; want node-2,node-3,node-1 (a re-registered member ranks last)", got)
	}

	if records, _, err := reader.ReadPartitionFrom(ctx, tp, next2+100); err != nil || len(records) != 3 {
		t.Fatalf("ReadPartitionFrom past the end of the partition = %d records, %v; want the whole view of 3", len(records), err)
	}
	if _, _, err := reader.ReadPartitionFrom(ctx, tp, -1); err == nil {
		t.Fatalf("ReadPartitionFrom(-1) succeeded")
	}
}

// ktGuardedWriteIsAtomic: the records of one guarded write span partitions
// and commit together; a record for a state topic is refused.
func ktGuardedWriteIsAtomic(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	stateTopic, options := ktStateTopic(t, c, transport, 4)
	commands := c.CreateTopic(t, "coord-commands", 2, nil)
	role := ktRole(t, "guarded")
	token, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	records := []coordination.GuardedRecord{
		{Topic: commands, Partition: 0, Key: []byte("valve-1"), Value: []byte("open")},
		{Topic: commands, Partition: 1, Key: []byte("valve-2"), Value: []byte("close")},
		{Topic: commands, Partition: 0, Key: []byte("valve-3"), Value: []byte("open")},
	}
	if err := transport.WriteGuarded(ctx, token, records); err != nil {
		t.Fatalf("WriteGuarded: %v", err)
	}
	if got := ktReadCommitted(t, c, commands, 3); len(got) != 3 {
		t.Fatalf("committed commands = %v; want the 3 of the guarded write", ktValues(got))
	}
	if described, _, _ := transport.DescribeEpoch(ctx, role); described != token {
		t.Fatalf("DescribeEpoch after a guarded write = %s; want the minted %s", described, token)
	}

	// The transport knows its state topic once it used it.
	tp := ktPartition(t, role, options)
	key, value := ktLeaseRecord(t, role, "node-1", token, 1)
	if err := transport.WriteLease(ctx, tp, token, key, value); err != nil {
		t.Fatalf("WriteLease: %v", err)
	}
	for _, refused := range [][]coordination.GuardedRecord{
		{{Topic: stateTopic, Partition: 0, Value: []byte("x")}},
		{{Topic: coordination.StateTopic, Partition: 0, Value: []byte("x")}},
		{{Topic: "", Partition: 0, Value: []byte("x")}},
		{{Topic: commands, Partition: -1, Value: []byte("x")}},
	} {
		if err := transport.WriteGuarded(ctx, token, refused); err == nil || errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("WriteGuarded(%+v) = %v; want a refusal that is not a fence", refused, err)
		}
	}
}

// ktTransientFailureAbortsAndKeepsTheToken: a guarded write that fails for
// a reason other than a fence aborts its transaction, so none of its
// records is visible and the partition's last stable offset moves on, and
// the token keeps writing.
func ktTransientFailureAbortsAndKeepsTheToken(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 4)
	commands := c.CreateTopic(t, "coord-commands", 1, nil)
	role := ktRole(t, "transient")
	tp := ktPartition(t, role, options)
	token, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}

	missing := kafkatest.TopicName("coord-missing")
	start := time.Now()
	err = transport.WriteGuarded(ctx, token, []coordination.GuardedRecord{
		{Topic: commands, Partition: 0, Value: []byte("half of a batch")},
		{Topic: missing, Partition: 0, Value: []byte("to a missing topic")},
	})
	if err == nil || errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("WriteGuarded with a record for a missing topic = %v; want an error that is not a fence", err)
	}
	t.Logf("the failed guarded write returned after %v: %v", time.Since(start), err)

	key, value := ktLeaseRecord(t, role, "node-1", token, 1)
	if err := transport.WriteLease(ctx, tp, token, key, value); err != nil {
		t.Fatalf("WriteLease under the same token after the failure: %v", err)
	}
	if err := transport.WriteGuarded(ctx, token, []coordination.GuardedRecord{{Topic: commands, Partition: 0, Value: []byte("whole")}}); err != nil {
		t.Fatalf("WriteGuarded under the same token after the failure: %v", err)
	}
	if got := ktReadCommitted(t, c, commands, 1); len(got) != 1 || string(got[0].Value) != "whole" {
		t.Fatalf("committed commands = %v; want only the write after the failure", ktValues(got))
	}
	if described, _, _ := transport.DescribeEpoch(ctx, role); described != token {
		t.Fatalf("DescribeEpoch after the failure = %s; want the minted %s", described, token)
	}
}

func ktCloseIsIdempotentAndEndsEveryToken(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 4)
	role := ktRole(t, "close")
	tp := ktPartition(t, role, options)
	token, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	changed, stop := transport.WatchPartition(tp)
	defer stop()
	if _, err := transport.ReadPartition(ctx, tp); err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}
	ktDrain(changed)

	transport.Close()
	transport.Close()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatalf("Close did not wake the watcher")
	}
	key, value := ktLeaseRecord(t, role, "node-1", token, 1)
	ktMustLoseProducer(t, "WriteLease after Close", transport.WriteLease(ctx, tp, token, key, value))
	if _, err := transport.ReadPartition(ctx, tp); err == nil {
		t.Fatalf("ReadPartition after Close succeeded")
	}
	if _, err := transport.AcquireEpoch(ctx, role); err == nil {
		t.Fatalf("AcquireEpoch after Close succeeded")
	}
	if err := transport.Append(ctx, tp, key, value); err == nil {
		t.Fatalf("Append after Close succeeded")
	}
}

// ktReadCommitted reads a whole topic with read_committed isolation until
// it has want records, or for at most 1 s more once it has them all.
func ktReadCommitted(t *testing.T, c *kafkatest.Cluster, topic string, want int) []*kgo.Record {
	t.Helper()
	client := c.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := client.PollFetches(ctx)
		cancel()
		got = append(got, fetches.Records()...)
		if len(got) > want {
			break
		}
		if len(got) == want && time.Until(deadline) > time.Second {
			deadline = time.Now().Add(time.Second) // wait a little for a record too many
		}
	}
	if len(got) != want { // help the diagnosis of the failure that follows
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		admin := c.Admin(t)
		end, err := admin.ListEndOffsets(ctx, topic)
		committed, err2 := admin.ListCommittedOffsets(ctx, topic)
		t.Logf("read %d of %d records of %s; end offsets %v (%v), last stable offsets %v (%v)", len(got), want, topic, end, err, committed, err2)
	}
	return got
}

func ktValues(records []*kgo.Record) []string {
	values := make([]string, len(records))
	for i, r := range records {
		values[i] = string(r.Value)
	}
	return values
}

func ktRoster(state coordination.RoleState) string {
	names := make([]string, len(state.Roster))
	for i, entry := range state.Roster {
		names[i] = entry.Member.String()
	}
	return strings.Join(names, ",")
}

func ktDrain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// ktAcquireEpochTakesOverAnOpenTransaction: a member that died inside a
// transaction leaves it open. The next mint fences it: Kafka's coordinator
// aborts the transaction and answers CONCURRENT_TRANSACTIONS until the abort
// completes, which AcquireEpoch retries (kfake aborts inline and never
// answers it). The dead member's record never becomes visible.
func ktAcquireEpochTakesOverAnOpenTransaction(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	name, options := ktStateTopic(t, c, transport, 4)
	role := ktRole(t, "takeover")
	tp := ktPartition(t, role, options)

	dead := c.Client(t, kgo.TransactionalID(role.String()), kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxVersions(ktLeaseVersions()))
	if err := dead.BeginTransaction(); err != nil {
		t.Fatalf("BeginTransaction: %v", err)
	}
	deadKey := coordination.EncodeKey(coordination.LeaseKey(role))
	if err := dead.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: int32(tp.Partition), Key: deadKey, Value: []byte("dead")}).FirstErr(); err != nil {
		t.Fatalf("produce of the member that dies: %v", err)
	}
	deadID, deadEpoch, _ := dead.ProducerID(ctx)

	start := time.Now()
	token, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch over an open transaction: %v", err)
	}
	t.Logf("AcquireEpoch over an open transaction of %d:%d minted %s in %v", deadID, deadEpoch, token, time.Since(start))
	if c.Real && (token.ProducerID() != deadID || token.ProducerEpoch() <= deadEpoch) {
		t.Fatalf("AcquireEpoch = %s; want a newer epoch of producer id %d than %d", token, deadID, deadEpoch)
	}
	key, value := ktLeaseRecord(t, role, "node-2", token, 5)
	if err := transport.WriteLease(ctx, tp, token, key, value); err != nil {
		t.Fatalf("WriteLease after the takeover: %v", err)
	}
	records, err := transport.ReadPartition(ctx, tp)
	if err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}
	if lease := ktLeaseOf(t, role, records); lease == nil || lease.Token != token || len(records) != 1 {
		t.Fatalf("ReadPartition after the takeover = %d records, lease %+v; want only the new holder's lease", len(records), lease)
	}
	if err := dead.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatalf("the dead member committed after the takeover")
	}
}

// ktMissingACLIsAPermanentError: a member without ACLs gets a clear error at
// once, not a retry until its context ends, and not a fence.
func ktMissingACLIsAPermanentError(t *testing.T, c *kafkatest.Cluster) {
	brokers, options := c.DeniedClient(t)
	transport, err := coordination.NewKafkaTransportWithOptions(ktLease, options, brokers...)
	if err != nil {
		t.Fatalf("NewKafkaTransportWithOptions: %v", err)
	}
	t.Cleanup(transport.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role := ktRole(t, "denied")

	start := time.Now()
	_, err = transport.AcquireEpoch(ctx, role)
	t.Logf("AcquireEpoch without ACLs failed after %v: %v", time.Since(start), err)
	switch {
	case err == nil:
		t.Fatalf("AcquireEpoch without ACLs succeeded")
	case ctx.Err() != nil:
		t.Fatalf("AcquireEpoch without ACLs retried until its context ended: %v", err)
	case errors.Is(err, coordination.ErrFenced) || !strings.Contains(err.Error(), "not authorized"):
		t.Fatalf("AcquireEpoch without ACLs = %v; want a not-authorized error that is no fence", err)
	}
	if _, _, err := transport.DescribeEpoch(ctx, role); err == nil || !strings.Contains(err.Error(), "not authorized") {
		t.Fatalf("DescribeEpoch without ACLs = %v; want a not-authorized error", err)
	}
	tp := coordination.TopicPartition{Topic: kafkatest.TopicName("coord-denied"), Partition: 0}
	key := coordination.EncodeKey(coordination.RegistrationKey(role, fxMember(t, "node-1")))
	if err := transport.Append(ctx, tp, key, []byte("x")); err == nil || !strings.Contains(err.Error(), "not authorized") {
		t.Fatalf("Append without ACLs = %v; want a not-authorized error", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the calls without ACLs took the whole context: %v", ctx.Err())
	}
}
