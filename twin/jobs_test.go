package twin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

func withJobs(sc *scenarios.Scenario, jobs ...scenarios.JobStream) *scenarios.Scenario {
	sc.Jobs = jobs
	sc.Policy.Jobs.MaxPoolShare = 0.5
	return sc
}

func fineTune(gpus int, d time.Duration, rate float64) scenarios.JobStream {
	return scenarios.JobStream{Name: "ft", Kind: "fine-tuning", GPUs: gpus, Duration: dur(d),
		Window: dur(3 * time.Hour), CheckpointInterval: dur(10 * time.Minute), Preemptible: true,
		Arrivals: scenarios.Arrivals{Process: "poisson", Rate: rate}}
}

func TestJobsRunOnIdleCapacityAndReturnIt(t *testing.T) {
	sc := withJobs(azureLike(8, 2, 2*time.Hour), fineTune(4, 30*time.Minute, 1.0/1800))
	sc.Drain = dur(2 * time.Hour)
	rep := run(t, sc)
	jr := rep.Jobs["ft"]
	require.True(t, jr.Balanced(), "%+v", jr)
	require.Positive(t, jr.Submitted)
	require.Equal(t, jr.Submitted, jr.Completed+jr.Unplaceable+jr.PendingAtEnd+jr.RunningAtEnd)
	require.Positive(t, jr.Completed)
	require.Equal(t, jr.Completed, jr.CompletedInWindow)
	require.Zero(t, jr.Preemptions)
	// Each completed job used 4 GPUs for 30 minutes; one still running at
	// the end used less.
	require.GreaterOrEqual(t, jr.GPUHoursUsed, float64(jr.Completed)*2)
	require.LessOrEqual(t, jr.GPUHoursUsed, float64(jr.Completed+jr.RunningAtEnd)*2)
	require.Zero(t, jr.GPUHoursWasted)
	// Its replicas reloaded the model afterwards.
	require.Equal(t, 4*jr.Completed, rep.Pools["h100"].ColdStarts)
	// Serving kept going on the other half.
	require.True(t, rep.Requests.Balanced())
	require.Zero(t, rep.Requests.Rejected)
}

func TestJobsArePreemptedForServingAndResumeFromCheckpoint(t *testing.T) {
	// Light load, then a surge that backs the queue up: the running job is
	// preempted, loses the work since its last 10-minute checkpoint, and
	// finishes later.
	sc := withJobs(azureLike(4, 1, 3*time.Hour), fineTune(2, 40*time.Minute, 1.0/7200))
	surge := sc.Workload[0]
	surge.Name, surge.Start, surge.Stop = "surge", dur(30*time.Minute), dur(40*time.Minute)
	surge.Arrivals.Rate = 60
	sc.Workload = append(sc.Workload, surge)
	sc.Classes[0].Deadline = 0
	sc.Policy.Jobs.PreemptQueue = 20
	sc.Drain = dur(3 * time.Hour)
	sc.Seed = 3
	rep := run(t, sc)
	jr := rep.Jobs["ft"]
	require.True(t, jr.Balanced(), "%+v", jr)
	require.Positive(t, jr.Preemptions, "%+v", jr)
	require.Positive(t, jr.GPUHoursWasted)
	require.Less(t, jr.GPUHoursWasted, float64(jr.Preemptions)*2*(10.0/60)+1e-9,
		"at most one checkpoint interval lost per preemption, on 2 GPUs")
	require.Positive(t, jr.Completed)
	var kinds []string
	for _, e := range rep.Timeline {
		kinds = append(kinds, e.Kind)
	}
	require.Contains(t, kinds, "job-preempted")
}

func TestJobsThatCannotFitAreUnplaceable(t *testing.T) {
	big := fineTune(8, time.Hour, 1.0/600) // 8 GPUs, but jobs may hold only 2 of 4 replicas
	big.Name = "big"
	wrong := fineTune(1, time.Hour, 1.0/600)
	wrong.Name, wrong.Accelerators = "wrong", []string{"mi300x"}
	sc := withJobs(azureLike(4, 1, time.Hour), big, wrong)
	rep := run(t, sc)
	for _, name := range []string{"big", "wrong"} {
		jr := rep.Jobs[name]
		require.Positive(t, jr.Submitted, name)
		require.Equal(t, jr.Submitted, jr.Unplaceable, name)
		require.True(t, jr.Balanced())
	}
}

func TestJobsLeaveLostNodesAndAreNotPlacedOnThem(t *testing.T) {
	// Jobs always waiting, and every node of the pool lost from 20m to
	// 50m: the running jobs stop (their work since the checkpoint is
	// wasted) and none runs on the lost nodes, which look idle.
	sc := withJobs(azureLike(4, 0.5, 90*time.Minute), fineTune(2, 15*time.Minute, 1.0/120))
	sc.Drain = dur(0)
	sc.Faults = []string{"node-loss pool=h100 at=20m for=30m percent=100"}
	r := runInternal(t, sc, nil)
	rep := r.report()
	jr := rep.Jobs["ft"]
	require.True(t, jr.Balanced(), "%+v", jr)
	var lost int
	for _, e := range rep.Timeline {
		if e.Kind == "job-preempted" && strings.Contains(e.Detail, "node under it was lost") {
			require.Equal(t, 20*60.0, e.TS)
			lost++
		}
	}
	require.Positive(t, lost, "a job ran when the nodes were lost")
	require.Positive(t, jr.GPUHoursWasted)
	// Two GPUs at most (half the pool), never in the 30 lost minutes:
	// at most 2 × 60 GPU-minutes.
	require.LessOrEqual(t, jr.GPUHoursUsed, 2.0+1e-9)
	require.True(t, rep.Requests.Balanced())
}
