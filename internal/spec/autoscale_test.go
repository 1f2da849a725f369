package spec

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// gameday is the library scenario the autoscaling steps are drilled on:
// usw-h100-8b autoscales on queue depth (3 to 11 replicas) at
// gpu-cloud-b; use-h100-8b and euw-h100-8b are fixed.
const gameday = "gameday-autoscale-stockout"

// TestAutoscaleStepsWriteOverrides: each Given adds the overrides it
// says, each When the fault line it says, and the words for the faults
// name them in outcomes.
func TestAutoscaleStepsWriteOverrides(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		sets       []string // the overrides the step adds
		fault      string   // or the fault line
		words      string   // and what names it
		label      string
	}{
		{name: "queue depth", step: `pool "usw-h100-8b" autoscales on queue depth 6 between 2 and 9 replicas`,
			sets: []string{"pools.usw-h100-8b.autoscale.metric=queue", "pools.usw-h100-8b.autoscale.target=6", "pools.usw-h100-8b.autoscale.target_wait=",
				"pools.usw-h100-8b.autoscale.min_replicas=2", "pools.usw-h100-8b.autoscale.max_replicas=9"}},
		{name: "utilization, a fixed pool starting at its lower bound", step: "pool use-h100-8b autoscales on utilization 70% between 4 and 8 replicas",
			sets: []string{"pools.use-h100-8b.autoscale.metric=utilization", "pools.use-h100-8b.autoscale.target=0.7", "pools.use-h100-8b.autoscale.target_wait=",
				"pools.use-h100-8b.autoscale.min_replicas=4", "pools.use-h100-8b.autoscale.max_replicas=8", "pools.use-h100-8b.replicas=4"}},
		{name: "predicted wait", step: "pool usw-h100-8b autoscales on predicted wait 2s between 3 and 11 replicas",
			sets: []string{"pools.usw-h100-8b.autoscale.metric=wait", "pools.usw-h100-8b.autoscale.target=", "pools.usw-h100-8b.autoscale.target_wait=2s",
				"pools.usw-h100-8b.autoscale.min_replicas=3", "pools.usw-h100-8b.autoscale.max_replicas=11"}},
		{name: "reservation", step: `pool "usw-h100-8b" holds 4 reserved replicas`,
			sets: []string{"pools.usw-h100-8b.acquisition.reserved=4"}},
		{name: "constant delay", step: "the provider of pool usw-h100-8b grants replicas after 6m",
			sets: []string{"pools.usw-h100-8b.acquisition.delay={distribution: constant, mean: 6m}"}},
		{name: "exponential delay", step: "the provider of pool usw-h100-8b grants replicas after 3m on average",
			sets: []string{"pools.usw-h100-8b.acquisition.delay={distribution: exponential, mean: 3m}"}},
		{name: "stockout of a provider", step: `the provider "gpu-cloud-b" is out of stock from 10m`,
			fault: "stockout provider=gpu-cloud-b at=10m", words: "the stockout", label: "stockout(gpu-cloud-b)"},
		{name: "stockout of a pool's accelerator", step: "the provider of pool usw-h100-8b is out of stock of h100-sxm from 10m for 5m",
			fault: "stockout pool=usw-h100-8b accelerator=h100-sxm at=10m for=5m", words: "stockout", label: "stockout(usw-h100-8b,h100-sxm)"},
		{name: "partial stockout in a region", step: "the provider in region us-west grants a quarter of what is asked from 10m for 1m",
			fault: "stockout region=us-west at=10m for=1m grant=0.25", words: "the stockout", label: "stockout(us-west)"},
		{name: "partial stockout as a percentage", step: "the provider gpu-cloud-b grants 40% of what is asked from 10m",
			fault: "stockout provider=gpu-cloud-b at=10m grant=0.4", words: "the fault", label: "stockout(gpu-cloud-b)"},
		{name: "quota cap", step: "the account at gpu-cloud-b is capped at 16 GPUs",
			fault: "quota-cap provider=gpu-cloud-b at=0s gpus=16", words: "the quota cap", label: "quota-cap(gpu-cloud-b)"},
		{name: "quota cap from a time", step: `the account at "gpu-cloud-b" is capped at 4 GPUs from 10m for 5m`,
			fault: "quota-cap provider=gpu-cloud-b at=10m for=5m gpus=4", words: "the quota cap", label: "quota-cap(gpu-cloud-b)"},
		{name: "slow provisioning", step: "provisioning for pool usw-h100-8b takes 3 times as long from 10m for 15m",
			fault: "slow-provisioning pool=usw-h100-8b at=10m for=15m factor=3", words: "the slow provisioning", label: "slow-provisioning(usw-h100-8b)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fleet(t, gameday)
			require.NoError(t, do(t, w, tc.step))
			if tc.sets != nil {
				require.Equal(t, tc.sets, w.sets)
			}
			if tc.fault != "" {
				require.Equal(t, tc.fault, w.faults[len(w.faults)-1])
				l, err := w.labelFor(tc.words)
				require.NoError(t, err)
				require.Equal(t, tc.label, l)
			}
			_, err := w.load(nil)
			require.NoError(t, err, "the scenario still validates")
		})
	}
}

// TestAutoscaleStepErrorsSayWhatToFix: an autoscaling step on an unknown
// pool, or on a pool (or provider) that does not autoscale, fails at
// itself, naming the pool and the step to add.
func TestAutoscaleStepErrorsSayWhatToFix(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []string
		want  string
	}{
		{"misspelt pool", []string{"pool usw-h100 autoscales on queue depth 4 between 3 and 11 replicas"},
			`the fleet has no pool "usw-h100"; did you mean "usw-h100-8b"?`},
		{"misspelt pool in an outcome", []string{`pool "usw-h10-8b" is granted at most 2 replicas`},
			`the fleet has no pool "usw-h10-8b"; did you mean "usw-h100-8b"?`},
		{"outcome on a fixed pool", []string{"pool euw-h100-8b never serves more than 5 replicas"},
			"pool euw-h100-8b does not autoscale, so the report has no autoscaling.euw-h100-8b to judge (autoscaled pools: usw-h100-8b at gpu-cloud-b); make it autoscale, with a step like Given pool euw-h100-8b autoscales on queue depth 4 between 2 and 5 replicas"},
		{"asks of a fixed pool", []string{"pool use-h100-8b asks for 8 more replicas"},
			"pool use-h100-8b does not autoscale, so the report has no autoscaling.use-h100-8b to judge"},
		{"reservation on a fixed pool", []string{"pool euw-h100-8b holds 4 reserved replicas"},
			"pool euw-h100-8b does not autoscale, and a reservation is what its autoscaler is granted first; make it autoscale first, with a step like Given pool euw-h100-8b autoscales on"},
		{"stockout at a provider of fixed pools", []string{"the provider gpu-cloud-a is out of stock from 10m"},
			"a stockout changes only what an autoscaler asks for, and provider gpu-cloud-a has no autoscaled pool (autoscaled pools: usw-h100-8b at gpu-cloud-b); make one autoscale first, with a step like Given pool use-h100-8b autoscales"},
		{"misspelt provider", []string{"the account at gpu-cloud-d is capped at 4 GPUs"},
			`the fleet has no provider "gpu-cloud-d"; did you mean`},
		{"a grant of everything", []string{"the provider gpu-cloud-b grants 100% of what is asked from 10m"},
			`grants "100%": want a share below all of it: a quarter, half, 25% or 0.25`},
		{"utilization over all", []string{"pool usw-h100-8b autoscales on utilization 170% between 3 and 11 replicas"},
			`utilization "170%": want a percentage (70%) or a fraction (0.7)`},
		{"bounds the wrong way round", []string{"pool usw-h100-8b autoscales on queue depth 4 between 11 and 3 replicas"},
			"between 11 and 3 replicas: want at least 1 replica and the first bound at most the second"},
		{"an unknown refusal", []string{`the provider refuses replicas for "capacity"`},
			`refused for "capacity": want stockout, quota or reservation`},
		{"no duration", []string{"pool usw-h100-8b serves new replicas within soon of asking"},
			`"soon": want a duration such as 7m`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fleet(t, gameday)
			var err error
			for _, s := range tc.steps {
				if err = do(t, w, s); err != nil {
					break
				}
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestNoAutoscaledPoolToRefuse: a refusal outcome with no pool named in a
// fleet with no autoscaled pool says to make one autoscale.
func TestNoAutoscaledPoolToRefuse(t *testing.T) {
	w := fleet(t, "eu-residency")
	require.ErrorContains(t, do(t, w, "the provider refuses no replicas"),
		"the fleet has no autoscaled pool, so the provider is asked for nothing; make one autoscale, with a step like Given pool")
}

// TestAutoscaleOutcomes: on the game day as it happened (cut to 20m;
// measured: 3 → 11 asked at 10m15s, 2 granted, serving 8m00s after the
// ask, 60 refused by the stockout, 3 to 5 serving), the outcomes pass and
// fail on what the pool and its provider did, and a failure says what
// was expected, what was measured and what the pool's autoscaler and
// provider did, with the command that reproduces it.
func TestAutoscaleOutcomes(t *testing.T) {
	w := fleet(t, gameday)
	require.NoError(t, do(t, w, "the fleet's own expectations are dropped"))
	require.NoError(t, do(t, w, "the run lasts 20m"))
	story := "what happened: pool usw-h100-8b scaled up once, down never; it started with 3 replicas and asked for at most 11 (from 10m15s); " +
		"the provider was asked 62 times for a replica, granted 2 (0 reserved) and refused 60 (stockout 60); serving 3 to 5 replicas; " +
		"2 new replicas served, 8m0s after they were asked for"
	for _, tc := range []struct {
		outcome string
		want    []string // empty: passes
	}{
		{"pool usw-h100-8b asks for 8 more replicas", nil},
		{"pool usw-h100-8b scales up to at least 11 replicas", nil},
		{"pool usw-h100-8b is granted at most 2 replicas", nil},
		{`the provider refuses replicas for "stockout"`, nil},
		{"the provider refuses no replicas of pool usw-h100-8b for quota", nil},
		{"no replica of pool usw-h100-8b serves sooner than 7m after it was asked for", nil},
		{"pool usw-h100-8b serves new replicas within 8m of asking", nil},
		{"pool usw-h100-8b never serves more than 5 replicas", nil},
		{"pool usw-h100-8b is granted at most 1 replica", []string{
			"outcome failed\n  expected: autoscaling.usw-h100-8b.granted <= 1\n  measured: 2\n", story,
			"scenario: gameday-autoscale-stockout, seed 5",
			"timeline around stockout(usw-h100-8b)#2 (stockout pool=usw-h100-8b at=11m), a minute either side",
			"scale up 3 → 11", "2 of 8 replicas granted", "replica 3 serving, 8m0s after it was asked for",
			`reproduce: fleetdrill run gameday-autoscale-stockout --set duration=20m --set 'expect=["autoscaling.usw-h100-8b.granted <= 1"]'`}},
		{"pool usw-h100-8b asks for 6 more replicas", []string{
			"expected: pool usw-h100-8b: the most replicas asked for at once beyond the 3 it started with == 6",
			"measured: 8 (3 → 11 at 10m15s)", story}},
		{"pool usw-h100-8b scales up to at most 9 replicas", []string{
			"expected: pool usw-h100-8b: the most replicas asked for at once <= 9", "measured: 11 (3 → 11 at 10m15s)"}},
		{"pool usw-h100-8b serves new replicas within 7m of asking", []string{
			"expected: autoscaling.usw-h100-8b.to_serving.count > 0 and autoscaling.usw-h100-8b.to_serving.max <= 7m\n", "measured: 8m00s\n", story}},
		{"no replica of pool usw-h100-8b serves sooner than 9m after it was asked for", []string{
			"expected: no replica of pool usw-h100-8b serves sooner than 9m after it was asked for",
			"measured: 2 of 2 new replicas served sooner: 8m0s, 8m0s after they were asked for", story}},
		{`the provider refuses no replicas for "the stockout"`, []string{
			"expected: autoscaling.usw-h100-8b.refused_by.stockout == 0", "measured: 60"}},
		{"pool usw-h100-8b never serves more than 4 replicas", []string{
			"expected: autoscaling.usw-h100-8b.max_serving <= 4", "measured: 5", story}},
	} {
		t.Run(tc.outcome, func(t *testing.T) {
			err := outcome(t, w, tc.outcome)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err, "%s must fail", tc.outcome)
			for _, s := range tc.want {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

// outcome runs an outcome step as the suite does (handler): with its
// fault's timeline and its note.
func outcome(t *testing.T, w *world, text string) error {
	t.Helper()
	s, a := match(text)
	require.NotNil(t, s, "no step matches %q", text)
	return w.perform(context.Background(), s, a)
}

// TestAutoscaleStepSuggestions: a mistyped autoscaling step is suggested
// back with the user's values, quoted pool names kept.
func TestAutoscaleStepSuggestions(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"pool usw-h100-8b autoscale on queue depth 4 between 3 and 11 replicas",
			"Given pool usw-h100-8b autoscales on queue depth 4 between 3 and 11 replicas    ("},
		{`pool "usw-h100-8b" is grantd at most 2 replicas`, `Then pool "usw-h100-8b" is granted at most 2 replicas    (`},
		{"the provider gpu-cloud-b is out of stok from 11m", "When the provider gpu-cloud-b is out of stock from 11m    ("},
		{"the provider refuse replicas for stockout", "Then the provider refuses replicas for stockout    ("},
	} {
		t.Run(tc.text, func(t *testing.T) {
			msg := undefined(tc.text).Error()
			_, first, _ := strings.Cut(msg, "did you mean:\n    ")
			require.True(t, strings.HasPrefix(first, tc.want), "first suggestion of\n%s", msg)
		})
	}
}
