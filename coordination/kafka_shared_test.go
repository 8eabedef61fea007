package coordination_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

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
	// Three clients, each with a seed connection and at most two to the
	// broker; a redial or two on a busy machine.
	if n > 12 {
		t.Fatalf("the transport dialed %d connections for %d roles; want at most 12, whatever the number of roles", n, roles)
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
