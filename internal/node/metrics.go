package node

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/internal/signals"
)

// metrics are the node's Prometheus series: its own fleetdrill_node_* ones,
// by model, and the shared catalogue's (package signals; docs/metrics.md)
// that a replica observes, by model, pool, region and class, so that one
// dashboard reads them beside the gateway's and the twin's. Labels carry
// only values the node's configuration fixes (model names it serves, its
// pool and region, the scenario's class names, endpoints, status codes):
// never anything a request chose that the configuration does not list, so
// neither prompt text nor an arbitrary model or class name reaches
// /metrics.
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
	// What the node refused itself, as the gateway's
	// fleetdrill_gateway_refused_total and connections_refused_total.
	refused     *prometheus.CounterVec // reason
	connRefused *prometheus.CounterVec // listener

	// The catalogue's, in engine (model) seconds: wall seconds × speed.
	pool, region string
	speed        float64
	catTTFT      *prometheus.HistogramVec // model, pool, region, class
	catTPOT      *prometheus.HistogramVec // model, pool, region, class
	catE2E       *prometheus.HistogramVec // model, pool, region, class

	// vLLM's time to first token (the vLLM flavors; else nil), in engine
	// seconds as the catalogue's: the emulated replica's own clock.
	vllmTTFT *prometheus.HistogramVec // model_name, engine
}

// latencyBuckets span 5 ms to ~80 s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 15)

// classUnknown is the class label of a request whose X-Fleetdrill-Class
// header is absent or names no class of Config.Classes.
const classUnknown = "unknown"

// Exported lists the catalogue's series the node serves.
var Exported = []signals.Signal{signals.TTFT, signals.TPOT, signals.E2E, signals.KVAllocatable,
	signals.Preemptions, signals.ColdStarts}

func catalogueHistogram(s signals.Signal, buckets []float64) *prometheus.HistogramVec {
	if s.Type != signals.Histogram {
		panic("node: signal " + s.Name + " is not a histogram")
	}
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: s.Name, Help: s.Help, Buckets: buckets}, s.Labels)
}

func catalogueDesc(s signals.Signal) *prometheus.Desc {
	return prometheus.NewDesc(s.Name, s.Help, s.Labels, nil)
}

func newMetrics(cfg *Config) *metrics {
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
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetdrill_node_refused_total",
			Help: "Requests the node refused itself, before its engine saw them, by reason; each is also counted in fleetdrill_node_requests_total by its status."},
			[]string{"reason"}),
		connRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleetdrill_node_connections_refused_total",
			Help: "Connections closed as soon as accepted because their client address had --max-conns-per-ip open, by listener (api, admin)."},
			[]string{"listener"}),

		pool: cfg.Pool, region: cfg.Region, speed: cfg.Speed,
		catTTFT: catalogueHistogram(signals.TTFT, signals.LatencyBuckets),
		catTPOT: catalogueHistogram(signals.TPOT, signals.TokenBuckets),
		catE2E:  catalogueHistogram(signals.E2E, signals.LatencyBuckets),
	}
	if reg := cfg.Registerer; reg != nil {
		reg.MustRegister(m.requests, m.cancelled, m.running, m.waiting, m.kvUsed, m.ttft, m.e2e, m.generated, m.prompt,
			m.catTTFT, m.catTPOT, m.catE2E, m.refused, m.connRefused)
	}
	for _, r := range refuseReasons {
		m.refused.WithLabelValues(r) // every reason served from the start, at 0
	}
	for _, l := range []string{ListenerAPI, ListenerAdmin} {
		m.connRefused.WithLabelValues(l)
	}
	if cfg.Flavor.vllm() {
		m.vllmTTFT = newVLLMTTFT()
		for _, md := range cfg.Models {
			m.vllmTTFT.WithLabelValues(md.Name, vllmEngine) // served from the start, as vLLM's are
		}
		if reg := cfg.Registerer; reg != nil {
			reg.MustRegister(m.vllmTTFT)
		}
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

func (m *metrics) observe(o *outcome) {
	if m.vllmTTFT != nil && o.ttft > 0 {
		m.vllmTTFT.WithLabelValues(o.model, vllmEngine).Observe(m.engineSeconds(o.ttft))
	}
	if o.written > 0 {
		m.ttft.WithLabelValues(o.model).Observe(o.ttft.Seconds())
		m.generated.WithLabelValues(o.model).Add(float64(o.written))
	}
	if o.e2e > 0 {
		m.e2e.WithLabelValues(o.model).Observe(o.e2e.Seconds())
		// The catalogue's latencies, of successful responses only (as
		// OpenTelemetry's gen_ai.server.* are), in engine seconds.
		ls := []string{o.model, m.pool, m.region, o.class}
		ttft, e2e := m.engineSeconds(o.ttft), m.engineSeconds(o.e2e)
		m.catTTFT.WithLabelValues(ls...).Observe(ttft)
		m.catE2E.WithLabelValues(ls...).Observe(e2e)
		if o.written > 1 {
			m.catTPOT.WithLabelValues(ls...).Observe((e2e - ttft) / float64(o.written-1))
		}
	}
	m.prompt.WithLabelValues(o.model).Add(float64(o.prompt))
}

// engineCollector reads the node's engines at scrape time, as of the loop's
// last wake-up: the catalogue's capacity series, summed over the node's
// replicas (one per served model) and labelled by the node's pool and
// region.
type engineCollector struct {
	n                             *Node
	kvDesc, preemptDesc, coldDesc *prometheus.Desc
}

func newEngineCollector(n *Node) engineCollector {
	return engineCollector{n: n, kvDesc: catalogueDesc(signals.KVAllocatable),
		preemptDesc: catalogueDesc(signals.Preemptions), coldDesc: catalogueDesc(signals.ColdStarts)}
}

func (c engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.kvDesc
	ch <- c.preemptDesc
	ch <- c.coldDesc
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	var free int64
	var preempted uint64
	for _, r := range c.n.reps {
		free += max(r.kvCap-r.kvUsed.Load(), 0)
		preempted += r.preempted.Load()
	}
	pool, region := c.n.cfg.Pool, c.n.cfg.Region
	ch <- prometheus.MustNewConstMetric(c.kvDesc, prometheus.GaugeValue, float64(free), pool, region)
	ch <- prometheus.MustNewConstMetric(c.preemptDesc, prometheus.CounterValue, float64(preempted), pool, region)
	// NB: a node serves from its first instant: it emulates no model
	// load, so it never cold-starts. The twin counts cold starts.
	ch <- prometheus.MustNewConstMetric(c.coldDesc, prometheus.CounterValue, 0, pool, region)
}

// engineSeconds converts a wall duration to engine time.
func (m *metrics) engineSeconds(d time.Duration) float64 { return d.Seconds() * m.speed }

// The node's listeners, as fleetdrill_node_connections_refused_total
// labels them.
const (
	ListenerAPI   = "api"
	ListenerAdmin = "admin"
)

// RefusedConnection returns what a listener's per-address connection cap
// calls for each connection it closes (httpguard.Limits.OnRefused): a count
// under listener (ListenerAPI or ListenerAdmin), never the address.
func (n *Node) RefusedConnection(listener string) func() {
	c := n.metrics.connRefused.WithLabelValues(listener)
	return c.Inc
}
