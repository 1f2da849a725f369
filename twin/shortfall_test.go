package twin

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

func TestShortfallOfSeries(t *testing.T) {
	series := []ReplicaCount{
		{TS: 0, Requested: 3, Serving: 3},
		{TS: 60, Requested: 5, Provisioning: 2, Serving: 3}, // short 2
		{TS: 120, Requested: 5, Warming: 1, Serving: 4},     // short 1
		{TS: 150, Requested: 5, Serving: 5},
		{TS: 200, Requested: 4, Serving: 3, Draining: 1}, // short 1, to the end
	}
	short, replicaS, longest := shortfallOf(series, 300)
	require.InDelta(t, 60+30+100, short, 1e-9)
	require.InDelta(t, 2*60+30+100, replicaS, 1e-9)
	require.InDelta(t, 100, longest, 1e-9)
	short, _, longest = shortfallOf(series, 100) // cut at the scenario's end
	require.InDelta(t, 40, short, 1e-9)
	require.InDelta(t, 40, longest, 1e-9)
	for _, tt := range []struct {
		at   time.Duration
		want bool
	}{{0, false}, {59 * time.Second, false}, {60 * time.Second, true}, {149 * time.Second, true},
		{150 * time.Second, false}, {200 * time.Second, true}, {time.Hour, true}} {
		require.Equal(t, tt.want, ShortAt(series, tt.at), "ShortAt(%v)", tt.at)
	}
	require.False(t, ShortAt(nil, time.Minute), "no series: never short")
}

// stockoutRun is gameday-autoscale-stockout cut to duration, its
// expectations replaced by expect.
func stockoutRun(t *testing.T, duration string, expect ...string) (*scenarios.Scenario, *Report) {
	t.Helper()
	sc, err := scenarios.LoadNamedWithSets("gameday-autoscale-stockout", []string{"duration=" + duration, "expect=[]"})
	require.NoError(t, err)
	sc.Expect = expect
	return sc, run(t, sc)
}

// The stockout holds us-west short from its scale-up (10m15s) to the end:
// retail-us, US-bound, meets its SLO less often on what arrived then than
// on what arrived before; each tenant's requests the pool may serve are
// counted once, short or not; bank-eu (EU-bound) is none of its tenants.
func TestShortfallStockout(t *testing.T) {
	const pool = "usw-h100-8b"
	_, rep := stockoutRun(t, "16m",
		"autoscaling.usw-h100-8b.short_s > 5m",
		"autoscaling.usw-h100-8b.tenants.retail-us.slo_attainment_short < 0.9",
		"autoscaling.usw-h100-8b.tenants.retail-us.slo_attainment_not_short > 0.9")
	ar := rep.Autoscaling[pool]
	require.InDelta(t, (16*time.Minute - 10*time.Minute - 15*time.Second).Seconds(), ar.ShortS, 1, "series %+v", ar.Series)
	require.Equal(t, ar.ShortS, ar.LongestShortS, "one stretch")
	require.Greater(t, ar.ShortReplicaS, 2*ar.ShortS, "3 → 11 asked, at most 5 serving")
	for _, e := range rep.Expectations {
		require.True(t, e.Pass, "%s: %v %s", e.Expr, e.Value, e.NoData)
	}
	require.ElementsMatch(t, []string{"retail-us", "global"}, slices.Collect(maps.Keys(ar.Tenants)))
	rt := ar.Tenants["retail-us"]
	require.Positive(t, rt.ArrivedShort)
	require.Less(t, float64(rt.SLOAttainmentShort), float64(rt.SLOAttainmentNotShort)-0.3, "%+v", rt)
	// Accounting: every tenant's requests are of the one model the pool
	// serves, so the pool's rows count each measured request of its
	// tenants once, finished or in flight at the end.
	for name, st := range ar.Tenants {
		g := rep.Tenants[name]
		require.Equal(t, g.Arrived, st.Arrived, "tenant %s", name)
		require.Equal(t, g.Arrived-g.InFlightAtEnd, st.FinishedShort+st.FinishedNotShort, "tenant %s", name)
		require.LessOrEqual(t, st.FinishedShort, st.ArrivedShort, "tenant %s", name)
	}
}

// Before the outage us-west serves what it asks for: no shortfall, and no
// request of any tenant arrived while short (its attainment has no data).
func TestShortfallNeverShort(t *testing.T) {
	_, rep := stockoutRun(t, "6m",
		"autoscaling.usw-h100-8b.short_s == 0",
		"autoscaling.usw-h100-8b.tenants.retail-us.slo_attainment_short > 0.5 if any")
	ar := rep.Autoscaling["usw-h100-8b"]
	require.Zero(t, ar.ShortS)
	require.Zero(t, ar.ShortReplicaS)
	require.Zero(t, ar.LongestShortS)
	for name, st := range ar.Tenants {
		require.Zero(t, st.ArrivedShort, "tenant %s", name)
		require.Equal(t, rep.Tenants[name].Arrived, st.Arrived, "tenant %s", name)
	}
	require.Len(t, rep.Expectations, 2)
	require.True(t, rep.Expectations[0].Pass)
	require.True(t, rep.Expectations[1].Skipped, "%+v", rep.Expectations[1])
	require.Contains(t, rep.Expectations[1].NoData, "arrived while the pool was short")
}

// The Recorder counts by the same code, against the replay's series: a
// request is short by its arrival, whenever it ended.
func TestRecorderShortfall(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("gameday-autoscale-stockout", []string{"duration=10m", "warmup=1m", "expect=[]"})
	require.NoError(t, err)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	tenant := func(name string) int {
		for i, tn := range sc.Tenants {
			if tn.Name == name {
				return i
			}
		}
		t.Fatalf("no tenant %s", name)
		return -1
	}
	retail, bank := tenant("retail-us"), tenant("bank-eu")
	out := func(tn int, at, ended time.Duration, res Result, ttft time.Duration) Outcome {
		o := Outcome{Arrival: Arrival{Tenant: tn, At: at, Input: 100, Output: 1}, Result: res,
			Ended: ended, TTFT: ttft, Replica: -1, Attempts: 1}
		if res == Rejected {
			o.Reason = "queue-full"
		}
		return o
	}
	s, ms := time.Second, time.Millisecond
	for _, o := range []Outcome{
		out(retail, 30*s, 31*s, Completed, 100*ms),   // warm-up: not counted
		out(retail, 90*s, 91*s, Completed, 100*ms),   // not short, met
		out(retail, 130*s, 300*s, Completed, 100*ms), // short, ended after: met
		out(retail, 150*s, 150*s, Rejected, 0),       // short, missed
		out(retail, 170*s, 175*s, Completed, 5*s),    // short, missed (TTFT)
		out(retail, 250*s, 251*s, Completed, 100*ms), // not short, met
		out(retail, 500*s, 0, InFlight, 0),           // short, in flight
		out(bank, 150*s, 151*s, Completed, 100*ms),   // EU-bound: not the pool's
	} {
		rec.Add(o)
	}
	rec.SetAutoscaling(map[string]ScalerSnapshot{"usw-h100-8b": {Tally: sched.ScalerTally{Series: []ReplicaCount{
		{TS: 0, Requested: 3, Serving: 3},
		{TS: 120, Requested: 5, Provisioning: 2, Serving: 3},
		{TS: 200, Requested: 5, Serving: 5},
		{TS: 400, Requested: 6, Provisioning: 1, Serving: 5},
	}}}})
	rep, err := rec.Report(10*time.Minute, nil)
	require.NoError(t, err)
	ar := rep.Autoscaling["usw-h100-8b"]
	require.InDelta(t, 80+200, ar.ShortS, 1e-9)
	require.InDelta(t, 2*80+200, ar.ShortReplicaS, 1e-9)
	require.Equal(t, ShortfallTenant{Arrived: 6, ArrivedShort: 4, FinishedShort: 3, FinishedNotShort: 2,
		SLOAttainmentShort: Ratio(round(1.0/3, 6)), SLOAttainmentNotShort: 1}, ar.Tenants["retail-us"])
	// global sent nothing: its counts are 0 and its attainments null
	// (NaN, which no Equal matches), not a 0 that reads as a result.
	g := ar.Tenants["global"]
	require.False(t, g.SLOAttainmentShort.Measured() || g.SLOAttainmentNotShort.Measured(), "%+v", g)
	g.SLOAttainmentShort, g.SLOAttainmentNotShort = 0, 0
	require.Equal(t, ShortfallTenant{}, g)
	require.NotContains(t, ar.Tenants, "bank-eu")
}
