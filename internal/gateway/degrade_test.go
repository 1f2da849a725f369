package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// saturatedLadder is the eu-residency scenario with a class scrape below
// interactive, one replica of two slots in the US, and a ladder of one
// rung that sheds scrape while half the replicas are full, held 1 s (model
// time, as every duration here).
func saturatedLadder(t *testing.T, deferrable bool) []string {
	t.Helper()
	return []string{
		"pools.use-h100-8b.max_batch=2", "policy.health.timeout=1h", "policy.admission.defer_for=1s",
		"classes=[{name: interactive, priority: 10, deadline: 1h}, {name: scrape, priority: 1, deadline: 1h, deferrable: " +
			strconv.FormatBool(deferrable) + "}]",
		"policy.degradation=[{name: shed-scrape, action: shed-batch, class: scrape, trigger: {saturation: 0.5}, hold: 1s}]",
	}
}

// The ladder engages on the core's saturation (two requests block the one
// replica), sheds the scrape class while engaged — refused 429 load-shed,
// or deferred when the class is deferrable — and releases once the replica
// frees up and the rung has been held. Model time runs 100 times faster
// than the wall: the ladder is evaluated every 50 ms of wall time.
func TestLadderShedsUnderSaturation(t *testing.T) {
	for _, deferrable := range []bool{false, true} {
		t.Run("deferrable="+strconv.FormatBool(deferrable), func(t *testing.T) {
			us := newFake(t)
			us.mode.Store(modeBlock)
			h := newHarness(t, testScenario(t, saturatedLadder(t, deferrable)...), map[string][]string{"use-h100-8b": {us.srv.URL}},
				func(c *Config) { c.Speed = 100; withQueueTimeout(time.Hour)(c) })
			step := func() float64 { return h.metric(signals.DegradationStep.Name, nil) }
			engaged := func() float64 {
				return h.metric("fleetdrill_gateway_degradation_step_engaged", map[string]string{"step": "shed-scrape", "action": "shed-batch"})
			}
			require.Zero(t, step())
			require.Zero(t, engaged())

			blocked := make(chan int, 2)
			for range 2 {
				go func() {
					resp, _ := h.postAs(keyGlobal, "interactive", chatBody(false, "x"))
					blocked <- resp.StatusCode
				}()
			}
			<-us.started
			<-us.started
			eventually(t, "the rung engaged", func() bool { return step() == 1 })
			assert.Equal(t, 1.0, engaged())

			shedDone := make(chan *http.Response, 1)
			go func() {
				resp, _ := h.postAs(keyGlobal, "scrape", chatBody(false, "x"))
				shedDone <- resp
			}()
			if !deferrable {
				resp := <-shedDone
				require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
				assert.Equal(t, "rejected", resp.Header.Get("X-Fleetdrill-Outcome"))
				assert.Equal(t, sched.ReasonLoadShed, resp.Header.Get("X-Fleetdrill-Reason"))
				assert.Equal(t, "5", resp.Header.Get("Retry-After"), "the ladder's next evaluation, model seconds")
				assert.Equal(t, "0", resp.Header.Get("X-Fleetdrill-Attempts"), "never offered to the core")
				assert.Equal(t, int64(2), us.hits.Load(), "never sent upstream")
				assert.Equal(t, 1.0, h.metric(signals.Rejected.Name, map[string]string{"class": "scrape", "reason": sched.ReasonLoadShed}))
				assert.Equal(t, 1.0, h.metric("fleetdrill_gateway_requests_total", map[string]string{"class": "scrape", "outcome": "rejected"}))
			} else {
				eventually(t, "a deferral", func() bool {
					return h.metric("fleetdrill_gateway_deferrals_total", map[string]string{"class": "scrape", "reason": sched.ReasonLoadShed}) >= 1
				})
			}
			assert.Equal(t, 1.0, h.metric("fleetdrill_gateway_degraded_requests_total", map[string]string{"action": "shed"}))

			// The replica frees up: the rung is released after its hold.
			us.Release()
			assert.Equal(t, http.StatusOK, <-blocked)
			assert.Equal(t, http.StatusOK, <-blocked)
			eventually(t, "the rung released", func() bool { return step() == 0 })
			assert.Zero(t, engaged())
			if deferrable {
				// The deferred request went on once its class was no
				// longer shed: each deferral counted once, as the
				// core's are (an offer, deferred).
				resp := <-shedDone
				require.Equal(t, http.StatusOK, resp.StatusCode)
				n, err := strconv.Atoi(resp.Header.Get("X-Fleetdrill-Deferrals"))
				require.NoError(t, err)
				assert.GreaterOrEqual(t, n, 1)
				assert.Equal(t, float64(n), h.metric("fleetdrill_gateway_deferrals_total", map[string]string{"class": "scrape", "reason": sched.ReasonLoadShed}))
				assert.Equal(t, strconv.Itoa(n+1), resp.Header.Get("X-Fleetdrill-Attempts"))
			} else {
				resp, _ := h.postAs(keyGlobal, "scrape", chatBody(false, "x"))
				assert.Equal(t, http.StatusOK, resp.StatusCode, "no longer shed")
			}
			assert.Equal(t, 1.0, h.metric("fleetdrill_gateway_degraded_requests_total", map[string]string{"action": "shed"}), "counted once")
			logs := h.log.String()
			assert.Contains(t, logs, `"msg":"degradation","step":"shed-scrape","action":"shed-batch","engaged":true`)
			assert.Contains(t, logs, `"msg":"degradation","step":"shed-scrape","action":"shed-batch","engaged":false`)

			mfs, err := h.reg.Gather()
			require.NoError(t, err)
			problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
			require.NoError(t, err)
			assert.Empty(t, problems)
		})
	}
}

// upstreamBody is the fake's last request body, decoded.
func upstreamBody(t *testing.T, f *fake) map[string]any {
	t.Helper()
	var m map[string]any
	s, _ := f.lastBody.Load().(string)
	require.NoError(t, json.Unmarshal([]byte(s), &m), "upstream body %q", s)
	return m
}

// On the default scenario (llama-3.1-70b falls back to llama-3.1-8b), a
// failed attempt engages both rungs of a ladder triggered by the error rate,
// one per evaluation: cap-output rewrites the output limit sent upstream,
// smaller-model sends 70b requests to 8b, the body saying so.
func TestLadderCapsOutputAndSubstitutesTheModel(t *testing.T) {
	small, big := newFake(t), newFake(t)
	sc := libraryScenario(t, "default", "policy.retries.max_attempts=1", "policy.health.threshold=100",
		`policy.degradation=[{name: cap, action: cap-output, max_output_tokens: 8, trigger: {error_rate: 0.5}, hold: 1h},
			{name: smaller, action: smaller-model, model: llama-3.1-70b, trigger: {error_rate: 0.5}, hold: 1h}]`)
	h := newHarness(t, sc, map[string][]string{"use-h100-8b": {small.srv.URL}, "use-h100-70b": {big.srv.URL}},
		func(c *Config) { c.Speed = 100; c.Keys = []Key{{"retail", keyGlobal}} })
	body := func(model string, limits string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"x"}]` + limits + `}`
	}

	small.mode.Store(modeFail)
	resp, _ := h.postAs(keyGlobal, "", body("llama-3.1-8b", `,"max_tokens":16`))
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Equal(t, 16.0, upstreamBody(t, small)["max_tokens"], "nothing engaged yet")
	eventually(t, "both rungs engaged", func() bool { return h.metric(signals.DegradationStep.Name, nil) == 2 })
	small.mode.Store(modeOK)

	for _, tc := range []struct {
		name, model, limits string
		want                map[string]any // fields of the body sent upstream; nil: absent
		wantServed          string
	}{
		{name: "smaller model, capped", model: "llama-3.1-70b", limits: `,"max_tokens":100`,
			want: map[string]any{"model": "llama-3.1-8b", "max_tokens": 8.0}, wantServed: "llama-3.1-8b"},
		{name: "max_completion_tokens capped", model: "llama-3.1-8b", limits: `,"max_completion_tokens":50`,
			want: map[string]any{"model": "llama-3.1-8b", "max_completion_tokens": 8.0, "max_tokens": nil}, wantServed: "llama-3.1-8b"},
		{name: "no limit: the default estimate is capped, max_tokens set", model: "llama-3.1-8b",
			want: map[string]any{"max_tokens": 8.0, "max_completion_tokens": nil}, wantServed: "llama-3.1-8b"},
		{name: "under the cap: untouched", model: "llama-3.1-8b", limits: `,"max_tokens":4`,
			want: map[string]any{"max_tokens": 4.0}, wantServed: "llama-3.1-8b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := h.postAs(keyGlobal, "", body(tc.model, tc.limits))
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, tc.wantServed, resp.Header.Get("X-Fleetdrill-Model"))
			got := upstreamBody(t, small)
			for k, v := range tc.want {
				assert.Equal(t, v, got[k], "upstream %s", k)
			}
		})
	}
	assert.Zero(t, big.hits.Load(), "70b requests went to the smaller model")
	assert.Equal(t, 3.0, h.metric("fleetdrill_gateway_degraded_requests_total", map[string]string{"action": "capped"}))
	assert.Equal(t, 1.0, h.metric("fleetdrill_gateway_degraded_requests_total", map[string]string{"action": "substituted"}))
	assert.Zero(t, h.metric("fleetdrill_gateway_degraded_requests_total", map[string]string{"action": "shed"}))
	// Counted under the model it was sent for, as a run's report counts it.
	assert.Zero(t, h.metric(signals.Requests.Name, map[string]string{"model": "llama-3.1-70b"}))
	assert.Equal(t, 4.0, h.metric(signals.Requests.Name, map[string]string{"model": "llama-3.1-8b", "outcome": "completed"}))
}

// The gateway has no answer cache: a ladder with cached-answers is refused
// at start, by rung, rather than run without it.
func TestLadderCachedAnswersCannotRunLive(t *testing.T) {
	us := newFake(t)
	sc := testScenario(t, `policy.degradation=[{name: shed, action: shed-batch, class: interactive, trigger: {queue_wait: 5s}},
		{name: cache, action: cached-answers, class: interactive, hit_rate: 0.3, cache_age: 10m, trigger: {queue_wait: 10s}}]`)
	_, err := New(Config{Scenario: sc, Backends: map[string][]string{"use-h100-8b": {us.srv.URL}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "policy.degradation[1] (cache): cached-answers cannot run live: the gateway has no answer cache")
	assert.False(t, strings.Contains(err.Error(), "policy.degradation[0]"), "shed-batch runs live")
}
