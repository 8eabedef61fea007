// Command krabka-chaos is the fault-injection harness of package
// coordination on a real Kafka broker.
//
// Usage:
//
//	krabka-chaos run [flags]     start members, inject faults, then check
//	krabka-chaos check [flags]   check a finished run again
//	krabka-chaos member [flags]  one member process (started by run)
//
// A run starts --members member processes. Each competes for --roles roles
// with coordination.AcquireLeadership and, while it leads a role, writes
// numbered commands to the command topic of the run with Leadership.Write,
// and logs every acknowledged command to its ack log. A nemesis, drawn from
// --seed, pauses members past their lease (SIGSTOP), kills and restarts them
// (SIGKILL), cuts their network to the brokers (each member dials each
// broker through a Kafka-aware proxy of its own), delays, loses the answer
// of, holds until resent, duplicates, or resets the connection of and
// applies late (reset-hold) one request of an API key of
// --request-keys (the fault kind request), skews their clocks, restarts the
// single broker when --broker-restart-cmd is given, and, on a multi-broker
// cluster with --cluster-cmd, kills the transaction coordinator of a role
// or the leader of the state partition, stops the active controller, and
// restarts every node in turn. At the end the checker reads the command
// topic read_committed and the state topic, and verifies that leadership
// terms never interleave and that every acknowledged command is present
// exactly once, and it times each failover after a fault of a leader. It
// prints a summary table (or JSON with --json) and exits with status 1 on
// any violation or lost command (and, with --fail-slow, on a failover over
// its bound), 2 on bad usage, and 3 when the harness itself failed.
//
// Example, with the broker of scripts/kafka-start.sh:
//
//	out=$(scripts/kafka-start.sh) && eval "$out"
//	go run ./cmd/krabka-chaos run --brokers "$KRABKA_KAFKA_BROKERS" --duration 2m --seed 1
//
// With --rolling there is no nemesis: a rolling restart of the members on
// one role, by the transfer procedure of docs/operations.md (standbys
// first, the holder last handing the role to a member already restarted)
// and by the resign procedure before it, checked as any run, with each
// procedure's leadership changes, epochs and longest gap without an
// acknowledged command (exit 1 when the transfer procedure takes more than
// one change or one epoch):
//
//	go run ./cmd/krabka-chaos run --rolling --members 3 --lease 6s --renew 2s --stagger 1s
//
// and with the 3-node cluster of scripts/kafka-cluster.sh:
//
//	out=$(scripts/kafka-cluster.sh start) && eval "$out"
//	go run ./cmd/krabka-chaos run --brokers "$KRABKA_KAFKA_CLUSTER_BROKERS" \
//	  --cluster-cmd scripts/kafka-cluster.sh --faults all --lease 6s --renew 2s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/chaos"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // a violation or a lost command
	exitUsage   = 2
	exitHarness = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a mode and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: krabka-chaos run|check|member [flags]; see krabka-chaos <mode> -h")
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runMode(ctx, args[1:], stdout, stderr)
	case "check":
		return checkMode(ctx, args[1:], stdout, stderr)
	case "member":
		return memberMode(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, "usage: krabka-chaos run|check|member [flags]; see krabka-chaos <mode> -h")
		return exitOK
	default:
		fmt.Fprintf(stderr, "krabka-chaos: unknown mode %q: want run, check or member\n", args[0])
		return exitUsage
	}
}

func runMode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("krabka-chaos run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "bootstrap brokers host:port, comma-separated: one broker, or the brokers of a cluster (default $KRABKA_KAFKA_BROKERS); each member reaches each broker through a proxy of its own")
	replication := fs.Int("replication-factor", 0, "replication factor of the run's topics (0: the cluster's default.replication.factor)")
	clusterCmd := fs.String("cluster-cmd", "", "the cluster command of a multi-broker cluster, scripts/kafka-cluster.sh (kill N, restart N, pause N, resume N); enables the cluster faults "+strings.Join(chaos.ClusterFaults, ","))
	clusterDir := fs.String("cluster-dir", "", "run directory of the cluster of --cluster-cmd, whose node logs tell when Kafka noticed each fault (default $KRABKA_CLUSTER_DIR, or /tmp/krabka-cluster)")
	clusterHold := fs.Duration("cluster-hold", 0, "longest hold of a cluster fault (node down, controller stopped, node cut), drawn from [hold/2, hold]; 0 draws it from [lease/2, 2 x lease]")
	clusterEvery := fs.Duration("cluster-fault-every", 45*time.Second, "one cluster fault in each window of this length; the kinds take turns")
	mixed := fs.Bool("mixed", false, "let the member faults overlap the cluster faults (by default a cluster fault runs alone, so that the leadership changes in its window are its own)")
	members := fs.Int("members", 5, "member processes")
	roles := fs.Int("roles", 2, "roles (controller, archiver, ...), all on one partition of the state topic")
	duration := fs.Duration("duration", 2*time.Minute, "length of the fault phase")
	seed := fs.Int64("seed", 1, "seed of the fault schedule")
	lease := fs.Duration("lease", 3*time.Second, "lease duration")
	renew := fs.Duration("renew", time.Second, "renew interval")
	stagger := fs.Duration("stagger", 500*time.Millisecond, "challenge stagger per rank")
	poll := fs.Duration("poll", 250*time.Millisecond, "poll interval of a waiting member")
	rivalWatch := fs.Bool("rival-watch", false, "switch the rival-mint watch on (coordination.WithRivalMintWatch): a challenger of an expired lease that sees the coordinator hold a newer token waits a lease duration plus its stagger for that token's lease")
	heartbeat := fs.Duration("heartbeat", 0, "switch the members' heartbeats on at this interval (coordination.WithHeartbeatInterval); 0, the default, runs the library's defaults: the specification's behaviour, no extension on")
	interval := fs.Duration("command-interval", 100*time.Millisecond, "gap between two commands of a leader")
	writeTimeout := fs.Duration("write-timeout", 5*time.Second, "bound of one guarded write")
	faults := fs.String("faults", "pause,kill,cut,skew", "fault kinds, comma-separated, or \"all\" (every kind whose command is given): "+strings.Join(chaos.AllFaults, ","))
	meanGap := fs.Duration("mean-gap", 0, "mean gap between two faults (default 1.7 x lease)")
	maxSkew := fs.Duration("max-skew", 5*time.Second, "largest clock offset of a skew")
	restartCmd := fs.String("broker-restart-cmd", "", "shell command that restarts the broker on its data, e.g. \"scripts/kafka-stop.sh --kill && scripts/kafka-start.sh --restart-keep-data\"; enables the broker-restart fault")
	restartEvery := fs.Duration("broker-restart-every", 2*time.Minute, "one broker restart in each window of this length")
	requestKeys := fs.String("request-keys", "library", "API keys of the request faults, numbers or names (EndTxn, InitProducerId, ...), comma-separated; \"library\" is every request the library sends")
	requestGap := fs.Duration("request-gap", 0, "mean gap between two request faults (default --mean-gap)")
	spread := fs.Int("spread", 2, "partitions of the command topic per role: with 2 or more, each command is one Write of 2 or 3 records over them, so that the checkers see a torn transaction; 1 writes one record per command")
	slack := fs.Duration("slack", 2*time.Second, "extra time a failover may take past lease + stagger x (members-1)")
	settle := fs.Duration("settle", time.Minute, "longest wait for open transactions to end before the check")
	out := fs.String("out", "", "run directory (default a new directory under the system temp dir)")
	jsonOut := fs.Bool("json", false, "print the summary as JSON")
	failSlow := fs.Bool("fail-slow", false, "exit 1 also when a failover took longer than its bound or never came")
	rolling := fs.Bool("rolling", false, "no nemesis: a rolling restart of --members members on one role, once by each procedure: transfer (standbys first, the holder last, handing the role to a member already restarted) and resign (roster order, the holder first, each resigning); checks the run, and reports the leadership changes, epochs and the longest gap without an acknowledged command of each (docs/operations.md)")
	rollingHold := fs.Duration("rolling-hold", 2*time.Second, "with --rolling: how long each step runs after the restarted member registered again")
	transferBurst := fs.Int("transfer-burst", 20, "with --rolling: transfers back and forth between the holder and a standby before the transfer procedure, to measure the transfer's p99 in the same run (the gap target); 0 makes none")
	transferFaults := fs.Bool("transfer-faults", true, "with --rolling: before the holder's restart in the transfer procedure, ask the holder to transfer to a standby killed with SIGKILL and to a name not in the roster; each must be refused (typed error within the bound, no epoch, the holder writing on)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *brokers == "" {
		fmt.Fprintln(stderr, "krabka-chaos run: no broker: pass --brokers or set KRABKA_KAFKA_BROKERS (out=$(scripts/kafka-start.sh) && eval \"$out\")")
		return exitUsage
	}
	if *rolling {
		if *members < 2 {
			fmt.Fprintf(stderr, "krabka-chaos run --rolling: --members %d: want at least 2\n", *members)
			return exitUsage
		}
		pace := *interval
		explicit := false
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "command-interval" })
		if !explicit {
			// The gap target compares the handover's gap with the
			// transfer's time: the pace must be well under it.
			pace = rollingCommandInterval
		}
		return rollingMode(ctx, chaos.RollingConfig{
			Brokers: splitList(*brokers), Members: *members,
			Lease: *lease, Renew: *renew, Stagger: *stagger, Poll: *poll,
			CommandInterval: pace, WriteTimeout: *writeTimeout, Hold: *rollingHold,
			RefusedTransfers: *transferFaults, TransferBurst: *transferBurst,
		}, *out, *settle, *jsonOut, stdout, stderr)
	}
	kinds := splitList(*faults)
	if *faults == "all" {
		kinds = append(slices.Clone(chaos.MemberFaults), chaos.FaultRequest)
		if *restartCmd != "" {
			kinds = append(kinds, chaos.FaultBrokerRestart)
		}
		if *clusterCmd != "" {
			kinds = append(kinds, chaos.ClusterFaults...)
		}
	}
	if *clusterCmd != "" && strings.Contains(*clusterCmd, "/") {
		if abs, err := filepath.Abs(*clusterCmd); err == nil {
			*clusterCmd = abs
		}
	}
	if *clusterCmd != "" && *clusterDir == "" {
		*clusterDir = os.Getenv("KRABKA_CLUSTER_DIR")
		if *clusterDir == "" {
			*clusterDir = "/tmp/krabka-cluster"
		}
	}
	if *meanGap == 0 {
		*meanGap = *lease * 17 / 10
	}
	var keys []int16
	if slices.Contains(kinds, chaos.FaultRequest) {
		var err error
		if keys, err = chaos.ParseRequestKeys(*requestKeys); err != nil {
			fmt.Fprintf(stderr, "krabka-chaos run: --request-keys: %v\n", err)
			return exitUsage
		}
	}
	if *spread < 1 {
		fmt.Fprintf(stderr, "krabka-chaos run: --spread %d: want 1 or more\n", *spread)
		return exitUsage
	}
	dir := *out
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "krabka-chaos-"); err != nil {
			fmt.Fprintln(stderr, err)
			return exitHarness
		}
	}
	dir, _ = filepath.Abs(dir)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitHarness
	}
	info, err := chaos.Orchestrate(ctx, chaos.RunConfig{
		Brokers: splitList(*brokers), Members: *members, Roles: *roles,
		Duration: *duration, Seed: *seed,
		Lease: *lease, Renew: *renew, Stagger: *stagger, Poll: *poll, Heartbeat: *heartbeat, RivalWatch: *rivalWatch,
		CommandInterval: *interval, WriteTimeout: *writeTimeout, Spread: *spread,
		RequestKeys: keys, RequestGap: *requestGap,
		Faults: kinds, MeanGap: *meanGap, MaxSkew: *maxSkew,
		BrokerRestartEvery: *restartEvery, BrokerRestartCmd: *restartCmd,
		ReplicationFactor: *replication, ClusterCmd: *clusterCmd, ClusterFaultEvery: *clusterEvery, ClusterHold: *clusterHold, ClusterDir: *clusterDir, MixedFaults: *mixed,
		Slack: *slack, Dir: dir, Executable: exe, Progress: stderr,
	})
	if err != nil {
		fmt.Fprintf(stderr, "krabka-chaos run: %v\n", err)
		return exitHarness
	}
	// The check runs even after an interrupt, on a context of its own.
	return report(context.WithoutCancel(ctx), info.Dir, nil, *settle, *jsonOut, *failSlow, stdout, stderr)
}

// rollingCommandInterval is the command pace of --rolling when
// --command-interval is not given: well under a transfer's time, so that
// the longest gap without an acknowledged command is the handover's.
const rollingCommandInterval = 2 * time.Millisecond

// rollingMode runs a rolling restart (--rolling), checks it, and reports
// the refused transfers and each procedure. It exits 1 on a violation, a
// history that does not linearize, a transfer that was not refused as
// documented, or a transfer procedure that took more than one leadership
// change or one epoch.
func rollingMode(ctx context.Context, config chaos.RollingConfig, out string, settle time.Duration, jsonOut bool, stdout, stderr io.Writer) int {
	dir := out
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "krabka-chaos-rolling-"); err != nil {
			fmt.Fprintln(stderr, err)
			return exitHarness
		}
	}
	dir, _ = filepath.Abs(dir)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitHarness
	}
	config.Dir, config.Executable, config.Progress = dir, exe, stderr
	run, err := chaos.OrchestrateRolling(ctx, config)
	if err != nil {
		fmt.Fprintf(stderr, "krabka-chaos run --rolling: %v (run directory %s)\n", err, dir)
		return exitHarness
	}
	code := report(context.WithoutCancel(ctx), dir, nil, settle, jsonOut, false, stdout, stderr)
	phases, err := chaos.MeasureRolling(context.WithoutCancel(ctx), run)
	if err != nil {
		fmt.Fprintf(stderr, "krabka-chaos run --rolling: %v\n", err)
		return exitHarness
	}
	for _, r := range run.Refused {
		if jsonOut {
			_ = json.NewEncoder(stdout).Encode(r)
		} else {
			fmt.Fprintf(stdout, "refused transfer from %s to %s (%s): fault %q in %d ms (bound %d ms), %d acquisitions, holder acks after %d, problems %v\n",
				r.Holder, r.Target, r.Case, r.Fault, r.TookMillis, r.BoundMillis, r.Acquisitions, r.HolderAcks, r.Problems)
		}
		if len(r.Problems) > 0 {
			fmt.Fprintf(stderr, "krabka-chaos: the transfer to %s (%s) was not refused as documented: %s\n", r.Target, r.Case, strings.Join(r.Problems, "; "))
			code = max(code, exitFailed)
		}
	}
	for _, p := range phases {
		if jsonOut {
			_ = json.NewEncoder(stdout).Encode(p)
		} else {
			fmt.Fprintln(stdout, p)
		}
		if p.Procedure == chaos.ProcedureTransfer && (p.Changes != 1 || p.Epochs != 1) {
			fmt.Fprintf(stderr, "krabka-chaos: the transfer procedure took %d leadership changes and %d epochs; want 1 and 1\n", p.Changes, p.Epochs)
			code = max(code, exitFailed)
		}
	}
	return code
}

func checkMode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("krabka-chaos check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("out", "", "run directory of the run to check (required)")
	brokers := fs.String("brokers", "", "bootstrap brokers (default: those of run.json)")
	settle := fs.Duration("settle", time.Minute, "longest wait for open transactions to end before the read")
	jsonOut := fs.Bool("json", false, "print the summary as JSON")
	failSlow := fs.Bool("fail-slow", false, "exit 1 also when a failover took longer than its bound or never came")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "krabka-chaos check: --out is required")
		return exitUsage
	}
	return report(ctx, *dir, splitList(*brokers), *settle, *jsonOut, *failSlow, stdout, stderr)
}

// report checks a run and prints its summary.
// With failSlow, a failover over its bound or one that never came fails the
// run too.
func report(ctx context.Context, dir string, brokers []string, settle time.Duration, jsonOut, failSlow bool, stdout, stderr io.Writer) int {
	summary, err := chaos.CheckRun(ctx, dir, brokers, settle)
	if err != nil {
		fmt.Fprintf(stderr, "krabka-chaos check: %v\n", err)
		return exitHarness
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(summary); err != nil {
			return exitHarness
		}
	} else if err := summary.WriteTable(stdout); err != nil {
		return exitHarness
	}
	fmt.Fprintf(stderr, "run directory: %s\n", dir)
	if !summary.OK {
		return exitFailed
	}
	if st := summary.Report.FailoverStats; failSlow && st.OverBound+st.Unresolved > 0 {
		fmt.Fprintf(stderr, "krabka-chaos: %d failovers over their bound, %d never came (--fail-slow)\n", st.OverBound, st.Unresolved)
		return exitFailed
	}
	return exitOK
}

func memberMode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("krabka-chaos member", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "run directory (holds run.json)")
	id := fs.String("id", "", "member id")
	inc := fs.Int("inc", 1, "incarnation of this member id")
	proxy := fs.String("proxy", "", "address of the member's proxy to the broker")
	watchStdin := fs.Bool("watch-stdin", true, "exit when the standard input ends (the orchestrator died)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *dir == "" || *id == "" || *proxy == "" {
		fmt.Fprintln(stderr, "krabka-chaos member: --dir, --id and --proxy are required")
		return exitUsage
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if *watchStdin {
		chaos.WatchStdin(cancel)
	}
	if err := chaos.MemberProcess(ctx, *dir, *id, *inc, *proxy, stdout, stderr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "krabka-chaos member %s: %v\n", *id, err)
		return exitHarness
	}
	return exitOK
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
