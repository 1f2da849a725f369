package twin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/traces"
)

// traceScenario replays testdata/small.jsonl (100 requests, one a second,
// alternating gpt-4/gpt-3.5, classes chat/api) on the azureLike fleet.
func traceScenario(tr scenarios.TraceSource, mapping ...scenarios.MapRule) *scenarios.Scenario {
	sc := azureLike(4, 1, 10*time.Minute)
	sc.Dir = "testdata"
	if tr.Path == "" {
		tr.Path = "small.jsonl"
	}
	sc.Workload = []scenarios.Stream{{Name: "replay", Tenant: "t1", Class: "interactive", Model: "llama-8b",
		Trace: &tr, Mapping: mapping}}
	return sc
}

func arrivals(t *testing.T, sc *scenarios.Scenario) []*request {
	t.Helper()
	var got []*request
	runInternal(t, sc, func(req *request) {
		c := *req
		seq := *req.seq // the sequence is pooled: keep a copy
		c.seq = &seq
		got = append(got, &c)
	})
	return got
}

func TestTraceReplayKeepsTimesAndTokens(t *testing.T) {
	got := arrivals(t, traceScenario(scenarios.TraceSource{}))
	require.Len(t, got, 100)
	for i, req := range got {
		require.Equal(t, time.Duration(i)*time.Second, req.Core.Arrived)
		require.Equal(t, 600+i, req.Core.Input)
		require.Equal(t, []uint64{uint64(i % 5), uint64(100 + i)}, req.seq.Blocks)
	}
}

func TestTraceWindowAndTimeScale(t *testing.T) {
	got := arrivals(t, traceScenario(scenarios.TraceSource{Start: dur(10 * time.Second), Duration: dur(20 * time.Second), TimeScale: 0.5}))
	require.Len(t, got, 20, "the window [10s, 30s)")
	require.Equal(t, 610, got[0].Core.Input, "the window's first request")
	require.Equal(t, time.Duration(0), got[0].Core.Arrived, "arrives at the stream's start")
	require.Equal(t, 500*time.Millisecond, got[1].Core.Arrived, "gaps halved")
}

func TestTraceRateScale(t *testing.T) {
	double := arrivals(t, traceScenario(scenarios.TraceSource{RateScale: 2}))
	require.Len(t, double, 200, "two full copies, none thinned")
	for i := 1; i < len(double); i++ {
		require.LessOrEqual(t, double[i-1].Core.Arrived, double[i].Core.Arrived, "merged in time order")
	}
	half := arrivals(t, traceScenario(scenarios.TraceSource{RateScale: 0.5}))
	require.InDelta(t, 50, len(half), 15, "thinned to about half")
	again := arrivals(t, traceScenario(scenarios.TraceSource{RateScale: 0.5}))
	require.Equal(t, len(half), len(again), "seeded")
	for i := range half {
		require.Equal(t, half[i].Core.Arrived, again[i].Core.Arrived)
	}
}

func TestTraceMapping(t *testing.T) {
	sc := traceScenario(scenarios.TraceSource{},
		scenarios.MapRule{When: scenarios.MapMatch{Model: "gpt-4", Class: "chat"}, Tenant: "t2"},
		scenarios.MapRule{Share: 0.25, Class: "batch"})
	sc.Tenants = append(sc.Tenants, scenarios.Tenant{Name: "t2", Weight: 1})
	sc.Classes = append(sc.Classes, scenarios.Class{Name: "batch", Priority: 1})
	got := arrivals(t, sc)
	require.Len(t, got, 100)
	batch := 0
	for i, req := range got {
		if i%2 == 0 && i%4 < 2 { // gpt-4 chat
			require.Equal(t, 1, req.Core.Tenant, "request %d", i)
			require.Equal(t, 0, req.Core.Class)
			continue
		}
		require.Equal(t, 0, req.Core.Tenant)
		if req.Core.Class == 1 {
			batch++
		}
	}
	require.InDelta(t, 0.25*75, batch, 12, "a quarter of the rest go to batch")
}

func TestTraceBadRowStopsTheRunWithItsLine(t *testing.T) {
	dir := t.TempDir()
	data := "{\"t\":0,\"input\":10,\"output\":5}\n{\"t\":1,\"input\":-3,\"output\":5}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte(data), 0o644))
	sc := traceScenario(scenarios.TraceSource{Path: "bad.jsonl"})
	sc.Dir = dir
	_, err := Run(t.Context(), sc, Options{})
	require.ErrorContains(t, err, "bad.jsonl:2")
}

// shared returns the path of the public trace rel (a path under the team's
// shared/traces): the file under ../shared/traces when it is beside the
// checkout (the benchmarks' figures were measured on it, without the
// embedded copy's gunzip), else the binary's embedded copy of the same bytes
// (package traces) when it carries one, else the test skips.
func shared(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", "traces", rel)
	if _, err := os.Stat(p); err != nil {
		if traces.Has(rel) {
			return traces.Scheme + rel
		}
		t.Skipf("%s not found: the shared traces are not beside this checkout, and the binary embeds only %v", p, traces.Names())
	}
	abs, err := filepath.Abs(p)
	require.NoError(t, err)
	return abs
}

// defaultWithTrace is the default fleet with its synthetic workload replaced
// by a whole trace, split across the default's tenants and models.
func defaultWithTrace(t testing.TB, path string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.LoadNamed("default")
	require.NoError(t, err)
	sc.Duration = dur(time.Hour)
	sc.Warmup = 0
	sc.Expect = nil
	sc.Workload = []scenarios.Stream{{Name: "azure-conv", Tenant: "retail", Class: "interactive", Model: "llama-3.1-8b",
		Trace: &scenarios.TraceSource{Path: path, TimeScale: 1, RateScale: 1},
		Mapping: []scenarios.MapRule{
			{Share: 0.15, Model: "llama-3.1-70b"},
			{Share: 0.2, Tenant: "bank-eu"},
			{Share: 0.1, Tenant: "research", Class: "batch", Model: "llama-3.1-70b"},
		}}}
	return sc
}

func TestAzureConversationTraceThroughDefaultFleet(t *testing.T) {
	rep := run(t, defaultWithTrace(t, shared(t, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv")))
	require.Equal(t, uint64(19366), rep.Requests.Arrived, "every request of the trace (README T2)")
	require.True(t, rep.Requests.Balanced())
	require.Zero(t, rep.ResidencyViolations)
	require.Positive(t, rep.Tenants["bank-eu"].Arrived)
}

func TestMooncakePrefixCaching(t *testing.T) {
	path := shared(t, "mooncake_fast25/conversation_trace.jsonl")
	run := func(caching, affinity bool) *Report {
		sc := azureLike(8, 1, time.Hour)
		sc.Pools[0].Profiles = map[string]scenarios.Profile{"llama-8b": {Ref: "h100-sxm/llama-3.1-8b/tp1"}}
		sc.Pools[0].PrefixCaching = caching
		sc.Policy.Routing.PrefixAffinity = affinity
		sc.Classes[0].Deadline = 0
		sc.Classes[0].SLO = scenarios.SLO{}
		sc.Workload = []scenarios.Stream{{Name: "kimi", Tenant: "t1", Class: "interactive", Model: "llama-8b",
			Trace: &scenarios.TraceSource{Path: path, TimeScale: 1, RateScale: 1}}}
		return runReport(t, sc)
	}
	off, on, aff := run(false, false), run(true, false), run(true, true)
	require.Equal(t, uint64(12031), on.Requests.Arrived)
	require.Zero(t, off.Pools["h100"].PrefixHitRate)
	hitOn, hitAff := on.Pools["h100"].PrefixHitRate, aff.Pools["h100"].PrefixHitRate
	require.Positive(t, hitOn)
	require.Greater(t, hitAff, hitOn, "routing by prefix (under bounded load) finds more of it")
	require.LessOrEqual(t, hitAff, 0.3664, "no cache beats an unlimited one (README T3: 36.64 %)")
	require.Less(t, on.Classes["interactive"].TTFT.P50, off.Classes["interactive"].TTFT.P50, "skipped prefill shows in TTFT")
	require.Less(t, aff.Classes["interactive"].TTFT.P50, on.Classes["interactive"].TTFT.P50)
	t.Logf("hit rate: caching %.3f, with affinity %.3f; TTFT p50 %.3fs off, %.3fs caching, %.3fs affinity; p99 %.2fs, %.2fs, %.2fs",
		hitOn, hitAff, off.Classes["interactive"].TTFT.P50, on.Classes["interactive"].TTFT.P50, aff.Classes["interactive"].TTFT.P50,
		off.Classes["interactive"].TTFT.P99, on.Classes["interactive"].TTFT.P99, aff.Classes["interactive"].TTFT.P99)
}

func runReport(t testing.TB, sc *scenarios.Scenario) *Report {
	t.Helper()
	rep, err := Run(t.(interface{ Context() context.Context }).Context(), sc, Options{})
	require.NoError(t, err)
	return rep
}

func TestAlibabaPodsAsJobs(t *testing.T) {
	path := shared(t, "alibaba_gpu_v2023/openb_pod_list_gpuspec33.csv")
	sc := withJobs(azureLike(32, 1, 24*time.Hour), scenarios.JobStream{Name: "pods", Kind: "training",
		// Days 120 to 122 of the trace (it is busy only from day 115 on),
		// compressed into a day.
		Trace: &scenarios.JobTrace{Path: path, TimeScale: 0.5, Start: dur(120 * 24 * time.Hour), Duration: dur(2 * 24 * time.Hour),
			GPUMap: map[string]string{"G2": "h100", "V100M32": "h100", "V100M16": "h100", "P100": "h100", "G3": "h100", "A10": "h100"}}})
	sc.Workload[0].Arrivals.Rate = 0.2
	rep := run(t, sc)
	jr := rep.Jobs["pods"]
	require.True(t, jr.Balanced(), "%+v", jr)
	require.Positive(t, jr.Submitted)
	require.Positive(t, jr.Filtered, "CPU-only pods are not jobs")
	require.Positive(t, jr.Completed)
	require.Positive(t, jr.Unplaceable, "pods constrained to T4, which is not mapped, cannot run")
}

func TestSkippedTraceRowsAreReported(t *testing.T) {
	dir := t.TempDir()
	data := "{\"t\":0,\"input\":10,\"output\":5}\n{\"t\":1,\"input\":-3,\"output\":5}\n{\"t\":2,\"input\":10,\"output\":5}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte(data), 0o644))
	sc := traceScenario(scenarios.TraceSource{Path: "bad.jsonl", SkipBadRows: true})
	sc.Dir = dir
	rep := run(t, sc)
	require.Equal(t, StreamReport{Requests: 2, SkippedRows: 1}, rep.Workload["replay"])
}
