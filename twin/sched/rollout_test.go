package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rolloutFixture: the canary fixture's config with spec as its rollout.
func rolloutFixture(spec RolloutSpec) (*Config, *Rollouts) {
	cfg := canaryFixture(nil).cfg
	cfg.Canaries[0].Rollout = spec
	return &cfg, NewRollouts(&cfg)
}

var errRate2 = RolloutTrigger{Text: "error_rate > 2%", Figure: "error_rate", Value: 0.02}

func baseSpec() RolloutSpec {
	return RolloutSpec{Start: time.Minute, Every: 10 * time.Second, Window: time.Minute, MinRequests: 20, BreachFor: 1,
		ClearBelow: 0.8, Triggers: []RolloutTrigger{errRate2},
		Steps: []RolloutStep{{Share: 0.01, For: 2 * time.Minute}, {Share: 0.05, For: 2 * time.Minute}, {Share: 1}}}
}

// feeder sends attempts to a rollout: every period, one on the canary (failed
// when fail says) and one on the baseline.
type feeder struct {
	ro      *Rollouts
	id      uint64
	ttft    time.Duration
	baseTTF time.Duration
}

func (f *feeder) attempt(now time.Duration, canary, ok bool) {
	f.id++
	r := &Request{ID: f.id, Model: 0, Served: 0}
	rep, ttft := 0, f.baseTTF
	if canary {
		r.Route, rep, ttft = 1, 2, f.ttft
	}
	f.ro.Observe(now, r, rep, ok, ttft, 2*ttft, ok)
}

// run drives the rollout from..to, an attempt of each version every
// period, the canary's failing while fail(now) holds, evaluating at NextAt;
// it returns the decisions.
func (f *feeder) run(from, to, period time.Duration, fail func(time.Duration) bool) []RolloutDecision {
	var out []RolloutDecision
	for now := from; now < to; now += period {
		for f.ro.NextAt() <= now {
			out = append(out, f.ro.Evaluate(f.ro.NextAt())...)
		}
		f.attempt(now, true, !fail(now))
		f.attempt(now, false, true)
	}
	return out
}

func actions(ds []RolloutDecision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Action)
	}
	return out
}

func never(time.Duration) bool { return false }

func TestRolloutStepsUpWhileChecksPass(t *testing.T) {
	_, ro := rolloutFixture(baseSpec())
	f := &feeder{ro: ro, ttft: 100 * time.Millisecond, baseTTF: 100 * time.Millisecond}
	ds := f.run(0, 10*time.Minute, time.Second, never)
	require.Equal(t, []string{ActStart, ActStepUp, ActPromote}, actions(ds))
	require.Equal(t, time.Minute, ds[0].At)
	require.Equal(t, 3*time.Minute, ds[1].At, "after the step's 2m")
	require.Equal(t, 5*time.Minute, ds[2].At)
	require.Equal(t, 1.0, ds[2].To)
	require.Equal(t, "promoted", ro.Report(0).State)
}

func TestRolloutExtendsAStepWithTooSmallASample(t *testing.T) {
	_, ro := rolloutFixture(baseSpec())
	f := &feeder{ro: ro}
	// One canary attempt every 10 s: 12 in the first step's 2 minutes,
	// under min_requests 20; the step waits for the 20th (at 1m + 200 s).
	ds := f.run(0, 6*time.Minute, 10*time.Second, never)
	require.Equal(t, []string{ActStart, ActStepUp}, actions(ds)[:2])
	require.Equal(t, time.Minute+200*time.Second, ds[1].At)
	require.Contains(t, ds[1].Why, "20 canary attempts")
}

func TestRolloutRollsBackWithinTheWindowPlusOneEvaluation(t *testing.T) {
	spec := baseSpec()
	_, ro := rolloutFixture(spec)
	f := &feeder{ro: ro}
	fault := 4 * time.Minute
	// From the fault on, a third of the canary's attempts fail.
	ds := f.run(0, 10*time.Minute, 500*time.Millisecond, func(now time.Duration) bool {
		return now >= fault && f.id%3 == 0
	})
	rb := ds[len(ds)-1]
	require.Equal(t, ActRollback, rb.Action)
	require.Equal(t, 0.0, rb.To)
	require.Greater(t, rb.At, fault)
	require.LessOrEqual(t, rb.At, fault+spec.Window+spec.Every)
	require.Contains(t, rb.Why, "error_rate > 2%: error_rate ")
	r := ro.Report(0)
	require.Equal(t, "rolled-back", r.State)
	require.Equal(t, rb.At, r.RolledBackAt)
	require.Equal(t, time.Duration(1<<63-1), ro.NextAt(), "a rolled-back canary is not evaluated again")
}

func TestOneBadRequestDoesNotRollBack(t *testing.T) {
	spec := baseSpec()
	spec.Triggers = []RolloutTrigger{{Text: "ttft_p99 > 2s", Figure: "ttft", Quantile: 0.99, Value: 2}}
	_, ro := rolloutFixture(spec)
	// Eleven fast canary attempts and one slow: p99 is the slow one, but
	// the sample is under min_requests, so nothing is judged.
	for i := range 12 {
		ttft := 100 * time.Millisecond
		if i == 11 {
			ttft = 30 * time.Second
		}
		ro.Observe(time.Minute+time.Duration(i)*time.Second, &Request{ID: uint64(i), Route: 1}, 2, true, ttft, ttft, true)
	}
	ro.Evaluate(time.Minute)
	require.Empty(t, ro.Evaluate(time.Minute+20*time.Second))
	require.Equal(t, "stepping", ro.Report(0).State)
}

func TestBreachForNeedsConsecutiveEvaluations(t *testing.T) {
	spec := baseSpec()
	spec.BreachFor = 3
	_, ro := rolloutFixture(spec)
	f := &feeder{ro: ro}
	fault := 4 * time.Minute
	ds := f.run(0, 10*time.Minute, 500*time.Millisecond, func(now time.Duration) bool { return now >= fault })
	rb := ds[len(ds)-1]
	require.Equal(t, ActRollback, rb.Action)

	_, ro1 := rolloutFixture(baseSpec())
	f1 := &feeder{ro: ro1}
	ds1 := f1.run(0, 10*time.Minute, 500*time.Millisecond, func(now time.Duration) bool { return now >= fault })
	require.Equal(t, 2*spec.Every, rb.At-ds1[len(ds1)-1].At, "two more evaluations in breach")
}

func TestHoldThenResumeWithHysteresis(t *testing.T) {
	spec := baseSpec()
	spec.Hold = true
	_, ro := rolloutFixture(spec)
	f := &feeder{ro: ro}
	// Errors from 4m to 6m at 1 in 20 (5 %): held; then none: under 80 %
	// of the threshold once the window has forgotten them, resumed.
	ds := f.run(0, 12*time.Minute, 500*time.Millisecond, func(now time.Duration) bool {
		return now >= 4*time.Minute && now < 6*time.Minute && f.id%20 == 0
	})
	acts := actions(ds)
	require.Contains(t, acts, ActHold)
	require.Contains(t, acts, ActResume)
	require.NotContains(t, acts, ActRollback)
	var hold, resume RolloutDecision
	for _, d := range ds {
		switch d.Action {
		case ActHold:
			hold = d
		case ActResume:
			resume = d
		}
	}
	require.Equal(t, hold.From, hold.To, "a hold keeps the share")
	require.GreaterOrEqual(t, resume.At, 6*time.Minute+spec.Window-spec.Every, "resumed once the errors left the window")
	require.Contains(t, resume.Why, "under 80% of its threshold")
}

func TestRelativeTriggerNeedsABaselineSample(t *testing.T) {
	spec := baseSpec()
	spec.Triggers = []RolloutTrigger{{Text: "ttft_p99 > 1.5x baseline", Figure: "ttft", Quantile: 0.99, Baseline: 1.5}}
	spec.Steps = []RolloutStep{{Share: 0.05}}
	_, ro := rolloutFixture(spec)
	ro.Evaluate(time.Minute)
	// Slow canary, no baseline attempts: not judged.
	for i := range 30 {
		ro.Observe(time.Minute+time.Duration(i)*time.Second, &Request{ID: uint64(i), Route: 1}, 2, true, 5*time.Second, 6*time.Second, false)
	}
	require.Empty(t, ro.Evaluate(time.Minute+30*time.Second))
	// With a fast baseline: the canary is over 1.5x it.
	for i := range 30 {
		ro.Observe(time.Minute+30*time.Second+time.Duration(i)*time.Second, &Request{ID: uint64(100 + i)}, 0, true, time.Second, 2*time.Second, true)
	}
	ds := ro.Evaluate(2 * time.Minute)
	require.Len(t, ds, 1)
	require.Equal(t, ActRollback, ds[0].Action)
	require.True(t, strings.Contains(ds[0].Why, "x baseline"), ds[0].Why)
}

func TestRolloutIgnoresIneligibleTraffic(t *testing.T) {
	_, ro := rolloutFixture(baseSpec())
	cfg := ro.cfg
	cfg.Canaries[0].Tenants = []bool{true, false, false}
	ro = NewRollouts(cfg)
	ro.Observe(time.Second, &Request{ID: 1, Tenant: 1, Route: 1}, 2, false, 0, time.Second, false)
	ro.Observe(time.Second, &Request{ID: 2, Tenant: 0, Route: 1}, 2, false, 0, time.Second, false)
	r := ro.Report(0)
	require.EqualValues(t, 1, r.Canary.Attempts)
	require.EqualValues(t, 1, r.Canary.Failed)
	require.Equal(t, [][2]uint64{{1, 0}}, r.PerMinute)
}
