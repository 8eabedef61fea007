package main

// The metrics and the health that elect and run serve on --listen, and
// the transport that times their lease writes for them.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// memberMetrics is what elect and run export on --listen: Prometheus
// metrics and the health of the leadership.
//
// The library has no hook for the latency of a renewal, so the metrics come
// from meteredTransport, which times every lease write on its way to the
// KafkaTransport.
type memberMetrics struct {
	role          string
	partition     string
	leaseDuration time.Duration
	now           func() time.Time

	registry      *prometheus.Registry
	isLeader      prometheus.Gauge
	producerID    prometheus.Gauge
	producerEpoch prometheus.Gauge
	changes       *prometheus.CounterVec
	writeLatency  *prometheus.HistogramVec
	failures      prometheus.Counter
	lastRenewal   prometheus.Gauge
	rejoins       *prometheus.CounterVec
	readFailures  prometheus.Counter
	lastRead      prometheus.Gauge
	guardStops    prometheus.Counter

	mu          sync.Mutex
	leading     bool
	token       coordination.FencingToken
	lastSuccess time.Time // of a lease write of the current leadership
	written     map[coordination.FencingToken]bool
	lastReadOK  time.Time // of the last successful read of the role's partition
	readErr     error     // of the last read that failed since, nil after a success
}

func newMemberMetrics(role coordination.Role, partition coordination.TopicPartition, leaseDuration time.Duration) *memberMetrics {
	labels := prometheus.Labels{"role": role.String()}
	m := &memberMetrics{
		role:          role.String(),
		partition:     partition.String(),
		leaseDuration: leaseDuration,
		now:           time.Now,
		registry:      prometheus.NewRegistry(),
		token:         coordination.NoEpoch,
		written:       make(map[coordination.FencingToken]bool),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "krabka_coord_is_leader", ConstLabels: labels,
			Help: "1 while this member holds the role, 0 otherwise.",
		}),
		producerID: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "krabka_coord_token_producer_id", ConstLabels: labels,
			Help: "Producer id of the fencing token of this member's leadership, -1 when it holds none.",
		}),
		producerEpoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "krabka_coord_token_producer_epoch", ConstLabels: labels,
			Help: "Producer epoch of the fencing token of this member's leadership, -1 when it holds none.",
		}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "krabka_coord_leadership_changes_total", ConstLabels: labels,
			Help: "Leadership changes of this member: change=acquired, resigned, stepped_down, transferred (a transfer, a drain or --successor handed the role over), fenced, lost (the producer of the epoch failed), denied (a permission) or guard (run stopped its command when it could not confirm its lease).",
		}, []string{"change"}),
		writeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "krabka_coord_renewal_duration_seconds", ConstLabels: labels,
			Help:    "Latency of the lease writes of this member, successful or not: kind=grant (the first lease of a leadership) or renewal.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"kind"}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "krabka_coord_renewal_failures_total", ConstLabels: labels,
			Help: "Renewals of the lease that failed, a fence included.",
		}),
		lastRenewal: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "krabka_coord_last_renewal_timestamp_seconds", ConstLabels: labels,
			Help: "Unix time of the last successful lease write of this member.",
		}),
		rejoins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "krabka_coord_rejoins_total", ConstLabels: labels,
			Help: "Campaigns that this member started again after a leadership ended: after=fenced, lost or guard (with --rejoin), step_down, or transfer (a transfer handed the role over; a drain does not campaign again).",
		}, []string{"after"}),
		readFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "krabka_coord_partition_read_failures_total", ConstLabels: labels,
			Help: "Reads of the role's partition of the state topic that failed (a probe every few seconds).",
		}),
		lastRead: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "krabka_coord_last_partition_read_timestamp_seconds", ConstLabels: labels,
			Help: "Unix time of the last successful read of the role's partition of the state topic.",
		}),
		guardStops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "krabka_coord_guard_stops_total", ConstLabels: labels,
			Help: "Times that run stopped its command because it could not confirm its lease before the deadline less the grace, the clock skew and the margin.",
		}),
	}
	m.registry.MustRegister(m.isLeader, m.producerID, m.producerEpoch, m.changes, m.writeLatency, m.failures, m.lastRenewal,
		m.rejoins, m.readFailures, m.lastRead, m.guardStops,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, change := range []string{"acquired", "resigned", "stepped_down", "transferred", "fenced", "lost", "denied", "guard"} {
		m.changes.WithLabelValues(change)
	}
	for _, after := range []string{"fenced", "lost", "guard", "step_down", "transfer"} {
		m.rejoins.WithLabelValues(after)
	}
	for _, kind := range []string{"grant", "renewal"} {
		m.writeLatency.WithLabelValues(kind)
	}
	m.producerID.Set(-1)
	m.producerEpoch.Set(-1)
	return m
}

// acquired records the start of a leadership.
func (m *memberMetrics) acquired(token coordination.FencingToken) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leading, m.token = true, token
	m.isLeader.Set(1)
	m.producerID.Set(float64(token.ProducerID()))
	m.producerEpoch.Set(float64(token.ProducerEpoch()))
	m.changes.WithLabelValues("acquired").Inc()
}

// ended records the end of a leadership; change is one of endReason.
func (m *memberMetrics) ended(change string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		return
	}
	m.leading = false
	m.isLeader.Set(0)
	m.producerID.Set(-1)
	m.producerEpoch.Set(-1)
	m.changes.WithLabelValues(change).Inc()
}

// rejoined counts a campaign started again after a leadership ended.
func (m *memberMetrics) rejoined(after string) { m.rejoins.WithLabelValues(after).Inc() }

// guardStopped counts a stop of run's command by the lease guard.
func (m *memberMetrics) guardStopped() { m.guardStops.Inc() }

// isLeading reports whether the member holds the role.
func (m *memberMetrics) isLeading() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

// partitionRead records a read of the role's partition: nil for one that
// succeeded.
func (m *memberMetrics) partitionRead(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.readErr = err
		m.readFailures.Inc()
		return
	}
	m.readErr = nil
	m.lastReadOK = m.now()
	m.lastRead.Set(float64(m.lastReadOK.UnixNano()) / 1e9)
}

// leaseWritten records one lease write (not a tombstone) that took elapsed.
func (m *memberMetrics) leaseWritten(token coordination.FencingToken, elapsed time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kind := "renewal"
	if !m.written[token] {
		kind = "grant"
	}
	m.writeLatency.WithLabelValues(kind).Observe(elapsed.Seconds())
	if err != nil {
		if kind == "renewal" {
			m.failures.Inc()
		}
		return
	}
	m.written[token] = true
	now := m.now()
	if !m.leading || m.token == token {
		m.lastSuccess = now
	}
	m.lastRenewal.Set(float64(now.UnixNano()) / 1e9)
}

// health reports whether the member is healthy, and why. A leader is not
// when its last successful lease write is older than the lease duration,
// so the standbys may already have taken over; a standby is not when it
// has not read the role's partition within the lease duration, so it could
// not take over.
func (m *memberMetrics) health() (bool, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		age := m.now().Sub(m.lastReadOK)
		switch {
		case m.lastReadOK.IsZero():
			return false, fmt.Sprintf("unhealthy: standby for role %s, and it has not read %s yet", m.role, m.partition)
		case age > m.leaseDuration:
			cause := ""
			if m.readErr != nil {
				cause = ": " + oneLine(m.readErr.Error())
			}
			return false, fmt.Sprintf("unhealthy: standby for role %s, but its last successful read of %s was %s ago, longer than the lease duration %v%s",
				m.role, m.partition, formatSeconds(age), m.leaseDuration, cause)
		}
		return true, fmt.Sprintf("ok: standby for role %s, read %s %s ago", m.role, m.partition, formatSeconds(age))
	}
	age := m.now().Sub(m.lastSuccess)
	if age > m.leaseDuration {
		return false, fmt.Sprintf("unhealthy: leads role %s with token %s, but its last successful renewal was %s ago, longer than the lease duration %v",
			m.role, m.token, formatSeconds(age), m.leaseDuration)
	}
	return true, fmt.Sprintf("ok: leads role %s with token %s, last renewal %s ago", m.role, m.token, formatSeconds(age))
}

// operatorEndpoints are the POST endpoints of --step-down-endpoint: a
// step-down, and a transfer or a drain that the loop of elect or run
// answers (ask waits for its answer).
type operatorEndpoints struct {
	stepDown func() error
	ask      func(ctx context.Context, req operatorRequest) operatorReply
}

// handler serves /metrics and /healthz, and POST /step-down, /transfer and
// /drain when endpoints is not nil.
func (m *memberMetrics) handler(endpoints *operatorEndpoints) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		ok, message := m.health()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, message)
	})
	if endpoints == nil {
		return mux
	}
	mux.HandleFunc("POST /step-down", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if role := r.URL.Query().Get("role"); role != m.role {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, "this member campaigns for role %q, not %q\n", m.role, role)
			return
		}
		if err := endpoints.stepDown(); err != nil {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintln(w, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintf(w, "stepping down from role %s\n", m.role)
	})
	mux.HandleFunc("POST /transfer", func(w http.ResponseWriter, r *http.Request) {
		if role := r.URL.Query().Get("role"); role != m.role {
			http.Error(w, fmt.Sprintf("this member campaigns for role %q, not %q", m.role, role), http.StatusConflict)
			return
		}
		to, err := coordination.NewMemberID(r.URL.Query().Get("to"))
		if err != nil {
			http.Error(w, fmt.Sprintf("to=%q: %v", r.URL.Query().Get("to"), err), http.StatusBadRequest)
			return
		}
		answer(w, endpoints.ask(r.Context(), operatorRequest{to: to}))
	})
	mux.HandleFunc("POST /drain", func(w http.ResponseWriter, r *http.Request) {
		answer(w, endpoints.ask(r.Context(), operatorRequest{drain: true, member: r.URL.Query().Get("member")}))
	})
	return mux
}

// answer writes an operatorReply: JSON, or a line of text.
func answer(w http.ResponseWriter, reply operatorReply) {
	if text, ok := reply.body.(string); ok {
		http.Error(w, text, reply.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.status)
	_ = json.NewEncoder(w).Encode(reply.body)
}

// serve listens on addr and serves the handler until ctx ends. It returns
// the address it listens on. The server's goroutines end when ctx ends.
func (m *memberMetrics) serve(ctx context.Context, addr string, endpoints *operatorEndpoints) (net.Addr, error) {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError("--listen %s: %v", addr, err)
	}
	server := &http.Server{Handler: m.handler(endpoints), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = server.Serve(listener) }()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = server.Shutdown(shutdown)
	}()
	return listener.Addr(), nil
}

// meteredTransport is a transport that times its lease writes for the
// metrics. It keeps every other method of the ExtendedTransport it wraps
// by embedding the interface, so any adapter of the contract fits.
type meteredTransport struct {
	coordination.ExtendedTransport
	metrics *memberMetrics
}

// WriteLease times the write and records it; a tombstone (a resignation)
// is not a renewal, and is not recorded.
func (t *meteredTransport) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	if coordination.IsTombstone(value) {
		return t.ExtendedTransport.WriteLease(ctx, partition, token, key, value)
	}
	start := time.Now()
	err := t.ExtendedTransport.WriteLease(ctx, partition, token, key, value)
	t.metrics.leaseWritten(token, time.Since(start), err)
	return err
}
