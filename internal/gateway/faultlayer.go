package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Down is how the fault layer fails the attempts on a replica it takes
// down, as a backend with no proxy in front cannot be taken down otherwise.
type Down uint8

const (
	// Up: the fault does not take the replica down.
	Up Down = iota
	// DownRefuse: every attempt fails at once as a transport error (a
	// refused connection): a lost node.
	DownRefuse
	// DownHang: every attempt gets no answer until the health timeout
	// (policy.health.timeout) and fails as a timeout: an outage that
	// swallows connections.
	DownHang
)

// UpstreamFault is an HTTP-level fault the gateway applies to the attempts
// it sends one of its replicas, before they leave (the fault layer, in the
// manner of Envoy's HTTP fault filter): the same whatever the backend, so
// that a drill can inject it in front of vLLM, SGLang or TGI as well as in
// front of an emulated node. What it answers looks to the rest of the
// gateway exactly like an upstream answer: a 429 throttles the pool in the
// core (with its Retry-After), a 5xx counts against the breaker, a 404 is
// passed to the client, and the Observer hears of each as of a backend's.
//
// Every duration is model time. Zero fields do nothing; a fault must do
// something.
type UpstreamFault struct {
	// Kind names the fault in the log and in
	// fleetdrill_gateway_injected_faults{kind}: a kind of the fault
	// catalogue (quota-exhaustion), or "" for "injected".
	Kind string
	// Models, when not empty, narrows the fault to the attempts for these
	// models (scenario names; the model the body sent upstream names, so a
	// fallback's after a fallback).
	Models []string
	// Status, when not 0 (a 4xx or 5xx), answers every attempt the fault
	// hits with that status and an OpenAI-style JSON error body (Code,
	// Message: defaults when empty); the backend is not contacted.
	// RetryAfter, when set, goes with it as a Retry-After header in whole
	// seconds (at least 1), as a provider's 429 carries.
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
	// FailRate is the share of the attempts the fault hits that are
	// answered 500 without reaching the backend, each attempt's by
	// sched.AttemptFate from Config.Seed: a run of the scenario draws the
	// same for the same attempt.
	FailRate float64
	// Latency is added before every attempt the fault hits is sent (or
	// answered by the fault layer). It counts against the health timeout,
	// as the latency of a slow link does.
	Latency time.Duration
	// ErrorDelay is added before the fault layer's own answers only (a
	// Status, a FailRate 500): the latency of a link in front of the
	// backend, which the layer's answers do not cross: a brownout's
	// failed attempts end after its added latency.
	ErrorDelay time.Duration
	// Down fails every attempt as a dead backend would (see Down). Health
	// probes are not affected: a backend with no proxy in front keeps
	// answering them, so its breaker half-opens after open_for and the
	// trial attempt fails again.
	Down Down
}

// injection is one fault injected on some replicas.
type injection struct {
	id       int
	replicas []int
	f        UpstreamFault
}

// FaultLayer holds the faults injected on the gateway's replicas (see
// [Gateway.Faults]). It owns its own lock, never taken with the gateway's:
// an attempt consults it on its way out, outside the core's lock, so an
// injection never waits for the core nor the core for an injection.
type FaultLayer struct {
	// Read-only after New: the gateway's replicas and models (for checks,
	// the log and the series), its logger and clock.
	replicas []replica
	models   map[string]int
	scenario string
	log      *slog.Logger
	clk      clock
	seed     uint64
	// do sends an attempt the faults let through: the backends' client.
	do func(*http.Request) (*http.Response, error)

	answers  *prometheus.CounterVec // pool, status: attempts the layer answered itself
	injected *prometheus.Desc       // pool, kind: see faultCollector

	// downs counts the injections that take replicas down: an open
	// stream's reads look at the injections only while there are any.
	downs atomic.Int32

	mu     sync.Mutex // guards what follows
	nextID int
	on     []*injection // in the order injected
}

func newFaultLayer(replicas []replica, models map[string]int, scenario string, log *slog.Logger, clk clock, seed uint64,
	do func(*http.Request) (*http.Response, error)) *FaultLayer {
	return &FaultLayer{replicas: replicas, models: models, scenario: scenario, log: log, clk: clk, seed: seed, do: do,
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fleetdrill", Subsystem: "gateway",
			Name: "fault_answers_total",
			Help: "Upstream attempts the gateway's fault layer answered itself, by pool and status (0: failed as a transport error or timeout, a replica injected down); the backend never saw them."},
			[]string{"pool", "status"}),
		injected: prometheus.NewDesc("fleetdrill_gateway_injected_faults",
			"Faults injected in the gateway's fault layer, by pool and kind: one per replica a fault is on.",
			[]string{"pool", "kind"}, nil)}
}

// Faults returns the gateway's fault layer, where a drill injects
// HTTP-level faults ([FaultLayer.Inject]).
func (g *Gateway) Faults() *FaultLayer { return g.faults }

// Inject applies f to the attempts sent to the given replicas (as
// [Gateway.ReplicaIndex] numbers them) from now until remove is called.
// Faults stack: several on one replica combine as faults.Condition does for
// both drivers (see decide). remove is idempotent. Each injection and
// removal is logged.
func (l *FaultLayer) Inject(replicas []int, f UpstreamFault) (remove func(), err error) {
	if err := l.check(replicas, f); err != nil {
		return nil, err
	}
	if f.Kind == "" {
		f.Kind = "injected"
	}
	f.Models = slices.Clone(f.Models)
	reps := slices.Clone(replicas)
	slices.Sort(reps)
	reps = slices.Compact(reps)
	l.mu.Lock()
	l.nextID++
	inj := &injection{id: l.nextID, replicas: reps, f: f}
	l.on = append(l.on, inj)
	if f.Down != Up {
		l.downs.Add(1)
	}
	l.mu.Unlock()
	l.log.Info("fault injected", append([]any{"id", inj.id}, l.attrs(inj)...)...)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.on = slices.DeleteFunc(l.on, func(i *injection) bool { return i == inj })
			if f.Down != Up {
				l.downs.Add(-1)
			}
			l.mu.Unlock()
			l.log.Info("fault removed", "id", inj.id, "kind", f.Kind, "pools", l.poolsOf(reps), "replicas", reps)
		})
	}, nil
}

// check returns every problem of an injection at once.
func (l *FaultLayer) check(replicas []int, f UpstreamFault) error {
	var errs []error
	if len(replicas) == 0 {
		errs = append(errs, errors.New("no replica"))
	}
	for _, r := range replicas {
		if r < 0 || r >= len(l.replicas) {
			errs = append(errs, fmt.Errorf("replica %d: want in [0, %d)", r, len(l.replicas)))
		}
	}
	for _, m := range f.Models {
		if _, ok := l.models[m]; !ok {
			errs = append(errs, fmt.Errorf("models: %q is not a model of scenario %s", m, l.scenario))
		}
	}
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		errs = append(errs, fmt.Errorf("status: got %d, want a 4xx or 5xx (or 0 for none)", f.Status))
	}
	if !(f.FailRate >= 0 && f.FailRate <= 1) {
		errs = append(errs, fmt.Errorf("fail rate: got %g, want in [0, 1]", f.FailRate))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"latency", f.Latency}, {"error delay", f.ErrorDelay}, {"retry-after", f.RetryAfter}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: got %v, want >= 0", d.name, d.v))
		}
	}
	if f.Down > DownHang {
		errs = append(errs, fmt.Errorf("down: got %d, want Up, DownRefuse or DownHang", f.Down))
	}
	if f.Status == 0 && f.FailRate == 0 && f.Latency == 0 && f.Down == Up {
		errs = append(errs, errors.New("the fault does nothing: give it a status, a fail rate, a latency or down"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway: inject fault %s: %w", f.Kind, err)
	}
	return nil
}

// attrs describes an injection for the log: scenario names and numbers
// only.
func (l *FaultLayer) attrs(inj *injection) []any {
	f := inj.f
	attrs := []any{"kind", f.Kind, "pools", l.poolsOf(inj.replicas), "replicas", inj.replicas}
	if len(f.Models) > 0 {
		attrs = append(attrs, "models", f.Models)
	}
	if f.Status != 0 {
		attrs = append(attrs, "status", f.Status)
	}
	if f.RetryAfter > 0 {
		attrs = append(attrs, "retry_after", f.RetryAfter)
	}
	if f.FailRate > 0 {
		attrs = append(attrs, "fail_rate", f.FailRate)
	}
	if f.Latency > 0 {
		attrs = append(attrs, "latency", f.Latency)
	}
	if f.ErrorDelay > 0 {
		attrs = append(attrs, "error_delay", f.ErrorDelay)
	}
	if f.Down != Up {
		attrs = append(attrs, "down", f.Down.String())
	}
	return attrs
}

func (d Down) String() string {
	switch d {
	case Up:
		return "up"
	case DownRefuse:
		return "refuse"
	case DownHang:
		return "hang"
	}
	return "down(" + strconv.Itoa(int(d)) + ")"
}

// poolsOf lists the pools of replicas, in order, once each.
func (l *FaultLayer) poolsOf(replicas []int) []string {
	var out []string
	for _, r := range replicas {
		if p := l.replicas[r].pool; !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// verdict is what the injected faults do to one attempt, decided as it
// starts, by faults.Condition and sched.AttemptFate, which a run's ground
// truth decides an attempt with too.
type verdict struct {
	down    Down
	latency time.Duration // before the attempt is sent or answered
	// status, when not 0, is the layer's own answer, after delay more.
	status     int
	code, msg  string
	retryAfter time.Duration
	delay      time.Duration
}

// decide combines the faults fs on one replica for an attempt for model as
// the twin combines a replica's faults (faults.Condition, both drivers'):
// down if any fault is (refusing if any refuses, else hanging); latencies
// add up; the highest fail rate counts; the error delays add up. What
// answers the attempt, in order: down; else a fault on its model (Models:
// the model is not there, a 404 or 503, before anything runs), the
// earliest injected first; else the fail rate (Condition.Fails, which
// draws with draw only then); else a fault on every model (a provider's
// 429), the earliest first; else the attempt goes to the backend, after
// the latency.
func decide(fs []UpstreamFault, model string, draw func() float64) verdict {
	var c faults.Condition
	var delay time.Duration
	var onModel, onAll *UpstreamFault
	for i := range fs {
		f := &fs[i]
		if len(f.Models) > 0 && !slices.Contains(f.Models, model) {
			continue
		}
		c = c.With(faults.Condition{Down: f.Down != Up, Refuse: f.Down == DownRefuse, FailRate: f.FailRate, Latency: f.Latency})
		delay += f.ErrorDelay
		if f.Status != 0 {
			if len(f.Models) > 0 && onModel == nil {
				onModel = f
			} else if len(f.Models) == 0 && onAll == nil {
				onAll = f
			}
		}
	}
	switch {
	case c.Down && c.Refuse:
		return verdict{down: DownRefuse}
	case c.Down:
		return verdict{down: DownHang}
	}
	v := verdict{latency: c.Latency, delay: delay}
	pick := onModel
	if pick == nil && c.Fails(draw) {
		v.status, v.code, v.msg = http.StatusInternalServerError, "injected_error",
			"The server had an error while processing your request (injected fault)."
		return v
	}
	if pick == nil {
		pick = onAll
	}
	if pick == nil {
		v.delay = 0
		return v
	}
	v.status, v.code, v.msg, v.retryAfter = pick.Status, pick.Code, pick.Message, pick.RetryAfter
	if v.code == "" {
		v.code = "injected_fault"
	}
	if v.msg == "" {
		v.msg = fmt.Sprintf("%s (injected fault)", http.StatusText(v.status))
	}
	return v
}

// send is the one upstream round trip of an attempt on replica rep,
// through the fault layer: the faults injected on rep decide whether it is
// delayed, answered here, or failed as a dead backend; otherwise it goes
// to the backend. Its answer looks like the backend's.
func (l *FaultLayer) send(up *http.Request, q *request, rep int) (*http.Response, error) {
	l.mu.Lock()
	if len(l.on) == 0 {
		l.mu.Unlock()
		return l.pass(up, rep)
	}
	var fs []UpstreamFault
	for _, inj := range l.on {
		if slices.Contains(inj.replicas, rep) {
			fs = append(fs, inj.f)
		}
	}
	// The attempt's own draw (sched.AttemptFate), a run's too: its ID and
	// offer are the request's, fixed while the attempt is out.
	v := decide(fs, q.served, func() float64 { return sched.AttemptFate(l.seed, q.c.Core.ID, q.c.Life.Attempts, rep) })
	l.mu.Unlock()

	ctx := up.Context()
	pool := l.replicas[rep].pool
	switch v.down {
	case DownRefuse:
		l.answers.WithLabelValues(pool, "0").Inc()
		return nil, fmt.Errorf("gateway: %s: connection refused (injected fault)", l.replicas[rep].host)
	case DownHang:
		// Nothing comes back: the health timeout (call's header timer)
		// or the client ends the attempt.
		<-ctx.Done()
		l.answers.WithLabelValues(pool, "0").Inc()
		return nil, ctx.Err()
	}
	wait := v.latency
	if v.status != 0 {
		wait += v.delay + faults.AnswerDelay(sched.AnswerDraw(l.seed, q.c.Core.ID, q.c.Life.Attempts, rep))
	}
	if wait > 0 {
		t := time.NewTimer(l.clk.wall(wait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if v.status == 0 {
		return l.pass(up, rep)
	}
	l.answers.WithLabelValues(pool, strconv.Itoa(v.status)).Inc()
	return faultResponse(up, v), nil
}

// pass sends up to the backend. Its answer's body goes dark with the
// replica: a fault that takes the replica down later cuts what is still
// streaming from it, as a dead route cuts open connections (a hang waits
// out the attempt's context, the caller's stall timer; a refusal breaks
// the stream at once).
func (l *FaultLayer) pass(up *http.Request, rep int) (*http.Response, error) {
	resp, err := l.do(up)
	if err == nil && resp.Body != nil {
		resp.Body = &darkBody{ReadCloser: resp.Body, l: l, rep: rep, ctx: up.Context()}
	}
	return resp, err
}

// darkBody is an upstream answer's body that stops when its replica is
// injected down.
type darkBody struct {
	io.ReadCloser
	l   *FaultLayer
	rep int
	ctx context.Context
}

func (b *darkBody) Read(p []byte) (int, error) {
	if b.l.downs.Load() == 0 {
		return b.ReadCloser.Read(p) // the hot path: nothing is down
	}
	switch b.l.downState(b.rep) {
	case DownHang:
		<-b.ctx.Done()
		return 0, b.ctx.Err()
	case DownRefuse:
		return 0, fmt.Errorf("gateway: %s: connection reset (injected fault)", b.l.replicas[b.rep].host)
	}
	return b.ReadCloser.Read(p)
}

// downState is how replica rep is injected down (Up when it is not): what
// its health probes meet too, so that a backend with no proxy in front of
// it (an external endpoint) goes dark to probes as to requests.
func (l *FaultLayer) downState(rep int) Down {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := Up
	for _, inj := range l.on {
		if inj.f.Down > d && slices.Contains(inj.replicas, rep) {
			d = inj.f.Down
		}
	}
	return d
}

// faultResponse is the layer's answer to up: v's status, Retry-After and
// an OpenAI-style error body, as the emulated node answers its own faults.
func faultResponse(up *http.Request, v verdict) *http.Response {
	typ := "invalid_request_error"
	switch {
	case v.status == http.StatusTooManyRequests:
		typ = "insufficient_quota"
	case v.status >= 500:
		typ = "server_error"
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": v.msg, "type": typ, "param": nil, "code": v.code}})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if v.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(max(int64(math.Ceil(v.retryAfter.Seconds())), 1), 10))
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", v.status, http.StatusText(v.status)), StatusCode: v.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: up}
}

// faultCollector serves the fault layer's series: its answers, and the
// faults injected now (read at scrape time).
type faultCollector struct{ l *FaultLayer }

func (c faultCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.l.injected
	c.l.answers.Describe(ch)
}

func (c faultCollector) Collect(ch chan<- prometheus.Metric) {
	l := c.l
	type key struct{ pool, kind string }
	n := map[key]int{}
	var keys []key
	l.mu.Lock()
	for _, inj := range l.on {
		for _, r := range inj.replicas {
			k := key{l.replicas[r].pool, inj.f.Kind}
			if n[k] == 0 {
				keys = append(keys, k)
			}
			n[k]++
		}
	}
	l.mu.Unlock()
	for _, k := range keys {
		ch <- prometheus.MustNewConstMetric(l.injected, prometheus.GaugeValue, float64(n[k]), k.pool, k.kind)
	}
	l.answers.Collect(ch)
}
