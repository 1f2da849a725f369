package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// Kind is what serves behind a backend URL: it says where the gateway
// probes its health and what healthy means, how its load is read from its
// Prometheus endpoint, and which request extensions it takes.
type Kind string

// The backend kinds.
const (
	// KindOpenAI is any OpenAI-compatible server: healthy when GET
	// /v1/models answers 200 (the one path every such server has); no
	// load is read. The default.
	KindOpenAI Kind = "openai"
	// KindVLLM is vLLM's OpenAI server: GET /health, the vllm: series,
	// and vLLM's sampling extensions (ignore_eos, min_tokens).
	KindVLLM Kind = "vllm"
	// KindSGLang is SGLang's server: GET /health, the sglang: series; it
	// takes ignore_eos and min_tokens too.
	KindSGLang Kind = "sglang"
	// KindTGI is Hugging Face Text Generation Inference: GET /health, the
	// tgi_ series (no KV usage: TGI does not export one).
	KindTGI Kind = "tgi"
	// KindFleetdrill is fleetdrill's emulated node: GET /healthz; it
	// takes the replay's exact lengths (x_fleetdrill).
	KindFleetdrill Kind = "fleetdrill"
)

// Kinds lists the backend kinds, for flags and messages.
var Kinds = []Kind{KindOpenAI, KindVLLM, KindSGLang, KindTGI, KindFleetdrill}

// kindSpec is what a kind means to the gateway.
type kindSpec struct {
	health string // GET path; 200 is healthy
	// Load series (gauges, summed over their labels); "" when the kind
	// exports none. kvUsage lists names in order of preference (vLLM
	// renamed gpu_cache_usage_perc to kv_cache_usage_perc).
	running, waiting string
	kvUsage          []string
	// samplingExt: the server takes vLLM's ignore_eos and min_tokens.
	samplingExt bool
	// fleetdrillExt: the server takes x_fleetdrill (exact lengths).
	fleetdrillExt bool
}

var kindSpecs = map[Kind]kindSpec{
	KindOpenAI: {health: "/v1/models"},
	KindVLLM: {health: "/health", running: "vllm:num_requests_running", waiting: "vllm:num_requests_waiting",
		kvUsage: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, samplingExt: true},
	KindSGLang: {health: "/health", running: "sglang:num_running_reqs", waiting: "sglang:num_queue_reqs",
		kvUsage: []string{"sglang:token_usage"}, samplingExt: true},
	KindTGI:        {health: "/health", running: "tgi_batch_current_size", waiting: "tgi_queue_size"},
	KindFleetdrill: {health: "/healthz", samplingExt: true, fleetdrillExt: true},
}

// ParseBackend reads a backend as "KIND+URL" or "URL" (kind openai): the
// kind and the base URL without its trailing slash.
func ParseBackend(s string) (Kind, string, error) {
	kind, u := KindOpenAI, s
	if k, rest, ok := strings.Cut(s, "+"); ok && !strings.Contains(k, "/") && !strings.Contains(k, ":") {
		kind, u = Kind(k), rest
		if _, known := kindSpecs[kind]; !known {
			return "", "", fmt.Errorf("backend kind %q, want one of %s (as KIND+URL, e.g. vllm+http://10.0.0.5:8000)", k, kindList())
		}
	}
	if err := checkURL(u); err != nil {
		return "", "", err
	}
	return kind, strings.TrimRight(u, "/"), nil
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// adapt removes from a request body the extensions the kind does not take:
// x_fleetdrill (the emulated node's exact lengths) for any real server,
// vLLM's ignore_eos and min_tokens for servers without them (a strict
// server refuses unknown fields). The body is left alone when it has none
// of them.
func (k Kind) adapt(body []byte) []byte {
	spec := kindSpecs[k]
	var drop []string
	if !spec.fleetdrillExt && bytes.Contains(body, []byte(`"x_fleetdrill"`)) {
		drop = append(drop, "x_fleetdrill")
	}
	if !spec.samplingExt && (bytes.Contains(body, []byte(`"ignore_eos"`)) || bytes.Contains(body, []byte(`"min_tokens"`))) {
		drop = append(drop, "ignore_eos", "min_tokens")
	}
	if len(drop) == 0 {
		return body
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body
	}
	for _, f := range drop {
		delete(m, f)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// Load is a backend's load as its own metrics say, read at the probe
// interval.
type Load struct {
	Running float64 // requests in its batch
	Waiting float64 // requests queued in the engine
	KVUsage float64 // share of its KV cache in use, 0..1; -1: not exported
	At      time.Duration
}

// parseLoad reads the kind's load series from a Prometheus text
// exposition. ok is false when the body has none of them (metrics off, or
// another server).
func (k Kind) parseLoad(r io.Reader) (l Load, ok bool, err error) {
	spec := kindSpecs[k]
	// vLLM's and SGLang's names have colons, valid in the classic scheme
	// too; UTF-8 accepts whatever a newer server sends.
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Load{}, false, err
	}
	sum := func(name string) (float64, bool) {
		mf, found := families[name]
		if !found {
			return 0, false
		}
		v := 0.0
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				v += m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				v += m.GetUntyped().GetValue()
			case m.GetCounter() != nil:
				v += m.GetCounter().GetValue()
			}
		}
		return v, true
	}
	l.KVUsage = -1
	var okR, okW bool
	l.Running, okR = sum(spec.running)
	l.Waiting, okW = sum(spec.waiting)
	for _, name := range spec.kvUsage {
		if v, found := sum(name); found {
			// vLLM sums over a model's engines; a share stays a share.
			l.KVUsage = min(v, 1)
			break
		}
	}
	return l, okR || okW, nil
}

// scrapes reports whether the kind exports load series.
func (k Kind) scrapes() bool { return kindSpecs[k].running != "" }

// Backends is the gateway's fleet as HTTP servers: the client every
// upstream request goes through, what each backend's own metrics say of
// its load, and the start-up check of what each serves (see
// [Gateway.Backends]).
type Backends struct {
	// Read-only after New: the gateway's replicas (shared with it, never
	// written), its scenario and clock.
	replicas []replica
	sc       *scenarios.Scenario
	clk      clock
	client   *http.Client
	keyed    bool // a backend key is sent (Config.BackendKey)

	// mu is the gateway's lock (Gateway.mu), not one of the backends' own:
	// blocked mirrors what the core was told (SetBlocked), loads are read
	// with the core's state (coreCollector), and probed asks the
	// autoscalers, which live under it.
	mu      *sync.Mutex
	probed  func(i int) bool // whether replica i runs now (autoscale.go); with mu held
	loads   []Load           // as last scraped, per replica (see Kind); guarded by mu
	blocked []bool           // per replica: its engine queues (Load.Waiting > 0); guarded by mu

	// What the servers publish of their limits (serverlimits.go):
	// limitCore is the core's LimitContext, called with mu held; kvTokens
	// the scenario's largest request per pool and model; limits what
	// Check read (guarded by mu).
	limitCore func(pool, model int, tokens int64) int64
	kvTokens  [][]int64
	limits    []ServerLimit
	log       *slog.Logger
}

func newBackends(replicas []replica, sc *scenarios.Scenario, clk clock, client *http.Client, keyed bool,
	mu *sync.Mutex, probed func(int) bool) *Backends {
	b := &Backends{replicas: replicas, sc: sc, clk: clk, client: client, keyed: keyed, mu: mu, probed: probed,
		loads: make([]Load, len(replicas)), blocked: make([]bool, len(replicas))}
	for i := range b.loads {
		b.loads[i].KVUsage = -1
	}
	return b
}

// Backends returns the gateway's backends: their loads, and the check of
// what they serve.
func (g *Gateway) Backends() *Backends { return g.be }

// running snapshots which replicas run now, under mu.
func (b *Backends) running() []bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	on := make([]bool, len(b.replicas))
	for i := range on {
		on[i] = b.probed(i)
	}
	return on
}

// scrape reads replica i's load from its /metrics. Read-only: it changes
// nothing on the backend.
func (b *Backends) scrape(ctx context.Context, i int) (Load, error) {
	rep := &b.replicas[i]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rep.url+"/metrics", nil)
	if err != nil {
		return Load{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := b.client.Do(req)
	if err != nil {
		return Load{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return Load{}, fmt.Errorf("GET /metrics: %w", b.statusError(resp.StatusCode))
	}
	l, ok, err := rep.kind.parseLoad(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return Load{}, fmt.Errorf("GET /metrics: %w", err)
	}
	if !ok {
		return Load{}, fmt.Errorf("GET /metrics: no %s series (is the server's metrics endpoint on?)", rep.kind)
	}
	return l, nil
}

// noteLoad records replica i's scraped load, on the gateway's series and
// as back-pressure for the router, as an engine's queue pushes back: a
// replica whose engine queues requests takes no more from the gateway,
// where the dispatch policy orders them. It says whether the replica is
// blocked now and whether that changed, for the caller to tell the core.
// Called with mu held.
func (b *Backends) noteLoad(now time.Duration, i int, l Load) (blocked, changed bool) {
	l.At = now
	b.loads[i] = l
	blocked = l.Waiting > 0
	changed = blocked != b.blocked[i]
	b.blocked[i] = blocked
	return blocked, changed
}

// Loads returns each replica's last scraped load (the zero Load, with
// KVUsage -1, for replicas whose kind exports none or not yet read).
func (b *Backends) Loads() []Load {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.loads)
}

// Check asks every backend for its models (GET /v1/models) and
// says, naming pool, URL and model, which backend does not serve a model
// its pool serves in the scenario, or does not answer. Call it at start:
// a fleet that cannot serve the scenario should not be found out by the
// first request. Served names are the scenario's model names.
//
// It reads each server's own limit on a request's length where the server
// publishes one (vLLM's and SGLang's max_model_len on /v1/models, TGI's
// max_total_tokens on /info) and tells the core the smaller of it and the
// scenario's (Limits, ContextLimits): routing, deadline feasibility and
// the 400 context_length_exceeded then go by what the server takes.
func (b *Backends) Check(ctx context.Context) error {
	var errs []error
	var read []ServerLimit
	probed := b.running()
	for i := range b.replicas {
		if !probed[i] {
			continue // an autoscaled replica its scaler does not hold: nothing runs there yet
		}
		rep := &b.replicas[i]
		cards, err := b.listModels(ctx, rep.url)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s backend %s (%s): GET /v1/models: %w", rep.pool, rep.host, rep.kind, err))
			continue
		}
		want := b.sc.Models[rep.model].Name
		ids := make([]string, len(cards))
		for k, c := range cards {
			ids[k] = c.ID
		}
		if !slices.Contains(ids, want) {
			errs = append(errs, fmt.Errorf("pool %s backend %s (%s) does not serve model %s (it serves: %s); serve it under that name (vLLM: --served-model-name %s)",
				rep.pool, rep.host, rep.kind, want, strings.Join(ids, ", "), want))
			continue
		}
		tokens, source, err := b.serverLimit(ctx, i, cards)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s backend %s (%s): %w", rep.pool, rep.host, rep.kind, err))
			continue
		}
		if tokens > 0 {
			read = append(read, ServerLimit{Pool: rep.pool, Backend: rep.host, Model: want, Tokens: tokens,
				Scenario: b.kvTokens[rep.pi][rep.model], Source: source, pool: rep.pi, model: rep.model})
		}
	}
	b.applyLimits(read)
	return errors.Join(errs...)
}

// listModels returns the model cards a server lists.
func (b *Backends) listModels(ctx context.Context, base string) ([]modelCard, error) {
	ctx, cancel := context.WithTimeout(ctx, b.clk.wall(b.sc.Policy.Health.Timeout.D()))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return nil, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, b.statusError(resp.StatusCode)
	}
	var list struct {
		Data []modelCard `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("not a model list: %w", err)
	}
	return list.Data, nil
}

// statusError says what a backend's refusal of a GET means: a 401 or 403
// is the backend key, missing or not the backend's.
func (b *Backends) statusError(code int) error {
	switch {
	case code != http.StatusUnauthorized && code != http.StatusForbidden:
		return fmt.Errorf("status %d", code)
	case !b.keyed:
		return fmt.Errorf("status %d: the backend wants an API key, and the gateway has none to send "+
			"(fleetdrill gateway: $FLEETDRILL_BACKEND_API_KEY or --backend-key-file)", code)
	}
	return fmt.Errorf("status %d: the backend refused the gateway's backend key: give the one it was started with (vLLM: --api-key)", code)
}
