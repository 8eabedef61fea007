package coordination_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The proof of issue 9 on the production shape: the 3-node KRaft cluster of
// scripts/kafka-cluster.sh (replication factor 3, min.insync.replicas 2,
// Kafka's default failure detection: a silent broker is fenced after
// broker.session.timeout.ms = 9 s). Each test holds the cluster's node lock
// (kafkatest.Nodes), kills, stops or restarts nodes, and leaves every node
// running and every partition with its full ISR when it ends.
//
// Observed before the fixes of issue 9, on such a cluster with lease 6 s /
// renew 2 s: every unplanned broker fault cost 2-5 leadership changes, and
// some writes hung for 30 s. The tests assert behaviours: counts of
// leadership changes, which token is authoritative, which errors the calls
// return, and the bound on a call that the package doc promises; no
// latency figure (those come from cmd/krabka-chaos, docs/safety.md).

// kcShortLease is the lease of issue 9's observations, shorter than the
// cluster's failure detection (MinLeaseForFailureDetection(9 s, 2 s) =
// 13 s): a broker fault may cost one leadership change, never more.
func kcShortLease(t *testing.T) coordination.LeaseConfig {
	return klConfig(t, 6*time.Second, 2*time.Second, time.Second)
}

// kcEnv is one scenario on the cluster: its nodes, a state topic of 16
// partitions (replication factor 3, min.insync.replicas 2) with a random
// name, a commands topic of 3 partitions, and an observer transport.
type kcEnv struct {
	c        *kafkatest.Cluster
	nodes    *kafkatest.Nodes
	topic    string
	commands string
	options  []coordination.Option // the state topic, its partitions, the poll interval
	observer *coordination.KafkaTransport
}

func kcNewEnv(t *testing.T) *kcEnv {
	t.Helper()
	c := kafkatest.KafkaCluster(t)
	e := &kcEnv{c: c, nodes: c.Nodes(t)}
	e.observer = e.transport(t, coordination.DefaultLeaseConfig())
	e.topic = kafkatest.TopicName("coord-cluster-state")
	e.options = []coordination.Option{coordination.WithTopic(e.topic), coordination.WithPartitions(16), coordination.WithPollInterval(klPoll)}
	c.DeleteTopicAtCleanup(t, e.topic)
	if err := e.observer.CreateStateTopic(ktContext(t), 3, 2, e.options...); err != nil {
		t.Fatalf("CreateStateTopic(%s, replication factor 3, min.insync.replicas 2): %v", e.topic, err)
	}
	e.commands = c.CreateTopic(t, "coord-cluster-commands", 3, nil)
	return e
}

// transport opens the KafkaTransport of one member process with the lease
// policy (the transaction timeout of its mints), closed when the test ends.
func (e *kcEnv) transport(t *testing.T, lease coordination.LeaseConfig) *coordination.KafkaTransport {
	t.Helper()
	var options []kgo.Opt
	if os.Getenv("KRABKA_TEST_KGO_WARN") != "" { // franz-go's warnings and errors, to stderr
		options = append(options, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, func() string { return time.Now().Format("15:04:05.000 ") })))
	}
	transport, err := coordination.NewKafkaTransportWithOptions(lease, options, e.c.Brokers...)
	if err != nil {
		t.Fatalf("NewKafkaTransport: %v", err)
	}
	t.Cleanup(transport.Close)
	return transport
}

// kcPlaces is where a role's two Kafka parts live: the node that is the
// transaction coordinator of its transactional id, and the node that leads
// its partition of the state topic.
type kcPlaces struct{ coordinator, stateLeader int32 }

// roles returns count roles with random names whose places satisfy want,
// out of a few hundred candidates asked in one FindCoordinator request.
func (e *kcEnv) roles(t *testing.T, prefix string, count int, want func(kcPlaces) bool) []coordination.Role {
	t.Helper()
	for range 5 {
		candidates := make([]coordination.Role, 300)
		ids := make([]string, len(candidates))
		for i := range candidates {
			candidates[i] = ktRole(t, prefix)
			ids[i] = candidates[i].String() // the role's transactional id
		}
		coordinators := e.nodes.TransactionCoordinators(t, ids...)
		leaders := map[int]int32{}
		var found []coordination.Role
		for _, role := range candidates {
			tp := ktPartition(t, role, e.options)
			leader, ok := leaders[tp.Partition]
			if !ok {
				leader = e.nodes.PartitionLeader(t, tp.Topic, int32(tp.Partition))
				leaders[tp.Partition] = leader
			}
			if want(kcPlaces{coordinator: coordinators[role.String()], stateLeader: leader}) {
				found = append(found, role)
				if len(found) == count {
					return found
				}
			}
		}
	}
	t.Fatalf("no %d roles of %d candidates have the places the test needs", count, 5*300)
	return nil
}

// commandPartition returns a partition of the commands topic that a node
// other than the ones given leads.
func (e *kcEnv) commandPartition(t *testing.T, not ...int32) int {
	t.Helper()
	for p := range int32(3) {
		if !slices.Contains(not, e.nodes.PartitionLeader(t, e.commands, p)) {
			return int(p)
		}
	}
	t.Fatalf("every partition of %s is led by one of the nodes %v", e.commands, not)
	return 0
}

// kcElection runs the members of one role as a user runs them: each member
// process campaigns, serves while it leads, and campaigns again (rejoining
// at the tail of the roster) when its leadership ends. It records every
// leadership won, in order.
type kcElection struct {
	role   coordination.Role
	mu     sync.Mutex
	terms  []*kcTerm
	won    chan struct{} // signalled on every leadership won
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// kcTerm is one leadership won.
type kcTerm struct {
	member     string
	transport  *coordination.KafkaTransport
	leadership *coordination.Leadership
}

// elect starts the members of the role in order, the next one once the
// first leads, so that the first member holds the role. The members stop,
// and the holder resigns, when the test ends.
func (e *kcEnv) elect(t *testing.T, role coordination.Role, lease coordination.LeaseConfig, members ...string) *kcElection {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	el := &kcElection{role: role, won: make(chan struct{}, 64), cancel: cancel}
	t.Cleanup(func() { cancel(); el.wg.Wait() })
	for i, name := range members {
		id := fxMember(t, name)
		transport := e.transport(t, lease)
		logger := klNewLog(t).logger().With(slog.String("member", name), slog.String("role", role.String()))
		options := append(slices.Clone(e.options), coordination.WithLeaseConfig(lease), coordination.WithLogger(logger))
		el.wg.Add(1)
		go func() {
			defer el.wg.Done()
			for ctx.Err() == nil {
				leadership, err := coordination.AcquireLeadership(ctx, transport, role, id, options...)
				if err != nil {
					if ctx.Err() == nil {
						logger.Warn("test: AcquireLeadership failed; campaigning again", slog.Any("error", err))
						select {
						case <-ctx.Done():
						case <-time.After(250 * time.Millisecond):
						}
					}
					continue
				}
				el.mu.Lock()
				el.terms = append(el.terms, &kcTerm{member: name, transport: transport, leadership: leadership})
				el.mu.Unlock()
				el.won <- struct{}{}
				select {
				case <-leadership.Done():
					logger.Info("test: the leadership ended; campaigning again", slog.Any("error", leadership.Err()))
				case <-ctx.Done():
					resign, stop := context.WithTimeout(context.Background(), 10*time.Second)
					_ = leadership.Resign(resign)
					stop()
				}
			}
		}()
		if i == 0 {
			select {
			case <-el.won:
			case <-time.After(60 * time.Second):
				t.Fatalf("%s: %s did not take the role within 60 s", role, name)
			}
		}
	}
	return el
}

// snapshot returns the leaderships won so far.
func (el *kcElection) snapshot() []*kcTerm {
	el.mu.Lock()
	defer el.mu.Unlock()
	return slices.Clone(el.terms)
}

// holder returns the latest leadership won, once it holds: it waits up to
// 30 s for a member whose leadership ended to win again, and fails the
// test if none does. The counts of changes are asserted apart.
func (el *kcElection) holder(t *testing.T) *kcTerm {
	t.Helper()
	var last *kcTerm
	klEventually(t, 30*time.Second, "a live leadership of "+el.role.String(), func() (bool, string) {
		terms := el.snapshot()
		last = terms[len(terms)-1]
		return last.leadership.Err() == nil, el.history()
	})
	return last
}

// history describes the leaderships won, for a failure message.
func (el *kcElection) history() string {
	var b strings.Builder
	for i, term := range el.snapshot() {
		fmt.Fprintf(&b, "\n  %d. %s with %s", i+1, term.member, term.leadership.Token())
		if err := term.leadership.Err(); err != nil {
			fmt.Fprintf(&b, ", ended: %v", err)
		}
	}
	return b.String()
}

// noChange asserts that the first leadership still holds and no other was
// won: zero leadership changes.
func (el *kcElection) noChange(t *testing.T, what string) {
	t.Helper()
	terms := el.snapshot()
	if len(terms) != 1 || terms[0].leadership.Err() != nil {
		t.Fatalf("%s: %d leadership changes of %s; want 0:%s", what, len(terms)-1, el.role, el.history())
	}
}

// kcFranzUnknownBroker recognises a leadership lost to a race in franz-go
// v1.22.3 during a graceful restart: while a node shuts down, Kafka's
// metadata already omits it but a FindCoordinator answer still names it as
// the transaction coordinator; the sharded AddPartitionsToTxn of a
// renewal then fails to find the broker ("unknown broker", not retried:
// kgo/client.go, "failure to load a broker is a failure to issue a
// request"), the sink fails the producer ID with that error (kgo/sink.go,
// "fatal AddPartitionsToTxn error"), and the next BeginTransaction reports
// it as fatal (kgo/txn.go, maybeRecoverProducerID: neither a Kafka error
// nor a dial error). No epoch survives that in franz-go, so the transport
// rightly ends the epoch with ErrProducerLost; the member then takes the
// role back at once with the next epoch of its producer id. The fix
// belongs in franz-go (retry errUnknownBroker like errUnknownCoordinator).
func kcFranzUnknownBroker(err error) bool {
	return errors.Is(err, coordination.ErrProducerLost) &&
		strings.Contains(err.Error(), "producer ID has a fatal, unrecoverable error, err: unknown broker")
}

// noFailover asserts that the role never left its first member and that
// the member's leadership holds. Every leadership of it but the last may
// have ended only by the franz-go race of kcFranzUnknownBroker, which is
// logged; any other end, any other member's leadership, fails the test.
func (el *kcElection) noFailover(t *testing.T, what string) {
	t.Helper()
	terms := el.snapshot()
	for i, term := range terms {
		err := term.leadership.Err()
		switch {
		case term.member != terms[0].member:
			t.Fatalf("%s: the role %s moved from %s to %s; want no failover:%s", what, el.role, terms[0].member, term.member, el.history())
		case i == len(terms)-1 && err != nil:
			t.Fatalf("%s: the leadership of %s ended: %v%s", what, el.role, err, el.history())
		case i < len(terms)-1 && !kcFranzUnknownBroker(err):
			t.Fatalf("%s: %d leadership changes of %s; want 0:%s", what, len(terms)-1, el.role, el.history())
		case i < len(terms)-1:
			t.Logf("%s: %s lost %s to franz-go's unknown-broker race and took it back with %s (see kcFranzUnknownBroker): %v",
				what, term.member, term.leadership.Token(), terms[i+1].leadership.Token(), err)
		}
	}
}

// write writes one command under the holder's leadership, with a generous
// context, and fails the test if the write fails.
func (e *kcEnv) write(t *testing.T, what string, term *kcTerm, partition int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	record := coordination.GuardedRecord{Topic: e.commands, Partition: partition, Value: []byte(what)}
	if err := term.leadership.Write(ctx, record); err != nil {
		t.Fatalf("%s: Write by %s: %v", what, term.member, err)
	}
}

// acquire takes the role for one member, with the default lease, and
// returns the leadership and the member's transport.
func (e *kcEnv) acquire(t *testing.T, role coordination.Role, member string) (*coordination.Leadership, *coordination.KafkaTransport) {
	t.Helper()
	transport := e.transport(t, coordination.DefaultLeaseConfig())
	logger := klNewLog(t).logger().With(slog.String("member", member), slog.String("role", role.String()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leadership, err := coordination.AcquireLeadership(ctx, transport, role, fxMember(t, member), append(slices.Clone(e.options), coordination.WithLogger(logger))...)
	if err != nil {
		t.Fatalf("%s: AcquireLeadership of %s: %v", member, role, err)
	}
	t.Cleanup(func() {
		resign, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = leadership.Resign(resign)
	})
	return leadership, transport
}

// kcOverrun is the most that a call may run past its context on the
// cluster: issue 9's bound. The package doc's own bounds fit inside it: a
// write or resignation in flight returns 250 ms after its context ends, a
// resignation whose context had already ended takes 600 ms, and
// KafkaTransport.Close returns within 500 ms; the rest is the scheduling
// of a loaded test machine.
const kcOverrun = time.Second

// TestKafkaClusterBrokerCrash kills -9 one node of the cluster, not the
// active controller, that is the transaction coordinator of several roles
// and the leader of another role's partition of the state topic, while a
// member leads each role and a standby watches. Kafka fences the dead
// broker after broker.session.timeout.ms (9 s by default) and moves its
// partitions, __transaction_state's included, to the two survivors. Each
// subtest is the regression test of one story of issue 9.
func TestKafkaClusterBrokerCrash(t *testing.T) {
	e := kcNewEnv(t)
	victim := kafkatest.Others(e.nodes.ActiveController(t))[0]
	coordinatedByVictim := func(p kcPlaces) bool { return p.coordinator == victim && p.stateLeader != victim }
	coordinatorRoles := e.roles(t, "cluster-crash-coordinator", 5, coordinatedByVictim)
	defaultRole, shortRole, writeRole, resignRole, closeRole := coordinatorRoles[0], coordinatorRoles[1], coordinatorRoles[2], coordinatorRoles[3], coordinatorRoles[4]
	stateRole := e.roles(t, "cluster-crash-state", 1, func(p kcPlaces) bool { return p.coordinator != victim && p.stateLeader == victim })[0]
	partition := e.commandPartition(t, victim) // the commands are led by a survivor
	t.Logf("victim: node %d (the active controller is another node)", victim)

	defaultLease := e.elect(t, defaultRole, coordination.DefaultLeaseConfig(), "node-1", "node-2")
	shortLease := e.elect(t, shortRole, kcShortLease(t), "node-1", "node-2")
	stateLeader := e.elect(t, stateRole, coordination.DefaultLeaseConfig(), "node-1", "node-2")
	writing, _ := e.acquire(t, writeRole, "writer")
	resigning, _ := e.acquire(t, resignRole, "resigner")
	_, closing := e.acquire(t, closeRole, "closer")
	e.write(t, "before the crash", defaultLease.holder(t), partition)
	e.write(t, "before the crash", stateLeader.holder(t), partition)

	e.nodes.Kill(t, victim)
	t.Logf("%s: node %d killed", time.Now().Format("15:04:05.000"), victim)

	// (d) Issue 9, item 4: "Leadership.Write with a 1-5 s context returned
	// after 20-30 s (a Produce on the wire, a commit stuck behind
	// COORDINATOR_NOT_AVAILABLE); Resign with a 1 s context took 15 s;
	// Close 16 s." While the coordinator's broker is dead, a Write and a
	// Resign with a 2 s context return within their context plus the
	// package's bound, and KafkaTransport.Close within that bound. A dead
	// broker is no fence: the write's error never says ErrFenced.
	t.Run("BoundedCallsWhileTheCoordinatorIsDead", func(t *testing.T) {
		const budget = 2 * time.Second
		var wg sync.WaitGroup
		var writeErr, resignErr error
		var writeTook, resignTook, closeTook time.Duration
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			writeTook = klTimed(func() {
				writeErr = writing.Write(ctx, coordination.GuardedRecord{Topic: e.commands, Partition: partition, Value: []byte("coordinator dead")})
			})
		})
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			resignTook = klTimed(func() { resignErr = resigning.Resign(ctx) })
		})
		wg.Go(func() { closeTook = klTimed(closing.Close) })
		wg.Wait()
		t.Logf("with the coordinator dead: Write (2 s context) returned after %v: %v; Resign (2 s context) after %v: %v; Close after %v",
			writeTook, writeErr, resignTook, resignErr, closeTook)
		if writeTook > budget+kcOverrun {
			t.Errorf("Write with a 2 s context returned after %v; want at most %v", writeTook, budget+kcOverrun)
		}
		if writeErr == nil {
			t.Errorf("Write committed while the transaction coordinator of %s was dead", writeRole)
		} else if errors.Is(writeErr, coordination.ErrFenced) {
			t.Errorf("Write with the coordinator dead = %v; a dead broker is no fence", writeErr)
		}
		if resignTook > budget+kcOverrun {
			t.Errorf("Resign with a 2 s context returned after %v; want at most %v", resignTook, budget+kcOverrun)
		}
		select {
		case <-resigning.Done():
		default:
			t.Errorf("the leadership holds after Resign returned (%v)", resignErr)
		}
		if closeTook > kcOverrun {
			t.Errorf("KafkaTransport.Close took %v; want at most %v", closeTook, kcOverrun)
		}
	})

	// Recovery: the survivors take over the coordinator of the roles and
	// the leadership of the state partition.
	klEventually(t, 60*time.Second, "the transaction coordinator of "+defaultRole.String()+" moves off the dead node", func() (bool, string) {
		moved := e.nodes.TransactionCoordinator(t, defaultRole.String())
		return moved != victim, fmt.Sprintf("coordinator node %d", moved)
	})
	tp := ktPartition(t, stateRole, e.options)
	klEventually(t, 60*time.Second, "the state partition of "+stateRole.String()+" gets a leader other than the dead node", func() (bool, string) {
		moved := e.nodes.PartitionLeader(t, tp.Topic, int32(tp.Partition))
		return moved != victim, fmt.Sprintf("leader node %d", moved)
	})

	// (a) Issue 9: "each unplanned broker fault cost 2-5 leadership
	// changes". With the default lease (30 s, renewed every 10 s, longer
	// than MinLeaseForFailureDetection(9 s, 10 s) = 21 s) a kill -9 of the
	// role's transaction coordinator costs no leadership change: the
	// holder's renewals fail while the coordinator is dead, succeed once it
	// moved, and its Write works again under the same token.
	t.Run("CoordinatorCrashDefaultLease", func(t *testing.T) {
		holder := defaultLease.holder(t)
		e.write(t, "after the coordinator moved", holder, partition)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := holder.leadership.Renew(ctx); err != nil {
			t.Fatalf("a renewal after the coordinator moved: %v", err)
		}
		status := e.describeAt(t, defaultRole)
		if !status.Authoritative(holder.leadership.Token()) {
			t.Fatalf("the holder's token %s is not the coordinator's pair (%s)", holder.leadership.Token(), status)
		}
		defaultLease.noChange(t, "kill -9 of the transaction coordinator, default lease")

		// The write of unknown outcome while the coordinator was dead
		// (BoundedCallsWhileTheCoordinatorIsDead) left the epoch's
		// producer alive: its transaction ended in the background once the
		// coordinator moved, and the same token writes again.
		if err := writing.Err(); err != nil {
			t.Fatalf("the leadership of %s ended after its write of unknown outcome: %v", writeRole, err)
		}
		e.write(t, "after the write of unknown outcome", &kcTerm{member: "writer", leadership: writing}, partition)
	})

	// (c) The same for the broker that leads the role's partition of the
	// state topic: its renewals and the standby's reads wait for the new
	// leader (one of the two in-sync replicas), and the lease outlasts the
	// wait. No leadership change.
	t.Run("StateLeaderCrashDefaultLease", func(t *testing.T) {
		holder := stateLeader.holder(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := holder.leadership.Renew(ctx); err != nil {
			t.Fatalf("a renewal after the state partition moved: %v", err)
		}
		e.write(t, "after the state partition moved", holder, partition)
		stateLeader.noChange(t, "kill -9 of the state partition's leader, default lease")
	})

	// (b) With lease 6 s / renew 2 s, shorter than the cluster's failure
	// detection, a kill -9 of the coordinator may cost one leadership change
	// (the lease lapses before the coordinator moves), never more: no late
	// challenge (item 1), no failback (item 2). The holder at the end holds
	// the coordinator's pair (LeadershipStatus.Authoritative; no ranking of
	// tokens by Compare, item 8), and every earlier holder's leadership has
	// ended (fenced, or its producer lost when a renewal's transaction was
	// left in flight by the dead coordinator: never silently kept), its
	// token is no longer the coordinator's pair, and it writes nothing.
	t.Run("CoordinatorCrashShortLease", func(t *testing.T) {
		// Wait until the role has settled: a holder whose token is the
		// coordinator's pair, and no earlier holder still holding.
		klEventually(t, 60*time.Second, "one holder of "+shortRole.String()+" with the coordinator's pair", func() (bool, string) {
			terms := shortLease.snapshot()
			last := terms[len(terms)-1]
			if last.leadership.Err() != nil {
				return false, "the latest leadership ended: " + shortLease.history()
			}
			for _, term := range terms[:len(terms)-1] {
				if term.leadership.Err() == nil {
					return false, "two leaderships hold:" + shortLease.history()
				}
			}
			status := e.describeAt(t, shortRole)
			return status.Authoritative(last.leadership.Token()), status.String() + shortLease.history()
		})
		holder := shortLease.holder(t)
		e.write(t, "after the coordinator moved", holder, partition)
		terms := shortLease.snapshot()
		t.Logf("leaderships of %s, lease 6 s / renew 2 s, through kill -9 of its coordinator:%s", shortRole, shortLease.history())
		if changes := len(terms) - 1; changes > 1 {
			t.Fatalf("%d leadership changes; want at most 1:%s", changes, shortLease.history())
		}
		status := e.describeAt(t, shortRole)
		for _, old := range terms[:len(terms)-1] {
			if status.Authoritative(old.leadership.Token()) {
				t.Errorf("the deposed token %s of %s is still the coordinator's pair (%s)", old.leadership.Token(), old.member, status)
			}
			err := old.leadership.Err()
			if !errors.Is(err, coordination.ErrFenced) && !errors.Is(err, coordination.ErrProducerLost) {
				t.Errorf("the deposed leadership of %s ended with %v; want a fence (ErrFenced) or a lost producer (ErrProducerLost)", old.member, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			werr := old.transport.WriteGuarded(ctx, old.leadership.Token(), []coordination.GuardedRecord{{Topic: e.commands, Partition: partition, Value: []byte("deposed")}})
			cancel()
			if werr == nil {
				t.Errorf("a write under the deposed token %s of %s succeeded", old.leadership.Token(), old.member)
			}
		}
	})

	e.nodes.Restart(t, victim)
	e.nodes.WaitISR(t, e.topic, e.commands)
	// After the restart too: the node's return (it takes back no
	// leadership until a preferred-replica election) costs no change.
	defaultLease.noChange(t, "kill -9 and restart of the transaction coordinator, default lease")
	stateLeader.noChange(t, "kill -9 and restart of the state partition's leader, default lease")
}

// describeAt asks the observer which token the coordinator holds for the
// role.
func (e *kcEnv) describeAt(t *testing.T, role coordination.Role) coordination.LeadershipStatus {
	t.Helper()
	return klDescribe(t, e.observer, role)
}

// TestKafkaClusterRollingRestart (issue 9, "0 for a rolling restart"):
// every node in turn stops gracefully (a controlled shutdown moves its
// partition leaderships and its share of the transaction coordinators away
// first), starts again on its data, and catches up, the active controller
// last, as an operator upgrades a cluster. Each node in turn, so the
// transaction coordinator and the state partition leader of the role move
// at least once. A role with the default lease keeps its first holder: 0
// leadership changes, and a Write works after every restart.
//
// Lease 6 s / renew 2 s is left to the fault harness (cmd/krabka-chaos):
// on the loaded 2-core test machine the graceful stop of the active
// controller left a state partition without an answering leader for 7-10 s
// (ListOffsets timed out), longer than that lease, and such a role changed
// hands 1 to 8 times in a rolling restart. The one end
// of a leadership that the test lets pass is franz-go's unknown-broker race
// (kcFranzUnknownBroker), after which the same member holds the role again:
// it is logged, and it is no failover.
//
// The write after a restart waits for the holder of the moment: a write
// that the race ended is retried by the member's next leadership.
func TestKafkaClusterRollingRestart(t *testing.T) {
	e := kcNewEnv(t)
	defaultLease := e.elect(t, ktRole(t, "cluster-rolling-default"), coordination.DefaultLeaseConfig(), "node-1", "node-2")
	controller := e.nodes.ActiveController(t)
	order := append(kafkatest.Others(controller), controller)
	for _, node := range order {
		e.nodes.Stop(t, node)
		e.nodes.Restart(t, node)
		e.nodes.WaitISR(t, e.topic, e.commands)
		for _, el := range []*kcElection{defaultLease} {
			what := fmt.Sprintf("after the restart of node %d", node)
			holder := el.holder(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := holder.leadership.Write(ctx, coordination.GuardedRecord{Topic: e.commands, Value: []byte(what)})
			cancel()
			if kcFranzUnknownBroker(err) { // noFailover reports it; the next leadership writes
				e.write(t, what, el.holder(t), 0)
			} else if err != nil {
				t.Fatalf("%s: Write by %s: %v", what, holder.member, err)
			}
		}
	}
	defaultLease.noFailover(t, "a rolling restart, default lease")
}

// TestKafkaClusterShortLeaseWarning (issue 9, item 9) on the production
// shape: the cluster leaves broker.session.timeout.ms at Kafka's default of
// 9 s, which CheckStateTopic reads (DescribeConfigs of a broker) and
// reports as the default. It warns about lease 6 s / renew 2 s (shortest
// lease 9 s + 2 s + 2 s = 13 s) and stays quiet about the default lease
// (30 s; 9 s + 10 s + 2 s = 21 s).
func TestKafkaClusterShortLeaseWarning(t *testing.T) {
	e := kcNewEnv(t)
	for _, tc := range []struct {
		lease coordination.LeaseConfig
		warn  bool
	}{
		{kcShortLease(t), true},
		{coordination.DefaultLeaseConfig(), false},
	} {
		t.Run(fmt.Sprintf("lease=%v,renew=%v", tc.lease.Duration(), tc.lease.RenewInterval()), func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			check := append(slices.Clone(e.options), coordination.WithLeaseConfig(tc.lease), coordination.WithLogger(logger))
			if err := e.observer.CheckStateTopic(ktContext(t), check...); err != nil {
				t.Fatalf("CheckStateTopic: %v", err)
			}
			t.Logf("log: %s", logs.String())
			warned := strings.Contains(logs.String(), "level=WARN") &&
				strings.Contains(logs.String(), "broker_session_timeout=9s") &&
				strings.Contains(logs.String(), "broker_session_timeout_source=default")
			if warned != tc.warn {
				t.Fatalf("a lease of %v renewed every %v on a cluster with Kafka's default 9 s session timeout: warned = %t, want %t",
					tc.lease.Duration(), tc.lease.RenewInterval(), warned, tc.warn)
			}
		})
	}
}

// TestKafkaClusterRenewDeadline is the real-broker test of
// WithRenewDeadline (issue 11): the node that leads the role's partition
// of the state topic stops answering (SIGSTOP; neither the active
// controller nor the role's transaction coordinator), so no renewal of the
// holder lands. With lease 6 s / renew 2 s and a renew deadline of 4 s the
// leadership ends by the holder's own clock with ErrRenewDeadline, at its
// last confirmed grant plus the deadline and before the lease deadline,
// which a standby waits for: the holder stops acting before anyone may
// take over. The holder's token stays the coordinator's pair (nobody
// minted), and a Write under the ended leadership is refused.
func TestKafkaClusterRenewDeadline(t *testing.T) {
	e := kcNewEnv(t)
	victim := kafkatest.Others(e.nodes.ActiveController(t))[0]
	role := e.roles(t, "cluster-renew-deadline", 1, func(p kcPlaces) bool { return p.coordinator != victim && p.stateLeader == victim })[0]
	const renewDeadline = 4 * time.Second
	lease := kcShortLease(t)
	transport := e.transport(t, lease)
	logger := klNewLog(t).logger().With(slog.String("member", "holder"), slog.String("role", role.String()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holder, err := coordination.AcquireLeadership(ctx, transport, role, fxMember(t, "holder"),
		append(slices.Clone(e.options), coordination.WithLeaseConfig(lease), coordination.WithRenewDeadline(renewDeadline), coordination.WithLogger(logger))...)
	if err != nil {
		t.Fatalf("AcquireLeadership of %s: %v", role, err)
	}
	t.Cleanup(func() {
		resign, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = holder.Resign(resign)
	})

	e.nodes.Pause(t, victim)
	paused := true
	defer func() {
		if paused {
			e.nodes.Resume(t, victim)
		}
	}()
	select {
	case <-holder.Context().Done():
	case <-time.After(3 * lease.Duration()):
		t.Fatalf("the leadership held for %v with the state partition's leader stopped (renew deadline %v)", 3*lease.Duration(), renewDeadline)
	}
	ended := time.Now().UnixMilli()
	e.nodes.Resume(t, victim)
	paused = false
	last := holder.Lease()
	t.Logf("the leadership ended %d ms after its last confirmed grant (renew deadline %v, lease %v): %v",
		ended-last.GrantedAt, renewDeadline, lease.Duration(), holder.Err())
	if !errors.Is(holder.Err(), coordination.ErrRenewDeadline) || !errors.Is(context.Cause(holder.Context()), coordination.ErrRenewDeadline) {
		t.Fatalf("Err = %v, cause %v; want ErrRenewDeadline", holder.Err(), context.Cause(holder.Context()))
	}
	if ended < last.GrantedAt+renewDeadline.Milliseconds() || ended >= last.Deadline {
		t.Fatalf("ended at %d ms; want from the grant %d + %v and before the lease deadline %d", ended, last.GrantedAt, renewDeadline, last.Deadline)
	}
	status := e.describeAt(t, role)
	if !status.Authoritative(holder.Token()) {
		t.Errorf("the coordinator holds %s, not the holder's token %s: a renew deadline mints nothing", status, holder.Token())
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer wcancel()
	if err := holder.Write(wctx, coordination.GuardedRecord{Topic: e.commands, Value: []byte("after the renew deadline")}); err == nil {
		t.Errorf("a Write under the leadership that the renew deadline ended succeeded")
	}
}
