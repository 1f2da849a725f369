package node

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// With MaxModelLen (vLLM's --max-model-len) below the KV capacity, every
// flavor publishes it as max_model_len on /v1/models and refuses a longer
// request with vLLM's 400; at or under it, the request is served. Without
// it, the KV capacity is the limit, as before; above the capacity, the
// capacity still is.
func TestMaxModelLen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flavor Flavor
		maxLen int64
		want   int64 // the limit published and enforced
	}{
		{"vllm", FlavorVLLM, 1024, 1024},
		{"vllm-0.8", FlavorVLLM08, 1024, 1024},
		{"fleetdrill", FlavorFleetdrill, 1024, 1024},
		{"unset", FlavorVLLM, 0, 4096},
		{"above the KV capacity", FlavorVLLM, 1 << 20, 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, Config{Flavor: tc.flavor, MaxModelLen: tc.maxLen,
				Models: []Model{{Name: testModel, Profile: testProfile(t), KVTokens: 4096}}})
			resp, body := h.get(t, "/v1/models")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/v1/models: status %d", resp.StatusCode)
			}
			var l struct {
				Data []struct {
					ID          string `json:"id"`
					MaxModelLen int64  `json:"max_model_len"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &l); err != nil || len(l.Data) != 1 || l.Data[0].MaxModelLen != tc.want {
				t.Fatalf("/v1/models = %s (%v), want max_model_len %d", body, err, tc.want)
			}
			ask := func(in int) (int, string) {
				req := map[string]any{"model": testModel, "max_tokens": 4, "x_fleetdrill": map[string]any{"input_tokens": in},
					"messages": []any{map[string]any{"role": "user", "content": "x"}}}
				resp := h.post(t, "/v1/chat/completions", req)
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if status, b := ask(int(tc.want) - 4); status != http.StatusOK {
				t.Errorf("a request of exactly the limit: %d %s, want 200", status, b)
			}
			status, b := ask(int(tc.want))
			if status != http.StatusBadRequest {
				t.Fatalf("a request over the limit: %d %s, want 400", status, b)
			}
			want := "maximum context length is 1024 tokens"
			if tc.want != 1024 {
				want = "maximum context length is 4096 tokens"
			}
			if tc.flavor == FlavorFleetdrill {
				want = "maximum context length of 1024 tokens"
			}
			if !strings.Contains(b, want) {
				t.Errorf("refusal %s: want %q", b, want)
			}
		})
	}
	if _, err := New(Config{MaxModelLen: -1, Models: []Model{{Name: testModel, Profile: testProfile(t)}}}); err == nil ||
		!strings.Contains(err.Error(), "max model len -1") {
		t.Errorf("a negative MaxModelLen: %v, want an error naming it", err)
	}
}
