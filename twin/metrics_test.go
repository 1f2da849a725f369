package twin

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// runMetrics runs the library scenario name (with sets) sampling every
// step, and returns the report and the series.
func runMetrics(t testing.TB, name string, step time.Duration, sets ...string) (*Report, *Metrics) {
	t.Helper()
	sc, err := scenarios.LoadNamedWithSets(name, sets)
	require.NoError(t, err)
	m := &Metrics{Step: step}
	rep, err := Run(context.Background(), sc, Options{Metrics: m})
	require.NoError(t, err, "scenario %s %v", name, sets)
	return rep, m
}

func reportJSON(t testing.TB, rep *Report) string {
	t.Helper()
	rep.Run = RunInfo{}
	b, err := rep.JSON()
	require.NoError(t, err)
	return string(b)
}

// Sampling reads the run and schedules nothing: the report, event count
// included, is the same with Metrics as without.
func TestMetricsLeaveTheReportAlone(t *testing.T) {
	for _, name := range []string{"default", "gameday-regional-outage", "gameday-quota-exhaustion", "gameday-spot-loss"} {
		t.Run(name, func(t *testing.T) {
			sc, err := scenarios.LoadNamed(name)
			require.NoError(t, err)
			plain, err := Run(context.Background(), sc, Options{})
			require.NoError(t, err)
			// An odd step, off the run's one-minute slices.
			sampled, _ := runMetrics(t, name, 7*time.Second)
			require.Equal(t, reportJSON(t, plain), reportJSON(t, sampled))
		})
	}
}

func TestMetricsSampleEveryStepAndAtTheEnd(t *testing.T) {
	rep, m := runMetrics(t, "default", 7*time.Second, "duration=5m", "drain=1m")
	end := time.Duration(rep.SimDurationS * float64(time.Second))
	require.Equal(t, time.Duration(0), m.Times[0])
	for i := 1; i < len(m.Times)-1; i++ {
		require.Equal(t, time.Duration(i)*7*time.Second, m.Times[i], "Times[%d]", i)
	}
	require.Equal(t, end, m.Times[len(m.Times)-1], "the last sample is at the end of the run")
	require.Len(t, m.Families, len(signals.All))
	for _, f := range m.Families {
		for _, s := range f.Series {
			require.Len(t, s.Labels, len(f.Signal.Labels), "%s", f.Signal.Name)
			require.Equal(t, len(m.Times)-s.First, s.Points(), "%s%v: a sample at every instant from its first", f.Signal.Name, s.Labels)
			if f.Signal.Type == signals.Counter {
				for i := 1; i < len(s.Values); i++ {
					require.GreaterOrEqual(t, s.Values[i], s.Values[i-1], "%s%v: counters never go down", f.Signal.Name, s.Labels)
				}
			}
		}
	}
}

// With no warm-up the report counts every request, and the series at the
// last instant add up to it.
func TestMetricsTotalsMatchTheReport(t *testing.T) {
	for _, tt := range []struct {
		name string
		sets []string
	}{
		{"default", []string{"warmup=0s", "duration=10m"}},
		{"gameday-model-retirement", []string{"warmup=0s"}},
		{"gameday-retry-storm", []string{"warmup=0s"}},
		{"gameday-spot-loss", []string{"warmup=0s"}},
		{"gameday-cpu-fallback", []string{"warmup=0s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, m := runMetrics(t, tt.name, 15*time.Second, tt.sets...)
			outcome := map[string]float64{}
			for _, s := range m.Family(signals.Requests).Series {
				outcome[s.Labels[2]] += s.Last()
			}
			c := rep.Requests
			require.Equal(t, float64(c.Completed), outcome["completed"])
			require.Equal(t, float64(c.Rejected), outcome["rejected"])
			require.Equal(t, float64(c.Failed), outcome["failed"])
			require.Equal(t, float64(c.TimedOut), outcome["timed_out"])
			require.Equal(t, float64(c.Cancelled), outcome["cancelled"])

			var rejected float64
			for _, s := range m.Family(signals.Rejected).Series {
				rejected += s.Last()
				require.Equal(t, float64(rep.Rejections[s.Labels[1]]), sumLast(m.Family(signals.Rejected), 1, s.Labels[1]),
					"rejections.%s", s.Labels[1])
			}
			require.Equal(t, float64(c.Rejected), rejected)

			for _, sig := range []signals.Signal{signals.E2E, signals.TTFT} {
				var n uint64
				for _, s := range m.Family(sig).Series {
					n += s.Hist[len(s.Hist)-1].Count
				}
				require.Equal(t, c.Completed, n, "%s: one observation per completed request", sig.Name)
			}
			var fallbacks float64
			for _, s := range m.Family(signals.FallbacksOK).Series {
				fallbacks += s.Last()
			}
			require.Equal(t, float64(c.Fallbacks), fallbacks)
			var failedFallbacks float64
			for _, s := range m.Family(signals.FallbacksFailed).Series {
				failedFallbacks += s.Last()
			}
			require.LessOrEqual(t, failedFallbacks, float64(c.Failed+c.Rejected+c.TimedOut))
			if tt.name == "gameday-cpu-fallback" {
				require.Positive(t, failedFallbacks, "interactive sent to the CPU pool and still refused or timed out")
			}

			var dispatched uint64
			for name, p := range rep.Pools {
				dispatched += p.Dispatched
				require.Equal(t, float64(p.ColdStarts), m.Family(signals.ColdStarts).Find(name, p.Region).Last(), "pool %s cold starts", name)
				if s := m.Family(signals.Preemptions).Find(name, p.Region); s != nil {
					require.Equal(t, float64(p.Preemptions), s.Last(), "pool %s preemptions", name)
				}
			}
			var routes float64
			for _, s := range m.Family(signals.Routes).Series {
				routes += s.Last()
			}
			require.Equal(t, float64(dispatched), routes, "a route decision per dispatch")
		})
	}
}

func sumLast(f *Family, label int, value string) float64 {
	var v float64
	for _, s := range f.Series {
		if s.Labels[label] == value {
			v += s.Last()
		}
	}
	return v
}

// valueAt is s's value at instant at, and whether it had one.
func valueAt(m *Metrics, s *Series, at time.Duration) (float64, bool) {
	for i, t := range m.Times {
		if t == at && i >= s.First {
			return s.Values[i-s.First], true
		}
	}
	return 0, false
}

func TestMetricsFollowTheFaults(t *testing.T) {
	t.Run("regional outage", func(t *testing.T) {
		// eu-west goes dark at 10m for 15m: the router's view of its
		// pools goes to a complete outage and their breakers open.
		_, m := runMetrics(t, "gameday-regional-outage", 15*time.Second)
		state := m.Family(signals.DeploymentState)
		var euw int
		for _, s := range state.Series {
			before, _ := valueAt(m, s, 9*time.Minute)
			during, _ := valueAt(m, s, 20*time.Minute)
			after, _ := valueAt(m, s, 35*time.Minute)
			if s.Labels[1] != "eu-west" {
				require.Zero(t, during, "pool %s outside the outage", s.Labels[0])
				continue
			}
			euw++
			require.Zero(t, before, "pool %s before the outage", s.Labels[0])
			require.Equal(t, 2.0, during, "pool %s during the outage", s.Labels[0])
			require.Zero(t, after, "pool %s after it", s.Labels[0])
			cooled, _ := valueAt(m, m.Family(signals.CooledDown).Find(s.Labels...), 20*time.Minute)
			require.Positive(t, cooled, "pool %s: breakers open", s.Labels[0])
		}
		require.Positive(t, euw)
	})
	t.Run("quota exhaustion", func(t *testing.T) {
		// gpu-cloud-a's quota (pool use-h100-8b) drops to zero at 10m
		// for 10m; gpu-cloud-c's (euw-a100-8b) is throttled at 28m for
		// 8m; gpu-cloud-b's (usw-h100-8b) never is.
		_, m := runMetrics(t, "gameday-quota-exhaustion", 15*time.Second)
		f := m.Family(signals.Throttled)
		require.Len(t, f.Series, 3, "a series per pool, from the start")
		for _, s := range f.Series {
			before, _ := valueAt(m, s, 9*time.Minute)
			require.Zero(t, before, "pool %s: no 429 before the quota is cut", s.Labels[0])
		}
		cut, _ := valueAt(m, f.Find("use-h100-8b", "us-east"), 20*time.Minute)
		require.Positive(t, cut, "gpu-cloud-a cut off")
		eu, _ := valueAt(m, f.Find("euw-a100-8b", "eu-west"), 27*time.Minute)
		require.Zero(t, eu, "gpu-cloud-c before its throttle")
		require.Positive(t, f.Find("euw-a100-8b", "eu-west").Last(), "gpu-cloud-c throttled")
		require.Zero(t, f.Find("usw-h100-8b", "us-west").Last(), "gpu-cloud-b never throttled")
	})
	t.Run("model retirement", func(t *testing.T) {
		_, m := runMetrics(t, "gameday-model-retirement", 15*time.Second)
		require.NotEmpty(t, m.Family(signals.FallbacksOK).Series)
		var fell bool
		for _, s := range m.Family(signals.Routes).Series {
			if s.Labels[0] != s.Labels[1] && s.Last() > 0 {
				fell = true
			}
		}
		require.True(t, fell, "routes to a fallback model")
	})
}

func TestMetricsGaugesCoverTheFleet(t *testing.T) {
	rep, m := runMetrics(t, "default", 15*time.Second, "duration=5m")
	replicas := 0
	for _, p := range rep.Pools {
		replicas += p.Replicas
	}
	require.Len(t, m.Family(signals.Breaker).Series, replicas, "a breaker series per replica")
	require.Len(t, m.Family(signals.QueueDepth).Series, 2, "a queue per model")
	require.Len(t, m.Family(signals.DeploymentState).Series, len(rep.Pools))
	require.Len(t, m.Family(signals.KVAllocatable).Series, len(rep.Pools))
	require.Len(t, m.Family(signals.Saturation).Series, 1)
	require.Len(t, m.Family(signals.DegradationStep).Series, 1)
	sat := m.Family(signals.Saturation).Series[0]
	var busy bool
	for _, v := range sat.Values {
		require.GreaterOrEqual(t, v, 0.0)
		require.LessOrEqual(t, v, 1.0)
		busy = busy || v > 0
	}
	require.True(t, busy, "saturation moves under load")
	for _, s := range m.Family(signals.KVAllocatable).Series {
		require.Positive(t, s.Last(), "pool %s has KV free at the end", s.Labels[0])
	}
}

func TestMetricsRejectABadStep(t *testing.T) {
	sc, err := scenarios.LoadNamed("default")
	require.NoError(t, err)
	_, err = Run(context.Background(), sc, Options{Metrics: &Metrics{}})
	require.ErrorContains(t, err, "step")
}

func TestMetricsFollowTheLadder(t *testing.T) {
	// The surge climbs the ladder to answer from cache; cached answers
	// are observed with no pool or region (empty labels).
	sc := surge()
	sc.Policy.Degradation = steps(
		scenarios.DegradeStep{Name: "cache", Action: "cached-answers", Class: "interactive", HitRate: 0.3, CacheAge: dur(10 * time.Minute),
			Trigger: scenarios.Trigger{QueueWait: dur(2 * time.Second)}},
		scenarios.DegradeStep{Name: "shed", Action: "shed-batch", Class: "batch", Trigger: scenarios.Trigger{QueueWait: dur(4 * time.Second)}},
	)
	m := &Metrics{Step: 15 * time.Second}
	rep, err := Run(context.Background(), sc, Options{Metrics: m})
	require.NoError(t, err)
	require.Positive(t, rep.Degradation.Cached)
	step := m.Family(signals.DegradationStep).Series[0]
	require.Equal(t, 2.0, slices.Max(step.Values), "both rungs engaged at the peak")
	before, _ := valueAt(m, step, 9*time.Minute)
	require.Zero(t, before, "nothing engaged before the surge")
	var cached uint64
	for _, s := range m.Family(signals.E2E).Series {
		if s.Labels[1] == "" {
			require.Equal(t, []string{"llama-8b", "", "", "interactive"}, s.Labels)
			cached = s.Hist[len(s.Hist)-1].Count
		}
	}
	require.Positive(t, cached, "cached answers observed without a pool")
}

// The waiting gauges are the drill console's figures at the same instants
// (the run is the same with or without sampling): a series per class from
// the start, 0 when nothing waits; while eu-west is dark the oldest
// request waiting for its first token passes the TTFT objective within
// seconds, and once breakers route around it nothing waits that long.
func TestMetricsWaitingFollowTheOutage(t *testing.T) {
	const step = time.Second
	sets := []string{"duration=14m", "warmup=0s"}
	_, m := runMetrics(t, "gameday-regional-outage", step, sets...)
	sc, err := scenarios.LoadNamedWithSets("gameday-regional-outage", sets)
	require.NoError(t, err)
	oldest, waiting := m.Family(signals.OldestWaiting), m.Family(signals.WaitingRequests)
	require.Len(t, oldest.Series, len(sc.Classes), "a series per class")
	require.Len(t, waiting.Series, len(sc.Classes), "a series per class")
	ci := slices.IndexFunc(sc.Classes, func(c scenarios.Class) bool { return c.SLO.TTFT.D() > 0 })
	require.GreaterOrEqual(t, ci, 0, "a class with a TTFT objective")
	class := sc.Classes[ci]
	o, w := oldest.Find(class.Name), waiting.Find(class.Name)
	require.NotNil(t, o)
	require.NotNil(t, w)
	require.Zero(t, o.First, "from the first instant")
	for i, at := range m.Times {
		require.GreaterOrEqual(t, o.Values[i], 0.0)
		require.LessOrEqual(t, o.Values[i], at.Seconds(), "at %v", at)
		require.Equal(t, w.Values[i] == 0, o.Values[i] == 0, "at %v: %g waiting, the oldest %gs", at, w.Values[i], o.Values[i])
	}

	d, err := NewDrill(sc, Options{})
	require.NoError(t, err)
	for _, at := range []time.Duration{5 * time.Minute, 10*time.Minute + 3*time.Second, 10*time.Minute + 8*time.Second, 13 * time.Minute} {
		d.Advance(at)
		cs := d.Snapshot().Classes[ci]
		got, _ := valueAt(m, o, at)
		require.InDelta(t, cs.OldestWaiting.Seconds(), got, 1e-9, "oldest waiting at %v", at)
		got, _ = valueAt(m, w, at)
		require.Equal(t, float64(cs.Waiting), got, "waiting at %v", at)
	}

	slo := class.SLO.TTFT.D().Seconds()
	peak := func(from, to time.Duration) float64 {
		v := 0.0
		for i, at := range m.Times {
			if at >= from && at < to {
				v = max(v, o.Values[i])
			}
		}
		return v
	}
	require.Less(t, peak(5*time.Minute, 10*time.Minute), slo, "healthy: nothing waits past the objective")
	require.Greater(t, peak(10*time.Minute, 10*time.Minute+15*time.Second), slo, "the outage holds requests past the objective")
	require.Less(t, peak(12*time.Minute, 14*time.Minute), slo, "routed around: nothing waits that long")
}

// The canary series follow the rollout in simulated time: the share steps
// 1 % → 5 % → 0 at the report's decision instants, the decision counters
// end at the report's decisions (one rollback), and the shadow outcomes add
// up to the copies sent less those still in flight at the end. The run is
// the same with or without sampling. A scenario without canaries has the
// families and no series.
func TestMetricsFollowTheCanary(t *testing.T) {
	sc, err := scenarios.Load("testdata/canary.yaml")
	require.NoError(t, err)
	m := &Metrics{Step: 15 * time.Second}
	rep, err := Run(context.Background(), sc, Options{Metrics: m})
	require.NoError(t, err)
	plainSc, err := scenarios.Load("testdata/canary.yaml")
	require.NoError(t, err)
	plain, err := Run(context.Background(), plainSc, Options{})
	require.NoError(t, err)
	require.Equal(t, reportJSON(t, plain), reportJSON(t, rep), "sampling changes nothing")

	c := rep.Canaries["neocloud"]
	require.NotNil(t, c)
	var acts []string
	for _, d := range c.Decisions {
		acts = append(acts, d.Action)
	}
	require.Equal(t, []string{"start", "step-up", "rollback"}, acts)

	share := m.Family(signals.CanaryShare)
	require.Len(t, share.Series, 1)
	s := share.Find("neocloud")
	require.NotNil(t, s)
	require.Zero(t, s.First, "from the first instant")
	// At every instant, the share the last decision at or before it set
	// (0 before the first): a sample is taken after every event at its
	// instant.
	at := func(d CanaryDecision) time.Duration { return time.Duration(math.Round(d.AtS*1e6)) * time.Microsecond }
	for i, t0 := range m.Times {
		want := 0.0
		for _, d := range c.Decisions {
			if at(d) <= t0 {
				want = d.To
			}
		}
		require.Equal(t, want, s.Values[i], "share at %v", t0)
	}
	for _, d := range c.Decisions {
		i := slices.IndexFunc(m.Times, func(t0 time.Duration) bool { return t0 >= at(d) })
		require.Positive(t, i, "an instant at or after the %s at %v", d.Action, at(d))
		require.Equal(t, d.To, s.Values[i], "%s at %v", d.Action, at(d))
		require.Equal(t, d.From, s.Values[i-1], "before the %s at %v", d.Action, at(d))
	}
	var steps []float64
	for _, v := range s.Values {
		if len(steps) == 0 || steps[len(steps)-1] != v {
			steps = append(steps, v)
		}
	}
	require.Equal(t, []float64{0, 0.01, 0.05, 0}, steps)

	decisions := m.Family(signals.CanaryDecisions)
	require.Len(t, decisions.Series, len(canaryActions), "every action from the first instant")
	for _, a := range canaryActions {
		ds := decisions.Find("neocloud", a)
		require.NotNil(t, ds, a)
		require.Zero(t, ds.First, a)
		want := 0.0
		if slices.Contains(acts, a) {
			want = 1
		}
		require.Equal(t, want, ds.Last(), a)
	}
	require.Equal(t, 1.0, decisions.Find("neocloud", "rollback").Last())

	shadows := m.Family(signals.ShadowRequests)
	require.Len(t, shadows.Series, len(shadowOutcomes))
	var ended float64
	for o, want := range map[string]uint64{"completed": c.Shadow.Completed, "failed": c.Shadow.Failed,
		"shed": c.Shadow.Shed, "cancelled": c.Shadow.Cancelled} {
		ss := shadows.Find("neocloud", o)
		require.NotNil(t, ss, o)
		require.Equal(t, float64(want), ss.Last(), o)
		ended += ss.Last()
	}
	require.Positive(t, c.Shadow.Sent)
	require.Equal(t, float64(c.Shadow.Sent-c.Shadow.InFlightAtEnd), ended)

	_, none := runMetrics(t, "default", 15*time.Second, "duration=2m", "warmup=0s")
	for _, sig := range []signals.Signal{signals.CanaryShare, signals.CanaryDecisions, signals.ShadowRequests} {
		f := none.Family(sig)
		require.NotNil(t, f, sig.Name)
		require.Empty(t, f.Series, "%s without canaries", sig.Name)
	}
}
