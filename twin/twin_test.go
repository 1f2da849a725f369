package twin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

func dur(d time.Duration) scenarios.Duration { return scenarios.Duration(d) }

// azureLike is a fleet of n H100 replicas serving Llama-3.1-8B with an
// explicit profile, fed a stream shaped like the Azure 2023 conversation
// trace (rate req/s, input mean 1155, output mean 211).
func azureLike(n int, rate float64, d time.Duration) *scenarios.Scenario {
	return &scenarios.Scenario{
		Schema: 1, Name: "azure-like", Seed: 1, Duration: dur(d), Drain: dur(10 * time.Minute),
		Regions:      []scenarios.Region{{Name: "us-east", Jurisdiction: "us"}},
		Accelerators: []scenarios.Accelerator{{Name: "h100", MemoryGiB: 80, UsableFraction: 0.9, Precisions: []string{"bf16"}}},
		Runtimes:     []scenarios.Runtime{{Name: "vllm", Server: "vllm", Version: "0.6.3", MinDriver: "550.54"}},
		Models: []scenarios.Model{{Name: "llama-8b", ParametersB: 8.03, Layers: 32, KVHeads: 8, HeadDim: 128,
			Precision: "bf16", ContextLength: 131072, Runtimes: []string{"vllm"}, Quality: 0.7}},
		Pools: []scenarios.Pool{{Name: "h100", Region: "us-east", Provider: "aws", Accelerator: "h100",
			GPUsPerReplica: 1, Replicas: n, Runtime: "vllm", Driver: "550.90", Models: []string{"llama-8b"},
			MaxBatch: 256, PricePerGPUHour: 4, ColdStart: dur(3 * time.Minute),
			Profiles: map[string]scenarios.Profile{"llama-8b": {StepBaseUS: 6000, PerSeqUS: 20,
				PerPrefillTokenUS: 60, PerKVTokenUS: 0.04, MinStepUS: 1000, MaxBatchedTokens: 8192}}}},
		Tenants: []scenarios.Tenant{{Name: "t1", Weight: 1}},
		Classes: []scenarios.Class{{Name: "interactive", Priority: 10,
			SLO: scenarios.SLO{TTFT: dur(2 * time.Second), TPOT: dur(100 * time.Millisecond)}, Deadline: dur(2 * time.Minute)}},
		Workload: []scenarios.Stream{{Name: "chat", Tenant: "t1", Class: "interactive", Model: "llama-8b",
			Arrivals:     scenarios.Arrivals{Process: "poisson", Rate: rate},
			InputTokens:  scenarios.Distribution{Dist: "lognormal", Mean: 1155, CV: 0.9, Min: 2, Max: 14050},
			OutputTokens: scenarios.Distribution{Dist: "lognormal", Mean: 211, CV: 0.8, Min: 7, Max: 1000}}},
		Policy: scenarios.Policy{Scheduler: "fifo", Admission: scenarios.Admission{QueueLimit: 1000},
			Routing: scenarios.Routing{Strategy: "least-loaded"}},
	}
}

func run(t testing.TB, sc *scenarios.Scenario) *Report {
	t.Helper()
	rep, err := Run(context.Background(), sc, Options{})
	require.NoError(t, err)
	return rep
}

func TestAccountingHoldsPerClassAndTenant(t *testing.T) {
	sc := azureLike(2, 40, 10*time.Minute) // overloaded: rejections and timeouts happen
	sc.Policy.Admission.QueueLimit = 500
	sc.Classes[0].Deadline = dur(20 * time.Second)
	sc.Drain = dur(5 * time.Second) // some requests still in flight at the end
	rep := run(t, sc)
	c := rep.Requests
	require.True(t, c.Balanced(), "%+v", c)
	require.Positive(t, c.Completed)
	require.Positive(t, c.Rejected, "a two-replica fleet at 40 req/s must shed load")
	require.Positive(t, c.TimedOut)
	require.Positive(t, c.InFlightAtEnd)
	for name, g := range rep.Classes {
		require.True(t, g.Balanced(), "class %s: %+v", name, g.Counts)
	}
	require.Equal(t, c.Arrived, rep.Tenants["t1"].Arrived)
	require.Equal(t, c.Rejected, rep.Rejections["queue-full"])
}

func TestDeterministicReports(t *testing.T) {
	a, b := run(t, azureLike(4, 4, 5*time.Minute)), run(t, azureLike(4, 4, 5*time.Minute))
	a.Run, b.Run = RunInfo{}, RunInfo{}
	ja, err := a.JSON()
	require.NoError(t, err)
	jb, err := b.JSON()
	require.NoError(t, err)
	require.Equal(t, string(ja), string(jb))

	other := azureLike(4, 4, 5*time.Minute)
	other.Seed = 2
	c := run(t, other)
	c.Run = RunInfo{}
	jc, err := c.JSON()
	require.NoError(t, err)
	require.NotEqual(t, string(ja), string(jc), "another seed must change the run")
}

func TestHealthyFleetMeetsMLPerfStyleSLO(t *testing.T) {
	rep := run(t, azureLike(8, 5.5, 10*time.Minute))
	g := rep.Classes["interactive"]
	require.Zero(t, rep.Requests.Rejected)
	require.Greater(t, float64(g.SLOAttainment), 0.95)
	require.Less(t, g.TTFT.P99, 2.0)
	require.InDelta(t, 5.5, float64(rep.Requests.Arrived)/600, 0.3, "arrival rate")
	// Output tokens per request ≈ 211: TPOT is a step time, tens of ms.
	require.Greater(t, g.TPOT.P50, 0.005)
	require.Less(t, g.TPOT.P50, 0.1)
	util := rep.Pools["h100"].Utilization
	require.Greater(t, util, 0.1)
	require.LessOrEqual(t, util, 1.0)
}

// TestServiceTimePoolMatchesErlangC: a pool declared with an exponential
// service time and one request per replica is an M/M/c queue.
func TestServiceTimePoolMatchesErlangC(t *testing.T) {
	const c, mean, rho = 4, 2.0, 0.8
	sc := azureLike(c, rho*c/mean, 400*time.Hour)
	sc.Pools[0].Service = &scenarios.Service{Distribution: "exponential", Mean: dur(2 * time.Second)}
	sc.Pools[0].Profiles = nil
	sc.Classes[0].Deadline = 0
	sc.Classes[0].SLO = scenarios.SLO{}
	sc.Policy.Admission.QueueLimit = 1 << 30
	sc.Warmup = dur(time.Hour)
	rep := run(t, sc)
	g := rep.Classes["interactive"]
	lambda, mu := rho*c/mean, 1/mean
	wantP, wantW := erlangC(c, lambda, mu)
	require.InEpsilon(t, wantW, g.QueueWait.Mean, 0.02, "mean wait: got %.4fs, Erlang C %.4fs over %d requests",
		g.QueueWait.Mean, wantW, g.Completed)
	_ = wantP
}

func erlangC(c int, lambda, mu float64) (pWait, meanWait float64) {
	a := lambda / mu
	rho := a / float64(c)
	term, sum := 1.0, 0.0
	for k := range c {
		if k > 0 {
			term *= a / float64(k)
		}
		sum += term
	}
	top := term * a / float64(c) / (1 - rho)
	pWait = top / (sum + top)
	return pWait, pWait / (float64(c)*mu - lambda)
}

func TestResidencyIsEnforcedAndViolationsCounted(t *testing.T) {
	sc := azureLike(2, 1, 5*time.Minute)
	sc.Regions = append(sc.Regions, scenarios.Region{Name: "eu-west", Jurisdiction: "eu"})
	sc.Tenants[0].Jurisdiction = "eu" // but all capacity is in the US
	rep := run(t, sc)
	require.Zero(t, rep.ResidencyViolations)
	require.Equal(t, rep.Requests.Arrived, rep.Rejections["no-compatible-pool"], "nothing may leave its jurisdiction")

	sc.Policy.Routing.IgnoreResidency = true
	rep = run(t, sc)
	require.Equal(t, rep.Requests.Completed+rep.Requests.InFlightAtEnd, rep.ResidencyViolations)
	require.Positive(t, rep.ResidencyViolations)
}

func TestExpectations(t *testing.T) {
	sc := azureLike(8, 2, 5*time.Minute)
	sc.Expect = []string{"interactive.ttft.p99 < 2s", "residency_violations == 0", "requests.rejected > 0"}
	rep := run(t, sc)
	require.Len(t, rep.Expectations, 3)
	require.True(t, rep.Expectations[0].Pass)
	require.True(t, rep.Expectations[1].Pass)
	require.False(t, rep.Expectations[2].Pass)
	require.False(t, rep.Passed())

	sc.Expect = []string{"interactive.ttfx.p99 < 2s"}
	_, err := Run(context.Background(), sc, Options{})
	require.ErrorContains(t, err, "did you mean")
}

// TestUnknownFiguresSuggestOthers: an expectation naming no report value
// gets the nearest values, never the name it rejects; a window's the
// window's own, and a window the run did not measure says so.
func TestUnknownFiguresSuggestOthers(t *testing.T) {
	sc := azureLike(2, 2, 3*time.Minute)
	sc.Faults = []string{"node-loss pool=h100 count=1 at=1m for=1m"}
	sc.Expect = []string{"during node-loss(h100): requests.timed_out <= 1000"}
	rep := run(t, sc)
	for _, tc := range []struct {
		expr    string
		want    []string
		notWant string
	}{
		{"interactive.ttfx.p99 < 2s", []string{`no report value "interactive.ttfx.p99"; did you mean classes.interactive.`}, ""},
		{"during node-loss(h100): requests.timed_ot <= 5",
			[]string{`no report value "requests.timed_ot"; did you mean requests.timed_out`}, "windows."},
		{"during node-loss(h100): tenants.t1.requests.arrived <= 5", // a window has its tenants: their own names
			[]string{`no report value "tenants.t1.requests.arrived"; did you mean tenants.t1.arrived`}, "windows."},
		{"after node-loss(h100): requests.timed_out <= 5",
			[]string{`the run measured no window "after node-loss(h100)"`, "windows measured: during node-loss(h100)"}, "did you mean"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := rep.Check(tc.expr)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			if tc.notWant != "" {
				require.NotContains(t, err.Error(), tc.notWant)
			}
		})
	}
}

func TestNearestNeverSuggestsTheRejectedName(t *testing.T) {
	flat := map[string]float64{"requests.timed_out": 1, "requests.failed": 2}
	require.Equal(t, "; did you mean requests.failed?", nearest(flat, "requests.timed_out"))
	require.Equal(t, "", nearest(map[string]float64{"x": 1}, "x"))
}

func TestDeadlinesTimeOut(t *testing.T) {
	sc := azureLike(1, 20, 5*time.Minute)
	sc.Classes[0].Deadline = dur(5 * time.Second)
	rep := run(t, sc)
	require.Positive(t, rep.Requests.TimedOut)
	require.True(t, rep.Requests.Balanced())
	// No completed request outlived its deadline.
	require.LessOrEqual(t, rep.Classes["interactive"].E2E.Max, 5.0+1e-9)
}

func TestPriorityProtectsInteractive(t *testing.T) {
	build := func(policy string) *Report {
		sc := azureLike(2, 15, 10*time.Minute) // 30 req/s in all: overloaded
		sc.Classes = append(sc.Classes, scenarios.Class{Name: "batch", Priority: 1})
		sc.Workload = append(sc.Workload, sc.Workload[0])
		sc.Workload[1].Name, sc.Workload[1].Class = "bulk", "batch"
		sc.Classes[0].Deadline = 0
		sc.Policy.Scheduler = policy
		return run(t, sc)
	}
	fifo, prio := build("fifo"), build("priority")
	require.Less(t, prio.Classes["interactive"].QueueWait.P99, fifo.Classes["interactive"].QueueWait.P99,
		"priority must cut interactive queueing under overload")
}

// runInternal runs a scenario and returns the runner, for tests that look
// at its internals.
func runInternal(t *testing.T, sc *scenarios.Scenario, onArrive func(*request)) *runner {
	t.Helper()
	p, err := build(sc)
	require.NoError(t, err)
	r, err := newRunner(p)
	require.NoError(t, err)
	r.onArrive = onArrive
	require.NoError(t, r.run(context.Background(), nil))
	return r
}

func TestMemoryGrowsWithInFlightNotWithRequestsSeen(t *testing.T) {
	// Twelve times the requests, same load: the request slab, which holds
	// every request object ever allocated, must not grow with them.
	short := runInternal(t, azureLike(8, 5.5, 10*time.Minute), nil)
	long := runInternal(t, azureLike(8, 5.5, 2*time.Hour), nil)
	require.Greater(t, long.next, 10*short.next, "requests seen")
	require.Less(t, len(long.reqs), 2*len(short.reqs)+50,
		"slab: %d entries after %d requests vs %d after %d", len(long.reqs), long.next, len(short.reqs), short.next)
	require.Less(t, len(long.reqs), int(long.next)/20)
}

func TestArrivalsDoNotDependOnPolicy(t *testing.T) {
	// compare's paired test assumes that a seed gives every policy the
	// same requests: arrivals and token counts come from per-stream
	// random streams that scheduling never touches.
	record := func(policy string) []string {
		sc := azureLike(2, 15, 5*time.Minute) // overloaded, so policies diverge
		sc.Classes = append(sc.Classes, scenarios.Class{Name: "batch", Priority: 1})
		sc.Workload = append(sc.Workload, sc.Workload[0])
		sc.Workload[1].Name, sc.Workload[1].Class = "bulk", "batch"
		sc.Policy.Scheduler = policy
		var log []string
		runInternal(t, sc, func(req *request) {
			log = append(log, fmt.Sprintf("%d %v %d %d", req.stream, req.Core.Arrived, req.Core.Input, req.Core.Output))
		})
		return log
	}
	fifo := record("fifo")
	require.Greater(t, len(fifo), 1000)
	for _, p := range []string{"priority", "wfq", "edf"} {
		require.Equal(t, fifo, record(p), p)
	}
}

func TestColdStartDelaysFirstDispatch(t *testing.T) {
	sc := azureLike(2, 2, 10*time.Minute)
	sc.Pools[0].StartCold = true
	sc.Pools[0].ColdStart = dur(3 * time.Minute)
	sc.Classes[0].Deadline = 0
	r := runInternal(t, sc, nil)
	rep := r.report()
	require.Equal(t, uint64(2), rep.Pools["h100"].ColdStarts)
	require.True(t, rep.Requests.Balanced())
	// Requests that arrived before the replicas were loaded waited for them.
	require.GreaterOrEqual(t, rep.Classes["interactive"].QueueWait.Max, (2*time.Minute + 50*time.Second).Seconds())
	var kinds []string
	for _, e := range rep.Timeline {
		kinds = append(kinds, e.Kind)
	}
	require.Contains(t, kinds, "cold-start")
	require.Contains(t, kinds, "ready")
}

func TestCompatibilityExplainsRefusals(t *testing.T) {
	sc := azureLike(1, 1, time.Minute)
	sc.Models = append(sc.Models, scenarios.Model{Name: "llama-70b", ParametersB: 70.6, Layers: 80, KVHeads: 8,
		HeadDim: 128, Precision: "bf16", ContextLength: 131072, Runtimes: []string{"vllm"}, MinDriver: "560.0"})
	sc.Pools[0].Models = append(sc.Pools[0].Models, "llama-70b")
	got := Compatibility(sc)
	require.Len(t, got, 2)
	require.True(t, got[0].Routable)
	require.Equal(t, "compatible, tested", got[0].Verdict.String())
	require.False(t, got[1].Routable)
	require.Contains(t, got[1].Verdict.Reasons, "driver 550.90 < 560.0 required by llama-70b")
	require.Len(t, got[1].Verdict.Reasons, 2, "also: 70B weights do not fit one H100")
}

func TestDeadlineExpiryDuringStepsLeavesNoGhosts(t *testing.T) {
	// Regression: a request cancelled mid-step was recycled while its
	// engine still held it, so a later request ran as a ghost and KV
	// leaked. When every request has finished, every engine must be empty.
	sc := azureLike(2, 40, 3*time.Minute)
	sc.Policy.Admission.QueueLimit = 500
	sc.Classes[0].Deadline = dur(20 * time.Second)
	sc.Drain = dur(time.Hour)
	r := runInternal(t, sc, nil)
	rep := r.report()
	require.Positive(t, rep.Requests.TimedOut)
	require.Zero(t, rep.Requests.InFlightAtEnd)
	require.Zero(t, r.lc.Live())
	for i := range r.replicas {
		eng := r.replicas[i].eng
		require.Zero(t, eng.Load(), "replica %d still holds sequences", i)
		require.Zero(t, eng.KVUsed(), "replica %d leaked KV", i)
		require.NoError(t, eng.Invariants())
	}
}

// A fallback is counted on the window it arrived in as on its class: each
// window's requests.fallbacks is the sum of its classes' (it read 0 in
// every fault window while the window's classes showed thousands).
func TestWindowFallbacksAreCounted(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("gameday-model-retirement",
		[]string{"duration=25m"})
	require.NoError(t, err)
	rep := run(t, sc)
	require.NotEmpty(t, rep.Windows)
	any := false
	for key, w := range rep.Windows {
		var sum uint64
		for _, g := range w.Classes {
			sum += g.Fallbacks
		}
		require.Equal(t, sum, w.Requests.Fallbacks, "window %s", key)
		any = any || sum > 0
	}
	require.True(t, any, "no window saw a fallback: the test proves nothing")
	require.Positive(t, rep.Requests.Fallbacks)
}
