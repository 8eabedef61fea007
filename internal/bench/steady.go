package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Sample is one timed run of a figure: its duration, the instants of its
// steps from its start (in the order of the figure's step names), and the
// requests that its clients sent during it, by Kafka API key.
type Sample struct {
	D        time.Duration
	Steps    []time.Duration
	Requests map[int16]int
	// Trace is the request timeline of the sample, for a reader: one line
	// per request, member, API and its span in ms from the start.
	Trace []string
}

// Series is one figure of a steady-state measurement. RunSteady takes its
// samples interleaved with those of the other series, so that every series
// of one run shares the machine's load.
type Series struct {
	Name string
	// Window is the number of samples of one warm-up window, N the number
	// of samples of the steady state.
	Window, N int
	// Converge makes the series's p50 one that the warm-up waits on; a
	// server without a JIT (etcd) only shares the windows.
	Converge bool
	Next     func(context.Context) (Sample, error)

	// Cold is the first window: what a freshly started server costs.
	Cold []Sample
	// WindowP50 is the p50 of every warm-up window, in milliseconds.
	WindowP50 []float64
	// Steady is the steady state, measured after the warm-up.
	Steady []Sample
	// Errors are the samples that failed, which count in no figure.
	Errors []error
}

// maxSampleErrors is how many samples of one series may fail before
// RunSteady gives up.
const maxSampleErrors = 5

// errSampleState marks the failure of a sample that leaves its series in
// a state the next sample cannot start from, such as a library handover
// whose standby still campaigns: RunSteady gives up at once.
var errSampleState = errors.New("the series cannot take another sample")

// WarmUp reports how the warm-up of one RunSteady went.
type WarmUp struct {
	Windows   int           // warm-up windows taken, the cold one included
	Took      time.Duration // from the first sample of the cold window to the end of the warm-up
	Converged bool          // two successive windows within the tolerance on every converging series
	// LastChange is the largest relative change of a converging series's
	// p50 between the last two windows (0.03 is 3 %).
	LastChange float64
	// LoadCold and LoadSteady are the 1-minute load average of the machine
	// at the end of the cold window and of the steady state.
	LoadCold, LoadSteady float64
	// Measured is how long the steady state took.
	Measured time.Duration
}

// RunSteady warms the servers by running windows of every series until the
// p50 of two successive windows differs by less than tolerance (0.05 is
// 5 %) on every series with Converge, or until maxWarm has passed, and then
// measures the steady state: N samples of each series. It takes at least
// minWindows windows, and two.
func RunSteady(ctx context.Context, series []*Series, tolerance float64, minWindows int, maxWarm time.Duration, progress func(string)) (WarmUp, error) {
	var w WarmUp
	start := time.Now()
	for {
		samples, err := interleave(ctx, series, func(s *Series) int { return s.Window })
		if err != nil {
			return w, err
		}
		w.Windows++
		change := 0.0
		for i, s := range series {
			p50 := Summarize(Millis(durations(samples[i]))).P50
			if w.Windows == 1 {
				s.Cold = samples[i]
			} else if s.Converge {
				prev := s.WindowP50[len(s.WindowP50)-1]
				change = max(change, math.Abs(p50-prev)/prev)
			}
			s.WindowP50 = append(s.WindowP50, p50)
		}
		if w.Windows == 1 {
			w.LoadCold = LoadAverage()
		} else {
			w.LastChange = change
		}
		if progress != nil {
			var parts []string
			for _, s := range series {
				parts = append(parts, fmt.Sprintf("%s %.3g", s.Name, s.WindowP50[len(s.WindowP50)-1]))
			}
			progress(fmt.Sprintf("warm-up window %d (%.0f s): p50 ms %s; largest change %.1f %%; load %.2f",
				w.Windows, time.Since(start).Seconds(), strings.Join(parts, ", "), 100*change, LoadAverage()))
		}
		if w.Windows >= max(minWindows, 2) && change < tolerance {
			w.Converged = true
			break
		}
		if time.Since(start) >= maxWarm && w.Windows >= max(minWindows, 2) {
			break
		}
	}
	w.Took = time.Since(start)
	t0 := time.Now()
	samples, err := interleave(ctx, series, func(s *Series) int { return s.N })
	if err != nil {
		return w, err
	}
	w.Measured = time.Since(t0)
	for i, s := range series {
		s.Steady = samples[i]
	}
	w.LoadSteady = LoadAverage()
	return w, nil
}

// interleave takes count(s) samples of every series, spread evenly over
// one pass, so that a series of few samples (a handover) and one of many (a
// write) run side by side from the first sample to the last. The order of
// the series is shuffled in every round: a sample that follows another one
// on the same broker finds its threads awake, and a fixed order would favour
// the series that comes second.
func interleave(ctx context.Context, series []*Series, count func(*Series) int) ([][]Sample, error) {
	rounds := 0
	for _, s := range series {
		rounds = max(rounds, count(s))
	}
	out := make([][]Sample, len(series))
	order := make([]int, len(series))
	for i := range order {
		order[i] = i
	}
	for r := range rounds {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			s := series[i]
			n := count(s)
			if (r+1)*n/rounds == r*n/rounds {
				continue
			}
			sample, err := s.Next(ctx)
			if err != nil {
				// A loaded machine fails a sample now and then (a request
				// past its timeout); more than maxSampleErrors of one series
				// fail the run.
				s.Errors = append(s.Errors, err)
				if len(s.Errors) > maxSampleErrors || ctx.Err() != nil || errors.Is(err, errSampleState) {
					return nil, fmt.Errorf("%s: %d samples failed, the last: %w", s.Name, len(s.Errors), err)
				}
				continue
			}
			out[i] = append(out[i], sample)
		}
	}
	return out, nil
}

func durations(samples []Sample) []time.Duration {
	out := make([]time.Duration, len(samples))
	for i, s := range samples {
		out[i] = s.D
	}
	return out
}

// Durations returns the durations of samples.
func Durations(samples []Sample) []time.Duration { return durations(samples) }

// LoadAverage returns the machine's 1-minute load average, or NaN.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

// tracer records the requests of the clients of the members of one
// benchmark while a sample is being taken: franz-go's end-to-end hook, one
// hook per member.
type tracer struct {
	mu     sync.Mutex
	on     bool
	events []traceEvent
}

type traceEvent struct {
	member     int
	key        int16
	start, end time.Time
}

type memberHook struct {
	t      *tracer
	member int
}

func (h memberHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if e2e.Err() != nil {
		return
	}
	end := time.Now()
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	if h.t.on {
		h.t.events = append(h.t.events, traceEvent{member: h.member, key: key, start: end.Add(-e2e.DurationE2E()), end: end})
	}
}

// hook returns the option that traces the clients of member.
func (t *tracer) hook(member int) kgo.Opt { return kgo.WithHooks(memberHook{t: t, member: member}) }

// begin clears the trace and starts recording.
func (t *tracer) begin() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on, t.events = true, t.events[:0]
}

// end stops recording and returns the events, ordered by their end.
func (t *tracer) end() []traceEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = false
	events := slices.Clone(t.events)
	slices.SortFunc(events, func(a, b traceEvent) int { return a.end.Compare(b.end) })
	return events
}

// requestCounts counts the requests of events that ended in [from, to].
func requestCounts(events []traceEvent, from, to time.Time) map[int16]int {
	counts := make(map[int16]int)
	for _, e := range events {
		if !e.end.Before(from) && !e.end.After(to) {
			counts[e.key]++
		}
	}
	return counts
}

// timeline renders the events that ended at or after start as lines of
// member, API name and span in ms from start.
func timeline(events []traceEvent, start time.Time, names []string) []string {
	var lines []string
	for _, e := range events {
		if e.end.Before(start) {
			continue
		}
		who := fmt.Sprint(e.member)
		if e.member < len(names) {
			who = names[e.member]
		}
		lines = append(lines, fmt.Sprintf("%-8s %-20s %7.2f – %7.2f", who, kmsg.NameForKey(e.key), ms(e.start.Sub(start)), ms(e.end.Sub(start))))
	}
	return lines
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MedianSample returns the sample whose duration is the median of samples.
func MedianSample(samples []Sample) Sample {
	sorted := slices.Clone(samples)
	slices.SortFunc(sorted, func(a, b Sample) int { return int(a.D - b.D) })
	return sorted[(len(sorted)-1)/2]
}

// firstEnd returns the end of the first request of member with key that
// ended after from, and whether there is one. member -1 is any member.
func firstEnd(events []traceEvent, member int, key int16, from time.Time) (time.Time, bool) {
	for _, e := range events {
		if (member < 0 || e.member == member) && e.key == key && e.end.After(from) {
			return e.end, true
		}
	}
	return time.Time{}, false
}

// lastEndBefore returns the end of the last request of member with key that
// ended in (from, to).
func lastEndBefore(events []traceEvent, member int, key int16, from, to time.Time) (time.Time, bool) {
	var at time.Time
	found := false
	for _, e := range events {
		if e.member == member && e.key == key && e.end.After(from) && e.end.Before(to) {
			at, found = e.end, true
		}
	}
	return at, found
}

// txnSteps returns the instants (from start) at which the transaction of
// member that began after from ended its AddPartitionsToTxn, its Produce
// and its EndTxn, and the end of the EndTxn.
func txnSteps(events []traceEvent, member int, start, from time.Time) ([]time.Duration, time.Time) {
	produced, ok := firstEnd(events, member, int16(kmsg.Produce), from)
	if !ok {
		return []time.Duration{-1, -1, -1}, from
	}
	added, ok := lastEndBefore(events, member, int16(kmsg.AddPartitionsToTxn), from, produced)
	addedAt := time.Duration(-1)
	if ok {
		addedAt = added.Sub(start)
	}
	committed, ok := firstEnd(events, member, int16(kmsg.EndTxn), produced)
	if !ok {
		return []time.Duration{addedAt, produced.Sub(start), -1}, produced
	}
	return []time.Duration{addedAt, produced.Sub(start), committed.Sub(start)}, committed
}

// handoverSteps returns the instants, from start, of the steps of
// FloorHandoverSteps in a traced handover from holder to standby.
func handoverSteps(events []traceEvent, holder, standby int, start time.Time) []time.Duration {
	steps := make([]time.Duration, len(FloorHandoverSteps))
	for i := range steps {
		steps[i] = -1
	}
	tomb, ok := firstEnd(events, holder, int16(kmsg.EndTxn), start)
	if !ok {
		return steps
	}
	steps[0] = tomb.Sub(start)
	woke, ok := firstEnd(events, standby, int16(kmsg.Fetch), tomb)
	if !ok {
		return steps
	}
	steps[1] = woke.Sub(start)
	minted, ok := firstEnd(events, standby, int16(kmsg.InitProducerID), woke)
	if !ok {
		return steps
	}
	steps[2] = minted.Sub(start)
	txn, _ := txnSteps(events, standby, start, minted)
	copy(steps[3:], txn)
	return steps
}

// RequestsPerSample returns the mean number of requests per sample, by API
// name, for the keys that any sample sent.
func RequestsPerSample(samples []Sample) string {
	total := make(map[int16]int)
	for _, s := range samples {
		for k, n := range s.Requests {
			total[k] += n
		}
	}
	keys := make([]int16, 0, len(total))
	for k := range total {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", kmsg.NameForKey(k), float64(total[k])/float64(len(samples))))
	}
	return strings.Join(parts, ", ")
}

// StepMedians returns the median instant of each step over samples, in
// milliseconds from the start of a sample; NaN for a step that no sample
// shows.
func StepMedians(samples []Sample) []float64 {
	if len(samples) == 0 {
		return nil
	}
	n := 0
	for _, s := range samples {
		n = max(n, len(s.Steps))
	}
	out := make([]float64, n)
	for i := range out {
		var xs []float64
		for _, s := range samples {
			if i < len(s.Steps) && s.Steps[i] >= 0 {
				xs = append(xs, float64(s.Steps[i])/float64(time.Millisecond))
			}
		}
		out[i] = math.NaN()
		if len(xs) > 0 {
			out[i] = Summarize(xs).P50
		}
	}
	return out
}
