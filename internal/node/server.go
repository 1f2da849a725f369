package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetdrill/fleetdrill/twin/engine"
)

// Headers a client may use instead of the x_fleetdrill body field.
const (
	HeaderInputTokens  = "X-Fleetdrill-Input-Tokens"
	HeaderOutputTokens = "X-Fleetdrill-Output-Tokens"
	// HeaderClass names the request's scenario class (the gateway
	// forwards it); it only labels the node's latency series.
	HeaderClass = "X-Fleetdrill-Class"
)

// Handler returns the node's OpenAI-compatible API, its health checks and
// (when Config.Gatherer is set) /metrics. Every flavor serves vLLM's
// /health; only the fleetdrill flavor serves /healthz (vLLM answers it
// 404). With Config.APIKey, the /v1 paths need it (requireAPIKey).
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { n.serveCompletion(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { n.serveCompletion(w, r, false) })
	mux.HandleFunc("GET /v1/models", n.serveModels)
	mux.HandleFunc("GET "+kvPath+"{id}", n.serveKV)
	mux.HandleFunc("DELETE "+kvPath+"{id}", n.serveKVDone)
	mux.HandleFunc("GET /health", n.serveVLLMHealth)
	if !n.cfg.Flavor.vllm() {
		mux.HandleFunc("GET /healthz", n.serveHealth)
	}
	if n.cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(n.cfg.Gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	}
	if n.cfg.APIKey != "" {
		return requireAPIKey(n.cfg.APIKey, n.cfg.Flavor, n.metrics.refused.WithLabelValues(refuseUnauthorized).Inc, mux)
	}
	return mux
}

func (n *Node) serveHealth(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-n.stopped:
		http.Error(w, "stopped", http.StatusServiceUnavailable)
	default:
		io.WriteString(w, "ok\n")
	}
}

// serveVLLMHealth is vLLM's /health: 200 with an empty body, 503 once the
// engine is gone.
func (n *Node) serveVLLMHealth(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-n.stopped:
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// servable returns why model cannot be served now, or a failure of status
// 0.
func (n *Node) servable(model string, f *Faults) failure {
	if n.byName[model] == nil || slices.Contains(f.Retired, model) {
		return failure{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found",
			msg:     fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model),
			vllmMsg: fmt.Sprintf("The model `%s` does not exist.", model), param: "model"}
	}
	if err := n.cfg.Compat(model, f.Driver); err != nil {
		return failure{status: http.StatusServiceUnavailable, typ: "server_error", code: "model_incompatible",
			msg: fmt.Sprintf("model %s cannot run on this node: %v", model, err)}
	}
	return failure{}
}

func (n *Node) serveModels(w http.ResponseWriter, _ *http.Request) {
	f := n.Faults()
	var ids []string
	for _, m := range n.cfg.Models {
		if n.servable(m.Name, &f).status == 0 {
			ids = append(ids, m.Name)
		}
	}
	writeJSON(w, http.StatusOK, n.modelList(ids)) // maxlen.go
}

// apiError writes an OpenAI-style error body (the admin API's, in every
// flavor).
func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, FlavorFleetdrill.body(&failure{status: status, typ: typ, code: code, msg: msg}))
}

// fail writes f's body in the node's flavor.
func (n *Node) fail(w http.ResponseWriter, f *failure) {
	writeJSON(w, f.status, n.cfg.Flavor.body(f))
}

// nodeStopped is the failure of a request the node stopped before its end.
var nodeStopped = failure{status: http.StatusServiceUnavailable, typ: "server_error", code: "shutting_down",
	msg: "the node stopped before the sequence finished"}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// outcome is what the request log line and the metrics record.
type outcome struct {
	endpoint       string
	model          string // a served model's name, or "" (never a name the client made up)
	class          string // a Config.Classes name, or "unknown" (never a name the client made up)
	code           int
	prompt, output int
	written        int
	ttft, e2e      time.Duration
	stream         bool
	cancelled      bool
}

func (n *Node) finish(o *outcome) {
	n.metrics.request(o.endpoint, o.code)
	if o.model != "" && o.code == http.StatusOK {
		n.metrics.observe(o)
		if o.cancelled {
			n.metrics.cancelled.WithLabelValues(o.model).Inc()
		}
	}
	// NB: never log the prompt, the request body, or a model name the
	// node does not serve (the client chose it).
	n.cfg.Logger.Info("request", "endpoint", o.endpoint, "model", o.model, "code", o.code, "stream", o.stream,
		"prompt_tokens", o.prompt, "completion_tokens", o.written, "requested_tokens", o.output,
		"ttft", o.ttft, "e2e", o.e2e, "cancelled", o.cancelled)
}

func (n *Node) serveCompletion(w http.ResponseWriter, r *http.Request, chat bool) {
	start := time.Now()
	o := outcome{endpoint: "completions", class: classUnknown}
	if c := r.Header.Get(HeaderClass); n.classes[c] {
		o.class = c
	}
	if chat {
		o.endpoint = "chat"
	}
	defer n.finish(&o)
	fail := func(f failure) {
		o.code = f.status
		n.fail(w, &f)
	}

	body, release, err := n.body.Read(w, r)
	if err != nil {
		n.refuseBody(w, err, fail)
		return
	}
	p, br := parseRequest(body, r.Header, chat, n.cfg.DefaultMaxTokens, n.cfg.Flavor.vllm(), n.cfg.Models[0].Name)
	// Counted: the body is not held while the sequence runs (nothing
	// parsed refers to it), so its bytes leave the budget now.
	release()
	if br != nil {
		n.metrics.refused.WithLabelValues(br.reason).Inc()
		fail(failure{status: http.StatusBadRequest, typ: "invalid_request_error", code: br.code, msg: br.msg, param: br.param})
		return
	}
	req, in, out := &p.req, p.in, p.out
	o.prompt, o.output, o.stream = in, out, req.Stream

	f := n.Faults()
	if sf := n.servable(req.Model, &f); sf.status != 0 {
		if sf.status == http.StatusNotFound {
			n.metrics.refused.WithLabelValues(refuseModel).Inc()
		}
		fail(sf)
		return
	}
	rep := n.byName[req.Model]
	o.model = rep.model.Name
	if f.QuotaExhausted {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfterSeconds))
		fail(failure{status: http.StatusTooManyRequests, typ: "insufficient_quota", code: "insufficient_quota",
			msg: "You exceeded your current quota (injected fault); retry after " + strconv.Itoa(f.RetryAfterSeconds) + "s."})
		return
	}
	if f.ErrorRate > 0 && n.draw() < f.ErrorRate {
		fail(failure{status: http.StatusInternalServerError, typ: "server_error", code: "injected_error",
			msg:     "The server had an error while processing your request (injected fault).",
			vllmMsg: "Internal server error (injected fault)"})
		return
	}
	// in and out are at most MaxTokenCount each: their sum cannot wrap.
	if lim := n.maxLen(rep); int64(in)+int64(out) > lim { // maxlen.go
		n.metrics.refused.WithLabelValues(refuseContext).Inc()
		fail(n.cfg.Flavor.contextFailure(in, out, lim))
		return
	}

	j := &job{seq: n.newSeq(in, out), rep: rep, notify: make(chan struct{}, 1)}
	if req.KV != nil {
		if msg := n.kvJob(j, req.KV); msg != "" {
			n.metrics.refused.WithLabelValues(refuseBadValue).Inc()
			fail(failure{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_value", msg: msg,
				param: "kv_transfer_params"})
			return
		}
	}
	ctx := r.Context()
	select {
	case n.addc <- j:
	case <-n.stopped:
		fail(failure{status: http.StatusServiceUnavailable, typ: "server_error", code: "shutting_down", msg: "the node is shutting down"})
		return
	case <-ctx.Done():
		o.code, o.cancelled = 499, true // nginx's "client closed request"
		return
	}

	rw := newResponse(n, chat, rep.model.Name, out, in)
	if req.Stream {
		o.code = http.StatusOK
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		n.stream(ctx, w, j, rw, includeUsage, start, &o)
	} else {
		n.wait(ctx, w, r, j, rw, start, &o)
	}
}

func (n *Node) newSeq(in, out int) engine.Seq {
	return engine.Seq{Tag: int(n.ids.Add(1)), Prompt: in, Output: out}
}

func (n *Node) draw() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rng.Float64()
}

// cancel tells the loop that j's client went away.
func (n *Node) cancel(j *job) {
	select {
	case n.cancelc <- j:
	case <-n.stopped:
	}
}

// streamWriteTimeout bounds each write of a stream to its client (wall
// time): a client that stops reading holds the node's sequence that long at
// most.
const streamWriteTimeout = 30 * time.Second

// stream writes j's tokens as server-sent events as the loop releases them.
func (n *Node) stream(ctx context.Context, w http.ResponseWriter, j *job, rw *response, includeUsage bool, start time.Time, o *outcome) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	if h.Get("Connection") == "" { // "close" stays (httpguard: a request with a Transfer-Encoding)
		h.Set("Connection", "keep-alive")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// A deadline left on a keep-alive connection would cut its next
	// request: cleared when the stream ends.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	// The headers go now (the gateway's header timeout is about a live
	// backend, not a queue); the first event waits for the first token,
	// so the first body byte marks the time to first token for whoever
	// measures it there, as with vLLM.
	if err := rc.Flush(); err != nil {
		n.cancel(j)
		o.cancelled = true
		return
	}
	buf := rw.buf[:0]
	buf = rw.first(buf)
	sent := 0
	for {
		end := j.end.Load() // before avail: a finished job's avail is final
		avail := int(j.avail.Load())
		for ; sent < avail; sent++ {
			buf = rw.token(buf, sent)
		}
		if sent > 0 && o.ttft == 0 {
			o.ttft = time.Since(start)
		}
		switch end {
		case jobDone:
			buf = rw.last(buf, includeUsage)
			buf = append(buf, "data: [DONE]\n\n"...)
		case jobFailed:
			buf = n.cfg.Flavor.streamError(buf, j.failure())
		}
		if len(buf) > 0 && (sent > 0 || end != jobActive) {
			// Per write, as the gateway's: a client that stops reading is
			// cut (its sequence cancelled), a long healthy stream is not.
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			_, err := w.Write(buf)
			if err == nil {
				err = rc.Flush()
			}
			buf = buf[:0]
			if err != nil && end == jobActive {
				n.cancel(j)
				o.written, o.cancelled = sent, true
				return
			}
		}
		if end != jobActive {
			o.written = sent
			if end == jobDone {
				o.e2e = time.Since(start)
			}
			return
		}
		select {
		case <-j.notify:
		case <-ctx.Done():
			n.cancel(j)
			o.written, o.cancelled = sent, true
			return
		}
	}
}

// wait answers a non-streaming request once its last token is generated.
func (n *Node) wait(ctx context.Context, w http.ResponseWriter, r *http.Request, j *job, rw *response, start time.Time, o *outcome) {
	for {
		end := j.end.Load()
		if o.ttft == 0 && j.avail.Load() > 0 {
			o.ttft = time.Since(start)
		}
		switch end {
		case jobDone:
			o.code, o.written, o.e2e = http.StatusOK, j.seq.Output, time.Since(start)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.Write(n.withKV(rw.whole(), j, r))
			return
		case jobFailed:
			f := j.failure()
			o.code = f.status
			n.fail(w, f)
			return
		}
		select {
		case <-j.notify:
		case <-ctx.Done():
			n.cancel(j)
			o.code, o.cancelled = 499, true
			return
		}
	}
}

// filler is the text the node generates, one word per token, cycled. The
// words are JSON-safe, so they are written without escaping.
var filler = strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " +
	"incididunt ut labore et dolore magna aliqua")

// response renders one request's chunks and bodies.
type response struct {
	chat            bool
	head            []byte // `{"id":...,"model":...,` shared by every chunk
	model           string
	output, prompt  int
	buf             []byte
	created         int64
	id              string
	tokPre, tokPost string
}

func newResponse(n *Node, chat bool, model string, output, prompt int) *response {
	rw := &response{chat: chat, model: model, output: output, prompt: prompt, created: time.Now().Unix(),
		buf: make([]byte, 0, 512)}
	mj, _ := json.Marshal(model)
	object := "text_completion"
	prefix := "cmpl-"
	if chat {
		object, prefix = "chat.completion.chunk", "chatcmpl-"
	}
	rw.id = fmt.Sprintf("%s%x%06x", prefix, n.clk.start.UnixNano()&0xffffffff, n.ids.Add(1))
	rw.head = fmt.Appendf(nil, `{"id":"%s","object":"%s","created":%d,"model":%s,`, rw.id, object, rw.created, mj)
	if chat {
		rw.tokPre, rw.tokPost = `"choices":[{"index":0,"delta":{"content":"`, `"},"logprobs":null,"finish_reason":null}]}`
	} else {
		rw.tokPre, rw.tokPost = `"choices":[{"index":0,"text":"`, `","logprobs":null,"finish_reason":null}]}`
	}
	return rw
}

func word(i int) string {
	if i == 0 {
		return filler[0]
	}
	return " " + filler[i%len(filler)]
}

func (rw *response) first(buf []byte) []byte {
	if !rw.chat {
		return buf
	}
	buf = append(buf, "data: "...)
	buf = append(buf, rw.head...)
	buf = append(buf, `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	return buf
}

func (rw *response) token(buf []byte, i int) []byte {
	buf = append(buf, "data: "...)
	buf = append(buf, rw.head...)
	buf = append(buf, rw.tokPre...)
	buf = append(buf, word(i)...)
	buf = append(buf, rw.tokPost...)
	return append(buf, "\n\n"...)
}

func (rw *response) usage() string {
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, rw.prompt, rw.output, rw.prompt+rw.output)
}

func (rw *response) last(buf []byte, includeUsage bool) []byte {
	buf = append(buf, "data: "...)
	buf = append(buf, rw.head...)
	if rw.chat {
		buf = append(buf, `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}`+"\n\n"...)
	} else {
		buf = append(buf, `"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]}`+"\n\n"...)
	}
	if includeUsage {
		buf = append(buf, "data: "...)
		buf = append(buf, rw.head...)
		buf = append(buf, `"choices":[],"usage":`...)
		buf = append(buf, rw.usage()...)
		buf = append(buf, "}\n\n"...)
	}
	return buf
}

// whole is the non-streaming body.
func (rw *response) whole() []byte {
	var text strings.Builder
	for i := range rw.output {
		text.WriteString(word(i))
	}
	tj, _ := json.Marshal(text.String())
	mj, _ := json.Marshal(rw.model)
	if rw.chat {
		return fmt.Appendf(nil, `{"id":"%s","object":"chat.completion","created":%d,"model":%s,"choices":[{"index":0,"message":{"role":"assistant","content":%s},"logprobs":null,"finish_reason":"length"}],"usage":%s}`+"\n",
			rw.id, rw.created, mj, tj, rw.usage())
	}
	return fmt.Appendf(nil, `{"id":"%s","object":"text_completion","created":%d,"model":%s,"choices":[{"index":0,"text":%s,"logprobs":null,"finish_reason":"length"}],"usage":%s}`+"\n",
		rw.id, rw.created, mj, tj, rw.usage())
}
