package gateway

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With a model's retirement announced, its requests go to a fallback the
// class accepts (chat, floor 0.70: the 8B model; advisor, floor 0.85: the
// 3.3 70B replacement): the upstream body names the fallback, and so does
// X-Fleetdrill-Model. Withdrawing the notice routes to the model again.
func TestSetRetiring(t *testing.T) {
	const keyRetail, keyWealth = "sk-retail-0123456789", "sk-wealth-0123456789"
	f31, f33, f8 := newFake(t), newFake(t), newFake(t)
	fakes := map[string]*fake{"use-h100-70b-31": f31, "use-h100-70b-33": f33, "use-h100-8b": f8}
	h := newHarness(t, libraryScenario(t, "gameday-model-retirement"),
		map[string][]string{"use-h100-70b-31": {f31.srv.URL}, "use-h100-70b-33": {f33.srv.URL}, "use-h100-8b": {f8.srv.URL}},
		func(c *Config) { c.Keys = []Key{{"retail", keyRetail}, {"wealth", keyWealth}} })

	require.ErrorContains(t, h.gw.SetRetiring("llama-9", true), `"llama-9"`)

	for _, tc := range []struct {
		retiring  bool
		key       string
		class     string
		wantPool  string
		wantModel string
	}{
		{false, keyRetail, "chat", "use-h100-70b-31", "llama-3.1-70b"},
		{true, keyRetail, "chat", "use-h100-8b", "llama-3.1-8b"},
		{true, keyWealth, "advisor", "use-h100-70b-33", "llama-3.3-70b"},
		{false, keyRetail, "chat", "use-h100-70b-31", "llama-3.1-70b"},
		{false, keyWealth, "advisor", "use-h100-70b-31", "llama-3.1-70b"},
	} {
		require.NoError(t, h.gw.SetRetiring("llama-3.1-70b", tc.retiring))
		resp, body := h.postAs(tc.key, tc.class, chatBodyFor("llama-3.1-70b", "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode, "retiring=%v class %s: %s", tc.retiring, tc.class, body)
		assert.Equal(t, tc.wantPool, resp.Header.Get("X-Fleetdrill-Pool"), "retiring=%v class %s", tc.retiring, tc.class)
		assert.Equal(t, tc.wantModel, resp.Header.Get("X-Fleetdrill-Model"), "retiring=%v class %s", tc.retiring, tc.class)
		assert.Equal(t, "completed", resp.Header.Get("X-Fleetdrill-Outcome"))
		got, _ := fakes[tc.wantPool].lastModel.Load().(string)
		assert.Equal(t, tc.wantModel, got, "retiring=%v class %s: the model the upstream was asked for", tc.retiring, tc.class)
		var out struct {
			Model string `json:"model"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &out))
		assert.Equal(t, tc.wantModel, out.Model, "the upstream's answer is passed through")
	}
}
