package gateway

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// memoryHeadroom is what the gateway needs beyond the bodies it holds:
// connections, buffers, streams, the core.
const memoryHeadroom = 128 << 20

// SoftMemoryLimit is the Go runtime's soft memory limit for a gateway whose
// in-flight body budget is budget (fleetdrill gateway sets it unless
// GOMEMLIMIT or --memory-limit says otherwise): the budget plus headroom.
// Without it the garbage collector lets the heap reach twice what is live,
// so a burst of maximum-size bodies would double the process's footprint;
// near the limit it collects sooner instead, trading CPU for a bounded
// resident set.
func SoftMemoryLimit(budget int64) int64 { return budget + memoryHeadroom }

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

// limits is the gateway's state for its own limits.
type limits struct {
	inflight atomic.Int64 // body bytes reserved now
	refused  *prometheus.CounterVec
	conns    prometheus.Counter // connections closed by the per-address cap
}

// RefusedConnection counts a connection the listener closed because its
// client address had too many open (httpguard.Limits.OnRefused).
func (g *Gateway) RefusedConnection() { g.lim.conns.Inc() }

// initLimits fills in the limits' defaults and registers their series.
func (g *Gateway) initLimits() error {
	if g.cfg.MaxBodyBytes <= 0 {
		g.cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if g.cfg.MaxInflightBodyBytes <= 0 {
		g.cfg.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	g.cfg.MaxInflightBodyBytes = max(g.cfg.MaxInflightBodyBytes, g.cfg.MaxBodyBytes)
	if g.cfg.StreamWriteTimeout <= 0 {
		g.cfg.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	g.lim.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "fleetdrill", Subsystem: "gateway",
		Name: "refused_total",
		Help: "Requests the gateway refused itself, before the core saw them, by reason; each is also counted in requests_total with outcome refused."},
		[]string{"reason"})
	for _, r := range refuseReasons {
		g.lim.refused.WithLabelValues(r)
	}
	body := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "fleetdrill", Subsystem: "gateway",
		Name: "inflight_body_bytes", Help: "Request body bytes reserved now, of the in-flight budget (--max-inflight-body)."},
		func() float64 { return float64(g.lim.inflight.Load()) })
	g.lim.conns = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "fleetdrill", Subsystem: "gateway",
		Name: "connections_refused_total",
		Help: "Connections closed as soon as accepted because their client address had --max-conns-per-ip open."})
	return errors.Join(g.reg.Register(g.lim.refused), g.reg.Register(body), g.reg.Register(g.lim.conns))
}

// reserve takes n bytes of the in-flight body budget; false when they do
// not fit.
func (l *limits) reserve(n, budget int64) bool {
	for {
		cur := l.inflight.Load()
		if cur+n > budget {
			return false
		}
		if l.inflight.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// refuse answers a request the gateway refuses itself, counts it
// (requests_total with outcome refused, refused_total by reason) and logs
// one line: the tenant's scenario name when its key matched ("-"
// otherwise), the class when known, the status and the reason; never the
// key, the prompt or the client's address.
func (g *Gateway) refuse(w http.ResponseWriter, tenant int, class, reason string, e apiError) {
	name := "-"
	if tenant >= 0 {
		name = g.sc.Tenants[tenant].Name
	}
	if class == "" {
		class = "-"
	}
	// No X-Fleetdrill headers: the core never saw the request (see
	// Response headers in the package documentation).
	writeError(w, e)
	g.metrics.requests.WithLabelValues(name, class, outRefused).Inc()
	g.lim.refused.WithLabelValues(reason).Inc()
	g.log.Info("refused", "tenant", name, "class", class, "status", e.status, "reason", reason)
}

// readBody reads a request's body within the limits: 413 beyond
// Config.MaxBodyBytes (from Content-Length before reading, and while
// reading), 429 with Retry-After when the in-flight budget has no room
// for it (reserved before reading: its Content-Length, or the limit when
// unknown). On success the caller must call release when the request
// ends; on failure the request has been answered and counted.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, tenant int) (body []byte, release func(), ok bool) {
	limit := g.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		g.refuse(w, tenant, "", refuseTooLarge, errTooLarge(limit))
		return nil, nil, false
	}
	n := limit
	if r.ContentLength >= 0 {
		n = r.ContentLength
	}
	if !g.lim.reserve(n, g.cfg.MaxInflightBodyBytes) {
		w.Header().Set("Retry-After", "1")
		g.refuse(w, tenant, "", refuseBodyBudget, errBodyBudget)
		return nil, nil, false
	}
	release = func() { g.lim.inflight.Add(-n) }
	// A known length is read into one buffer (+1: the read that sees EOF
	// needs no growth); an unknown one grows as it comes, up to the limit.
	size := int64(4 << 10)
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1
	}
	buf := make([]byte, 0, size)
	rd := http.MaxBytesReader(w, r.Body, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			break
		}
		if err != nil {
			release()
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				g.refuse(w, tenant, "", refuseTooLarge, errTooLarge(limit))
			} else {
				g.refuse(w, tenant, "", refuseBadBody,
					apiError{http.StatusBadRequest, typeInvalid, "invalid_body", "", "request body unreadable"})
			}
			return nil, nil, false
		}
	}
	return buf, release, true
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
func (g *Gateway) tenantFull(w http.ResponseWriter, tenant, class int, arrived time.Time) bool {
	// Where the refusal would not be final the request must reach the
	// core: with retry_rejected the lifecycle retries it until a slot
	// frees, and a degradation ladder may defer or shed it first.
	if g.sc.Policy.Retries.RetryRejected || g.ladder != nil {
		return false
	}
	g.mu.Lock()
	retry, full := g.core.TenantFull(g.now(), tenant, class)
	g.mu.Unlock()
	if !full {
		return false
	}
	q := &request{tenant: g.sc.Tenants[tenant].Name, class: g.sc.Classes[class].Name, model: modelUnread, arrived: arrived}
	q.c.life.Attempts = 1 // one offer, refused: as the core's refusal says it
	setRetryAfter(w, retry)
	status := q.fail(w, outRejected, sched.ReasonTenantConcurrency,
		rateLimited(sched.ReasonTenantConcurrency, "request refused: "+sched.ReasonTenantConcurrency))
	g.metrics.ended(q, outRejected)
	g.log.Info("request", "tenant", q.tenant, "class", q.class, "model", modelUnread, "outcome", outRejected,
		"status", status, "reason", q.reason, "attempts", 1, "body_read", false)
	return true
}
