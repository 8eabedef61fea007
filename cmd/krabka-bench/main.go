// Command krabka-bench runs the benchmarks of package coordination against
// a real Kafka broker and, side by side, against etcd's election recipe,
// and prints one table: p50, p90, p99 and max of each figure, and the ratio
// of Kafka to etcd where both apply.
//
// Run it through scripts/bench.sh, which starts a Kafka broker and a
// single-node etcd on loopback and passes their addresses:
//
//	krabka-bench -brokers 127.0.0.1:19092 -etcd 127.0.0.1:23790
//
// docs/performance.md explains every figure.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/bench"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == bench.ChildFlag {
		bench.RunChild(os.Args[2])
		return
	}
	brokers := flag.String("brokers", os.Getenv("KRABKA_KAFKA_BROKERS"), "Kafka seed brokers, comma-separated")
	etcd := flag.String("etcd", os.Getenv("KRABKA_ETCD_ENDPOINTS"), "etcd endpoints, comma-separated; empty skips etcd")
	cluster := flag.String("cluster", os.Getenv("KRABKA_KAFKA_CLUSTER_BROKERS"), "seed brokers of a 3-node Kafka cluster (scripts/kafka-cluster.sh), comma-separated; the handover, failover, write and throughput figures are measured on it too, next to the single broker; empty skips it")
	etcdCluster := flag.String("etcd-cluster", os.Getenv("KRABKA_ETCD_CLUSTER_ENDPOINTS"), "endpoints of a 3-node etcd, the counterpart of -cluster; empty leaves the etcd columns of the cluster rows empty")
	only := flag.String("only", "", "comma-separated figure groups to run: handover,failover,write,throughput,idle,fold,roles,transfer (default all)")
	scale := flag.Float64("scale", 1, "multiplies the sample counts and windows; 0.2 is a smoke test")
	idleWindow := flag.Duration("idle-window", 20*time.Second, "the window an idle standby is measured over; the table reports per minute")
	warmMax := flag.Duration("warm-max", 5*time.Minute, "the longest warm-up of one broker or cluster before its steady state is measured anyway (and reported as not converged)")
	tolerance := flag.Float64("tolerance", 0.05, "the warm-up ends when the p50 of every Kafka series (library and floor, handover and write) differs by less than this share between two successive windows")
	traces := flag.Bool("traces", false, "print the request timeline of the median library and floor sample of each latency figure")
	rolesSettle := flag.Duration("roles-settle", coordination.DefaultLeaseConfig().Duration()+5*time.Second, "how long the roles group waits after the last acquisition before it measures memory, goroutines and connections: by default a lease duration and 5 s, after which the transport's view no longer keeps the records of the roles that the campaigns followed (a role that no campaign follows lingers in the view for one lease duration), so the figures are those of a process that holds the roles rather than one that has just campaigned for them")
	rolesCounts := flag.String("roles-counts", "1,100,1000,10000", "comma-separated numbers of roles that the roles group holds in one process, one child process each")
	placement := flag.String("cluster-placement", "1,2", "where the work lands on the 3-node cluster: COORDINATOR,LEADER, the node id that coordinates every transactional id (library and floor) and the node id that leads every partition the benchmarks create; \"random\" lets the random names choose, so the library and its floor may land on different nodes")
	variants := flag.Bool("floor-variants", false, "measure, beside the floor of a handover, two floors whose holder also writes the tombstone of its registration as a plain record: in parallel with its tombstone transaction (as Leadership.Resign did before it wrote that tombstone inside the transaction), and after it")
	flag.Usage = usage
	flag.Parse()
	if err := checkDurations(*rolesSettle, *idleWindow, *warmMax, *scale, *tolerance); err != nil {
		fmt.Fprintf(os.Stderr, "krabka-bench: %v\n", err)
		os.Exit(2)
	}
	if *brokers == "" {
		fmt.Fprintln(os.Stderr, "krabka-bench: no brokers: pass -brokers or set KRABKA_KAFKA_BROKERS (scripts/bench.sh does)")
		os.Exit(2)
	}
	if *only != "" {
		known := map[string]bool{"handover": true, "failover": true, "write": true, "throughput": true, "idle": true, "fold": true, "roles": true, "transfer": true}
		for _, g := range strings.Split(*only, ",") {
			if !known[g] {
				fmt.Fprintf(os.Stderr, "krabka-bench: -only: unknown figure group %q (want handover, failover, write, throughput, idle, fold, roles or transfer)\n", g)
				os.Exit(2)
			}
		}
	}
	var place *bench.Placement
	if *placement != "random" {
		p, err := parsePlacement(*placement)
		if err != nil {
			fmt.Fprintf(os.Stderr, "krabka-bench: -cluster-placement: %v\n", err)
			os.Exit(2)
		}
		place = &p
	}
	counts, err := parseCounts(*rolesCounts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "krabka-bench: -roles-counts: %v\n", err)
		os.Exit(2)
	}
	k := &bench.Kafka{Brokers: strings.Split(*brokers, ",")}
	defer k.Cleanup()
	var e *bench.Etcd
	if *etcd != "" {
		e = &bench.Etcd{Endpoints: strings.Split(*etcd, ",")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := &runner{k: k, e: e, scale: *scale, idleWindow: *idleWindow, warmMax: *warmMax, tolerance: *tolerance, traces: *traces, variants: *variants, rolesCounts: counts, rolesSettle: *rolesSettle}
	if *cluster != "" {
		r.kc = &bench.Kafka{Brokers: strings.Split(*cluster, ","), Replication: 3}
		defer r.kc.Cleanup()
		if place != nil {
			if err := r.kc.Place(ctx, *place); err != nil {
				fmt.Fprintf(os.Stderr, "krabka-bench: -cluster-placement: %v\n", err)
				os.Exit(2)
			}
			r.placement = place.String()
		}
		if *etcdCluster != "" {
			r.ec = &bench.Etcd{Endpoints: strings.Split(*etcdCluster, ",")}
		}
	}
	groups := []struct {
		name string
		run  func(context.Context) error
	}{
		{"latency", func(ctx context.Context) error {
			return r.latency(ctx, picked(*only, "handover"), picked(*only, "write"))
		}},
		{"failover", r.failover},
		{"throughput", r.throughput},
		{"idle", r.idle},
		{"fold", r.fold},
		{"roles", r.roles},
		{"transfer", r.transfer},
	}
	start := time.Now()
	for _, g := range groups {
		if g.name == "latency" && !picked(*only, "handover") && !picked(*only, "write") || g.name != "latency" && !picked(*only, g.name) {
			continue
		}
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "krabka-bench: %s...\n", g.name)
		if err := g.run(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "krabka-bench: %s: %v\n", g.name, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "krabka-bench: %s done in %.1fs\n", g.name, time.Since(t0).Seconds())
	}
	fmt.Printf("krabka-bench: Kafka %s, etcd %s, 3-node Kafka %s, 3-node etcd %s, GOMAXPROCS %d, %.0f s\n\n",
		*brokers, orNone(*etcd), orNone(*cluster), orNone(*etcdCluster), runtime.GOMAXPROCS(0), time.Since(start).Seconds())
	// The library runs with its defaults, the specification's: each figure
	// sets its timings, topic and partitions, and switches no extension on.
	if r.kc != nil {
		fmt.Printf("krabka-bench: 3-node cluster placement: %s\n\n", orDefault(r.placement, "random (each name chose its coordinator and the broker chose the partition leaders)"))
	}
	fmt.Printf("krabka-bench: library options: the defaults (no extension: no heartbeats, no resignation anchor, no duplicate-member watch); timings as each row says\n\n")
	r.table.Print(os.Stdout)
	for _, s := range r.steps {
		fmt.Println()
		fmt.Print(s)
	}
}

// picked reports whether the -only list picks the group (an empty list
// picks every group).
func picked(only, group string) bool {
	return only == "" || strings.Contains(","+only+",", ","+group+",")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

type runner struct {
	placement  string // the cluster's placement, "" for random
	k          *bench.Kafka
	e          *bench.Etcd
	kc         *bench.Kafka // the 3-node Kafka cluster, nil for none
	ec         *bench.Etcd  // the 3-node etcd, nil for none
	scale      float64
	idleWindow time.Duration
	warmMax    time.Duration
	tolerance  float64
	table      bench.Table
	steps      []string // the step traces of the latency figures
	traces     bool     // print the request timeline of the median samples too
	variants   bool     // measure the floor variants that attribute the library's gap
	// rolesCounts are the numbers of roles of the roles group.
	rolesCounts []int
	// rolesSettle is the wait after the last acquisition of the roles group.
	rolesSettle time.Duration
}

// parseCounts reads -roles-counts: positive integers, comma-separated.
func parseCounts(s string) ([]int, error) {
	var counts []int
	for _, field := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number of roles", field)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

func (r *runner) n(base int) int { return max(3, int(float64(base)*r.scale)) }

func summary(samples []float64) *bench.Summary {
	s := bench.Summarize(samples)
	return &s
}

func single(value float64) *bench.Summary {
	s := bench.Single(value)
	return &s
}

// onCluster is one side by side pair: the single broker and the single
// etcd, or the 3-node Kafka cluster and the 3-node etcd.
type onCluster struct {
	suffix string // appended to the figure's name
	k      *bench.Kafka
	e      *bench.Etcd
	scale  float64 // of the sample counts
}

// pairs returns the single broker's pair and, when configured, the
// cluster's, so that each figure's cluster row comes right after it.
func (r *runner) pairs() []onCluster {
	pairs := []onCluster{{k: r.k, e: r.e, scale: 1}}
	if r.kc != nil {
		pairs = append(pairs, onCluster{suffix: ", 3-node cluster", k: r.kc, e: r.ec, scale: 0.5})
	}
	return pairs
}

// latency measures the handover and the guarded write, each figure next
// to its protocol floor and to etcd, on each pair in turn, in steady state:
// RunSteady warms the broker with windows of every series until the p50 of
// two successive windows differs by less than the tolerance, then measures.
// The rows give the cold first window too.
func (r *runner) latency(ctx context.Context, handover, write bool) error {
	for _, p := range r.pairs() {
		var series []*bench.Series
		var closers []func()
		defer func() {
			for _, c := range closers {
				c()
			}
		}()
		add := func(s *bench.Series, close func()) {
			series = append(series, s)
			closers = append(closers, close)
		}
		hw, hn := max(5, r.n(int(30*p.scale))), r.n(int(200*p.scale))
		ww, wn := max(20, r.n(int(300*p.scale))), r.n(int(1000*p.scale))
		var lh, fh, fr, fa, eh, lw, fw, ew *bench.Series
		if handover {
			lib, err := p.k.NewLibraryHandover(ctx)
			if err != nil {
				return fmt.Errorf("library handover%s: %w", p.suffix, err)
			}
			lh = &bench.Series{Name: "library handover", Window: hw, N: hn, Converge: true, Next: lib.Sample}
			add(lh, lib.Close)
			floor, err := p.k.NewFloorHandover(ctx)
			if err != nil {
				return fmt.Errorf("floor handover%s: %w", p.suffix, err)
			}
			fh = &bench.Series{Name: "floor handover", Window: hw, N: hn, Converge: true, Next: floor.Sample}
			add(fh, floor.Close)
			if r.variants {
				reg, err := p.k.NewFloorHandoverWithRegistration(ctx)
				if err != nil {
					return fmt.Errorf("floor handover with registration%s: %w", p.suffix, err)
				}
				fr = &bench.Series{Name: "floor handover + registration tombstone", Window: hw, N: hn, Next: reg.Sample}
				add(fr, reg.Close)
				after, err := p.k.NewFloorHandoverWithRegistrationAfter(ctx)
				if err != nil {
					return fmt.Errorf("floor handover with registration after%s: %w", p.suffix, err)
				}
				fa = &bench.Series{Name: "floor handover + registration tombstone after", Window: hw, N: hn, Next: after.Sample}
				add(fa, after.Close)
			}
			if p.e != nil {
				e, err := p.e.NewHandoverSession(ctx)
				if err != nil {
					return fmt.Errorf("etcd handover%s: %w", p.suffix, err)
				}
				eh = &bench.Series{Name: "etcd handover", Window: hw, N: hn, Next: e.Sample}
				add(eh, e.Close)
			}
		}
		if write {
			lib, err := p.k.NewLibraryWrite(ctx)
			if err != nil {
				return fmt.Errorf("library write%s: %w", p.suffix, err)
			}
			lw = &bench.Series{Name: "library write", Window: ww, N: wn, Converge: true, Next: lib.Sample}
			add(lw, lib.Close)
			floor, err := p.k.NewFloorWrite(ctx)
			if err != nil {
				return fmt.Errorf("floor write%s: %w", p.suffix, err)
			}
			fw = &bench.Series{Name: "floor write", Window: ww, N: wn, Converge: true, Next: floor.Sample}
			add(fw, floor.Close)
			if p.e != nil {
				e, err := p.e.NewWriteSession(ctx)
				if err != nil {
					return fmt.Errorf("etcd write%s: %w", p.suffix, err)
				}
				ew = &bench.Series{Name: "etcd write", Window: ww, N: wn, Next: e.Sample}
				add(ew, e.Close)
			}
		}
		where := "single broker"
		if p.suffix != "" {
			where = "3-node cluster"
		}
		progress := func(line string) { fmt.Fprintf(os.Stderr, "krabka-bench: %s: %s\n", where, line) }
		w, err := bench.RunSteady(ctx, series, r.tolerance, 3, r.warmMax, progress)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		warm := bench.Row{Figure: "warm-up before the steady state" + p.suffix, Unit: "s", Kafka: single(w.Took.Seconds()), Load: w.LoadCold,
			Target: fmt.Sprintf("2 windows within %.0f %%", 100*r.tolerance), Met: bench.Met(w.Converged)}
		var traj []string
		for _, s := range series {
			if s.Converge {
				traj = append(traj, fmt.Sprintf("%s %s", s.Name, joinFloats(s.WindowP50)))
			}
		}
		warm.Note = fmt.Sprintf("%d windows (handover %d samples, write %d samples each, interleaved); largest change of a Kafka p50 between the last two: %.1f %%; "+
			"p50 ms per window: %s; load (1 min) %.2f after the cold window, %.2f after the steady state (%.0f s)",
			w.Windows, hw, ww, 100*w.LastChange, strings.Join(traj, "; "), w.LoadCold, w.LoadSteady, w.Measured.Seconds())
		for _, s := range series {
			if len(s.Errors) > 0 {
				warm.Note += fmt.Sprintf("; %s: %d samples failed and count in no figure (first: %v)", s.Name, len(s.Errors), s.Errors[0])
			}
		}
		r.table.Add(warm)
		if handover {
			r.addLatencyRows("handover after Resign", p.suffix, lh, fh, eh, w, 2)
			if fr != nil {
				row := bench.Row{Figure: "  floor with Resign's registration tombstone in parallel" + p.suffix, Unit: "ms",
					Kafka: summary(bench.Millis(bench.Durations(lh.Steady))), Floor: summary(bench.Millis(bench.Durations(fr.Steady))), Load: w.LoadSteady,
					Note: "the floor's holder also writes a plain tombstone of its registration to the same partition while its tombstone transaction runs, as Leadership.Resign did before it wrote the registration tombstone inside its tombstone transaction (2026-12-04); requests per sample: " + bench.RequestsPerSample(fr.Steady)}
				r.table.Add(row)
				r.addSteps("handover after Resign, floor with the registration tombstone"+p.suffix, bench.LibraryHandoverSteps, lh, fr)
				r.table.Add(bench.Row{Figure: "  floor with the registration tombstone after the lease tombstone" + p.suffix, Unit: "ms",
					Kafka: summary(bench.Millis(bench.Durations(lh.Steady))), Floor: summary(bench.Millis(bench.Durations(fa.Steady))), Load: w.LoadSteady,
					Note: "the floor's holder writes the plain tombstone of its registration once its tombstone transaction committed, while the standby takes over (an order Resign could take); requests per sample: " + bench.RequestsPerSample(fa.Steady)})
			}
			r.addSteps("handover after Resign"+p.suffix, bench.LibraryHandoverSteps, lh, fh)
		}
		if write {
			r.addLatencyRows("guarded write, 1 command", p.suffix, lw, fw, ew, w, 2.5)
			r.addSteps("guarded write"+p.suffix, bench.FloorWriteSteps, lw, fw)
		}
	}
	return nil
}

func joinFloats(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.3g", x))
	}
	return strings.Join(parts, " ")
}

// addLatencyRows adds the cold and the steady rows of one figure. The
// steady row's target is the issue's: library/floor ≤ 1.15, and on the
// single broker Kafka/etcd ≤ etcdBound.
func (r *runner) addLatencyRows(figure, suffix string, lib, floor, etcd *bench.Series, w bench.WarmUp, etcdBound float64) {
	summ := func(s *bench.Series, samples func(*bench.Series) []bench.Sample) *bench.Summary {
		if s == nil {
			return nil
		}
		return summary(bench.Millis(bench.Durations(samples(s))))
	}
	cold := func(s *bench.Series) []bench.Sample { return s.Cold }
	steady := func(s *bench.Series) []bench.Sample { return s.Steady }
	r.table.Add(bench.Row{Figure: figure + ", cold (1st window)" + suffix, Unit: "ms", Kafka: summ(lib, cold), Floor: summ(floor, cold), Etcd: summ(etcd, cold), Load: w.LoadCold})
	row := bench.Row{Figure: figure + ", steady state" + suffix, Unit: "ms", Kafka: summ(lib, steady), Floor: summ(floor, steady), Etcd: summ(etcd, steady), Load: w.LoadSteady}
	ratio := row.Kafka.P50 / row.Floor.P50
	met := ratio <= 1.15
	row.Target = "library/floor ≤ 1.15"
	if suffix == "" {
		row.Target += fmt.Sprintf(", ≤ %g× etcd", etcdBound)
		if row.Etcd != nil {
			met = met && row.Kafka.P50 <= etcdBound*row.Etcd.P50
		}
	}
	row.Met = bench.Met(met)
	row.Note = fmt.Sprintf("requests per sample, library: %s; floor: %s", bench.RequestsPerSample(lib.Steady), bench.RequestsPerSample(floor.Steady))
	r.table.Add(row)
}

// addSteps records the median instant of each step of a figure, for the
// library and its floor, printed after the table.
func (r *runner) addSteps(figure string, names []string, lib, floor *bench.Series) {
	l, f := bench.StepMedians(lib.Steady), bench.StepMedians(floor.Steady)
	var b strings.Builder
	fmt.Fprintf(&b, "%s, steady state: median instant of each step, ms from the start\n\n| step | library | floor | library − floor |\n|---|---|---|---|\n", figure)
	for i, name := range names {
		lv, fv := math.NaN(), math.NaN()
		if i < len(l) {
			lv = l[i]
		}
		if i < len(f) {
			fv = f[i]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, ms(lv), ms(fv), ms(lv-fv))
	}
	lt, ft := summary(bench.Millis(bench.Durations(lib.Steady))).P50, summary(bench.Millis(bench.Durations(floor.Steady))).P50
	fmt.Fprintf(&b, "| whole figure (p50) | %s | %s | %s |\n", ms(lt), ms(ft), ms(lt-ft))
	if r.traces {
		for _, side := range []struct {
			name string
			s    *bench.Series
		}{{"library", lib}, {"floor", floor}} {
			m := bench.MedianSample(side.s.Steady)
			fmt.Fprintf(&b, "\n%s, the %s's median sample (%.2f ms), request by request (member, API, ms from the start):\n\n", figure, side.name, float64(m.D)/float64(time.Millisecond))
			for _, line := range m.Trace {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
		b.WriteString("\n")
	}
	r.steps = append(r.steps, b.String())
}

func ms(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func (r *runner) failover(ctx context.Context) error {
	lease, err := coordination.NewLeaseConfig(500*time.Millisecond, 150*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		return err
	}
	for _, p := range r.pairs() {
		f, ended, err := p.k.KafkaFailover(ctx, r.n(int(60*p.scale)), 3, lease)
		if err != nil {
			return fmt.Errorf("kafka%s: %w", p.suffix, err)
		}
		row := bench.Row{Figure: "failover after a crash, past deadline + stagger" + p.suffix, Unit: "ms", Kafka: summary(bench.Millis(f)), Target: "p99 ≤ 50"}
		if p.suffix == "" {
			row.Note = "Kafka: lease 500 ms, renew 150 ms, rank 0; etcd: session TTL 1 s, past the lease's expiry (last keep-alive + TTL)"
		}
		if len(ended) > 0 {
			row.Note = strings.TrimPrefix(row.Note+fmt.Sprintf("; %d rounds without a sample: the holder's leadership ended before its crash (first: %v)", len(ended), ended[0]), "; ")
		}
		row.Met = bench.Met(row.Kafka.P99 <= 50)
		if p.e != nil {
			ef, err := p.e.EtcdFailover(ctx, max(2, r.n(int(8*p.scale))), 4, 1)
			if err != nil {
				return fmt.Errorf("etcd%s: %w", p.suffix, err)
			}
			row.Etcd = summary(bench.Millis(ef))
		}
		r.table.Add(row)
	}
	return nil
}

func (r *runner) throughput(ctx context.Context) error {
	window := time.Duration(float64(time.Second) * max(r.scale, 0.5))
	windows := r.n(5)
	batched, _, err := r.k.KafkaThroughput(ctx, 1, 1000, windows, window)
	if err != nil {
		return fmt.Errorf("kafka batched: %w", err)
	}
	row := bench.Row{Figure: "commands/s, batched, 1 writer", Unit: "cmd/s", Kafka: summary(batched), Target: "p50 ≥ 50000", HigherIsBetter: true,
		Note: fmt.Sprintf("Kafka: 1000 commands of 100 B per Write; etcd: %d puts per guarded Txn (its --max-txn-ops); p50..max over %d windows of %v", bench.EtcdMaxTxnOps, windows, window)}
	row.Met = bench.Met(row.Kafka.P50 >= 50000)
	if r.e != nil {
		eb, err := r.e.EtcdThroughput(ctx, 1, bench.EtcdMaxTxnOps, windows, window)
		if err != nil {
			return fmt.Errorf("etcd batched: %w", err)
		}
		row.Etcd = summary(eb)
	}
	r.table.Add(row)
	var perTxn []string
	for _, p := range r.pairs() {
		concurrent, calls, err := p.k.KafkaThroughput(ctx, 16, 1, windows, window)
		if err != nil {
			return fmt.Errorf("kafka 16 writers%s: %w", p.suffix, err)
		}
		perTxn = append(perTxn, fmt.Sprintf("%.1f", calls))
		bound := 2.0
		if p.suffix != "" {
			bound = 1 // the target on the cluster
		}
		floor, err := p.k.FloorThroughput(ctx, 16, windows, window)
		if err != nil {
			return fmt.Errorf("floor 16 writers%s: %w", p.suffix, err)
		}
		row := bench.Row{Figure: "commands/s, 16 writers, 1 command per call" + p.suffix, Unit: "cmd/s", Kafka: summary(concurrent), Floor: summary(floor), HigherIsBetter: true,
			Target: fmt.Sprintf("p50 ≥ %g× etcd", bound), Load: bench.LoadAverage()}
		if p.e != nil {
			ec, err := p.e.EtcdThroughput(ctx, 16, 1, windows, window)
			if err != nil {
				return fmt.Errorf("etcd 16 writers%s: %w", p.suffix, err)
			}
			row.Etcd = summary(ec)
			row.Met = bench.Met(row.Kafka.P50 >= bound*row.Etcd.P50)
		}
		r.table.Add(row)
	}
	r.table.Rows[len(r.table.Rows)-1].Note = fmt.Sprintf("Kafka: 16 goroutines of one leader; the group commit put %s calls in each transaction (single broker / cluster; EndTxn requests counted); the floor: back-to-back transactions of 16 records in one batch, one bare producer (the most a role's one producer commits when 16 writers wait); etcd: 16 goroutines over one client",
		strings.Join(perTxn, " / "))
	return nil
}

func (r *runner) idle(ctx context.Context) error {
	warm := 3 * time.Second
	sizes := []int64{100, 10_000, 1_000_000}
	type etcdOut struct {
		r   bench.ChildResult
		err error
	}
	etcdCh := make(chan etcdOut, 1)
	if r.e != nil {
		go func() {
			res, err := r.e.EtcdIdle(ctx, warm+5*time.Second, r.idleWindow)
			etcdCh <- etcdOut{res, err}
		}()
	} else {
		etcdCh <- etcdOut{}
	}
	results, err := r.k.KafkaIdle(ctx, sizes, warm, r.idleWindow)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	eo := <-etcdCh
	if eo.err != nil {
		return fmt.Errorf("etcd: %w", eo.err)
	}
	var etcdCPU, etcdBytes *bench.Summary
	if r.e != nil {
		etcdCPU, etcdBytes = single(eo.r.CPUPercent), single(eo.r.BytesReadMin)
	}
	for _, res := range results {
		row := bench.Row{Figure: fmt.Sprintf("idle standby CPU, partition of %d records", res.Records), Unit: "% core",
			Kafka: single(res.CPUPercent), Etcd: etcdCPU, Target: "< 0.5", Met: bench.Met(res.CPUPercent < 0.5)}
		if res.Records == sizes[len(sizes)-1] {
			row.Note = fmt.Sprintf("a child process, getrusage over %v after it caught up; default lease 30 s / renew 10 s; etcd: a Campaign behind a leader, session TTL 30 s", r.idleWindow)
		}
		r.table.Add(row)
	}
	base := results[0].BytesReadMin
	for _, res := range results {
		row := bench.Row{Figure: fmt.Sprintf("idle standby bytes fetched/min, %d records", res.Records), Unit: "B/min",
			Kafka: single(res.BytesReadMin), Etcd: etcdBytes, Target: "flat, ≤ 2× etcd"}
		met := res.BytesReadMin <= 1.25*base
		if etcdBytes != nil {
			met = met && res.BytesReadMin <= 2*etcdBytes.P50
		}
		row.Met = bench.Met(met)
		if res.Records == sizes[len(sizes)-1] {
			row.Note = fmt.Sprintf("bytes read from the broker by every client of the transport (kgo read hook), %v scaled to a minute; Kafka requests/min at 100 / 10k / 1M records: %.0f / %.0f / %.0f; standby RSS %.0f / %.0f / %.0f MiB",
				r.idleWindow, results[0].RequestsMin, results[1].RequestsMin, results[2].RequestsMin,
				mib(results[0].RSS), mib(results[1].RSS), mib(results[2].RSS))
		}
		r.table.Add(row)
	}
	// The heap of the standby: the transport keeps the records of the
	// roles that its process follows, so a partition of other roles'
	// records costs it nothing but their fetch (issue 19: the standby of
	// the 1 000 000-record partition holds at most 2× the heap of the
	// 10 000-record one's).
	mid := results[1].Heap
	for _, res := range results {
		row := bench.Row{Figure: fmt.Sprintf("idle standby heap, partition of %d records", res.Records), Unit: "MiB",
			Kafka: single(mib(res.Heap)), Target: "≤ 2× the 10000-record standby's"}
		row.Met = bench.Met(res.Heap <= 2*mid)
		if res.Records == sizes[len(sizes)-1] {
			row.Note = "runtime HeapInuse after a GC, at the end of the window; the transport keeps the records of the standby's own role (ExtendedTransport.ReadRolesFrom), not the partition's other records"
		}
		r.table.Add(row)
	}
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func (r *runner) fold(ctx context.Context) error {
	for _, size := range []int{100, 10_000, 1_000_000} {
		inc, full := bench.FoldCost(size)
		r.table.Add(bench.Row{Figure: fmt.Sprintf("evaluation after 1 new record, log of %d", size), Unit: "µs",
			Kafka: single(inc), Target: "O(new)"})
		r.table.Add(bench.Row{Figure: "  full rebuild of the same log (the spec's poll)", Unit: "µs", Kafka: single(full)})
	}
	return nil
}

func (r *runner) roles(ctx context.Context) error {
	counts := r.rolesCounts
	warm := r.rolesSettle
	// The renewals are watched over a renew interval of the default lease
	// (10 s) and two seconds more, so that every role renews in it.
	window := coordination.DefaultLeaseConfig().RenewInterval() + 2*time.Second
	kr, err := r.k.KafkaRoles(ctx, counts, warm, window)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	var er []bench.ChildResult
	if r.e != nil {
		if er, err = r.e.EtcdRoles(ctx, counts, warm); err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
	}
	for i, n := range counts {
		row := bench.Row{Figure: fmt.Sprintf("%d roles held by one process: RSS", n), Unit: "MiB", Kafka: single(mib(kr[i].RSS))}
		if er != nil {
			row.Etcd = single(mib(er[i].RSS))
		}
		switch {
		case n == 1000 && er != nil:
			row.Target, row.Met = "≤ 2× etcd", bench.Met(kr[i].RSS <= 2*er[i].RSS)
		case n == 10_000:
			row.Target, row.Met = "≤ 200", bench.Met(mib(kr[i].RSS) <= 200)
			if er != nil {
				row.Target, row.Met = "≤ 2× etcd", bench.Met(kr[i].RSS <= 2*er[i].RSS)
			}
		}
		r.table.Add(row)
		row = bench.Row{Figure: fmt.Sprintf("  %d roles: Go heap in use", n), Unit: "MiB", Kafka: single(mib(kr[i].Heap))}
		if er != nil {
			row.Etcd = single(mib(er[i].Heap))
		}
		r.table.Add(row)
		row = bench.Row{Figure: fmt.Sprintf("  %d roles: TCP connections to the server", n), Unit: "conns", Kafka: single(float64(kr[i].Connections))}
		if er != nil {
			row.Etcd = single(float64(er[i].Connections))
		}
		row.Target, row.Met = "≤ 10", bench.Met(kr[i].Connections <= 10)
		r.table.Add(row)
		row = bench.Row{Figure: fmt.Sprintf("  %d roles: goroutines", n), Unit: "#", Kafka: single(float64(kr[i].Goroutines))}
		if n == counts[len(counts)-1] {
			var spans []string
			for j := range counts {
				spans = append(spans, fmt.Sprintf("%d roles %d / %d", counts[j], kr[j].GoroutinesMin, kr[j].GoroutinesMax))
			}
			row.Note = fmt.Sprintf("Kafka, %v after the last acquisition; over the renewal window, fewest / most at %s "+
				"(a renewal in flight is two goroutines, at most 1024 renewals at once)", warm, strings.Join(spans, ", "))
		}
		if er != nil {
			row.Etcd = single(float64(er[i].Goroutines))
		}
		r.table.Add(row)
		row = bench.Row{Figure: fmt.Sprintf("  %d roles: time to acquire all", n), Unit: "s", Kafka: single(kr[i].Setup)}
		if er != nil {
			row.Etcd = single(er[i].Setup)
		}
		if n == 10_000 {
			row.Target, row.Met = "≤ 10", bench.Met(kr[i].Setup <= 10)
			row.Note = fmt.Sprintf("%d roles acquired at a time, on Kafka and etcd alike", bench.RolesAtOnce)
		}
		r.table.Add(row)
		row = bench.Row{Figure: fmt.Sprintf("  %d roles: leaderships late to renew", n), Unit: "roles", Kafka: single(float64(kr[i].LateRenewals)),
			Target: "0", Met: bench.Met(kr[i].LateRenewals == 0)}
		if n == counts[len(counts)-1] {
			var ages []string
			for j := range counts {
				ages = append(ages, fmt.Sprintf("%d roles %.1f s", counts[j], kr[j].MaxRenewalAge))
			}
			row.Note = fmt.Sprintf("renew interval 10 s; a leadership is late when its last renewal is older than 11 s at a once-a-second sample over %v; "+
				"oldest last renewal seen: %s", window, strings.Join(ages, ", "))
		}
		r.table.Add(row)
	}
	return nil
}

// transfer measures a planned transfer (issue 31) on each broker or
// cluster: TransferTo to a live member next to the handover after Resign
// and to the protocol floor of a transfer, in one steady-state run; a
// transfer to a member that is down and to one not in the roster; and the
// drain of a member that holds 100 roles.
func (r *runner) transfer(ctx context.Context) error {
	for _, p := range r.pairs() {
		var series []*bench.Series
		var closers []func()
		defer func() {
			for _, c := range closers {
				c()
			}
		}()
		hw, hn := max(5, r.n(int(30*p.scale))), r.n(int(200*p.scale))
		lt, err := p.k.NewLibraryTransfer(ctx)
		if err != nil {
			return fmt.Errorf("library transfer%s: %w", p.suffix, err)
		}
		closers = append(closers, lt.Close)
		ft, err := p.k.NewFloorTransfer(ctx)
		if err != nil {
			return fmt.Errorf("floor transfer%s: %w", p.suffix, err)
		}
		closers = append(closers, ft.Close)
		lh, err := p.k.NewLibraryHandover(ctx)
		if err != nil {
			return fmt.Errorf("library handover%s: %w", p.suffix, err)
		}
		closers = append(closers, lh.Close)
		st := &bench.Series{Name: "library transfer", Window: hw, N: hn, Converge: true, Next: lt.Sample}
		sf := &bench.Series{Name: "floor transfer", Window: hw, N: hn, Converge: true, Next: ft.Sample}
		sh := &bench.Series{Name: "library handover", Window: hw, N: hn, Converge: true, Next: lh.Sample}
		series = append(series, st, sf, sh)
		where := "single broker"
		if p.suffix != "" {
			where = "3-node cluster"
		}
		progress := func(line string) { fmt.Fprintf(os.Stderr, "krabka-bench: transfer, %s: %s\n", where, line) }
		w, err := bench.RunSteady(ctx, series, r.tolerance, 3, r.warmMax, progress)
		if err != nil {
			return fmt.Errorf("transfer, %s: %w", where, err)
		}
		for _, s := range series {
			if len(s.Errors) > 0 {
				fmt.Fprintf(os.Stderr, "krabka-bench: transfer, %s: %s: %d samples failed (first: %v)\n", where, s.Name, len(s.Errors), s.Errors[0])
			}
		}
		steady := func(s *bench.Series) *bench.Summary { return summary(bench.Millis(bench.Durations(s.Steady))) }
		transfer, floor, handover := steady(st), steady(sf), steady(sh)
		row := bench.Row{Figure: "transfer to a live member, steady state" + p.suffix, Unit: "ms", Kafka: transfer, Floor: floor, Load: w.LoadSteady,
			Target: "p50 ≤ 1.15× floor, ≤ 1.15× handover after Resign"}
		row.Met = bench.Met(transfer.P50 <= 1.15*floor.P50 && transfer.P50 <= 1.15*handover.P50)
		row.Note = fmt.Sprintf("from TransferTo's start to the named member's AcquireLeadership; %d windows of %d samples, interleaved with the two below; requests per sample, library: %s; floor: %s",
			w.Windows, hw, bench.RequestsPerSample(st.Steady), bench.RequestsPerSample(sf.Steady))
		r.table.Add(row)
		r.table.Add(bench.Row{Figure: "  handover after Resign, same run" + p.suffix, Unit: "ms", Kafka: handover, Load: w.LoadSteady,
			Note: fmt.Sprintf("transfer p50 / handover p50 = %.2f", transfer.P50/handover.P50)})
		r.addSteps("transfer to a live member"+p.suffix, bench.LibraryTransferSteps, st, sf)

		bound := 3 * time.Second
		down, notMember, err := p.k.KafkaTransferRefusals(ctx, r.n(5), bound)
		if err != nil {
			return fmt.Errorf("transfer refusals%s: %w", p.suffix, err)
		}
		for _, c := range []struct {
			name string
			out  bench.TransferRefusal
		}{{"transfer to a down member", down}, {"transfer to a non-member", notMember}} {
			s := summary(bench.Millis(c.out.Took))
			rounds := len(c.out.Took)
			row := bench.Row{Figure: "  " + c.name + ": TransferTo's error" + p.suffix, Unit: "ms", Kafka: s,
				Target: fmt.Sprintf("holder keeps the role, no epoch used, max ≤ bound %v + 1 s", bound)}
			row.Met = bench.Met(c.out.Kept == rounds && c.out.EpochUsed == 0 && s.Max <= float64((bound+time.Second)/time.Millisecond))
			row.Note = fmt.Sprintf("%d rounds: holder kept the role %d, an epoch used %d; faults %s", rounds, c.out.Kept, c.out.EpochUsed, strings.Join(slices.Compact(slices.Sorted(slices.Values(c.out.Faults))), ", "))
			if c.name == "transfer to a down member" {
				row.Note += "; down: a registration with no process behind it, heartbeats off, so the holder waits for the bound"
			}
			r.table.Add(row)
		}

		took, failed, err := p.k.KafkaDrain(ctx, 100)
		if err != nil {
			return fmt.Errorf("drain%s: %w", p.suffix, err)
		}
		row = bench.Row{Figure: "  drain of a member holding 100 roles: time to empty" + p.suffix, Unit: "s", Kafka: single(took.Seconds()),
			Note: fmt.Sprintf("TransferTo of every role to one live standby, %d at once; %d transfers failed", bench.RolesAtOnce, failed)}
		if p.suffix == "" {
			row.Target, row.Met = "≤ 10, none failed", bench.Met(took.Seconds() <= 10 && failed == 0)
		}
		r.table.Add(row)
	}
	return nil
}

// usage prints the flags and the environment that krabka-bench reads.
func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprintf(out, "usage: krabka-bench [flags]\n\n")
	fmt.Fprintf(out, "Measures the library, the Kafka protocol's floor and etcd side by side; scripts/bench.sh starts what it needs.\n\n")
	fmt.Fprintf(out, "Environment:\n")
	fmt.Fprintf(out, "  KRABKA_KAFKA_BROKERS            default of -brokers\n")
	fmt.Fprintf(out, "  KRABKA_ETCD_ENDPOINTS           default of -etcd\n")
	fmt.Fprintf(out, "  KRABKA_KAFKA_CLUSTER_BROKERS    default of -cluster\n")
	fmt.Fprintf(out, "  KRABKA_ETCD_CLUSTER_ENDPOINTS   default of -etcd-cluster\n")
	fmt.Fprintf(out, "  %-31s an existing directory: each roles child writes <mode>-<pid>.heap.pprof and .memstats.json there\n\n", bench.HeapProfileEnv)
	fmt.Fprintf(out, "Flags:\n")
	flag.PrintDefaults()
}

// checkDurations refuses flag values that cannot measure anything: a
// negative wait or window, a zero or negative scale or tolerance.
func checkDurations(rolesSettle, idleWindow, warmMax time.Duration, scale, tolerance float64) error {
	switch {
	case rolesSettle < 0:
		return fmt.Errorf("-roles-settle %v: want a duration of 0 or more", rolesSettle)
	case idleWindow <= 0:
		return fmt.Errorf("-idle-window %v: want a duration above 0", idleWindow)
	case warmMax <= 0:
		return fmt.Errorf("-warm-max %v: want a duration above 0", warmMax)
	case !(scale > 0):
		return fmt.Errorf("-scale %v: want a number above 0", scale)
	case !(tolerance > 0):
		return fmt.Errorf("-tolerance %v: want a number above 0", tolerance)
	}
	return nil
}

// parsePlacement reads -cluster-placement: COORDINATOR,LEADER, two node ids.
func parsePlacement(s string) (bench.Placement, error) {
	fields := strings.Split(s, ",")
	if len(fields) != 2 {
		return bench.Placement{}, fmt.Errorf("%q: want COORDINATOR,LEADER (two node ids) or random", s)
	}
	var ids [2]int32
	for i, f := range fields {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || n < 0 {
			return bench.Placement{}, fmt.Errorf("%q: %q is not a node id", s, f)
		}
		ids[i] = int32(n)
	}
	return bench.Placement{Coordinator: ids[0], Leader: ids[1]}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
