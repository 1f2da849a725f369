package node

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func (h *harness) get(t testing.TB, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := h.srv.Client().Get(h.srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp, body
}

func TestParseFlavor(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Flavor
		err  string
	}{
		{"", FlavorFleetdrill, ""},
		{"fleetdrill", FlavorFleetdrill, ""},
		{"vllm", FlavorVLLM, ""},
		{"vllm-0.8", FlavorVLLM08, ""},
		{"VLLM", "", `flavor "VLLM": want one of fleetdrill, vllm, vllm-0.8`},
		{"tgi", "", `flavor "tgi": want one of fleetdrill, vllm, vllm-0.8`},
	} {
		got, err := ParseFlavor(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseFlavor(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseFlavor(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := New(Config{Flavor: "tgi", Models: []Model{{Name: testModel, Profile: testProfile(t)}}}); err == nil ||
		!strings.Contains(err.Error(), `flavor "tgi": want one of`) {
		t.Errorf("New with flavor tgi: %v, want the flavor named with the choices", err)
	}
}

// Every flavor answers vLLM's /health (200, empty body; 503 once stopped);
// only the fleetdrill flavor keeps /healthz, which vLLM answers 404.
func TestFlavorHealth(t *testing.T) {
	for _, tc := range []struct {
		flavor         Flavor
		healthz        int
		healthzBody    string
		stoppedHealthz int
	}{
		{FlavorFleetdrill, http.StatusOK, "ok\n", http.StatusServiceUnavailable},
		{FlavorVLLM, http.StatusNotFound, "404 page not found\n", http.StatusNotFound},
		{FlavorVLLM08, http.StatusNotFound, "404 page not found\n", http.StatusNotFound},
	} {
		t.Run(string(tc.flavor), func(t *testing.T) {
			h := start(t, Config{Flavor: tc.flavor})
			resp, body := h.get(t, "/health")
			if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.ContentLength != 0 {
				t.Errorf("/health: %d %q (length %d), want 200 and an empty body", resp.StatusCode, body, resp.ContentLength)
			}
			resp, body = h.get(t, "/healthz")
			if resp.StatusCode != tc.healthz || string(body) != tc.healthzBody {
				t.Errorf("/healthz: %d %q, want %d %q", resp.StatusCode, body, tc.healthz, tc.healthzBody)
			}
			h.stop()
			for path, want := range map[string]int{"/health": http.StatusServiceUnavailable, "/healthz": tc.stoppedHealthz} {
				rec := httpRecorder(h.node.Handler(), http.MethodGet, path, "")
				if rec != want {
					t.Errorf("%s after stop: status %d, want %d", path, rec, want)
				}
			}
		})
	}
}

// Each refusal carries the flavor's error body: vLLM's {"error": {...}}
// with an integer code (0.10.1 and later), its flat {"object": "error"}
// before, the OpenAI body with string codes in the fleetdrill flavor.
func TestFlavorErrorBodies(t *testing.T) {
	type want struct {
		status int
		// vLLM's words: its type, the parameter at fault (nil: null),
		// its message (and, for 0.8, the older one where it differs);
		// "" checks only that there is one.
		vllmType      string
		param         any
		msg, legacy   string
		code          string // the fleetdrill flavor's
		retryAfter    string
		fleetdrillMsg string
	}
	long := map[string]any{"model": testModel, "max_tokens": 100, "x_fleetdrill": map[string]any{"input_tokens": 1000},
		"messages": []any{map[string]any{"role": "user", "content": "x"}}}
	tooMany := map[string]any{"model": testModel, "max_tokens": 995, "x_fleetdrill": map[string]any{"input_tokens": 10},
		"messages": []any{map[string]any{"role": "user", "content": "x"}}}
	cases := []struct {
		name  string
		patch map[string]any // faults for the request
		body  any
		want  want
	}{
		{"unknown model", nil, map[string]any{"model": "gpt-9", "messages": []any{map[string]any{"content": "x"}}},
			want{status: 404, vllmType: "NotFoundError", param: "model", msg: "The model `gpt-9` does not exist.", code: "model_not_found",
				fleetdrillMsg: "The model `gpt-9` does not exist or you do not have access to it."}},
		{"retired model", map[string]any{"retire": []string{testModel}}, chatBody("x", 1, false),
			want{status: 404, vllmType: "NotFoundError", param: "model", msg: "The model `" + testModel + "` does not exist.", code: "model_not_found"}},
		{"quota", map[string]any{"quota_exhausted": true, "retry_after_s": 7}, chatBody("x", 1, false),
			want{status: 429, vllmType: "RateLimitError", code: "insufficient_quota", retryAfter: "7"}},
		{"injected error", map[string]any{"error_rate": 1}, chatBody("x", 1, false),
			want{status: 500, vllmType: "InternalServerError", code: "injected_error"}},
		{"driver too old", map[string]any{"driver": "535.104"}, chatBody("x", 1, false),
			want{status: 503, vllmType: "ServiceUnavailableError", code: "model_incompatible"}},
		{"bad body", nil, "not an object",
			want{status: 400, vllmType: "BadRequestError", code: "invalid_body"}},
		{"min_tokens over max_tokens", nil, map[string]any{"model": testModel, "max_tokens": 2, "min_tokens": 3,
			"messages": []any{map[string]any{"content": "x"}}},
			want{status: 400, vllmType: "BadRequestError", code: "invalid_value",
				msg: "min_tokens must be less than or equal to max_tokens=2, got 3"}},
		{"prompt fills the context", nil, long,
			want{status: 400, vllmType: "BadRequestError", param: "input_tokens", code: "context_length_exceeded",
				msg:    "This model's maximum context length is 1000 tokens. However, your request has 1000 input tokens. Please reduce the length of the input messages.",
				legacy: "This model's maximum context length is 1000 tokens. However, you requested 1100 tokens (1000 in the messages, 100 in the completion). Please reduce the length of the messages or completion."}},
		{"max_tokens too large", nil, tooMany,
			want{status: 400, vllmType: "BadRequestError", param: "max_tokens", code: "context_length_exceeded",
				msg:    "'max_tokens' or 'max_completion_tokens' is too large: 995. This model's maximum context length is 1000 tokens and your request has 10 input tokens (995 > 1000 - 10).",
				legacy: "This model's maximum context length is 1000 tokens. However, you requested 1005 tokens (10 in the messages, 995 in the completion). Please reduce the length of the messages or completion."}},
	}
	for _, fl := range Flavors {
		t.Run(string(fl), func(t *testing.T) {
			h := start(t, Config{Flavor: fl, KVTokens: 1000, Speed: 4})
			for _, tc := range cases {
				if tc.patch != nil {
					if resp, _ := h.adminDo(t, http.MethodPost, testToken, tc.patch); resp.StatusCode != http.StatusOK {
						t.Fatalf("%s: patch %v: status %d", tc.name, tc.patch, resp.StatusCode)
					}
				}
				var resp *http.Response
				if s, ok := tc.body.(string); ok {
					req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/chat/completions", strings.NewReader(s))
					var err error
					if resp, err = h.srv.Client().Do(req); err != nil {
						t.Fatal(err)
					}
				} else {
					resp = h.post(t, "/v1/chat/completions", tc.body)
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				h.adminDo(t, http.MethodDelete, testToken, nil)
				w := tc.want
				if resp.StatusCode != w.status || resp.Header.Get("Retry-After") != w.retryAfter {
					t.Errorf("%s: status %d Retry-After %q, want %d %q", tc.name, resp.StatusCode, resp.Header.Get("Retry-After"), w.status, w.retryAfter)
				}
				var got map[string]any
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Errorf("%s: body %q: %v", tc.name, raw, err)
					continue
				}
				msg, legacyMsg := w.msg, w.msg
				if w.legacy != "" {
					legacyMsg = w.legacy
				}
				var inner map[string]any
				var wantKeys []string
				switch fl {
				case FlavorVLLM:
					inner, _ = got["error"].(map[string]any)
					wantKeys = []string{"code", "message", "param", "type"}
				case FlavorVLLM08:
					inner, msg = got, legacyMsg
					wantKeys = []string{"code", "message", "object", "param", "type"}
				default:
					inner, msg = got["error"].(map[string]any), w.fleetdrillMsg
					wantKeys = []string{"code", "message", "param", "type"}
				}
				if len(got) != 1 && fl != FlavorVLLM08 {
					t.Errorf("%s: body %s, want only the error", tc.name, raw)
				}
				if keys := slices.Sorted(maps.Keys(inner)); !slices.Equal(keys, wantKeys) {
					t.Errorf("%s: error fields %v, want %v (%s)", tc.name, keys, wantKeys, raw)
				}
				if m, _ := inner["message"].(string); m == "" || (msg != "" && m != msg) {
					t.Errorf("%s: message %q, want %q", tc.name, m, msg)
				}
				wantFields := map[string]any{"type": w.vllmType, "param": w.param, "code": float64(w.status)}
				if fl == FlavorVLLM08 {
					wantFields["object"] = "error"
					if w.legacy != "" {
						wantFields["param"] = nil // the older sentence named no parameter
					}
				}
				if fl == FlavorFleetdrill {
					wantFields = map[string]any{"code": w.code, "param": nil}
				}
				for k, v := range wantFields {
					if !reflect.DeepEqual(inner[k], v) {
						t.Errorf("%s: %s = %#v, want %#v (%s)", tc.name, k, inner[k], v, raw)
					}
				}
			}
		})
	}
}

// The vLLM flavors list vLLM's model cards; a retired model leaves.
func TestVLLMModels(t *testing.T) {
	h := start(t, Config{Flavor: FlavorVLLM, Models: []Model{{Name: "a", Profile: testProfile(t), KVTokens: 4096},
		{Name: "b", Profile: testProfile(t), KVTokens: 8192}}})
	type card struct {
		ID          string  `json:"id"`
		Object      string  `json:"object"`
		Created     int64   `json:"created"`
		OwnedBy     string  `json:"owned_by"`
		Root        string  `json:"root"`
		Parent      *string `json:"parent"`
		MaxModelLen int64   `json:"max_model_len"`
		Permission  []struct {
			Object        string `json:"object"`
			AllowSampling bool   `json:"allow_sampling"`
			Organization  string `json:"organization"`
		} `json:"permission"`
	}
	models := func() []card {
		resp, body := h.get(t, "/v1/models")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/v1/models: status %d", resp.StatusCode)
		}
		var l struct {
			Object string `json:"object"`
			Data   []card `json:"data"`
		}
		if err := json.Unmarshal(body, &l); err != nil || l.Object != "list" {
			t.Fatalf("/v1/models: %v, object %q: %s", err, l.Object, body)
		}
		if !strings.Contains(string(body), `"parent":null`) {
			t.Errorf("/v1/models: %s, want parent null as vLLM sends it", body)
		}
		return l.Data
	}
	got := models()
	if len(got) != 2 {
		t.Fatalf("/v1/models: %+v, want a and b", got)
	}
	for i, want := range []struct {
		id  string
		len int64
	}{{"a", 4096}, {"b", 8192}} {
		c := got[i]
		if c.ID != want.id || c.Object != "model" || c.OwnedBy != "vllm" || c.Root != want.id || c.Parent != nil ||
			c.MaxModelLen != want.len || c.Created == 0 {
			t.Errorf("card %d = %+v, want id and root %s, object model, owned_by vllm, max_model_len %d", i, c, want.id, want.len)
		}
		if len(c.Permission) != 1 || c.Permission[0].Object != "model_permission" || !c.Permission[0].AllowSampling ||
			c.Permission[0].Organization != "*" {
			t.Errorf("card %d permission = %+v, want vLLM's default model_permission", i, c.Permission)
		}
	}
	h.adminDo(t, http.MethodPost, testToken, map[string]any{"retire": []string{"a"}})
	if got := models(); len(got) != 1 || got[0].ID != "b" {
		t.Errorf("/v1/models after retiring a = %+v, want b", got)
	}
	// A request that names no model is served by the first, as vLLM
	// serves its own (here retired: vLLM's 404).
	resp := h.post(t, "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1})
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("no model, first retired: status %d, want 404", resp.StatusCode)
	}
	h.adminDo(t, http.MethodDelete, testToken, nil)
	resp = h.post(t, "/v1/completions", map[string]any{"prompt": "x", "max_tokens": 1})
	var body struct{ Model string }
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || body.Model != "a" {
		t.Errorf("no model: status %d model %q, want 200 from a", resp.StatusCode, body.Model)
	}
}

// stream_options.include_usage ends a stream with vLLM's usage chunk
// (choices empty) before [DONE], in every flavor; vLLM's ignore_eos and
// min_tokens are accepted.
func TestIncludeUsage(t *testing.T) {
	for _, fl := range Flavors {
		for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
			for _, include := range []bool{true, false} {
				h := start(t, Config{Flavor: fl, Speed: 4})
				body := map[string]any{"model": testModel, "stream": true, "max_tokens": 4, "min_tokens": 2, "ignore_eos": true,
					"x_fleetdrill": map[string]any{"input_tokens": 9}, "stream_options": map[string]any{"include_usage": include}}
				if path == "/v1/completions" {
					body["prompt"] = "x"
				} else {
					body["messages"] = []any{map[string]any{"role": "user", "content": "x"}}
				}
				resp := h.post(t, path, body)
				evs := readSSE(t, resp.Body)
				resp.Body.Close()
				name := string(fl) + " " + path
				if resp.StatusCode != http.StatusOK || len(evs) < 2 || evs[len(evs)-1].data != "[DONE]" {
					t.Fatalf("%s: status %d, events %v", name, resp.StatusCode, evs)
				}
				if n := len(tokensOf(t, evs)); n != 4 {
					t.Errorf("%s: %d tokens, want 4", name, n)
				}
				var last struct {
					Choices []any `json:"choices"`
					Usage   *struct {
						Prompt     int `json:"prompt_tokens"`
						Completion int `json:"completion_tokens"`
						Total      int `json:"total_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(evs[len(evs)-2].data), &last); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				switch {
				case include && (last.Usage == nil || len(last.Choices) != 0 || last.Usage.Prompt != 9 || last.Usage.Completion != 4 || last.Usage.Total != 13):
					t.Errorf("%s include_usage: last chunk %s, want choices [] and usage 9 + 4 = 13", name, evs[len(evs)-2].data)
				case !include && last.Usage != nil:
					t.Errorf("%s without include_usage: last chunk %s has usage", name, evs[len(evs)-2].data)
				}
			}
		}
	}
}

// A stream the node cannot finish ends with the flavor's error event; vLLM
// sends [DONE] after it.
func TestStreamFailureEvent(t *testing.T) {
	for _, tc := range []struct {
		flavor Flavor
		event  string
		done   bool
	}{
		{FlavorFleetdrill, `{"error":{"code":"shutting_down","message":"the node stopped before the sequence finished","param":null,"type":"server_error"}}`, false},
		{FlavorVLLM, `{"error":{"message":"the node stopped before the sequence finished","type":"ServiceUnavailableError","param":null,"code":503}}`, true},
		{FlavorVLLM08, `{"error":{"object":"error","message":"the node stopped before the sequence finished","type":"ServiceUnavailableError","param":null,"code":503}}`, true},
	} {
		t.Run(string(tc.flavor), func(t *testing.T) {
			h := start(t, Config{Flavor: tc.flavor})
			resp := h.post(t, "/v1/chat/completions", chatBody("x", 100000, true))
			defer resp.Body.Close()
			resp.Body.Read(make([]byte, 1)) // the stream is under way
			h.stopEngine()
			evs := readSSE(t, resp.Body)
			var data []string
			for _, e := range evs {
				data = append(data, e.data)
			}
			want := []string{tc.event}
			if tc.done {
				want = append(want, "[DONE]")
			}
			if len(data) < len(want) || !slices.Equal(data[len(data)-len(want):], want) {
				t.Errorf("stream ends %q, want %q", data[max(0, len(data)-2):], want)
			}
		})
	}
}
