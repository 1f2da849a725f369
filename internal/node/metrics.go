package node

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the node's Prometheus series. Labels carry only values the
// node's configuration fixes (model names it serves, endpoints, status
// codes): never anything a request chose, so neither prompt text nor an
// arbitrary model name reaches /metrics.
type metrics struct {
	requests  *prometheus.CounterVec   // endpoint, code
	cancelled *prometheus.CounterVec   // model
	running   *prometheus.GaugeVec     // model
	waiting   *prometheus.GaugeVec     // model
	kvUsed    *prometheus.GaugeVec     // model
	ttft      *prometheus.HistogramVec // model
	e2e       *prometheus.HistogramVec // model
	generated *prometheus.CounterVec   // model
	prompt    *prometheus.CounterVec   // model
}

// latencyBuckets span 5 ms to ~80 s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 15)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetdrill_node_requests_total",
			Help: "Inference requests answered, by endpoint and HTTP status code."}, []string{"endpoint", "code"}),
		cancelled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetdrill_node_cancelled_total",
			Help: "Requests whose client went away before the last token."}, []string{"model"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetdrill_node_running_sequences",
			Help: "Sequences in the engine's running batch."}, []string{"model"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetdrill_node_waiting_sequences",
			Help: "Sequences queued in the engine, waiting for a batch slot or KV."}, []string{"model"}),
		kvUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fleetdrill_node_kv_used_tokens",
			Help: "KV cache tokens reserved by running sequences."}, []string{"model"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleetdrill_node_ttft_seconds",
			Help: "Time from request receipt to the first token written, wall seconds.", Buckets: latencyBuckets}, []string{"model"}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleetdrill_node_e2e_seconds",
			Help: "Time from request receipt to the last token written, wall seconds.", Buckets: latencyBuckets}, []string{"model"}),
		generated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetdrill_node_generated_tokens_total",
			Help: "Output tokens written to clients."}, []string{"model"}),
		prompt: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetdrill_node_prompt_tokens_total",
			Help: "Input tokens of admitted requests (counted or estimated, never read)."}, []string{"model"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.cancelled, m.running, m.waiting, m.kvUsed, m.ttft, m.e2e, m.generated, m.prompt)
	}
	return m
}

func (m *metrics) request(endpoint string, code int) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
}

// queueGauges are one replica's gauges, resolved once: the loop sets them
// after every wake-up.
type queueGauges struct{ running, waiting, kvUsed prometheus.Gauge }

func (m *metrics) queueGauges(model string) queueGauges {
	return queueGauges{m.running.WithLabelValues(model), m.waiting.WithLabelValues(model), m.kvUsed.WithLabelValues(model)}
}

func (m *metrics) setQueues(r *replica) {
	r.gauges.running.Set(float64(r.running.Load()))
	r.gauges.waiting.Set(float64(r.waiting.Load()))
	r.gauges.kvUsed.Set(float64(r.kvUsed.Load()))
}

func (m *metrics) observe(model string, ttft, e2e time.Duration, tokens, prompt int) {
	if tokens > 0 {
		m.ttft.WithLabelValues(model).Observe(ttft.Seconds())
		m.generated.WithLabelValues(model).Add(float64(tokens))
	}
	if e2e > 0 {
		m.e2e.WithLabelValues(model).Observe(e2e.Seconds())
	}
	m.prompt.WithLabelValues(model).Add(float64(prompt))
}
