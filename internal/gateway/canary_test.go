package gateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Tenants of the canary game day: retail is US-bound, research may go
// anywhere, bank-eu is EU-bound (the candidate is in the US).
const (
	keyRetail   = "sk-retail-0123456789abcdef"
	keyResearch = "sk-research-0123456789abcdef"
	keyBank     = "sk-bank-0123456789abcdef"
)

// canaryHarness serves the gameday-canary-rollback scenario (baseline
// use-h100-8b, candidate neo-h100, both in the US; euw-h100-8b in the EU)
// with one fake backend per pool, and the canary set by sets: it starts
// at once and its checks read error_rate > 2% only, unless sets say
// otherwise.
type canaryHarness struct {
	*harness
	base, neo, eu *fake
	mu            sync.Mutex
	decisions     []sched.RolloutDecision
	decidedAt     []time.Duration // on the gateway's clock
	failedAt      []time.Duration // failed attempts on the candidate, on the gateway's clock
}

// noShadow drops the game day's shadow traffic.
const noShadow = "canaries[0].shadow=null"

func newCanaryHarness(t *testing.T, speed float64, sets ...string) *canaryHarness {
	t.Helper()
	ch := &canaryHarness{base: newFake(t), neo: newFake(t), eu: newFake(t)}
	base := []string{"canaries[0].start=0s", `canaries[0].rollback_if=["error_rate > 2%"]`}
	obs := &Observer{
		Canary: func(at time.Duration, d sched.RolloutDecision) {
			ch.mu.Lock()
			defer ch.mu.Unlock()
			ch.decisions = append(ch.decisions, d)
			ch.decidedAt = append(ch.decidedAt, at)
		},
		Attempt: func(at time.Duration, replica int, pool string, _ int, _ bool) {
			if pool == "neo-h100" {
				ch.mu.Lock()
				defer ch.mu.Unlock()
				ch.failedAt = append(ch.failedAt, at)
			}
		},
	}
	ch.harness = newHarness(t, libraryScenario(t, "gameday-canary-rollback", append(base, sets...)...),
		map[string][]string{"use-h100-8b": {ch.base.srv.URL}, "neo-h100": {ch.neo.srv.URL}, "euw-h100-8b": {ch.eu.srv.URL}},
		func(c *Config) {
			c.Speed = speed
			c.Observer = obs
			c.Keys = []Key{{"retail", keyRetail}, {"research", keyResearch}, {"bank-eu", keyBank}}
		})
	return ch
}

// lastDecision is the rollout's last decision and when it was applied.
func (ch *canaryHarness) lastDecision() (sched.RolloutDecision, time.Duration, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.decisions) == 0 {
		return sched.RolloutDecision{}, 0, false
	}
	return ch.decisions[len(ch.decisions)-1], ch.decidedAt[len(ch.decidedAt)-1], true
}

// send posts n chat requests of tenant key, 8 at a time, and returns how
// many the client saw answered by each pool; every one must answer 200.
func (ch *canaryHarness) send(t *testing.T, key string, n int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	pools := map[string]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			resp, body, err := ch.post(context.Background(), key, chatBody(false, fmt.Sprintf("request %d", i)))
			if !assert.NoError(t, err) || !assert.Equal(t, http.StatusOK, resp.StatusCode, body) {
				return
			}
			mu.Lock()
			pools[resp.Header.Get("X-Fleetdrill-Pool")]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return pools
}

// The weighted split follows the share: with the canary held at 30 %,
// the requests the core draws onto it (a hash of the seed and the
// request's ID) reach the candidate, and their count is within four
// standard deviations of the binomial's mean. Only the canary reaches the
// candidate; a request answered there says so.
func TestCanaryWeightedSplit(t *testing.T) {
	const n, p = 400, 0.3
	ch := newCanaryHarness(t, 1, "canaries[0].steps=[{share: 0.3}]", noShadow)
	eventually(t, "the canary started", func() bool { s, _ := ch.gw.CanaryShare("neocloud"); return s == p })
	pools := ch.send(t, keyRetail, n)
	got := pools["neo-h100"]
	assert.Equal(t, n, got+pools["use-h100-8b"], "%v", pools)
	sd := math.Sqrt(n * p * (1 - p))
	assert.InDelta(t, n*p, float64(got), 4*sd, "canary answered %d of %d at share %g (binomial sd %.1f)", got, n, p, sd)
	assert.Equal(t, int64(got), ch.neo.hits.Load(), "the candidate saw only the canary's requests")
	assert.Equal(t, 1.0, ch.metric("fleetdrill_canary_decisions_total", map[string]string{"canary": "neocloud", "action": "start"}))
	assert.Equal(t, p, ch.metric("fleetdrill_canary_share", map[string]string{"canary": "neocloud"}))
}

// A canary attempt that fails is retried on the baseline: the client gets
// its answer from there, two attempts later, and the candidate saw one.
func TestCanaryFailedAttemptRetriedOnBaseline(t *testing.T) {
	ch := newCanaryHarness(t, 1, "canaries[0].steps=[{share: 1}]", "policy.health.threshold=1000", noShadow)
	ch.neo.mode.Store(modeFail)
	eventually(t, "the canary started", func() bool { s, _ := ch.gw.CanaryShare("neocloud"); return s == 1 })
	resp, body := ch.postAs(keyRetail, "", chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "use-h100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
	assert.Equal(t, "2", resp.Header.Get("X-Fleetdrill-Attempts"))
	assert.Equal(t, int64(1), ch.neo.hits.Load())
	assert.Equal(t, int64(1), ch.base.hits.Load())
}

// A breach rolls the canary back at the first evaluation due once the
// window holds min_requests failed canary attempts, and traffic goes back
// to the baseline at once: no request after the decision reaches the
// candidate, and no client saw a failure. Model time runs ten times the
// wall's: an evaluation every 2 s of model time is one every 200 ms.
func TestCanaryRollbackMovesTrafficBack(t *testing.T) {
	const every = 2 * time.Second
	ch := newCanaryHarness(t, 10, "canaries[0].steps=[{share: 1}]", "policy.health.threshold=1000", noShadow,
		"canaries[0].evaluate_every=2s", "canaries[0].window=1m", "canaries[0].min_requests=3")
	eventually(t, "the canary started", func() bool { s, _ := ch.gw.CanaryShare("neocloud"); return s == 1 })
	ch.neo.mode.Store(modeFail)
	for range 3 {
		resp, body := ch.postAs(keyRetail, "", chatBody(false, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.Equal(t, "use-h100-8b", resp.Header.Get("X-Fleetdrill-Pool"), "retried on the baseline")
	}
	eventually(t, "the rollback", func() bool { d, _, ok := ch.lastDecision(); return ok && d.Action == sched.ActRollback })
	d, at, _ := ch.lastDecision()
	ch.mu.Lock()
	third := ch.failedAt[2]
	ch.mu.Unlock()
	// The evaluations are due at start + n × every (start 0); the one that
	// rolled back ran at the first due at or after the third failure (the
	// decision's own time is that evaluation's, later by however late its
	// timer fired).
	due := d.At / every * every
	assert.LessOrEqual(t, due-third, every, "rolled back at the evaluation due %v, the third failure at %v", due, third)
	assert.GreaterOrEqual(t, at, third)
	assert.Equal(t, 0.0, d.To)
	assert.Contains(t, d.Why, "error_rate")

	hits := ch.neo.hits.Load()
	pools := ch.send(t, keyRetail, 20)
	assert.Equal(t, map[string]int{"use-h100-8b": 20}, pools)
	assert.Equal(t, hits, ch.neo.hits.Load(), "nothing reaches the candidate after the rollback")
	assert.Equal(t, 0.0, ch.metric("fleetdrill_canary_share", map[string]string{"canary": "neocloud"}))
	assert.Equal(t, 1.0, ch.metric("fleetdrill_canary_decisions_total", map[string]string{"canary": "neocloud", "action": "rollback"}))
	assert.Zero(t, ch.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "failed"}))
	assert.Contains(t, ch.log.String(), `"msg":"canary","canary":"neocloud","action":"rollback"`)
}

// A shadow copy carries the original's body to the candidate; the client
// gets the original's answer, byte for byte (the candidate answers
// differently here), and the copy is in none of the client's series.
func TestShadowMirrorsTheBody(t *testing.T) {
	ch := newCanaryHarness(t, 1, "canaries[0].steps=[]", "canaries[0].shadow={share: 1}")
	ch.neo.usage.Store(`{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`) // its answer differs
	resp, body := ch.postAs(keyRetail, "", chatBody(false, "mirror me"))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, `{"id":"x","object":"chat.completion","model":"llama-3.1-8b","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`, body)
	assert.Equal(t, "use-h100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
	eventually(t, "the copy answered", func() bool {
		return ch.metric("fleetdrill_shadow_requests_total", map[string]string{"canary": "neocloud", "outcome": "completed"}) == 1
	})
	assert.Equal(t, ch.base.lastBody.Load(), ch.neo.lastBody.Load(), "the copy's body is the original's")
	assert.NotEqual(t, ch.base.lastHdr.Load().(http.Header).Get("Idempotency-Key"), ch.neo.lastHdr.Load().(http.Header).Get("Idempotency-Key"))
	// Only the original is a request.
	assert.Equal(t, 1.0, ch.metric("fleetdrill_gateway_requests_total", nil))
	assert.Equal(t, 1.0, ch.metric("fleetdrill_requests_total", map[string]string{"outcome": "completed"}))
	assert.Zero(t, ch.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "neo-h100"}))
	assert.Equal(t, 1.0, ch.metric("fleetdrill_request_duration_seconds", nil))
	var rep sched.RolloutReport
	ch.gw.CanaryInputs(func(ro *sched.Rollouts, _ *sched.Config, _ uint64) { rep = ro.Report(0) })
	assert.Equal(t, uint64(1), rep.ShadowSent)
	assert.Equal(t, uint64(1), rep.Shadow.Succeeded)
}

// A copy takes nothing of its tenant's quota: with retail allowed one
// request at a time and a copy held at the candidate, retail's next
// request is served. Without cancel_with_primary the copy outlives its
// original and completes when the candidate answers.
func TestShadowOutsideTenantQuota(t *testing.T) {
	ch := newCanaryHarness(t, 1, "canaries[0].steps=[]", "canaries[0].shadow={share: 1}", "tenants.retail.max_concurrency=1")
	ch.neo.mode.Store(modeBlock)
	for i := range 2 {
		resp, body := ch.postAs(keyRetail, "", chatBody(false, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d: %s", i, body)
		<-ch.neo.started // its copy is held at the candidate
	}
	assert.Equal(t, 2.0, ch.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": "completed"}))
	ch.neo.Release()
	eventually(t, "both copies completed", func() bool {
		return ch.metric("fleetdrill_shadow_requests_total", map[string]string{"canary": "neocloud", "outcome": "completed"}) == 2
	})
	assert.Zero(t, ch.metric("fleetdrill_shadow_requests_total", map[string]string{"canary": "neocloud", "outcome": "cancelled"}))
}

// With cancel_with_primary, a copy still running when its original ends is
// cancelled: the candidate sees its request's context end, and the copy
// counts as cancelled, not failed.
func TestShadowCancelledWithPrimary(t *testing.T) {
	ch := newCanaryHarness(t, 1, "canaries[0].steps=[]", "canaries[0].shadow={share: 1, cancel_with_primary: true}")
	ch.base.mode.Store(modeBlock)
	ch.neo.mode.Store(modeBlock)
	done := make(chan int, 1)
	go func() {
		resp, _ := ch.postAs(keyRetail, "", chatBody(false, "x"))
		done <- resp.StatusCode
	}()
	<-ch.base.started
	<-ch.neo.started
	ch.base.Release()
	require.Equal(t, http.StatusOK, <-done)
	select {
	case <-ch.neo.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the copy was not cancelled with its original")
	}
	eventually(t, "the copy counted as cancelled", func() bool {
		return ch.metric("fleetdrill_shadow_requests_total", map[string]string{"canary": "neocloud", "outcome": "cancelled"}) == 1
	})
	var rep sched.RolloutReport
	ch.gw.CanaryInputs(func(ro *sched.Rollouts, _ *sched.Config, _ uint64) { rep = ro.Report(0) })
	assert.Equal(t, uint64(1), rep.ShadowCancelled)
	assert.Zero(t, rep.Shadow.Attempts, "a cancelled copy is no attempt of the candidate's")
}

// Copies are shed when their slots are full: with one slot (max_slots of
// 0.4 % of the candidate's 256) one copy runs, one queues behind it and
// the third is shed; the originals are all served at once.
func TestShadowShedWhenSlotsFull(t *testing.T) {
	ch := newCanaryHarness(t, 1, "canaries[0].steps=[]", "canaries[0].shadow={share: 1, max_slots: 0.004}")
	ch.neo.mode.Store(modeBlock)
	for i := range 3 {
		resp, body := ch.postAs(keyRetail, "", chatBody(false, "x"))
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d: %s", i, body)
		if i == 0 {
			<-ch.neo.started
		}
	}
	assert.Equal(t, 1.0, ch.metric("fleetdrill_shadow_requests_total", map[string]string{"canary": "neocloud", "outcome": "shed"}))
	assert.Equal(t, int64(1), ch.neo.hits.Load(), "one copy at a time")
	ch.neo.Release()
	eventually(t, "the queued copy ran after the first", func() bool {
		return ch.metric("fleetdrill_shadow_requests_total", map[string]string{"canary": "neocloud", "outcome": "completed"}) == 2
	})
	assert.Equal(t, int64(2), ch.neo.hits.Load())
	var rep sched.RolloutReport
	ch.gw.CanaryInputs(func(ro *sched.Rollouts, _ *sched.Config, _ uint64) { rep = ro.Report(0) })
	assert.Equal(t, uint64(3), rep.ShadowSent)
	assert.Equal(t, uint64(1), rep.ShadowShed)
}

// Residency holds for canary and shadow traffic alike: with the canary at
// 100 % and every request mirrored, bank-eu's requests (EU-bound; the
// candidate is in the US) never reach the candidate, while research's
// (bound nowhere) all do, twice.
func TestCanaryAndShadowKeepResidency(t *testing.T) {
	ch := newCanaryHarness(t, 1, "canaries[0].steps=[{share: 1}]", "canaries[0].shadow={share: 1}")
	eventually(t, "the canary started", func() bool { s, _ := ch.gw.CanaryShare("neocloud"); return s == 1 })
	pools := ch.send(t, keyBank, 50)
	assert.Equal(t, map[string]int{"euw-h100-8b": 50}, pools)
	assert.Zero(t, ch.neo.hits.Load(), "an EU-bound request reached the US candidate")
	// A request on the canary is not mirrored to it: research's go to the
	// candidate once each.
	pools = ch.send(t, keyResearch, 20)
	assert.Equal(t, map[string]int{"neo-h100": 20}, pools)
	assert.Equal(t, int64(20), ch.neo.hits.Load())
	var residency uint64
	ch.gw.CanaryInputs(func(_ *sched.Rollouts, _ *sched.Config, r uint64) { residency = r })
	assert.Zero(t, residency)
}
