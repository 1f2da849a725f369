package gateway

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a request, each counted once.
const (
	outCompleted = "completed"
	outFailed    = "failed"
	outRejected  = "rejected"
	outCancelled = "cancelled"
	outTimedOut  = "timed_out"
)

type metrics struct {
	g            *Gateway
	requests     *prometheus.CounterVec // tenant, class, outcome
	unauthorized prometheus.Counter
	attempts     *prometheus.CounterVec // pool, result
	retries      *prometheus.CounterVec // tenant, class
	deferrals    *prometheus.CounterVec // tenant, class, reason
	probes       *prometheus.CounterVec // pool, result
	ttft         *prometheus.HistogramVec
	e2e          *prometheus.HistogramVec
	queueDesc    *prometheus.Desc
	breakerDesc  *prometheus.Desc
	inflightDesc *prometheus.Desc
}

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics(g *Gateway) *metrics {
	const ns, sub = "fleetdrill", "gateway"
	return &metrics{
		g: g,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Requests by tenant (scenario name), class and outcome; each request is counted once."}, []string{"tenant", "class", "outcome"}),
		unauthorized: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "unauthorized_total",
			Help: "Requests refused for a missing or unknown API key."}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "attempts_total",
			Help: "Upstream attempts by pool and result (ok, error, throttled, cancelled)."}, []string{"pool", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Retries by tenant and class."}, []string{"tenant", "class"}),
		deferrals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "deferrals_total",
			Help: "Deferrals of requests of deferrable classes by tenant, class and the core's reason; a request deferred twice counts twice."},
			[]string{"tenant", "class", "reason"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "probes_total",
			Help: "Health probes by pool and result."}, []string{"pool", "result"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "ttft_seconds",
			Help: "Time to the first response byte from the backend, from arrival, in model seconds (wall seconds × the gateway's speed).", Buckets: latencyBuckets}, []string{"tenant", "class"}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "e2e_seconds",
			Help: "End-to-end latency of completed requests, in model seconds (wall seconds × the gateway's speed).", Buckets: latencyBuckets}, []string{"tenant", "class"}),
		queueDesc: prometheus.NewDesc("fleetdrill_gateway_queue_length", "Requests waiting in the core's queues, by model.",
			[]string{"model"}, nil),
		breakerDesc: prometheus.NewDesc("fleetdrill_gateway_breaker_state", "Breaker state per backend: 0 closed, 1 open, 2 half-open.",
			[]string{"pool", "replica", "backend"}, nil),
		inflightDesc: prometheus.NewDesc("fleetdrill_gateway_replica_inflight", "Requests dispatched to a backend and not finished.",
			[]string{"pool", "replica", "backend"}, nil),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(m.requests), reg.Register(m.unauthorized), reg.Register(m.attempts),
		reg.Register(m.retries), reg.Register(m.deferrals), reg.Register(m.probes), reg.Register(m.ttft), reg.Register(m.e2e),
		reg.Register(coreCollector{m}))
}

// coreCollector reads the core's state at scrape time, under the gateway's
// lock.
type coreCollector struct{ m *metrics }

func (c coreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.queueDesc
	ch <- c.m.breakerDesc
	ch <- c.m.inflightDesc
}

func (c coreCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.m.g
	g.mu.Lock()
	now := g.now()
	queue := make([]int, len(g.sc.Models))
	for m := range queue {
		queue[m] = g.core.QueueLen(m)
	}
	states := make([]float64, len(g.replicas))
	inflight := make([]float64, len(g.replicas))
	for r := range g.replicas {
		states[r] = float64(g.core.Breaker(now, r))
		inflight[r] = float64(g.core.Inflight(r))
	}
	g.mu.Unlock()
	for _, name := range g.served {
		ch <- prometheus.MustNewConstMetric(c.m.queueDesc, prometheus.GaugeValue, float64(queue[g.models[name]]), name)
	}
	for r, rep := range g.replicas {
		id := strconv.Itoa(r)
		ch <- prometheus.MustNewConstMetric(c.m.breakerDesc, prometheus.GaugeValue, states[r], rep.pool, id, rep.host)
		ch <- prometheus.MustNewConstMetric(c.m.inflightDesc, prometheus.GaugeValue, inflight[r], rep.pool, id, rep.host)
	}
}
