package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// attemptLog records the Observer's failed attempts.
type attemptLog struct {
	mu  sync.Mutex
	got []string // "replica status err"
}

func (a *attemptLog) observer(c *Config) {
	c.Observer = &Observer{Attempt: func(_ time.Duration, replica int, _ string, status int, err bool) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.got = append(a.got, attemptString(replica, status, err))
	}}
}

func attemptString(replica, status int, err bool) string {
	b, _ := json.Marshal([]any{replica, status, err})
	return string(b)
}

func (a *attemptLog) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.got...)
}

// twoPools is testScenario's fleet, one fake per pool, routed in order
// (the US pool first) with the given extra settings.
func twoPools(t *testing.T, opts []func(*Config), sets ...string) (h *harness, us, eu *fake, usRep, euRep int) {
	t.Helper()
	us, eu = newFake(t), newFake(t)
	h = newHarness(t, testScenario(t, append([]string{"policy.routing.strategy=ordered"}, sets...)...),
		map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}}, opts...)
	return h, us, eu, h.gw.ReplicaIndex("use-h100-8b", 0), h.gw.ReplicaIndex("euw-a100-8b", 0)
}

// TestFaultLayerQuota: an injected 429 is a provider's 429 to the rest of
// the gateway. The backend never sees the attempt; the Observer hears of
// a 429 (what the live recorder detects a quota exhaustion by); the core
// throttles the pool, so the request is retried on the other pool and no
// later request is sent to the throttled one while its Retry-After lasts.
func TestFaultLayerQuota(t *testing.T) {
	var log attemptLog
	h, us, eu, usRep, _ := twoPools(t, []func(*Config){log.observer}, "policy.retries.max_attempts=2", "policy.health.threshold=10")
	remove, err := h.gw.Faults().Inject([]int{usRep}, UpstreamFault{Kind: "quota-exhaustion", Status: http.StatusTooManyRequests,
		RetryAfter: time.Hour})
	require.NoError(t, err)
	defer remove()
	require.Equal(t, 1.0, h.metric("fleetdrill_gateway_injected_faults", map[string]string{"pool": "use-h100-8b", "kind": "quota-exhaustion"}))

	resp, body := h.mustPost(keyGlobal, chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "euw-a100-8b", resp.Header.Get("X-Fleetdrill-Pool"), "the retry went to the other pool")
	require.Equal(t, "2", resp.Header.Get("X-Fleetdrill-Attempts"))
	for range 3 {
		resp, _ := h.mustPost(keyGlobal, chatBody(false, "x"))
		require.Equal(t, "euw-a100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
		require.Equal(t, "1", resp.Header.Get("X-Fleetdrill-Attempts"), "sent straight to the pool that has quota")
	}
	require.Zero(t, us.hits.Load(), "the fault layer answered: the backend saw nothing")
	require.Equal(t, int64(4), eu.hits.Load())
	require.Equal(t, []string{attemptString(usRep, 429, false)}, log.list())
	require.True(t, faults.DetectedByStatus(429), "the live recorder detects a quota by this status")
	require.Equal(t, 1.0, h.metric("fleetdrill_gateway_fault_answers_total", map[string]string{"pool": "use-h100-8b", "status": "429"}))
	require.Equal(t, 1.0, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "use-h100-8b", "result": "throttled"}))
	require.Equal(t, 0.0, h.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "use-h100-8b", "result": "error"}),
		"quota is not ill health")
	require.Contains(t, h.log.String(), `"msg":"fault injected"`)
}

// TestFaultLayerQuotaReachesTheClient: when the injected 429s outlast the
// attempts, the client gets the gateway's 429 upstream-quota with the
// injected Retry-After, as from a real provider.
func TestFaultLayerQuotaReachesTheClient(t *testing.T) {
	h, _, eu, _, euRep := twoPools(t, nil, "policy.retries.max_attempts=1")
	remove, err := h.gw.Faults().Inject([]int{euRep}, UpstreamFault{Kind: "quota-exhaustion", Status: http.StatusTooManyRequests,
		RetryAfter: 6500 * time.Millisecond})
	require.NoError(t, err)
	defer remove()
	resp, body := h.mustPost(keyEU, chatBody(false, "x")) // bank-eu: the EU pool only
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	require.Equal(t, "upstream-quota", resp.Header.Get("X-Fleetdrill-Reason"))
	require.Equal(t, "7", resp.Header.Get("Retry-After"), "the injected Retry-After, in whole seconds")
	require.Zero(t, eu.hits.Load())
}

// TestFaultLayerRetiredModel: a 404 model_not_found on one model hits that
// model's attempts only, is passed to the client as a backend's 404 (and
// the Observer hears of it: the live recorder's detection of a retirement),
// and its removal restores the model.
func TestFaultLayerRetiredModel(t *testing.T) {
	const keyRetail = "sk-retail-0123456789"
	f31, f33, f8 := newFake(t), newFake(t), newFake(t)
	var log attemptLog
	h := newHarness(t, libraryScenario(t, "gameday-model-retirement"),
		map[string][]string{"use-h100-70b-31": {f31.srv.URL}, "use-h100-70b-33": {f33.srv.URL}, "use-h100-8b": {f8.srv.URL}},
		func(c *Config) { c.Keys = []Key{{"retail", keyRetail}} }, log.observer)
	all := []int{0, 1, 2}
	remove, err := h.gw.Faults().Inject(all, UpstreamFault{Kind: "model-retirement", Models: []string{"llama-3.1-70b"},
		Status: http.StatusNotFound, Code: "model_not_found", Message: "The model `llama-3.1-70b` does not exist."})
	require.NoError(t, err)

	resp, body := h.postAs(keyRetail, "chat", chatBodyFor("llama-3.1-70b", "x"))
	require.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	require.Equal(t, "failed", resp.Header.Get("X-Fleetdrill-Outcome"))
	require.Equal(t, "use-h100-70b-31", resp.Header.Get("X-Fleetdrill-Pool"))
	var out struct {
		Error struct{ Code, Type, Message string }
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	assert.Equal(t, "model_not_found", out.Error.Code)
	assert.Equal(t, "invalid_request_error", out.Error.Type)
	assert.Contains(t, out.Error.Message, "llama-3.1-70b")
	require.Zero(t, f31.hits.Load(), "the backend saw nothing")
	rep := h.gw.ReplicaIndex("use-h100-70b-31", 0)
	require.Equal(t, []string{attemptString(rep, 404, false)}, log.list())

	// Another model on the same replicas is untouched.
	resp, body = h.postAs(keyRetail, "chat", chatBodyFor("llama-3.1-8b", "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, int64(1), f8.hits.Load())

	remove()
	remove() // harmless
	require.Equal(t, 0.0, h.metric("fleetdrill_gateway_injected_faults", nil))
	resp, body = h.postAs(keyRetail, "chat", chatBodyFor("llama-3.1-70b", "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode, "removed: the model is served again: %s", body)
	require.Equal(t, int64(1), f31.hits.Load())
	require.Contains(t, h.log.String(), `"msg":"fault removed"`)
}

// TestFaultLayerErrorRate: a fail rate answers a seeded share of the
// attempts 500, never sent to the backend. The count is within a
// binomial bound for n attempts; the same seed gives the same sequence,
// another seed another.
func TestFaultLayerErrorRate(t *testing.T) {
	const n, rate = 200, 0.3
	run := func(seed uint64) string {
		h, _, eu, _, euRep := twoPools(t, []func(*Config){func(c *Config) { c.Seed = seed }},
			"policy.retries.max_attempts=1", "policy.health.threshold=100000")
		remove, err := h.gw.Faults().Inject([]int{euRep}, UpstreamFault{Kind: "error-burst", FailRate: rate})
		require.NoError(t, err)
		defer remove()
		var seq strings.Builder
		failed := 0
		for range n {
			resp, body := h.mustPost(keyEU, chatBody(false, "x"))
			switch resp.StatusCode {
			case http.StatusOK:
				seq.WriteByte('.')
			case http.StatusBadGateway:
				seq.WriteByte('x')
				failed++
			default:
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
		}
		// Five standard deviations either side of n·rate: a seed that
		// falls outside is broken, not unlucky (p < 1e-6).
		mean, sd := n*rate, math.Sqrt(n*rate*(1-rate))
		require.InDelta(t, mean, float64(failed), 5*sd, "seed %d: %d of %d attempts failed, want about %g", seed, failed, n, mean)
		require.Equal(t, int64(n-failed), eu.hits.Load(), "seed %d: the failed attempts never reached the backend", seed)
		require.Equal(t, float64(failed), h.metric("fleetdrill_gateway_fault_answers_total", map[string]string{"pool": "euw-a100-8b", "status": "500"}))
		require.Equal(t, float64(failed), h.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "euw-a100-8b", "result": "error"}),
			"a 500 of the fault layer counts against the breaker as a backend's")
		return seq.String()
	}
	a := run(1)
	require.Equal(t, a, run(1), "the same seed draws the same attempts")
	require.NotEqual(t, a, run(2), "another seed draws others")
}

// TestFaultLayerLatency: injected latency delays the attempt before it is
// sent. A latency beyond the health timeout makes the attempt time out
// without the backend ever seeing it (as a slow link would), its breaker
// opens and the request is retried elsewhere; a shorter one is in the time to first
// byte, in model time: a lower bound the delay guarantees, whatever the
// machine's load.
func TestFaultLayerLatency(t *testing.T) {
	var log attemptLog
	h, us, eu, usRep, euRep := twoPools(t, []func(*Config){log.observer, func(c *Config) { c.Speed = 10 }},
		"policy.retries.max_attempts=2", "policy.health.timeout=2s", "policy.health.open_for=1h")
	remove, err := h.gw.Faults().Inject([]int{usRep}, UpstreamFault{Kind: "latency", Latency: time.Hour})
	require.NoError(t, err)
	// A stream: its headers must come within the health timeout (a
	// non-streamed answer's come with the whole answer, and are not timed).
	resp, body := h.mustPost(keyGlobal, chatBody(true, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "euw-a100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
	require.Zero(t, us.hits.Load(), "an hour of latency: the attempt never left")
	require.Equal(t, []string{attemptString(usRep, 0, true)}, log.list(), "a header timeout")
	remove()

	// A model second on the EU replica (100 ms of wall time at speed 10),
	// within the health timeout.
	remove, err = h.gw.Faults().Inject([]int{euRep}, UpstreamFault{Kind: "latency", Latency: time.Second})
	require.NoError(t, err)
	defer remove()
	before := h.histSum("fleetdrill_gateway_ttft_seconds", nil)
	resp, body = h.mustPost(keyEU, chatBody(false, "x"))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.GreaterOrEqual(t, h.histSum("fleetdrill_gateway_ttft_seconds", nil)-before, 1.0, "model seconds to the first byte")
	require.Equal(t, int64(2), eu.hits.Load())
}

// TestFaultLayerDown: a replica injected down fails its attempts as a
// transport error, at once (refuse) or at the health timeout (hang),
// counted against its breaker (which opens: the retry goes to the other
// pool); the backend sees nothing.
func TestFaultLayerDown(t *testing.T) {
	for _, down := range []Down{DownRefuse, DownHang} {
		t.Run(down.String(), func(t *testing.T) {
			var log attemptLog
			h, us, _, usRep, _ := twoPools(t, []func(*Config){log.observer},
				"policy.retries.max_attempts=2", "policy.health.timeout=300ms", "policy.health.open_for=1h")
			remove, err := h.gw.Faults().Inject([]int{usRep}, UpstreamFault{Kind: "node-loss", Down: down})
			require.NoError(t, err)
			defer remove()
			// A stream, whose headers are timed (see TestFaultLayerLatency).
			resp, body := h.mustPost(keyGlobal, chatBody(true, "x"))
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			require.Equal(t, "euw-a100-8b", resp.Header.Get("X-Fleetdrill-Pool"))
			require.Zero(t, us.hits.Load())
			require.Equal(t, []string{attemptString(usRep, 0, true)}, log.list())
			require.Equal(t, 1.0, h.metric("fleetdrill_gateway_fault_answers_total", map[string]string{"pool": "use-h100-8b", "status": "0"}))
		})
	}
}

// TestFaultLayerCancelled: a client that goes away during an injected
// latency ends the attempt; nothing reaches the backend.
func TestFaultLayerCancelled(t *testing.T) {
	h, _, eu, _, euRep := twoPools(t, nil, "policy.health.timeout=1h")
	remove, err := h.gw.Faults().Inject([]int{euRep}, UpstreamFault{Kind: "latency", Latency: time.Hour})
	require.NoError(t, err)
	defer remove()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, err := h.post(ctx, keyEU, chatBody(false, "x")); done <- err }()
	eventually(t, "the request to be dispatched", func() bool {
		n := 0
		h.gw.View(func(core *sched.Core, _ time.Duration) { n = core.Inflight(euRep) })
		return n == 1
	})
	cancel()
	require.Error(t, <-done)
	eventually(t, "the attempt to end cancelled", func() bool {
		return h.metric("fleetdrill_gateway_attempts_total", map[string]string{"pool": "euw-a100-8b", "result": "cancelled"}) == 1
	})
	require.Zero(t, eu.hits.Load())
}

// TestDecide: how faults on one replica combine (faults.Condition): down first; then a fault on the attempt's model; then the highest
// fail rate (drawn only then); then a fault on every model; latencies add
// up.
func TestDecide(t *testing.T) {
	never := func() float64 { return 0.999 }
	always := func() float64 { return 0 }
	quota := UpstreamFault{Status: 429, RetryAfter: 30 * time.Second}
	retired := UpstreamFault{Status: 404, Code: "model_not_found", Models: []string{"m"}}
	incompat := UpstreamFault{Status: 503, Code: "model_incompatible", Models: []string{"m", "n"}}
	for _, c := range []struct {
		name   string
		fs     []UpstreamFault
		model  string
		draw   func() float64
		status int
		down   Down
		lat    time.Duration
		draws  int
	}{
		{"none", nil, "m", always, 0, Up, 0, 0},
		{"latencies add up", []UpstreamFault{{Latency: time.Second}, {Latency: 2 * time.Second}}, "m", always, 0, Up, 3 * time.Second, 0},
		{"quota", []UpstreamFault{quota}, "m", always, 429, Up, 0, 0},
		{"retired model", []UpstreamFault{quota, retired}, "m", always, 404, Up, 0, 0},
		{"another model", []UpstreamFault{retired}, "n", always, 0, Up, 0, 0},
		{"the earliest model fault", []UpstreamFault{incompat, retired}, "m", always, 503, Up, 0, 0},
		{"fail rate before quota", []UpstreamFault{quota, {FailRate: 0.5}}, "m", always, 500, Up, 0, 1},
		{"fail rate missed", []UpstreamFault{quota, {FailRate: 0.5}}, "m", never, 429, Up, 0, 1},
		{"the highest rate", []UpstreamFault{{FailRate: 0.2}, {FailRate: 1}}, "m", func() float64 { return 0.5 }, 500, Up, 0, 1},
		{"no draw behind a model fault", []UpstreamFault{retired, {FailRate: 1}}, "m", always, 404, Up, 0, 0},
		{"down first", []UpstreamFault{retired, {Down: DownHang}, quota}, "m", always, 0, DownHang, 0, 0},
		{"refuse over hang", []UpstreamFault{{Down: DownHang}, {Down: DownRefuse}}, "m", always, 0, DownRefuse, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			draws := 0
			v := decide(c.fs, c.model, func() float64 { draws++; return c.draw() })
			if v.status != c.status || v.down != c.down || v.latency != c.lat || draws != c.draws {
				t.Errorf("decide(%+v, %q) = status %d down %v latency %v after %d draws; want %d %v %v after %d",
					c.fs, c.model, v.status, v.down, v.latency, draws, c.status, c.down, c.lat, c.draws)
			}
		})
	}
	// An error delay holds back the layer's own answers only.
	slow := UpstreamFault{FailRate: 0.5, ErrorDelay: 200 * time.Millisecond}
	v := decide([]UpstreamFault{slow, {Latency: 100 * time.Millisecond}}, "m", always)
	require.Equal(t, verdict{latency: 100 * time.Millisecond, delay: 200 * time.Millisecond, status: 500, code: "injected_error", msg: v.msg}, v)
	v = decide([]UpstreamFault{slow, {Latency: 100 * time.Millisecond}}, "m", never)
	require.Equal(t, verdict{latency: 100 * time.Millisecond}, v, "sent to the backend: no error delay")
}

// TestInjectFaultRefuses: every problem of a fault at once, before
// anything is injected.
func TestInjectFaultRefuses(t *testing.T) {
	h, _, _, _, _ := twoPools(t, nil)
	_, err := h.gw.Faults().Inject([]int{7}, UpstreamFault{Kind: "x", Status: 200, FailRate: 2, Latency: -time.Second, Models: []string{"gpt-9"}})
	require.Error(t, err)
	for _, want := range []string{"inject fault x", "replica 7", `"gpt-9"`, "status: got 200", "fail rate: got 2", "latency: got -1s"} {
		require.ErrorContains(t, err, want)
	}
	_, err = h.gw.Faults().Inject([]int{0}, UpstreamFault{})
	require.ErrorContains(t, err, "does nothing")
	_, err = h.gw.Faults().Inject(nil, UpstreamFault{Status: 500})
	require.ErrorContains(t, err, "no replica")
	require.Equal(t, 0.0, h.metric("fleetdrill_gateway_injected_faults", nil))
}

// TestFaultLayerCutsOpenStreams: a replica taken down while it streams
// loses what it was sending, as a dead route cuts open connections: a hang
// holds the stream until the attempt's context ends (the caller's stall
// timer), a refusal breaks it at once; a stream on another replica, or
// once the fault is removed, goes on.
func TestFaultLayerCutsOpenStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pws []*io.PipeWriter
		l := newFaultLayer([]replica{{pool: "a", host: "a:1"}, {pool: "a", host: "a:2"}}, map[string]int{"m": 0}, "test",
			slog.New(slog.DiscardHandler), clock{start: time.Now(), speed: 1}, 1,
			func(up *http.Request) (*http.Response, error) {
				pr, pw := io.Pipe()
				pws = append(pws, pw)
				return &http.Response{StatusCode: http.StatusOK, Body: pr, Request: up}, nil
			})
		open := func(rep int) (*http.Response, *io.PipeWriter, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			up, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://a/v1/chat/completions", nil)
			resp, err := l.pass(up, rep)
			require.NoError(t, err)
			return resp, pws[len(pws)-1], cancel
		}
		read := func(resp *http.Response, pw *io.PipeWriter) error {
			go func() { _, _ = io.WriteString(pw, "data: x\n\n") }()
			_, err := resp.Body.Read(make([]byte, 64))
			return err
		}
		hung, hpw, cancel := open(0)
		other, opw, _ := open(1)
		require.NoError(t, read(hung, hpw), "up: the stream flows")
		remove, err := l.Inject([]int{0}, UpstreamFault{Kind: "regional-outage", Down: DownHang})
		require.NoError(t, err)
		require.NoError(t, read(other, opw), "another replica's stream goes on")
		errc := make(chan error, 1)
		go func() { errc <- read(hung, hpw) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.Empty(t, errc, "held with no data while the replica is down")
		cancel() // the stall timer
		require.ErrorIs(t, <-errc, context.Canceled)
		remove()

		broken, bpw, _ := open(0)
		require.NoError(t, read(broken, bpw), "the fault removed: a new stream flows")
		removeRefuse, err := l.Inject([]int{0}, UpstreamFault{Kind: "node-loss", Down: DownRefuse})
		require.NoError(t, err)
		require.ErrorContains(t, read(broken, bpw), "connection reset (injected fault)")
		removeRefuse()
		for _, pw := range pws {
			_ = pw.Close() // the writes the cut streams never read
		}
	})
}
