package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdk is the official OpenAI Go SDK pointed at h with key; it never
// retries, so each call is one request.
func (h *harness) sdk(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(h.srv.URL+"/v1/"), option.WithAPIKey(key),
		option.WithHTTPClient(h.srv.Client()), option.WithMaxRetries(0))
}

func sdkChat(prompt string, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "llama-3.1-8b", MaxTokens: openai.Int(maxTokens),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
}

// What the official SDK makes of the gateway's errors: a typed
// *openai.Error with the status and OpenAI's string code (and param where
// a field is at fault), the X-Fleetdrill headers still there.
func TestSDKErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sets   []string
		prep   func(us *fake)
		park   bool // a request is parked on the blocked backend first
		cfg    func(*Config)
		key    string // "" keyGlobal
		params func(*openai.ChatCompletionNewParams)

		wantStatus  int
		wantType    string
		wantCode    string
		wantParam   string
		wantOutcome string // "": no X-Fleetdrill headers (refused before the core)
		wantReason  string
		wantRetry   bool // Retry-After
	}{
		{name: "wrong key", key: "sk-wrong",
			wantStatus: 401, wantType: "invalid_request_error", wantCode: "invalid_api_key"},
		{name: "unknown model", params: func(p *openai.ChatCompletionNewParams) { p.Model = "gpt-nope" },
			wantStatus: 404, wantType: "invalid_request_error", wantCode: "model_not_found", wantParam: "model"},
		{name: "negative max_tokens", params: func(p *openai.ChatCompletionNewParams) { p.MaxTokens = openai.Int(-1) },
			wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_value", wantParam: "max_tokens"},
		{name: "completion longer than any pool holds",
			params:     func(p *openai.ChatCompletionNewParams) { p.MaxTokens = openai.Int(1e9) },
			wantStatus: 400, wantType: "invalid_request_error", wantCode: "context_length_exceeded", wantParam: "max_tokens",
			wantOutcome: "rejected", wantReason: "no-compatible-pool"},
		{name: "max_completion_tokens longer than any pool holds",
			params: func(p *openai.ChatCompletionNewParams) {
				p.MaxTokens = openai.ChatCompletionNewParams{}.MaxTokens
				p.MaxCompletionTokens = openai.Int(1e9)
			},
			wantStatus: 400, wantType: "invalid_request_error", wantCode: "context_length_exceeded", wantParam: "max_completion_tokens",
			wantOutcome: "rejected", wantReason: "no-compatible-pool"},
		{name: "prompt longer than any pool holds", // 2 Mi tokens estimated
			cfg: func(c *Config) { c.MaxBodyBytes = 16 << 20 }, // over the default body limit
			params: func(p *openai.ChatCompletionNewParams) {
				p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("x", 8<<20))}
			},
			wantStatus: 400, wantType: "invalid_request_error", wantCode: "context_length_exceeded", wantParam: "messages",
			wantOutcome: "rejected", wantReason: "no-compatible-pool"},
		{name: "too long for the only pool in the tenant's jurisdiction", key: keyEU,
			params:     func(p *openai.ChatCompletionNewParams) { p.MaxTokens = openai.Int(1e9) },
			wantStatus: 400, wantType: "invalid_request_error", wantCode: "context_length_exceeded", wantParam: "max_tokens",
			wantOutcome: "rejected", wantReason: "no-compatible-pool"},
		{name: "no pool in the tenant's jurisdiction", key: keyEU,
			sets:       []string{"pools.euw-a100-8b.region=us-east", "workload.bank-eu.tenant=global", "workload.health-eu.tenant=global"},
			wantStatus: 503, wantType: "server_error", wantCode: "no_route",
			wantOutcome: "rejected", wantReason: "no-compatible-pool"},
		{name: "tenant quota", sets: []string{"tenants.global.max_concurrency=1"},
			prep: func(us *fake) { us.mode.Store(modeBlock) }, park: true,
			wantStatus: 429, wantType: "requests", wantCode: "rate_limit_exceeded",
			wantOutcome: "rejected", wantReason: "tenant-concurrency", wantRetry: true},
		{name: "upstream quota", prep: func(us *fake) { us.mode.Store(modeThrottle) },
			wantStatus: 429, wantType: "requests", wantCode: "rate_limit_exceeded",
			wantOutcome: "rejected", wantReason: "upstream-quota", wantRetry: true},
		{name: "queue timeout", sets: []string{"pools.use-h100-8b.max_batch=1"},
			prep: func(us *fake) { us.mode.Store(modeBlock) }, park: true,
			cfg:        withQueueTimeout(1), // the smallest wait: it times out once queued
			wantStatus: 503, wantType: "server_error", wantCode: "queue_timeout",
			wantOutcome: "timed_out", wantRetry: true},
		{name: "deadline", sets: []string{"classes.interactive.deadline=50ms"},
			prep:       func(us *fake) { us.mode.Store(modeBlock) },
			wantStatus: 504, wantType: "server_error", wantCode: "deadline_exceeded", wantOutcome: "timed_out"},
		{name: "upstream failure", prep: func(us *fake) { us.mode.Store(modeFail) },
			wantStatus: 502, wantType: "server_error", wantCode: "upstream_error", wantOutcome: "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := newFake(t)
			if tc.prep != nil {
				tc.prep(us)
			}
			// Only the US pool has a backend; the EU tenant's requests
			// are refused before any would be sent.
			sets := append([]string{"policy.retries.max_attempts=2", "policy.health.threshold=10"}, tc.sets...)
			var opts []func(*Config)
			if tc.cfg != nil {
				opts = append(opts, tc.cfg)
			}
			h := newHarness(t, testScenario(t, sets...), map[string][]string{"use-h100-8b": {us.srv.URL}}, opts...)
			var wg sync.WaitGroup
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); wg.Wait() }()
			if tc.park {
				wg.Go(func() { _, _, _ = h.post(ctx, keyGlobal, chatBody(false, "x")) })
				<-us.started
			}
			key := tc.key
			if key == "" {
				key = keyGlobal
			}
			p := sdkChat("x", 16)
			if tc.params != nil {
				tc.params(&p)
			}
			client := h.sdk(key)
			_, err := client.Chat.Completions.New(context.Background(), p)
			var aerr *openai.Error
			require.ErrorAs(t, err, &aerr)
			assert.Equal(t, tc.wantStatus, aerr.StatusCode, "StatusCode")
			assert.Equal(t, tc.wantType, aerr.Type, "Type")
			assert.Equal(t, tc.wantCode, aerr.Code, "Code")
			assert.Equal(t, tc.wantParam, aerr.Param, "Param")
			assert.NotEmpty(t, aerr.Message, "Message")
			hd := aerr.Response.Header
			assert.Equal(t, tc.wantOutcome, hd.Get("X-Fleetdrill-Outcome"))
			assert.Equal(t, tc.wantReason, hd.Get("X-Fleetdrill-Reason"))
			assert.Equal(t, tc.wantRetry, hd.Get("Retry-After") != "", "Retry-After %q", hd.Get("Retry-After"))
			if tc.wantOutcome != "" {
				assert.NotEmpty(t, hd.Get("X-Fleetdrill-Attempts"))
			}
		})
	}
}

// The error object on the wire: OpenAI's four members, param null when no
// field is at fault, code a string.
func TestErrorBody(t *testing.T) {
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {newFake(t).srv.URL}})
	resp, body := h.mustPost("sk-wrong", chatBody(false, "x"))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.JSONEq(t, `{"error":{"message":"invalid API key","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, body)
	_, body = h.mustPost(keyGlobal, `{"model":"nope","messages":[]}`)
	require.JSONEq(t, "{\"error\":{\"message\":\"The model `nope` does not exist or you do not have access to it.\","+
		`"type":"invalid_request_error","param":"model","code":"model_not_found"}}`, body)
}

// GET /v1/models/{id}: the model object of a served model, else 404
// model_not_found; authenticated as /v1/models.
func TestSDKModels(t *testing.T) {
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {newFake(t).srv.URL}})
	client := h.sdk(keyGlobal)
	ctx := context.Background()

	m, err := client.Models.Get(ctx, "llama-3.1-8b")
	require.NoError(t, err)
	assert.Equal(t, "llama-3.1-8b", m.ID)
	assert.Equal(t, "model", string(m.Object))
	assert.Equal(t, "fleetdrill", m.OwnedBy)
	assert.Equal(t, h.gw.clk.start.Unix(), m.Created)

	page, err := client.Models.List(ctx)
	require.NoError(t, err)
	require.Len(t, page.Data, 1)
	assert.Equal(t, m.ID, page.Data[0].ID, "Get agrees with List")

	for _, tc := range []struct {
		name, key, id string
		wantStatus    int
		wantCode      string
		wantParam     string
	}{
		{"unknown model", keyGlobal, "gpt-nope", 404, "model_not_found", "model"},
		{"an id with a slash", keyGlobal, "meta/llama-3.1-8b", 404, "model_not_found", "model"},
		{"wrong key", "sk-wrong", "llama-3.1-8b", 401, "invalid_api_key", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := h.sdk(tc.key)
			_, err := client.Models.Get(ctx, tc.id)
			var aerr *openai.Error
			require.ErrorAs(t, err, &aerr)
			assert.Equal(t, tc.wantStatus, aerr.StatusCode)
			assert.Equal(t, tc.wantCode, aerr.Code)
			assert.Equal(t, tc.wantParam, aerr.Param)
		})
	}
	// An id sent unescaped, slashes and all (as some clients do), is
	// still looked up whole.
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/v1/models/meta/llama-3.1-8b", nil)
	req.Header.Set("Authorization", "Bearer "+keyGlobal)
	resp, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, string(b), "`meta/llama-3.1-8b`")
}

// A streamed completion through the SDK: the usage chunk the client asked
// for (stream_options.include_usage) comes through; a backend that breaks
// midway ends the stream with an error, not a short answer.
func TestSDKStream(t *testing.T) {
	t.Run("usage", func(t *testing.T) {
		us := newFake(t)
		h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
		p := sdkChat("x", 16)
		p.StreamOptions.IncludeUsage = openai.Bool(true)
		client := h.sdk(keyGlobal)
		stream := client.Chat.Completions.NewStreaming(context.Background(), p)
		var text strings.Builder
		var last openai.ChatCompletionChunk
		for stream.Next() {
			last = stream.Current()
			for _, c := range last.Choices {
				text.WriteString(c.Delta.Content)
			}
		}
		require.NoError(t, stream.Err())
		assert.Equal(t, "tok0tok1tok2", text.String())
		assert.Empty(t, last.Choices, "the usage chunk is the last")
		assert.Equal(t, int64(8), last.Usage.TotalTokens)
		assert.Equal(t, int64(3), last.Usage.CompletionTokens)
		body, _ := us.lastBody.Load().(string)
		assert.Contains(t, body, `"stream_options":{"include_usage":true}`, "the body goes upstream as sent")
	})
	t.Run("broken midway", func(t *testing.T) {
		us := newFake(t)
		us.mode.Store(modeBreak)
		h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
		client := h.sdk(keyGlobal)
		stream := client.Chat.Completions.NewStreaming(context.Background(), sdkChat("x", 16))
		var text strings.Builder
		for stream.Next() {
			for _, c := range stream.Current().Choices {
				text.WriteString(c.Delta.Content)
			}
		}
		assert.Equal(t, "tok0", text.String(), "the token before the break")
		require.Error(t, stream.Err(), "a broken stream is an error, not a short answer")
		var serr *ssestream.StreamError
		require.ErrorAs(t, stream.Err(), &serr)
		assert.Contains(t, serr.Message, `"code":"upstream_error"`)
		eventually(t, "the failure counted", func() bool {
			return h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "failed"}) == 1
		})
	})
	t.Run("deadline midway", func(t *testing.T) {
		us := newFake(t)
		us.mode.Store(modeStall)
		h := newHarness(t, testScenario(t, "policy.health.timeout=1h", "classes.interactive.deadline=300ms"),
			map[string][]string{"use-h100-8b": {us.srv.URL}})
		client := h.sdk(keyGlobal)
		stream := client.Chat.Completions.NewStreaming(context.Background(), sdkChat("x", 16))
		for stream.Next() {
		}
		// Cut after its first event (a 504 when the deadline came first,
		// on a slow machine): an error either way, saying why.
		require.Error(t, stream.Err(), "a stream cut at the deadline is an error, not a short answer")
		var serr *ssestream.StreamError
		var aerr *openai.Error
		switch {
		case errors.As(stream.Err(), &serr):
			assert.Contains(t, serr.Message, `"code":"deadline_exceeded"`)
		case errors.As(stream.Err(), &aerr):
			assert.Equal(t, "deadline_exceeded", aerr.Code)
		default:
			t.Fatalf("stream.Err() = %v, want a StreamError or an *openai.Error", stream.Err())
		}
		eventually(t, "the timeout counted", func() bool {
			return h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "timed_out"}) == 1
		})
	})
}
