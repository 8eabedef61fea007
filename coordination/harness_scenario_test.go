package coordination_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// The harness of the scenario tests of leadership_test.go: members over
// the in-memory cluster of coordinationtest driven by one manual clock
// (scEnv, scClock), their campaigns, and the checks they share.

// scAt returns the instant offset milliseconds after scStart.
func scAt(offset int64) int64 { return scStart + offset }

// scClock is a ManualClock that remembers the instant of every wait, so a
// scenario steps the clock from one due wait to the next and every wait
// fires at its own instant, as on a real clock.
type scClock struct {
	*coordination.ManualClock
	mu  sync.Mutex
	due []int64
}

func (c *scClock) After(extent time.Duration) <-chan time.Time {
	c.mu.Lock()
	ms := extent.Milliseconds()
	if time.Duration(ms)*time.Millisecond < extent {
		ms++
	}
	c.due = append(c.due, c.NowMillis()+ms)
	c.mu.Unlock()
	return c.ManualClock.After(extent)
}

// nextDue returns the earliest remembered wait after now and at or before
// limit, and false when there is none.
func (c *scClock) nextDue(now, limit int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.due[:0]
	next, found := limit, false
	for _, at := range c.due {
		if at <= now {
			continue
		}
		kept = append(kept, at)
		if at <= next {
			next, found = at, true
		}
	}
	c.due = kept
	return next, found
}

type scEnv struct {
	t       *testing.T
	plain   bool
	cluster *coordinationtest.Cluster
	clock   *scClock
	role    coordination.Role
	tp      coordination.TopicPartition
	logger  *slog.Logger

	campaigns []*scCampaign // for teardown
}

// teardown ends every campaign and leadership of a failed scenario. A
// scenario that passes has ended them itself, and teardown then checks
// that.
func (e *scEnv) teardown() {
	failed := e.t.Failed()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range e.campaigns {
		if !failed && !c.finished() {
			e.t.Errorf("%s: AcquireLeadership still waits at the end of the scenario", c.member.id)
		}
		c.cancel()
		<-c.done
		if c.leadership == nil {
			continue
		}
		select {
		case <-c.leadership.Done():
		default:
			if !failed {
				e.t.Errorf("%s: the leadership still holds at the end of the scenario", c.member.id)
			}
		}
		_ = c.leadership.Resign(ended)
	}
}

// scBothPaths runs a scenario in a synctest bubble, once with the
// ExtendedTransport.ReadPartitionFrom and ExtendedTransport.WriteGuarded of the transport and once over
// coordinationtest.Plain. The bubble fails the test when a goroutine of the
// scenario is still running at its end, so every scenario resigns or
// cancels what it started. After a failure, teardown ends what is left, so
// that the failure is reported as such and the other tests still run.
func scBothPaths(t *testing.T, scenario func(t *testing.T, e *scEnv)) {
	for _, plain := range []bool{false, true} {
		name := "follower"
		if plain {
			name = "plain"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := scNewEnv(t, plain)
				defer e.teardown()
				scenario(t, e)
			})
		})
	}
}

func scNewEnv(t *testing.T, plain bool) *scEnv {
	role := fxRole(t, "controller")
	tp, err := coordination.RoleTopicPartition(role)
	if err != nil {
		t.Fatal(err)
	}
	return &scEnv{
		t:       t,
		plain:   plain,
		cluster: coordinationtest.NewCluster(),
		clock:   &scClock{ManualClock: coordination.NewManualClock(scStart)},
		role:    role,
		tp:      tp,
		logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func (e *scEnv) options(extra ...coordination.Option) []coordination.Option {
	return append([]coordination.Option{
		coordination.WithClock(e.clock),
		coordination.WithLeaseDuration(scLease),
		coordination.WithRenewInterval(scRenew),
		coordination.WithChallengeStagger(scStagger),
		coordination.WithPollInterval(scPoll),
		coordination.WithLogger(e.logger),
	}, extra...)
}

// scMember is one member process: its id, its own client of the cluster,
// and that client as the scenario hands it to AcquireLeadership.
type scMember struct {
	id        coordination.MemberID
	raw       *coordinationtest.Transport
	transport coordination.Transport
}

func (e *scEnv) member(name string) *scMember {
	raw := e.cluster.Transport(name)
	m := &scMember{id: fxMember(e.t, name), raw: raw, transport: raw}
	if e.plain {
		m.transport = coordinationtest.Plain(raw)
	}
	return m
}

// settle waits until every goroutine of the bubble has parked.
func (e *scEnv) settle() { synctest.Wait() }

// runTo moves the clock to the instant scAt(offset), through the instant of
// every wait on the way, and lets the loops run to their next wait at each
// stop.
func (e *scEnv) runTo(offset int64) {
	e.t.Helper()
	target := scAt(offset)
	for {
		synctest.Wait()
		now := e.clock.NowMillis()
		if now > target {
			e.t.Fatalf("runTo(%d): the clock already reads %d", offset, now-scStart)
		}
		if now == target {
			return
		}
		next, _ := e.clock.nextDue(now, target)
		e.clock.Set(next)
	}
}

// handOver lets the standbys see a resignation: at once over a transport
// that follows the partition, and at their next poll over one that polls.
func (e *scEnv) handOver() {
	e.t.Helper()
	e.settle()
	if e.plain {
		e.runTo(e.now() + scPoll.Milliseconds())
	}
}

// now returns the instant of the clock relative to scStart.
func (e *scEnv) now() int64 { return e.clock.NowMillis() - scStart }

// state folds the partition of the role as an operator reads it.
func (e *scEnv) state() coordination.RoleState {
	e.t.Helper()
	state, err := coordination.BuildRoleState(e.role, e.cluster.Records(e.tp))
	if err != nil {
		e.t.Fatalf("BuildRoleState: %v", err)
	}
	return state
}

// roster returns the member names of the roster in rank order.
func (e *scEnv) roster() string {
	var names []string
	for _, entry := range e.state().Roster {
		names = append(names, entry.Member.String())
	}
	return strings.Join(names, ",")
}

// scCampaign is one AcquireLeadership call on a goroutine of its own.
type scCampaign struct {
	member     *scMember
	done       chan struct{}
	cancel     context.CancelFunc
	leadership *coordination.Leadership
	err        error
}

// campaign starts AcquireLeadership for the member, and returns once the
// call has parked or returned.
func (e *scEnv) campaign(m *scMember, extra ...coordination.Option) *scCampaign {
	ctx, cancel := context.WithCancel(context.Background())
	return e.campaignCtx(ctx, cancel, m, extra...)
}

func (e *scEnv) campaignCtx(ctx context.Context, cancel context.CancelFunc, m *scMember, extra ...coordination.Option) *scCampaign {
	c := &scCampaign{member: m, done: make(chan struct{}), cancel: cancel}
	e.campaigns = append(e.campaigns, c)
	go func() {
		defer close(c.done)
		c.leadership, c.err = coordination.AcquireLeadership(ctx, m.transport, e.role, m.id, e.options(extra...)...)
	}()
	synctest.Wait()
	return c
}

// finished reports whether the call has returned.
func (c *scCampaign) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// won returns the leadership of a call that must have returned with one.
func (c *scCampaign) won(t *testing.T) *coordination.Leadership {
	t.Helper()
	if !c.finished() {
		t.Fatalf("%s: AcquireLeadership is still waiting", c.member.id)
	}
	if c.err != nil {
		t.Fatalf("%s: AcquireLeadership: %v", c.member.id, c.err)
	}
	return c.leadership
}

// waiting fails the test when the call has returned.
func (c *scCampaign) waiting(t *testing.T, when string) {
	t.Helper()
	if c.finished() {
		t.Fatalf("%s: %s: AcquireLeadership returned (%v, %v), want it still waiting", c.member.id, when, c.leadership, c.err)
	}
}

// abandon cancels a call that is still waiting and returns its error.
func (c *scCampaign) abandon(t *testing.T) error {
	t.Helper()
	c.waiting(t, "abandon")
	c.cancel()
	<-c.done
	if c.leadership != nil {
		t.Fatalf("%s: a cancelled AcquireLeadership returned a leadership", c.member.id)
	}
	return c.err
}

// acquireNow runs AcquireLeadership for a member that must win at once,
// with no move of the clock.
func (e *scEnv) acquireNow(m *scMember, extra ...coordination.Option) *coordination.Leadership {
	e.t.Helper()
	c := e.campaign(m, extra...)
	defer c.cancel()
	return c.won(e.t)
}

// resign resigns a leadership that must end cleanly.
func (e *scEnv) resign(l *coordination.Leadership) {
	e.t.Helper()
	if err := l.Resign(context.Background()); err != nil {
		e.t.Fatalf("%s: Resign: %v", l.Member(), err)
	}
	scEnded(e.t, l, coordination.ErrNotHeld)
}

// scEnded checks that Done is closed and that Err wraps want.
func scEnded(t *testing.T, l *coordination.Leadership, want error) {
	t.Helper()
	select {
	case <-l.Done():
	default:
		t.Fatalf("%s: Done is open, want it closed", l.Member())
	}
	if err := l.Err(); !errors.Is(err, want) {
		t.Fatalf("%s: Err = %v, want an error that wraps %v", l.Member(), err, want)
	}
}

// scHolds checks that Done is open and Err is nil.
func scHolds(t *testing.T, l *coordination.Leadership) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("%s: Done closed (%v), want the leadership held", l.Member(), l.Err())
	default:
	}
	if err := l.Err(); err != nil {
		t.Fatalf("%s: Err = %v while Done is open", l.Member(), err)
	}
}

// scCalls snapshots the calls of every Op of a transport.
func scCalls(m *scMember) map[coordinationtest.Op]int {
	calls := make(map[coordinationtest.Op]int)
	for _, op := range []coordinationtest.Op{
		coordinationtest.OpAcquireEpoch, coordinationtest.OpDescribeEpoch, coordinationtest.OpReadPartition,
		coordinationtest.OpAppend, coordinationtest.OpWriteLease, coordinationtest.OpWriteGuarded,
	} {
		calls[op] = m.raw.Calls(op)
	}
	return calls
}

func scSameCalls(t *testing.T, m *scMember, before map[coordinationtest.Op]int, why string) {
	t.Helper()
	for op, n := range scCalls(m) {
		if n != before[op] {
			t.Errorf("%s: %s: %d calls of %s, want %d", m.id, why, n, op, before[op])
		}
	}
}

func (e *scEnv) checkToken(want coordination.FencingToken, when string) {
	e.t.Helper()
	if got := e.cluster.Token(e.role); got != want {
		e.t.Fatalf("%s: the coordinator holds %s, want %s", when, got, want)
	}
}

// checkLeaseTombstone checks that the last lease record that the member of
// l wrote is a tombstone under the token of l.
func (e *scEnv) checkLeaseTombstone(l *coordination.Leadership) {
	e.t.Helper()
	leaseKey := string(coordination.EncodeKey(coordination.LeaseKey(e.role)))
	var last coordinationtest.Entry
	for _, entry := range e.cluster.Entries(e.tp) {
		if entry.Writer == l.Member().String() && string(entry.Key) == leaseKey {
			last = entry
		}
	}
	if !coordination.IsTombstone(last.Value) || last.Token != l.Token() {
		e.t.Fatalf("the last lease record of %s is %+v, want a tombstone under %s", l.Member(), last, l.Token())
	}
}

func (e *scEnv) checkNoWatchers(when string) {
	e.t.Helper()
	if got := e.cluster.Watchers(e.tp); got != 0 {
		e.t.Fatalf("%s: %d watches of %s are not stopped", when, got, e.tp)
	}
}

var scCommands = coordination.GuardedRecord{Topic: "commands", Partition: 0, Value: []byte("open valve")}
