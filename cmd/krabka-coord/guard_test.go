package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

func TestLeaseGuardArithmetic(t *testing.T) {
	config, err := coordination.NewLeaseConfig(30*time.Second, 10*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	guard := leaseGuard{grace: 10 * time.Second, skew: time.Second, margin: guardMargin}
	deadline := int64(1_000_000)
	if got := guard.killAt(deadline).UnixMilli(); got != deadline-2000 {
		t.Errorf("killAt = %d; want the deadline less the skew and the margin, %d", got, deadline-2000)
	}
	if got := guard.termAt(deadline).UnixMilli(); got != deadline-12000 {
		t.Errorf("termAt = %d; want killAt less the grace, %d", got, deadline-12000)
	}
	// The renew deadline ends the leadership on the monotonic clock: after
	// the wall clock stepped back an hour, the lease's killAt lies an hour
	// after term, and SIGKILL still follows SIGTERM by the grace; after a
	// step forward, killAt has passed and comes first.
	now := time.Now()
	steppedBack := now.Add(time.Hour).UnixMilli()
	if got := guard.killAfterTerm(steppedBack, now); !got.Equal(now.Add(guard.grace)) {
		t.Errorf("killAfterTerm after a step back of 1h = %v after term; want the grace, %v", got.Sub(now), guard.grace)
	}
	if got := guard.killAfterTerm(steppedBack, now); got.Sub(now) != guard.grace {
		t.Errorf("killAfterTerm is not measured on now's monotonic clock: %v", got.Sub(now))
	}
	steppedForward := now.Add(-time.Hour).UnixMilli()
	if got := guard.killAfterTerm(steppedForward, now); got.UnixMilli() != guard.killAt(steppedForward).UnixMilli() {
		t.Errorf("killAfterTerm after a step forward = %v; want the lease's killAt %v", got, guard.killAt(steppedForward))
	}
	if got := guard.window(config); got != 18*time.Second {
		t.Errorf("window = %v; want 30s - 10s - 1s - 1s = 18s", got)
	}
	if err := guard.check(config); err != nil {
		t.Errorf("check of the defaults: %v", err)
	}
	tight, _ := coordination.NewLeaseConfig(6*time.Second, 2*time.Second, time.Second)
	if err := (leaseGuard{grace: 2 * time.Second, skew: time.Second, margin: guardMargin}).check(tight); err == nil {
		t.Error("check of a window of 2s with a renew interval of 2s: no error")
	}
}

// run's check of the lease guard and the library's validation of the
// renew deadline that run acquires with agree: a setting that run accepts
// is one that WithRenewDeadline accepts, and a setting that run refuses
// (with its message that names the flags) is one the library would refuse
// too. The renew deadline ends the leadership at the guard's SIGTERM
// instant: the grant plus the window is termAt of the lease's deadline.
func TestLeaseGuardAgreesWithRenewDeadline(t *testing.T) {
	transport := coordinationtest.NewCluster().Transport("A")
	role, member := mustRole(t, "guarded"), mustMember(t, "A")
	work := coordination.ElectorCallbacks{OnStartedLeading: func(context.Context, *coordination.Leadership) {}}
	accepted, refused := 0, 0
	for _, lease := range []time.Duration{time.Second, 3 * time.Second, 6 * time.Second, 30 * time.Second} {
		for _, renew := range []time.Duration{250 * time.Millisecond, time.Second, 2 * time.Second, 10 * time.Second} {
			config, err := coordination.NewLeaseConfig(lease, renew, min(renew, time.Second))
			if err != nil {
				continue // not a lease that the flags allow
			}
			for _, grace := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 10 * time.Second} {
				for _, skew := range []time.Duration{0, 200 * time.Millisecond, time.Second} {
					guard := leaseGuard{grace: grace, skew: skew, margin: guardMargin}
					runErr := guard.check(config)
					_, libErr := coordination.NewElector(transport, role, member, work, coordination.WithLeaseConfig(config), guard.option(config))
					if (runErr == nil) != (libErr == nil) {
						t.Errorf("lease %v, renew %v, grace %v, skew %v (window %v): run's check %v, but WithRenewDeadline %v",
							lease, renew, grace, skew, guard.window(config), runErr, libErr)
					}
					if runErr == nil {
						accepted++
						grant := int64(1_000_000)
						if got, want := guard.termAt(grant+lease.Milliseconds()), time.UnixMilli(grant).Add(guard.window(config)); !got.Equal(want) {
							t.Errorf("termAt of the deadline %v; want the grant plus the window, %v", got, want)
						}
						continue
					}
					refused++
					var exit *exitError
					if !errors.As(runErr, &exit) || exit.code != exitUsage || !strings.Contains(runErr.Error(), "--lease-duration") || !strings.Contains(runErr.Error(), "--grace") {
						t.Errorf("run's refusal %v; want a usage error that names the flags", runErr)
					}
				}
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("%d settings accepted, %d refused: the table tests no boundary", accepted, refused)
	}
}

// TestRunLeaseGuard: the holder's network is cut while its command runs;
// the standby takes the role at the lease deadline and starts its own
// command. The lease guard must have killed the holder's command (which
// ignores SIGTERM) before: the last heartbeat of the first copy comes
// before the first of the second. Both run in process, on the real broker
// and on kfake.
func TestRunLeaseGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, name := range []string{"kfake", "kafka"} {
		for _, fault := range []string{"refused", "dropped"} {
			t.Run(name+"/"+fault, func(t *testing.T) {
				var cluster *kafkatest.Cluster
				if name == "kafka" {
					cluster = kafkatest.Kafka(t)
				} else {
					cluster = kafkatest.Fake(t)
				}
				testRunLeaseGuard(t, cluster, fault == "dropped")
			})
		}
	}
}

func testRunLeaseGuard(t *testing.T, cluster *kafkatest.Cluster, drop bool) {
	brokers := strings.Join(cluster.Brokers, ",")
	topic := kafkatest.TopicName("krabka-coord-guard")
	if cluster.Real {
		cluster.DeleteTopicAtCleanup(t, topic)
	}
	if code, _, stderr := runCLI(t, nil, "create-topic", "--brokers", brokers, "--topic", topic, "--partitions", "1"); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	role := kafkatest.TopicName("guard")
	file := t.TempDir() + "/heartbeats"
	t.Setenv(heartbeatEnv, file)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := func(member string) []string {
		return []string{"run", role, member, "--brokers", brokers, "--topic", topic, "--partitions", "1",
			"--lease-duration", "6s", "--renew-interval", "1s", "--challenge-stagger", "1s", "--poll-interval", "200ms",
			"--grace", "1s", "--max-clock-skew", "500ms",
			"--", self, "-test.run=^TestHeartbeatHelper$"}
	}

	start := func(member string, dial *cutDialer) (<-chan cliResult, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		return startCLI(ctx, func(g *globals) {
			if dial != nil {
				g.dial = dial.dial
			}
		}, args(member)...).done, cancel
	}

	network := newCutDialer(t)
	holderDone, stopHolder := start("A", network)
	defer stopHolder()
	waitFile(t, file, "start A ", 30*time.Second)
	standbyDone, stopStandby := start("B", nil)
	defer stopStandby()
	// B registers behind A.
	waitDescribe(t, []string{"--brokers", brokers, "--topic", topic, "--partitions", "1"}, role, func(r describeJSON) bool {
		return slices.ContainsFunc(r.Roster, func(e rosterJSON) bool { return e.Member == "B" })
	})

	cutAt := time.Now()
	if drop {
		network.dropNow()
	} else {
		network.cutNow()
	}
	waitFile(t, file, "start B ", 30*time.Second)
	var holder cliResult
	select {
	case holder = <-holderDone:
	case <-time.After(20 * time.Second):
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatal("the cut-off holder's run did not end")
	}
	starts, lasts := heartbeats(t, file)
	lastA, startB := lasts["A"], starts["B"]
	t.Logf("cut at +0; A's last heartbeat %v after the cut; B's command started %v after the cut; gap %v",
		time.Duration(lastA-cutAt.UnixNano()), time.Duration(startB-cutAt.UnixNano()), time.Duration(startB-lastA))
	if lastA >= startB {
		t.Fatalf("A's command beat %v after B's command started: two copies acted at once", time.Duration(lastA-startB))
	}
	// The holder either learned that its producer is lost, or its lease
	// guard fired; either way its command was dead before B's started.
	if holder.code != exitFenced {
		t.Fatalf("the cut-off holder: exit %d, stderr %q; want %d", holder.code, holder.stderr, exitFenced)
	}
	t.Logf("the holder ended with: %s", lastLine(holder.stderr))
	stopStandby()
	// B's run ends on its context: it resigns and stops its command.
	select {
	case <-standbyDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the standby's run did not end")
	}
}

// lastLine is the last line of text.
func lastLine(text string) string {
	text = strings.TrimRight(text, "\n")
	return text[strings.LastIndex(text, "\n")+1:]
}

// The lease guard itself: a holder whose renewals fail without ending the
// leadership (the in-memory transport cut off: every call fails at once,
// which the leadership retries) keeps its command until the guard's
// SIGTERM instant, where its renew deadline ends the leadership
// (ErrRenewDeadline), and the command, which ignores SIGTERM, is dead by
// the guard's SIGKILL instant, before the lease deadline less the skew and
// the margin.
func TestCommandRunGuardStopsTheCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	file := t.TempDir() + "/heartbeats"
	t.Setenv(heartbeatEnv, file)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cluster := coordinationtest.NewCluster()
	transport := cluster.Transport("A")
	role, member := mustRole(t, "guarded"), mustMember(t, "A")
	config, err := coordination.NewLeaseConfig(3*time.Second, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	guard := leaseGuard{grace: 500 * time.Millisecond, skew: 200 * time.Millisecond, margin: guardMargin}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leadership, err := coordination.AcquireLeadership(ctx, transport, role, member,
		coordination.WithLeaseConfig(config), coordination.WithPollInterval(100*time.Millisecond), guard.option(config))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	g := &globals{stdout: &stdout, stderr: &stderr, output: outputJSON}
	partition := leadership.Partition()
	h := &holder{g: g, flags: &holdFlags{}, role: role, member: member, config: config, partition: partition, metered: transport,
		metrics: newMemberMetrics(role, partition, config.Duration()), stepDownRequests: make(chan struct{}, 1)}
	h.metrics.acquired(leadership.Token())
	r := &commandRun{h: h, leadership: leadership, signals: &interrupts{ctx: context.Background()}, guard: guard,
		path: self, args: []string{self, "-test.run=^TestHeartbeatHelper$"}}
	type outcome struct {
		code int
		end  commandEnd
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		code, end, err := r.run()
		done <- outcome{code, end, err}
	}()
	waitFile(t, file, "start A ", 10*time.Second)
	transport.Cut()
	lease := leadership.Lease()
	var got outcome
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the guard did not stop the command")
	}
	if got.end != endGuard || got.code != 128+int(syscall.SIGKILL) {
		t.Fatalf("run ended %d with code %d (%v); want the guard (%d) and SIGKILL's %d", got.end, got.code, got.err, endGuard, 128+int(syscall.SIGKILL))
	}
	var exit *exitError
	if !errors.As(got.err, &exit) || exit.code != exitFenced || !strings.Contains(exit.err.Error(), "lease guard") {
		t.Fatalf("error %v; want exit code 3 and the lease guard", got.err)
	}
	if !errors.Is(leadership.Err(), coordination.ErrRenewDeadline) || !errors.Is(context.Cause(leadership.Context()), coordination.ErrRenewDeadline) {
		t.Fatalf("the leadership ended with %v (cause %v); want ErrRenewDeadline", leadership.Err(), context.Cause(leadership.Context()))
	}
	_, lasts := heartbeats(t, file)
	// The last confirmed lease may be the one read above or a renewal
	// that landed just before the cut.
	killAt := time.UnixMilli(leadership.Lease().Deadline).Add(-guard.skew - guard.margin)
	if last := time.Unix(0, lasts["A"]); last.After(killAt.Add(100 * time.Millisecond)) {
		t.Fatalf("the command beat at %v, after the guard's SIGKILL instant %v", last.Format(time.StampMilli), killAt.Format(time.StampMilli))
	}
	if termAt := time.UnixMilli(lease.Deadline).Add(-guard.skew - guard.margin - guard.grace); time.Unix(0, lasts["A"]).Before(termAt.Add(-200 * time.Millisecond)) {
		t.Fatalf("the command stopped at %v, before the guard's SIGTERM instant %v: the guard fired early", time.Unix(0, lasts["A"]).Format(time.StampMilli), termAt.Format(time.StampMilli))
	}
	if !strings.Contains(stdout.String(), `"event":"guard"`) || !strings.Contains(stdout.String(), `"event":"command_exited"`) {
		t.Fatalf("events: %s", stdout.String())
	}
}

func mustRole(t *testing.T, name string) coordination.Role {
	t.Helper()
	role, err := coordination.NewRole(name)
	if err != nil {
		t.Fatal(err)
	}
	return role
}

// TestRunGuardRenewDeadlineFake: run's lease guard is the leadership's
// renew deadline. On kfake, once the holder's command runs, every
// transactional produce of the role answers NOT_ENOUGH_REPLICAS, so no
// renewal is confirmed while the producer, and the leadership, stay
// alive. The library ends the leadership with ErrRenewDeadline (its
// warning names the renew deadline) at the guard's SIGTERM instant, not
// before, and run stops the command (which ignores SIGTERM) with the
// guard event and exit code 3: SIGKILL by the lease deadline less the
// skew and the margin, before the lease deadline.
func TestRunGuardRenewDeadlineFake(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	cluster := kafkatest.Fake(t)
	brokers := strings.Join(cluster.Brokers, ",")
	topic := kafkatest.TopicName("krabka-coord-guard")
	if code, _, stderr := runCLI(t, nil, "create-topic", "--brokers", brokers, "--topic", topic, "--partitions", "1"); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	role := kafkatest.TopicName("guard")
	file := t.TempDir() + "/heartbeats"
	t.Setenv(heartbeatEnv, file)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// lease 6s − grace 1s − skew 500ms − margin 1s: a renew deadline of
	// 3.5s, above the renew interval of 1s.
	guard := leaseGuard{grace: time.Second, skew: 500 * time.Millisecond, margin: guardMargin}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startCLI(ctx, nil, "run", role, "A", "--brokers", brokers, "--topic", topic, "--partitions", "1", "--output", "json",
		"--lease-duration", "6s", "--renew-interval", "1s", "--challenge-stagger", "1s", "--poll-interval", "200ms",
		"--grace", guard.grace.String(), "--max-clock-skew", guard.skew.String(),
		"--", self, "-test.run=^TestHeartbeatHelper$").done
	waitFile(t, file, "start A ", 30*time.Second)

	txnID := role
	var refused sync.Once
	refusedAt := make(chan time.Time, 1)
	cluster.Fake.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.Fake.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || *req.TransactionID != txnID {
			return nil, nil, false
		}
		refused.Do(func() { refusedAt <- time.Now() })
		return kafkatest.RefusedProduce(req, kerr.NotEnoughReplicas.Code), nil, true
	})

	var got cliResult
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatal("run did not end within 30 s of the refused renewals")
	}
	select {
	case at := <-refusedAt:
		t.Logf("first refused renewal at +0; run ended %v later", time.Since(at))
	default:
		t.Fatalf("no renewal was refused; run exit %d, stderr %s", got.code, got.stderr)
	}
	if got.code != exitFenced {
		t.Fatalf("run: exit %d, stderr %s; want %d", got.code, got.stderr, exitFenced)
	}
	ended := strings.Index(got.stderr, "ended on its renew deadline")
	if ended < 0 {
		t.Fatalf("stderr does not show the library's renew deadline: %s", got.stderr)
	}
	if strings.Contains(got.stderr[ended:], "renewal failed; retrying") {
		t.Errorf("stderr shows a retry of the renewal after the leadership ended: %s", got.stderr)
	}
	var guardEvent *holderEvent
	var events []string
	for line := range strings.SplitSeq(strings.TrimSpace(got.stdout), "\n") {
		var event holderEvent
		if err := json.Unmarshal([]byte(line), &event); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		events = append(events, event.Event)
		if event.Event == "guard" {
			guardEvent = &event
		}
	}
	if guardEvent == nil || guardEvent.Deadline == nil {
		t.Fatalf("no guard event with a deadline: %s", got.stdout)
	}
	if !strings.HasPrefix(guardEvent.Message, "krabka-coord: lease guard: member A could not confirm its lease of role "+role) {
		t.Errorf("guard event message %q; want the lease guard's", guardEvent.Message)
	}
	if want := []string{"campaigning", "elected", "command_started", "guard", "command_exited"}; strings.Join(events, " ") != strings.Join(want, " ") {
		t.Errorf("events %v; want %v", events, want)
	}
	deadline := guardEvent.Deadline.Millis
	termAt, killAt := guard.termAt(deadline), guard.killAt(deadline)
	guardAt := time.UnixMilli(guardEvent.At.Millis)
	_, lasts := heartbeats(t, file)
	lastA := time.Unix(0, lasts["A"])
	t.Logf("lease deadline %s: guard event %v before it (SIGTERM instant %v before), the command's last beat %v before it",
		formatMillis(deadline), time.UnixMilli(deadline).Sub(guardAt), time.UnixMilli(deadline).Sub(termAt), time.UnixMilli(deadline).Sub(lastA))
	if guardAt.Before(termAt) {
		t.Errorf("the guard fired at %v, before its SIGTERM instant %v", guardAt.Format(time.StampMilli), termAt.Format(time.StampMilli))
	}
	if lastA.After(killAt.Add(100 * time.Millisecond)) {
		t.Errorf("the command beat at %v, after the guard's SIGKILL instant %v", lastA.Format(time.StampMilli), killAt.Format(time.StampMilli))
	}
	if !lastA.Before(time.UnixMilli(deadline)) {
		t.Errorf("the command beat at %v, at or after the lease deadline %s", lastA.Format(time.StampMilli), formatMillis(deadline))
	}
	if lastA.Before(termAt.Add(-200 * time.Millisecond)) {
		t.Errorf("the command stopped at %v, before the guard's SIGTERM instant %v: the guard fired early", lastA.Format(time.StampMilli), termAt.Format(time.StampMilli))
	}
}

// A leadership that its renew deadline ended writes nothing itself, but
// run still resigns it: a stop for a signal (or the command's exit) that
// the renew deadline overtook writes the tombstones of the lease, under the
// token, and of the registration, and reports a resignation, as when run's
// guard was a timer of its own and the leadership was still live. When
// another member minted a newer epoch meanwhile, the broker fences the
// lease's tombstone, and run reports the fence (exit code 3).
func TestResignAfterRenewDeadline(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(map[bool]string{false: "resigned", true: "fenced"}[fenced], func(t *testing.T) {
			cluster := coordinationtest.NewCluster()
			transport := cluster.Transport("A")
			role, member := mustRole(t, "guarded"), mustMember(t, "A")
			config, err := coordination.NewLeaseConfig(3*time.Second, time.Second, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			guard := leaseGuard{grace: 500 * time.Millisecond, skew: 200 * time.Millisecond, margin: guardMargin}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			leadership, err := coordination.AcquireLeadership(ctx, transport, role, member,
				coordination.WithLeaseConfig(config), coordination.WithPollInterval(100*time.Millisecond), guard.option(config))
			if err != nil {
				t.Fatal(err)
			}
			transport.Cut()
			select {
			case <-leadership.Done():
			case <-ctx.Done():
				t.Fatal("the renew deadline did not end the leadership")
			}
			if !errors.Is(leadership.Err(), coordination.ErrRenewDeadline) {
				t.Fatalf("the leadership ended with %v; want ErrRenewDeadline", leadership.Err())
			}
			transport.Heal()
			if fenced {
				if _, err := cluster.Transport("B").AcquireEpoch(ctx, role); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr syncBuffer
			g := &globals{stdout: &stdout, stderr: &stderr, output: outputText}
			partition := leadership.Partition()
			h := &holder{g: g, flags: &holdFlags{}, role: role, member: member, config: config, partition: partition, metered: transport,
				metrics: newMemberMetrics(role, partition, config.Duration()), stepDownRequests: make(chan struct{}, 1)}
			if fenced {
				// lost reads the coordinator's token through the holder's
				// KafkaTransport, which this holder has not: only the
				// tombstones' outcome is checked here.
				err := h.resignLeadership(ctx, leadership)
				if cause := endedBefore(leadership, err); !errors.Is(cause, coordination.ErrFenced) {
					t.Fatalf("resignation after the renew deadline, with a newer epoch minted: %v (cause %v); want ErrFenced", err, cause)
				}
				return
			}
			if err := h.resign(leadership, nil); err != nil {
				t.Fatalf("resign after the renew deadline: %v", err)
			}
			if !strings.Contains(stdout.String(), "resigned: member A gave up role guarded") {
				t.Fatalf("stdout %q, stderr %q; want the resignation", stdout.String(), stderr.String())
			}
			state, err := coordination.BuildRoleState(role, cluster.Records(partition))
			if err != nil {
				t.Fatal(err)
			}
			if state.Lease != nil {
				t.Errorf("the lease %+v stands; want the tombstone", *state.Lease)
			}
			if _, ok := state.Entry(member); ok {
				t.Errorf("member A is still in the roster")
			}
		})
	}
}
