package twin

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/stretchr/testify/require"
)

// mmcStep is an M/M/c pool of c replicas (service exponential, mean
// 1/mu) at utilisation rho0, stepped to rho1 at step by a second stream,
// autoscaled on utilization toward target.
func mmcStep(c int, mu, rho0, rho1 float64, step, d time.Duration) *scenarios.Scenario {
	sc := azureLike(c, rho0*float64(c)*mu, d)
	p := &sc.Pools[0]
	p.Service = &scenarios.Service{Distribution: "exponential", Mean: dur(time.Duration(float64(time.Second) / mu))}
	p.Profiles = nil
	sc.Classes[0].Deadline = 0
	sc.Classes[0].SLO = scenarios.SLO{}
	sc.Policy.Admission.QueueLimit = 1 << 30
	second := sc.Workload[0]
	second.Name, second.Start = "step", dur(step)
	second.Arrivals.Rate = (rho1 - rho0) * float64(c) * mu
	sc.Workload = append(sc.Workload, second)
	return sc
}

// TestAutoscaleLoadStepMatchesErlangC is issue 24's closed form: after an
// M/M/c load step from rho 0.5 to 0.9 with a target utilisation of 0.7
// and a deterministic provisioning delay d, the pool reaches the HPA
// rule's replica count, ceil(8 × 0.9/0.7) = 11, and its mean wait is
// within 3 % of Erlang C's for 11 replicas from no later than the step +
// one sync period (the decision) + d + cold start on.
//
// The numbers: c = 8 at mu = 10/s (service 100 ms), so that a 60 s sync
// period averages the busy slots over ~600 service times (the measured
// utilisation's standard deviation is ~0.01, against the 0.875–0.962 band
// in which the rule gives 11); min_replicas 8 keeps the pool at 8 before
// the step (the rule would shrink it at rho 0.5). At 11 the utilisation is
// 0.655, inside the 0.1 tolerance, so 11 holds. Erlang C for 11 servers at
// 72/s gives P(wait) 0.141 and a mean wait of 3.72 ms; a wait's squared
// coefficient of variation is 2/P − 1 ≈ 13, and successive waits are
// strongly correlated (measured: the mean's variance is ~480/n, not 13/n),
// so the test measures the mean's standard error by batch means (40
// batches of 45 min) over 30 h after settling (~7.8 M requests, about
// 0.8 %) and requires it under 1 %: the 3 % band is then more than three
// standard errors. (At 10 h the standard error was 1.07 %.)
func TestAutoscaleLoadStepMatchesErlangC(t *testing.T) {
	if testing.Short() {
		t.Skip("30 h of M/M/c: run without -short")
	}
	const (
		c0, mu, rho0, rho1, target = 8, 10.0, 0.5, 0.9, 0.7
		want                       = 11 // ceil(8 × 0.9/0.7)
	)
	step, delay, cold, sync := 10*time.Minute, 2*time.Minute, time.Minute, time.Minute
	settle := step + sync + delay + cold
	window := 30 * time.Hour
	sc := mmcStep(c0, mu, rho0, rho1, step, settle+window)
	sc.Seed = 1
	sc.Drain = dur(time.Minute)
	p := &sc.Pools[0]
	p.ColdStart = dur(cold)
	p.Autoscale = &scenarios.Autoscale{Metric: "utilization", Target: target, MinReplicas: c0, MaxReplicas: 20,
		SyncPeriod: dur(sync)}
	p.Acquisition = &scenarios.Acquisition{Delay: &scenarios.Delay{Distribution: "constant", Mean: dur(delay)}}

	const batches = 40
	var sum [batches]float64
	var n [batches]int
	rep, err := Run(context.Background(), sc, Options{OnComplete: func(l RequestLog) {
		if l.Arrived < settle || l.Arrived >= settle+window {
			return
		}
		b := int(int64(l.Arrived-settle) * batches / int64(window))
		sum[b] += (l.Dispatched - l.Arrived).Seconds()
		n[b]++
	}})
	require.NoError(t, err)

	as := rep.Autoscaling["h100"]
	require.NotNil(t, as)
	var at float64 = -1
	for _, c := range as.Series {
		if c.Serving == want && at < 0 {
			at = c.TS
		}
		if at >= 0 {
			require.Equal(t, want, c.Requested, "the count holds after settling: %+v", c)
		}
	}
	require.GreaterOrEqual(t, at, 0.0, "never served %d replicas: %+v", want, as.Series)
	require.LessOrEqual(t, at, settle.Seconds(), "serving %d at %.0fs, after step + sync + d + cold start", want, at)

	lambda := rho1 * c0 * mu
	_, wantW := erlangC(want, lambda, mu)
	var means [batches]float64
	total, count := 0.0, 0
	for b := range batches {
		means[b] = sum[b] / float64(n[b])
		total += sum[b]
		count += n[b]
	}
	mean := total / float64(count)
	ss := 0.0
	for _, m := range means {
		ss += (m - mean) * (m - mean)
	}
	se := math.Sqrt(ss/(batches-1)) / math.Sqrt(batches)
	t.Logf("mean wait %.5fs over %d requests, Erlang C (c=%d) %.5fs, standard error %.2f %%, %d scale-ups, to serving p50 %.0fs",
		mean, count, want, wantW, 100*se/mean, as.ScaleUps, as.ToServing.P50)
	require.Less(t, se/mean, 0.01, "the window is too short for the 3 %% band to be three standard errors")
	require.InEpsilon(t, wantW, mean, 0.03, "mean wait %.5fs, Erlang C %.5fs (rerun: seed %d)", mean, wantW, sc.Seed)
}

// acqScenario: a small engine pool of 2 autoscaled on queue depth, loaded
// far past it, with an acquisition block mod sets.
func acqScenario(mod func(*scenarios.Acquisition)) *scenarios.Scenario {
	sc := azureLike(2, 30, 20*time.Minute)
	p := &sc.Pools[0]
	p.PricePerGPUHour = 1
	p.ColdStart = dur(time.Minute)
	p.Autoscale = &scenarios.Autoscale{Metric: "queue", Target: 5, MinReplicas: 2, MaxReplicas: 10}
	q := &scenarios.Acquisition{Delay: &scenarios.Delay{Distribution: "constant", Mean: dur(2 * time.Minute)}}
	if mod != nil {
		mod(q)
	}
	p.Acquisition = q
	return sc
}

func TestAutoscaleAcquisition(t *testing.T) {
	zero, two := 0, 2
	tests := []struct {
		name string
		mod  func(*scenarios.Acquisition)
		// want
		maxServing  int
		refused     bool
		fastest     float64 // to_serving p50 at most, s
		reservedHrs bool
	}{
		{name: "on demand: provisioning delay then cold start",
			maxServing: 10, fastest: 15 + 120 + 60 + 30},
		{name: "reserved: cold start only",
			mod:        func(q *scenarios.Acquisition) { q.Reserved = 10 },
			maxServing: 10, fastest: 15 + 60 + 30, reservedHrs: true},
		{name: "burst capped: the rest refused",
			mod:        func(q *scenarios.Acquisition) { q.Reserved, q.Burst = 2, &two },
			maxServing: 4, refused: true, reservedHrs: true},
		{name: "no burst, no reservation left: nothing granted",
			mod:        func(q *scenarios.Acquisition) { q.Burst = &zero },
			maxServing: 2, refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := acqScenario(tt.mod)
			rep := run(t, sc)
			as := rep.Autoscaling["h100"]
			require.NotNil(t, as)
			require.Equal(t, tt.maxServing, as.MaxServing, "series %+v", as.Series)
			require.Equal(t, tt.refused, as.Refused > 0, "refused %d", as.Refused)
			if tt.refused {
				require.Equal(t, as.Refused, as.RefusedBy[RefusedReservation])
			}
			if tt.fastest > 0 {
				require.Positive(t, as.ToServing.Count)
				require.LessOrEqual(t, as.ToServing.P50, tt.fastest)
			}
			require.Equal(t, tt.reservedHrs, as.ReservedHours > 0)
			// The pool's cost is the replica-hours paid for, not 2 × 20 min.
			require.InDelta(t, as.ReservedCost+as.BurstCost, rep.Pools["h100"].Cost, 1e-6)
			require.InDelta(t, as.ReservedHours+as.BurstHours, rep.Pools["h100"].Cost, 1e-6, "price 1/GPU-hour")
			if tt.maxServing > 2 {
				require.Greater(t, rep.Pools["h100"].Cost, 2*sc.Duration.D().Hours())
			}
		})
	}
}

// A scale-down drains: the pool shrinks back to its minimum once the load
// ends, after the scale-down stabilization, and pays only for what it held.
func TestAutoscaleScaleDownAfterLoad(t *testing.T) {
	sc := acqScenario(nil)
	sc.Workload[0].Stop = dur(8 * time.Minute)
	sc.Duration = dur(30 * time.Minute)
	rep := run(t, sc)
	as := rep.Autoscaling["h100"]
	last := as.Series[len(as.Series)-1]
	require.Equal(t, 2, last.Requested, "series %+v", as.Series)
	require.Equal(t, 2, last.Serving)
	require.Positive(t, as.ScaleDowns)
	require.Greater(t, as.MaxServing, 2)
	hours := as.ReservedHours + as.BurstHours
	require.Less(t, hours, 10*sc.Duration.D().Hours(), "not paid at max_replicas")
	require.Greater(t, hours, 2*sc.Duration.D().Hours())
}

// A pool without autoscale has no autoscaling section and its fixed cost.
func TestNoAutoscaleNoSection(t *testing.T) {
	rep := run(t, azureLike(2, 1, 5*time.Minute))
	require.Nil(t, rep.Autoscaling)
	require.InDelta(t, 2*4*5.0/60, rep.Pools["h100"].Cost, 1e-6)
}

// The acquisition faults: what the provider refuses or delays, and why,
// as the report counts it.
func TestAutoscaleAcquisitionFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault string
		// want
		refusedBy string // the reason refused; "" for none
		lo, hi    int    // the most replicas serving at once, within
		slowest   float64
	}{
		{name: "stockout: nothing on demand",
			fault: "stockout provider=aws at=0s", refusedBy: RefusedStockout, lo: 2, hi: 2},
		{name: "stockout of the pool's accelerator",
			fault: "stockout provider=aws accelerator=h100 at=0s", refusedBy: RefusedStockout, lo: 2, hi: 2},
		{name: "stockout in part: each replica asked granted with a chance of a quarter, the rest asked again",
			fault: "stockout region=us-east at=0s grant=0.25", refusedBy: RefusedStockout, lo: 3, hi: 10},
		{name: "quota-cap at 5 GPUs",
			fault: "quota-cap provider=aws at=0s gpus=5", refusedBy: RefusedQuota, lo: 5, hi: 5},
		{name: "slow provisioning: 4 × 2 m",
			fault: "slow-provisioning pool=h100 at=0s factor=4", lo: 10, hi: 10, slowest: 15 + 480 + 60},
		{name: "stockout that ends: granted after",
			fault: "stockout provider=aws at=0s for=5m", refusedBy: RefusedStockout, lo: 10, hi: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := acqScenario(nil)
			sc.Faults = []string{tt.fault}
			rep := run(t, sc)
			as := rep.Autoscaling["h100"]
			if tt.refusedBy == "" {
				require.Zero(t, as.Refused, "refused %v", as.RefusedBy)
			} else {
				require.Positive(t, as.RefusedBy[tt.refusedBy], "refused %v", as.RefusedBy)
				require.Equal(t, as.Refused, as.RefusedBy[tt.refusedBy])
			}
			require.GreaterOrEqual(t, as.MaxServing, tt.lo, "series %+v", as.Series)
			require.LessOrEqual(t, as.MaxServing, tt.hi, "series %+v", as.Series)
			if tt.slowest > 0 {
				require.InDelta(t, tt.slowest, as.ToServing.Max, 15, "the slowest replica's time to serving")
			}
		})
	}
}

// The autoscaling section is reachable by expectations, by report path.
func TestAutoscaleExpectations(t *testing.T) {
	sc := acqScenario(nil)
	sc.Faults = []string{"stockout provider=aws at=0s for=5m"}
	sc.Expect = []string{
		"autoscaling.h100.refused_by.stockout > 0",
		"autoscaling.h100.to_serving.max < 10m",
		"autoscaling.h100.max_serving == 10",
		"autoscaling.h100.refused == 0", // fails: the stockout refused some
	}
	rep := run(t, sc)
	require.Len(t, rep.Expectations, 4)
	for i, e := range rep.Expectations {
		require.Equal(t, i < 3, e.Pass, "%s: %v", e.Expr, e.Value)
	}
}

// A node-loss with a count takes replicas that run, not an autoscaled
// pool's absent ones (2 of 10 present: an unfiltered draw would mostly
// take an absent one, and nothing would be detected).
func TestAutoscaleNodeLossHitsPresentReplicas(t *testing.T) {
	for seed := range uint64(5) {
		sc := acqScenario(nil)
		sc.Seed = seed + 1
		sc.Workload[0].Arrivals.Rate = 2 // no scale-up: 2 present
		sc.Faults = []string{"node-loss pool=h100 at=1m count=1"}
		rep := run(t, sc)
		for _, f := range rep.Faults {
			require.True(t, f.TimeToDetectS.Happened(), "seed %d: the lost node was not one that ran", sc.Seed)
		}
	}
}

// The live gateway's core config gives an autoscaled pool its maximum of
// replicas, those beyond the starting count absent, the way a twin run builds it:
// the gateway's scaler provisions them.
func TestCoreConfigAutoscaledPoolAbsent(t *testing.T) {
	sc := acqScenario(nil)
	cfg, err := compile.CoreConfig(sc)
	require.NoError(t, err)
	ps := sc.Pools[0]
	require.Len(t, cfg.Replicas, ps.Autoscale.MaxReplicas)
	for i, r := range cfg.Replicas {
		require.Equal(t, i >= ps.Replicas, r.Absent, "replica %d", i)
	}
}

// The wait metric scales on the core's predicted wait.
func TestAutoscaleOnPredictedWait(t *testing.T) {
	sc := acqScenario(nil)
	sc.Pools[0].Autoscale = &scenarios.Autoscale{Metric: "wait", TargetWait: dur(time.Second), MinReplicas: 2, MaxReplicas: 10}
	rep := run(t, sc)
	as := rep.Autoscaling["h100"]
	require.Positive(t, as.ScaleUps)
	require.Greater(t, as.MaxServing, 2, "series %+v", as.Series)
}

// Provisioning delays come from the seeded "acquisition" stream: the same
// seed gives the same report, another seed another.
func TestAutoscaleDeterministic(t *testing.T) {
	mk := func(seed uint64) string {
		sc := acqScenario(func(q *scenarios.Acquisition) {
			q.Delay = &scenarios.Delay{Distribution: "lognormal", Mean: dur(2 * time.Minute)}
		})
		sc.Seed = seed
		rep := run(t, sc)
		rep.Run = RunInfo{}
		j, err := rep.JSON()
		require.NoError(t, err)
		return string(j)
	}
	a := mk(1)
	require.Equal(t, a, mk(1))
	require.NotEqual(t, a, mk(2))
}

// An autoscaled pool that starts cold loads only its starting replicas at
// the start: the others load when provisioned, and none serves before its
// own cold start ends.
func TestAutoscaleStartColdLoadsOnlyTheStartingReplicas(t *testing.T) {
	sc := acqScenario(func(q *scenarios.Acquisition) { q.Reserved = 10 })
	sc.Pools[0].StartCold = true
	var logs []RequestLog
	rep, err := Run(context.Background(), sc, Options{OnComplete: func(l RequestLog) { logs = append(logs, l) }})
	require.NoError(t, err)
	as := rep.Autoscaling["h100"]
	require.EqualValues(t, uint64(sc.Pools[0].Replicas)+as.Granted, rep.Pools["h100"].ColdStarts,
		"a cold start for each starting replica and each one granted, no more")
	cold := sc.Pools[0].ColdStart.D()
	for _, l := range logs {
		if l.Replica >= sc.Pools[0].Replicas {
			// Provisioned no earlier than the first sync: it cannot
			// serve before a sync period plus its cold start.
			require.GreaterOrEqual(t, l.Dispatched, sc.Pools[0].Autoscale.SyncPeriod.D()+cold, "replica %d", l.Replica)
		}
	}
}

// A drill's snapshot shows an autoscaled pool's scaler as the report's
// series counts it at that moment, the refusals of a stockout, and the
// router's figures over the replicas provisioned only; a pool that does
// not autoscale has none.
func TestAutoscaleSnapshot(t *testing.T) {
	sets := []string{"duration=20m", "warmup=0s", "drain=1m"}
	plain, err := scenarios.LoadNamedWithSets("mmc", sets)
	require.NoError(t, err)
	d, err := NewDrill(plain, Options{})
	require.NoError(t, err)
	d.Advance(time.Minute)
	require.Nil(t, d.Snapshot().Regions[0].Pools[0].Autoscale)

	sc, err := scenarios.LoadNamedWithSets("mmc", append(sets,
		"pools.mmc.autoscale={metric: utilization, target: 0.7, min_replicas: 4, max_replicas: 8, sync_period: 30s}",
		"pools.mmc.acquisition={delay: {distribution: constant, mean: 2m}}",
		"pools.mmc.cold_start=30s",
		"workload.poisson.arrivals.rate=3",
		"workload.poisson.stop=9m",
		"faults=[stockout pool=mmc at=2m45s for=4m]"))
	require.NoError(t, err)
	d, err = NewDrill(sc, Options{})
	require.NoError(t, err)
	type seen struct {
		at time.Duration
		as AutoscaleState
	}
	var snaps []seen
	refusedAt := time.Duration(-1)
	for at := 500 * time.Millisecond; !d.Done(); at += 5 * time.Second {
		d.Advance(at)
		p := d.Snapshot().Regions[0].Pools[0]
		a := p.Autoscale
		require.NotNil(t, a, "at %v", at)
		require.Equal(t, a.Warming+a.Serving, p.Replicas, "at %v: the router's replicas are the provisioned ones: %+v", at, *a)
		require.LessOrEqual(t, p.Up, a.Serving, "at %v", at)
		require.Equal(t, p.Replicas*sc.Pools[0].MaxBatch, p.Slots, "at %v", at)
		if a.Refused > 0 && refusedAt < 0 {
			refusedAt = at
			require.Equal(t, RefusedStockout, a.LastRefusedWhy)
			require.Equal(t, 2, a.Short(), "at %v: %+v", at, *a)
		}
		snaps = append(snaps, seen{at, *a})
	}
	require.Positive(t, refusedAt, "the stockout refused nothing")
	rep, err := d.Report()
	require.NoError(t, err)
	ar := rep.Autoscaling["mmc"]
	require.Equal(t, ar.Refused, snaps[len(snaps)-1].as.Refused)
	require.Positive(t, ar.ScaleDowns, "the test does not see a scale-down")
	for _, s := range snaps {
		var c ReplicaCount
		for _, e := range ar.Series {
			if e.TS <= s.at.Seconds() {
				c = e
			}
		}
		got := ReplicaCount{TS: c.TS, Requested: s.as.Requested, Provisioning: s.as.Provisioning,
			Warming: s.as.Warming, Serving: s.as.Serving, Draining: s.as.Draining}
		require.Equal(t, c, got, "at %v", s.at)
	}
}
