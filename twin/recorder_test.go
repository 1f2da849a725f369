package twin

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Fed the twin's own request timelines and fault times, the recorder must
// report exactly what the twin reports: same header, counts, quantiles and
// SLO attainment, per class, tenant and window; same rejections, pools'
// region, replicas and cost, fleet cost, fault attribution; and the same
// timeline entries for what both see (faults starting and ending, the
// warm-up and arrivals ending). Both assemble with assembleReport; this
// checks that what each feeds it is counted alike.
func TestRecorderReportsWhatTheTwinReports(t *testing.T) {
	const fault = "latency(eu-west)"
	// The twin detects the latency fault by an ejection: the Recorder is
	// told of each, as a gateway's Observer.Ejection would tell it.
	sets := []string{"duration=4m", "warmup=1m", `faults=["latency region=eu-west at=2m for=1m latency=2s"]`,
		`expect=["classes.interactive.ttft_s.p99 < 5s", "during latency(eu-west): requests.completed > 0"]`}
	sc, err := scenarios.LoadNamedWithSets("default", sets)
	require.NoError(t, err)
	var arrivals []Arrival
	streams, err := Arrivals(sc, func(a Arrival) error { arrivals = append(arrivals, a); return nil })
	require.NoError(t, err)

	sc, err = scenarios.LoadNamedWithSets("default", sets)
	require.NoError(t, err)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	for i, fp := range rec.Faults() {
		rec.FaultStarted(i, fp.Start)
		rec.FaultEnded(i, fp.End)
	}
	var logs, ejections int
	twinRep, err := Run(context.Background(), sc, Options{OnComplete: func(l RequestLog) {
		a := arrivals[l.ID]
		require.Equal(t, a.At, l.Arrived, "request %d", l.ID)
		rec.Add(Outcome{Arrival: a, Result: Completed, Ended: l.Done, TTFT: l.FirstToken - l.Arrived,
			Wait: l.Dispatched - l.Arrived, Replica: l.Replica, ServedModel: l.Served, Attempts: 1})
		logs++
	}, OnEjection: func(e sched.Ejection) {
		rec.Ejection(e.At, e)
		if !e.Returned {
			ejections++
		}
	}})
	require.NoError(t, err)
	require.Equal(t, twinRep.Requests.Arrived+uint64(countBefore(arrivals, time.Minute)), uint64(logs), "every request completed")
	require.Positive(t, ejections, "the twin ejected the slow replicas")

	got, err := rec.Report(time.Duration(twinRep.SimDurationS*float64(time.Second)), streams)
	require.NoError(t, err)
	same := func(what string, a, b any) {
		t.Helper()
		ja, err := json.Marshal(a)
		require.NoError(t, err)
		jb, err := json.Marshal(b)
		require.NoError(t, err)
		require.JSONEq(t, string(ja), string(jb), what)
	}
	require.Equal(t, []any{twinRep.Schema, twinRep.Scenario, twinRep.Seed, twinRep.SimDurationS, twinRep.WarmupS},
		[]any{got.Schema, got.Scenario, got.Seed, got.SimDurationS, got.WarmupS}, "header")
	same("requests", twinRep.Requests, got.Requests)
	same("classes", twinRep.Classes, got.Classes)
	same("tenants", twinRep.Tenants, got.Tenants)
	require.Contains(t, twinRep.Windows, "during "+fault)
	same("windows", twinRep.Windows, got.Windows)
	same("rejections", twinRep.Rejections, got.Rejections)
	same("workload", twinRep.Workload, got.Workload)
	same("expectations", twinRep.Expectations, got.Expectations)
	require.Equal(t, twinRep.Cost, got.Cost)
	require.Equal(t, len(twinRep.Pools), len(got.Pools))
	for name, tp := range twinRep.Pools {
		gp := got.Pools[name]
		require.NotNil(t, gp, "pool %s", name)
		require.Equal(t, []any{tp.Region, tp.Replicas, tp.Cost}, []any{gp.Region, gp.Replicas, gp.Cost}, "pool %s: region, replicas, cost", name)
	}
	same("faults", twinRep.Faults[fault], got.Faults[fault])
	require.Positive(t, got.Faults[fault].TimeToDetectS, "detected by an ejection")
	require.Less(t, float64(got.Faults[fault].SLOAttainmentDuring), 1.0, "the fault made requests miss: attribution counts both")

	shared := func(tl []TimelineEvent) []TimelineEvent {
		var out []TimelineEvent
		for _, ev := range tl {
			switch ev.Kind {
			case "fault-start", "fault-end", "warmup-end", "arrivals-end", "ejected", "ejection-end", "detected":
				out = append(out, ev)
			}
		}
		return out
	}
	require.Greater(t, len(shared(twinRep.Timeline)), 4)
	require.Equal(t, shared(twinRep.Timeline), shared(got.Timeline))
}

func countBefore(as []Arrival, t time.Duration) int {
	n := 0
	for _, a := range as {
		if a.At < t {
			n++
		}
	}
	return n
}

// Faults: detection from the breaker, mitigation and recovery from where
// requests were served, requests lost while active, scoped windows.
func TestRecorderAttributesFaults(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=10m", "warmup=0s",
		`faults=["regional-outage region=us-east at=2m for=3m"]`,
		`expect=["during regional-outage(us-east): requests.failed == 1", "faults.regional-outage(us-east).time_to_detect_s < 20s"]`})
	require.NoError(t, err)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	plans := rec.Faults()
	require.Len(t, plans, 1)
	fp := plans[0]
	require.Equal(t, "regional-outage(us-east)", fp.Label)
	require.Equal(t, 2*time.Minute, fp.Start)
	require.Equal(t, 5*time.Minute, fp.End)
	require.Len(t, fp.Replicas, 6, "us-east has 4+2 replicas")
	hit, spare := fp.Replicas[0], 7 // replica 7 is in eu-west
	rec.FaultStarted(0, fp.Start)
	rec.FaultEnded(0, fp.End)
	rec.Breaker(fp.Start+12*time.Second, hit, sched.Closed, sched.Open)
	s := func(d int) time.Duration { return time.Duration(d) * time.Second }
	arr := func(at time.Duration) Arrival {
		return Arrival{At: at, Tenant: 2, Class: 0, Model: 0, Input: 100, Output: 10}
	}
	// The dispatches, as the gateway reports them: a pool's count.
	for _, d := range []struct {
		at      time.Duration
		replica int
	}{{s(60), hit}, {s(140), spare}, {s(310), hit}} {
		rec.Dispatch(d.at, d.replica, 2, d.at) // research: bound nowhere
	}
	rec.Add(Outcome{Arrival: arr(s(60)), Result: Completed, Ended: s(61), TTFT: s(1) / 2, Replica: hit, ServedModel: 0, Attempts: 1})
	rec.Add(Outcome{Arrival: arr(s(125)), Result: Failed, Ended: s(131), Replica: -1, Attempts: 3})
	rec.Add(Outcome{Arrival: arr(s(140)), Result: Completed, Ended: s(141), TTFT: s(1) / 2, Replica: spare, ServedModel: 0, Attempts: 1})
	rec.Add(Outcome{Arrival: arr(s(310)), Result: Completed, Ended: s(311), TTFT: s(1) / 2, Replica: hit, ServedModel: 0, Attempts: 1})
	rec.Add(Outcome{Arrival: arr(s(400)), Result: InFlight, Ended: s(600), Replica: -1})
	rep, err := rec.Report(10*time.Minute, nil)
	require.NoError(t, err)
	fr := rep.Faults["regional-outage(us-east)"]
	require.InDelta(t, 12, float64(fr.TimeToDetectS), 1e-9)
	require.InDelta(t, 21, float64(fr.TimeToMitigateS), 1e-9)
	require.InDelta(t, 11, float64(fr.TimeToRecoverS), 1e-9)
	require.Equal(t, uint64(1), fr.RequestsLost)
	require.InDelta(t, 0.5, float64(fr.SLOAttainmentDuring), 1e-9)
	require.Equal(t, uint64(5), rep.Requests.Arrived)
	require.Equal(t, uint64(1), rep.Requests.InFlightAtEnd)
	require.Equal(t, uint64(2), rep.Requests.Retries)
	require.True(t, rep.Passed(), "%+v", rep.Expectations)
	require.Equal(t, uint64(2), rep.Pools["use-h100-8b"].Dispatched+rep.Pools["use-h100-70b"].Dispatched)
}

// TestRecorderCountsResidency: a live replay's residency figures come from
// the dispatches the gateway reports, by the run's rule: a measured request
// of a tenant bound to a jurisdiction dispatched to a pool outside it.
func TestRecorderCountsResidency(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=10m", "warmup=1m", "faults=[]", "expect=[]"})
	require.NoError(t, err)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	east, eu := -1, -1 // a us-east replica and an eu-west one
	for i, rp := range rec.p.replicas {
		switch rec.p.pools[rp.Pool].Region.Name {
		case "us-east":
			east = max(east, i)
		case "eu-west":
			eu = max(eu, i)
		}
	}
	require.True(t, east >= 0 && eu >= 0)
	const retail, bank, research = 0, 1, 2
	s := func(d int) time.Duration { return time.Duration(d) * time.Second }
	rec.Dispatch(s(120), east, bank, s(119))     // outside the EU: counted
	rec.Dispatch(s(130), east, bank, s(30))      // arrived in the warm-up: not measured
	rec.Dispatch(s(140), eu, bank, s(139))       // in the EU
	rec.Dispatch(s(150), eu, retail, s(149))     // outside the US: counted
	rec.Dispatch(s(160), east, research, s(159)) // bound nowhere
	rep, err := rec.Report(10*time.Minute, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(2), rep.ResidencyViolations)
	eastPool := rec.p.pools[rec.p.replicas[east].Pool].Spec.Name
	euPool := rec.p.pools[rec.p.replicas[eu].Pool].Spec.Name
	require.Equal(t, &TenantResidency{Jurisdiction: "eu", Violations: 1,
		Pools: map[string]uint64{eastPool: 1}, Regions: map[string]uint64{"us-east": 1}}, rep.ResidencyByTenant["bank-eu"])
	require.Equal(t, &TenantResidency{Jurisdiction: "us", Violations: 1,
		Pools: map[string]uint64{euPool: 1}, Regions: map[string]uint64{"eu-west": 1}}, rep.ResidencyByTenant["retail"])
	require.NotContains(t, rep.ResidencyByTenant, "research", "bound to no jurisdiction")
}

// TestRecorderCountsAdmittedAsTheTwin: admitted means the core dispatched
// or queued the request at least once, live as in the twin; a request
// deferred at every offer until its deadline, or refused, never was.
func TestRecorderCountsAdmittedAsTheTwin(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=2m", "warmup=0s", "faults=[]", "expect=[]"})
	require.NoError(t, err)
	var arrivals []Arrival
	streams, err := Arrivals(sc, func(a Arrival) error { arrivals = append(arrivals, a); return nil })
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(arrivals), 4)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	a := arrivals[:4]
	rec.Add(Outcome{Arrival: a[0], Result: Completed, Ended: a[0].At + time.Second, Replica: -1, ServedModel: a[0].Model, Attempts: 1})
	rec.Add(Outcome{Arrival: a[1], Result: TimedOut, Ended: a[1].At + time.Minute, Replica: -1, Attempts: 1, Deferrals: 3})
	rec.Add(Outcome{Arrival: a[2], Result: TimedOut, Ended: a[2].At + time.Minute, Replica: -1, Attempts: 1, Admitted: true})
	rec.Add(Outcome{Arrival: a[3], Result: Rejected, Reason: "queue-full", Ended: a[3].At, Replica: -1, Attempts: 1})
	rep, err := rec.Report(sc.Duration.D(), streams)
	require.NoError(t, err)
	require.Equal(t, uint64(4), rep.Requests.Arrived)
	require.Equal(t, uint64(2), rep.Requests.Admitted, "the completed one and the one queued before it timed out")
}

// The first refusal for each reason is on the recorder's timeline, as the
// twin's runner notes it (refusalNote), and only the first.
func TestRecorderNotesFirstRefusal(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=2m", "warmup=0s", "faults=[]", "expect=[]"})
	require.NoError(t, err)
	var arrivals []Arrival
	streams, err := Arrivals(sc, func(a Arrival) error { arrivals = append(arrivals, a); return nil })
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(arrivals), 3)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	for i, reason := range []string{"load-shed", "load-shed", "upstream-quota"} {
		a := arrivals[i]
		rec.Add(Outcome{Arrival: a, Result: Rejected, Reason: reason, Ended: a.At + time.Millisecond, Replica: -1, Attempts: 1})
	}
	rep, err := rec.Report(sc.Duration.D(), streams)
	require.NoError(t, err)
	var firsts []TimelineEvent
	for _, ev := range rep.Timeline {
		if strings.HasPrefix(ev.Kind, "first-") {
			firsts = append(firsts, ev)
		}
	}
	require.Len(t, firsts, 2, "one entry per reason: %v", firsts)
	require.Equal(t, "first-load-shed", firsts[0].Kind)
	require.Equal(t, "first request refused for load-shed", firsts[0].Detail)
	require.InDelta(t, (arrivals[0].At + time.Millisecond).Seconds(), firsts[0].TS, 1e-6, "at the first refusal's answer")
	require.Equal(t, "first-upstream-quota", firsts[1].Kind)
}

// An ejection of a replica a latency fault slows detects the fault, as in
// the twin's runner; a return, or an ejection elsewhere, does not. Each
// shows on the timeline the way a twin run writes it.
func TestRecorderEjectionDetectsLatency(t *testing.T) {
	s := func(d int) time.Duration { return time.Duration(d) * time.Second }
	for _, tc := range []struct {
		name     string
		hit      bool // on one of the fault's replicas, else on another
		returned bool
		at       time.Duration
		detectS  float64 // -1: not detected, as the report says
		kind     string  // of its timeline entry
	}{
		{"ejection of a slowed replica", true, false, s(130), 10, "ejected"},
		{"its return", true, true, s(130), -1, "ejection-end"},
		{"ejection of another replica", false, false, s(130), -1, "ejected"},
		{"ejection before the fault", true, false, s(110), -1, "ejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=5m", "warmup=0s",
				`faults=["latency region=eu-west at=2m for=1m latency=2s"]`})
			require.NoError(t, err)
			rec, err := NewRecorder(sc)
			require.NoError(t, err)
			fp := rec.Faults()[0]
			rec.FaultStarted(0, fp.Start)
			rec.FaultEnded(0, fp.End)
			replica := fp.Replicas[0]
			if !tc.hit {
				replica = -1
				for r := range rec.Replicas() {
					if !slices.Contains(fp.Replicas, r) {
						replica = r
						break
					}
				}
				require.GreaterOrEqual(t, replica, 0)
			}
			e := sched.Ejection{Replica: replica, Returned: tc.returned, Latency: 2 * time.Second, Reference: s(1) / 10}
			if !tc.returned {
				e.Until = tc.at + 30*time.Second
			}
			rec.Ejection(tc.at, e)
			rep, err := rec.Report(5*time.Minute, nil)
			require.NoError(t, err)
			fr := rep.Faults[fp.Label]
			require.NotNil(t, fr)
			require.InDelta(t, tc.detectS, float64(fr.TimeToDetectS), 1e-9)
			var kinds []string
			for _, ev := range rep.Timeline {
				if ev.Kind == tc.kind || ev.Kind == "detected" {
					kinds = append(kinds, ev.Kind)
				}
			}
			want := []string{tc.kind}
			if tc.detectS > 0 {
				want = append(want, "detected")
			}
			require.Equal(t, want, kinds)
		})
	}
}

// A live answer whose replica is unknown (no X-Fleetdrill-Replica), served
// by a fallback during a retirement, counts as served elsewhere without a
// pool (it once indexed the replicas with -1 and panicked).
func TestRecorderFallbackWithoutReplica(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("gameday-model-retirement", []string{"duration=20m", "warmup=0s", "expect=[]"})
	require.NoError(t, err)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	fp := rec.Faults()[0]
	rec.FaultStarted(0, fp.Start)
	var retired, fallback int
	for i, m := range sc.Models {
		switch m.Name {
		case "llama-3.1-70b":
			retired = i
		case "llama-3.1-8b":
			fallback = i
		}
	}
	at := fp.Start + time.Minute
	rec.Add(Outcome{Arrival: Arrival{At: at, Model: retired}, Result: Completed, Ended: at + time.Second,
		TTFT: 100 * time.Millisecond, Replica: -1, ServedModel: fallback, Attempts: 1})
	rep, err := rec.Report(20*time.Minute, nil)
	require.NoError(t, err)
	var elsewhere uint64
	for _, im := range rep.Faults["model-retirement(llama-3.1-70b)"].Tenants {
		elsewhere += im.ServedElsewhere
		require.Empty(t, im.ServedByPool)
	}
	require.Equal(t, uint64(1), elsewhere)
}

// RecentTenants counts each tenant's outcomes that ended in the window as a
// drill's snapshot does: finished, completed or lost (a cancelled request
// finished but is not lost, one in flight has not finished), attainment
// of the finished ones, and where the completed ones were served: by the
// replica's pool, else by the pool the gateway named, else nowhere known.
func TestRecorderRecentTenants(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=10m", "warmup=0s", "faults=[]", "expect=[]"})
	require.NoError(t, err)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	const retail, bank, m8b, m70b = 0, 1, 0, 1 // the default scenario's tenants and models
	const useH100, euwA100 = 0, 7              // replicas: use-h100-8b's first, one of euw-a100-8b's
	s := func(d int) time.Duration { return time.Duration(d) * time.Second }
	now, window := s(300), time.Minute
	add := func(tenant, model int, ended time.Duration, res Result, o Outcome) {
		o.Arrival = Arrival{At: ended - s(1), Tenant: tenant, Class: 0, Model: model, Input: 100, Output: 10}
		o.Result, o.Ended, o.Attempts = res, ended, 1
		if res == Completed && o.TTFT == 0 {
			o.TTFT = s(1) / 2 // within the interactive SLO
		}
		rec.Add(o)
	}
	// retail: three completions on use-h100-8b (one too slow), one on it
	// by the 8B for the 70B, named by pool only, one with no pool known,
	// and one of each way to end without an answer.
	add(retail, m8b, s(250), Completed, Outcome{Replica: useH100, ServedModel: m8b})
	add(retail, m8b, s(260), Completed, Outcome{Replica: useH100, ServedModel: m8b})
	add(retail, m8b, s(299), Completed, Outcome{Replica: useH100 + 1, ServedModel: m8b, TTFT: s(5) + s(1)/2})
	add(retail, m70b, s(270), Completed, Outcome{Replica: -1, Pool: "use-h100-8b", ServedModel: m8b})
	add(retail, m8b, s(280), Completed, Outcome{Replica: -1, ServedModel: m8b})
	add(retail, m8b, s(281), Rejected, Outcome{Replica: -1, Reason: "queue-full"})
	add(retail, m8b, s(282), TimedOut, Outcome{Replica: -1})
	add(retail, m8b, s(283), Failed, Outcome{Replica: -1})
	add(retail, m8b, s(284), Cancelled, Outcome{Replica: -1})
	add(retail, m8b, s(285), InFlight, Outcome{Replica: -1})
	// Outside the window: ended at its start, or after now.
	add(retail, m8b, now-window, Failed, Outcome{Replica: -1})
	add(retail, m8b, now+s(1), Failed, Outcome{Replica: -1})
	// bank-eu: two in the EU.
	add(bank, m8b, s(290), Completed, Outcome{Replica: euwA100, ServedModel: m8b})
	add(bank, m70b, s(291), Completed, Outcome{Replica: euwA100 + 3, ServedModel: m70b})

	got := rec.RecentTenants(now, window)
	want := []TenantState{
		{Name: "retail", Jurisdiction: "us", Attainment: 4.0 / 9, Finished: 9, Completed: 5, Rejected: 1, TimedOut: 1, Failed: 1,
			Served: []TenantServed{
				{Pool: "use-h100-8b", Region: "us-east", Model: "llama-3.1-8b", Count: 3},
				{Model: "llama-3.1-8b", Count: 1},
				{Pool: "use-h100-8b", Region: "us-east", Model: "llama-3.1-8b", Fallback: true, Count: 1},
			}},
		{Name: "bank-eu", Jurisdiction: "eu", Attainment: 1, Finished: 2, Completed: 2,
			Served: []TenantServed{
				{Pool: "euw-a100-70b", Region: "eu-west", Model: "llama-3.1-70b", Count: 1},
				{Pool: "euw-a100-8b", Region: "eu-west", Model: "llama-3.1-8b", Count: 1},
			}},
		{Name: "research", Attainment: 1},
	}
	require.Equal(t, want, got)
	var tenants, classes uint64
	for _, ts := range got {
		tenants += ts.Finished
	}
	for _, cs := range rec.Recent(now, window) {
		classes += cs.Finished
	}
	require.Equal(t, classes, tenants, "the tenants' finished requests are the classes'")
}
