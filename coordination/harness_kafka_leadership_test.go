package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The harness of the leadership suite (kafka_leadership_test.go): its
// environment over kfake or a real cluster, a member transport that can
// hold a challenge at a barrier, a log that counts its lines, and the
// waits and checks that its tests share.

// klPoll is the poll interval of every member of the suite. KafkaTransport
// follows the partition and wakes a member on every record, so the poll
// interval only bounds a missed wake-up and the retry of a failed renewal.
const klPoll = 250 * time.Millisecond

// klConfig builds a lease policy, or fails the test.
func klConfig(t *testing.T, duration, renew, stagger time.Duration) coordination.LeaseConfig {
	t.Helper()
	config, err := coordination.NewLeaseConfig(duration, renew, stagger)
	if err != nil {
		t.Fatalf("NewLeaseConfig(%v, %v, %v): %v", duration, renew, stagger, err)
	}
	return config
}

// klEnv is one scenario: a cluster, a lease policy, a state topic of 16
// partitions with a random name, and the observer transport.
type klEnv struct {
	c        *kafkatest.Cluster
	lease    coordination.LeaseConfig
	topic    string
	options  []coordination.Option // the state topic, its partitions, the lease, the poll interval
	observer *coordination.KafkaTransport
}

func klNewEnv(t *testing.T, c *kafkatest.Cluster, lease coordination.LeaseConfig) *klEnv {
	t.Helper()
	e := &klEnv{c: c, lease: lease}
	e.observer = e.transport(t)
	topic, options := ktStateTopic(t, c, e.observer, 16)
	e.topic = topic
	e.options = append(options, coordination.WithLeaseConfig(lease), coordination.WithPollInterval(klPoll))
	return e
}

// transport opens a KafkaTransport of the scenario's lease, closed when the
// test ends. The lease duration is the transaction timeout of its mints.
func (e *klEnv) transport(t *testing.T, options ...kgo.Opt) *coordination.KafkaTransport {
	t.Helper()
	if os.Getenv("KRABKA_TEST_KGO_DEBUG") != "" {
		options = append(options, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000 ") })))
	}
	transport, err := coordination.NewKafkaTransportWithOptions(e.lease, options, e.c.Brokers...)
	if err != nil {
		t.Fatalf("NewKafkaTransportWithOptions: %v", err)
	}
	t.Cleanup(transport.Close)
	return transport
}

// member opens the transport of one member process.
func (e *klEnv) member(t *testing.T, name string) *klTransport {
	t.Helper()
	return &klTransport{KafkaTransport: e.transport(t), name: name}
}

// describe asks the observer which token holds the role.
func (e *klEnv) describe(t *testing.T, role coordination.Role) coordination.LeadershipStatus {
	t.Helper()
	return klDescribe(t, e.observer, role)
}

// klDescribe asks the transaction coordinator, through observer, which
// token holds the role, within 20 s, or fails the test.
func klDescribe(t *testing.T, observer *coordination.KafkaTransport, role coordination.Role) coordination.LeadershipStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	status, err := coordination.DescribeLeadership(ctx, observer, role)
	if err != nil {
		t.Fatalf("DescribeLeadership(%s): %v", role, err)
	}
	return status
}

// state reads the role state through the observer.
func (e *klEnv) state(t *testing.T, role coordination.Role) coordination.RoleState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	state, err := coordination.DescribeRoleState(ctx, e.observer, role, e.options...)
	if err != nil {
		t.Fatalf("DescribeRoleState(%s): %v", role, err)
	}
	return state
}

// waitRoster waits until the roster of the role, in rank order, is the
// comma-separated list of members, and returns the state.
func (e *klEnv) waitRoster(t *testing.T, role coordination.Role, want string) coordination.RoleState {
	t.Helper()
	var state coordination.RoleState
	klEventually(t, 30*time.Second, "the roster of "+role.String()+" is "+want, func() (bool, string) {
		state = e.state(t, role)
		got := ktRoster(state)
		return got == want, "roster " + got
	})
	return state
}

// waitRosterHeld waits until the roster is want and the lease names
// holder, so that ranks read from the state count the holder out: a
// leadership's first lease becomes visible to another reader a little after
// AcquireLeadership returns, when the commit markers land.
func (e *klEnv) waitRosterHeld(t *testing.T, role coordination.Role, want, holder string) coordination.RoleState {
	t.Helper()
	var state coordination.RoleState
	klEventually(t, 30*time.Second, "the roster of "+role.String()+" is "+want+", held by "+holder, func() (bool, string) {
		state = e.state(t, role)
		got := ktRoster(state)
		member, held := state.Holder()
		return got == want && held && member.String() == holder, "roster " + got + ", holder " + member.String()
	})
	return state
}

// klEventually polls cond every 100 ms until it holds, and fails the test
// with what cond last said when it does not within the timeout. The timeout
// bounds a hang; it is no assertion of timing.
func klEventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s (last: %s)", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// klTransport is the KafkaTransport of one member process, with two test
// hooks. Through embedding it keeps the whole ExtendedTransport.
//
// cut stops the member's lease writes as a crash would, without a
// resignation: every WriteLease fails at once with a transient error and
// reaches no broker, so the background renewal keeps failing and retrying,
// the leadership stays alive (Done open, Err nil), and it learns nothing.
// The only honest alternative, stopping the process, would take the
// Leadership with it, and the test could not ask it what it does next. A
// call whose context carries klThrough passes the cut: the test uses it for
// the deposed leader's "next renewal", so that call, and not the cut
// background loop, is the one that reaches the broker and learns of the
// fence. Guarded writes are never cut.
//
// barrier, when set, holds the member's first AcquireEpoch until every
// member of the barrier has reached its own, so the InitProducerId
// requests of a race leave together.
type klTransport struct {
	*coordination.KafkaTransport
	name    string
	cut     atomic.Bool
	barrier *klBarrier

	mu         sync.Mutex
	arrived    bool // the first AcquireEpoch reached the barrier
	raced      bool // and the barrier released it with every member in it
	minting    int  // AcquireEpoch calls in flight
	firstWrite bool // a mint whose first lease write has not returned
	mints      []coordination.FencingToken
}

// klThrough marks a context whose lease write passes the cut.
type klThrough struct{}

func klPass(ctx context.Context) context.Context { return context.WithValue(ctx, klThrough{}, true) }

func (m *klTransport) AcquireEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, error) {
	m.mu.Lock()
	m.minting++
	first := m.barrier != nil && !m.arrived
	m.arrived = m.arrived || first
	m.mu.Unlock()
	if first {
		all := m.barrier.await(ctx)
		m.mu.Lock()
		m.raced = all
		m.mu.Unlock()
	}
	token, err := m.KafkaTransport.AcquireEpoch(ctx, role)
	m.mu.Lock()
	m.minting--
	if err == nil {
		m.mints = append(m.mints, token)
		m.firstWrite = true
	}
	m.mu.Unlock()
	return token, err
}

func (m *klTransport) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	defer func() {
		m.mu.Lock()
		m.firstWrite = false
		m.mu.Unlock()
	}()
	if m.cut.Load() && ctx.Value(klThrough{}) == nil {
		return fmt.Errorf("lease write of %s under %s: %w", m.name, token, errKlCut)
	}
	return m.KafkaTransport.WriteLease(ctx, partition, token, key, value)
}

// challenging reports a challenge in flight: a mint, or the first lease
// write after one.
func (m *klTransport) challenging() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.minting > 0 || m.firstWrite
}

func (m *klTransport) mintedTokens() []coordination.FencingToken {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mints)
}

func (m *klTransport) racedAtTheBarrier() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.raced
}

// klBarrier releases its members together once want of them arrived, or
// each one alone after klBarrierTimeout.
type klBarrier struct {
	mu      sync.Mutex
	want    int
	arrived int
	all     chan struct{}
}

const klBarrierTimeout = 15 * time.Second

func klNewBarrier(want int) *klBarrier { return &klBarrier{want: want, all: make(chan struct{})} }

// await reports whether every member arrived.
func (b *klBarrier) await(ctx context.Context) bool {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return true
	case <-time.After(klBarrierTimeout):
		return false
	case <-ctx.Done():
		return false
	}
}

// klLog is the log of one campaign and of the leadership it returns: the
// test's log while the test runs, and a copy that the test searches.
type klLog struct {
	t     *testing.T
	mu    sync.Mutex
	ended bool
	lines []string
}

// klNewLog returns the log of a member. It stops writing to the test's log
// when the test ends: a renewal goroutine may log after that.
func klNewLog(t *testing.T) *klLog {
	l := &klLog{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		l.ended = true
		l.mu.Unlock()
	})
	return l
}

func (l *klLog) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if !l.ended {
		l.t.Log(line)
	}
	return len(p), nil
}

// count returns how many lines contain s.
func (l *klLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (l *klLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.String("t", a.Value.Time().Format("15:04:05.000"))
			}
			return a
		},
	}))
}

// klCampaign is one AcquireLeadership call on its own goroutine.
type klCampaign struct {
	name    string
	log     *klLog
	started time.Time
	cancel  context.CancelFunc
	done    chan struct{}

	// Set before done closes.
	returnedAt time.Time
	leadership *coordination.Leadership
	err        error
}

// campaign starts AcquireLeadership of member over transport. When the test
// ends it cancels the call and resigns the leadership it returned.
func (e *klEnv) campaign(t *testing.T, transport coordination.Transport, role coordination.Role, member string) *klCampaign {
	t.Helper()
	log := klNewLog(t)
	options := append(slices.Clone(e.options), coordination.WithLogger(log.logger()))
	id := fxMember(t, member)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c := &klCampaign{name: member, log: log, started: time.Now(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		leadership, err := coordination.AcquireLeadership(ctx, transport, role, id, options...)
		c.returnedAt, c.leadership, c.err = time.Now(), leadership, err
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
		if c.leadership != nil {
			resign, stop := context.WithTimeout(context.Background(), 10*time.Second)
			_ = c.leadership.Resign(resign)
			stop()
		}
	})
	return c
}

func (c *klCampaign) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// await waits for the campaign to win, and fails the test if it ends
// otherwise or not within the timeout.
func (c *klCampaign) await(t *testing.T, timeout time.Duration) *coordination.Leadership {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		t.Fatalf("%s: AcquireLeadership did not return within %v", c.name, timeout)
	}
	if c.err != nil {
		t.Fatalf("%s: AcquireLeadership: %v", c.name, c.err)
	}
	return c.leadership
}

// klEnded checks that a leadership ended with an error that wraps want.
func klEnded(t *testing.T, who string, l *coordination.Leadership, want error) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: Done did not close (Err %v)", who, l.Err())
	}
	if err := l.Err(); !errors.Is(err, want) {
		t.Fatalf("%s: Err() = %v; want an error that wraps %v", who, err, want)
	}
}

// klAlive checks that a leadership holds as far as it knows.
func klAlive(t *testing.T, who string, l *coordination.Leadership) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("%s: the leadership ended: %v", who, l.Err())
	default:
	}
	if err := l.Err(); err != nil {
		t.Fatalf("%s: Err() = %v while Done is open", who, err)
	}
}

// klNewer checks that a later mint's token supersedes an earlier one: on
// Kafka by rank, on kfake only by difference (see the top of the file).
func klNewer(t *testing.T, c *kafkatest.Cluster, what string, newer, older coordination.FencingToken) {
	t.Helper()
	if newer == older || (c.Real && !newer.Supersedes(older)) {
		t.Fatalf("%s: token %s does not supersede %s", what, newer, older)
	}
}

func klRank(t *testing.T, state coordination.RoleState, member string) int {
	t.Helper()
	rank, ok := state.RankOf(fxMember(t, member))
	if !ok {
		t.Fatalf("RankOf(%s): not in the roster %s", member, ktRoster(state))
	}
	return rank
}

func klRaceRound(t *testing.T, e *klEnv, failover bool) {
	ctx := ktContext(t)
	role := ktRole(t, "race")

	var holder *klTransport
	var lh *coordination.Leadership
	if failover {
		holder = e.member(t, "holder")
		lh = e.campaign(t, holder, role, "holder").await(t, 30*time.Second)
	}
	barrier := klNewBarrier(2)
	members := []*klTransport{e.member(t, "node-1"), e.member(t, "node-2")}
	campaigns := make([]*klCampaign, len(members))
	for i, m := range members {
		m.barrier = barrier
		campaigns[i] = e.campaign(t, m, role, m.name)
	}
	if failover {
		klEventually(t, 30*time.Second, "both standbys registered", func() (bool, string) {
			got := ktRoster(e.state(t, role))
			return got == "holder,node-1,node-2" || got == "holder,node-2,node-1", "roster " + got
		})
		holder.cut.Store(true)
	}
	start := time.Now()

	// Wait for the first winner, then until the race has settled: no
	// challenge in flight, the coordinator's token is the token of a
	// returned leadership, and its lease is in the state topic, for four
	// observations in a row (more than two poll intervals).
	klEventually(t, 40*time.Second, "a member wins the race", func() (bool, string) {
		return campaigns[0].finished() || campaigns[1].finished(), ""
	})
	var status coordination.LeadershipStatus
	settled := 0
	klEventually(t, 30*time.Second, "the race settles", func() (bool, string) {
		status = e.describe(t, role)
		state := e.state(t, role)
		ok := !members[0].challenging() && !members[1].challenging() && state.Lease != nil && status.Authoritative(state.Lease.Token)
		won := false
		for _, c := range campaigns {
			won = won || (c.finished() && c.leadership != nil && status.Authoritative(c.leadership.Token()))
		}
		if ok && won {
			settled++
		} else {
			settled = 0
		}
		return settled >= 4, fmt.Sprintf("%v, lease %+v", status, state.Lease)
	})
	settledAfter := time.Since(start)

	// Every leadership that AcquireLeadership returned renews once, in the
	// order they were returned.
	var returned []*klCampaign
	for _, c := range campaigns {
		if c.finished() {
			if c.err != nil {
				t.Fatalf("%s: AcquireLeadership: %v", c.name, c.err)
			}
			returned = append(returned, c)
		}
	}
	slices.SortFunc(returned, func(x, y *klCampaign) int { return x.returnedAt.Compare(y.returnedAt) })
	var survivors []*klCampaign
	for _, c := range returned {
		err := c.leadership.Renew(ctx)
		switch {
		case err == nil:
			survivors = append(survivors, c)
		case errors.Is(err, coordination.ErrFenced):
			klEnded(t, c.name+" after its fenced renewal", c.leadership, coordination.ErrFenced)
			t.Logf("%s won AcquireLeadership with %s and lost on its renewal: %v", c.name, c.leadership.Token(), err)
		default:
			t.Fatalf("%s: renewal under %s = %v; want success or a fence", c.name, c.leadership.Token(), err)
		}
	}
	if len(survivors) != 1 {
		t.Fatalf("%d of %d returned leaderships survived their renewal; want exactly 1", len(survivors), len(returned))
	}
	winner := survivors[0]
	if final := e.describe(t, role); !final.Authoritative(winner.leadership.Token()) {
		t.Fatalf("DescribeLeadership = %v; want the survivor %s's %s", final, winner.name, winner.leadership.Token())
	}

	// The race was real: both members reached the barrier and minted.
	var mints []coordination.FencingToken
	for _, m := range members {
		if !m.racedAtTheBarrier() {
			t.Fatalf("%s did not challenge together with the other member: the barrier released it alone", m.name)
		}
		mints = append(mints, m.mintedTokens()...)
	}
	for i, x := range mints {
		for _, y := range mints[i+1:] {
			if x == y {
				t.Fatalf("two mints of the race returned the same token %s", x)
			}
		}
		if e.c.Real && x != winner.leadership.Token() && !winner.leadership.Token().Supersedes(x) {
			t.Fatalf("the survivor's %s does not supersede the race's mint %s", winner.leadership.Token(), x)
		}
	}
	t.Logf("race settled %v after it began: %s holds %s; mints node-1 %v, node-2 %v; %d of 2 AcquireLeadership calls returned",
		settledAfter.Round(time.Millisecond), winner.name, winner.leadership.Token(), members[0].mintedTokens(), members[1].mintedTokens(), len(returned))

	if failover {
		deadline := time.UnixMilli(lh.Lease().Deadline)
		t.Logf("failover: %s's AcquireLeadership returned %v after the cut holder's deadline (stagger %v)",
			winner.name, winner.returnedAt.Sub(deadline).Round(time.Millisecond), e.lease.ChallengeStagger())
		if winner.returnedAt.Before(deadline) {
			t.Fatalf("%s took over at %v, before the cut holder's deadline %v", winner.name, winner.returnedAt, deadline)
		}
		klNewer(t, e.c, "the survivor's token after the holder's", winner.leadership.Token(), lh.Token())
		klAlive(t, "the cut holder", lh)
		if err := lh.Renew(klPass(ctx)); !errors.Is(err, coordination.ErrFenced) {
			t.Fatalf("the cut holder's next renewal = %v; want an error that wraps ErrFenced", err)
		}
	}
}

// klStall is a holder of role controller that stalls in the middle of its
// lease transaction: a franz-go transactional client with transactional id
// controller (its InitProducerId mints, so it is the controller's holder),
// versions capped as KafkaTransport caps them, that begins a transaction,
// writes one lease-shaped record to the partition, and does not commit.
type klStall struct {
	client  *kgo.Client
	token   coordination.FencingToken
	began   time.Time
	timeout time.Duration
}

func klStallController(t *testing.T, e *klEnv, tp coordination.TopicPartition, timeout time.Duration) *klStall {
	t.Helper()
	ctx := ktContext(t)
	controller := fxRole(t, "controller")
	client := e.c.Client(t, kgo.TransactionalID(controller.String()), kgo.TransactionTimeout(timeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxVersions(ktLeaseVersions()))
	var id int64
	var epoch int16
	var err error
	for { // another test of the cluster may still end a transaction of controller
		if id, epoch, err = client.ProducerID(ctx); err == nil || ctx.Err() != nil {
			break
		}
		t.Logf("the stalling controller's InitProducerId: %v; retrying", err)
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the stalling controller's InitProducerId: %v", err)
	}
	s := &klStall{client: client, token: fxToken(t, id, epoch), timeout: timeout}
	if err := client.BeginTransaction(); err != nil {
		t.Fatalf("the stalling controller's BeginTransaction: %v", err)
	}
	s.began = time.Now()
	lease := e.lease.Grant(fxMember(t, "controller-1"), s.token, s.began.UnixMilli())
	record := &kgo.Record{Topic: tp.Topic, Partition: int32(tp.Partition),
		Key: coordination.EncodeKey(coordination.LeaseKey(controller)), Value: coordination.EncodeLease(lease)}
	if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
		t.Fatalf("the stalling controller's lease record: %v", err)
	}
	t.Logf("controller %s stalls inside its lease transaction on %s (transaction timeout %v)", s.token, tp, timeout)
	return s
}

// klStallOpen reports whether an open transaction holds the last stable
// offset of the partition below its high watermark, as the observer saw it
// last (at most one long poll ago).
func klStallOpen(t *testing.T, e *klEnv, tp coordination.TopicPartition) bool {
	t.Helper()
	stable, high, ok := e.observer.StableOffsets(tp)
	if !ok {
		t.Fatalf("the observer does not follow %s", tp)
	}
	return high > stable
}

// klArchiverSetup starts the healthy holder of archiver and its standby,
// on the partition that archiver shares with controller. On Kafka it first
// takes the machine-wide lock of the two transactional ids, which every test
// of the cluster shares. The standby runs over its transport as it is, or
// with its stable offsets hidden.
func klArchiverSetup(t *testing.T, e *klEnv, hideStableOffsets bool) (*coordination.Leadership, *klCampaign, *klTransport, coordination.TopicPartition) {
	t.Helper()
	e.c.LockTransactionalIDs(t, "archiver", "controller")
	controller, archiver := fxRole(t, "controller"), fxRole(t, "archiver")
	tp := ktPartition(t, archiver, e.options)
	if controllerTP := ktPartition(t, controller, e.options); tp.Partition != 12 || controllerTP != tp {
		t.Fatalf("archiver on %s and controller on %s; want both on partition 12", tp, controllerTP)
	}
	holder := e.campaign(t, e.member(t, "archiver-1"), archiver, "archiver-1")
	lh := holder.await(t, 30*time.Second)
	t.Logf("archiver-1 holds archiver with %s", lh.Token())
	standby := e.member(t, "archiver-2")
	var transport coordination.Transport = standby
	if hideStableOffsets {
		transport = klHideStable{ExtendedTransport: standby}
	}
	cs := e.campaign(t, transport, archiver, "archiver-2")
	e.waitRoster(t, archiver, "archiver-1,archiver-2")
	return lh, cs, standby, tp
}

// klForeignMint fails the test when the coordinator names a token of role
// that none of the members minted: another process of the cluster took the
// shared transactional id during the test, and the test can say nothing.
func klForeignMint(t *testing.T, e *klEnv, role coordination.Role, status coordination.LeadershipStatus, ours ...coordination.FencingToken) {
	t.Helper()
	if !status.Held || slices.Contains(ours, status.Token) {
		return
	}
	t.Fatalf("another process minted the shared transactional id %s (%v; this test minted %v): "+
		"a test that takes it without kafkatest.LockTransactionalIDs runs against the same broker", role, status, ours)
}

// klHideStable hides the stable offsets from the loop: it reports none,
// as a transport that has not read the partition yet does.
type klHideStable struct {
	coordination.ExtendedTransport
}

func (klHideStable) StableOffsets(coordination.TopicPartition) (lastStable, highWatermark int64, ok bool) {
	return 0, 0, false
}

// klCommand is one command of the guarded-write scenario: the member that
// wrote it, under which token, and its sequence number for that member.
type klCommand struct {
	member string
	token  string
	seq    int
}

func (c klCommand) String() string { return fmt.Sprintf("%s|%s|%d", c.member, c.token, c.seq) }

func klParseCommand(t *testing.T, value []byte) klCommand {
	t.Helper()
	parts := strings.Split(string(value), "|")
	if len(parts) != 3 {
		t.Fatalf("a command that the test did not write: %q", value)
	}
	seq, err := strconv.Atoi(parts[2])
	if err != nil {
		t.Fatalf("a command that the test did not write: %q", value)
	}
	return klCommand{member: parts[0], token: parts[1], seq: seq}
}

// klCommands is the ledger of the commands that the writers sent.
type klCommands struct {
	mu      sync.Mutex
	acked   map[string]bool // acknowledged: Write returned nil
	refused map[string]bool // refused with a fence: none of it may be visible
	unknown map[string]bool // failed otherwise: it may be visible, once
}

func (l *klCommands) record(command string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.acked[command] = true
	case errors.Is(err, coordination.ErrFenced):
		l.refused[command] = true
	default:
		l.unknown[command] = true
	}
}

func (l *klCommands) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// klReadCommands reads a topic of one partition read_committed from its
// start until it has read the record whose value is last, and one second
// more for a record too many.
func klReadCommands(t *testing.T, c *kafkatest.Cluster, topic, last string) []*kgo.Record {
	t.Helper()
	client := c.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	found := false
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := client.PollFetches(ctx)
		cancel()
		for _, record := range fetches.Records() {
			got = append(got, record)
			if !found && string(record.Value) == last {
				found, deadline = true, time.Now().Add(time.Second)
			}
		}
	}
	if !found {
		t.Fatalf("read %d commands of %s in 30 s, and not %s, the last one written", len(got), topic, last)
	}
	return got
}
