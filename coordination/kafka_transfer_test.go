package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The suite of Leadership.TransferTo (issue 31) over KafkaTransport, with
// real clocks: on kfake in every plain `go test`, on the single broker of
// KRABKA_KAFKA_BROKERS and on the 3-node cluster of
// KRABKA_KAFKA_CLUSTER_BROKERS (each fails under CI without its broker).
// The helpers carry the kx prefix; the timings are logged, and asserted
// only as the bound of the transfer.

func TestKafkaTransferFake(t *testing.T) {
	runKafkaTransferSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Fake(t) })
}

func TestKafkaTransferKafka(t *testing.T) {
	kafkatest.Kafka(t)
	runKafkaTransferSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Kafka(t) })
}

func TestKafkaTransferCluster(t *testing.T) {
	kafkatest.KafkaCluster(t)
	runKafkaTransferSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.KafkaCluster(t) })
}

func runKafkaTransferSuite(t *testing.T, cluster func(*testing.T) *kafkatest.Cluster) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, *kafkatest.Cluster)
	}{
		{"ToALiveMember", kxLive},
		{"NotTakenWithinTheBound", kxNotTaken},
		{"RefusedAtOnce", kxRefused},
		{"ElectorSuccessorOnShutdown", kxElectorSuccessor},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, cluster(t)) })
	}
}

// kxLease is the suite's lease: 6 s, renew 2 s, stagger 1 s; the default
// transfer bound is then max(3 × 1 s, 2 s + 2 × 250 ms) = 3 s.
func kxLease(t *testing.T) coordination.LeaseConfig {
	return klConfig(t, 6*time.Second, 2*time.Second, time.Second)
}

const kxBound = 3 * time.Second

// kxNewEnv is klNewEnv with the cluster's replication factor (3 and
// min.insync.replicas 2 on the 3-node cluster).
func kxNewEnv(t *testing.T, c *kafkatest.Cluster, extra ...coordination.Option) *klEnv {
	t.Helper()
	e := &klEnv{c: c, lease: kxLease(t)}
	e.observer = e.transport(t)
	e.topic = kafkatest.TopicName("coord-transfer-state")
	e.options = []coordination.Option{coordination.WithTopic(e.topic), coordination.WithPartitions(16)}
	c.DeleteTopicAtCleanup(t, e.topic)
	replicas, insync := 1, 1
	if c.ReplicationFactor > 1 {
		replicas, insync = c.ReplicationFactor, 2
	}
	if err := e.observer.CreateStateTopic(ktContext(t), replicas, insync, e.options...); err != nil {
		t.Fatalf("CreateStateTopic(%s): %v", e.topic, err)
	}
	e.options = append(e.options, coordination.WithLeaseConfig(e.lease), coordination.WithPollInterval(klPoll))
	e.options = append(e.options, extra...)
	return e
}

// kxLeaseTokens returns the tokens of the role's lease records on the
// partition, in order, each once: the leadership changes of the role.
func kxLeaseTokens(t *testing.T, e *klEnv, role coordination.Role) []coordination.FencingToken {
	t.Helper()
	records, err := e.observer.ReadPartition(ktContext(t), ktPartition(t, role, e.options))
	if err != nil {
		t.Fatal(err)
	}
	leaseKey := string(coordination.EncodeKey(coordination.LeaseKey(role)))
	var tokens []coordination.FencingToken
	for _, r := range records {
		if string(r.Key) != leaseKey || coordination.IsTombstone(r.Value) {
			continue
		}
		lease, err := coordination.DecodeLease(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if len(tokens) == 0 || tokens[len(tokens)-1] != lease.Token {
			tokens = append(tokens, lease.Token)
		}
	}
	return tokens
}

// kxLive: node-a hands the role to node-c, the standby of rank 1 behind
// node-b. One leadership change, node-c's token fences node-a (a write
// under node-a's token is refused as fenced), node-b never takes the role,
// and node-a ends with ErrTransferred. The handover after node-c's Resign
// to node-b is logged beside it, for comparison.
func kxLive(t *testing.T, c *kafkatest.Cluster) {
	e := kxNewEnv(t, c)
	ctx := ktContext(t)
	role := ktRole(t, "transfer")
	a, b, cc := e.member(t, "node-a"), e.member(t, "node-b"), e.member(t, "node-c")
	holder := e.campaign(t, a, role, "node-a").await(t, 30*time.Second)
	first := e.campaign(t, b, role, "node-b")
	e.waitRosterHeld(t, role, "node-a,node-b", "node-a")
	target := e.campaign(t, cc, role, "node-c")
	e.waitRosterHeld(t, role, "node-a,node-b,node-c", "node-a")

	start := time.Now()
	if err := holder.TransferTo(ctx, fxMember(t, "node-c")); err != nil {
		t.Fatalf("TransferTo(node-c) = %v", err)
	}
	took := time.Since(start)
	successor := target.await(t, 10*time.Second)
	t.Logf("%s: TransferTo returned in %v; node-c's AcquireLeadership returned %v after the call began, its lease granted %d ms after the offer's",
		c.Name, took, target.returnedAt.Sub(start), successor.Lease().GrantedAt-kxOfferGrantedAt(t, e, role, "node-c"))
	klEnded(t, "node-a", holder, coordination.ErrTransferred)
	if successor.Token() == holder.Token() || (c.Real && !successor.Token().Supersedes(holder.Token())) {
		t.Fatalf("node-c holds %s after node-a's %s", successor.Token(), holder.Token())
	}
	if status := e.describe(t, role); !status.Authoritative(successor.Token()) {
		t.Fatalf("DescribeLeadership = %v, want node-c's %s", status, successor.Token())
	}
	key, value := ktLeaseRecord(t, role, "node-a", holder.Token(), time.Now().UnixMilli())
	if err := a.WriteLease(ctx, ktPartition(t, role, e.options), holder.Token(), key, value); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("a write under node-a's token after the transfer = %v, want ErrFenced", err)
	}
	if first.finished() {
		t.Fatalf("node-b's campaign returned (%v) during the transfer", first.err)
	}
	if tokens := kxLeaseTokens(t, e, role); len(tokens) != 2 || tokens[0] != holder.Token() || tokens[1] != successor.Token() {
		t.Fatalf("the lease records carry tokens %v, want node-a's then node-c's: one leadership change", tokens)
	}
	e.waitRosterHeld(t, role, "node-b,node-c", "node-c")

	start = time.Now()
	if err := successor.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	first.await(t, 10*time.Second)
	t.Logf("%s: for comparison, the handover after Resign: node-b's AcquireLeadership returned %v after Resign began", c.Name, first.returnedAt.Sub(start))
}

// kxNotTaken: the named member is registered and never takes the role.
// The transfer returns TransferNotTaken at its bound, the holder renews
// again, the coordinator's epoch is unchanged (DescribeLeadership names the
// holder's token), and the standby never challenges. A second transfer
// meanwhile is TransferBusy; a transfer whose context ends first returns
// with the context's error.
func kxNotTaken(t *testing.T, c *kafkatest.Cluster) {
	e := kxNewEnv(t, c)
	ctx := ktContext(t)
	role := ktRole(t, "transfer-ghost")
	a, b := e.member(t, "node-a"), e.member(t, "node-b")
	holder := e.campaign(t, a, role, "node-a").await(t, 30*time.Second)
	standby := e.campaign(t, b, role, "node-b")
	e.waitRosterHeld(t, role, "node-a,node-b", "node-a")
	ghost := fxMember(t, "node-ghost")
	registration := coordination.EncodeRegistration(coordination.Registration{Member: ghost, RegisteredAt: time.Now().UnixMilli()})
	if err := e.observer.Append(ctx, ktPartition(t, role, e.options), coordination.EncodeKey(coordination.RegistrationKey(role, ghost)), registration); err != nil {
		t.Fatal(err)
	}
	e.waitRosterHeld(t, role, "node-a,node-b,node-ghost", "node-a")

	commands := c.CreateTopic(t, "coord-transfer-commands", 1, nil)
	var wg sync.WaitGroup
	var busy, written error
	var writtenAfter time.Duration
	start := time.Now()
	wg.Go(func() {
		time.Sleep(500 * time.Millisecond)
		busy = holder.TransferTo(ctx, fxMember(t, "node-b"))
	})
	wg.Go(func() {
		time.Sleep(time.Second) // the offer stands: a guarded write goes on
		written = holder.Write(ctx, coordination.GuardedRecord{Topic: commands, Value: []byte("during the transfer")})
		writtenAfter = time.Since(start)
	})
	err := holder.TransferTo(ctx, ghost)
	took := time.Since(start)
	wg.Wait()
	if written != nil || writtenAfter >= took {
		t.Fatalf("a guarded write during the transfer returned %v after %v, TransferTo after %v: want it committed before the transfer's end", written, writtenAfter, took)
	}
	t.Logf("%s: a guarded write begun 1 s into the transfer committed %v after it began", c.Name, writtenAfter-time.Second)
	var te *coordination.TransferError
	if !errors.As(err, &te) || te.Fault != coordination.TransferNotTaken {
		t.Fatalf("TransferTo(ghost) = %v, want TransferNotTaken", err)
	}
	if !errors.As(busy, &te) || te.Fault != coordination.TransferBusy {
		t.Fatalf("the concurrent TransferTo = %v, want TransferBusy", busy)
	}
	t.Logf("%s: TransferTo(ghost) gave up after %v (bound %v): %v", c.Name, took, kxBound, err)
	if took < kxBound || took > kxBound+3*time.Second {
		t.Fatalf("TransferTo(ghost) returned after %v, want the bound %v plus the take-back", took, kxBound)
	}
	klAlive(t, "node-a", holder)
	time.Sleep(e.lease.RenewInterval() / 4) // a renewal held back by the transfer would land now
	if after := kxLeasesAfterOffer(t, e, role, ghost); len(after) != 1 || after[0].Member.String() != "node-a" || after[0].Token != holder.Token() {
		t.Fatalf("the lease records after the offer are %+v; want one, node-a's take-back: no renewal during the transfer, none right after it", after)
	}
	if err := holder.Renew(ctx); err != nil {
		t.Fatalf("Renew after the transfer that was not taken: %v", err)
	}
	if status := e.describe(t, role); !status.Authoritative(holder.Token()) {
		t.Fatalf("DescribeLeadership = %v, want node-a's %s: no epoch used", status, holder.Token())
	}

	cancelled, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start = time.Now()
	err = holder.TransferTo(cancelled, ghost)
	if !errors.As(err, &te) || te.Fault != coordination.TransferNotTaken || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TransferTo with a context of 1 s = %v, want TransferNotTaken wrapping its deadline", err)
	}
	t.Logf("%s: TransferTo with a context of 1 s returned after %v", c.Name, time.Since(start))
	time.Sleep(3 * e.lease.RenewInterval()) // past the offer's deadline had it stood
	klAlive(t, "node-a", holder)
	if standby.finished() {
		t.Fatalf("node-b's campaign returned (%v): a standby challenged during a transfer", standby.err)
	}
	if status := e.describe(t, role); !status.Authoritative(holder.Token()) {
		t.Fatalf("DescribeLeadership = %v, want node-a's %s", status, holder.Token())
	}
	if tokens := kxLeaseTokens(t, e, role); !slices.Equal(tokens, []coordination.FencingToken{holder.Token()}) {
		t.Fatalf("the lease records carry tokens %v, want node-a's only", tokens)
	}
}

// kxRefused: a member not in the roster, the holder itself, and (with
// heartbeats) a standby whose heartbeats stopped are refused at once, and
// the holder keeps the role.
func kxRefused(t *testing.T, c *kafkatest.Cluster) {
	beats := coordination.WithHeartbeatInterval(500 * time.Millisecond)
	e := kxNewEnv(t, c, beats)
	ctx := ktContext(t)
	role := ktRole(t, "transfer-refused")
	a, b := e.member(t, "node-a"), e.member(t, "node-b")
	holder := e.campaign(t, a, role, "node-a").await(t, 30*time.Second)
	standby := e.campaign(t, b, role, "node-b")
	e.waitRosterHeld(t, role, "node-a,node-b", "node-a")
	for _, want := range []struct {
		to    string
		fault coordination.TransferFault
	}{{"node-z", coordination.TransferNotMember}, {"node-a", coordination.TransferToSelf}} {
		start := time.Now()
		err := holder.TransferTo(ctx, fxMember(t, want.to))
		var te *coordination.TransferError
		if !errors.As(err, &te) || te.Fault != want.fault || time.Since(start) > 2*time.Second {
			t.Fatalf("TransferTo(%s) = %v after %v, want %s at once", want.to, err, time.Since(start), want.fault)
		}
	}
	// node-b's first heartbeat lands before it dies: the roster shows its
	// registration before node-b reads it back and writes that heartbeat,
	// and an entry that never heartbeated never lapses (RosterEntry.LapsedAt),
	// so a node-b closed in that window (a loaded machine) keeps its rank.
	klEventually(t, 20*time.Second, "node-b's first heartbeat", func() (bool, string) {
		entry, ok := e.state(t, role).Entry(fxMember(t, "node-b"))
		return ok && entry.LastSeen != 0, fmt.Sprintf("%+v (present %v)", entry, ok)
	})
	// node-b dies: its campaign ends without a deregistration (its
	// transport closes first), and its heartbeats stop.
	b.Close()
	standby.cancel()
	<-standby.done
	withBeats, err := e.lease.WithHeartbeatInterval(500 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	klEventually(t, 20*time.Second, "node-b's rank lapses", func() (bool, string) {
		entry, ok := e.state(t, role).Entry(fxMember(t, "node-b"))
		now := time.Now().UnixMilli()
		return ok && entry.LapsedAt(now, withBeats), fmt.Sprintf("%+v (present %v) at %d, roster lapse %v", entry, ok, now, withBeats.RosterLapse())
	})
	err = holder.TransferTo(ctx, fxMember(t, "node-b"))
	var te *coordination.TransferError
	if !errors.As(err, &te) || te.Fault != coordination.TransferMemberDead {
		t.Fatalf("TransferTo(dead node-b) = %v, want TransferMemberDead", err)
	}
	klAlive(t, "node-a", holder)
	if status := e.describe(t, role); !status.Authoritative(holder.Token()) {
		t.Fatalf("DescribeLeadership = %v, want node-a's %s", status, holder.Token())
	}
}

// kxOfferGrantedAt returns the GrantedAt of the newest lease record that
// names member under another token than the newest lease's: the offer.
func kxOfferGrantedAt(t *testing.T, e *klEnv, role coordination.Role, member string) int64 {
	t.Helper()
	records, err := e.observer.ReadPartition(ktContext(t), ktPartition(t, role, e.options))
	if err != nil {
		t.Fatal(err)
	}
	leaseKey := string(coordination.EncodeKey(coordination.LeaseKey(role)))
	var leases []coordination.Lease
	for _, r := range records {
		if string(r.Key) == leaseKey && !coordination.IsTombstone(r.Value) {
			lease, err := coordination.DecodeLease(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, lease)
		}
	}
	for i := len(leases) - 1; i >= 0; i-- {
		if leases[i].Member.String() == member && leases[i].Token != leases[len(leases)-1].Token {
			return leases[i].GrantedAt
		}
	}
	t.Fatalf("no offer to %s among the lease records", member)
	return 0
}

// kxLeasesAfterOffer returns the role's lease records after the newest
// offer to member (a lease that names it), in order.
func kxLeasesAfterOffer(t *testing.T, e *klEnv, role coordination.Role, member coordination.MemberID) []coordination.Lease {
	t.Helper()
	records, err := e.observer.ReadPartition(ktContext(t), ktPartition(t, role, e.options))
	if err != nil {
		t.Fatal(err)
	}
	leaseKey := string(coordination.EncodeKey(coordination.LeaseKey(role)))
	var after []coordination.Lease
	for _, r := range records {
		if string(r.Key) != leaseKey || coordination.IsTombstone(r.Value) {
			continue
		}
		lease, err := coordination.DecodeLease(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if lease.Member == member {
			after = after[:0]
			continue
		}
		after = append(after, lease)
	}
	return after
}

// kxElectorSuccessor: an Elector with WithSuccessor, stopped while it
// leads, hands the role to the member its chooser names (the standby of
// rank 1) instead of resigning to the first; Run returns nil.
func kxElectorSuccessor(t *testing.T, c *kafkatest.Cluster) {
	e := kxNewEnv(t, c)
	role := ktRole(t, "transfer-elector")
	a, b, cc := e.member(t, "node-a"), e.member(t, "node-b"), e.member(t, "node-c")
	started := make(chan *coordination.Leadership, 1)
	choose := coordination.WithSuccessor(func(roster []coordination.RosterEntry) coordination.MemberID {
		return roster[len(roster)-1].Member // the last standby
	})
	elector, err := coordination.NewElector(a, role, fxMember(t, "node-a"), coordination.ElectorCallbacks{
		OnStartedLeading: func(ctx context.Context, l *coordination.Leadership) {
			started <- l
			<-ctx.Done()
		},
	}, append(slices.Clone(e.options), choose)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- elector.Run(ctx) }()
	var holder *coordination.Leadership
	select {
	case holder = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the elector did not lead within 30 s")
	}
	first := e.campaign(t, b, role, "node-b")
	e.waitRosterHeld(t, role, "node-a,node-b", "node-a")
	target := e.campaign(t, cc, role, "node-c")
	e.waitRosterHeld(t, role, "node-a,node-b,node-c", "node-a")

	stop := time.Now()
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(kxBound + 10*time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	successor := target.await(t, 10*time.Second)
	t.Logf("%s: the stopped elector's successor node-c took the role %v after the stop", c.Name, target.returnedAt.Sub(stop))
	klEnded(t, "node-a", holder, coordination.ErrTransferred)
	if status := e.describe(t, role); !status.Authoritative(successor.Token()) {
		t.Fatalf("DescribeLeadership = %v, want node-c's %s", status, successor.Token())
	}
	if first.finished() {
		t.Fatalf("node-b's campaign returned (%v): the first standby took the role", first.err)
	}
}
