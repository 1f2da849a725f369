package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/node"
	"github.com/fleetdrill/fleetdrill/internal/signals"
)

// catalogueTraffic runs requests that touch every catalogue series the
// gateway exports, on the model-retirement game day (llama-3.1-70b falls
// back to llama-3.1-8b for chat), one attempt per request:
//
//   - a streamed chat request for the 70B model, served by it;
//   - with the 70B model retiring, one served by the 8B fallback, then one
//     whose fallback fails (502; its backend unhealthy, so its breaker
//     opens and stays open);
//   - the 70B model back, one its backend answers 429 (rejected,
//     upstream-quota).
func catalogueTraffic(t *testing.T) *harness {
	t.Helper()
	const keyRetail = "sk-retail-0123456789"
	f31, f33, f8 := newFake(t), newFake(t), newFake(t)
	h := newHarness(t, libraryScenario(t, "gameday-model-retirement", "policy.retries.max_attempts=1", "policy.health.open_for=1h"),
		map[string][]string{"use-h100-70b-31": {f31.srv.URL}, "use-h100-70b-33": {f33.srv.URL}, "use-h100-8b": {f8.srv.URL}},
		func(c *Config) { c.Keys = []Key{{"retail", keyRetail}} })
	body := streamBodyFor("llama-3.1-70b")
	post := func(wantStatus int, wantModel string) {
		t.Helper()
		resp, b := h.postAs(keyRetail, "chat", body)
		require.Equal(t, wantStatus, resp.StatusCode, b)
		if wantModel != "" {
			require.Equal(t, wantModel, resp.Header.Get("X-Fleetdrill-Model"))
		}
	}
	post(http.StatusOK, "llama-3.1-70b")
	require.NoError(t, h.gw.SetRetiring("llama-3.1-70b", true))
	post(http.StatusOK, "llama-3.1-8b")
	f8.mode.Store(modeFail)
	f8.unhealthy.Store(true)
	post(http.StatusBadGateway, "")
	require.NoError(t, h.gw.SetRetiring("llama-3.1-70b", false))
	f31.throttleN.Store(1)
	post(http.StatusTooManyRequests, "")
	return h
}

func streamBodyFor(model string) string {
	return fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":16,"messages":[{"role":"user","content":"x"}]}`, model)
}

// Every catalogue series the gateway claims (Exported) is served, with the
// catalogue's type and exactly its label names, and no other catalogue
// series is: a change to either side fails here rather than on a
// dashboard. The canary series exist only with canaries, so a gateway of
// the canary game day (its rollout and shadow series at zero from the
// start) is gathered too, and the autoscaling series' of one with an
// autoscaled pool.
func TestCatalogueSeries(t *testing.T) {
	h := catalogueTraffic(t)
	mfs, err := h.reg.Gather()
	require.NoError(t, err)
	cmfs, err := newCanaryHarness(t, 1).reg.Gather()
	require.NoError(t, err)
	mfs = append(mfs, cmfs...)
	amfs, err := newAutoscaleHarness(t).reg.Gather()
	require.NoError(t, err)
	mfs = append(mfs, amfs...)
	served := map[string]bool{}
	for _, mf := range mfs {
		served[mf.GetName()] = true
	}
	claimed := map[string]bool{}
	for _, s := range Exported {
		claimed[s.Name] = true
	}
	for _, s := range signals.All {
		if !claimed[s.Name] {
			assert.False(t, served[s.Name], "%s is served but not in Exported", s.Name)
		}
	}
	for _, s := range Exported {
		assert.True(t, served[s.Name], "%s not served", s.Name)
		for _, mf := range mfs {
			if mf.GetName() != s.Name {
				continue
			}
			assert.Equal(t, string(s.Type), strings.ToLower(mf.GetType().String()), "%s: type", s.Name)
			assert.Equal(t, s.Help, mf.GetHelp(), "%s: help", s.Name)
			want := slices.Sorted(slices.Values(s.Labels))
			for _, m := range mf.GetMetric() {
				var got []string
				for _, lp := range m.GetLabel() {
					got = append(got, lp.GetName())
				}
				slices.Sort(got)
				assert.Equal(t, want, got, "%s: label names", s.Name)
			}
		}
	}

	// What the traffic should have counted.
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{signals.TTFT.Name, map[string]string{"model": "llama-3.1-70b", "pool": "use-h100-70b-31", "region": "us-east", "class": "chat"}, 1},
		{signals.TTFT.Name, map[string]string{"model": "llama-3.1-8b", "pool": "use-h100-8b", "region": "us-east", "class": "chat"}, 1},
		{signals.TPOT.Name, nil, 2},
		{signals.E2E.Name, nil, 2},
		{signals.Requests.Name, map[string]string{"model": "llama-3.1-70b", "class": "chat", "outcome": "completed"}, 2},
		{signals.Requests.Name, map[string]string{"outcome": "failed"}, 1},
		{signals.Requests.Name, map[string]string{"outcome": "rejected"}, 1},
		{signals.Rejected.Name, map[string]string{"class": "chat", "reason": "upstream-quota"}, 1},
		{signals.Rejected.Name, nil, 1},
		{signals.Throttled.Name, map[string]string{"pool": "use-h100-70b-31", "region": "us-east"}, 1},
		{signals.Routes.Name, map[string]string{"model": "llama-3.1-70b", "served_model": "llama-3.1-70b"}, 2},
		{signals.Routes.Name, map[string]string{"model": "llama-3.1-70b", "served_model": "llama-3.1-8b"}, 2},
		{signals.FallbacksOK.Name, map[string]string{"requested_model": "llama-3.1-70b", "fallback_model": "llama-3.1-8b"}, 1},
		{signals.FallbacksOK.Name, nil, 1},
		{signals.FallbacksFailed.Name, map[string]string{"requested_model": "llama-3.1-70b"}, 1},
		{signals.Breaker.Name, map[string]string{"pool": "use-h100-8b", "region": "us-east", "replica": "2"}, 1},
		{signals.Breaker.Name, nil, 1},
		{signals.CooledDown.Name, map[string]string{"pool": "use-h100-8b", "region": "us-east"}, 1},
		{signals.CooledDown.Name, nil, 1},
		{signals.DeploymentState.Name, map[string]string{"pool": "use-h100-8b"}, 2},
		{signals.DeploymentState.Name, nil, 2},
		{signals.QueueDepth.Name, nil, 0},
		{signals.WaitingRequests.Name, map[string]string{"class": "chat"}, 0}, // every request answered
		{signals.OldestWaiting.Name, nil, 0},
		{signals.Saturation.Name, nil, 0},
		{signals.DegradationStep.Name, nil, 0}, // no ladder: none engaged
	} {
		assert.Equal(t, tc.want, h.metric(tc.name, tc.labels), "%s%v", tc.name, tc.labels)
	}
}

// The gateway's series follow Prometheus' naming and help conventions.
func TestMetricsLint(t *testing.T) {
	h := catalogueTraffic(t)
	h.mustPost(keyGlobal, chatBody(false, "x")) // not a key of this harness: 401
	// promlint.NewWithMetricFamilies(Gather()) is what
	// testutil.GatherAndLint does; testutil itself would need a module
	// (kylelemons/godebug) go.mod does not list.
	mfs, err := h.reg.Gather()
	require.NoError(t, err)
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	require.NoError(t, err)
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// Saturation is the share of the fleet's batch slots in use; queue depth
// the requests the core holds for a model.
func TestSaturationAndQueueDepth(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeBlock)
	h := newHarness(t, testScenario(t, "pools.use-h100-8b.max_batch=1", "policy.health.timeout=1h", "policy.health.probe_interval=1h"),
		map[string][]string{"use-h100-8b": {us.srv.URL, us.srv.URL}})
	done := make(chan struct{}, 3)
	for range 3 {
		go func() {
			_, _, _ = h.post(t.Context(), keyGlobal, chatBody(false, "x"))
			done <- struct{}{}
		}()
	}
	eventually(t, "two requests running, one queued", func() bool {
		return len(us.started) == 2 && h.metric(signals.QueueDepth.Name, map[string]string{"model": "llama-3.1-8b"}) == 1
	})
	assert.Equal(t, 1.0, h.metric(signals.Saturation.Name, nil), "both replicas' single slots in use")
	us.Release()
	for range 3 {
		<-done
	}
	eventually(t, "an idle fleet", func() bool { return h.metric(signals.Saturation.Name, nil) == 0 })
	assert.Zero(t, h.metric(signals.QueueDepth.Name, nil))
}

// A pool's deployment state and cooled-down count follow its replicas'
// breakers: 0 and 0 with every breaker closed, 1 (partial outage) with one
// of two open, 2 (complete outage) with both.
func TestDeploymentStateFollowsBreakers(t *testing.T) {
	a, b := newFake(t), newFake(t)
	h := newHarness(t, testScenario(t, "policy.health.open_for=1h"), map[string][]string{"use-h100-8b": {a.srv.URL, b.srv.URL}})
	pool := map[string]string{"pool": "use-h100-8b", "region": "us-east"}
	state := func() (float64, float64) {
		return h.metric(signals.DeploymentState.Name, pool), h.metric(signals.CooledDown.Name, pool)
	}
	s, c := state()
	assert.Equal(t, [2]float64{0, 0}, [2]float64{s, c}, "healthy")
	a.unhealthy.Store(true)
	eventually(t, "a partial outage", func() bool { s, c := state(); return s == 1 && c == 1 })
	b.unhealthy.Store(true)
	eventually(t, "a complete outage", func() bool { s, c := state(); return s == 2 && c == 2 })
	assert.Equal(t, 1.0, h.metric(signals.Breaker.Name, map[string]string{"pool": "use-h100-8b", "region": "us-east", "replica": "1"}))
}

func TestDeploymentState(t *testing.T) {
	for _, tc := range []struct {
		closed, open, n int
		want            float64
	}{
		{2, 0, 2, 0},
		{1, 1, 2, 1},
		{1, 0, 2, 1}, // one half-open
		{0, 0, 2, 1}, // both half-open: trials may pass
		{0, 1, 2, 1},
		{0, 2, 2, 2},
		{0, 1, 1, 2},
	} {
		assert.Equal(t, tc.want, deploymentState(tc.closed, tc.open, tc.n), "deploymentState(%d, %d, %d)", tc.closed, tc.open, tc.n)
	}
}

// The gateway tells a backend the request's class, so that an emulated node
// labels its latencies as the gateway does.
func TestClassForwarded(t *testing.T) {
	got := make(chan string, 1)
	be := newFakeHandler(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("X-Fleetdrill-Class"):
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[]}`))
	})
	h := newHarness(t, testScenario(t, "policy.health.probe_interval=1h"), map[string][]string{"use-h100-8b": {be}})
	resp, _ := h.postAs(keyGlobal, "interactive", chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "interactive", <-got)
}

func TestStreamMeter(t *testing.T) {
	chat := func(content string) string {
		return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":` + content + `},"finish_reason":null}]}` + "\n\n"
	}
	node := `data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n" +
		chat(`"lorem"`) + chat(`" ipsum"`) + chat(`" dolor"`) +
		`data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}` + "\n\n"
	usage := `data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":12,"total_tokens":19}}` + "\n\n"
	for _, tc := range []struct {
		name       string
		events     []string // fed one read each, a millisecond apart
		wantTokens int
		wantUsage  int
		wantFirst  int // read of the first output event
		wantLast   int
	}{
		{"node chat, one read", []string{node + "data: [DONE]\n\n"}, 3, 0, 0, 0},
		{"one event per read", []string{chat(`"a"`), chat(`"b"`), chat(`"c"`), "data: [DONE]\n\n"}, 3, 0, 0, 2},
		{"role event first", []string{`data: {"choices":[{"delta":{"role":"assistant","content":""}}]}` + "\n\n", chat(`"a"`), chat(`"b"`)}, 2, 0, 1, 2},
		{"usage", []string{chat(`"a"`), chat(`"b"`), usage, "data: [DONE]\n\n"}, 2, 12, 0, 1},
		{"completions text", []string{`data: {"choices":[{"index":0,"text":"lorem","finish_reason":null}]}` + "\n\n",
			`data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}` + "\n\n"}, 1, 0, 0, 0},
		{"CRLF, no space, spaced JSON", []string{"data:{\"choices\": [{\"delta\": {\"content\" : \"a\"}}]}\r\n\r\n",
			"data: {\"choices\": [{\"delta\": {\"content\": \"b\"}}]}\r\n\r\n"}, 2, 0, 0, 1},
		{"escaped content", []string{chat(`"\"content\":\"\""`), chat(`"\n"`)}, 2, 0, 0, 1},
		{"null and empty content", []string{chat(`null`), chat(`""`)}, 0, 0, -1, -1},
		{"comments and other fields", []string{": keep-alive\n\n", "event: message\nid: 3\n" + chat(`"a"`)}, 1, 0, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			at := func(i int) time.Time {
				if i < 0 {
					return time.Time{}
				}
				return t0.Add(time.Duration(i) * time.Millisecond)
			}
			whole := &streamMeter{}
			for i, e := range tc.events {
				whole.feed([]byte(e), at(i))
			}
			assert.Equal(t, tc.wantTokens, whole.tokens, "tokens")
			assert.Equal(t, tc.wantUsage, whole.usage, "usage")
			assert.Equal(t, at(tc.wantFirst), whole.first, "first")
			assert.Equal(t, at(tc.wantLast), whole.last, "last")

			// Split anywhere, the count is the same.
			bytewise := &streamMeter{}
			for i, e := range tc.events {
				for j := range len(e) {
					bytewise.feed([]byte{e[j]}, at(i))
				}
			}
			assert.Equal(t, tc.wantTokens, bytewise.tokens, "tokens, fed byte by byte")
			assert.Equal(t, tc.wantUsage, bytewise.usage, "usage, fed byte by byte")
		})
	}

	t.Run("overlong line", func(t *testing.T) {
		s := &streamMeter{}
		long := `data: {"choices":[{"delta":{"content":"` + strings.Repeat("x", maxSSELine) + `"}}]}`
		for i := 0; i < len(long); i += 4096 {
			s.feed([]byte(long[i:min(i+4096, len(long))]), time.Unix(1, 0))
		}
		s.feed([]byte("\n\n"+chat(`"a"`)), time.Unix(2, 0))
		assert.Equal(t, 1, s.tokens, "the overlong event is skipped, the next counted")
		assert.LessOrEqual(t, cap(s.line), 2*maxSSELine)
	})
}

// The time per output token of a streamed response: its output events'
// span over the tokens after the first, in model seconds.
func TestTPOTFromStream(t *testing.T) {
	const gap = 20 * time.Millisecond
	be := newFakeHandler(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range 5 {
			if i > 0 {
				time.Sleep(gap)
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			fl.Flush()
		}
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	})
	const speed = 10
	h := newHarness(t, testScenario(t, "policy.health.probe_interval=1h"), map[string][]string{"use-h100-8b": {be}},
		func(c *Config) { c.Speed = speed })
	resp, _ := h.mustPost(keyGlobal, chatBody(true, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1.0, h.metric(signals.TPOT.Name, nil))
	got := h.histSum(signals.TPOT.Name, map[string]string{"model": "llama-3.1-8b", "pool": "use-h100-8b", "region": "us-east", "class": "interactive"})
	// The span runs from the first output event's arrival to the last's: a
	// first event held up on a loaded machine shortens it, so the lower
	// bound is half the gap. A TPOT in wall seconds would be a tenth.
	want := gap.Seconds() * speed
	assert.GreaterOrEqual(t, got, want/2, "TPOT %gs, want about %gs (model time)", got, want)
	assert.Less(t, got, 3*want, "TPOT %gs", got)
	require.Equal(t, 1.0, h.metric(signals.TTFT.Name, nil))

	// A non-streamed response says nothing of its first token.
	resp, _ = h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1.0, h.metric(signals.TTFT.Name, nil))
	assert.Equal(t, 2.0, h.metric(signals.E2E.Name, nil))
}

// newFakeHandler serves handler as a backend (its /healthz answers ok) and
// returns its URL.
func newFakeHandler(t testing.TB, handler http.HandlerFunc) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// Behind the gateway, an emulated node labels its latencies with the class
// the gateway forwards, and both report in model seconds: the gateway's
// time to first token, which contains the node's, is the longer.
func TestNodeBehindGateway(t *testing.T) {
	const speed = 50
	sc := testScenario(t, "policy.health.probe_interval=1h")
	cfg, err := node.FromScenario(sc, "use-h100-8b")
	require.NoError(t, err)
	nreg := prometheus.NewPedanticRegistry()
	cfg.Speed, cfg.Registerer, cfg.Gatherer = speed, nreg, nreg
	n, err := node.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = n.Run(ctx) }()
	nsrv := httptest.NewServer(n.Handler())
	t.Cleanup(func() { nsrv.Close(); cancel(); <-n.Stopped() })

	h := newHarness(t, sc, map[string][]string{"use-h100-8b": {nsrv.URL}}, func(c *Config) { c.Speed = speed })
	resp, body := h.postAs(keyGlobal, "interactive", chatBody(true, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	labels := map[string]string{"model": "llama-3.1-8b", "pool": "use-h100-8b", "region": "us-east", "class": "interactive"}
	require.Equal(t, 1.0, h.metric(signals.TTFT.Name, labels))
	require.Equal(t, 1.0, h.metric(signals.TPOT.Name, labels))
	nodeH := &harness{t: t, reg: nreg}
	eventually(t, "the node's count", func() bool { return nodeH.metric(signals.E2E.Name, labels) == 1 })
	require.Equal(t, 1.0, nodeH.metric(signals.TTFT.Name, labels))
	gwTTFT, nodeTTFT := h.histSum(signals.TTFT.Name, labels), nodeH.histSum(signals.TTFT.Name, labels)
	assert.Greater(t, gwTTFT, nodeTTFT, "the gateway's TTFT contains the node's")
	assert.Greater(t, nodeTTFT, 0.0)
}
