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
	require.NoError(t, gw.CheckBackends(ctx), "the node lists the pool's model as vLLM does")
	front := httptest.NewServer(gw.Handler())
	defer front.Close()

	// Ten minutes of model time with no traffic: a probe every 10 s, every
	// one answered.
	probes := func(result string) float64 {
		return promtest.Value(t, reg, "fleetdrill_gateway_probes_total", map[string]string{"result": result}, true)
	}
	for start := gw.Now(); gw.Now()-start < 10*time.Minute; {
		time.Sleep(100 * time.Millisecond)
	}
	require.GreaterOrEqual(t, probes("ok"), 55.0, "a probe every 10 s of model time")
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
	loads := gw.Loads()
	require.GreaterOrEqual(t, loads[0].KVUsage, 0.0, "the node's vllm:kv_cache_usage_perc was read")
}
