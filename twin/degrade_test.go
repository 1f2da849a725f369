package twin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// surge is a 3-replica fleet with interactive and batch traffic and a
// ten-minute surge of interactive requests in the middle of the run.
func surge() *scenarios.Scenario {
	sc := twoRegions(2, 2, 30*time.Minute)
	sc.Pools = sc.Pools[:2] // us only
	sc.Workload = sc.Workload[:1]
	sc.Classes[0].Deadline = 0
	sc.Classes = append(sc.Classes, scenarios.Class{Name: "batch", Priority: 1, Deferrable: true})
	batch := sc.Workload[0]
	batch.Name, batch.Class = "batch", "batch"
	batch.Arrivals.Rate = 6
	peak := sc.Workload[0]
	peak.Name, peak.Start, peak.Stop = "peak", dur(10*time.Minute), dur(20*time.Minute)
	peak.Arrivals.Rate = 80
	sc.Workload = append(sc.Workload, batch, peak)
	sc.Policy.Scheduler = "priority"
	sc.Policy.Admission.QueueLimit = 5000
	sc.Policy.Admission.DeferFor = dur(2 * time.Minute)
	return sc
}

func steps(steps ...scenarios.DegradeStep) []scenarios.DegradeStep {
	for i := range steps {
		if steps[i].RecoverBelow == 0 {
			steps[i].RecoverBelow = 0.5
		}
		if steps[i].Hold == 0 {
			steps[i].Hold = dur(time.Minute)
		}
	}
	return steps
}

func TestLadderShedsLowClassesFirstAndReleases(t *testing.T) {
	sc := surge()
	sc.Policy.Scheduler = "fifo" // so batch competes with interactive in the queue
	sc.Policy.Degradation = steps(
		scenarios.DegradeStep{Name: "shed-batch", Action: "shed-batch", Class: "batch", Trigger: scenarios.Trigger{QueueWait: dur(3 * time.Second)}},
		scenarios.DegradeStep{Name: "cap", Action: "cap-output", MaxOutputTokens: 128, Trigger: scenarios.Trigger{QueueWait: dur(10 * time.Second)}},
	)
	with := run(t, sc)
	sc.Policy.Degradation = nil
	without := run(t, sc)

	require.True(t, with.Requests.Balanced())
	d := with.Degradation
	require.NotNil(t, d)
	require.Positive(t, d.Steps["shed-batch"].Engagements)
	require.Positive(t, d.Shed, "batch was deferred while the surge lasted")
	require.LessOrEqual(t, d.Steps["shed-batch"].Engagements, 3, "hysteresis: no flapping")
	// The timeline shows the path down and back up.
	var path []string
	for _, e := range with.Timeline {
		if e.Kind == "degrade" || e.Kind == "restore" {
			path = append(path, e.Kind)
		}
	}
	require.Equal(t, "degrade", path[0])
	require.Equal(t, "restore", path[len(path)-1], "the ladder is released after the surge")
	require.Less(t, with.Classes["interactive"].QueueWait.P99, without.Classes["interactive"].QueueWait.P99,
		"shedding batch protects interactive")
}

func TestLadderStaysIdleOnAHealthyFleet(t *testing.T) {
	sc := twoRegions(3, 2, 10*time.Minute)
	sc.Policy.Degradation = steps(scenarios.DegradeStep{Name: "shed", Action: "shed-batch", Class: "interactive",
		Trigger: scenarios.Trigger{QueueWait: dur(5 * time.Second), Saturation: 0.95}})
	rep := run(t, sc)
	require.Zero(t, rep.Degradation.Steps["shed"].Engagements)
	require.Zero(t, rep.Degradation.Shed)
}

func TestCachedAnswersAndSmallerModel(t *testing.T) {
	sc := surge()
	big := sc.Models[0]
	big.Name, big.Fallbacks = "llama-big", []string{"llama-8b"}
	sc.Models = append(sc.Models, big)
	for i := range sc.Pools {
		sc.Pools[i].Models = append(sc.Pools[i].Models, "llama-big")
		sc.Pools[i].Profiles["llama-big"] = sc.Pools[i].Profiles["llama-8b"]
	}
	sc.Workload[2].Model = "llama-big"
	sc.Policy.Degradation = steps(
		scenarios.DegradeStep{Name: "cache", Action: "cached-answers", Class: "interactive", HitRate: 0.3, CacheAge: dur(10 * time.Minute),
			Trigger: scenarios.Trigger{QueueWait: dur(2 * time.Second)}},
		scenarios.DegradeStep{Name: "smaller", Action: "smaller-model", Model: "llama-big", Trigger: scenarios.Trigger{QueueWait: dur(4 * time.Second)}},
	)
	rep := run(t, sc)
	require.True(t, rep.Requests.Balanced())
	require.Positive(t, rep.Degradation.Cached)
	var disclosed bool
	for _, e := range rep.Timeline {
		if e.Kind == "degrade" && strings.Contains(e.Detail, "disclosed as up to 10m0s old") {
			disclosed = true
		}
	}
	require.True(t, disclosed, "the cache's age is disclosed")
}
