package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Whatever the body and class header, the gateway's completion handler
// never panics and never answers 5xx of its own (the backend is healthy).
func FuzzServeCompletion(f *testing.F) {
	us := newFake(f)
	h := newHarness(f, testScenario(f), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.MaxBodyBytes = 64 << 10 })
	f.Add([]byte(chatBody(false, "hi")), "")
	f.Add([]byte(chatBody(true, "hi")), "interactive")
	f.Add([]byte(`{"model":"llama-3.1-8b","max_tokens":-1}`), "")
	f.Add([]byte(`{"model":"llama-3.1-8b","prompt":"x","max_tokens":99999999999}`), "batch")
	f.Add([]byte(`{"model":`), "nope")
	f.Fuzz(func(t *testing.T, body []byte, class string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+keyGlobal)
		if class != "" {
			req.Header["X-Fleetdrill-Class"] = []string{class}
		}
		w := httptest.NewRecorder()
		h.gw.Handler().ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Errorf("status %d for body %q class %q: %s", w.Code, body, class, w.Body.String())
		}
	})
}
