package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/sweep"
)

// autoscaleScenario is plan's test fixture: an autoscaled M/M/c pool whose
// scale-ups a stockout mostly refuses; it runs in milliseconds.
const autoscaleScenario = "../../internal/plan/testdata/autoscale-stockout.yaml"

// warm7 holds seven replicas warm (reserved) where the scenario holds two.
const warm7 = "warm7=pools.as.replicas=7,pools.as.autoscale.min_replicas=7,pools.as.acquisition.reserved=7"

// TestCompareVariants: named variants are compared as policies are, over
// paired seeds; a real difference (seven warm replicas against two) is
// marked significant, a variant that changes nothing is not, and the
// autoscaled pool gets fleet rows.
func TestCompareVariants(t *testing.T) {
	args := []string{autoscaleScenario, "--variant", "today", "--variant", warm7,
		"--variant", "slow=pools.as.autoscale.sync_period=15s", "--seeds", "4"}
	code, out, errs := runCompare(t, args...)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "compare plan-autoscale-stockout: variants today (baseline), warm7, slow; 4 seeds (3..6)")
	require.Contains(t, out, "  today: the scenario as it is\n")
	require.Contains(t, out, "  warm7: pools.as.replicas=7, pools.as.autoscale.min_replicas=7, pools.as.acquisition.reserved=7\n")
	require.Contains(t, out, "a seed gives every variant the same arrivals")
	require.Contains(t, errs, "3 variants × 4 seeds (3..6) = 12 runs")
	for _, row := range []string{"autoscaling.as.refused", "autoscaling.as.burst_cost", "autoscaling.as.to_serving.p90"} {
		require.Contains(t, out, "  "+row+" ")
	}

	// The same output whatever the parallelism.
	code, out1, errs := runCompare(t, append(args, "--parallel", "1")...)
	require.Equal(t, exitOK, code, errs)
	require.Equal(t, out, out1)

	code, js, errs := runCompare(t, append(args, "--json", "-")...)
	require.Equal(t, exitOK, code, errs)
	type stat struct {
		Mean        float64 `json:"mean"`
		Significant bool    `json:"significant"`
	}
	var res struct {
		Policies []string                              `json:"policies"`
		Baseline string                                `json:"baseline"`
		Variants map[string][]string                   `json:"variants"`
		Classes  map[string]map[string]map[string]stat `json:"classes"`
		Fleet    map[string]map[string]stat            `json:"fleet"`
		Metrics  map[string]string                     `json:"metrics"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &res))
	require.Equal(t, []string{"today", "warm7", "slow"}, res.Policies, "the columns, under the key they always had")
	require.Equal(t, "today", res.Baseline)
	require.Equal(t, []string{}, res.Variants["today"])
	require.Len(t, res.Variants["warm7"], 3)
	wait := res.Classes["all"]["queue_wait_s.p99"]
	require.Less(t, wait["warm7"].Mean, wait["today"].Mean/4)
	require.True(t, wait["warm7"].Significant)
	// sync_period=15s is the default: the same runs, no mark.
	require.Equal(t, wait["today"].Mean, wait["slow"].Mean)
	require.False(t, wait["slow"].Significant)
	refused := res.Fleet["autoscaling.as.refused"]
	require.Less(t, refused["warm7"].Mean, refused["today"].Mean)
	require.True(t, refused["warm7"].Significant)
	require.Equal(t, "lower", res.Metrics["autoscaling.as.burst_cost"])
}

func TestCompareVariantInvalid(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"sets the seed", []string{autoscaleScenario, "--variant", "a", "--variant", "b=seed=9"},
			[]string{`--variant "b=seed=9": b: override "seed=9": a variant may not set the seed`}},
		{"no PATH=VALUE", []string{autoscaleScenario, "--variant", "a", "--variant", "b=pools.as.replicas"},
			[]string{`--variant "b=pools.as.replicas": b: override "pools.as.replicas": want PATH=VALUE`}},
		{"no name", []string{autoscaleScenario, "--variant", "a", "--variant", "=pools.as.replicas=3"},
			[]string{`--variant "=pools.as.replicas=3": name "": want letters`}},
		{"one variant", []string{autoscaleScenario, "--variant", "a=pools.as.replicas=3"},
			[]string{"--variant: got 1, want at least 2"}},
		{"name twice", []string{autoscaleScenario, "--variant", "a", "--variant", "a=pools.as.replicas=3"},
			[]string{`--variant "a=pools.as.replicas=3": the name a is given twice`}},
		{"with --policy", []string{autoscaleScenario, "--policy", "fifo,wfq", "--variant", "a", "--variant", "b"},
			[]string{"--policy and --variant: compare one or the other"}},
		{"bad path", []string{autoscaleScenario, "--variant", "a", "--variant", "b=pools.nope.replicas=3"},
			[]string{"with --variant b:", "pools.nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCompare(t, tt.args...)
			require.Equal(t, exitInvalid, code, "stderr: %s", errs)
			require.Empty(t, out)
			for _, w := range tt.want {
				require.Contains(t, errs, w)
			}
		})
	}
}

// TestCompareVariantRunFailure: the command printed for a failed run
// replays the variant's overrides.
func TestCompareVariantRunFailure(t *testing.T) {
	code, out, errs := runCompare(t, autoscaleScenario, "--variant", "a", "--variant", "b=pools.as.replicas=3,expect=[nosuch.value < 1]",
		"--seeds", "2", "--parallel", "1")
	require.Equal(t, exitInvalid, code, errs)
	require.Empty(t, out)
	require.Contains(t, errs, "variant b, seed 3: ")
	require.Contains(t, errs, "reproduce with: fleetdrill run ../../internal/plan/testdata/autoscale-stockout.yaml --set pools.as.replicas=3 --set 'expect=[nosuch.value < 1]' --seed 3")
}

// TestCompareVariantEmitSweep: a variant is a sweep point with its
// overrides; the baseline alone has none.
func TestCompareVariantEmitSweep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sweep.yaml")
	code, out, errs := runCompare(t, autoscaleScenario, "--variant", "today", "--variant", warm7, "--seeds", "3", "--emit-sweep", path)
	require.Equal(t, exitOK, code, errs)
	require.Empty(t, out)
	require.Contains(t, errs, "2 variants × 3 seeds = 6 runs")
	spec, err := sweep.Load(path)
	require.NoError(t, err)
	require.Len(t, spec.Points, 2)
	require.Equal(t, "today", spec.Points[0].Name)
	require.Empty(t, spec.Points[0].Sets)
	require.Equal(t, "warm7", spec.Points[1].Name)
	require.Equal(t, []string{"pools.as.replicas=7", "pools.as.autoscale.min_replicas=7", "pools.as.acquisition.reserved=7"}, spec.Points[1].Sets)
	require.Equal(t, []uint64{3, 4, 5}, spec.Seeds)
}
