package gateway

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Outcomes of a request, each counted once.
const (
	outCompleted = "completed"
	outFailed    = "failed"
	outRejected  = "rejected"
	outCancelled = "cancelled"
	outTimedOut  = "timed_out"
)

var outcomes = []string{outCompleted, outRejected, outFailed, outTimedOut, outCancelled}

// rejectReasons are the reasons a request is refused: the core's
// (jurisdiction-unavailable among them) and upstream-quota (upstream 429s
// outlasted the retries, or every pool that may serve it is throttled past
// its deadline), and upstream-invalid-request (a backend refused the
// request as its own fault: clientFault).
var rejectReasons = []string{sched.ReasonTenantConcurrency, sched.ReasonTenantTokens, sched.ReasonQueueFull,
	sched.ReasonDeadline, sched.ReasonNoRoute, sched.ReasonUpstreamQuota, sched.ReasonUnavailable, reasonUpstreamInvalid}

// metrics are the gateway's series: the shared catalogue's (package
// signals: the names, help, labels and buckets the twin writes in simulated
// time, so one dashboard reads both) and the gateway's own
// fleetdrill_gateway_* series. Labels carry scenario names only (model,
// pool, region, class, tenant by its scenario name), never a key, a prompt
// or a value the client chose that the scenario does not list.
type metrics struct {
	g *Gateway

	// The catalogue's series (docs/metrics.md). Latencies are model
	// seconds (wall seconds × Config.Speed).
	ttft      *prometheus.HistogramVec // served model, pool, region, class: streamed responses only
	tpot      *prometheus.HistogramVec // served model, pool, region, class: streamed responses only
	latency   *prometheus.HistogramVec // served model, pool, region, class
	outcomes  *prometheus.CounterVec   // requested model, class, outcome
	rejected  *prometheus.CounterVec   // class, reason
	throttled *prometheus.CounterVec   // pool, region
	routes    *prometheus.CounterVec   // requested model, served model
	fbOK      *prometheus.CounterVec   // requested model, fallback model
	fbFailed  *prometheus.CounterVec   // requested model

	queueDesc, saturationDesc, stateDesc, cooledDesc, breakerDesc, ladderDesc *prometheus.Desc
	oldestDesc, waitingDesc                                                   *prometheus.Desc // by class (waiting.go)

	// The gateway's own.
	requests     *prometheus.CounterVec // tenant, class, outcome
	unauthorized prometheus.Counter
	attempts     *prometheus.CounterVec // pool, result
	retries      *prometheus.CounterVec // tenant, class
	hedges       *prometheus.CounterVec // result: sent, won
	scrapeErrors *prometheus.CounterVec // pool
	deferrals    *prometheus.CounterVec // tenant, class, reason
	probes       *prometheus.CounterVec // pool, result
	firstByte    *prometheus.HistogramVec
	e2e          *prometheus.HistogramVec
	inflightDesc *prometheus.Desc
	engineDesc   *prometheus.Desc
	kvDesc       *prometheus.Desc
	stepDesc     *prometheus.Desc       // per rung of the ladder: engaged or not
	degraded     *prometheus.CounterVec // action: what the ladder did to a request
	ejections    *prometheus.CounterVec // pool: latency outliers ejected
	ejectedDesc  *prometheus.Desc       // pool: replicas out of routing as latency outliers now

	// Canaries (canary.go), catalogue series too: the rollouts' shares
	// and decisions, and the shadow copies by how they ended. Copies are
	// in no other series.
	canaryShare *prometheus.GaugeVec // canary
	// Autoscaled pools' replicas by state, and asks by outcome.
	autoscaleReplicas *prometheus.GaugeVec
	autoscaleAsks     *prometheus.CounterVec
	canaryDecisions   *prometheus.CounterVec // canary, action
	shadows           *prometheus.CounterVec // canary, outcome
}

// canaryActions are the rollouts' actions, the labels of
// fleetdrill_canary_decisions_total.
var canaryActions = []string{sched.ActStart, sched.ActStepUp, sched.ActPromote, sched.ActHold, sched.ActResume, sched.ActRollback}

// shadowOutcomes are how a shadow copy ends, the labels of
// fleetdrill_shadow_requests_total.
var shadowOutcomes = []string{shadowCompleted, shadowFailed, shadowShed, shadowCancelled}

// Actions of the degradation ladder on requests, the labels of
// fleetdrill_gateway_degraded_requests_total: the actions a run's report
// counts (sched.LadderReport).
const (
	degradedShed        = "shed" // refused, or deferred (once per request)
	degradedCapped      = "capped"
	degradedSubstituted = "substituted"
)

var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// catalogue returns s's name, help and labels, checking its type: a
// mismatch is a programming error.
func catalogue(s signals.Signal, t signals.Type) (string, string, []string) {
	if s.Type != t {
		panic("gateway: signal " + s.Name + " is a " + string(s.Type) + ", not a " + string(t))
	}
	return s.Name, s.Help, s.Labels
}

func counterVec(s signals.Signal) *prometheus.CounterVec {
	name, help, labels := catalogue(s, signals.Counter)
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histogramVec(s signals.Signal, buckets []float64) *prometheus.HistogramVec {
	name, help, labels := catalogue(s, signals.Histogram)
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

func gaugeVec(s signals.Signal) *prometheus.GaugeVec {
	name, help, labels := catalogue(s, signals.Gauge)
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func gaugeDesc(s signals.Signal) *prometheus.Desc {
	name, help, labels := catalogue(s, signals.Gauge)
	return prometheus.NewDesc(name, help, labels, nil)
}

// Exported lists the catalogue's series the live gateway serves (the
// canary series only when the scenario has canaries). The rest come from
// the emulated node (KVAllocatable, Preemptions, ColdStarts) or only from
// the twin (ForecastError: the gateway forecasts nothing).
var Exported = []signals.Signal{signals.TTFT, signals.TPOT, signals.E2E, signals.Requests, signals.Rejected,
	signals.Throttled, signals.QueueDepth, signals.OldestWaiting, signals.WaitingRequests, signals.Saturation,
	signals.Routes, signals.FallbacksOK, signals.FallbacksFailed, signals.DeploymentState, signals.CooledDown,
	signals.Breaker, signals.DegradationStep, signals.CanaryShare, signals.CanaryDecisions, signals.ShadowRequests,
	signals.AutoscaleReplicas, signals.AutoscaleAsks}

func newMetrics(g *Gateway) *metrics {
	const ns, sub = "fleetdrill", "gateway"
	return &metrics{
		g:         g,
		ttft:      histogramVec(signals.TTFT, signals.LatencyBuckets),
		tpot:      histogramVec(signals.TPOT, signals.TokenBuckets),
		latency:   histogramVec(signals.E2E, signals.LatencyBuckets),
		outcomes:  counterVec(signals.Requests),
		rejected:  counterVec(signals.Rejected),
		throttled: counterVec(signals.Throttled),
		routes:    counterVec(signals.Routes),
		fbOK:      counterVec(signals.FallbacksOK),
		fbFailed:  counterVec(signals.FallbacksFailed),

		queueDesc:      gaugeDesc(signals.QueueDepth),
		saturationDesc: gaugeDesc(signals.Saturation),
		stateDesc:      gaugeDesc(signals.DeploymentState),
		cooledDesc:     gaugeDesc(signals.CooledDown),
		breakerDesc:    gaugeDesc(signals.Breaker),
		ladderDesc:     gaugeDesc(signals.DegradationStep),
		oldestDesc:     gaugeDesc(signals.OldestWaiting),
		waitingDesc:    gaugeDesc(signals.WaitingRequests),

		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Requests by tenant (its scenario name, never a key or an id), class and outcome; each request is counted once."},
			[]string{"tenant", "class", "outcome"}),
		unauthorized: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "unauthorized_total",
			Help: "Requests refused for a missing or unknown API key."}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "attempts_total",
			Help: "Upstream attempts by pool and result (ok, error, throttled, cancelled)."}, []string{"pool", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Retries by tenant and class."}, []string{"tenant", "class"}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "backend_scrape_errors_total",
			Help: "Failed reads of a backend's load series (its /metrics) by pool; the backend's health is not judged by them."},
			[]string{"pool"}),
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "hedges_total",
			Help: "Hedged duplicates (policy.routing.hedge_after): sent, and won (the duplicate answered first), as a run's report counts them (reqengine.SettleHedge)."},
			[]string{"result"}),
		deferrals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "deferrals_total",
			Help: "Deferrals of requests of deferrable classes by tenant, class and the core's reason; a request deferred twice counts twice."},
			[]string{"tenant", "class", "reason"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "probes_total",
			Help: "Health probes by pool and result."}, []string{"pool", "result"}),
		firstByte: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "ttft_seconds",
			Help: "Time to the first response byte from the backend, from arrival, by tenant and class, in model seconds (wall seconds × the gateway's speed).", Buckets: latencyBuckets}, []string{"tenant", "class"}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "e2e_seconds",
			Help: "End-to-end latency of completed requests by tenant and class, in model seconds (wall seconds × the gateway's speed).", Buckets: latencyBuckets}, []string{"tenant", "class"}),
		inflightDesc: prometheus.NewDesc("fleetdrill_gateway_replica_inflight", "Requests dispatched to a backend and not finished.",
			[]string{"pool", "replica", "backend"}, nil),
		engineDesc: prometheus.NewDesc("fleetdrill_gateway_backend_requests",
			"Requests in a backend's engine as its own metrics say (vLLM, SGLang, TGI; read at the probe interval), by state: running (in its batch) or waiting (queued in the engine).",
			[]string{"pool", "replica", "state"}, nil),
		kvDesc: prometheus.NewDesc("fleetdrill_gateway_backend_kv_cache_usage_ratio",
			"Share of a backend's KV cache in use as its own metrics say (vLLM kv_cache_usage_perc, SGLang token_usage), read at the probe interval.",
			[]string{"pool", "replica"}, nil),
		stepDesc: prometheus.NewDesc("fleetdrill_gateway_degradation_step_engaged",
			"Each step of the degradation ladder (policy.degradation), by name and action: 1 engaged, 0 not.",
			[]string{"step", "action"}, nil),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "degraded_requests_total",
			Help: "Requests the degradation ladder changed, by action: shed (refused or deferred by shed-batch or defer-async, once per request), capped (cap-output), substituted (smaller-model)."},
			[]string{"action"}),
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "ejections_total",
			Help: "Replicas ejected from routing as latency outliers (policy.health.outlier), by pool; a return is not counted."},
			[]string{"pool"}),
		ejectedDesc: prometheus.NewDesc("fleetdrill_gateway_ejected_replicas",
			"Replicas out of routing as latency outliers now (policy.health.outlier), by pool.", []string{"pool"}, nil),
		canaryShare:     gaugeVec(signals.CanaryShare),
		canaryDecisions: counterVec(signals.CanaryDecisions),
		shadows:         counterVec(signals.ShadowRequests),

		autoscaleReplicas: gaugeVec(signals.AutoscaleReplicas),
		autoscaleAsks:     counterVec(signals.AutoscaleAsks),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	m.zero()
	return errors.Join(
		reg.Register(m.ttft), reg.Register(m.tpot), reg.Register(m.latency), reg.Register(m.outcomes),
		reg.Register(m.rejected), reg.Register(m.throttled), reg.Register(m.routes), reg.Register(m.fbOK),
		reg.Register(m.fbFailed),
		reg.Register(m.requests), reg.Register(m.unauthorized), reg.Register(m.attempts),
		reg.Register(m.retries), reg.Register(m.hedges), reg.Register(m.scrapeErrors), reg.Register(m.deferrals), reg.Register(m.probes), reg.Register(m.firstByte), reg.Register(m.e2e),
		reg.Register(m.degraded), reg.Register(m.ejections), reg.Register(coreCollector{m}), reg.Register(faultCollector{m.g.faults}),
		reg.Register(m.canaryShare), reg.Register(m.canaryDecisions), reg.Register(m.shadows),
		reg.Register(m.autoscaleReplicas), reg.Register(m.autoscaleAsks))
}

// zero creates the counters whose label values the scenario fixes, at 0,
// so that rate() and increase() see a series from the first scrape rather
// than from its first event.
func (m *metrics) zero() {
	g := m.g
	for _, md := range g.sc.Models {
		for _, c := range g.sc.Classes {
			for _, o := range outcomes {
				m.outcomes.WithLabelValues(md.Name, c.Name, o)
			}
		}
		if g.sc.Policy.Routing.Fallback && len(md.Fallbacks) > 0 {
			m.fbFailed.WithLabelValues(md.Name)
			for _, f := range md.Fallbacks {
				m.fbOK.WithLabelValues(md.Name, f)
			}
		}
	}
	for _, c := range g.sc.Classes {
		for _, r := range rejectReasons {
			m.rejected.WithLabelValues(c.Name, r)
		}
	}
	for _, p := range g.sc.Pools {
		if len(g.byPool[p.Name]) > 0 {
			m.throttled.WithLabelValues(p.Name, p.Region)
			m.ejections.WithLabelValues(p.Name)
		}
	}
	if g.ladder != nil {
		for _, a := range []string{degradedShed, degradedCapped, degradedSubstituted} {
			m.degraded.WithLabelValues(a)
		}
	}
	for _, c := range g.sc.Canaries {
		m.canaryShare.WithLabelValues(c.Name).Set(0)
		for _, a := range canaryActions {
			m.canaryDecisions.WithLabelValues(c.Name, a)
		}
		if c.Shadow != nil {
			for _, o := range shadowOutcomes {
				m.shadows.WithLabelValues(c.Name, o)
			}
		}
	}
	for _, as := range g.as.scalers {
		for _, o := range signals.AutoscaleOutcomes {
			m.autoscaleAsks.WithLabelValues(as.pool, o)
		}
		as.export()
	}
}

// ended counts q once, when it ends with outcome.
func (m *metrics) ended(q *request, outcome string) {
	m.requests.WithLabelValues(q.tenant, q.class, outcome).Inc()
	m.outcomes.WithLabelValues(q.model, q.class, outcome).Inc()
	switch outcome {
	case outCompleted:
		e2e := m.g.clk.model(time.Since(q.arrived)).Seconds()
		m.e2e.WithLabelValues(q.tenant, q.class).Observe(e2e)
		m.latency.WithLabelValues(q.served, q.pool, q.region, q.class).Observe(e2e)
		if q.served != q.model {
			m.fbOK.WithLabelValues(q.model, q.served).Inc()
		}
	case outRejected:
		m.rejected.WithLabelValues(q.class, q.reason).Inc()
	}
	// A request that reached a fallback and still did not complete; the
	// client's going away is nobody's failure.
	if q.fellBack && outcome != outCompleted && outcome != outCancelled {
		m.fbFailed.WithLabelValues(q.model).Inc()
	}
}

// streamed records the time to first token and per output token of a
// streamed response that completed, from what its meter saw.
func (m *metrics) streamed(q *request, s *streamMeter) {
	if s.tokens == 0 {
		return
	}
	ls := []string{q.served, q.pool, q.region, q.class}
	m.ttft.WithLabelValues(ls...).Observe(m.g.clk.model(s.first.Sub(q.arrived)).Seconds())
	n := s.tokens
	if s.usage > 0 {
		n = s.usage
	}
	if n > 1 {
		m.tpot.WithLabelValues(ls...).Observe(m.g.clk.model(s.last.Sub(s.first)).Seconds() / float64(n-1))
	}
}

// coreCollector reads the core's state at scrape time, under the gateway's
// lock, without changing it (BreakerView, never Breaker).
type coreCollector struct{ m *metrics }

func (c coreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.queueDesc
	ch <- c.m.oldestDesc
	ch <- c.m.waitingDesc
	ch <- c.m.saturationDesc
	ch <- c.m.stateDesc
	ch <- c.m.cooledDesc
	ch <- c.m.breakerDesc
	ch <- c.m.inflightDesc
	ch <- c.m.engineDesc
	ch <- c.m.kvDesc
	ch <- c.m.ladderDesc
	ch <- c.m.stepDesc
	ch <- c.m.ejectedDesc
}

func (c coreCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.m.g
	queue := make([]int, len(g.sc.Models))
	states := make([]sched.BreakerState, len(g.replicas))
	inflight := make([]int, len(g.replicas))
	present := make([]bool, len(g.replicas))
	ejected := make([]bool, len(g.replicas))
	engaged := 0
	var loads []Load
	g.View(func(core *sched.Core, now time.Duration) {
		loads = slices.Clone(g.be.loads)
		copy(ejected, g.ejected)
		for m := range queue {
			queue[m] = core.QueueLen(m)
		}
		for r := range g.replicas {
			states[r] = core.BreakerView(now, r)
			inflight[r] = core.Inflight(r)
			present[r] = core.Present(r)
		}
		if g.ladder != nil {
			engaged = g.ladder.Engaged()
		}
	})
	ch <- prometheus.MustNewConstMetric(c.m.ladderDesc, prometheus.GaugeValue, float64(engaged))
	if g.ladder != nil {
		seen := map[string]bool{} // a hand-built scenario may repeat a name: the first counts
		for i, r := range g.ladder.Rungs() {
			if seen[r.Name] {
				continue
			}
			seen[r.Name] = true
			v := 0.0
			if i < engaged {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.m.stepDesc, prometheus.GaugeValue, v, r.Name, r.Action)
		}
	}
	for _, name := range g.served {
		ch <- prometheus.MustNewConstMetric(c.m.queueDesc, prometheus.GaugeValue, float64(queue[g.models[name]]), name)
	}
	// Every class, 0 when none of its requests waits for a first token.
	for _, w := range g.Waiting() {
		ch <- prometheus.MustNewConstMetric(c.m.oldestDesc, prometheus.GaugeValue, w.Oldest.Seconds(), w.Class)
		ch <- prometheus.MustNewConstMetric(c.m.waitingDesc, prometheus.GaugeValue, float64(w.Count), w.Class)
	}
	busy, slots := 0, 0
	for r, rep := range g.replicas {
		id := strconv.Itoa(r)
		ch <- prometheus.MustNewConstMetric(c.m.breakerDesc, prometheus.GaugeValue, float64(states[r]), rep.pool, rep.region, id)
		ch <- prometheus.MustNewConstMetric(c.m.inflightDesc, prometheus.GaugeValue, float64(inflight[r]), rep.pool, id, rep.host)
		if rep.kind.scrapes() {
			ch <- prometheus.MustNewConstMetric(c.m.engineDesc, prometheus.GaugeValue, loads[r].Running, rep.pool, id, "running")
			ch <- prometheus.MustNewConstMetric(c.m.engineDesc, prometheus.GaugeValue, loads[r].Waiting, rep.pool, id, "waiting")
			if loads[r].KVUsage >= 0 {
				ch <- prometheus.MustNewConstMetric(c.m.kvDesc, prometheus.GaugeValue, loads[r].KVUsage, rep.pool, id)
			}
		}
		busy += inflight[r]
		if present[r] { // an autoscaled replica not provisioned has no slots
			slots += rep.maxBatch
		}
	}
	sat := 0.0
	if slots > 0 {
		sat = min(float64(busy)/float64(slots), 1)
	}
	ch <- prometheus.MustNewConstMetric(c.m.saturationDesc, prometheus.GaugeValue, sat)
	for _, p := range g.sc.Pools {
		rs := g.byPool[p.Name]
		if len(rs) == 0 {
			continue
		}
		closed, open, out := 0, 0, 0
		for _, r := range rs {
			if ejected[r] {
				out++
			}
			switch states[r] {
			case sched.Closed:
				closed++
			case sched.Open:
				open++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.m.stateDesc, prometheus.GaugeValue, deploymentState(closed, open, len(rs)), p.Name, p.Region)
		ch <- prometheus.MustNewConstMetric(c.m.cooledDesc, prometheus.GaugeValue, float64(open), p.Name, p.Region)
		ch <- prometheus.MustNewConstMetric(c.m.ejectedDesc, prometheus.GaugeValue, float64(out), p.Name)
	}
}

// deploymentState is LiteLLM's deployment state of a pool of n replicas, of
// which closed have a closed breaker and open an open one: 0 healthy (all
// closed), 2 complete outage (all open), 1 partial outage otherwise (some
// open or half-open).
func deploymentState(closed, open, n int) float64 {
	switch {
	case closed == n:
		return 0
	case open == n:
		return 2
	}
	return 1
}

// maxSSELine bounds the server-sent-event line a streamMeter reads; a longer
// line is passed through but not counted.
const maxSSELine = 1 << 20

// streamMeter reads a streamed response as it passes through, counting the
// server-sent events that carry output (a non-empty "content" of a chat
// delta or "text" of a completion choice: one token per event, as vLLM and
// OpenAI stream) and the completion_tokens of a usage event when the client
// asked for one, and the times of the first and last output events. It
// never keeps the text.
type streamMeter struct {
	line        []byte // an event line split across reads
	over        bool   // the current line outgrew maxSSELine
	tokens      int    // events carrying output
	usage       int    // completion_tokens of the last usage event; 0: none
	first, last time.Time
}

// feed reads the next bytes of the stream, read at at.
func (s *streamMeter) feed(b []byte, at time.Time) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.carry(b)
			return
		}
		if len(s.line) == 0 && !s.over {
			s.event(b[:i], at)
		} else {
			s.carry(b[:i])
			if !s.over {
				s.event(s.line, at)
			}
			s.line, s.over = s.line[:0], false
		}
		b = b[i+1:]
	}
}

func (s *streamMeter) carry(b []byte) {
	if s.over {
		return
	}
	if len(s.line)+len(b) > maxSSELine {
		s.line, s.over = s.line[:0], true
		return
	}
	s.line = append(s.line, b...)
}

// event reads one line of the stream.
func (s *streamMeter) event(line []byte, at time.Time) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	p, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	p = bytes.TrimLeft(p, " ")
	if bytes.Equal(p, []byte("[DONE]")) {
		return
	}
	if hasOutput(p, `"content"`) || hasOutput(p, `"text"`) {
		s.tokens++
		if s.first.IsZero() {
			s.first = at
		}
		s.last = at
	}
	if n, ok := jsonInt(p, `"completion_tokens"`); ok && n > 0 {
		s.usage = n
	}
}

// after finds key in p: v is what follows it and a colon (JSON whitespace
// allowed; nil when no colon follows), rest what follows the key, to look
// for the next match in. ok is false when p holds no key.
func after(p []byte, key string) ([]byte, []byte, bool) {
	i := bytes.Index(p, []byte(key))
	if i < 0 {
		return nil, nil, false
	}
	rest := p[i+len(key):]
	v := bytes.TrimLeft(rest, " \t")
	if len(v) == 0 || v[0] != ':' {
		return nil, rest, true
	}
	return bytes.TrimLeft(v[1:], " \t"), rest, true
}

// hasOutput reports whether the JSON object p has key with a non-empty
// string value. A key inside a string value cannot match: its quotes are
// escaped there.
func hasOutput(p []byte, key string) bool {
	for {
		v, rest, ok := after(p, key)
		if !ok {
			return false
		}
		if len(v) >= 2 && v[0] == '"' && v[1] != '"' {
			return true
		}
		p = rest
	}
}

// jsonInt returns the integer value of key in the JSON object p.
func jsonInt(p []byte, key string) (int, bool) {
	v, _, ok := after(p, key)
	if !ok {
		return 0, false
	}
	n, i := 0, 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9' && n < 1<<40; i++ {
		n = n*10 + int(v[i]-'0')
	}
	return n, i > 0
}
