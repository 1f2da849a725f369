package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/openai"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// completionRequest is what the gateway reads of an OpenAI request; the body
// goes upstream as it came (bar the model, after a fallback, and what the
// degradation ladder changes: degrade.go).
type completionRequest struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	N                   *int            `json:"n"`
	BestOf              *int            `json:"best_of"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// EstimateTokens returns the input and output token estimates of a request
// (see the package documentation).
func EstimateTokens(body []byte, defaultMax int) (in, out int, err error) {
	var cr completionRequest
	if err := json.Unmarshal(body, &cr); err != nil {
		return 0, 0, err
	}
	return estimate(&cr, defaultMax)
}

func estimate(cr *completionRequest, defaultMax int) (in, out int, err error) {
	b := len(cr.Prompt)
	for _, m := range cr.Messages {
		b += len(m.Content)
	}
	in = (b+3)/4 + 4*len(cr.Messages)
	in = max(in, 1)
	out = defaultMax
	switch {
	case cr.MaxCompletionTokens != nil:
		out = *cr.MaxCompletionTokens
	case cr.MaxTokens != nil:
		out = *cr.MaxTokens
	}
	if out < 0 {
		return 0, 0, errors.New("max_tokens must not be negative")
	}
	// No model holds more; the bound also keeps k × out (and the core's
	// input + output) far from overflowing.
	if out > maxOutputTokens {
		return 0, 0, fmt.Errorf("max_tokens must be at most %d", maxOutputTokens)
	}
	// Each of n (or best_of) choices is a generation of its own.
	k, err := choices(cr)
	if err != nil {
		return 0, 0, err
	}
	return in, k * out, nil
}

// maxOutputTokens bounds max_tokens (and max_completion_tokens): 400
// invalid_value beyond it.
const maxOutputTokens = 1 << 31

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// apiError is an error of the gateway's own, in OpenAI's wire format: what
// the official SDKs decode into their Error (Type, Param and Code are
// strings; param is null unless a field of the request is at fault). See
// the package documentation for the codes.
type apiError struct {
	status         int
	typ, code      string
	param, message string // param "": null
}

// Error types, as OpenAI's: a 429 says which limit ("requests" or
// "tokens").
const (
	typeInvalid  = "invalid_request_error"
	typeServer   = "server_error"
	typeRequests = "requests"
	typeTokens   = "tokens"
)

// body is e as OpenAI sends it: {"error": {...}}.
func (e apiError) body() []byte {
	var param *string
	if e.param != "" {
		param = &e.param
	}
	type object struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	}
	b, _ := json.Marshal(map[string]object{"error": {e.message, e.typ, param, e.code}})
	return b
}

func writeError(w http.ResponseWriter, e apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body())
}

// Errors of the gateway's own that do not depend on the request.
var (
	errInvalidKey = apiError{http.StatusUnauthorized, typeInvalid, "invalid_api_key", "", "invalid API key"}
	errDeadline   = apiError{http.StatusGatewayTimeout, typeServer, "deadline_exceeded", "", "request deadline exceeded"}
)

// errModelNotFound is the 404 of a model the gateway does not serve, in
// OpenAI's words.
func errModelNotFound(model string) apiError {
	return apiError{http.StatusNotFound, typeInvalid, "model_not_found", "model",
		fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)}
}

// rateLimited is the 429 of a refusal for reason (the core's, the
// degradation ladder's load-shed or upstream-quota).
func rateLimited(reason, msg string) apiError {
	typ := typeRequests
	if reason == sched.ReasonTenantTokens {
		typ = typeTokens
	}
	return apiError{http.StatusTooManyRequests, typ, "rate_limit_exceeded", "", msg}
}

// Response headers that say what happened to a request (see the package
// documentation).
const (
	hdrOutcome   = "X-Fleetdrill-Outcome"
	hdrReason    = "X-Fleetdrill-Reason"
	hdrQueueWait = "X-Fleetdrill-Queue-Wait"
	hdrDeferrals = "X-Fleetdrill-Deferrals"
	hdrAttempts  = "X-Fleetdrill-Attempts"
	// hdrAdmitted is "1" when the core dispatched or queued the request at
	// least once: what the twin counts as admitted (a request deferred or
	// rejected at every offer never was).
	hdrAdmitted = "X-Fleetdrill-Admitted"
	// hdrHedged is "won" when the answer came from a hedged duplicate.
	hdrHedged = "X-Fleetdrill-Hedged"
)

// setRetryAfter sets Retry-After to d, model time, in whole seconds (at
// least 1).
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	s := int64(math.Ceil(d.Seconds()))
	w.Header().Set("Retry-After", strconv.FormatInt(max(s, 1), 10))
}

func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	if g.lim.authenticate(r) < 0 {
		g.metrics.unauthorized.Inc()
		g.lim.refuse(w, -1, "", refuseUnauthorized, errInvalidKey)
		return
	}
	out := openai.NewModelList(g.served, g.clk.start.Unix())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// serveModel answers GET /v1/models/{id}: the model object of a model the
// gateway serves (one /v1/models lists), else 404 model_not_found.
func (g *Gateway) serveModel(w http.ResponseWriter, r *http.Request) {
	if g.lim.authenticate(r) < 0 {
		g.metrics.unauthorized.Inc()
		g.lim.refuse(w, -1, "", refuseUnauthorized, errInvalidKey)
		return
	}
	id := r.PathValue("id")
	if _, ok := slices.BinarySearch(g.served, id); !ok {
		writeError(w, errModelNotFound(id))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(openai.NewModel(id, g.clk.start.Unix()))
}

// attempt results.
type result uint8

const (
	resDone      result = iota // answered the client (see outcome)
	resRetry                   // failed before answering: retry or fail
	resCancelled               // the client went away
)

// request is the per-request state of serveCompletion.
type request struct {
	c          call
	path       string
	body       []byte
	stream     bool
	tenant     string
	class      string
	model      string // requested
	arrived    time.Time
	lastStatus int           // of the last failed attempt: 0 transport error
	lastRetry  time.Duration // upstream Retry-After of the last attempt (model time)
	lastMsg    string
	ttft       time.Duration // model time
	reason     string        // of a rejection (X-Fleetdrill-Reason)
	// legs cancel its attempt's two legs (race): the first, the duplicate.
	legs [reqengine.Duplicate + 1]context.CancelFunc

	// Where the last attempt went (scenario names), for the metrics.
	served, pool, region string
	fellBack             bool // an attempt went to a fallback model

	// The request's fields that bound its length: "messages" or "prompt";
	// "max_tokens" or "max_completion_tokens".
	inParam, outParam string
}

// fail answers q with an error of the gateway's own, saying its outcome
// (and reason: "" for none) in the X-Fleetdrill headers. It returns the
// status sent.
func (q *request) fail(w http.ResponseWriter, outcome, reason string, e apiError) int {
	q.reason = reason
	q.setHeaders(w, outcome, reason)
	writeError(w, e)
	return e.status
}

// setHeaders sets the X-Fleetdrill headers every answer carries.
func (q *request) setHeaders(w http.ResponseWriter, outcome, reason string) {
	h := w.Header()
	h.Set(hdrOutcome, outcome)
	if reason != "" {
		h.Set(hdrReason, reason)
	}
	// A deferral by the ladder is counted as the core's: an offer, deferred.
	if n := q.c.Life.AllDeferrals(); n > 0 {
		h.Set(hdrDeferrals, strconv.Itoa(n))
	}
	h.Set(hdrAttempts, strconv.Itoa(q.c.Life.Offers()))
	if q.c.Life.Admitted {
		h.Set(hdrAdmitted, "1")
	}
}

func (g *Gateway) serveCompletion(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	tenant := g.lim.authenticate(r)
	if tenant < 0 {
		g.metrics.unauthorized.Inc()
		g.lim.refuse(w, tenant, "", refuseUnauthorized, errInvalidKey)
		return
	}
	// What the headers say is checked before the body is read: a request
	// refused for them costs no body memory.
	class, ok := g.defClass, true
	if name := r.Header.Get("X-Fleetdrill-Class"); name != "" {
		if class, ok = g.classes[name]; !ok {
			g.lim.refuse(w, tenant, "", refuseClass, apiError{http.StatusBadRequest, typeInvalid, "unknown_request_class", "", "unknown request class (X-Fleetdrill-Class)"})
			return
		}
	}
	if g.lim.tenantFull(w, tenant, class, arrived) { // limits.go
		return
	}
	body, release, ok := g.lim.readBody(w, r, tenant)
	if !ok {
		return
	}
	defer release()
	// UTF-8, one JSON value and nothing after it: the node reads a body
	// by the same rule.
	var cr completionRequest
	if err := openai.DecodeRequest(body, &cr); err != nil {
		g.lim.refuse(w, tenant, "", refuseBadBody, apiError{http.StatusBadRequest, typeInvalid, "invalid_body", "", err.Error()})
		return
	}
	model, ok := g.models[cr.Model]
	if !ok {
		g.lim.refuse(w, tenant, "", refuseModel, errModelNotFound(cr.Model))
		return
	}
	// The request's fields that say how long it may be, for a
	// context_length_exceeded.
	inParam, outParam := "prompt", "max_tokens"
	if r.URL.Path == "/v1/chat/completions" {
		inParam = "messages"
	}
	if cr.MaxCompletionTokens != nil {
		outParam = "max_completion_tokens"
	}
	in, out, err := estimate(&cr, g.cfg.DefaultMaxTokens)
	if err != nil {
		g.lim.refuse(w, tenant, g.sc.Classes[class].Name, refuseBadValue, apiError{http.StatusBadRequest, typeInvalid, "invalid_value", paramOf(err, outParam), err.Error()})
		return
	}
	q := &request{path: r.URL.Path, body: g.lim.screen(r, body), stream: cr.Stream, arrived: arrived,
		tenant: g.sc.Tenants[tenant].Name, class: g.sc.Classes[class].Name, model: cr.Model,
		inParam: inParam, outParam: outParam}
	q.c.wake = make(chan struct{}, 1)
	q.c.Counted = true // the ladder's report counts every request
	// A request arrives once, when the client sent it: a retry, a deferred
	// request offered again or one the ladder deferred keeps its arrival,
	// so FIFO order, priority aging, WFQ and its wait count
	// from then.
	q.c.Core = sched.Request{Tenant: tenant, Class: class, Model: model, Input: in, Output: out, Arrived: g.clk.at(arrived)}

	// The class deadline is model time from arrival: the core sees it on
	// its clock, the request's context on the wall clock.
	ctx := r.Context()
	if d := g.sc.Classes[class].Deadline.D(); d > 0 {
		q.c.Core.Deadline = g.clk.at(arrived) + d
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, arrived.Add(g.clk.wall(d)))
		defer cancel()
	}

	g.mu.Lock()
	// Numbered from 0 in arrival order, as a run numbers its requests:
	// the hashes that draw by ID (a canary's route) draw alike.
	q.c.Core.ID = g.nextID
	g.nextID++
	q.c.Life.Key = g.nonce + "-" + strconv.FormatUint(q.c.Core.ID, 10)
	g.calls.m[q.c.Core.ID] = &q.c
	g.mu.Unlock()
	g.first.add(q.c.Core.ID, class, q.c.Core.Tenant, q.c.Core.Arrived)
	// Whatever way the handler leaves (a panic net/http recovers included),
	// the request stops waiting and leaves the engine: a stale entry would
	// grow the gauges forever, and a live one keep its timers.
	defer g.first.done(q.c.Core.ID)
	defer func() {
		g.gone(ctx, q) // a handler that panicked; a no-op once q ended
		g.mu.Lock()
		g.eng.Release(&q.c.Req)
		delete(g.calls.m, q.c.Core.ID)
		g.mu.Unlock()
	}()

	g.step(reqengine.Event{Kind: reqengine.Arrival, Req: &q.c.Req})
	outcome, status := g.run(ctx, w, q)

	g.first.done(q.c.Core.ID)
	g.metrics.ended(q, outcome)
	g.log.Info("request", "tenant", q.tenant, "class", q.class, "model", cr.Model, "stream", q.stream,
		"outcome", outcome, "status", status, "attempts", q.c.Life.Offers(), "deferrals", q.c.Life.AllDeferrals(),
		"input_tokens_est", in, "max_output_tokens", q.c.Core.Output, "duration", g.clk.model(time.Since(arrived)))
}

// run carries out what the request engine decides for q, from its arrival
// (stepped by the caller) to its answer: the ladder's verdict, offers,
// attempts and the answer to the client. It returns the outcome and the
// status sent (0: none).
func (g *Gateway) run(ctx context.Context, w http.ResponseWriter, q *request) (string, int) {
	for {
		n, ok := g.next(ctx, q)
		if !ok {
			return ctxOutcome(ctx), ctxStatus(ctx, w, q)
		}
		switch n.kind {
		case noteJudged:
			g.judged(q, n.judged)
		case noteOffer:
			if o := n.offer; o.Next.Action == sched.Reoffer && !o.Next.Retry {
				g.metrics.deferrals.WithLabelValues(q.tenant, q.class, o.Next.Reason).Inc()
			}
		case noteReoffer:
			if n.retry {
				g.metrics.retries.WithLabelValues(q.tenant, q.class).Inc()
			}
		case noteStart:
			if res, outcome, status := g.forward(ctx, w, q, n.replica); res != resRetry {
				if res == resCancelled {
					return ctxOutcome(ctx), ctxStatus(ctx, w, q)
				}
				return outcome, status
			}
		case noteCancel:
			q.cancelLeg(g.metrics, n.cancel) // a failed attempt took its duplicate with it
		case noteAnswer:
			return g.answer(w, q, n.answer)
		}
	}
}

// answer writes the outcome the engine decided for q, other than an
// attempt's answer (which forward passed through).
func (g *Gateway) answer(w http.ResponseWriter, q *request, a reqengine.Answer) (string, int) {
	switch a.Outcome {
	case reqengine.Refused:
		switch a.Reason {
		case sched.ReasonNoRoute:
			// Too large for every pool that may serve it: the client's to
			// fix (a retry cannot help), as OpenAI's
			// context_length_exceeded. Any other reason (residency, no
			// pool serving the model) is the fleet's.
			g.mu.Lock()
			limit, ok := g.core.TooLarge(&q.c.Core)
			g.mu.Unlock()
			if ok {
				return outRejected, q.fail(w, outRejected, a.Reason, q.tooLong(limit, g.be.fromServer(q.c.Core.Model, limit)))
			}
			return outRejected, q.fail(w, outRejected, a.Reason,
				apiError{http.StatusServiceUnavailable, typeServer, "no_route", "", "no pool may serve this request"})
		case sched.ReasonUnavailable:
			// Every pool that may serve it is down: the fleet's outage,
			// not the client's rate; back after Retry-After.
			setRetryAfter(w, a.RetryAfter)
			return outRejected, q.fail(w, outRejected, a.Reason,
				apiError{http.StatusServiceUnavailable, typeServer, "jurisdiction_unavailable", "",
					"request refused: " + a.Reason + ": every pool that may serve it is down"})
		case sched.ReasonUpstreamQuota:
			setRetryAfter(w, a.RetryAfter)
			return outRejected, q.fail(w, outRejected, a.Reason, rateLimited(a.Reason, "upstream quota exhausted"))
		}
		setRetryAfter(w, a.RetryAfter)
		return outRejected, q.fail(w, outRejected, a.Reason, rateLimited(a.Reason, "request refused: "+a.Reason))
	case reqengine.QueueTimedOut:
		// An expiry in the queue: a canary request's tells its rollout.
		g.mu.Lock()
		onCanary := q.c.Core.Route > 0
		g.mu.Unlock()
		if onCanary {
			g.attemptEnded(q, -1, false)
		}
		setRetryAfter(w, time.Second)
		return outTimedOut, q.fail(w, outTimedOut, "",
			apiError{http.StatusServiceUnavailable, typeServer, "queue_timeout", "", "no replica became free in time"})
	}
	return outFailed, q.fail(w, outFailed, "", apiError{http.StatusBadGateway, typeServer, "upstream_error", "", q.lastMsg})
}

// tooLong is the 400 context_length_exceeded of a request larger than
// limit tokens, the most a replica that may serve it takes: its KV cache
// as the scenario gives it, or its server's own limit (server: a
// max_model_len below it, read at start; Backends.Check). Its param is the
// prompt's field when the prompt alone is too long, else the output's.
func (q *request) tooLong(limit int64, server bool) apiError {
	in, out := q.c.Core.Input, q.c.Core.Output
	param := q.outParam
	if int64(in) > limit {
		param = q.inParam
	}
	what := fmt.Sprintf("more than a replica that may serve it holds (%d tokens of KV cache at most)", limit)
	if server {
		what = fmt.Sprintf("more than the servers that may serve it take: their maximum context length is %d tokens", limit)
	}
	return apiError{http.StatusBadRequest, typeInvalid, "context_length_exceeded", param,
		fmt.Sprintf("the request needs about %d tokens (%d estimated in the %s, %d in the completion), %s: reduce the %s",
			in+out, in, q.inParam, out, what, param)}
}

// ctxOutcome classifies a done context: the class deadline, or the client
// gone.
func ctxOutcome(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return outTimedOut
	}
	return outCancelled
}

// ctxStatus answers a request whose context is done: 504 when its deadline
// passed; nothing when the client went away.
func ctxStatus(ctx context.Context, w http.ResponseWriter, q *request) int {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return q.fail(w, outTimedOut, "", errDeadline)
	}
	return 0 // nobody is listening
}

// upstream is one attempt's call to a replica, up to the first bytes of
// its answer: what a hedge race is decided on (the twin's first token).
type upstream struct {
	rep     int
	hedge   bool // the hedged duplicate (see Core.Hedge)
	resp    *http.Response
	err     error     // transport error or no headers in time: resp is nil
	first   []byte    // the answer's first bytes, read (a slice of *bp)
	firstAt time.Time // when they came
	eof     bool      // the answer ended within first
	readErr error     // the answer broke before its first bytes
	bp      *[]byte   // the pooled buffer holding first
	cancel  context.CancelFunc
}

// answered reports whether u is an answer to pass to the client: headers
// that are neither a 5xx nor a 429, and a first read that did not break.
func (u *upstream) answered() bool {
	return u.err == nil && !upstreamFailed(u.resp.StatusCode) && u.resp.StatusCode != http.StatusTooManyRequests && u.readErr == nil
}

// upstreamFailed reports whether an upstream status is the backend's
// failure rather than an answer for the client: a 5xx, or a 401 or 403 — the
// backend refused the gateway's own key (Config.BackendKey; the client's
// never goes upstream), which the client must not read as its key being
// wrong.
func upstreamFailed(status int) bool {
	return status >= 500 || status == http.StatusUnauthorized || status == http.StatusForbidden
}

// reasonUpstreamInvalid is the reason of a request its backend refused as
// the request's own fault (clientFault), passed through to the client.
const reasonUpstreamInvalid = "upstream-invalid-request"

// clientFault reports whether a backend's status is the request's own
// fault, for the client to fix: a 4xx other than 401 and 403 (the
// gateway's backend key: upstreamFailed), 404 (a model the backend no
// longer serves: the fleet's, which a retry elsewhere may serve), 408 (the
// server timed out) and 429 (a quota). vLLM answers 400 for a prompt
// longer than its max_model_len, 413 and 422 for a body it cannot take.
// It goes through to the client as it came; no breaker counts it, no
// attempt is retried for it (a retry would be refused alike).
func clientFault(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusRequestTimeout,
		http.StatusTooManyRequests:
		return false
	}
	return status >= 400 && status < 500
}

// close releases what u holds: its context, its body, its buffer.
func (u *upstream) close() {
	u.cancel()
	if u.resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(u.resp.Body, 1<<16))
		u.resp.Body.Close()
	}
	if u.bp != nil {
		bufPool.Put(u.bp)
		u.bp = nil
	}
}

// call sends body to replica rep and waits for its headers (within the
// health timeout) and, for an answer, its first bytes. It does not touch
// the core: the caller, holding the request, decides what the result means.
func (g *Gateway) call(ctx context.Context, q *request, rep int, body []byte, hedge bool) *upstream {
	actx, cancel := context.WithCancel(ctx)
	u := &upstream{rep: rep, hedge: hedge, cancel: cancel}
	up, err := http.NewRequestWithContext(actx, http.MethodPost, g.replicas[rep].url+q.path, bytes.NewReader(g.replicas[rep].kind.adapt(body)))
	if err != nil {
		u.err = err
		return u
	}
	up.Header.Set("Content-Type", "application/json")
	// Every attempt of a request, retries and hedges, carries its key, so
	// an upstream that deduplicates can.
	up.Header.Set("Idempotency-Key", q.c.Life.Key)
	// The class, a scenario name, lets an emulated node label its latency
	// series as the gateway does.
	up.Header.Set("X-Fleetdrill-Class", q.class)
	if q.stream {
		up.Header.Set("Accept", "text/event-stream")
	}
	// A stream's headers come at once, before any token: none within the
	// health timeout means the backend is unresponsive (the twin's
	// policy.health.timeout). A non-streamed answer's headers come with
	// the whole answer, as late as a healthy long generation takes: its
	// wait is bounded by the class deadline, and the backend's health is
	// judged by probes, connection errors and 5xx, not by the length of a
	// healthy answer.
	var headerTimer *time.Timer
	if q.stream {
		headerTimer = time.AfterFunc(g.clk.wall(g.sc.Policy.Health.Timeout.D()), cancel)
	}
	resp, err := g.faults.send(up, q, rep) // through the fault layer (faultlayer.go)
	if headerTimer != nil {
		headerTimer.Stop()
	}
	if err != nil {
		u.err = err
		return u
	}
	u.resp = resp
	if upstreamFailed(resp.StatusCode) || resp.StatusCode == http.StatusTooManyRequests {
		return u
	}
	// The first bytes. Their wait is not bounded here: the request may
	// queue in the engine (the class deadline bounds it).
	u.bp = bufPool.Get().(*[]byte)
	buf := *u.bp
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			u.first, u.firstAt = buf[:n], time.Now()
			u.eof = err == io.EOF
			if q.stream && errorEvent(u.first) {
				// The upstream failed before its first token (a server
				// stopping fails its streams so): nothing reached the
				// client, and the attempt may be retried.
				u.readErr = errUpstreamEvent
			}
			return u
		}
		if err == io.EOF {
			u.eof, u.firstAt = true, time.Now()
			return u
		}
		if err != nil {
			u.readErr = err
			return u
		}
	}
}

// race runs one attempt of q on replica rep until its first bytes, and
// the duplicate the request engine sends when the route hedges
// (policy.routing.hedge_after) and no answer has come after that long.
// When to hedge and how the race ends are the engine's (Engine.Step:
// FirstToken settles it, the first to answer wins; a failed duplicate
// goes alone; a failed first attempt takes its duplicate with it when its
// failure is stepped): race steps what each attempt's first result was and
// cancels what the engine cancels. It returns the attempt that answered,
// or the first attempt's failure.
//
// dupBody is the duplicate's body: a disaggregated request's duplicate
// prefills its prompt on its own replica, as the twin's does, so it
// carries no kv_transfer_params.
func (g *Gateway) race(ctx context.Context, q *request, rep int, body, dupBody []byte) *upstream {
	if g.sc.Policy.Routing.HedgeAfter.D() <= 0 {
		// No duplicate can come (so no first token decides anything:
		// Req.HedgePending): the attempt runs on the handler's own
		// goroutine, as a hand-off per request is latency at the tail.
		return g.call(ctx, q, rep, body, false)
	}
	results := make(chan *upstream, 2)
	q.start(ctx, results, reqengine.FirstLeg, func(c context.Context) *upstream { return g.call(c, q, rep, body, false) })
	pending := 1
	for {
		select {
		case u := <-results:
			pending--
			if !u.answered() && u.hedge {
				// The duplicate failed; the first attempt goes on. The
				// core hears of it as of any attempt (a 429 throttles
				// its pool), unless its client went away.
				u.close()
				if ctx.Err() == nil {
					g.duplicateFailed(q, u)
				}
				continue
			}
			if u.answered() {
				g.step(reqengine.Event{Kind: reqengine.FirstToken, Req: &q.c.Req, Duplicate: u.hedge})
				g.carryOut(q)
			}
			// The loser's result, if one runs, is read and closed: it
			// was cancelled (carryOut), or is when the failure of this
			// one is stepped.
			for range pending {
				go func() { (<-results).close() }()
			}
			return u
		case <-q.c.wake:
			if h, ok := g.carryOut(q); ok && pending == 1 {
				g.metrics.hedges.WithLabelValues("sent").Inc()
				pending++
				q.start(ctx, results, reqengine.Duplicate, func(c context.Context) *upstream { return g.call(c, q, h, dupBody, true) })
			}
		}
	}
}

// start runs leg of q's attempt in a goroutine, under a context its
// cancellation (Ready.Cancels) ends, and sends its result to results.
func (q *request) start(ctx context.Context, results chan<- *upstream, leg reqengine.Leg, call func(context.Context) *upstream) {
	lctx, cancel := context.WithCancel(ctx)
	q.legs[leg] = cancel
	go func() { results <- call(lctx) }()
}

// carryOut takes the engine's decisions posted to q during its attempt —
// a duplicate to send (returned), an attempt to cancel — and carries out
// the cancellations. Anything else waits for run.
func (g *Gateway) carryOut(q *request) (hedge int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rest := q.c.notes[:0]
	for _, n := range q.c.notes {
		switch n.kind {
		case noteHedge:
			hedge, ok = n.replica, true
		case noteCancel:
			q.cancelLeg(g.metrics, n.cancel)
		default:
			rest = append(rest, n)
		}
	}
	clear(q.c.notes[len(rest):])
	q.c.notes = rest
	return hedge, ok
}

// cancelLeg cancels the attempt the engine cancelled (a hedge race's
// loser), counting a duplicate that won.
func (q *request) cancelLeg(m *metrics, c reqengine.Cancel) {
	if c.Won {
		m.hedges.WithLabelValues("won").Inc()
	}
	if cancel := q.legs[c.Leg]; cancel != nil {
		cancel()
		q.legs[c.Leg] = nil
	}
}

// duplicateFailed reports q's duplicate u, which failed, to the engine: a
// 429 throttles its pool (the core hears of it as of any attempt's), an
// error counts against its replica's breaker.
func (g *Gateway) duplicateFailed(q *request, u *upstream) {
	pool := g.replicas[u.rep].pool
	how, retryAfter := sched.AttemptError, time.Duration(0)
	if u.resp != nil && u.resp.StatusCode == http.StatusTooManyRequests {
		how, retryAfter = sched.AttemptThrottled, g.clk.parseRetryAfter(u.resp.Header.Get("Retry-After"))
		g.metrics.attempts.WithLabelValues(pool, "throttled").Inc()
		g.throttle(u.rep, retryAfter)
	} else {
		g.metrics.attempts.WithLabelValues(pool, "error").Inc()
	}
	g.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &q.c.Req, Replica: u.rep, How: how, RetryAfter: retryAfter,
		Duplicate: true, Observed: true})
}

// forward runs one attempt of q on replica rep (and its hedged duplicate)
// and, unless it failed in a way worth retrying, answers the client. It
// always tells the core the attempt ended.
func (g *Gateway) forward(ctx context.Context, w http.ResponseWriter, q *request, rep int) (result, string, int) {
	q.served = g.sc.Models[q.c.Core.Served].Name
	g.metrics.routes.WithLabelValues(q.model, q.served).Inc()
	body := q.body
	if q.c.Core.Served != q.c.Core.Model {
		q.fellBack = true
		body = withModel(body, q.served)
	}
	// A disaggregated request's prompt is prefilled first, where the
	// engine chose (prefill.go).
	p := -1
	if g.disagg {
		g.mu.Lock()
		p = q.c.Core.Prefilling()
		g.mu.Unlock()
	}
	first := body
	if p >= 0 {
		kv, res := g.prefill(ctx, q, p, body)
		if res != resDone {
			return res, "", 0
		}
		first = withKVParams(body, kv)
	}
	// What the backend's kind does not take is left out (Kind.adapt); a
	// hedge goes to a replica of the same pool kind or another: adapted
	// per call.
	u := g.race(ctx, q, rep, first, body)
	defer u.close()
	rep = u.rep // a hedge may have won
	be := &g.replicas[rep]
	q.pool, q.region = be.pool, be.region
	if u.err != nil || u.readErr != nil {
		if ctx.Err() != nil {
			g.metrics.attempts.WithLabelValues(be.pool, "cancelled").Inc()
			g.cancelledAttempt(ctx, q, rep)
			g.gone(ctx, q)
			return resCancelled, "", 0
		}
		g.metrics.attempts.WithLabelValues(be.pool, "error").Inc()
		g.report.attemptFailed(rep, 0, true)
		g.attemptEnded(q, rep, false)
		q.lastStatus, q.lastRetry, q.lastMsg = 0, 0, "upstream unreachable or unresponsive"
		g.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &q.c.Req, Replica: rep, How: sched.AttemptError, Observed: true})
		return resRetry, "", 0
	}
	resp := u.resp
	switch {
	case upstreamFailed(resp.StatusCode):
		g.metrics.attempts.WithLabelValues(be.pool, "error").Inc()
		g.report.attemptFailed(rep, resp.StatusCode, true)
		g.attemptEnded(q, rep, false)
		q.lastStatus, q.lastRetry = resp.StatusCode, 0
		q.lastMsg = fmt.Sprintf("upstream answered %d", resp.StatusCode)
		if resp.StatusCode < 500 {
			q.lastStatus = http.StatusBadGateway
			q.lastMsg = fmt.Sprintf("upstream refused the gateway's credentials (%d): check its backend key", resp.StatusCode)
			g.log.Warn("backend refused the gateway's key", "pool", be.pool, "replica", rep, "status", resp.StatusCode)
		}
		g.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &q.c.Req, Replica: rep, How: sched.AttemptError, Observed: true})
		return resRetry, "", 0
	case resp.StatusCode == http.StatusTooManyRequests:
		g.metrics.attempts.WithLabelValues(be.pool, "throttled").Inc()
		g.metrics.throttled.WithLabelValues(be.pool, be.region).Inc()
		g.report.attemptFailed(rep, resp.StatusCode, false)
		q.lastStatus, q.lastRetry = resp.StatusCode, g.clk.parseRetryAfter(resp.Header.Get("Retry-After"))
		q.lastMsg = "upstream quota exhausted"
		// Quota, not ill health: the breaker is left alone, and the core
		// keeps the pool out of routing for the Retry-After
		// (Core.Throttled).
		g.throttle(rep, q.lastRetry)
		g.attemptEnded(q, rep, false)
		g.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &q.c.Req, Replica: rep, How: sched.AttemptThrottled,
			RetryAfter: q.lastRetry, Observed: true})
		return resRetry, "", 0
	}

	// The backend answered: pass it through, saying where it was served
	// (scenario names only), so a drill can check routing from the client
	// side and a fallback is visible.
	h := w.Header()
	for _, k := range []string{"Content-Type", "Cache-Control", "X-Request-Id", "Openai-Processing-Ms"} {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set("X-Fleetdrill-Pool", be.pool)
	h.Set("X-Fleetdrill-Replica", strconv.Itoa(rep))
	h.Set("X-Fleetdrill-Model", g.sc.Models[q.c.Core.Served].Name)
	if u.hedge {
		h.Set(hdrHedged, "won")
	}
	outcome, reason := outFailed, ""
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		outcome = outCompleted
	case clientFault(resp.StatusCode):
		// The request's own fault, in the server's words (its body goes
		// through as it came): a refusal, not a failure of the backend.
		outcome, reason = outRejected, reasonUpstreamInvalid
		q.reason = reason
	}
	q.setHeaders(w, outcome, reason)
	h.Set(hdrQueueWait, strconv.FormatFloat((q.c.dispatched-q.c.Core.Arrived).Seconds(), 'f', -1, 64))
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }() // the connection may serve another request
	// Output events of a streamed success, for the time to first token
	// and per output token.
	var meter *streamMeter
	if q.stream && outcome == outCompleted {
		meter = &streamMeter{}
	}
	// What the answer says it used, for the tenant's bucket (quota.go).
	var usage *usageScanner
	if outcome == outCompleted {
		usage = &usageScanner{events: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
	}
	var readErr, writeErr error
	var sawDone, upstreamErr bool
	// Once tokens flow, a backend silent for the health timeout has died
	// under the stream (a black-holed route answers nothing and closes
	// nothing): the attempt fails rather than hanging to the deadline.
	stall := g.clk.wall(g.sc.Policy.Health.Timeout.D())
	stallTimer := time.AfterFunc(time.Hour, u.cancel)
	stallTimer.Stop()
	defer stallTimer.Stop()
	// The answer's first bytes are here: the request waits no more for
	// its first token (waiting.go).
	g.first.done(q.c.Core.ID)
	chunk, at, eof := u.first, u.firstAt, u.eof
	if len(chunk) > 0 {
		q.ttft = g.clk.model(at.Sub(q.arrived))
		g.metrics.firstByte.WithLabelValues(q.tenant, q.class).Observe(q.ttft.Seconds())
	}
	buf := *u.bp
	var done doneMarker
	for {
		if len(chunk) > 0 {
			if meter != nil {
				meter.feed(chunk, at)
			}
			_ = rc.SetWriteDeadline(time.Now().Add(g.cfg.StreamWriteTimeout)) // per write: a long stream is not cut, a stalled client is
			if usage != nil {
				usage.feed(chunk)
			}
			if _, writeErr = w.Write(chunk); writeErr != nil {
				break
			}
			if q.stream {
				if writeErr = rc.Flush(); writeErr != nil {
					break
				}
				// The stream's last event is out: the answer is whole
				// and the attempt over. Waiting for the backend's end
				// of stream as well would race the client, who may
				// close at [DONE], and count a whole answer cancelled.
				if done.seen(chunk) {
					eof, sawDone = true, true
				}
				if errorEvent(chunk) {
					// Forwarded: the client reads the upstream's own
					// error; the attempt failed.
					upstreamErr = true
				}
			}
		}
		if eof {
			break
		}
		stallTimer.Reset(stall)
		n, err := resp.Body.Read(buf)
		chunk, at = buf[:n], time.Now()
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			eof = true
		}
	}
	// A stream cut midway ends with an error event (endStream).
	events := q.stream && outcome == outCompleted && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if events && readErr == nil && writeErr == nil && ctx.Err() == nil {
		// An OpenAI-compatible stream ends with [DONE]; one that carried
		// the upstream's error event, or stopped short of [DONE], is a
		// failed attempt however cleanly its connection closed (a node
		// stopping fails its streams with an error event).
		switch {
		case upstreamErr:
			readErr = errUpstreamEvent
		case !sawDone:
			readErr = errNoDone
		}
	}
	switch {
	case ctx.Err() != nil || writeErr != nil:
		// The client went away (or its deadline passed) mid-response.
		u.cancel()
		g.metrics.attempts.WithLabelValues(be.pool, "cancelled").Inc()
		g.cancelledAttempt(ctx, q, rep)
		g.gone(ctx, q)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			if events && writeErr == nil {
				endStream(w, errDeadline)
			}
			return resDone, outTimedOut, resp.StatusCode
		}
		return resDone, outCancelled, resp.StatusCode
	case readErr != nil:
		if events && !errors.Is(readErr, errUpstreamEvent) {
			endStream(w, errStreamBroken)
		}
		g.metrics.attempts.WithLabelValues(be.pool, "error").Inc()
		g.report.attemptFailed(rep, 0, true)
		g.attemptEnded(q, rep, false)
		// The answer's first bytes reached the client: the lifecycle
		// gives a cut stream up (sched.AttemptCut), in the twin too.
		g.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &q.c.Req, Replica: rep, How: sched.AttemptCut, Observed: true})
		return resDone, outFailed, resp.StatusCode
	}
	g.metrics.attempts.WithLabelValues(be.pool, "ok").Inc()
	if outcome == outFailed {
		g.report.attemptFailed(rep, resp.StatusCode, false)
	}
	if meter != nil {
		g.metrics.streamed(q, meter)
	}
	if usage != nil {
		g.reconcile(&q.c, usage)
	}
	if outcome != outRejected {
		// A request the server refused as malformed or too long says
		// nothing of a canary's candidate: no rollout hears of it.
		g.attemptEnded(q, rep, outcome == outCompleted)
	}
	var lat time.Duration // the replica's own: dispatch to first token
	if q.ttft > 0 {
		lat = q.ttft - (q.c.dispatched - q.c.Core.Arrived)
	}
	g.step(reqengine.Event{Kind: reqengine.Answered, Req: &q.c.Req, Replica: rep, Observed: true, Latency: lat})
	return resDone, outcome, resp.StatusCode
}

// doneMarker finds a stream's "data: [DONE]" in its chunks, the marker
// split between two chunks included.
// It copies no chunk: only the few bytes a split marker can span, in a
// fixed buffer (a stream's every chunk passes here).
type doneMarker struct {
	buf  [2 * len(doneEvent)]byte
	tail int // the last bytes seen, at most len(doneEvent)-1, in buf
}

const doneEvent = "data: [DONE]"

func (d *doneMarker) seen(chunk []byte) bool {
	if bytes.Contains(chunk, []byte(doneEvent)) {
		return true
	}
	// A marker split across chunks: the tail before, the head of this.
	n := d.tail + copy(d.buf[d.tail:], chunk[:min(len(chunk), len(doneEvent)-1)])
	if bytes.Contains(d.buf[:n], []byte(doneEvent)) {
		return true
	}
	// Keep the last len(doneEvent)-1 bytes of all seen so far.
	keep := min(n, len(doneEvent)-1)
	if len(chunk) >= keep {
		copy(d.buf[:], chunk[len(chunk)-keep:])
	} else {
		copy(d.buf[:], d.buf[n-keep:n])
	}
	d.tail = keep
	return false
}

// errUpstreamEvent: the upstream's stream carried its own error event;
// errNoDone: it ended without [DONE].
var (
	errUpstreamEvent = errors.New("gateway: the upstream ended its stream with an error event")
	errNoDone        = errors.New("gateway: the upstream's stream ended without [DONE]")
)

// errorEvent reports whether chunk holds a server-sent event whose data is
// an error: {"error": ...} (OpenAI, vLLM since 0.10.1, SGLang) or
// {"object": "error", ...} (vLLM before it). A token's text cannot match:
// inside a JSON string its quotes are escaped.
func errorEvent(chunk []byte) bool {
	for rest := chunk; ; {
		i := bytes.Index(rest, []byte("data:"))
		if i < 0 {
			return false
		}
		rest = bytes.TrimLeft(rest[i+len("data:"):], " ")
		if bytes.HasPrefix(rest, []byte(`{"error"`)) || bytes.HasPrefix(rest, []byte(`{"object":"error"`)) ||
			bytes.HasPrefix(rest, []byte(`{"object": "error"`)) {
			return true
		}
	}
}

// errStreamBroken ends a stream whose backend broke under it (or went
// silent for the health timeout).
var errStreamBroken = apiError{http.StatusBadGateway, typeServer, "upstream_error", "",
	"the upstream broke off the stream before it finished"}

// endStream ends a streamed answer that failed midway with an error event,
// data: {"error": {...}}, and no [DONE]. openai-go ends a stream with an
// error on an event whose data has an "error" member (Stream.Err is an
// *ssestream.StreamError); a stream that just stops, with or without
// [DONE], reads there as a short answer. The leading newline closes
// a line the upstream left open (an event it cut midway reaches the
// client broken, an error too); after a whole event it is an empty line,
// which SSE ignores.
func endStream(w http.ResponseWriter, e apiError) {
	b := append([]byte("\ndata: "), e.body()...)
	b = append(b, "\n\n"...)
	if _, err := w.Write(b); err == nil {
		_ = http.NewResponseController(w).Flush()
	}
}

// withModel returns body with its "model" replaced (a fallback).
func withModel(body []byte, model string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body
	}
	b, _ := json.Marshal(model)
	m["model"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// parseRetryAfter reads an upstream Retry-After header as model time: in
// seconds, which a node running at the gateway's speed gives in model
// seconds; an HTTP date is a wall-clock instant, converted. 0 when absent or
// unreadable.
func (c clock) parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s <= math.MaxInt64/float64(time.Second) {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return c.model(max(time.Until(t), 0))
	}
	return 0
}
