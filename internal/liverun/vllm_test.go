package liverun

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/node"
	"github.com/fleetdrill/fleetdrill/internal/promtest"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// A vLLM backend behind the gateway is judged healthy the way a real one
// must be: the emulated node answering as vLLM (--flavor vllm: /health, no
// /healthz, vLLM's metrics and model cards) stays closed through ten
// minutes of model time without traffic and through 10,000 requests, each
// answered and counted once, and its load is read from its own series. Both
// run in-process at speed 100 (ten model minutes are six wall seconds); no
// Docker.
func TestVLLMBackendStaysHealthyBehindTheGateway(t *testing.T) {
	const speed = 100
	// A probe's timeout of 5 model minutes (3 s of wall time): what is
	// tested is what a vLLM server answers, not how fast a loaded two-core
	// machine running both under the race detector answers it.
	sc, err := scenarios.LoadNamedWithSets("default", []string{"faults=[]", "policy.health.timeout=5m"})
	require.NoError(t, err)
	cfg, err := node.FromScenario(sc, "use-h100-8b")
	require.NoError(t, err)
	cfg.Flavor, cfg.Speed = node.FlavorVLLM, speed
	nodeReg := prometheus.NewRegistry()
	cfg.Registerer, cfg.Gatherer = nodeReg, nodeReg
	n, err := node.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = n.Run(ctx) }()
	backend := httptest.NewServer(n.Handler())
	defer backend.Close()

	var transitions atomic.Int64
	var failed atomic.Value // the status of a failed attempt
	reg := prometheus.NewRegistry()
	gw, err := gateway.New(gateway.Config{Scenario: sc, Backends: map[string][]string{"use-h100-8b": {"vllm+" + backend.URL}},
		Keys: []gateway.Key{{Tenant: "retail", Key: "sk-retail"}}, Speed: speed, Registry: reg, Seed: 1,
		Observer: &gateway.Observer{Breaker: func(time.Duration, int, string, sched.BreakerState, sched.BreakerState) {
			transitions.Add(1)
		}, Attempt: func(_ time.Duration, _ int, _ string, status int, _ bool) {
			failed.Store(fmt.Sprint(status))
		}}})
	require.NoError(t, err)
	defer gw.Close()
	require.NoError(t, gw.Backends().Check(ctx), "the node lists the pool's model as vLLM does")
	front := httptest.NewServer(gw.Handler())
	defer front.Close()

	// Ten minutes of model time with no traffic: a probe every 10 s, every
	// one answered.
	probes := func(result string) float64 {
		return promtest.Value(t, reg, "fleetdrill_gateway_probes_total", map[string]string{"result": result}, true)
	}
	// Waited for, not timed: ten model minutes and sixty answered probes
	// (one every 10 s of model time; a loaded machine may take longer to
	// run them, never fewer).
	start, bound := gw.Now(), time.Now().Add(3*time.Minute)
	for gw.Now()-start < 10*time.Minute || probes("ok") < 60 {
		require.True(t, time.Now().Before(bound), "60 probes in %v of model time: %v answered", gw.Now()-start, probes("ok"))
		time.Sleep(100 * time.Millisecond)
	}
	require.Zero(t, probes("error"), "vLLM answers /health, not /healthz")
	require.Zero(t, transitions.Load(), "the breaker stayed closed while quiet")

	// 10,000 requests, 64 at a time.
	const total, workers = 10_000, 64
	var ok, other atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				body := fmt.Sprintf(`{"model":"llama-3.1-8b","max_tokens":4,"messages":[{"role":"user","content":"request %d"}]}`, i)
				req, _ := http.NewRequest(http.MethodPost, front.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk-retail")
				resp, err := client.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				} else {
					other.Add(1)
				}
			}
		})
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	require.Equal(t, int64(total), ok.Load(), "every request answered 200 (%d otherwise)", other.Load())
	completed := promtest.Value(t, reg, "fleetdrill_gateway_requests_total", map[string]string{"outcome": "completed"}, true)
	require.Equal(t, float64(total), completed, "each request counted once")
	require.Zero(t, promtest.Value(t, reg, "fleetdrill_gateway_attempts_total", map[string]string{"result": "error"}, true), "a failed attempt: %v", failed.Load())
	require.Zero(t, probes("error"))
	require.Zero(t, transitions.Load(), "the breaker stayed closed under load")
	loads := gw.Backends().Loads()
	require.GreaterOrEqual(t, loads[0].KVUsage, 0.0, "the node's vllm:kv_cache_usage_perc was read")
}

// startVLLMNode runs the emulated node answering as vLLM, in-process on
// loopback at speed 1, serving pool's model: an external endpoint the
// harness does not start or stop.
func startVLLMNode(t *testing.T, sc *scenarios.Scenario, pool string, maxModelLen int64) string {
	t.Helper()
	cfg, err := node.FromScenario(sc, pool)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	// maxModelLen is vLLM's --max-model-len (0: the node's KV capacity).
	cfg.Flavor, cfg.Registerer, cfg.Gatherer, cfg.MaxModelLen = node.FlavorVLLM, reg, reg, maxModelLen
	n, err := node.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = n.Run(ctx) }()
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); cancel(); <-n.Stopped() })
	return srv.URL
}

// A fault that would stop an external endpoint is refused before anything
// starts unless the operator says how (--allow-disrupt); so is a speed
// other than real time.
func TestExternalEndpointsAreNeverStoppedUnasked(t *testing.T) {
	ext := map[string][]string{"use-h100-8b": {"vllm+http://127.0.0.1:1"}}
	_, err := Run(context.Background(), Options{Scenario: "default", NoTwin: true, Backends: ext,
		Sets: []string{"faults=[node-loss pool=use-h100-8b at=1m for=1m]"}})
	require.ErrorContains(t, err, "would stop 1 external endpoints, which fleetdrill never starts or stops; give --allow-disrupt CMD")
	_, err = Run(context.Background(), Options{Scenario: "default", NoTwin: true, Backends: ext, Speed: 5})
	require.ErrorContains(t, err, "real GPU servers run in real time; use --speed 1")
	_, err = Run(context.Background(), Options{Scenario: "default", NoTwin: true,
		Backends: map[string][]string{"nope": {"vllm+http://127.0.0.1:1"}}})
	require.ErrorContains(t, err, "--backend nope=…: the scenario has no pool nope")
}

// A hybrid fleet: us-east's 8B pool is an external vLLM endpoint (the node
// as vLLM, in-process, never started or stopped by the harness), the other
// pools emulated containers. The scenario's faults hit the external pool as
// the others: a quota cut, a driver its runtime cannot use (503s) and the
// 8B model's retirement (404s) through the gateway's fault layer, then a
// regional outage through toxiproxy on the nodes and the fault layer on
// the endpoint. Every request is accounted for, the comparison with the twin
// covers the real pool, and the outage is detected.
func TestHybridFleetWithAnExternalEndpoint(t *testing.T) {
	requireDocker(t)
	base, err := scenarios.LoadNamedWithSets("default", nil)
	require.NoError(t, err)
	url := startVLLMNode(t, base, "use-h100-8b", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Scenario: "default", Replicas: 1,
		Backends: map[string][]string{"use-h100-8b": {"vllm+" + url}},
		Sets: []string{"duration=60s", "warmup=0s", "drain=1m",
			"faults=[quota-exhaustion pool=use-h100-8b at=5s for=5s, " +
				"driver-upgrade pool=use-h100-8b driver=550.54.15 at=12s for=6s, " +
				"model-retirement model=llama-3.1-8b at=24s notice=2s for=6s, " +
				"regional-outage region=us-east at=40s for=20s]"}})
	require.NoError(t, err)
	require.Equal(t, 1.0, res.Speed, "external endpoints run in real time")
	require.Equal(t, map[string][]string{"use-h100-8b": {"vllm+" + url}}, res.External)
	live, tw := res.Live, res.Twin
	require.NoError(t, live.CheckAccounting())
	require.Equal(t, tw.Requests.Arrived, live.Requests.Arrived, "the replay sends the twin's requests")
	require.Positive(t, live.Pools["use-h100-8b"].Dispatched, "the external pool served")
	out := live.Faults["regional-outage(us-east)"]
	require.NotNil(t, out)
	if out.TimeToDetectS < 0 {
		for _, ev := range live.Timeline {
			t.Logf("%8.3fs %-16s %s", ev.TS, ev.Kind, ev.Detail)
		}
		t.Logf("live %+v", live.Requests)
	}
	require.GreaterOrEqual(t, out.TimeToDetectS, 0.0, "the outage on the external endpoint and the nodes is detected")
	for _, f := range []string{"quota-exhaustion(use-h100-8b)", "driver-upgrade(use-h100-8b)", "model-retirement(llama-3.1-8b)"} {
		require.Contains(t, live.Faults, f)
		require.Contains(t, tw.Faults, f)
	}
	require.GreaterOrEqual(t, live.Faults["quota-exhaustion(use-h100-8b)"].TimeToDetectS, 0.0, "the quota cut is detected from its 429s")
	for _, r := range res.Comparison.Counts {
		t.Logf("%-16s twin %6d live %6d", r.Count, r.Twin, r.Live)
	}
	for _, f := range res.Comparison.Faults {
		t.Logf("%s: detect twin %.1fs live %.1fs, lost twin %d live %d", f.Fault, f.TwinDetectS, f.LiveDetectS, f.TwinLost, f.LiveLost)
	}
}
