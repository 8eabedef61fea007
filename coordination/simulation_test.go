package coordination_test

// The deterministic simulation of issue 5: many members over the in-memory
// transport of package coordinationtest, random faults and delays from a
// seed, and the invariants of the package checked after every run.
//
// Each seed runs in a testing/synctest bubble, so time is virtual: a run of a
// simulated minute takes milliseconds, and no test sleeps in real time. The
// seed fixes the members, the roles, the timings and the fault schedule.
// Goroutines that wake at one virtual instant still run in the order Go's
// scheduler picks (a select with two ready cases picks at random), as two
// members that challenge at once race in production: a rerun of a seed
// replays its fault schedule exactly, and its interleaving most of the time
// (the single-seed mode runs on one processor to make that likelier).
//
//	go test ./coordination -run '^TestSimulation$' -sim.seeds=10000
//	go test ./coordination -run '^TestSimulation$' -sim.seed=4242 -v   # one seed, with its trace
//	go test ./coordination -run '^TestSimulationExtended$' -sim.seeds=2000   # every extension option on

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

var (
	simSeeds = flag.Int("sim.seeds", 0, "seeds the simulation runs (0: 10000 for TestSimulation, 2000 for TestSimulationExtended, or 300 under the race detector)")
	simSeed  = flag.Uint64("sim.seed", 0, "run the simulation for this one seed, and log its trace")
)

const commandTopic = "commands"

// TestSimulation is the simulation with the extension options off. In one
// seed of plainSeedEvery, every other member (node-2, node-4) runs over
// coordinationtest.Plain, which hides ExtendedTransport: the probe of its
// campaigns answers nil, so they take the specification's paths (whole
// partition reads, no stable-offset hold, no tombstone writer, no guarded
// Write of the library), beside members whose probe answers the whole
// ExtendedTransport, on the same roles and under the same checks: such a
// seed has both kinds (2 to 5 members), which compete for every role. Not
// every seed: a spec-only member reads and folds its whole state partition
// at each poll, and in every seed that doubled the time of the run.
// Leadership.Write is not theirs to call: as the
// specification has it, the caller passes the token to its own guarded
// write, here the WriteGuarded of the member's in-memory transport under
// Leadership.Token; its acknowledged commands count in the same safety
// check. The run counts the leaderships over Plain, and fails when a run of
// many seeds took none or acknowledged no command of theirs (issue 30).
func TestSimulation(t *testing.T) { runSimulation(t, false) }

// plainSeedEvery: the seeds of TestSimulation divisible by it run every
// other member over coordinationtest.Plain.
const plainSeedEvery = 8

// TestSimulationExtended is the simulation with every extension option on
// (WithHeartbeatInterval, WithResignationAnchor, WithDuplicateMemberCheck,
// WithRivalMintWatch, WithRenewDeadline), the lease policy from the
// transport (the cluster's SetLeaseConfig, no lease option), and one more
// faults: a transaction of another role held open on the roles' partition
// (Cluster.OpenTransaction), which the stable-offset hold answers, and the
// state topic deleted and created again (Cluster.RecreateTopic), which the
// campaigns' fold starts over on. Every
// member runs over the in-memory transport's whole ExtendedTransport; the
// other answer of the probe (nil: a spec-only transport) runs in
// TestSimulation, so both branches that the probe selects run (issue 30).
func TestSimulationExtended(t *testing.T) { runSimulation(t, true) }

// runSimulation runs the seeds of one mode: -sim.seed alone, or
// -sim.seeds of them (by default 10 000, 2000 for the extended mode, 300
// under the race detector).
func runSimulation(t *testing.T, extended bool) {
	if *simSeed != 0 {
		// One processor: goroutines that wake at one virtual instant then
		// run in the scheduler's queue order, which makes a rerun replay the
		// run, not only its fault schedule, in practice.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		result := simulate(t, *simSeed, extended, t.Logf)
		if len(result.violations) > 0 {
			t.Fatalf("seed %d: %s", *simSeed, strings.Join(result.violations, "; "))
		}
		t.Logf("seed %d: %s", *simSeed, result)
		return
	}
	seeds := *simSeeds
	if seeds == 0 {
		seeds = 10000
		if extended {
			seeds = 2000
		}
		if raceEnabled {
			seeds = 300
		}
	}
	var totals simResult
	failures := 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		result := simulate(t, seed, extended, nil)
		totals.add(result)
		if len(result.violations) > 0 {
			failures++
			t.Errorf("seed %d: %s\n\trerun: go test ./coordination -run '^%s$' -sim.seed=%d -v",
				seed, strings.Join(result.violations, "; "), t.Name(), seed)
			if failures >= 5 {
				t.Fatalf("stopping after %d failing seeds", failures)
			}
		}
	}
	t.Logf("%d seeds: %s", seeds, totals)
	if totals.leaderships < seeds || totals.fences == 0 || totals.faults == 0 {
		t.Fatalf("the simulation exercised too little: %s", totals)
	}
	if !extended && (totals.plainLeaderships == 0 || totals.plainAcks == 0) {
		t.Fatalf("the spec-only members (coordinationtest.Plain) exercised too little: %s", totals)
	}
}

// simResult counts what one run did, and what it found wrong.
type simResult struct {
	leaderships int // leaderships acquired
	fences      int // leaderships that ended on a fence
	resigns     int
	acks        int // guarded writes acknowledged
	refused     int // guarded writes refused with ErrFenced
	faults      int
	violations  []string

	plainLeaderships int // leaderships over coordinationtest.Plain (the probe answered nil)
	plainAcks        int // commands acknowledged to those holders' own guarded writes
}

func (r *simResult) add(other simResult) {
	r.leaderships += other.leaderships
	r.fences += other.fences
	r.resigns += other.resigns
	r.acks += other.acks
	r.refused += other.refused
	r.faults += other.faults
	r.plainLeaderships += other.plainLeaderships
	r.plainAcks += other.plainAcks
	r.violations = append(r.violations, other.violations...)
}

func (r simResult) String() string {
	return fmt.Sprintf("%d leaderships (%d spec-only), %d fenced, %d resigned, %d commands acknowledged (%d spec-only), %d refused, %d faults",
		r.leaderships, r.plainLeaderships, r.fences, r.resigns, r.acks, r.plainAcks, r.refused, r.faults)
}

// skewedClock is the host clock of the bubble, offset by a skew that the
// nemesis moves.
type skewedClock struct{ skew atomic.Int64 } // in ms

func (c *skewedClock) NowMillis() int64 { return time.Now().UnixMilli() + c.skew.Load() }
func (c *skewedClock) After(extent time.Duration) <-chan time.Time {
	return coordination.SystemClock{}.After(extent)
}

// command is the payload of one guarded record: who wrote it under which
// token, and its sequence within that leadership.
type command struct {
	member string
	token  coordination.FencingToken
	seq    int64
}

func encodeCommand(c command) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.token.ProducerID()))
	b = binary.BigEndian.AppendUint16(b, uint16(c.token.ProducerEpoch()))
	b = binary.BigEndian.AppendUint64(b, uint64(c.seq))
	return append(b, c.member...)
}

func decodeCommand(b []byte) (command, error) {
	if len(b) < 18 {
		return command{}, fmt.Errorf("command of %d bytes", len(b))
	}
	token, err := coordination.NewFencingToken(int64(binary.BigEndian.Uint64(b)), int16(binary.BigEndian.Uint16(b[8:])))
	if err != nil {
		return command{}, err
	}
	return command{token: token, seq: int64(binary.BigEndian.Uint64(b[10:])), member: string(b[18:])}, nil
}

// simWorld is one run: the cluster, the members, and what they saw.
type simWorld struct {
	seed       uint64
	extended   bool       // TestSimulationExtended: every extension option on, and open transactions
	commits    []func()   // the open transactions of the nemesis, committed at the quiet period
	rng        *rand.Rand // the nemesis's: only the goroutine of run reads it
	cluster    *coordinationtest.Cluster
	roles      []coordination.Role
	options    []coordination.Option
	config     coordination.LeaseConfig
	poll       time.Duration
	logf       func(format string, args ...any)
	start      time.Time
	members    []*simMember
	mu         sync.Mutex
	acks       []command
	acquired   map[coordination.Role][]coordination.FencingToken
	held       []*coordination.Leadership              // every leadership of the run
	firstWrite map[coordination.FencingToken]time.Time // when each token's first command was acknowledged
	quiet      atomic.Bool                             // no more faults, and no more resignations
	result     simResult
	crashed    map[*coordinationtest.Transport]bool // transports of crashed incarnations: cut for good
}

// simMember is one member process: a transport, a skewed clock, and one
// campaign goroutine for each role.
type simMember struct {
	name      string
	id        coordination.MemberID
	clock     *skewedClock
	plain     bool // its campaigns run over coordinationtest.Plain(transport): the spec-only branch
	transport *coordinationtest.Transport
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func (w *simWorld) trace(format string, args ...any) {
	if w.logf != nil {
		w.logf("%8s "+format, append([]any{time.Since(w.start).Round(time.Millisecond)}, args...)...)
	}
}

// simulate runs one seed and checks it.
func simulate(t *testing.T, seed uint64, extended bool, logf func(string, ...any)) simResult {
	var result simResult
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(seed, extended, logf)
		result = w.run()
	})
	return result
}

func newWorld(seed uint64, extended bool, logf func(string, ...any)) *simWorld {
	rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15))
	lease := time.Duration(2+rng.IntN(4)) * time.Second
	renew := lease / time.Duration(3+rng.IntN(2))
	stagger := time.Duration(100+rng.IntN(900)) * time.Millisecond
	poll := time.Duration(50+rng.IntN(450)) * time.Millisecond
	config, err := coordination.NewLeaseConfig(lease, renew, stagger)
	if err != nil {
		panic(err)
	}
	names := []string{"controller", "archiver", "scheduler"} // controller and archiver share partition 12 of 16
	roles := make([]coordination.Role, 1+rng.IntN(2))
	for i := range roles {
		roles[i] = must(coordination.NewRole(names[i]))
	}
	w := &simWorld{
		seed:       seed,
		rng:        rng,
		cluster:    coordinationtest.NewCluster(),
		roles:      roles,
		config:     config,
		poll:       poll,
		logf:       logf,
		start:      time.Now(),
		acquired:   make(map[coordination.Role][]coordination.FencingToken),
		firstWrite: make(map[coordination.FencingToken]time.Time),
		options: []coordination.Option{
			coordination.WithLeaseConfig(config),
			coordination.WithPollInterval(poll),
			coordination.WithLogger(slog.New(slog.DiscardHandler)),
		},
	}
	for i := range 2 + rng.IntN(4) {
		name := fmt.Sprintf("node-%d", i+1)
		plain := !extended && seed%plainSeedEvery == 0 && i%2 == 1 // node-2 and node-4 over Plain
		w.members = append(w.members, &simMember{name: name, id: must(coordination.NewMemberID(name)), clock: &skewedClock{}, plain: plain})
	}
	if extended {
		// The transport's policy is the lease (no lease option), and every
		// extension option is on.
		w.extended = true
		w.cluster.SetLeaseConfig(config)
		w.cluster.SetTopicPartitions(coordination.StateTopic, coordination.DefaultPartitions) // CheckStateTopic compares
		w.options = []coordination.Option{
			coordination.WithPollInterval(poll),
			coordination.WithLogger(slog.New(slog.DiscardHandler)),
			coordination.WithHeartbeatInterval(renew),
			coordination.WithResignationAnchor(),
			coordination.WithDuplicateMemberCheck(),
			coordination.WithRivalMintWatch(),
			coordination.WithRenewDeadline(renew + (lease-renew)/2),
		}
	}
	w.trace("seed %d: %d members, roles %v, lease %v, renew %v, stagger %v, poll %v, extensions %t",
		seed, len(w.members), roles, lease, renew, stagger, poll, extended)
	return w
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// run plays the fault schedule, then a quiet period, and checks the
// invariants.
func (w *simWorld) run() simResult {
	for _, m := range w.members {
		w.startMember(m)
		time.Sleep(time.Millisecond) // one member at a time, in a fixed order
	}
	const faultPeriod = 40 * time.Second
	for time.Since(w.start) < faultPeriod {
		time.Sleep(time.Duration(200+w.rng.IntN(3000)) * time.Millisecond)
		w.injectFault()
	}
	// Quiet period: every member reachable, every clock true, no
	// transaction open. A role with a live member must be taken within the
	// bound.
	w.mu.Lock()
	for _, commit := range w.commits {
		commit()
	}
	w.mu.Unlock()
	for _, m := range w.members {
		if m.transport == nil {
			w.startMember(m)
		}
		m.transport.Heal()
		m.clock.skew.Store(0)
	}
	w.quiet.Store(true)
	quietAt := time.Now()
	w.trace("quiet")
	maxSkew := 5 * time.Second // the nemesis skews by at most this much
	bound := w.config.Duration() + maxSkew + w.config.ChallengeDelay(len(w.members)-1) + 2*w.poll + w.config.RenewInterval()
	time.Sleep(bound + 2*time.Second)
	w.checkLiveness(quietAt, bound)

	for _, m := range w.members {
		w.stopMember(m, true)
	}
	// End every leadership, a crashed incarnation's too, so that every
	// renewal goroutine ends with the run.
	for _, l := range w.held {
		_ = l.Resign(context.Background())
	}
	w.checkSafety()
	return w.result
}

// startMember starts a new incarnation of a member: a new transport and one
// campaign goroutine for each role.
func (w *simWorld) startMember(m *simMember) {
	ctx, cancel := context.WithCancel(context.Background())
	m.transport = w.cluster.Transport(m.name)
	m.cancel = cancel
	for _, role := range w.roles {
		m.wg.Add(1)
		go w.campaign(ctx, m, m.transport, role)
	}
	w.trace("%s starts (over Plain: %t)", m.name, m.plain)
}

// stopMember ends an incarnation. A crash leaves its leaderships to the
// fence: their renewals fail on a cut transport until the member resigns
// them at the end of the run, so their goroutines end.
func (w *simWorld) stopMember(m *simMember, resign bool) {
	if m.transport == nil {
		return
	}
	if !resign {
		// A crash is for good: no later heal of a cut reconnects it, or
		// the crashed incarnation would come back to life as a second
		// live process with the member's id.
		w.mu.Lock()
		if w.crashed == nil {
			w.crashed = make(map[*coordinationtest.Transport]bool)
		}
		w.crashed[m.transport] = true
		m.transport.Cut()
		w.mu.Unlock()
	}
	m.cancel()
	m.wg.Wait()
	if !resign {
		w.mu.Lock()
		defer w.mu.Unlock()
		m.transport = nil
		return
	}
}

// campaign competes for one role in a loop, and writes commands while it
// leads.
func (w *simWorld) campaign(ctx context.Context, m *simMember, transport *coordinationtest.Transport, role coordination.Role) {
	defer m.wg.Done()
	options := append(slices.Clone(w.options), coordination.WithClock(m.clock))
	partition := slices.Index(w.roles, role)
	var probed coordination.Transport = transport // the whole ExtendedTransport
	if m.plain {
		probed = coordinationtest.Plain(transport) // the specification's four interfaces only
	}
	for ctx.Err() == nil {
		l, err := coordination.AcquireLeadership(ctx, probed, role, m.id, options...)
		if err != nil {
			if ctx.Err() == nil {
				w.violation("%s: AcquireLeadership on %s returned %v before its context ended", m.name, role, err)
			}
			return
		}
		w.mu.Lock()
		w.held = append(w.held, l)
		w.result.leaderships++
		if m.plain {
			w.result.plainLeaderships++
		}
		w.acquired[role] = append(w.acquired[role], l.Token())
		w.mu.Unlock()
		w.trace("%s leads %s with %s", m.name, role, l.Token())
		w.lead(ctx, m, transport, l, partition)
	}
}

// lead writes commands until the leadership ends or the member stops; it
// resigns now and then. A member over Plain writes them itself under the
// leadership's token, through the WriteGuarded of its transport, since its
// leadership has no guarded writer (its Write must say so).
func (w *simWorld) lead(ctx context.Context, m *simMember, transport *coordinationtest.Transport, l *coordination.Leadership, partition int) {
	if m.plain {
		err := l.Write(ctx, coordination.GuardedRecord{Topic: commandTopic, Partition: partition, Value: []byte("probe")})
		if err == nil || !strings.Contains(err.Error(), "does not implement ExtendedTransport") {
			w.violation("%s: Write of %s over Plain returned %v, want the error that the transport has no guarded writer", m.name, l.Token(), err)
		}
	}
	// The resignations of one leadership draw from a source of its own, so
	// the nemesis's sequence does not depend on goroutine order.
	rng := rand.New(rand.NewPCG(w.seed, uint64(l.Token().ProducerID())<<16|uint64(l.Token().ProducerEpoch())))
	var seq int64
	for {
		select {
		case <-ctx.Done():
			return // a crash: the leadership is left to the fence
		case <-l.Done():
			w.ended(m, l)
			return
		case <-time.After(100 * time.Millisecond):
		}
		if rng.IntN(200) == 0 && !w.quiet.Load() {
			err := l.Resign(ctx)
			w.trace("%s resigns %s: %v", m.name, l.Role(), err)
			w.mu.Lock()
			w.result.resigns++
			w.mu.Unlock()
			w.ended(m, l)
			return
		}
		seq++
		c := command{member: m.name, token: l.Token(), seq: seq}
		record := coordination.GuardedRecord{Topic: commandTopic, Partition: partition, Value: encodeCommand(c)}
		var err error
		if m.plain {
			err = transport.WriteGuarded(ctx, l.Token(), []coordination.GuardedRecord{record})
		} else {
			err = l.Write(ctx, record)
		}
		w.mu.Lock()
		switch {
		case err == nil:
			if _, ok := w.firstWrite[c.token]; !ok {
				w.firstWrite[c.token] = time.Now()
			}
			w.acks = append(w.acks, c)
			w.result.acks++
			if m.plain {
				w.result.plainAcks++
			}
		case errors.Is(err, coordination.ErrFenced):
			w.result.refused++
		}
		w.mu.Unlock()
	}
}

// ended checks how a leadership ended: never silently.
func (w *simWorld) ended(m *simMember, l *coordination.Leadership) {
	err := l.Err()
	switch {
	case err == nil:
		w.violation("%s: Done of %s closed with a nil Err", m.name, l.Token())
	case errors.Is(err, coordination.ErrFenced):
		w.mu.Lock()
		w.result.fences++
		w.mu.Unlock()
		w.trace("%s fenced on %s: %v", m.name, l.Role(), err)
	case errors.Is(err, coordination.ErrNotHeld):
	case w.extended && errors.Is(err, coordination.ErrRenewDeadline):
		// WithRenewDeadline: the holder stopped on its own lease clock.
		w.trace("%s stopped on its renew deadline of %s: %v", m.name, l.Role(), err)
	default:
		w.violation("%s: leadership %s ended with %v, which wraps neither ErrFenced nor ErrNotHeld", m.name, l.Token(), err)
	}
	if again := l.Err(); again != err {
		w.violation("%s: Err of %s changed from %v to %v", m.name, l.Token(), err, again)
	}
	if werr := l.Write(context.Background(), coordination.GuardedRecord{Topic: commandTopic, Value: []byte("late")}); m.plain && werr == nil {
		w.violation("%s: a write over Plain after Done returned nil", m.name)
	} else if !m.plain && !errors.Is(werr, coordination.ErrNotHeld) {
		w.violation("%s: a write after Done returned %v, want ErrNotHeld", m.name, werr)
	}
}

// injectFault picks one fault at random and applies it; a fault with an
// extent heals itself from its own goroutine.
func (w *simWorld) injectFault() {
	m := w.members[w.rng.IntN(len(w.members))]
	kinds := 7
	if w.extended {
		kinds = 9
	}
	kind := w.rng.IntN(kinds)
	extent := time.Duration(500+w.rng.IntN(int(2*w.config.Duration()/time.Millisecond))) * time.Millisecond
	skew := time.Duration(w.rng.IntN(10001)-5000) * time.Millisecond
	op := coordinationtest.Op(1 + w.rng.IntN(6))
	w.mu.Lock()
	w.result.faults++
	w.mu.Unlock()
	if m.transport == nil { // crashed: restart it
		w.startMember(m)
		return
	}
	transport := m.transport
	switch kind {
	case 0: // a cut of the member's network
		w.trace("%s cut for %v", m.name, extent)
		transport.Cut()
		go func() {
			time.Sleep(extent)
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.crashed[transport] {
				transport.Heal()
			}
		}()
	case 1: // a pause: every call hangs, then lands late
		w.trace("%s paused for %v", m.name, extent)
		var releases []func()
		for op := coordinationtest.OpAcquireEpoch; op <= coordinationtest.OpWriteGuarded; op++ {
			releases = append(releases, transport.Block(op))
		}
		go func() {
			time.Sleep(extent)
			for _, release := range releases {
				release()
			}
		}()
	case 2: // a crash; the next fault that picks it restarts it
		w.trace("%s crashes", m.name)
		w.stopMember(m, false)
	case 3:
		w.trace("%s clock skewed by %v", m.name, skew)
		m.clock.skew.Store(skew.Milliseconds())
	case 4:
		w.trace("%s: next %v fails", m.name, op)
		transport.FailNext(op, errors.New("injected transient failure"))
	case 5:
		w.trace("%s: reply of next %v lost", m.name, op)
		transport.LoseNextReply(op, errors.New("injected lost reply"))
	case 6: // a delay of one kind of call
		w.trace("%s: %v delayed by %v", m.name, op, extent/4)
		release := transport.Block(op)
		go func() { time.Sleep(extent / 4); release() }()
	case 7: // a stalled transaction of another role on a role's partition
		role := w.roles[w.rng.IntN(len(w.roles))]
		partition := must(coordination.RoleTopicPartition(role))
		w.trace("a transaction open on %s for %v", partition, extent)
		opened := w.cluster.OpenTransaction(partition)
		w.mu.Lock()
		commit := sync.OnceFunc(opened) // under w.mu: both callers hold it
		w.commits = append(w.commits, commit)
		w.mu.Unlock()
		go func() {
			time.Sleep(extent)
			w.mu.Lock()
			defer w.mu.Unlock()
			commit()
		}()
	case 8: // the state topic deleted and created again: every registration and lease gone
		w.trace("the state topic deleted and created again")
		w.cluster.RecreateTopic(coordination.StateTopic, coordination.DefaultPartitions)
	}
}

func (w *simWorld) violation(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.result.violations = append(w.result.violations, fmt.Sprintf(format, args...))
	w.trace("VIOLATION: "+format, args...)
}

// checkLiveness: after the quiet instant, every role has a leader whose
// guarded write lands within the bound.
func (w *simWorld) checkLiveness(quietAt time.Time, bound time.Duration) {
	for i, role := range w.roles {
		entries := w.cluster.Entries(coordination.TopicPartition{Topic: commandTopic, Partition: i})
		if len(entries) == 0 {
			w.violation("role %s: no command was ever written", role)
			continue
		}
		last := entries[len(entries)-1]
		// The newest command must come from the newest token: the role is
		// held, and its holder writes.
		if token := w.cluster.Token(role); last.Token != token {
			w.violation("role %s: %v after the quiet instant (bound %v), the newest command is under %s, and the coordinator holds %s",
				role, time.Since(quietAt).Round(time.Millisecond), bound, last.Token, token)
		}
		// And its holder took the role within the bound: the first command
		// under that token landed no later than the quiet instant plus the
		// bound.
		w.mu.Lock()
		firstAt, ok := w.firstWrite[last.Token]
		w.mu.Unlock()
		if !ok || firstAt.Sub(quietAt) > bound {
			w.violation("role %s: the leader %s wrote its first command %v after the quiet instant, beyond the bound %v",
				role, last.Token, firstAt.Sub(quietAt), bound)
		}
	}
}

// checkSafety reads the command log of every role and checks it against
// the acknowledgements.
func (w *simWorld) checkSafety() {
	acked := make(map[command]bool, len(w.acks))
	for _, c := range w.acks {
		acked[c] = true
	}
	present := make(map[command]int)
	for i, role := range w.roles {
		newest := coordination.NoEpoch
		for _, entry := range w.cluster.Entries(coordination.TopicPartition{Topic: commandTopic, Partition: i}) {
			c, err := decodeCommand(entry.Value)
			if err != nil {
				w.violation("role %s: offset %d: %v", role, entry.Offset, err)
				continue
			}
			if c.token != entry.Token {
				w.violation("role %s: offset %d carries %s but was written under %s", role, entry.Offset, c.token, entry.Token)
			}
			if newest.Supersedes(c.token) {
				w.violation("role %s: offset %d: a command of term %s after a command of the later term %s", role, entry.Offset, c.token, newest)
			}
			if c.token.Supersedes(newest) {
				newest = c.token
			}
			present[c]++
		}
		tokens := w.acquired[role]
		for j := range tokens {
			for k := j + 1; k < len(tokens); k++ {
				if tokens[j] == tokens[k] {
					w.violation("role %s: two leaderships with token %s", role, tokens[j])
				}
			}
		}
	}
	for c := range acked {
		switch n := present[c]; {
		case n == 0:
			w.violation("lost: %s seq %d under %s was acknowledged and is not in the log", c.member, c.seq, c.token)
		case n > 1:
			w.violation("duplicate: %s seq %d under %s is in the log %d times", c.member, c.seq, c.token, n)
		}
	}
}
