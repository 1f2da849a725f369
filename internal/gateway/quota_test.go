package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bodyWith is chatBody (non-streamed, prompt "hi": 5 tokens estimated in,
// 16 out) with extra fields.
func bodyWith(t *testing.T, extra map[string]any) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(chatBody(false, "hi")), &m))
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return string(b)
}

// TestClientCannotSetExactLengths: a client's x_fleetdrill (the emulated
// node's exact lengths) never reaches a backend, nor do its
// X-Fleetdrill-*-Tokens headers; with the replay secret x_fleetdrill goes
// through, and the secret itself never does.
func TestClientCannotSetExactLengths(t *testing.T) {
	const secret = "replay-secret-0123456789abcdef0123"
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {"fleetdrill+" + us.srv.URL}},
		func(c *Config) { c.ReplaySecret = secret })
	body := bodyWith(t, map[string]any{"x_fleetdrill": map[string]int{"input_tokens": 2000, "output_tokens": 50000}})
	send := func(hdr map[string]string) (string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keyGlobal)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := h.srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, _ := us.lastBody.Load().(string)
		hd, _ := us.lastHdr.Load().(http.Header)
		return b, hd
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want bool
	}{
		{"no secret", nil, false},
		{"wrong secret", map[string]string{hdrReplay: "guess"}, false},
		{"secret's prefix", map[string]string{hdrReplay: secret[:10]}, false},
		{"header tokens", map[string]string{"X-Fleetdrill-Input-Tokens": "2000", "X-Fleetdrill-Output-Tokens": "50000"}, false},
		{"replay secret", map[string]string{hdrReplay: secret}, true},
	} {
		b, hd := send(tc.hdr)
		require.Equal(t, tc.want, strings.Contains(b, "x_fleetdrill"), "%s: body %s", tc.name, b)
		require.Contains(t, b, `"max_tokens":16`, tc.name)
		for k := range hd {
			if strings.HasPrefix(k, "X-Fleetdrill-") {
				require.Equal(t, "X-Fleetdrill-Class", k, "%s: only the class goes upstream", tc.name)
			}
		}
	}

	// Without a secret configured, nobody may: not even an empty header.
	us2 := newFake(t)
	h2 := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {"fleetdrill+" + us2.srv.URL}})
	req, _ := http.NewRequest(http.MethodPost, h2.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+keyGlobal)
	req.Header.Set(hdrReplay, "")
	resp, err := h2.srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	b, _ := us2.lastBody.Load().(string)
	require.NotContains(t, b, "x_fleetdrill")
}

// TestChoicesAreCharged: n (and best_of) choices are n generations,
// charged n × max_tokens; beyond maxChoices the request is refused.
func TestChoicesAreCharged(t *testing.T) {
	us := newFake(t)
	// 100 tokens a minute: 21 a request (5 in, 16 out) fits four times;
	// n=4 costs 69, so a second does not fit.
	h := newHarness(t, testScenario(t, "tenants.global.tokens_per_minute=100", "classes.interactive.deadline=1h"),
		map[string][]string{"use-h100-8b": {us.srv.URL}})
	resp, b := h.mustPost(keyGlobal, bodyWith(t, map[string]any{"n": 4}))
	require.Equal(t, http.StatusOK, resp.StatusCode, b)
	resp, b = h.mustPost(keyGlobal, bodyWith(t, map[string]any{"best_of": 4, "n": 1}))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, b)
	require.Equal(t, "tenant-token-rate", resp.Header.Get(hdrReason))
	resp, b = h.mustPost(keyGlobal, chatBody(false, "hi"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "one choice still fits: %s", b)

	for _, tc := range []struct {
		field string
		v     int
	}{{"n", 9}, {"n", 0}, {"best_of", 9}, {"n", -1}} {
		resp, b = h.mustPost(keyGlobal, bodyWith(t, map[string]any{tc.field: tc.v}))
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s=%d", tc.field, tc.v)
		var e struct {
			Error struct{ Code, Param string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(b), &e))
		require.Equal(t, "invalid_value", e.Error.Code)
		require.Equal(t, tc.field, e.Error.Param)
	}
}

// TestUsageIsReconciled: a tenant near its token quota is admitted again
// when its answers say they used fewer tokens than estimated (streamed,
// the usage chunk; non-streamed, the body's usage), and not when they say
// nothing.
func TestUsageIsReconciled(t *testing.T) {
	// 42 tokens a minute: two requests of 21 (5 in, 16 out). Each answer
	// reports 8 used: 13 back each, 26 left, room for a third.
	quota := []string{"tenants.global.tokens_per_minute=42", "classes.interactive.deadline=1h"}
	streamed := func(usage bool) string {
		m := map[string]any{"model": "llama-3.1-8b", "stream": true, "max_tokens": 16,
			"messages": []map[string]string{{"role": "user", "content": "hi"}}}
		if usage {
			m["stream_options"] = map[string]bool{"include_usage": true}
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for _, tc := range []struct {
		name      string
		body      string
		usage     string // the fake's non-streamed usage
		wantThird int
	}{
		{"streamed with usage", streamed(true), "", http.StatusOK},
		{"streamed without usage", streamed(false), "", http.StatusTooManyRequests},
		{"non-streamed with usage", chatBody(false, "hi"), `{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}`, http.StatusOK},
		{"non-streamed without usage", chatBody(false, "hi"), "", http.StatusTooManyRequests},
		{"usage null", chatBody(false, "hi"), `null`, http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			us := newFake(t)
			us.usage.Store(tc.usage)
			h := newHarness(t, testScenario(t, quota...), map[string][]string{"use-h100-8b": {us.srv.URL}})
			for i := range 2 {
				resp, b := h.mustPost(keyGlobal, tc.body)
				require.Equal(t, http.StatusOK, resp.StatusCode, "request %d: %s", i, b)
			}
			resp, b := h.mustPost(keyGlobal, tc.body)
			require.Equal(t, tc.wantThird, resp.StatusCode, b)
		})
	}
}

// TestUsageScanner reads usage from event streams cut anywhere, and from a
// JSON body; lines without usage, or a null one, leave it unknown.
func TestUsageScanner(t *testing.T) {
	stream := "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":11}}\r\n\r\n" +
		"data: [DONE]\n\n"
	for cut := range len(stream) {
		s := &usageScanner{events: true}
		s.feed([]byte(stream[:cut]))
		s.feed([]byte(stream[cut:]))
		in, out, ok := s.result()
		require.True(t, ok, "cut at %d", cut)
		require.Equal(t, [2]int{7, 11}, [2]int{in, out})
	}
	s := &usageScanner{events: true}
	s.feed([]byte("data: {\"usage\":null}\n\ndata: [DONE]\n\n"))
	_, _, ok := s.result()
	require.False(t, ok)

	s = &usageScanner{}
	s.feed([]byte(`{"choices":[],"usage":{"prompt_tokens":1,`))
	s.feed([]byte(`"completion_tokens":2}}`))
	in, out, ok := s.result()
	require.True(t, ok)
	require.Equal(t, [2]int{1, 2}, [2]int{in, out})

	s = &usageScanner{}
	s.feed(make([]byte, usageMax+1))
	_, _, ok = s.result()
	require.False(t, ok, "too large to read: the estimate stands")
}
