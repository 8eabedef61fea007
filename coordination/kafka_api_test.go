package coordination_test

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/device"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The suite of the user-facing API over KafkaTransport: Elector, Observe,
// TryAcquire, and the device side (package device: KafkaCommandReader and
// Gate), on kfake in every `go test` and on the real broker of
// KRABKA_KAFKA_BROKERS. The helpers carry the ka prefix.

func TestKafkaAPIFake(t *testing.T) {
	runKafkaAPISuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Fake(t) })
}

func TestKafkaAPIKafka(t *testing.T) {
	kafkatest.Kafka(t) // skip (or fail under CI) before any subtest
	runKafkaAPISuite(t, func(t *testing.T) *kafkatest.Cluster { return kafkatest.Kafka(t) })
}

func runKafkaAPISuite(t *testing.T, cluster func(*testing.T) *kafkatest.Cluster) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, *kafkatest.Cluster)
	}{
		{"ElectorHandsOverOnShutdown", kaElectorHandsOver},
		{"ObserveSeesTryAcquire", kaObserveSeesTryAcquire},
		{"DeviceRefusesTheDeposedLeader", kaDeviceRefusesTheDeposedLeader},
		{"SpecDefaultsWriteTheTwoKinds", kaSpecDefaultsWriteTheTwoKinds},
		{"SpecRestartCostsOneEpoch", kaSpecRestartCostsOneEpoch},
		{"CommandReaderNamesAMissingTopic", kaCommandReaderNamesAMissingTopic},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, cluster(t)) })
	}
}

// kaEnv is a state topic of its own, a role of its own, and the options
// of the members.
type kaEnv struct {
	c       *kafkatest.Cluster
	role    coordination.Role
	options []coordination.Option
	auditor *coordination.KafkaTransport
}

func kaNewEnv(t *testing.T, c *kafkatest.Cluster) *kaEnv {
	t.Helper()
	auditor := ktTransport(t, c)
	_, options := ktStateTopic(t, c, auditor, 4)
	return &kaEnv{c: c, role: ktRole(t, "api"), auditor: auditor,
		options: append(options, coordination.WithLeaseConfig(ktLease), coordination.WithPollInterval(250*time.Millisecond))}
}

// kaWait waits up to 20 s for a value on ch.
func kaWait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s within 20 s", what)
		panic("unreachable")
	}
}

// kaElectorHandsOver: two electors; the first leads; its shutdown resigns,
// and the second takes over well before the first's lease deadline.
func kaElectorHandsOver(t *testing.T, c *kafkatest.Cluster) {
	e := kaNewEnv(t, c)
	type elected struct {
		member string
		token  coordination.FencingToken
		at     time.Time
	}
	started := make(chan elected, 4)
	var mu sync.Mutex
	var seenByB []string
	start := func(name string, report bool) (cancel context.CancelFunc, done chan error) {
		callbacks := coordination.ElectorCallbacks{OnStartedLeading: func(ctx context.Context, l *coordination.Leadership) {
			started <- elected{name, l.Token(), time.Now()}
			<-ctx.Done()
		}}
		if report {
			callbacks.OnNewLeader = func(lease coordination.Lease) {
				mu.Lock()
				seenByB = append(seenByB, lease.Member.String()+"@"+lease.Token.String())
				mu.Unlock()
			}
		}
		elector, err := coordination.NewElector(ktTransport(t, c), e.role, fxMember(t, name), callbacks, e.options...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done = make(chan error, 1)
		finished := make(chan struct{})
		go func() { defer close(finished); done <- elector.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-finished })
		return cancel, done
	}
	stopA, doneA := start("node-1", false)
	a := kaWait(t, started, "leadership of node-1")
	if a.member != "node-1" {
		t.Fatalf("%s leads first, want node-1", a.member)
	}
	_, _ = start("node-2", true)
	kaEventually(t, "node-2 to see node-1 lead", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(seenByB, "node-1@"+a.token.String())
	})
	cancelled := time.Now()
	stopA()
	if err := kaWait(t, doneA, "the end of node-1's Run"); err != nil {
		t.Fatalf("Run of node-1 after its context ended = %v, want nil", err)
	}
	returned := time.Since(cancelled)
	b := kaWait(t, started, "leadership of node-2")
	handover := b.at.Sub(cancelled)
	t.Logf("node-1's Run returned %v after its cancel; node-2 led %v after it (lease %v)", returned, handover, ktLease.Duration())
	if b.member != "node-2" || b.token == a.token {
		t.Fatalf("%s took over with %s, want node-2 with a new token", b.member, b.token)
	}
	if returned > 3*time.Second || handover > ktLease.Duration() {
		t.Fatalf("Run returned after %v and node-2 led after %v: the resignation did not hand over (lease %v)", returned, handover, ktLease.Duration())
	}
	status, err := coordination.DescribeLeadership(ktContext(t), e.auditor, e.role)
	if err != nil || !status.Authoritative(b.token) {
		t.Fatalf("DescribeLeadership = %v, %v; want %s", status, err, b.token)
	}
	kaEventually(t, "node-2 to see itself lead", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(seenByB, "node-2@"+b.token.String())
	})
}

// kaEventually polls cond for up to 20 s.
func kaEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kaObserveSeesTryAcquire: an observer sees one member take the role with
// TryAcquire and another try it, be refused, and leave.
func kaObserveSeesTryAcquire(t *testing.T, c *kafkatest.Cluster) {
	e := kaNewEnv(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var lines []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for change, err := range coordination.Observe(ctx, ktTransport(t, c), []coordination.Role{e.role}, e.options...) {
			if err != nil {
				t.Logf("Observe: %v", err)
				continue
			}
			if change.Kind == coordination.ChangeRenewed {
				continue
			}
			mu.Lock()
			lines = append(lines, strings.TrimSpace(change.Kind.String()+" "+change.Member.String()))
			mu.Unlock()
		}
	}()
	defer func() { cancel(); <-done }()
	seen := func(want ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Equal(lines, want)
		}
	}
	kaEventually(t, "the state", seen("state", "synced"))

	leader, err := coordination.TryAcquire(ktContext(t), ktTransport(t, c), e.role, fxMember(t, "node-1"), e.options...)
	if err != nil {
		t.Fatalf("TryAcquire of a free role: %v", err)
	}
	kaEventually(t, "the first leadership", seen("state", "synced", "registered node-1", "granted node-1"))
	_, err = coordination.TryAcquire(ktContext(t), ktTransport(t, c), e.role, fxMember(t, "node-2"), e.options...)
	var turn *coordination.TurnError
	if !errors.As(err, &turn) || turn.Lease == nil || turn.Lease.Member.String() != "node-1" || turn.Lease.Token != leader.Token() {
		t.Fatalf("TryAcquire of a held role = %v, want a TurnError naming node-1 under %s", err, leader.Token())
	}
	if err := leader.Resign(ktContext(t)); err != nil {
		t.Fatal(err)
	}
	// node-2's registration and its tombstone come as two events, or as
	// none when one fetch holds both: Observe folds the records of one
	// fetch by key, as the package doc says.
	kaEventually(t, "the resignation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(lines, "released node-1") && slices.Contains(lines, "deregistered node-1")
	})
	mu.Lock()
	got := slices.Clone(lines)
	mu.Unlock()
	if len(got) >= 6 && got[4] == "registered node-2" && got[5] == "deregistered node-2" {
		got = slices.Delete(got, 4, 6)
	}
	if len(got) == 6 {
		slices.Sort(got[4:])
	}
	if want := []string{"state", "synced", "registered node-1", "granted node-1", "deregistered node-1", "released node-1"}; !slices.Equal(got, want) {
		t.Fatalf("Observe yielded %q; want %q, with the pair of node-2's registration and tombstone after the grant, or without it", lines, want)
	}
}

// kaDeviceRefusesTheDeposedLeader: the reader yields each command with the
// token of its batch and its headers; the gate admits the coordinator's
// token and refuses the deposed leader's and a plain producer's.
func kaDeviceRefusesTheDeposedLeader(t *testing.T, c *kafkatest.Cluster) {
	e := kaNewEnv(t, c)
	commands := c.CreateTopic(t, "commands", 2, nil)
	ctx := ktContext(t)
	first, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-1"), e.options...)
	if err != nil {
		t.Fatal(err)
	}
	headers := []coordination.RecordHeader{{Key: "trace-id", Value: []byte("4bf92f35")}, {Key: "content-type", Value: []byte("text/plain")}}
	if err := first.Write(ctx, coordination.GuardedRecord{Topic: commands, Partition: 0, Value: []byte("open"), Headers: headers}); err != nil {
		t.Fatal(err)
	}
	// A forced failover: a newer epoch, the lease and node-1 cleared.
	operator := ktTransport(t, c)
	token, err := operator.AcquireEpoch(ctx, e.role)
	if err != nil {
		t.Fatal(err)
	}
	tp := ktPartition(t, e.role, e.options)
	if err := operator.WriteLease(ctx, tp, token, coordination.EncodeKey(coordination.LeaseKey(e.role)), nil); err != nil {
		t.Fatal(err)
	}
	if err := operator.Append(ctx, tp, coordination.EncodeKey(coordination.RegistrationKey(e.role, first.Member())), nil); err != nil {
		t.Fatal(err)
	}
	second, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-2"), e.options...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Resign(context.Background()) }()
	if err := second.Write(ctx, coordination.GuardedRecord{Topic: commands, Partition: 1, Value: []byte("close")}); err != nil {
		t.Fatal(err)
	}
	ktMustFence(t, "the deposed leader's write", first.Write(ctx, coordination.GuardedRecord{Topic: commands, Partition: 0, Value: []byte("straggler")}))
	plain := c.Client(t, kgo.DefaultProduceTopic(commands), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("unguarded")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reader, err := device.NewKafkaCommandReader([]string{commands}, nil, c.Brokers...)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	read := make(map[string]device.Command)
	readCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for command, err := range reader.Commands(readCtx) {
		if err != nil {
			t.Logf("Commands: %v", err)
			continue
		}
		read[string(command.Value)] = command
		if len(read) == 3 {
			break
		}
	}
	extra, cancelExtra := context.WithTimeout(ctx, time.Second) // a record too many?
	for command, err := range reader.Commands(extra) {
		if err == nil {
			read[string(command.Value)] = command
		}
	}
	cancelExtra()
	if len(read) != 3 || read["straggler"].Value != nil {
		t.Fatalf("read %d commands %v, want open, close and unguarded; never the fenced straggler", len(read), slices.Collect(func(yield func(string) bool) {
			for k := range read {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if got := read["open"]; got.Token != first.Token() || len(got.Headers) != 2 || got.Headers[0].Key != "trace-id" || string(got.Headers[0].Value) != "4bf92f35" || got.Headers[1].Key != "content-type" {
		t.Fatalf("open = %+v, want token %s and the two headers in order", got, first.Token())
	}
	if got := read["close"]; got.Token != second.Token() || got.Partition != 1 || got.Headers != nil {
		t.Fatalf("close = %+v, want token %s on partition 1 without headers", got, second.Token())
	}

	gate, err := device.NewGate(e.auditor, e.role)
	if err != nil {
		t.Fatal(err)
	}
	var refused *device.FencedTokenError
	for _, value := range []string{"open", "unguarded"} {
		err := gate.Admit(ctx, read[value].Token)
		if !errors.As(err, &refused) || refused.Current != second.Token() {
			t.Fatalf("Admit of %q under %s = %v, want a refusal naming %s", value, read[value].Token, err, second.Token())
		}
	}
	if err := gate.Admit(ctx, read["close"].Token); err != nil {
		t.Fatalf("Admit of the successor's command: %v", err)
	}
}

// TestKafkaRenewDeadlineFake: on kfake, a holder whose renewals the broker
// no longer confirms (every transactional produce of the role answers
// NOT_ENOUGH_REPLICAS) ends its leadership at its last grant plus the
// renew deadline, by its own clock, and before its lease's deadline.
func TestKafkaRenewDeadlineFake(t *testing.T) {
	c := kafkatest.Fake(t)
	e := kaNewEnv(t, c)
	const renewDeadline = 4 * time.Second // lease 6 s, renew every 2 s
	holder, err := coordination.AcquireLeadership(ktContext(t), ktTransport(t, c), e.role, fxMember(t, "node-1"),
		append(e.options, coordination.WithRenewDeadline(renewDeadline))...)
	if err != nil {
		t.Fatal(err)
	}
	txnID := e.role.String()
	c.Fake.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || *req.TransactionID != txnID {
			return nil, nil, false
		}
		return kafkatest.RefusedProduce(req, kerr.NotEnoughReplicas.Code), nil, true
	})
	select {
	case <-holder.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the leadership did not end within 20 s of the last confirmed renewal")
	}
	ended := time.Now().UnixMilli()
	last := holder.Lease()
	t.Logf("ended %d ms after the last confirmed grant (renew deadline %v, lease %v)", ended-last.GrantedAt, renewDeadline, ktLease.Duration())
	if !errors.Is(holder.Err(), coordination.ErrRenewDeadline) || !errors.Is(context.Cause(holder.Context()), coordination.ErrRenewDeadline) {
		t.Fatalf("Err = %v, cause %v; want ErrRenewDeadline", holder.Err(), context.Cause(holder.Context()))
	}
	if ended < last.GrantedAt+renewDeadline.Milliseconds() || ended >= last.Deadline {
		t.Fatalf("ended at %d ms; want from the grant %d + %v and before the lease deadline %d", ended, last.GrantedAt, renewDeadline, last.Deadline)
	}
}

// kaSpecDefaultsWriteTheTwoKinds (issue 17): a holder and a waiting
// standby with the library's defaults (only the timings, topic and
// partitions set) for five lease durations write the specification's two
// record kinds and nothing else, and ReadPartition returns every committed
// record, each renewal included.
func kaSpecDefaultsWriteTheTwoKinds(t *testing.T, c *kafkatest.Cluster) {
	e := kaNewEnv(t, c)
	ctx := ktContext(t)
	lease := klConfig(t, 2*time.Second, 500*time.Millisecond, 500*time.Millisecond)
	options := append(slices.Clone(e.options), coordination.WithLeaseConfig(lease), coordination.WithLogger(slog.New(slog.DiscardHandler)))
	// The transports carry the lease too (one door for the lease: a
	// transport of another duration would refuse the option).
	leased := func() *coordination.KafkaTransport {
		transport, err := coordination.NewKafkaTransport(lease, c.Brokers...)
		if err != nil {
			t.Fatalf("NewKafkaTransport: %v", err)
		}
		t.Cleanup(transport.Close)
		return transport
	}
	holderTransport := leased()
	holder, err := coordination.AcquireLeadership(ctx, holderTransport, e.role, fxMember(t, "node-1"), options...)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	standby := make(chan error, 1)
	standbyTransport := leased()
	go func() {
		_, err := coordination.AcquireLeadership(waitCtx, standbyTransport, e.role, fxMember(t, "node-2"), options...)
		standby <- err
	}()
	time.Sleep(5 * lease.Duration())
	stopWaiting()
	if err := kaWait(t, standby, "the end of the standby's wait"); !errors.Is(err, context.Canceled) {
		t.Fatalf("the standby's AcquireLeadership = %v; want context.Canceled while the holder renews", err)
	}
	if err := holder.Err(); err != nil {
		t.Fatalf("the holder's leadership ended: %v", err)
	}
	records, err := e.auditor.ReadPartition(ctx, holder.Partition())
	if err != nil {
		t.Fatal(err)
	}
	kinds := make(map[coordination.RecordKind]int)
	for _, r := range records {
		key, err := coordination.DecodeKey(r.Key)
		if err != nil {
			t.Fatalf("offset %d: %v", r.Offset, err)
		}
		if key.Role != e.role {
			continue
		}
		if key.Kind != coordination.KindRegistration && key.Kind != coordination.KindLease {
			t.Fatalf("offset %d holds a record of kind %s: the defaults write the layout's two kinds only", r.Offset, key.Kind)
		}
		kinds[key.Kind]++
	}
	// Two registrations (and the standby's tombstone, when its bounded
	// cleanup landed); a first lease and a renewal every 500 ms for 10 s:
	// every one of them, not the newest only.
	if kinds[coordination.KindRegistration] < 2 || kinds[coordination.KindLease] < 10 {
		t.Fatalf("the partition holds %v; want both registrations and a lease record for each renewal", kinds)
	}
	if err := holder.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// kaSpecRestartCostsOneEpoch (issue 17): with the defaults, a process that
// restarts under the member of a live lease takes the role back at once
// (well within a renew interval), with exactly one new epoch at the
// coordinator, and that epoch fences the earlier incarnation.
func kaSpecRestartCostsOneEpoch(t *testing.T, c *kafkatest.Cluster) {
	e := kaNewEnv(t, c)
	ctx := ktContext(t)
	options := append(slices.Clone(e.options), coordination.WithLogger(slog.New(slog.DiscardHandler)))
	earlier, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-1"), options...)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	restarted, err := coordination.AcquireLeadership(ctx, ktTransport(t, c), e.role, fxMember(t, "node-1"), options...)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= ktLease.RenewInterval() {
		t.Fatalf("the restart took %v; want a challenge at once, well within the renew interval %v", took, ktLease.RenewInterval())
	}
	if restarted.Token().ProducerID() != earlier.Token().ProducerID() || restarted.Token().ProducerEpoch() != earlier.Token().ProducerEpoch()+1 {
		t.Fatalf("the restart holds %s after %s; want exactly one epoch more", restarted.Token(), earlier.Token())
	}
	status, err := coordination.DescribeLeadership(ctx, e.auditor, e.role)
	if err != nil || !status.Authoritative(restarted.Token()) {
		t.Fatalf("DescribeLeadership = %v, %v; want the restart's token", status, err)
	}
	if err := earlier.Renew(ctx); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("the earlier incarnation's renewal = %v; want ErrFenced", err)
	}
	if err := restarted.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// kaCommandReaderNamesAMissingTopic: a reader of a topic that does not
// exist says so, naming it, rather than waiting without a word; once the
// topic is created, the reader reads it from its start.
func kaCommandReaderNamesAMissingTopic(t *testing.T, c *kafkatest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	missing := kafkatest.TopicName("not-yet")
	reader, err := device.NewKafkaCommandReader([]string{missing}, nil, c.Brokers...)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	next, stop := iter.Pull2(reader.Commands(ctx))
	defer stop()
	_, err, ok := next()
	if !ok || !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("first yield of a reader of a missing topic: %v (ok %v); want an error naming %s that wraps UNKNOWN_TOPIC_OR_PARTITION", err, ok, missing)
	}
	admin := c.Admin(t)
	if _, err := admin.CreateTopic(ctx, 1, int16(max(c.ReplicationFactor, 1)), nil, missing); err != nil {
		t.Fatal(err)
	}
	c.DeleteTopicAtCleanup(t, missing)
	c.WaitTopicReady(t, missing, 1)
	plain := c.Client(t, kgo.DefaultProduceTopic(missing), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		command, err, ok := next()
		if !ok {
			t.Fatal("the reader ended before it read the record of the created topic")
		}
		if err != nil {
			t.Logf("Commands: %v", err)
			continue
		}
		if string(command.Value) != "first" || command.Offset != 0 {
			t.Fatalf("read %+v, want the record \"first\" at offset 0", command)
		}
		return
	}
}
