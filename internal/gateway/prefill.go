package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/fleetdrill/fleetdrill/twin/reqengine"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// The prefill leg of a disaggregated request (issue 34), as llm-d's
// routing sidecar carries it out: the request engine dispatched the
// request to a decode replica and chose where its prompt is prefilled
// (sched.Request.Prefilling); the gateway first sends the prompt to that
// prefill replica with max_tokens 1, no stream and vLLM's
// kv_transfer_params {"do_remote_decode": true}, then the whole request to
// the decode replica with the kv_transfer_params the prefill answered
// (where to pull the KV cache from). The engine hears that the prefill is
// over (reqengine.Prefilled), or that it failed on the prefill replica
// (AttemptFailed there: its breaker counts it, the lifecycle retries).
// What happens on the link is the decode server's: it pulls, and answers
// by its kv_load_failure_policy when the pull fails.

// maxPrefillAnswer bounds a prefill's answer: one token and its params.
const maxPrefillAnswer = 1 << 20

// prefillBody is body as the prefill leg sends it.
func prefillBody(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	one := json.RawMessage("1")
	m["max_tokens"] = one
	if _, ok := m["max_completion_tokens"]; ok {
		m["max_completion_tokens"] = one
	}
	// A fleetdrill output length names the answer's; the prefill's is one
	// token.
	if x, ok := m["x_fleetdrill"]; ok {
		var xm map[string]json.RawMessage
		if json.Unmarshal(x, &xm) == nil {
			delete(xm, "output_tokens")
			m["x_fleetdrill"], _ = json.Marshal(xm)
		}
	}
	delete(m, "min_tokens")
	delete(m, "stream_options")
	m["stream"] = json.RawMessage("false")
	m["kv_transfer_params"] = json.RawMessage(`{"do_remote_decode":true,"do_remote_prefill":false}`)
	return json.Marshal(m)
}

// withKVParams is body with the prefill's kv_transfer_params.
func withKVParams(body []byte, kv json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return body
	}
	m["kv_transfer_params"] = kv
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// prefill runs q's prefill leg on replica p. It returns the
// kv_transfer_params the decode leg carries and resDone; or, having told
// the engine, resRetry (the attempt failed on p) or resCancelled (the
// client went away or its deadline passed).
func (g *Gateway) prefill(ctx context.Context, q *request, p int, body []byte) (json.RawMessage, result) {
	be := &g.replicas[p]
	fail := func(status int, msg string, how sched.Attempt, retryAfter time.Duration) (json.RawMessage, result) {
		if ctx.Err() != nil {
			g.metrics.attempts.WithLabelValues(be.pool, "cancelled").Inc()
			g.cancelledAttempt(ctx, q, p)
			g.gone(ctx, q)
			return nil, resCancelled
		}
		outcome := "error"
		if how == sched.AttemptThrottled {
			outcome = "throttled"
			g.throttle(p, retryAfter)
		}
		g.metrics.attempts.WithLabelValues(be.pool, outcome).Inc()
		g.report.attemptFailed(p, status, how != sched.AttemptThrottled)
		q.lastStatus, q.lastRetry, q.lastMsg = status, retryAfter, msg
		if status == 0 || status < 500 && status != http.StatusTooManyRequests {
			q.lastStatus = http.StatusBadGateway
		}
		g.step(reqengine.Event{Kind: reqengine.AttemptFailed, Req: &q.c.Req, Replica: p, How: how, RetryAfter: retryAfter, Observed: true})
		return nil, resRetry
	}
	pb, err := prefillBody(body)
	if err != nil {
		return fail(0, "the request body could not be rewritten for its prefill leg: "+err.Error(), sched.AttemptError, 0)
	}
	// A prefill answers once its one token is out; its wait is bounded by
	// the class deadline (ctx), as a non-streamed answer's.
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, be.url+q.path, bytes.NewReader(be.kind.adapt(pb)))
	if err != nil {
		return fail(0, err.Error(), sched.AttemptError, 0)
	}
	up.Header.Set("Content-Type", "application/json")
	up.Header.Set("Idempotency-Key", q.c.Life.Key)
	up.Header.Set("X-Fleetdrill-Class", q.class)
	resp, err := g.faults.send(up, q, p)
	if err != nil {
		return fail(0, "prefill replica unreachable or unresponsive", sched.AttemptError, 0)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		ra := g.clk.parseRetryAfter(resp.Header.Get("Retry-After"))
		return fail(resp.StatusCode, "prefill replica's quota exhausted", sched.AttemptThrottled, ra)
	case resp.StatusCode != http.StatusOK:
		return fail(resp.StatusCode, fmt.Sprintf("prefill replica answered %d", resp.StatusCode), sched.AttemptError, 0)
	}
	var ans struct {
		KV json.RawMessage `json:"kv_transfer_params"`
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPrefillAnswer))
	if err == nil {
		err = json.Unmarshal(b, &ans)
	}
	if err == nil && (len(ans.KV) == 0 || string(ans.KV) == "null") {
		err = errors.New("its answer carries no kv_transfer_params: is it a prefill instance (vLLM's --kv-transfer-config with a P/D connector)?")
	}
	if err != nil {
		return fail(0, "prefill replica's answer: "+err.Error(), sched.AttemptError, 0)
	}
	g.metrics.attempts.WithLabelValues(be.pool, "ok").Inc()
	g.step(reqengine.Event{Kind: reqengine.Prefilled, Req: &q.c.Req, Replica: p})
	return ans.KV, resDone
}
