package coordinationtest_test

// An adapter written from the documentation alone, as an author over
// another client would write one: the specification's four interfaces and
// nothing else, here forwarding to the in-memory cluster. It must pass the
// conformance suite's checks of the four interfaces, and package
// coordination must give it the specification's behaviour: an election, a
// failover at the lease deadline that fences the silent holder, a
// resignation that hands the role over, and Write refused with an error that
// says why (no ExtendedTransport).

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// fourCalls is the adapter: one method for each call of the four
// interfaces of coordination.Transport.
type fourCalls struct {
	cluster *coordinationtest.Transport
}

func (a fourCalls) AcquireEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, error) {
	return a.cluster.AcquireEpoch(ctx, role)
}

func (a fourCalls) DescribeEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, bool, error) {
	return a.cluster.DescribeEpoch(ctx, role)
}

func (a fourCalls) ReadPartition(ctx context.Context, partition coordination.TopicPartition) ([]coordination.StateRecord, error) {
	return a.cluster.ReadPartition(ctx, partition)
}

func (a fourCalls) Append(ctx context.Context, partition coordination.TopicPartition, key, value []byte) error {
	return a.cluster.Append(ctx, partition, key, value)
}

func (a fourCalls) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	return a.cluster.WriteLease(ctx, partition, token, key, value)
}

var _ coordination.Transport = fourCalls{}

// The conformance suite over the adapter: its checks of the four
// interfaces run, and pass.
func TestAdapterOfFourInterfacesConforms(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	n := 0
	coordinationtest.TestTransport(t, coordinationtest.ConformanceTarget{
		NewTransport: func(*testing.T) coordination.Transport {
			n++
			return fourCalls{cluster.Transport("conformance-" + string(rune('a'+n)))}
		},
		Options: []coordination.Option{coordination.WithTopic("adapter-state"), coordination.WithPartitions(4)},
	})
}

// The specification's behaviour over the adapter, on the real clock with a
// short lease: node-1 takes the role; node-2 waits; node-1 cut off from the
// cluster stops renewing, and node-2 takes the role at the deadline plus
// its stagger, not before, and fences node-1; node-2's Resign hands the
// role to node-3 at once; Write refuses with an error that names the
// missing ExtendedTransport.
func TestAdapterOfFourInterfacesGetsTheSpecification(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	raw1, raw2, raw3 := cluster.Transport("node-1"), cluster.Transport("node-2"), cluster.Transport("node-3")
	lease, err := coordination.NewLeaseConfig(1500*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	options := []coordination.Option{coordination.WithTopic("adapter-state"), coordination.WithPartitions(4),
		coordination.WithLeaseConfig(lease), coordination.WithPollInterval(50 * time.Millisecond),
		coordination.WithLogger(slog.New(slog.DiscardHandler))}
	role, _ := coordination.NewRole("adapter-role")
	id := func(name string) coordination.MemberID {
		m, err := coordination.NewMemberID(name)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := coordination.AcquireLeadership(ctx, fourCalls{raw1}, role, id("node-1"), options...)
	if err != nil {
		t.Fatalf("node-1: %v", err)
	}
	err = first.Write(ctx, coordination.GuardedRecord{Topic: "commands", Value: []byte("x")})
	if err == nil || !strings.Contains(err.Error(), "ExtendedTransport") {
		t.Fatalf("Write over the four interfaces: %v; want a refusal that names ExtendedTransport", err)
	}

	type result struct {
		leadership *coordination.Leadership
		err        error
		at         time.Time
	}
	second := make(chan result, 1)
	go func() {
		l, err := coordination.AcquireLeadership(ctx, fourCalls{raw2}, role, id("node-2"), options...)
		second <- result{l, err, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond) // node-2 registers and waits behind a live lease
	select {
	case r := <-second:
		t.Fatalf("node-2 took the role while node-1 renewed: %+v", r)
	default:
	}
	cut := time.Now()
	raw1.Cut() // node-1 stops renewing
	r := <-second
	if r.err != nil {
		t.Fatalf("node-2: %v", r.err)
	}
	if waited := r.at.Sub(cut); waited < lease.Duration()-lease.RenewInterval() || waited > 2*lease.Duration()+lease.ChallengeStagger() {
		t.Fatalf("node-2 took the role %v after node-1 went silent; want about the lease %v (plus its stagger)", waited, lease.Duration())
	}
	if r.leadership.Token() == first.Token() {
		t.Fatalf("node-2 holds node-1's token %v; want a new epoch", first.Token())
	}
	raw1.Heal()
	select {
	case <-first.Done():
		if !errors.Is(first.Err(), coordination.ErrFenced) {
			t.Fatalf("node-1 ended with %v; want ErrFenced", first.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("node-1's leadership did not end after node-2's mint")
	}

	third := make(chan result, 1)
	go func() {
		l, err := coordination.AcquireLeadership(ctx, fourCalls{raw3}, role, id("node-3"), options...)
		third <- result{l, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond) // node-3 registers
	resigned := time.Now()
	if err := r.leadership.Resign(ctx); err != nil {
		t.Fatalf("node-2's Resign: %v", err)
	}
	r3 := <-third
	if r3.err != nil {
		t.Fatalf("node-3: %v", r3.err)
	}
	if took := r3.at.Sub(resigned); took > lease.Duration() {
		t.Fatalf("node-3 took the role %v after node-2 resigned; want at once (the tombstone), well within the lease %v", took, lease.Duration())
	}

	// A planned transfer over the four interfaces: node-3 hands the role
	// to node-4 by name, with one new epoch, though node-1 ranks first.
	rejoined := make(chan result, 1)
	go func() {
		l, err := coordination.AcquireLeadership(ctx, fourCalls{raw1}, role, id("node-1"), options...)
		rejoined <- result{l, err, time.Now()}
	}()
	time.Sleep(200 * time.Millisecond)
	fourth := make(chan result, 1)
	go func() {
		l, err := coordination.AcquireLeadership(ctx, fourCalls{cluster.Transport("node-4")}, role, id("node-4"), options...)
		fourth <- result{l, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	transferred := time.Now()
	if err := r3.leadership.TransferTo(ctx, id("node-4")); err != nil {
		t.Fatalf("node-3's TransferTo(node-4): %v", err)
	}
	r4 := <-fourth
	if r4.err != nil {
		t.Fatalf("node-4: %v", r4.err)
	}
	if took := r4.at.Sub(transferred); took > lease.Duration() {
		t.Fatalf("node-4 took the role %v after the transfer began; want within the transfer", took)
	}
	if r4.leadership.Token().ProducerEpoch() != r3.leadership.Token().ProducerEpoch()+1 {
		t.Fatalf("node-4 holds %v after node-3's %v; want exactly one new epoch", r4.leadership.Token(), r3.leadership.Token())
	}
	if !errors.Is(r3.leadership.Err(), coordination.ErrTransferred) {
		t.Fatalf("node-3 ended with %v; want ErrTransferred", r3.leadership.Err())
	}
	_ = r4.leadership.Resign(ctx)
	r1 := <-rejoined
	if r1.err != nil {
		t.Fatalf("node-1 again: %v", r1.err)
	}
	_ = r1.leadership.Resign(ctx)
}

// The in-memory transport passes the suite with a state topic of another
// name, as ConformanceTarget.Options allows: WriteGuarded refuses a record
// for the topic it learnt by use, as KafkaTransport does.
func TestTransportConformanceOwnStateTopic(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	cluster.SetTopicPartitions("own-state", 4)
	coordinationtest.TestTransport(t, coordinationtest.ConformanceTarget{
		NewTransport: func(t *testing.T) coordination.Transport { return cluster.Transport(t.Name()) },
		Options:      []coordination.Option{coordination.WithTopic("own-state"), coordination.WithPartitions(4)},
		GuardedTopic: "commands",
	})
}
