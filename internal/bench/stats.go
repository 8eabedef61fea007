// Package bench holds the benchmarks of package coordination against a real
// Kafka broker and, side by side, against etcd's election
// (go.etcd.io/etcd/client/v3/concurrency). cmd/krabka-bench runs them and
// prints one table; scripts/bench.sh starts what they need. See
// docs/performance.md for the figures, the machine and the command.
package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Summary is the distribution of one figure: a latency in milliseconds, a
// rate, a share of a core, a size.
type Summary struct {
	N                  int
	P50, P90, P99, Max float64
}

// Summarize sorts a copy of the samples and takes nearest-rank percentiles.
func Summarize(samples []float64) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
		return sorted[min(max(i, 0), len(sorted)-1)]
	}
	return Summary{N: len(sorted), P50: rank(50), P90: rank(90), P99: rank(99), Max: sorted[len(sorted)-1]}
}

// Single is the summary of a figure measured once.
func Single(value float64) Summary {
	return Summary{N: 1, P50: value, P90: math.NaN(), P99: math.NaN(), Max: math.NaN()}
}

// Millis converts durations to milliseconds.
func Millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// Row is one line of the table.
type Row struct {
	Figure string
	Unit   string
	Kafka  *Summary // nil: not measured
	Floor  *Summary // nil: no protocol floor measured
	Etcd   *Summary // nil: no etcd counterpart
	// Load is the machine's 1-minute load average when the figure was
	// taken; 0 for not recorded.
	Load float64
	// HigherIsBetter flips the reading of the ratio for a rate.
	HigherIsBetter bool
	Target         string // empty: no target
	Met            *bool  // nil: no target
	Note           string
}

// Table collects the rows of one run.
type Table struct {
	Rows []Row
}

// Add appends a row. A row without a load gets the machine's load average
// of the moment: it is added right after its measurement.
func (t *Table) Add(row Row) {
	if row.Load == 0 {
		row.Load = LoadAverage()
	}
	t.Rows = append(t.Rows, row)
}

// Met returns a pointer to the outcome of a target, for a Row.
func Met(ok bool) *bool { return &ok }

// Print writes the table as Markdown, which reads as plain text too.
func (t *Table) Print(w io.Writer) {
	header := []string{"figure", "unit", "n", "Kafka p50", "p90", "p99", "max", "floor p50", "library/floor", "etcd p50", "p90", "p99", "max", "Kafka/etcd p50", "load", "target", "met"}
	var lines [][]string
	for _, r := range t.Rows {
		line := []string{r.Figure, r.Unit}
		if r.Kafka != nil {
			line = append(line, fmt.Sprint(r.Kafka.N), num(r.Kafka.P50), num(r.Kafka.P90), num(r.Kafka.P99), num(r.Kafka.Max))
		} else {
			line = append(line, "", "-", "-", "-", "-")
		}
		if r.Floor != nil && r.Kafka != nil && r.Floor.P50 > 0 {
			line = append(line, num(r.Floor.P50), fmt.Sprintf("%.2f×", r.Kafka.P50/r.Floor.P50))
		} else {
			line = append(line, "-", "-")
		}
		if r.Etcd != nil {
			line = append(line, num(r.Etcd.P50), num(r.Etcd.P90), num(r.Etcd.P99), num(r.Etcd.Max))
		} else {
			line = append(line, "-", "-", "-", "-")
		}
		if r.Kafka != nil && r.Etcd != nil && r.Etcd.P50 > 0 && !math.IsNaN(r.Kafka.P50) {
			line = append(line, fmt.Sprintf("%.2f×", r.Kafka.P50/r.Etcd.P50))
		} else {
			line = append(line, "-")
		}
		if r.Load > 0 {
			line = append(line, fmt.Sprintf("%.2f", r.Load))
		} else {
			line = append(line, "-")
		}
		line = append(line, orDash(r.Target))
		switch {
		case r.Met == nil:
			line = append(line, "-")
		case *r.Met:
			line = append(line, "yes")
		default:
			line = append(line, "NO")
		}
		lines = append(lines, line)
	}
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len([]rune(h))
	}
	for _, line := range lines {
		for i, cell := range line {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	row := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, cell := range cells {
			pad := widths[i] - len([]rune(cell))
			if i >= 2 && i != len(cells)-2 {
				b.WriteString(" " + strings.Repeat(" ", pad) + cell + " |")
			} else {
				b.WriteString(" " + cell + strings.Repeat(" ", pad) + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	row(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = strings.Repeat("-", widths[i])
	}
	fmt.Fprintln(w, "|"+strings.Join(mapSlice(sep, func(s string) string { return "-" + s + "-" }), "|")+"|")
	for _, line := range lines {
		row(line)
	}
	var notes []string
	for _, r := range t.Rows {
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s", r.Figure, r.Note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

func mapSlice(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// num prints a figure with three significant digits, or a dash for NaN.
func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v == 0:
		return "0"
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.2f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
