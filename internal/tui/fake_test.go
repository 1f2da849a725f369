package tui

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/twin"
)

// fakeEngine is an Engine with canned snapshots: time moves only as the
// driver advances it, and injected faults show up in its snapshots. It is
// safe to read from the test goroutine while a driver runs it.
type fakeEngine struct {
	mu       sync.Mutex
	now, end time.Duration
	base     twin.Snapshot
	// later are timeline entries still to come: each joins the timeline
	// (Snapshot.Events, TimelineLen) once the engine's time reaches its TS.
	later    []twin.TimelineEvent
	steps    int
	injected []string // lines, as received
	ended    []string // labels
	advances int
	reported bool
	recorded []string
}

func newFake(base twin.Snapshot) *fakeEngine {
	return &fakeEngine{now: base.Now, end: base.End, base: base}
}

func (f *fakeEngine) Now() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeEngine) End() time.Duration { return f.end }

func (f *fakeEngine) Done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now >= f.end
}

func (f *fakeEngine) Advance(to time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reported {
		panic("advance after Report")
	}
	f.advances++
	f.now = max(f.now, min(to, f.end))
	f.arrive()
}

// arrive moves the entries of later that are due onto the timeline.
func (f *fakeEngine) arrive() {
	for len(f.later) > 0 && time.Duration(f.later[0].TS*float64(time.Second)) <= f.now {
		f.base.Events = append(f.base.Events, f.later[0])
		f.later = f.later[1:]
	}
}

func (f *fakeEngine) TimelineLen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.base.Events)
}

func (f *fakeEngine) Step() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.now >= f.end {
		return f.now, false
	}
	f.steps++
	f.now = min(f.now+250*time.Millisecond, f.end)
	f.arrive()
	return f.now, f.now < f.end
}

func (f *fakeEngine) Inject(line string) (string, error) {
	sp, err := faults.Parse(line)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.injected = append(f.injected, line)
	label := twin.Label(sp)
	sp.At = f.now
	f.base.Faults = append(f.base.Faults, twin.FaultState{Label: label, Spec: sp.String(), Start: f.now,
		Active: true, Detect: -1, Mitigate: -1, Recover: -1, Injected: true})
	f.base.Events = append(f.base.Events, twin.TimelineEvent{TS: f.now.Seconds(), Kind: "fault-start", Detail: label + ": " + sp.String()})
	f.recorded = append(f.recorded, sp.String())
	return label, nil
}

func (f *fakeEngine) EndFault(label string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.base.Faults {
		fs := &f.base.Faults[i]
		if fs.Label == label && fs.Active {
			fs.Active, fs.End = false, f.now
			f.ended = append(f.ended, label)
			return nil
		}
	}
	return fmt.Errorf("no active fault %s", label)
}

func (f *fakeEngine) Snapshot() twin.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.base
	s.Now, s.Done = f.now, f.now >= f.end
	return s
}

func (f *fakeEngine) Report() (*twin.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reported {
		return nil, errors.New("reported twice")
	}
	f.reported = true
	return &twin.Report{Scenario: f.base.Scenario, Seed: f.base.Seed}, nil
}

func (f *fakeEngine) Recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.recorded...)
}

// calls returns what the engine was asked to do so far.
func (f *fakeEngine) calls() (injected, ended []string, advances int, reported bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.injected...), append([]string(nil), f.ended...), f.advances, f.reported
}

// ladderSteps is the library's degradation ladder.
var ladderSteps = []string{"shed-batch", "cap-output", "smaller-model", "cached-answers", "defer-async"}

// calmSnapshot is gameday-regional-outage five minutes in, all well.
func calmSnapshot() twin.Snapshot {
	return twin.Snapshot{
		Scenario: "gameday-regional-outage", Seed: 11,
		Now: 5 * time.Minute, End: 50 * time.Minute, Duration: 40 * time.Minute,
		Regions: []twin.RegionState{
			{Name: "us-east", Jurisdiction: "us", Pools: []twin.PoolState{
				{Name: "use-h100-8b", Provider: "gpu-cloud-a", Models: []string{"llama-3.1-8b"}, Replicas: 3, Up: 3,
					Health: "healthy", Utilization: 0.62, Running: 41, Waiting: 4, Inflight: 45, Dispatched: 2874, Slots: 192}}},
			{Name: "eu-west", Jurisdiction: "eu", Pools: []twin.PoolState{
				{Name: "euw-a100-8b", Provider: "gpu-cloud-b", Models: []string{"llama-3.1-8b"}, Replicas: 3, Up: 3,
					Health: "healthy", Utilization: 0.48, Running: 22, Waiting: 0, Inflight: 22, Dispatched: 1210, Slots: 192}}},
			{Name: "eu-central", Jurisdiction: "eu", Pools: []twin.PoolState{
				{Name: "euc-a100-8b", Provider: "gpu-cloud-c", Models: []string{"llama-3.1-8b"}, Replicas: 3, Up: 3,
					Health: "healthy", Utilization: 0.45, Running: 20, Waiting: 0, Inflight: 20, Dispatched: 1188, Slots: 192}}},
		},
		Classes: []twin.ClassState{
			{Name: "interactive", SLOTTFT: 2 * time.Second, SLOE2E: time.Minute, Window: time.Minute,
				TTFTP99: 480 * time.Millisecond, E2EP99: 13300 * time.Millisecond, Attainment: 0.998,
				Completed: 290, Finished: 290, TotalArrived: 1500, TotalSLOMet: 1497},
		},
		Models: []twin.ModelState{
			{Name: "llama-3.1-8b", Queue: 3, Routes: []twin.RouteState{
				{Tenant: "bank-eu", Served: "llama-3.1-8b", Pools: []string{"euw-a100-8b", "euc-a100-8b"},
					Skipped: []twin.ReasonCount{{Reason: "outside jurisdiction eu", Count: 1}}},
				{Tenant: "retail-us", Served: "llama-3.1-8b", Pools: []string{"use-h100-8b"},
					Skipped: []twin.ReasonCount{{Reason: "outside jurisdiction us", Count: 2}}},
				{Tenant: "global", Served: "llama-3.1-8b", Pools: []string{"use-h100-8b", "euw-a100-8b", "euc-a100-8b"}},
			}},
		},
		Tenants: []twin.TenantState{
			{Name: "bank-eu", Jurisdiction: "eu", Attainment: 0.997, Finished: 95, Completed: 95,
				Served: []twin.TenantServed{{Pool: "euw-a100-8b", Region: "eu-west", Model: "llama-3.1-8b", Count: 50},
					{Pool: "euc-a100-8b", Region: "eu-central", Model: "llama-3.1-8b", Count: 45}}},
			{Name: "retail-us", Jurisdiction: "us", Attainment: 0.999, Finished: 150, Completed: 150,
				Served: []twin.TenantServed{{Pool: "use-h100-8b", Region: "us-east", Model: "llama-3.1-8b", Count: 150}}},
			{Name: "global", Attainment: 1, Finished: 45, Completed: 45,
				Served: []twin.TenantServed{{Pool: "use-h100-8b", Region: "us-east", Model: "llama-3.1-8b", Count: 25},
					{Pool: "euw-a100-8b", Region: "eu-west", Model: "llama-3.1-8b", Count: 20}}},
		},
		Degradation: &twin.LadderState{Steps: ladderSteps},
		Events: []twin.TimelineEvent{
			{TS: 0, Kind: "cold-start", Detail: "pool use-h100-8b: 3 replicas loading (2m0s)"},
			{TS: 120, Kind: "ready", Detail: "pool use-h100-8b: replicas loaded"},
			{TS: 120, Kind: "ready", Detail: "pool euw-a100-8b: replicas loaded"},
			{TS: 120, Kind: "ready", Detail: "pool euc-a100-8b: replicas loaded"},
			{TS: 120, Kind: "warmup-end", Detail: "measurement starts"},
		},
		Requests:   twin.Counts{Arrived: 1500, Admitted: 1500, Completed: 1410},
		Rejections: map[string]uint64{},
	}
}

// outageSnapshot is the same fleet at 12:00, two minutes into an
// outage of eu-west the operator injected at 10:00.
func outageSnapshot() twin.Snapshot {
	s := calmSnapshot()
	s.Now = 12 * time.Minute
	euw := &s.Regions[1].Pools[0]
	euw.Up, euw.Open, euw.Health, euw.Utilization, euw.Running, euw.Inflight = 0, 3, "down", 0, 0, 0
	euc := &s.Regions[2].Pools[0]
	euc.Utilization, euc.Running, euc.Waiting, euc.Inflight = 0.97, 61, 38, 99
	c := &s.Classes[0]
	c.TTFTP99, c.E2EP99, c.Attainment, c.RejectedPS = 2800*time.Millisecond, 21*time.Second, 0.962, 0.3
	c.TotalArrived, c.TotalSLOMet = 3600, 3561
	// bank-eu's requests wait on the dead region: they count at their age.
	c.Waiting, c.OldestWaiting, c.TTFTP99Waiting = 30, 41*time.Second, 38*time.Second
	s.Tenants = []twin.TenantState{
		{Name: "bank-eu", Jurisdiction: "eu", Attainment: 0.71, Finished: 120, Completed: 85, Rejected: 20, TimedOut: 15,
			Waiting: 30, OldestWaiting: 41 * time.Second,
			Served: []twin.TenantServed{{Pool: "euc-a100-8b", Region: "eu-central", Model: "llama-3.1-8b", Count: 85}}},
		{Name: "retail-us", Jurisdiction: "us", Attainment: 0.998, Finished: 180, Completed: 180,
			Served: []twin.TenantServed{{Pool: "use-h100-8b", Region: "us-east", Model: "llama-3.1-8b", Count: 180}}},
		{Name: "global", Attainment: 0.99, Finished: 100, Completed: 100,
			Served: []twin.TenantServed{{Pool: "use-h100-8b", Region: "us-east", Model: "llama-3.1-8b", Count: 60},
				{Pool: "euc-a100-8b", Region: "eu-central", Model: "llama-3.1-8b", Count: 40}}},
	}
	s.Models[0].Queue = 41
	s.Models[0].Routes[0].Pools = []string{"euc-a100-8b"}
	s.Models[0].Routes[0].Skipped = []twin.ReasonCount{{Reason: "outside jurisdiction eu", Count: 1}, {Reason: "circuit open", Count: 1}}
	s.Models[0].Routes[2].Pools = []string{"use-h100-8b", "euc-a100-8b"}
	s.Models[0].Routes[2].Skipped = []twin.ReasonCount{{Reason: "circuit open", Count: 1}}
	s.Degradation.Engaged = 1
	s.Faults = []twin.FaultState{{Label: "regional-outage(eu-west)", Spec: "regional-outage region=eu-west at=10m",
		Start: 10 * time.Minute, Active: true, Detect: 9 * time.Second, Mitigate: 9100 * time.Millisecond, Recover: -1, Injected: true}}
	s.Events = append(s.Events,
		twin.TimelineEvent{TS: 600, Kind: "fault-start", Detail: "regional-outage(eu-west): regional-outage region=eu-west at=10m (3 replicas)"},
		twin.TimelineEvent{TS: 609, Kind: "breaker-open", Detail: "pool euw-a100-8b replica 1: replica 1 breaker closed → open"},
		twin.TimelineEvent{TS: 609, Kind: "detected", Detail: "regional-outage(eu-west) after 9s"},
		twin.TimelineEvent{TS: 609.1, Kind: "mitigated", Detail: "regional-outage(eu-west): first request served elsewhere, 9.1s after the fault began"},
		twin.TimelineEvent{TS: 611.5, Kind: "breaker-open", Detail: "pool euw-a100-8b replica 0: replica 0 breaker closed → open"},
		twin.TimelineEvent{TS: 612.2, Kind: "breaker-open", Detail: "pool euw-a100-8b replica 2: replica 2 breaker closed → open"},
		twin.TimelineEvent{TS: 655, Kind: "degrade", Detail: "step 1 shed-batch (shed): queue wait p99 31s > 30s"},
	)
	s.Requests = twin.Counts{Arrived: 3600, Admitted: 3580, Rejected: 20, Completed: 3400, Retries: 7}
	s.Rejections = map[string]uint64{"queue-full": 12, "deadline": 8}
	return s
}

// recoveredSnapshot is the end of the drill: the outage ended at 25:00
// and the region serves again.
func recoveredSnapshot() twin.Snapshot {
	s := calmSnapshot()
	s.Now = 30 * time.Minute
	s.Degradation.Engaged = 0
	c := &s.Classes[0]
	c.TotalArrived, c.TotalSLOMet = 9000, 8944
	o := outageSnapshot()
	s.Faults = o.Faults
	f := &s.Faults[0]
	f.Active, f.End, f.Recover = false, 25*time.Minute, 12800*time.Millisecond
	s.Events = append(o.Events,
		twin.TimelineEvent{TS: 1380, Kind: "restore", Detail: "step 1 shed-batch released: queue wait p99 4s < 15s"},
		twin.TimelineEvent{TS: 1500, Kind: "fault-end", Detail: "regional-outage(eu-west)"},
		twin.TimelineEvent{TS: 1512.8, Kind: "recovered", Detail: "regional-outage(eu-west): affected replicas serve again, 12.8s after the fault ended"},
	)
	s.Requests = twin.Counts{Arrived: 9000, Admitted: 8970, Rejected: 30, Completed: 8900, Retries: 7}
	s.Rejections = o.Rejections
	return s
}

// history is n frames of snap's fleet every 30 s of simulated time up to
// snap.Now, with the interactive p99s climbing towards snap's values over
// the last minutes, so the sparklines have a shape.
func history(snap twin.Snapshot, n int) []Frame {
	out := make([]Frame, 0, n)
	for i := range n {
		s := snap
		s.Classes = append([]twin.ClassState(nil), snap.Classes...)
		s.Now = snap.Now - time.Duration(n-1-i)*30*time.Second
		frac := float64(i+1) / float64(n)
		c := &s.Classes[0]
		c.TTFTP99 = time.Duration(float64(300*time.Millisecond) + frac*frac*float64(snap.Classes[0].TTFTP99-300*time.Millisecond))
		c.E2EP99 = time.Duration(float64(9*time.Second) + frac*float64(snap.Classes[0].E2EP99-9*time.Second))
		out = append(out, Frame{Snap: s, Speed: 60})
	}
	return out
}
