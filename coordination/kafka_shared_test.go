package coordination_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The transactions of every role of a transport share one franz-go client
// (issue 12, item 2): the connections of a transport do not grow with its
// roles, the sequence numbers of a partition restart at every epoch, and a
// write larger than one batch spans several.

func TestKafkaSharedClientFake(t *testing.T) {
	runKafkaSharedSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Fake(t) })
}

func TestKafkaSharedClientKafka(t *testing.T) {
	kafkatest.Kafka(t)
	runKafkaSharedSuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Kafka(t) })
}

func runKafkaSharedSuite(t *testing.T, cluster func(*testing.T) *kafkatest.Cluster) {
	t.Run("ManyRolesShareTheConnections", func(t *testing.T) { ktManyRolesShareTheConnections(t, cluster(t)) })
	t.Run("SequencesRestartAtEveryEpoch", func(t *testing.T) { ktSequencesRestartAtEveryEpoch(t, cluster(t)) })
	t.Run("LargeWriteSpansBatches", func(t *testing.T) { ktLargeWriteSpansBatches(t, cluster(t)) })
	t.Run("RoundTrips", func(t *testing.T) { ktRoundTrips(t, cluster(t)) })
}

// ktDialCounter counts the connections that the clients of a transport
// dial.
type ktDialCounter struct{ n atomic.Int64 }

func (d *ktDialCounter) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.n.Add(1)
	var dialer net.Dialer
	return dialer.DialContext(ctx, network, host)
}

// ktManyRolesShareTheConnections: 40 roles of one transport, each minted,
// given a lease and a guarded write, concurrently, over the connections of
// the transport's three clients: with a franz-go client per mint it took
// two or three connections per role.
func ktManyRolesShareTheConnections(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	dials := new(ktDialCounter)
	transport := ktTransport(t, c, kgo.Dialer(dials.dial))
	_, options := ktStateTopic(t, c, transport, 4)
	commands := c.CreateTopic(t, "coord-shared-commands", 2, nil)
	const roles = 40
	member := fxMember(t, "node-1")
	errs := make([]error, roles)
	var wg sync.WaitGroup
	for i := range roles {
		role := ktRole(t, fmt.Sprintf("shared-%02d", i))
		tp := ktPartition(t, role, options)
		wg.Go(func() {
			token, err := transport.AcquireEpoch(ctx, role)
			if err != nil {
				errs[i] = fmt.Errorf("AcquireEpoch of %s: %w", role, err)
				return
			}
			key := coordination.EncodeKey(coordination.LeaseKey(role))
			value := coordination.EncodeLease(ktLease.Grant(member, token, 1))
			if err := transport.WriteLease(ctx, tp, token, key, value); err != nil {
				errs[i] = fmt.Errorf("WriteLease of %s: %w", role, err)
				return
			}
			command := []coordination.GuardedRecord{{Topic: commands, Partition: i % 2, Value: []byte(role.String())}}
			if err := transport.WriteGuarded(ctx, token, command); err != nil {
				errs[i] = fmt.Errorf("WriteGuarded of %s: %w", role, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := ktReadCommitted(t, c, commands, roles); len(got) != roles {
		t.Fatalf("committed commands = %d; want one per role, %d", len(got), roles)
	}
	n := dials.n.Load()
	t.Logf("%d roles, each minted, leased and written, over %d connections dialed", roles, n)
	// Three clients, each with a seed connection and at most two to each
	// broker; a redial or three on a busy machine.
	if bound := int64(3 + 3*2*len(c.Brokers) + 3); n > bound {
		t.Fatalf("the transport dialed %d connections for %d roles on %d brokers; want at most %d, whatever the number of roles", n, roles, len(c.Brokers), bound)
	}
}

// ktSequencesRestartAtEveryEpoch: the broker keeps one sequence number per
// (producer id, partition), and a new epoch starts at 0. Writes under a
// token, a newer mint of the same transport, a rival's mint and a mint
// after it all commit, in order, on the same partitions.
func ktSequencesRestartAtEveryEpoch(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport, rival := ktTransport(t, c), ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 4)
	commands := c.CreateTopic(t, "coord-sequences", 1, nil)
	role := ktRole(t, "sequences")
	tp := ktPartition(t, role, options)
	var want []string
	write := func(token coordination.FencingToken, n int) {
		t.Helper()
		for i := range n {
			value := fmt.Sprintf("%s #%d", token, i)
			if err := transport.WriteGuarded(ctx, token, []coordination.GuardedRecord{{Topic: commands, Value: []byte(value)}}); err != nil {
				t.Fatalf("WriteGuarded %q: %v", value, err)
			}
			key, lease := ktLeaseRecord(t, role, "node-1", token, int64(len(want)+1))
			if err := transport.WriteLease(ctx, tp, token, key, lease); err != nil {
				t.Fatalf("WriteLease after %q: %v", value, err)
			}
			want = append(want, value)
		}
	}
	first, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	write(first, 3)
	second, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("second AcquireEpoch: %v", err)
	}
	write(second, 2)
	if _, err := rival.AcquireEpoch(ctx, role); err != nil {
		t.Fatalf("the rival's AcquireEpoch: %v", err)
	}
	ktMustFence(t, "WriteGuarded after the rival's mint", transport.WriteGuarded(ctx, second, []coordination.GuardedRecord{{Topic: commands, Value: []byte("fenced")}}))
	third, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("third AcquireEpoch: %v", err)
	}
	write(third, 2)
	got := ktValues(ktReadCommitted(t, c, commands, len(want)))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed commands = %q; want %q", got, want)
	}
}

// ktLargeWriteSpansBatches: a guarded write whose records of one partition
// exceed one batch (about 1 MB) goes out as several batches, each with the
// next sequence numbers, in one transaction, and commits whole, in order.
func ktLargeWriteSpansBatches(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	transport := ktTransport(t, c)
	commands := c.CreateTopic(t, "coord-large", 2, nil)
	role := ktRole(t, "large")
	token, err := transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	var records []coordination.GuardedRecord
	for i := range 5 {
		value := append([]byte(fmt.Sprintf("large %d ", i)), bytes.Repeat([]byte{'x'}, 400_000)...)
		records = append(records, coordination.GuardedRecord{Topic: commands, Partition: 0, Value: value})
	}
	records = append(records, coordination.GuardedRecord{Topic: commands, Partition: 1, Value: []byte("small")})
	if err := transport.WriteGuarded(ctx, token, records); err != nil {
		t.Fatalf("WriteGuarded of %d records, 2 MB for one partition: %v", len(records), err)
	}
	if err := transport.WriteGuarded(ctx, token, []coordination.GuardedRecord{{Topic: commands, Partition: 0, Value: []byte("after")}}); err != nil {
		t.Fatalf("WriteGuarded after the large one: %v", err)
	}
	got := ktReadCommitted(t, c, commands, len(records)+1)
	var partition0 []string
	for _, r := range got {
		if r.Partition == 0 {
			partition0 = append(partition0, string(r.Value[:min(len(r.Value), 7)]))
		}
	}
	if want := []string{"large 0", "large 1", "large 2", "large 3", "large 4", "after"}; fmt.Sprint(partition0) != fmt.Sprint(want) {
		t.Fatalf("partition 0 holds %q; want %q", partition0, want)
	}
}

// ktTrace records the requests of a transport's clients in the order they
// are written.
type ktTrace struct {
	mu   sync.Mutex
	keys []int16
}

func (r *ktTrace) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == kmsg.Fetch.Int16() {
		return // the reader's long polls
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
}

// since returns the requests written since mark, by name, and the new mark.
func (r *ktTrace) since(mark int) ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for _, key := range r.keys[mark:] {
		names = append(names, kmsg.NameForKey(key))
	}
	return names, len(r.keys)
}

// ktRoundTrips (issue 12, item 3) counts the requests of a warm transport:
// a guarded write is AddPartitionsToTxn, Produce and EndTxn, the minimum
// that a transaction under a fixed epoch takes (the implicit add of
// Produce 12 is not safe back to back: TestKafkaImplicitAddPartitions);
// and a candidate's mint and first lease after its registration are
// InitProducerId and the three of a transaction, with no FindCoordinator
// and no Metadata, which the registration's warm-up took ahead. An
// AddPartitionsToTxn or InitProducerId that the coordinator refuses with
// CONCURRENT_TRANSACTIONS while it writes the previous markers goes again,
// so those may appear more than once.
func ktRoundTrips(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	trace := new(ktTrace)
	transport := ktTransport(t, c, kgo.WithHooks(trace))
	_, options := ktStateTopic(t, c, transport, 1)
	commands := c.CreateTopic(t, "coord-trips", 1, nil)
	command := []coordination.GuardedRecord{{Topic: commands, Value: []byte("open valve 7")}}
	member := fxMember(t, "node-1")

	// A first role warms the connections and the leaders of both topics.
	first := ktRole(t, "trips-first")
	token, err := transport.AcquireEpoch(ctx, first)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	tp := ktPartition(t, first, options)
	if err := transport.WriteLease(ctx, tp, token, coordination.EncodeKey(coordination.LeaseKey(first)), coordination.EncodeLease(ktLease.Grant(member, token, 1))); err != nil {
		t.Fatalf("WriteLease: %v", err)
	}
	if err := transport.WriteGuarded(ctx, token, command); err != nil {
		t.Fatalf("WriteGuarded: %v", err)
	}

	_, mark := trace.since(0)
	if err := transport.WriteGuarded(ctx, token, command); err != nil {
		t.Fatalf("WriteGuarded: %v", err)
	}
	write, mark := trace.since(mark)
	t.Logf("a guarded write: %v", write)
	ktWantRequests(t, "a guarded write", write, "AddPartitionsToTxn", "Produce", "EndTxn")

	// A second role registers; its warm-up finds the role's coordinator.
	role := ktRole(t, "trips")
	registration := coordination.EncodeKey(coordination.RegistrationKey(role, member))
	if err := transport.Append(ctx, ktPartition(t, role, options), registration, coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: 1})); err != nil {
		t.Fatalf("Append: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		names, _ := trace.since(mark)
		if slices.Contains(names, "FindCoordinator") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the registration's warm-up sent no FindCoordinator: %v", names)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // its answer
	warm, mark := trace.since(mark)
	t.Logf("the registration and its warm-up: %v", warm)
	token, err = transport.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	if err := transport.WriteLease(ctx, ktPartition(t, role, options), token, coordination.EncodeKey(coordination.LeaseKey(role)), coordination.EncodeLease(ktLease.Grant(member, token, 2))); err != nil {
		t.Fatalf("WriteLease: %v", err)
	}
	takeover, _ := trace.since(mark)
	t.Logf("the mint and the first lease: %v", takeover)
	ktWantRequests(t, "the mint and the first lease", takeover, "InitProducerID", "AddPartitionsToTxn", "Produce", "EndTxn")
}

// ktWantRequests checks that requests holds each of want, in that order,
// and nothing else but repeats of a request that CONCURRENT_TRANSACTIONS
// refused.
func ktWantRequests(t *testing.T, what string, requests []string, want ...string) {
	t.Helper()
	var distinct []string
	for _, name := range requests {
		if len(distinct) > 0 && distinct[len(distinct)-1] == name && (name == "AddPartitionsToTxn" || name == "InitProducerID" || name == "EndTxn") {
			continue
		}
		distinct = append(distinct, name)
	}
	if fmt.Sprint(distinct) != fmt.Sprint(want) {
		t.Fatalf("%s sent %v; want %v, one round trip each (a refused AddPartitionsToTxn, InitProducerId or EndTxn may go again)", what, requests, want)
	}
}
