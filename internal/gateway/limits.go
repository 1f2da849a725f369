package gateway

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Defaults of the limits that keep the gateway's memory bounded under
// hostile load (see Config).
const (
	// DefaultMaxBodyBytes is enough for a 128k-token prompt (about four
	// bytes a token, JSON-escaped).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxInflightBodyBytes bounds the request bodies held at once:
	// 128 maximum-size prompts, or some 30,000 of a typical 4 KB.
	DefaultMaxInflightBodyBytes = 128 << 20
	// DefaultStreamWriteTimeout bounds each write to a client (a streamed
	// answer's chunk and its flush), not the whole answer.
	DefaultStreamWriteTimeout = 30 * time.Second
)

// SoftMemoryLimit is the Go runtime's soft memory limit for a gateway whose
// in-flight body budget is budget: httpguard.SoftMemoryLimit, the node's
// too.
func SoftMemoryLimit(budget int64) int64 { return httpguard.SoftMemoryLimit(budget) }

// outRefused is the outcome of a request the gateway refused itself,
// before the core saw it: no key (401), a body too large (413) or not
// valid (400), an unknown model (404) or class (400), the in-flight body
// budget full (429).
const outRefused = "refused"

// Reasons of a refusal of the gateway's own
// (fleetdrill_gateway_refused_total{reason}).
const (
	refuseUnauthorized = "unauthorized"
	refuseTooLarge     = "body-too-large"
	refuseBodyBudget   = "body-budget"
	refuseBadBody      = "invalid-body"
	refuseBadValue     = "invalid-value"
	refuseModel        = "unknown-model"
	refuseClass        = "unknown-class"
)

var refuseReasons = []string{refuseUnauthorized, refuseTooLarge, refuseBodyBudget, refuseBadBody,
	refuseBadValue, refuseModel, refuseClass}

// errTooLarge is the 413 of a body over Config.MaxBodyBytes.
func errTooLarge(limit int64) apiError {
	return apiError{http.StatusRequestEntityTooLarge, typeInvalid, "request_too_large", "",
		"request body larger than " + strconv.FormatInt(limit, 10) + " bytes"}
}

// errBodyBudget is the 429 of a request whose body the gateway has no room
// for now: the bodies in flight fill Config.MaxInflightBodyBytes.
var errBodyBudget = apiError{http.StatusTooManyRequests, typeRequests, "rate_limit_exceeded", "",
	"the gateway holds too many request bodies; retry later"}

// Limits is the gateway's gate in front of the core: who may call it (its
// tenants' keys) and the limits that keep its memory bounded, with the
// refusals they make. It takes no lock of its own: its counters are atomic
// or Prometheus's, everything else is read-only after New; the one core
// question it asks (coreFull) takes the gateway's lock itself.
type Limits struct {
	// Read-only after New.
	sc           *scenarios.Scenario
	keys         []keyEntry
	replaySecret string // Config.ReplaySecret: who may set the node's exact lengths
	body         *httpguard.BodyBudget
	log          *slog.Logger
	// metrics: a refusal ends a request, counted as every request's end.
	metrics *metrics
	// coreFull asks the core, under the gateway's lock, whether tenant
	// holds its concurrency limit for class (sched.Core.TenantFull); nil
	// when the core's refusal would not be final (see tenantFull).
	coreFull func(tenant, class int) (retry time.Duration, full bool)

	refused *prometheus.CounterVec
	conns   prometheus.Counter // connections closed by the per-address cap
}

// Limits returns the gateway's limits, for the listener's per-address
// connection cap to report to ([Limits.RefusedConnection]).
func (g *Gateway) Limits() *Limits { return g.lim }

// RefusedConnection counts a connection the listener closed because its
// client address had too many open (httpguard.Limits.OnRefused).
func (l *Limits) RefusedConnection() { l.conns.Inc() }

// replayTrusted reports whether r carries the replay secret
// (Config.ReplaySecret, compared in constant time); never when there is
// none.
func (l *Limits) replayTrusted(r *http.Request) bool {
	s := l.replaySecret
	if s == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(r.Header.Get(hdrReplay)), []byte(s)) == 1
}

// screen returns a client's body without the emulated node's exact lengths
// (x_fleetdrill), which would make a node do work the gateway did not
// charge, unless the request carries the replay secret.
func (l *Limits) screen(r *http.Request, body []byte) []byte {
	if !bytes.Contains(body, []byte(`"x_fleetdrill"`)) || l.replayTrusted(r) {
		return body
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body // refused as invalid JSON further on
	}
	delete(m, "x_fleetdrill")
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// limitDefaults fills in the defaults of cfg's limits.
func limitDefaults(cfg *Config) {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxInflightBodyBytes <= 0 {
		cfg.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	cfg.MaxInflightBodyBytes = max(cfg.MaxInflightBodyBytes, cfg.MaxBodyBytes)
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
}

// newLimits builds the limits of cfg (its defaults filled in) and
// registers their series on reg.
func newLimits(cfg *Config, sc *scenarios.Scenario, keys []keyEntry, m *metrics, log *slog.Logger,
	coreFull func(tenant, class int) (time.Duration, bool), reg *prometheus.Registry) (*Limits, error) {
	l := &Limits{sc: sc, keys: keys, replaySecret: cfg.ReplaySecret, body: httpguard.NewBodyBudget(cfg.MaxBodyBytes, cfg.MaxInflightBodyBytes), log: log,
		metrics: m, coreFull: coreFull}
	l.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fleetdrill", Subsystem: "gateway",
		Name: "refused_total",
		Help: "Requests the gateway refused itself, before the core saw them, by reason; each is also counted in requests_total with outcome refused."},
		[]string{"reason"})
	for _, r := range refuseReasons {
		l.refused.WithLabelValues(r)
	}
	body := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetdrill", Subsystem: "gateway",
		Name: "inflight_body_bytes", Help: "Request body bytes reserved now, of the in-flight budget (--max-inflight-body)."},
		func() float64 { return float64(l.body.InFlight()) })
	l.conns = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fleetdrill", Subsystem: "gateway",
		Name: "connections_refused_total",
		Help: "Connections closed as soon as accepted because their client address had --max-conns-per-ip open."})
	return l, errors.Join(reg.Register(l.refused), reg.Register(body), reg.Register(l.conns))
}

// refuse answers a request the gateway refuses itself, counts it
// (requests_total with outcome refused, refused_total by reason) and logs
// one line: the tenant's scenario name when its key matched ("-"
// otherwise), the class when known, the status and the reason; never the
// key, the prompt or the client's address.
func (l *Limits) refuse(w http.ResponseWriter, tenant int, class, reason string, e apiError) {
	name := "-"
	if tenant >= 0 {
		name = l.sc.Tenants[tenant].Name
	}
	if class == "" {
		class = "-"
	}
	// No X-Fleetdrill headers: the core never saw the request (see
	// Response headers in the package documentation).
	writeError(w, e)
	l.metrics.requests.WithLabelValues(name, class, outRefused).Inc()
	l.refused.WithLabelValues(reason).Inc()
	l.log.Info("refused", "tenant", name, "class", class, "status", e.status, "reason", reason)
}

// readBody reads a request's body within the limits (httpguard.BodyBudget):
// 413 beyond Config.MaxBodyBytes, 429 with Retry-After when the in-flight
// budget has no room for it. On success the caller must call release when
// the request ends; on failure the request has been answered and counted.
func (l *Limits) readBody(w http.ResponseWriter, r *http.Request, tenant int) (body []byte, release func(), ok bool) {
	body, release, err := l.body.Read(w, r)
	switch {
	case err == nil:
		return body, release, true
	case errors.Is(err, httpguard.ErrBodyTooLarge):
		l.refuseTooLarge(w, r, tenant, l.body.MaxBody()) // linger.go
	case errors.Is(err, httpguard.ErrBodyBudget):
		w.Header().Set("Retry-After", "1")
		l.refuse(w, tenant, "", refuseBodyBudget, errBodyBudget)
	default:
		l.refuse(w, tenant, "", refuseBadBody,
			apiError{http.StatusBadRequest, typeInvalid, "invalid_body", "", "request body unreadable"})
	}
	return nil, nil, false
}

// modelUnread is the requested-model label of a request refused before its
// body, which names the model, was read.
const modelUnread = "-"

// tenantFull refuses a request before its body is read when the core
// would refuse it for its tenant's concurrency (sched.Core.TenantFull): the
// tenant holds its limit and the class does not defer. The answer and the
// counts are the core's refusal's (429, X-Fleetdrill-Outcome rejected,
// reason tenant-concurrency), under model "-": the body naming it is never
// read. It reports whether it answered.
func (l *Limits) tenantFull(w http.ResponseWriter, tenant, class int, arrived time.Time) bool {
	if l.coreFull == nil {
		return false // the core's refusal would not be final: the request must reach it
	}
	retry, full := l.coreFull(tenant, class)
	if !full {
		return false
	}
	q := &request{tenant: l.sc.Tenants[tenant].Name, class: l.sc.Classes[class].Name, model: modelUnread, arrived: arrived}
	q.c.Life.Attempts = 1 // one offer, refused: as the core's refusal says it
	setRetryAfter(w, retry)
	status := q.fail(w, outRejected, sched.ReasonTenantConcurrency,
		rateLimited(sched.ReasonTenantConcurrency, "request refused: "+sched.ReasonTenantConcurrency))
	l.metrics.ended(q, outRejected)
	l.log.Info("request", "tenant", q.tenant, "class", q.class, "model", modelUnread, "outcome", outRejected,
		"status", status, "reason", q.reason, "attempts", 1, "body_read", false)
	return true
}

// authenticate returns the tenant of the request's bearer key, or -1. Every
// key is compared, in constant time, whatever matches.
func (l *Limits) authenticate(r *http.Request) int {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !equalFoldASCII(h[:len(prefix)], prefix) {
		return -1
	}
	d := sha256.Sum256([]byte(h[len(prefix):]))
	tenant := -1
	for _, k := range l.keys {
		eq := subtle.ConstantTimeCompare(d[:], k.digest[:])
		tenant = subtle.ConstantTimeSelect(eq, k.tenant, tenant)
	}
	return tenant
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}
