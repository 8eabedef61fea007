package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// Discard is the logger of the benchmarks: the loops log retries, which a
// benchmark reports through its figures instead.
var Discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// Suffix returns a random hex suffix for topic and role names, so that runs
// and the other users of a shared broker never collide.
func Suffix() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Kafka is the broker side of the benchmarks.
type Kafka struct {
	Brokers []string
	// ClientOptions go to every transport, after the benchmark's own.
	ClientOptions []kgo.Opt
	// Logger is the logger of the loops; nil discards.
	Logger *slog.Logger
	// Replication is the replication factor of the topics the benchmarks
	// create, and 0 for 1; on a cluster of three, 3, with a
	// min.insync.replicas of 2 on the state topics.
	Replication int

	// placement pins the work on a cluster (Place); nil lets the names
	// choose. nodes are the cluster's node ids then.
	placement *Placement
	nodes     []int32

	mu     sync.Mutex
	topics []string
}

// Member opens a transport: one member process of a role.
func (k *Kafka) Member(lease coordination.LeaseConfig, extra ...kgo.Opt) (*coordination.KafkaTransport, error) {
	opts := append(append([]kgo.Opt{}, k.ClientOptions...), extra...)
	return coordination.NewKafkaTransportWithOptions(lease, opts, k.Brokers...)
}

// StateTopic creates a compacted state topic with a fresh name and one
// partition, and returns the options that point a member at it.
func (k *Kafka) StateTopic(ctx context.Context, prefix string, lease coordination.LeaseConfig) (string, []coordination.Option, error) {
	topic := fmt.Sprintf("%s-%s", prefix, Suffix())
	options := []coordination.Option{
		coordination.WithTopic(topic),
		coordination.WithPartitions(1),
		coordination.WithLeaseConfig(lease),
		coordination.WithLogger(k.logger()),
	}
	t, err := k.Member(lease)
	if err != nil {
		return "", nil, err
	}
	defer t.Close()
	if k.placement != nil {
		// The topic on the placement's leader, with the configs of
		// CreateStateTopic, which then checks it.
		client, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
		if err != nil {
			return "", nil, err
		}
		err = k.createTopic(ctx, client, topic, 1, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": fmt.Sprint(min(k.replication(), 2))})
		client.Close()
		if err != nil {
			return "", nil, err
		}
	}
	if err := t.CreateStateTopic(ctx, k.replication(), min(k.replication(), 2), options...); err != nil {
		return "", nil, err
	}
	k.remember(topic)
	return topic, options, nil
}

// DataTopic creates a plain topic for guarded writes.
func (k *Kafka) DataTopic(ctx context.Context, prefix string, partitions int) (string, error) {
	topic := fmt.Sprintf("%s-%s", prefix, Suffix())
	client, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		return "", err
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	if err := k.createTopic(ctx, client, topic, partitions, nil); err != nil {
		return "", err
	}
	k.remember(topic)
	// Wait for the leaders to take the partitions up.
	for {
		offsets, err := admin.ListEndOffsets(ctx, topic)
		if err == nil && offsets.Error() == nil && len(offsets[topic]) == partitions {
			return topic, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("topic %s not ready: %w", topic, errors.Join(err, ctx.Err()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (k *Kafka) replication() int { return max(k.Replication, 1) }

func (k *Kafka) logger() *slog.Logger {
	if k.Logger == nil {
		return Discard
	}
	return k.Logger
}

func (k *Kafka) remember(topic string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.topics = append(k.topics, topic)
}

// Cleanup deletes every topic the benchmarks created.
func (k *Kafka) Cleanup() {
	k.mu.Lock()
	topics := k.topics
	k.topics = nil
	k.mu.Unlock()
	if len(topics) == 0 {
		return
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...))
	if err != nil {
		return
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(client).DeleteTopics(ctx, topics...)
}

// mustRole builds a role name with a fresh suffix.
func mustRole(prefix string) coordination.Role {
	role, err := coordination.NewRole(prefix + "-" + Suffix())
	if err != nil {
		panic(err)
	}
	return role
}

func mustMember(name string) coordination.MemberID {
	member, err := coordination.NewMemberID(name)
	if err != nil {
		panic(err)
	}
	return member
}

type acquired struct {
	leadership *coordination.Leadership
	err        error
	at         time.Time
}

// campaign starts AcquireLeadership in a goroutine and reports when it
// returns.
func campaign(ctx context.Context, t coordination.Transport, role coordination.Role, member coordination.MemberID, options []coordination.Option) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := coordination.AcquireLeadership(ctx, t, role, member, options...)
		ch <- acquired{leadership: l, err: err, at: time.Now()}
	}()
	return ch
}

// entryOffset returns the offset of member's registration, or -1.
func entryOffset(ctx context.Context, t coordination.StateReader, role coordination.Role, member coordination.MemberID, options []coordination.Option) (int64, error) {
	state, err := coordination.DescribeRoleState(ctx, t, role, options...)
	if err != nil {
		return -1, err
	}
	if entry, ok := state.Entry(member); ok {
		return entry.Offset, nil
	}
	return -1, nil
}

// waitStandby waits until the roster of the role shows a registration of
// member past offset after, as a reader of transport t sees it, and then a
// little more, so that the member's campaign has folded the record and
// parks in its wait.
func waitStandby(ctx context.Context, t coordination.StateReader, role coordination.Role, member coordination.MemberID, options []coordination.Option, after int64) error {
	for {
		offset, err := entryOffset(ctx, t, role, member, options)
		if err != nil {
			return err
		}
		if offset > after {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Millisecond):
		return nil
	}
}

// KafkaFailover measures the failover after a crash: the holder's process
// stops (its transport closes, so it renews no more and writes no
// tombstone) right after a renewal, and the standby of rank 0 takes the
// role. A sample runs from the lease deadline (plus rank × stagger, zero for
// rank 0) to the return of the standby's AcquireLeadership.
//
// A holder whose leadership ends before its crash (a renewal that the
// coordinator refused, such as a transaction that outlived the short lease
// on a loaded machine) leaves its round without a sample: the standby
// takes over at the deadline, and the next round goes on. It returns the
// samples and the reasons of those ends.
func (k *Kafka) KafkaFailover(ctx context.Context, rounds, warmup int, lease coordination.LeaseConfig) ([]time.Duration, []error, error) {
	_, options, err := k.StateTopic(ctx, "krabka-bench-failover", lease)
	if err != nil {
		return nil, nil, err
	}
	role, err := k.role(ctx, "bench-failover")
	if err != nil {
		return nil, nil, err
	}
	t, err := k.Member(lease)
	if err != nil {
		return nil, nil, err
	}
	holder, err := coordination.AcquireLeadership(ctx, t, role, mustMember("m0"), options...)
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	holderT := t
	defer func() { holderT.Close() }()
	var samples []time.Duration
	var ended []error
	for i := range rounds + warmup {
		standbyT, err := k.Member(lease)
		if err != nil {
			return nil, nil, err
		}
		// The crashed member comes back as the next standby: a new process
		// under the same member id, whose registration replaces its old one
		// at the tail of the roster, so the standby has rank 0. (A member
		// that never came back would keep its registration and its rank.)
		member := mustMember(fmt.Sprintf("m%d", (i+1)%2))
		old, err := entryOffset(ctx, holderT, role, member, options)
		if err != nil {
			standbyT.Close()
			return nil, nil, err
		}
		ch := campaign(ctx, standbyT, role, member, options)
		if err := waitStandby(ctx, holderT, role, member, options, old); err != nil {
			standbyT.Close()
			return nil, nil, err
		}
		// Crash right after a renewal, so that no renewal is in flight.
		granted := holder.Lease().GrantedAt
		for holder.Lease().GrantedAt == granted && holder.Err() == nil {
			select {
			case <-ctx.Done():
				standbyT.Close()
				return nil, nil, ctx.Err()
			case <-holder.Done():
			case <-time.After(500 * time.Microsecond):
			}
		}
		if err := holder.Err(); err != nil {
			ended = append(ended, err)
			holderT.Close()
			r := <-ch
			if r.err != nil {
				standbyT.Close()
				return nil, nil, fmt.Errorf("standby after the holder's end (%w): %w", err, r.err)
			}
			holder, holderT = r.leadership, standbyT
			continue
		}
		// The crashed members of earlier rounds keep their registrations, so
		// the standby's rank grows by one each round: the sample starts at
		// the deadline plus rank × stagger.
		state, err := coordination.DescribeRoleState(ctx, holderT, role, options...)
		if err != nil {
			standbyT.Close()
			return nil, nil, err
		}
		rank, _ := state.RankOf(member)
		holderT.Close()
		deadline := time.UnixMilli(holder.Lease().Deadline).Add(lease.ChallengeDelay(rank))
		r := <-ch
		if r.err != nil {
			standbyT.Close()
			return nil, nil, fmt.Errorf("standby: %w", r.err)
		}
		if i >= warmup {
			samples = append(samples, r.at.Sub(deadline))
		}
		holder, holderT = r.leadership, standbyT
	}
	return samples, ended, nil
}

// holdRole acquires a role on a fresh state topic for the write benchmarks.
func (k *Kafka) holdRole(ctx context.Context, prefix string, extra ...kgo.Opt) (*coordination.Leadership, *coordination.KafkaTransport, string, error) {
	lease, _ := coordination.NewLeaseConfig(30*time.Second, 10*time.Second, 5*time.Second)
	_, options, err := k.StateTopic(ctx, "krabka-bench-"+prefix, lease)
	if err != nil {
		return nil, nil, "", err
	}
	data, err := k.DataTopic(ctx, "krabka-bench-"+prefix+"-cmd", 1)
	if err != nil {
		return nil, nil, "", err
	}
	t, err := k.Member(lease, extra...)
	if err != nil {
		return nil, nil, "", err
	}
	role, err := k.role(ctx, "bench-"+prefix)
	if err != nil {
		t.Close()
		return nil, nil, "", err
	}
	l, err := coordination.AcquireLeadership(ctx, t, role, mustMember("writer"), options...)
	if err != nil {
		t.Close()
		return nil, nil, "", err
	}
	return l, t, data, nil
}

// Command is the payload of one benchmark command: 100 bytes.
var Command = make([]byte, 100)

// KafkaThroughput measures commands per second over windows: writers
// goroutines, each calling Leadership.Write with batch commands per call.
// It also returns the calls of Leadership.Write per transaction (EndTxn
// requests counted by a franz-go hook), over the whole run: the group
// commit's batching.
func (k *Kafka) KafkaThroughput(ctx context.Context, writers, batch int, windows int, window time.Duration) ([]float64, float64, error) {
	counter := &txnCounter{}
	l, t, data, err := k.holdRole(ctx, fmt.Sprintf("tput%d", writers), kgo.WithHooks(counter))
	if err != nil {
		return nil, 0, err
	}
	defer t.Close()
	defer l.Resign(context.Background())
	records := make([]coordination.GuardedRecord, batch)
	for i := range records {
		records[i] = coordination.GuardedRecord{Topic: data, Key: []byte("device-1"), Value: Command}
	}
	var calls atomic.Int64
	write := func(ctx context.Context) error {
		err := l.Write(ctx, records...)
		if err == nil {
			calls.Add(1)
		}
		return err
	}
	txnsBefore := counter.endTxns.Load()
	rates, err := throughput(ctx, writers, batch, windows, window, write)
	perTxn := 0.0
	if txns := counter.endTxns.Load() - txnsBefore; txns > 0 {
		perTxn = float64(calls.Load()) / float64(txns)
	}
	return rates, perTxn, err
}

// txnCounter counts the EndTxn requests of a transport's clients: one per
// transaction.
type txnCounter struct{ endTxns atomic.Int64 }

func (c *txnCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 26 && err == nil { // EndTxn
		c.endTxns.Add(1)
	}
}

// throughput runs writers loops of write and counts batch commands for each
// call that returns in a window. The first window warms up.
func throughput(ctx context.Context, writers, batch, windows int, window time.Duration, write func(context.Context) error) ([]float64, error) {
	var count atomic.Int64
	var firstErr error
	var errOnce sync.Once
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for runCtx.Err() == nil {
				if err := write(runCtx); err != nil {
					if runCtx.Err() == nil {
						errOnce.Do(func() { firstErr = err })
						stop()
					}
					return
				}
				count.Add(int64(batch))
			}
		})
	}
	var rates []float64
	time.Sleep(window) // warm-up
	for range windows {
		before, start := count.Load(), time.Now()
		time.Sleep(window)
		if runCtx.Err() != nil {
			break
		}
		rates = append(rates, float64(count.Load()-before)/time.Since(start).Seconds())
	}
	stop()
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return rates, nil
}

// LibraryHandover is the handover of the library, sample by sample: two
// members, each with its own transport, take turns on one role; a sample
// runs from the start of the holder's Leadership.Resign to the return of
// the standby's AcquireLeadership. Its steps are those of
// FloorHandoverSteps, read from a trace of the members' requests, and then
// the return of Resign.
type LibraryHandover struct {
	transports [2]*coordination.KafkaTransport
	members    [2]coordination.MemberID
	role       coordination.Role
	options    []coordination.Option
	holder     *coordination.Leadership
	h          int
	trace      tracer
}

// NewLibraryHandover opens the two members on a fresh state topic, and lets
// the first one take the role.
func (k *Kafka) NewLibraryHandover(ctx context.Context) (*LibraryHandover, error) {
	lease, _ := coordination.NewLeaseConfig(10*time.Second, 3*time.Second, time.Second)
	_, options, err := k.StateTopic(ctx, "krabka-bench-handover", lease)
	if err != nil {
		return nil, err
	}
	role, err := k.role(ctx, "bench-handover")
	if err != nil {
		return nil, err
	}
	h := &LibraryHandover{role: role, members: [2]coordination.MemberID{mustMember("a"), mustMember("b")}, options: options}
	for i := range h.transports {
		if h.transports[i], err = k.Member(lease, h.trace.hook(i)); err != nil {
			h.Close()
			return nil, err
		}
	}
	if h.holder, err = coordination.AcquireLeadership(ctx, h.transports[0], h.role, h.members[0], options...); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// LibraryHandoverSteps names the steps of a LibraryHandover sample.
var LibraryHandoverSteps = append(slices.Clone(FloorHandoverSteps), "the holder's Resign returns")

// Sample takes one handover: the standby campaigns, and once it waits
// (untimed), the holder resigns.
func (h *LibraryHandover) Sample(ctx context.Context) (Sample, error) {
	s := 1 - h.h
	ch := campaign(ctx, h.transports[s], h.role, h.members[s], h.options)
	if err := waitStandby(ctx, h.transports[h.h], h.role, h.members[s], h.options, -1); err != nil {
		return Sample{}, fmt.Errorf("%w: %w", errSampleState, err)
	}
	h.trace.begin()
	start := time.Now()
	if err := h.holder.Resign(ctx); err != nil {
		h.trace.end()
		return Sample{}, fmt.Errorf("%w: resign: %w", errSampleState, err)
	}
	resigned := time.Since(start)
	r := <-ch
	events := h.trace.end()
	if r.err != nil {
		return Sample{}, fmt.Errorf("%w: standby: %w", errSampleState, r.err)
	}
	steps := append(handoverSteps(events, h.h, s, start), resigned)
	names := make([]string, 2)
	names[h.h], names[s] = "holder", "standby"
	h.holder, h.h = r.leadership, s
	return Sample{D: r.at.Sub(start), Steps: steps, Requests: requestCounts(events, start, r.at), Trace: timeline(events, start, names)}, nil
}

// Close resigns and closes the transports.
func (h *LibraryHandover) Close() {
	if h.holder != nil {
		_ = h.holder.Resign(context.Background())
	}
	for _, t := range h.transports {
		if t != nil {
			t.Close()
		}
	}
}

// LibraryWrite is Leadership.Write of one command, sample by sample, by
// the holder of a role on a fresh state topic, to a fresh data topic. Its
// steps are those of FloorWriteSteps, read from a trace of its requests.
type LibraryWrite struct {
	l     *coordination.Leadership
	t     *coordination.KafkaTransport
	data  string
	trace tracer
}

// NewLibraryWrite acquires the role of the writer.
func (k *Kafka) NewLibraryWrite(ctx context.Context) (*LibraryWrite, error) {
	w := &LibraryWrite{}
	var err error
	if w.l, w.t, w.data, err = k.holdRole(ctx, "write", w.trace.hook(0)); err != nil {
		return nil, err
	}
	return w, nil
}

// Sample takes one guarded write.
func (w *LibraryWrite) Sample(ctx context.Context) (Sample, error) {
	w.trace.begin()
	start := time.Now()
	err := w.l.Write(ctx, coordination.GuardedRecord{Topic: w.data, Key: []byte("device-1"), Value: Command})
	end := time.Now()
	events := w.trace.end()
	if err != nil {
		return Sample{}, err
	}
	steps, _ := txnSteps(events, 0, start, start)
	return Sample{D: end.Sub(start), Steps: steps, Requests: requestCounts(events, start, end), Trace: timeline(events, start, []string{"writer"})}, nil
}

// Close resigns and closes the transport.
func (w *LibraryWrite) Close() {
	_ = w.l.Resign(context.Background())
	w.t.Close()
}
