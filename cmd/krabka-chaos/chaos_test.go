package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/chaos"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestChaosShort builds krabka-chaos and runs it against the real broker of
// KRABKA_KAFKA_BROKERS with every fault kind but the broker restart, for
// KRABKA_CHAOS_DURATION (2 minutes by default). KRABKA_CHAOS_BROKER_RESTART=1
// adds the broker restart, through scripts/kafka-stop.sh --kill and
// scripts/kafka-start.sh --restart-keep-data. KRABKA_CHAOS_SEED sets the seed
// (1 by default).
//
// The orchestrator runs in a process group of its own, with its members;
// the cleanup kills the whole group, so no member outlives the test.
func TestChaosShort(t *testing.T) {
	cluster := kafkatest.Kafka(t)
	duration := 2 * time.Minute
	if value := os.Getenv("KRABKA_CHAOS_DURATION"); value != "" {
		d, err := time.ParseDuration(value)
		if err != nil {
			t.Fatalf("KRABKA_CHAOS_DURATION=%q: %v", value, err)
		}
		duration = d
	}
	seed := "1"
	if value := os.Getenv("KRABKA_CHAOS_SEED"); value != "" {
		seed = value
	}
	faults := "pause,kill,cut,skew"
	var restartCmd string
	if os.Getenv("KRABKA_CHAOS_BROKER_RESTART") == "1" {
		scripts, err := filepath.Abs("../../scripts")
		if err != nil {
			t.Fatal(err)
		}
		faults += ",broker-restart"
		restartCmd = scripts + "/kafka-stop.sh --kill && " + scripts + "/kafka-start.sh --restart-keep-data"
	}

	// Once with the library's defaults (the specification: no extension
	// on), and once, for half as long, with heartbeats on.
	for _, run := range []struct {
		name      string
		duration  time.Duration
		heartbeat time.Duration
	}{
		{"defaults", duration, 0},
		{"heartbeats", max(time.Minute, duration/2), 2 * time.Second},
	} {
		t.Run(run.name, func(t *testing.T) {
			args := []string{"run", "--brokers", strings.Join(cluster.Brokers, ","),
				"--duration", run.duration.String(), "--seed", seed, "--faults", faults}
			if run.heartbeat > 0 {
				args = append(args, "--heartbeat", run.heartbeat.String())
			}
			if restartCmd != "" {
				args = append(args, "--broker-restart-cmd", restartCmd, "--broker-restart-every", (run.duration / 2).String())
			}
			r := runChaos(t, args, run.duration+5*time.Minute)
			if want := max(3, int(run.duration/(20*time.Second))); r.LeadershipChanges < want {
				t.Errorf("%d leadership changes in %s; want at least %d", r.LeadershipChanges, run.duration, want)
			}
		})
	}
}

// TestChaosRequests builds krabka-chaos and runs the request nemesis
// against the real broker of KRABKA_KAFKA_BROKERS for 35 s (3 members, a
// request fault every 300 ms on average, every API key the library sends,
// every mode: a delay, a lost answer, a hold until the client resent the
// request, a duplicate), each command a Write of 2 or 3 records on 2
// partitions. Beside runChaos's checks (no violation, torn writes and
// false reports among them, no lost command, a history that linearizes),
// it asserts that the faults took requests of at least 4 API keys, and
// at least 25 requests in all. It fails without a broker under CI. The
// whole test takes about a minute.
func TestChaosRequests(t *testing.T) {
	cluster := kafkatest.Kafka(t)
	seed := "8"
	if value := os.Getenv("KRABKA_CHAOS_SEED"); value != "" {
		seed = value
	}
	r := runChaos(t, []string{"run", "--brokers", strings.Join(cluster.Brokers, ","), "--duration", "35s", "--seed", seed,
		"--members", "3", "--faults", "request", "--request-gap", "300ms", "--spread", "2"}, 5*time.Minute)
	taken, keys := 0, 0
	for _, st := range r.RequestFaults {
		t.Logf("%s: %d of %d armed faults took a request (%v), %d applied late", st.API, st.Fired, st.Armed, st.ByMode, st.Late)
		taken += st.Fired
		if st.Fired > 0 {
			keys++
		}
	}
	if taken < 25 || keys < 4 {
		t.Errorf("the request faults took %d requests of %d API keys; want at least 25 of 4", taken, keys)
	}
	if r.FaultsByKind[chaos.FaultRequest] == 0 || r.Commands == 0 {
		t.Errorf("faults %v, %d commands; want request faults and commands", r.FaultsByKind, r.Commands)
	}
}

// TestChaosCluster builds krabka-chaos and runs it against the 3-node KRaft
// cluster of KRABKA_KAFKA_CLUSTER_BROKERS (scripts/kafka-cluster.sh:
// replication factor 3, min.insync.replicas 2, Kafka's default failure
// detection) with every fault kind: the member faults, and the kill of the
// transaction coordinator of a role, the kill of the leader of the state
// partition, the SIGSTOP of the active controller and a rolling restart, for
// KRABKA_CHAOS_CLUSTER_DURATION (3 minutes by default) with a lease of 6 s.
// Each member reaches each broker through a proxy of its own. It skips
// without the cluster, and fails instead under CI.
//
// It asserts what must hold in every run: no violation, no lost command,
// every cluster fault carried out without an error (the cluster recovered
// after each), and at least one fault of every member kind. The liveness
// figures (changes per fault, the longest gap without an ack, the largest
// time a call returned past its context) go to the test log; docs/safety.md
// publishes them from longer runs.
//
// The test takes the node control of the cluster (kafkatest's lock of the
// cluster's nodes, which every test that kills nodes shares), so it never
// kills a node under another test, and it leaves the cluster healed.
func TestChaosCluster(t *testing.T) {
	cluster := kafkatest.KafkaCluster(t)
	cluster.Nodes(t) // the lock of the nodes, healed now and at the end
	duration := 3 * time.Minute
	if value := os.Getenv("KRABKA_CHAOS_CLUSTER_DURATION"); value != "" {
		d, err := time.ParseDuration(value)
		if err != nil {
			t.Fatalf("KRABKA_CHAOS_CLUSTER_DURATION=%q: %v", value, err)
		}
		duration = d
	}
	// Seed 8 plays the cluster faults in the order state-leader-kill,
	// controller-stop, coordinator-kill, rolling-restart (the longest, about
	// 80 s): each begins before the end of a 3-minute run.
	seed := "8"
	if value := os.Getenv("KRABKA_CHAOS_SEED"); value != "" {
		seed = value
	}
	script, err := filepath.Abs("../../scripts/kafka-cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	// A cluster fault in each fifth of the run; one that is due while the
	// previous one runs waits for it. The member faults go on beside them
	// (--mixed), so that a few minutes hold every kind: the figures of
	// each kind alone come from the longer runs of docs/safety.md.
	args := []string{"run", "--brokers", strings.Join(cluster.Brokers, ","),
		"--cluster-cmd", script, "--mixed",
		// Every kind but the broker restart (of the single broker) and the
		// cut of the members' path to one node, which the longer runs of
		// docs/safety.md measure: five cluster faults do not fit in three
		// minutes, and this keeps the plan of seed 8.
		"--faults", "pause,kill,cut,skew,coordinator-kill,state-leader-kill,controller-stop,rolling-restart",
		"--lease", "6s", "--renew", "2s",
		"--duration", duration.String(), "--seed", seed,
		"--cluster-fault-every", (duration / 5).String()}
	r := runChaos(t, args, duration+10*time.Minute)
	for _, kind := range chaos.AllFaults {
		// The request faults have a test of their own (TestChaosRequests);
		// the single broker's restart and cut are not cluster faults.
		if kind == chaos.FaultBrokerRestart || kind == chaos.FaultBrokerCut || kind == chaos.FaultRequest {
			continue
		}
		if r.FaultsByKind[kind] == 0 {
			t.Errorf("no %s fault in the run; want every kind (faults %v)", kind, r.FaultsByKind)
		}
	}
	for _, im := range r.Impacts {
		if chaos.IsBrokerFault(im.Kind) {
			t.Logf("fault %d %s of %s: %d leadership changes, %d epochs, longest gap without an ack %s, Kafka's detection %s",
				im.Fault, im.Kind, im.Target, im.Changes, im.Epochs, time.Duration(im.LongestGapMillis)*time.Millisecond,
				time.Duration(im.DetectMillis)*time.Millisecond)
		}
	}
	t.Logf("changes without a fault: %d; largest call past its context: %s",
		r.ChangesWithoutFault, time.Duration(r.MaxCallOverMillis)*time.Millisecond)
}

func TestRunRejectsBadUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	ctx := context.Background()
	for _, args := range [][]string{
		nil,
		{"fly"},
		{"run", "--brokers", ""},
		{"check"},
		{"member", "--id", "m1"},
		{"run", "--no-such-flag"},
		{"run", "--brokers", "127.0.0.1:1", "--faults", "request", "--request-keys", "EndTxx"},
		{"run", "--brokers", "127.0.0.1:1", "--spread", "0"},
	} {
		if len(args) == 3 && args[2] == "" {
			t.Setenv("KRABKA_KAFKA_BROKERS", "")
		}
		if code := run(ctx, args, &out, &errOut); code != exitUsage {
			t.Errorf("run(%q) = %d; want %d (usage)", args, code, exitUsage)
		}
	}
}
