package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

func errorCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&e)
	return e.Error.Code
}

func TestAdminAuth(t *testing.T) {
	h := start(t, Config{})
	for _, tc := range []struct {
		name, token string
		code        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "nope", http.StatusForbidden},
		{"prefix of the token", testToken[:4], http.StatusForbidden},
		{"right token", testToken, http.StatusOK},
	} {
		resp, _ := h.adminDo(t, http.MethodGet, tc.token, nil)
		if resp.StatusCode != tc.code {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.code)
		}
		if tc.code == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
	}
	// A wrong token changes nothing.
	h.adminDo(t, http.MethodPost, "nope", map[string]any{"quota_exhausted": true})
	if h.node.Faults().QuotaExhausted {
		t.Error("a request with a wrong token switched a fault")
	}
	// An empty configured token refuses everyone.
	rec := httpRecorder(h.node.AdminHandler(""), http.MethodGet, "/admin/faults", "Bearer ")
	if rec != http.StatusUnauthorized {
		t.Errorf("empty configured token, empty bearer: status %d, want 401", rec)
	}
	if rec := httpRecorder(h.node.AdminHandler(""), http.MethodGet, "/admin/faults", "Bearer x"); rec != http.StatusForbidden {
		t.Errorf("empty configured token: status %d, want 403", rec)
	}
	// Invalid patches are rejected whole, naming every problem.
	resp, _ := h.adminDo(t, http.MethodPost, testToken, map[string]any{"error_rate": 2, "retire": []string{"nope"}, "quota_exhausted": true})
	if resp.StatusCode != http.StatusBadRequest || h.node.Faults().QuotaExhausted {
		t.Errorf("invalid patch: status %d, quota %v; want 400 and nothing changed", resp.StatusCode, h.node.Faults().QuotaExhausted)
	}
}

func httpRecorder(hd http.Handler, method, path, auth string) int {
	req, _ := http.NewRequest(method, path, nil)
	req.Header.Set("Authorization", auth)
	rec := &statusRecorder{header: http.Header{}}
	hd.ServeHTTP(rec, req)
	return rec.code
}

type statusRecorder struct {
	header http.Header
	code   int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(c int)           { r.code = c }

func TestFaults(t *testing.T) {
	h := start(t, Config{Speed: 4})
	ok := func() int {
		resp := h.post(t, "/v1/chat/completions", chatBody("x", 1, false))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := ok(); c != http.StatusOK {
		t.Fatalf("before faults: status %d", c)
	}

	h.adminDo(t, http.MethodPost, testToken, map[string]any{"quota_exhausted": true, "retry_after_s": 7})
	resp := h.post(t, "/v1/chat/completions", chatBody("x", 1, false))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("quota exhausted: status %d Retry-After %q, want 429 and 7", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if c := errorCode(t, resp); c != "insufficient_quota" {
		t.Errorf("quota exhausted: code %q", c)
	}
	h.adminDo(t, http.MethodPost, testToken, map[string]any{"quota_exhausted": false})

	h.adminDo(t, http.MethodPost, testToken, map[string]any{"retire": []string{testModel}})
	resp = h.post(t, "/v1/chat/completions", chatBody("x", 1, false))
	if resp.StatusCode != http.StatusNotFound || errorCode(t, resp) != "model_not_found" {
		t.Errorf("retired: status %d, want 404 model_not_found", resp.StatusCode)
	}
	h.adminDo(t, http.MethodPost, testToken, map[string]any{"unretire": []string{testModel}})

	h.adminDo(t, http.MethodPost, testToken, map[string]any{"driver": "535.104"})
	resp = h.post(t, "/v1/chat/completions", chatBody("x", 1, false))
	if resp.StatusCode != http.StatusServiceUnavailable || errorCode(t, resp) != "model_incompatible" {
		t.Errorf("driver below the model's minimum: status %d, want 503 model_incompatible", resp.StatusCode)
	}
	h.adminDo(t, http.MethodPost, testToken, map[string]any{"driver": "555.42"})
	if c := ok(); c != http.StatusOK {
		t.Errorf("driver upgraded: status %d, want 200", c)
	}

	h.adminDo(t, http.MethodPost, testToken, map[string]any{"error_rate": 1})
	if c := ok(); c != http.StatusInternalServerError {
		t.Errorf("error rate 1: status %d, want 500", c)
	}
	_, f := h.adminDo(t, http.MethodDelete, testToken, nil)
	if f.ErrorRate != 0 || f.Driver != "550.127.05" || f.QuotaExhausted || len(f.Retired) != 0 {
		t.Errorf("after reset: %+v", f)
	}
	if c := ok(); c != http.StatusOK {
		t.Errorf("after reset: status %d", c)
	}
}

// TestErrorRateSeeded checks that the error fault is a seeded stream: the
// same seed fails the same requests.
func TestErrorRateSeeded(t *testing.T) {
	codes := func(seed uint64) string {
		h := start(t, Config{Seed: seed, Speed: 20})
		h.adminDo(t, http.MethodPost, testToken, map[string]any{"error_rate": 0.5})
		var sb strings.Builder
		for range 40 {
			resp := h.post(t, "/v1/completions", map[string]any{"model": testModel, "prompt": "x", "max_tokens": 1})
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				sb.WriteByte('.')
			} else {
				sb.WriteByte('x')
			}
		}
		return sb.String()
	}
	a, b, c := codes(1), codes(1), codes(2)
	if a != b {
		t.Errorf("seed 1 twice: %s vs %s", a, b)
	}
	if a == c {
		t.Errorf("seeds 1 and 2 gave the same failures %s", a)
	}
	if n := strings.Count(a, "x"); n < 8 || n > 32 {
		t.Errorf("error rate 0.5 failed %d of 40 (%s)", n, a)
	}
}

func TestScenarioDriverCompat(t *testing.T) {
	sc, err := scenarios.LoadNamed("gameday-driver-upgrade")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := FromScenario(sc, "use-h100-8b-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 1 || cfg.Models[0].Name != testModel || cfg.Driver != "550.127.05" || cfg.MaxBatch != 256 {
		t.Fatalf("FromScenario = %+v", cfg)
	}
	if cfg.Models[0].KVTokens <= 0 {
		t.Errorf("KV tokens %d, want the registry's fit", cfg.Models[0].KVTokens)
	}
	if err := cfg.Compat(testModel, "550.127.05"); err != nil {
		t.Errorf("compat on the pool's own driver: %v", err)
	}
	err = cfg.Compat(testModel, "470.57")
	if err == nil || !strings.Contains(err.Error(), "driver 470.57 <") {
		t.Errorf("compat on driver 470.57: %v, want a driver refusal", err)
	}
	if _, err := FromScenario(sc, "nope"); err == nil {
		t.Error("FromScenario with an unknown pool: no error")
	}
	h := start(t, cfg)
	h.adminDo(t, http.MethodPost, testToken, map[string]any{"driver": "470.57"})
	resp := h.post(t, "/v1/chat/completions", chatBody("x", 1, false))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after the driver change: status %d, want 503", resp.StatusCode)
	}
	resp.Body.Close()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestCancelFreesSlot(t *testing.T) {
	h := start(t, Config{MaxBatch: 1})
	// A holds the only batch slot for ~76 s of modelled decode.
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	respA := h.postCtx(ctxA, t, "/v1/chat/completions", chatBody("a", 10000, true))
	br := make([]byte, 1)
	if _, err := respA.Body.Read(br); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A running", func() bool { return h.node.Stats()[0].Running == 1 })

	// C queues behind A, then gives up: it leaves the queue at once.
	ctxC, cancelC := context.WithCancel(context.Background())
	doneC := make(chan struct{})
	go func() {
		defer close(doneC)
		b, _ := json.Marshal(chatBody("c", 3, false))
		req, _ := http.NewRequestWithContext(ctxC, http.MethodPost, h.srv.URL+"/v1/chat/completions", strings.NewReader(string(b)))
		if resp, err := h.srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "C waiting", func() bool { return h.node.Stats()[0].Waiting == 1 })
	cancelC()
	<-doneC
	waitFor(t, "C gone from the queue", func() bool { return h.node.Stats()[0].Waiting == 0 })

	// B queues behind A; A's client leaves; B gets the slot.
	doneB := make(chan int, 1)
	go func() {
		b, _ := json.Marshal(chatBody("b", 3, false))
		resp, err := h.srv.Client().Post(h.srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(b)))
		if err != nil {
			doneB <- 0
			return
		}
		resp.Body.Close()
		doneB <- resp.StatusCode
	}()
	waitFor(t, "B waiting", func() bool { return h.node.Stats()[0].Waiting == 1 })
	cancelA()
	respA.Body.Close()
	select {
	case code := <-doneB:
		if code != http.StatusOK {
			t.Errorf("B: status %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B still waiting 10 s after A's client left (A alone would take ~76 s)")
	}
	waitFor(t, "engine empty", func() bool {
		s := h.node.Stats()[0]
		return s.Running == 0 && s.Waiting == 0 && s.KVUsed == 0
	})
}

const canary = "CANARY-9f1c-do-not-log"

func TestPromptNeverLeaks(t *testing.T) {
	h := start(t, Config{Speed: 4})
	prompt := "please summarise " + canary + " thanks"
	for _, body := range []map[string]any{
		chatBody(prompt, 3, true),
		chatBody(prompt, 3, false),
		{"model": testModel, "prompt": prompt, "max_tokens": 2},
		{"model": canary, "prompt": prompt}, // unknown model named by the client
		{"model": testModel, "messages": []any{map[string]any{"content": canary}}, "max_tokens": -1}, // rejected
	} {
		resp := h.post(t, "/v1/chat/completions", body)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := h.srv.Client().Get(h.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "fleetdrill_node_requests_total") {
		t.Fatalf("/metrics lacks the request counter:\n%s", metrics)
	}
	if strings.Contains(string(metrics), canary) {
		t.Errorf("/metrics contains the prompt canary")
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "prompt_tokens=") {
		t.Fatalf("no request log lines:\n%s", logs)
	}
	if strings.Contains(logs, canary) || strings.Contains(logs, "summarise") {
		t.Errorf("logs contain prompt content:\n%s", logs)
	}
}

func TestMetrics(t *testing.T) {
	h := start(t, Config{Speed: 4})
	resp := h.post(t, "/v1/chat/completions", chatBody("x", 5, true))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	h.post(t, "/v1/chat/completions", map[string]any{"model": "nope", "messages": []any{map[string]any{"content": "x"}}}).Body.Close()
	gather := func() map[string]float64 {
		mfs, err := h.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetName()+"="+l.GetValue())
				}
				key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
				switch {
				case m.Counter != nil:
					got[key] = m.Counter.GetValue()
				case m.Gauge != nil:
					got[key] = m.Gauge.GetValue()
				case m.Histogram != nil:
					got[key] = float64(m.Histogram.GetSampleCount())
				}
			}
		}
		return got
	}
	// The loop publishes its queue gauges when it next wakes after the
	// last token, and a handler counts its request after the client may
	// have read [DONE]: wait for the series to settle.
	want := map[string]float64{
		"fleetdrill_node_requests_total{code=200,endpoint=chat}":          1,
		"fleetdrill_node_requests_total{code=404,endpoint=chat}":          1,
		"fleetdrill_node_generated_tokens_total{model=" + testModel + "}": 5,
		"fleetdrill_node_ttft_seconds{model=" + testModel + "}":           1,
		"fleetdrill_node_e2e_seconds{model=" + testModel + "}":            1,
		"fleetdrill_node_running_sequences{model=" + testModel + "}":      0,
		"fleetdrill_node_waiting_sequences{model=" + testModel + "}":      0,
	}
	var got map[string]float64
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = gather()
		settled := true
		for key, w := range want {
			settled = settled && got[key] == w
		}
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	for key, w := range want {
		if got[key] != w {
			t.Errorf("%s = %v, want %v", key, got[key], w)
		}
	}
}

// TestNoGoroutineLeak runs requests, stops the node with some still in
// flight, and checks every goroutine it started is gone.
func TestNoGoroutineLeak(t *testing.T) {
	settle := func(limit int) int {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= limit || time.Now().After(deadline) {
				return n
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	before := runtime.NumGoroutine()
	func() {
		h := start(t, Config{Speed: 4})
		for i := range 3 {
			resp := h.post(t, "/v1/chat/completions", chatBody(fmt.Sprint(i), 3, i%2 == 0))
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		// Two long streams in flight when the node stops.
		for range 2 {
			resp := h.post(t, "/v1/chat/completions", chatBody("long", 100000, true))
			defer resp.Body.Close()
			resp.Body.Read(make([]byte, 1))
		}
		h.stop()
	}()
	http.DefaultClient.CloseIdleConnections()
	if after := settle(before); after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before, %d after stop\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}
