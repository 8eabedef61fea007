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
	"os"
	"runtime"
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
	only := flag.String("only", "", "comma-separated figure groups to run: handover,failover,write,throughput,idle,fold,roles,shared (default all)")
	scale := flag.Float64("scale", 1, "multiplies the sample counts and windows; 0.2 is a smoke test")
	idleWindow := flag.Duration("idle-window", 20*time.Second, "the window an idle standby is measured over; the table reports per minute")
	flag.Parse()
	if *brokers == "" {
		fmt.Fprintln(os.Stderr, "krabka-bench: no brokers: pass -brokers or set KRABKA_KAFKA_BROKERS (scripts/bench.sh does)")
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
	r := &runner{k: k, e: e, scale: *scale, idleWindow: *idleWindow}
	groups := []struct {
		name string
		run  func(context.Context) error
	}{
		{"handover", r.handover},
		{"failover", r.failover},
		{"write", r.write},
		{"throughput", r.throughput},
		{"idle", r.idle},
		{"fold", r.fold},
		{"roles", r.roles},
		{"shared", r.shared},
	}
	start := time.Now()
	for _, g := range groups {
		if *only != "" && !strings.Contains(","+*only+",", ","+g.name+",") {
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
	fmt.Printf("krabka-bench: Kafka %s, etcd %s, GOMAXPROCS %d, %.0f s\n\n", *brokers, orNone(*etcd), runtime.GOMAXPROCS(0), time.Since(start).Seconds())
	r.table.Print(os.Stdout)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

type runner struct {
	k          *bench.Kafka
	e          *bench.Etcd
	scale      float64
	idleWindow time.Duration
	table      bench.Table
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

func (r *runner) handover(ctx context.Context) error {
	h, resign, err := r.k.KafkaHandover(ctx, r.n(200), 5)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	row := bench.Row{Figure: "handover after Resign", Unit: "ms", Kafka: summary(bench.Millis(h)), Target: "p50 ≤ 5"}
	row.Met = bench.Met(row.Kafka.P50 <= 5)
	if r.e != nil {
		eh, err := r.e.EtcdHandover(ctx, r.n(100), 5)
		if err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
		row.Etcd = summary(bench.Millis(eh))
	}
	r.table.Add(row)
	r.table.Add(bench.Row{Figure: "  of which Resign returns", Unit: "ms", Kafka: summary(bench.Millis(resign)),
		Note: "the holder's two tombstones: the lease tombstone in a transaction, then the registration tombstone"})
	return nil
}

func (r *runner) failover(ctx context.Context) error {
	lease, err := coordination.NewLeaseConfig(500*time.Millisecond, 150*time.Millisecond, 100*time.Millisecond)
	if err != nil {
		return err
	}
	f, err := r.k.KafkaFailover(ctx, r.n(60), 3, lease)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	row := bench.Row{Figure: "failover after a crash, past deadline + stagger", Unit: "ms", Kafka: summary(bench.Millis(f)), Target: "p99 ≤ 50",
		Note: "Kafka: lease 500 ms, renew 150 ms, rank 0; etcd: session TTL 1 s, past the lease's expiry (last keep-alive + TTL)"}
	row.Met = bench.Met(row.Kafka.P99 <= 50)
	if r.e != nil {
		ef, err := r.e.EtcdFailover(ctx, max(2, r.n(8)), 4, 1)
		if err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
		row.Etcd = summary(bench.Millis(ef))
	}
	r.table.Add(row)
	return nil
}

func (r *runner) write(ctx context.Context) error {
	w, err := r.k.KafkaWriteLatency(ctx, r.n(1000), 20)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	row := bench.Row{Figure: "guarded write, 1 command", Unit: "ms", Kafka: summary(bench.Millis(w)), Target: "p50 ≤ 3",
		Note: "Kafka: Leadership.Write, back to back; etcd: Txn(If leader key's CreateRevision = the election's).Then(Put)"}
	row.Met = bench.Met(row.Kafka.P50 <= 3)
	if r.e != nil {
		ew, err := r.e.EtcdWriteLatency(ctx, r.n(1000), 20)
		if err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
		row.Etcd = summary(bench.Millis(ew))
	}
	r.table.Add(row)
	return nil
}

func (r *runner) throughput(ctx context.Context) error {
	window := time.Duration(float64(time.Second) * max(r.scale, 0.5))
	windows := r.n(5)
	batched, err := r.k.KafkaThroughput(ctx, 1, 1000, windows, window)
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
	concurrent, err := r.k.KafkaThroughput(ctx, 16, 1, windows, window)
	if err != nil {
		return fmt.Errorf("kafka 16 writers: %w", err)
	}
	row = bench.Row{Figure: "commands/s, 16 writers, 1 command per call", Unit: "cmd/s", Kafka: summary(concurrent), HigherIsBetter: true}
	if r.e != nil {
		ec, err := r.e.EtcdThroughput(ctx, 16, 1, windows, window)
		if err != nil {
			return fmt.Errorf("etcd 16 writers: %w", err)
		}
		row.Etcd = summary(ec)
	}
	r.table.Add(row)
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
			Kafka: single(res.BytesReadMin), Etcd: etcdBytes, Target: "flat"}
		row.Met = bench.Met(res.BytesReadMin <= 1.25*base)
		if res.Records == sizes[len(sizes)-1] {
			row.Note = fmt.Sprintf("bytes read from the broker by every client of the transport (kgo read hook), %v scaled to a minute; Kafka requests/min at 100 / 10k / 1M records: %.0f / %.0f / %.0f; standby heap %.0f / %.0f / %.0f MiB, RSS %.0f / %.0f / %.0f MiB (the transport keeps a view of the whole partition)",
				r.idleWindow, results[0].RequestsMin, results[1].RequestsMin, results[2].RequestsMin,
				mib(results[0].Heap), mib(results[1].Heap), mib(results[2].Heap),
				mib(results[0].RSS), mib(results[1].RSS), mib(results[2].RSS))
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
		r.table.Add(bench.Row{Figure: fmt.Sprintf("  full rebuild of the same log (the spec's poll)"), Unit: "µs", Kafka: single(full)})
	}
	return nil
}

func (r *runner) roles(ctx context.Context) error {
	counts := []int{1, 100, 1000}
	warm := 2 * time.Second
	kr, err := r.k.KafkaRoles(ctx, counts, warm)
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
		if n == 1000 {
			row.Target, row.Met = "≤ 200", bench.Met(mib(kr[i].RSS) <= 200)
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
		r.table.Add(row)
		row = bench.Row{Figure: fmt.Sprintf("  %d roles: goroutines; time to acquire all", n), Unit: "#; s", Kafka: single(float64(kr[i].Goroutines))}
		row.Note = ""
		if n == counts[len(counts)-1] {
			row.Note = fmt.Sprintf("Kafka acquired 1 / 100 / 1000 roles in %.1f / %.1f / %.1f s (64 at a time)", kr[0].Setup, kr[1].Setup, kr[2].Setup)
		}
		if er != nil {
			row.Etcd = single(float64(er[i].Goroutines))
		}
		r.table.Add(row)
	}
	return nil
}

// shared runs the prototype of one client shared by every role
// (internal/bench/sharedtxn.go): not the library.
func (r *runner) shared(ctx context.Context) error {
	counts := []int{1, 100, 1000}
	res, err := r.k.SharedRoles(ctx, counts, 2*time.Second)
	if err != nil {
		return fmt.Errorf("prototype: %w", err)
	}
	for i, n := range counts {
		row := bench.Row{Figure: fmt.Sprintf("prototype, one shared client: %d roles: RSS", n), Unit: "MiB", Kafka: single(mib(res[i].RSS))}
		if n == counts[len(counts)-1] {
			row.Note = fmt.Sprintf("not the library: each role's mint and one lease transaction sent as raw requests over one franz-go client (internal/bench/sharedtxn.go); %d / %d / %d connections, %d / %d / %d goroutines; 1000 roles in %.1f s",
				res[0].Connections, res[1].Connections, res[2].Connections, res[0].Goroutines, res[1].Goroutines, res[2].Goroutines, res[2].Setup)
		}
		r.table.Add(row)
		r.table.Add(bench.Row{Figure: fmt.Sprintf("  prototype: %d roles: TCP connections to the server", n), Unit: "conns", Kafka: single(float64(res[i].Connections))})
	}
	return nil
}
