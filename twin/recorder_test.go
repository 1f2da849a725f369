package twin

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Fed the twin's own request timelines, the recorder must report exactly
// what the twin reports: same counts, same quantiles, same SLO attainment,
// per class, tenant and window.
func TestRecorderReportsWhatTheTwinReports(t *testing.T) {
	sets := []string{"duration=4m", "warmup=1m", "faults=[]",
		`expect=["classes.interactive.ttft_s.p99 < 5s"]`}
	sc, err := scenarios.LoadNamedWithSets("default", sets)
	require.NoError(t, err)
	var arrivals []Arrival
	streams, err := Arrivals(sc, func(a Arrival) error { arrivals = append(arrivals, a); return nil })
	require.NoError(t, err)

	sc, err = scenarios.LoadNamedWithSets("default", sets)
	require.NoError(t, err)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	var logs int
	twinRep, err := Run(context.Background(), sc, Options{OnComplete: func(l RequestLog) {
		a := arrivals[l.ID]
		require.Equal(t, a.At, l.Arrived, "request %d", l.ID)
		rec.Add(Outcome{Arrival: a, Result: Completed, Ended: l.Done, TTFT: l.FirstToken - l.Arrived,
			Wait: l.Dispatched - l.Arrived, Replica: -1, ServedModel: a.Model, Attempts: 1})
		logs++
	}})
	require.NoError(t, err)
	require.Equal(t, twinRep.Requests.Arrived+uint64(countBefore(arrivals, time.Minute)), uint64(logs), "every request completed")

	got, err := rec.Report(time.Duration(twinRep.SimDurationS*float64(time.Second)), streams)
	require.NoError(t, err)
	same := func(a, b any) {
		t.Helper()
		ja, err := json.Marshal(a)
		require.NoError(t, err)
		jb, err := json.Marshal(b)
		require.NoError(t, err)
		require.JSONEq(t, string(ja), string(jb))
	}
	same(twinRep.Requests, got.Requests)
	same(twinRep.Classes, got.Classes)
	same(twinRep.Tenants, got.Tenants)
	same(twinRep.Workload, got.Workload)
	same(twinRep.Expectations, got.Expectations)
	require.Equal(t, twinRep.Cost, got.Cost)
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
	rec.Add(Outcome{Arrival: arr(s(60)), Result: Completed, Ended: s(61), TTFT: s(1) / 2, Replica: hit, ServedModel: 0, Attempts: 1})
	rec.Add(Outcome{Arrival: arr(s(125)), Result: Failed, Ended: s(131), Replica: -1, Attempts: 3})
	rec.Add(Outcome{Arrival: arr(s(140)), Result: Completed, Ended: s(141), TTFT: s(1) / 2, Replica: spare, ServedModel: 0, Attempts: 1})
	rec.Add(Outcome{Arrival: arr(s(310)), Result: Completed, Ended: s(311), TTFT: s(1) / 2, Replica: hit, ServedModel: 0, Attempts: 1})
	rec.Add(Outcome{Arrival: arr(s(400)), Result: InFlight, Ended: s(600), Replica: -1})
	rep, err := rec.Report(10*time.Minute, nil)
	require.NoError(t, err)
	fr := rep.Faults["regional-outage(us-east)"]
	require.InDelta(t, 12, fr.TimeToDetectS, 1e-9)
	require.InDelta(t, 21, fr.TimeToMitigateS, 1e-9)
	require.InDelta(t, 11, fr.TimeToRecoverS, 1e-9)
	require.Equal(t, uint64(1), fr.RequestsLost)
	require.InDelta(t, 0.5, fr.SLOAttainmentDuring, 1e-9)
	require.Equal(t, uint64(5), rep.Requests.Arrived)
	require.Equal(t, uint64(1), rep.Requests.InFlightAtEnd)
	require.Equal(t, uint64(2), rep.Requests.Retries)
	require.True(t, rep.Passed(), "%+v", rep.Expectations)
	require.Equal(t, uint64(2), rep.Pools["use-h100-8b"].Dispatched+rep.Pools["use-h100-70b"].Dispatched)
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
