package coordination_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The tests of KafkaTransport's role-scoped reads (ExtendedTransport.ReadRolesFrom): the fold
// of what ReadRolesFrom returns must be the state that ReadPartition's walk
// of the whole log folds to, for a role watched from the start, for a role
// that starts being watched after the partition holds its records, for a
// read without a watch, and for a fold of incremental reads; with the
// records of several roles on one partition, superseded keys, tombstones,
// a key of no role and a record that does not decode.

func TestKafkaReadRolesFake(t *testing.T) {
	krRolesFoldAsTheWholeLog(t, kafkatest.Fake(t))
}

func TestKafkaReadRolesKafka(t *testing.T) {
	krRolesFoldAsTheWholeLog(t, kafkatest.Kafka(t))
}

// krWriter appends the records of the test with a plain client: leases
// too, which a transport writes only under an epoch.
type krWriter struct {
	t      *testing.T
	ctx    context.Context
	client *kgo.Client
	tp     coordination.TopicPartition
	at     int64 // a clock for the values
}

func newKrWriter(t *testing.T, ctx context.Context, c *kafkatest.Cluster, tp coordination.TopicPartition) *krWriter {
	client := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	return &krWriter{t: t, ctx: ctx, client: client, tp: tp}
}

func (w *krWriter) append(key, value []byte) {
	w.t.Helper()
	record := &kgo.Record{Topic: w.tp.Topic, Partition: int32(w.tp.Partition), Key: key, Value: value}
	if err := w.client.ProduceSync(w.ctx, record).FirstErr(); err != nil {
		w.t.Fatalf("produce: %v", err)
	}
}

func (w *krWriter) register(role coordination.Role, member string) {
	w.t.Helper()
	w.at++
	m := fxMember(w.t, member)
	w.append(coordination.EncodeKey(coordination.RegistrationKey(role, m)), coordination.EncodeRegistration(coordination.Registration{Member: m, RegisteredAt: w.at}))
}

func (w *krWriter) deregister(role coordination.Role, member string) {
	w.t.Helper()
	w.append(coordination.EncodeKey(coordination.RegistrationKey(role, fxMember(w.t, member))), nil)
}

func (w *krWriter) heartbeat(role coordination.Role, member string) {
	w.t.Helper()
	w.at++
	m := fxMember(w.t, member)
	w.append(coordination.EncodeKey(coordination.HeartbeatKey(role, m)), coordination.EncodeHeartbeat(coordination.Heartbeat{Member: m, SeenAt: w.at}))
}

func (w *krWriter) lease(role coordination.Role, member string, epoch int16) {
	w.t.Helper()
	w.at += 1000
	token, err := coordination.NewFencingToken(4242, epoch)
	if err != nil {
		w.t.Fatal(err)
	}
	key, value := ktLeaseRecord(w.t, role, member, token, w.at)
	w.append(key, value)
}

func (w *krWriter) clearLease(role coordination.Role) {
	w.t.Helper()
	w.append(coordination.EncodeKey(coordination.LeaseKey(role)), nil)
}

// round writes records of every role: registrations, a superseded one, a
// tombstone, heartbeats, leases and their tombstones, and records of
// other roles in between.
func (w *krWriter) round(n int, roles ...coordination.Role) {
	w.t.Helper()
	for i, role := range roles {
		w.register(role, fmt.Sprintf("m%d-a", n))
		w.register(role, fmt.Sprintf("m%d-b", n))
		w.heartbeat(role, fmt.Sprintf("m%d-a", n))
		w.lease(role, fmt.Sprintf("m%d-a", n), int16(n))
		w.register(role, fmt.Sprintf("m%d-a", n)) // supersedes, and re-ranks
		if (i+n)%2 == 0 {
			w.deregister(role, fmt.Sprintf("m%d-b", n))
			w.clearLease(role)
		}
		w.append([]byte("no role"), []byte("x"))
	}
}

// krWholeState folds ReadPartition's walk of the whole log.
func krWholeState(t *testing.T, ctx context.Context, reader *coordination.KafkaTransport, tp coordination.TopicPartition, role coordination.Role) coordination.RoleState {
	t.Helper()
	log, err := reader.ReadPartition(ctx, tp)
	if err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}
	state, _ := coordination.BuildRoleState(role, log)
	return state
}

// krSameState compares a fold with the whole log's.
func krSameState(t *testing.T, what string, got, want coordination.RoleState) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s folds to\n%+v\nthe whole log folds to\n%+v", what, got, want)
	}
	if len(want.Roster) == 0 {
		t.Fatalf("%s: the whole log folds to an empty roster; the test writes none such", what)
	}
}

func krRolesFoldAsTheWholeLog(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	plain := ktTransport(t, c)
	_, options := ktStateTopic(t, c, plain, 1)
	a, b, d, other := ktRole(t, "view-a"), ktRole(t, "view-b"), ktRole(t, "view-d"), ktRole(t, "view-other")
	tp := ktPartition(t, a, options)
	w := newKrWriter(t, ctx, c, tp)
	w.round(1, a, b, d, other)
	// A record of role a that does not decode, superseded, and a key of
	// role b cut short.
	w.append(coordination.EncodeKey(coordination.LeaseKey(a)), []byte{0, 1, 2})
	w.lease(a, "m1-a", 1) // supersedes it
	badKey := coordination.EncodeKey(coordination.LeaseKey(b))
	w.append(badKey[:len(badKey)-1], []byte("x")) // a truncated key of role b

	reader := ktTransport(t, c)
	changed, stop := reader.WatchRoles(tp, a)
	defer stop()
	records, next, err := reader.ReadRolesFrom(ctx, tp, []coordination.Role{a}, 0)
	if err != nil {
		t.Fatalf("ReadRolesFrom(a): %v", err)
	}
	for _, r := range records {
		key, err := coordination.DecodeKey(r.Key)
		if err != nil || key.Role != a {
			t.Fatalf("ReadRolesFrom(a) returned a record at %d of key %v (%v)", r.Offset, key, err)
		}
	}
	builder := coordination.NewRoleStateBuilder(a)
	for _, r := range records {
		_ = builder.Apply(r)
	}
	krSameState(t, "role a, watched from the first read", builder.Build(), krWholeState(t, ctx, reader, tp, a))

	// More records of every role; role b starts to be watched after the
	// partition holds its records, and role d is read without a watch.
	w.round(2, a, b, d, other)
	bChanged, stopB := reader.WatchRoles(tp, b)
	defer stopB()
	for _, role := range []coordination.Role{b, d} {
		// The walk of ReadPartition waits until the transport's view holds
		// the records it walked: the role's read is served from the view,
		// and lags a commit by the transit of the fetch loop's answer.
		want := krWholeState(t, ctx, reader, tp, role)
		records, _, err := reader.ReadRolesFrom(ctx, tp, []coordination.Role{role}, 0)
		if err != nil {
			t.Fatalf("ReadRolesFrom(%s): %v", role, err)
		}
		got, _ := coordination.BuildRoleState(role, records)
		krSameState(t, "role "+role.String()+", read after its records", got, want)
		described, _ := coordination.DescribeRoleState(ctx, reader, role, options...)
		krSameState(t, "DescribeRoleState("+role.String()+")", described, want)
	}
	if records, _, _ := reader.ReadRolesFrom(ctx, tp, []coordination.Role{b}, 0); len(records) == 0 {
		t.Fatalf("ReadRolesFrom(b) is empty")
	}

	// The incremental fold of role a follows the writes, as a waiting
	// member's does: a read after each wake-up.
	for n := 3; n <= 5; n++ {
		w.round(n, other, a, b)
		want := krWholeState(t, ctx, reader, tp, a) // waits until the view holds the writes too
		ktDrain(changed)
		more, n2, err := reader.ReadRolesFrom(ctx, tp, []coordination.Role{a}, next)
		if err != nil {
			t.Fatalf("ReadRolesFrom(a, %d): %v", next, err)
		}
		for _, r := range more {
			if r.Offset < next {
				t.Fatalf("ReadRolesFrom(a, %d) returned a record at %d", next, r.Offset)
			}
			_ = builder.Apply(r)
		}
		next = n2
		krSameState(t, fmt.Sprintf("role a, folded incrementally through round %d", n), builder.Build(), want)
	}
	ktDrain(bChanged)

	// The whole partition, once asked for, folds to the same states.
	log, err := reader.ReadPartition(ctx, tp)
	if err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}
	whole, _, err := reader.ReadPartitionFrom(ctx, tp, 0)
	if err != nil {
		t.Fatalf("ReadPartitionFrom: %v", err)
	}
	for _, role := range []coordination.Role{a, b, d, other} {
		got, _ := coordination.BuildRoleState(role, whole)
		want, _ := coordination.BuildRoleState(role, log)
		krSameState(t, "ReadPartitionFrom, role "+role.String(), got, want)
	}
	// The read of a role still serves once the view keeps the whole
	// partition.
	w.round(6, a, other)
	want := krWholeState(t, ctx, reader, tp, a)
	records, _, err = reader.ReadRolesFrom(ctx, tp, []coordination.Role{a}, 0)
	if err != nil {
		t.Fatalf("ReadRolesFrom(a): %v", err)
	}
	got, _ := coordination.BuildRoleState(a, records)
	krSameState(t, "role a after ReadPartitionFrom", got, want)
}

// TestKafkaReadRolesCampaign runs a standby's campaign on a partition that
// holds the records of other roles, through the ExtendedTransport.ReadRolesFrom, and checks
// that it takes the role when the holder resigns.
func TestKafkaReadRolesCampaign(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := ktContext(t)
	plain := ktTransport(t, c)
	_, options := ktStateTopic(t, c, plain, 1)
	role, other := ktRole(t, "view-campaign"), ktRole(t, "view-campaign-other")
	tp := ktPartition(t, role, options)
	w := newKrWriter(t, ctx, c, tp)
	w.round(1, other)
	options = append(options, coordination.WithLeaseConfig(ktLease))
	holderT, standbyT := ktTransport(t, c), ktTransport(t, c)
	holder, err := coordination.AcquireLeadership(ctx, holderT, role, fxMember(t, "holder"), options...)
	if err != nil {
		t.Fatalf("AcquireLeadership(holder): %v", err)
	}
	w.round(2, other)
	won := make(chan error, 1)
	go func() {
		leader, err := coordination.AcquireLeadership(ctx, standbyT, role, fxMember(t, "standby"), options...)
		if err == nil {
			err = leader.Resign(ctx)
		}
		won <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		state, err := coordination.DescribeRoleState(ctx, standbyT, role, options...)
		if err == nil && len(state.Roster) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby's registration is not visible: %+v, %v", state, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.round(3, other)
	if err := holder.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatalf("the standby's campaign: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the standby did not take the role within 15 s of the resignation")
	}
}

// TestKafkaReadRolesObserve observes two roles of a partition that holds
// the records of others through the ExtendedTransport.ReadRolesFrom: each role's first state
// is the whole log's, and a record of another role makes no change.
func TestKafkaReadRolesObserve(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := ktContext(t)
	plain := ktTransport(t, c)
	_, options := ktStateTopic(t, c, plain, 1)
	a, b, other := ktRole(t, "view-observe-a"), ktRole(t, "view-observe-b"), ktRole(t, "view-observe-other")
	tp := ktPartition(t, a, options)
	w := newKrWriter(t, ctx, c, tp)
	w.round(1, other, a, b, other)
	w.round(2, b, other, a)
	reader := ktTransport(t, c)
	want := map[coordination.Role]coordination.RoleState{a: krWholeState(t, ctx, reader, tp, a), b: krWholeState(t, ctx, reader, tp, b)}

	observeCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	states := 0
	for change, err := range coordination.Observe(observeCtx, reader, []coordination.Role{a, b}, options...) {
		if err != nil {
			t.Fatalf("Observe: %v", err)
		}
		switch change.Kind {
		case coordination.ChangeState:
			krSameState(t, "Observe's first state of "+change.Role.String(), change.State, want[change.Role])
			states++
		case coordination.ChangeSynced:
			if states != 2 {
				t.Fatalf("Observe synced after %d states; want 2", states)
			}
			w.round(3, other)       // no change
			w.register(b, "late-b") // the change
		case coordination.ChangeRegistered:
			if change.Role != b || change.Member != fxMember(t, "late-b") {
				t.Fatalf("Observe yielded the registration of %s in %s; want late-b in %s", change.Member, change.Role, b)
			}
			krSameState(t, "the state after late-b's registration", change.State, krWholeState(t, ctx, reader, tp, b))
			return
		default:
			if change.Role != a && change.Role != b {
				t.Fatalf("Observe yielded %v of role %s", change.Kind, change.Role)
			}
		}
	}
	t.Fatalf("Observe ended before late-b's registration")
}
