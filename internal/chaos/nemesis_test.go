package chaos

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func TestPlanIsAFunctionOfTheSeed(t *testing.T) {
	config := PlanConfig{Seed: 42, Duration: 10 * time.Minute, Members: 5, Roles: 2, Faults: AllFaults,
		Lease: 3 * time.Second, MeanGap: 5 * time.Second, MaxSkew: 5 * time.Second, BrokerRestartEvery: 2 * time.Minute}
	a, err := NewPlan(config)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewPlan(config)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two plans of one seed differ")
	}
	config.Seed = 43
	if c, _ := NewPlan(config); reflect.DeepEqual(a, c) {
		t.Fatal("plans of seeds 42 and 43 are equal")
	}
	counts := make(map[string]int)
	for i, s := range a {
		counts[s.Kind]++
		if s.Index != i || s.At < 0 || s.At >= config.Duration || i > 0 && s.At < a[i-1].At {
			t.Fatalf("step %d = %+v: out of order or out of the duration", i, s)
		}
		if (s.Kind == FaultPause) && s.Hold <= config.Lease {
			t.Errorf("pause %d holds %s, not longer than the lease", i, s.Hold)
		}
		if s.Kind == FaultSkew && (s.SkewMillis == 0 || abs(s.SkewMillis) > config.MaxSkew.Milliseconds()) {
			t.Errorf("skew %d = %dms; want a non-zero offset within ±%s", i, s.SkewMillis, config.MaxSkew)
		}
	}
	if counts[FaultBrokerRestart] != 5 || counts[FaultPause] == 0 || counts[FaultKill] == 0 || counts[FaultCut] == 0 || counts[FaultSkew] == 0 {
		t.Errorf("fault counts = %v; want every kind and 5 broker restarts", counts)
	}
	if _, err := NewPlan(PlanConfig{Faults: []string{"flood"}, Members: 1, Roles: 1, Lease: 1, MeanGap: 1}); err == nil {
		t.Error("NewPlan(unknown kind) = nil error")
	}
}

func TestPlanTakesTurnsAtTheClusterFaults(t *testing.T) {
	config := PlanConfig{Seed: 3, Duration: 4 * time.Minute, Members: 5, Roles: 2, Faults: AllFaults,
		Lease: 6 * time.Second, MeanGap: 10 * time.Second, MaxSkew: 5 * time.Second,
		ClusterFaultEvery: time.Minute, Nodes: 3}
	steps, err := NewPlan(config)
	if err != nil {
		t.Fatal(err)
	}
	without := config
	without.Faults = MemberFaults
	memberOnly, _ := NewPlan(without)
	var cluster []Step
	var members int
	for _, s := range steps {
		if slices.Contains(ClusterFaults, s.Kind) {
			cluster = append(cluster, s)
		} else if slices.Contains(MemberFaults, s.Kind) {
			members++
		}
	}
	if members != len(memberOnly) {
		t.Errorf("%d member steps with the cluster faults, %d without; want the same member schedule", members, len(memberOnly))
	}
	seen := make(map[string]bool)
	for i, s := range cluster {
		seen[s.Kind] = true
		if s.At < time.Duration(i)*config.ClusterFaultEvery || s.At >= time.Duration(i+1)*config.ClusterFaultEvery {
			t.Errorf("cluster step %d at %s: not in window %d", i, s.At, i)
		}
		switch s.Kind {
		case FaultCoordinatorKill, FaultStateLeaderKill, FaultControllerStop:
			if s.Hold <= 0 {
				t.Errorf("%s holds %s; want a downtime", s.Kind, s.Hold)
			}
		case FaultRollingRestart:
			if s.Node < 0 || s.Node >= config.Nodes {
				t.Errorf("rolling restart from node index %d of %d", s.Node, config.Nodes)
			}
		}
	}
	if len(cluster) != 4 || len(seen) != 4 {
		t.Errorf("cluster steps = %+v; want 4 windows, one of each kind", cluster)
	}
}

func TestNemesisPlaysAndHealsEveryFault(t *testing.T) {
	actions := &fakeActions{leaders: map[string]string{"controller": "m2"}}
	log, err := OpenLineLog(filepath.Join(t.TempDir(), "nemesis.log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	n := &Nemesis{
		Steps: []Step{
			// Steps 50 ms apart, so that a loaded machine keeps their order.
			{Index: 0, At: 0, Kind: FaultPause, LeaderOf: 0, Hold: 300 * time.Millisecond},
			{Index: 1, At: 50 * time.Millisecond, Kind: FaultKill, LeaderOf: 0, Hold: 100 * time.Millisecond}, // m2 is busy: m3
			{Index: 2, At: 100 * time.Millisecond, Kind: FaultCut, LeaderOf: -1, Member: 0, Mode: CutStall, Hold: time.Hour},
			{Index: 3, At: 200 * time.Millisecond, Kind: FaultBrokerRestart, LeaderOf: -1},
		},
		Members: []string{"m1", "m2", "m3"}, Roles: []string{"controller"}, Actions: actions, Log: log, MaxDown: 3,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	faults := n.Run(ctx, time.Now())
	if len(faults) != 4 {
		t.Fatalf("Run made %d faults: %+v; want 4", len(faults), faults)
	}
	// The broker restart runs on a goroutine of its own, so only its
	// presence is certain; the member faults keep their order.
	var calls []string
	broker := 0
	for _, c := range actions.calls {
		if c == "broker" {
			broker++
			continue
		}
		calls = append(calls, c)
	}
	want := []string{"pause m2", "kill m3", "cut m1 stall", "restart m3", "resume m2", "heal m1"}
	if !reflect.DeepEqual(calls, want) || broker != 1 {
		t.Errorf("calls = %q; want %q and one broker restart", actions.calls, want)
	}
	logged, err := ReadFaults(log.file.Name(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range logged {
		if f.EndMillis < f.StartMillis || f.StartMillis == 0 {
			t.Errorf("logged fault %+v: no start or an end before its start", f)
		}
	}
	if logged[0].Target != "m2" || len(logged[0].LeaderOf) != 1 || logged[1].Target != "m3" {
		t.Errorf("targets = %s (leader of %v), %s; want m2 (leader of controller), m3", logged[0].Target, logged[0].LeaderOf, logged[1].Target)
	}
}

func TestNemesisKeepsAQuorumOfMembersUp(t *testing.T) {
	actions := &fakeActions{}
	n := &Nemesis{
		Steps: []Step{
			{Index: 0, Kind: FaultPause, LeaderOf: -1, Member: 0, Hold: time.Hour},
			{Index: 1, Kind: FaultPause, LeaderOf: -1, Member: 1, Hold: time.Hour},
		},
		Members: []string{"m1", "m2", "m3"}, Actions: actions, MaxDown: 1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if faults := n.Run(ctx, time.Now()); len(faults) != 1 {
		t.Fatalf("Run made %d faults with MaxDown 1; want 1", len(faults))
	}
}

func TestClockFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m1.clock")
	if err := WriteClockFile(path, -2500); err != nil {
		t.Fatal(err)
	}
	got, err := ReadClockFile(path)
	if err != nil || got != -2500 {
		t.Fatalf("ReadClockFile = %d, %v; want -2500", got, err)
	}
	clock := &SkewClock{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); clock.Follow(ctx, path, time.Millisecond) }()
	deadline := time.Now().Add(5 * time.Second)
	for clock.Offset() != -2500 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if clock.Offset() != -2500 {
		t.Fatalf("offset = %d after Follow; want -2500", clock.Offset())
	}
	if skew := clock.NowMillis() - time.Now().UnixMilli(); skew > -2400 || skew < -2600 {
		t.Errorf("NowMillis - host = %dms; want about -2500", skew)
	}
}

func TestRoleNamesShareOnePartition(t *testing.T) {
	names, err := RoleNames("chaos-1-1", 3, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 3 || names[0] != "chaos-1-1.controller" {
		t.Fatalf("RoleNames = %v", names)
	}
	want := -1
	for _, name := range names {
		role, err := coordination.NewRole(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := coordination.RolePartition(role, 16)
		if err != nil {
			t.Fatal(err)
		}
		if want < 0 {
			want = p
		}
		if p != want {
			t.Errorf("role %s is on partition %d; want %d, the partition of %s", name, p, want, names[0])
		}
	}
	again, _ := RoleNames("chaos-1-1", 3, 16)
	if !reflect.DeepEqual(names, again) {
		t.Fatalf("RoleNames is not stable: %v, %v", names, again)
	}
}

// TestNemesisRunsClusterFaultsAlone: a cluster fault waits for the member
// faults in force to heal and for the quiet time after them; while it
// waits or runs, and for the quiet time after it, no member fault begins;
// two cluster faults never overlap; each one waits for the recovery.
func TestNemesisRunsClusterFaultsAlone(t *testing.T) {
	actions := &fakeActions{leaders: map[string]string{"controller": "m2"}}
	log, err := OpenLineLog(filepath.Join(t.TempDir(), "nemesis.log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	ms := time.Millisecond
	n := &Nemesis{
		Steps: []Step{
			{Index: 0, At: 0, Kind: FaultPause, LeaderOf: 0, Hold: 30 * ms},
			{Index: 1, At: 5 * ms, Kind: FaultCoordinatorKill, LeaderOf: 0, Hold: 20 * ms},
			{Index: 2, At: 40 * ms, Kind: FaultCut, LeaderOf: -1, Member: 0, Mode: CutDrop, Hold: 10 * ms}, // skipped: the kill waits or runs
			{Index: 3, At: 45 * ms, Kind: FaultControllerStop, LeaderOf: -1, Hold: 10 * ms},                // waits for the kill
			{Index: 4, At: 50 * ms, Kind: FaultRollingRestart, LeaderOf: -1, Node: 1},
			{Index: 5, At: 900 * ms, Kind: FaultKill, LeaderOf: -1, Member: 2, Hold: 10 * ms},
		},
		Members: []string{"m1", "m2", "m3"}, Roles: []string{"controller"}, Actions: actions, Log: log, MaxDown: 3,
		Cluster: &fakeCluster{actions: actions, coord: 2}, Quiet: 40 * ms,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	faults := n.Run(ctx, time.Now())
	want := []string{
		"pause m2", "resume m2",
		"find coordinator controller", "kill node 2", "restart node 2", "recovered",
		"pause node 1", "resume node 1", "recovered",
		"restart node 2", "recovered", "restart node 3", "recovered", "restart node 1", "recovered",
		"kill m3", "restart m3",
	}
	if !reflect.DeepEqual(actions.calls, want) {
		t.Fatalf("calls =\n%q\nwant\n%q", actions.calls, want)
	}
	if len(faults) != 5 {
		t.Fatalf("Run made %d faults; want 5 (the cut skipped)", len(faults))
	}
	logged, err := ReadFaults(log.file.Name(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var prevEnd int64
	for _, f := range logged {
		if f.StartMillis < prevEnd {
			t.Errorf("fault %d %s began at %d, before the end of the previous fault at %d", f.Index, f.Kind, f.StartMillis, prevEnd)
		}
		prevEnd = f.EndMillis
		if !IsBrokerFault(f.Kind) {
			continue
		}
		if f.HealMillis < f.StartMillis || f.EndMillis < f.HealMillis || f.Error != "" {
			t.Errorf("cluster fault %+v: want start <= heal <= end and no error", f)
		}
	}
	if logged[1].Node != 2 || logged[2].Node != 1 || !reflect.DeepEqual(logged[3].Nodes, []int32{2, 3, 1}) {
		t.Errorf("nodes = %d, %d, %v; want the coordinator 2, the controller 1, and the rolling order 2 3 1",
			logged[1].Node, logged[2].Node, logged[3].Nodes)
	}
	if gap := logged[1].StartMillis - logged[0].EndMillis; gap < 40 {
		t.Errorf("the coordinator kill began %d ms after the heal of the pause; want at least the quiet time, 40 ms", gap)
	}
	if gap := logged[2].StartMillis - logged[1].EndMillis; gap < 40 {
		t.Errorf("the controller stop began %d ms after the end of the coordinator kill; want at least the quiet time, 40 ms", gap)
	}
	if gap := logged[4].StartMillis - logged[3].EndMillis; gap < 40 {
		t.Errorf("the member kill began %d ms after the end of the rolling restart; want at least the quiet time, 40 ms", gap)
	}
}

// TestNemesisMixedLetsMemberFaultsOverlapClusterFaults: with Mixed, a
// member fault begins during a cluster fault.
func TestNemesisMixedLetsMemberFaultsOverlapClusterFaults(t *testing.T) {
	actions := &fakeActions{leaders: map[string]string{"controller": "m2"}}
	ms := time.Millisecond
	n := &Nemesis{
		Steps: []Step{
			{Index: 0, At: 0, Kind: FaultCoordinatorKill, LeaderOf: 0, Hold: 500 * ms},
			{Index: 1, At: 150 * ms, Kind: FaultPause, LeaderOf: 0, Hold: 10 * ms},
		},
		Members: []string{"m1", "m2", "m3"}, Roles: []string{"controller"}, Actions: actions, MaxDown: 3,
		Cluster: &fakeCluster{actions: actions, coord: 2}, Quiet: time.Second, Mixed: true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if faults := n.Run(ctx, time.Now()); len(faults) != 2 {
		t.Fatalf("Run made %d faults; want 2", len(faults))
	}
	want := []string{"find coordinator controller", "kill node 2", "pause m2", "resume m2", "restart node 2", "recovered"}
	if !reflect.DeepEqual(actions.calls, want) {
		t.Fatalf("calls = %q; want %q", actions.calls, want)
	}
}
