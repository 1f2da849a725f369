package node

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

const testAPIKey = "sk-node-0123456789abcdef0123456789abcdef"

// With Config.APIKey, every /v1 path needs the key, as vLLM's --api-key
// does, and the health checks and /metrics stay open for probes and
// scrapes; a refusal is a 401 in the flavor's words.
func TestAPIKey(t *testing.T) {
	chat, _ := json.Marshal(chatBody("hi", 2, false))
	completion := `{"model":"` + testModel + `","prompt":"hi","max_tokens":2}`
	for _, fl := range []Flavor{FlavorFleetdrill, FlavorVLLM, FlavorVLLM08} {
		h := start(t, Config{APIKey: testAPIKey, Flavor: fl, Speed: 100})
		for _, tc := range []struct {
			name, method, path, auth string
			want                     int
		}{
			{"chat without a key", "POST", "/v1/chat/completions", "", 401},
			{"chat with a wrong key", "POST", "/v1/chat/completions", "Bearer sk-wrong", 401},
			{"chat with the key's prefix", "POST", "/v1/chat/completions", "Bearer " + testAPIKey[:20], 401},
			{"chat with the key and more", "POST", "/v1/chat/completions", "Bearer " + testAPIKey + "x", 401},
			{"chat with the key as Basic", "POST", "/v1/chat/completions", "Basic " + testAPIKey, 401},
			{"chat with the key", "POST", "/v1/chat/completions", "Bearer " + testAPIKey, 200},
			{"chat with the key, scheme in lower case", "POST", "/v1/chat/completions", "bearer " + testAPIKey, 200},
			{"completion without a key", "POST", "/v1/completions", "", 401},
			{"completion with the key", "POST", "/v1/completions", "Bearer " + testAPIKey, 200},
			{"models without a key", "GET", "/v1/models", "", 401},
			{"models with the key", "GET", "/v1/models", "Bearer " + testAPIKey, 200},
			{"an unknown /v1 path without a key", "GET", "/v1/nope", "", 401}, // before routing, as vLLM
			{"a CORS preflight", "OPTIONS", "/v1/models", "", 405},
			{"health", "GET", "/health", "", 200},
			{"metrics", "GET", "/metrics", "", 200},
		} {
			body := ""
			switch tc.path {
			case "/v1/chat/completions":
				body = string(chat)
			case "/v1/completions":
				body = completion
			}
			req, _ := http.NewRequest(tc.method, h.srv.URL+tc.path, strings.NewReader(body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := h.srv.Client().Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", fl, tc.name, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s, %s: status %d, want %d (%s)", fl, tc.name, resp.StatusCode, tc.want, b)
				continue
			}
			if tc.want != http.StatusUnauthorized {
				continue
			}
			if bytes.Contains(b, []byte("sk-")) {
				t.Errorf("%s, %s: the refusal repeats a key: %s", fl, tc.name, b)
			}
			if fl.vllm() {
				if got := strings.TrimSpace(string(b)); got != `{"error":"Unauthorized"}` {
					t.Errorf("%s, %s: body %s, want vLLM's {\"error\":\"Unauthorized\"}", fl, tc.name, got)
				}
				continue
			}
			var e struct {
				Error struct{ Type, Code, Message string }
			}
			if err := json.Unmarshal(b, &e); err != nil || e.Error.Type != "invalid_request_error" ||
				e.Error.Code != "invalid_api_key" || e.Error.Message == "" {
				t.Errorf("%s, %s: body %s (%v), want OpenAI's invalid_api_key error", fl, tc.name, b, err)
			}
			if resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s, %s: 401 without WWW-Authenticate", fl, tc.name)
			}
		}
		if fl == FlavorFleetdrill {
			if resp, _ := h.get(t, "/healthz"); resp.StatusCode != http.StatusOK {
				t.Errorf("%s: /healthz without a key: status %d, want 200", fl, resp.StatusCode)
			}
		}
	}
}

// Without Config.APIKey the API is open, as it always was, and a client's
// Authorization header is ignored.
func TestNoAPIKeyIsOpen(t *testing.T) {
	h := start(t, Config{Speed: 100})
	for _, auth := range []string{"", "Bearer anything"} {
		resp := h.post(t, "/v1/chat/completions", chatBody("hi", 2, false), "Authorization", auth)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Authorization %q: status %d, want 200", auth, resp.StatusCode)
		}
	}
}
