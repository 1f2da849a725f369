package scorecard

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// acqCard scores gpu-cloud-b on the autoscale game day, cut to 10 minutes
// (the drill stretches itself to three times its bound). Its pool
// usw-h100-8b autoscales on queue depth with a 6-minute constant delay.
func acqCard(t *testing.T, o AcquisitionOptions, sets ...string) *Card {
	t.Helper()
	c, err := Run(t.Context(), Options{Scenario: "gameday-autoscale-stockout", Provider: "gpu-cloud-b",
		Sets: append([]string{"duration=10m"}, sets...), Acquisition: o})
	require.NoError(t, err)
	return c
}

// reliable: no stockout, a 20-second constant provisioning delay.
var reliable = []string{"faults=[]", "pools.usw-h100-8b.acquisition.delay.mean=20s"}

// golden compares the card's stage 6 and its acquisition gate lines with
// testdata/NAME.golden.
func golden(t *testing.T, c *Card, name string) {
	t.Helper()
	md := c.Markdown()
	i := strings.Index(md, "## 6. ")
	require.GreaterOrEqual(t, i, 0, "no stage 6 in the card")
	var b strings.Builder
	for _, line := range strings.SplitAfter(c.GateText(), "\n") {
		if strings.Contains(line, "acquisition: ") {
			b.WriteString(line)
		}
	}
	got := b.String() + "\n" + md[i:]
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "go test ./internal/scorecard/ -run %s -update writes it", t.Name())
	require.Equal(t, string(want), got, "rerun with -update and read the diff")
}

func TestAcquisitionReliablePasses(t *testing.T) {
	c := acqCard(t, AcquisitionOptions{}, reliable...)
	a := c.Acquisition
	require.False(t, a.Untested, a.Note)
	require.True(t, a.Pass, c.GateText())
	require.Len(t, a.Pools, 1)
	p := a.Pools[0]
	require.True(t, p.Tested)
	require.False(t, p.AutoscaleAdded, "the game day's pool autoscales")
	require.Positive(t, p.Replicas)
	require.Equal(t, p.Replicas, p.Granted)
	require.Zero(t, p.Refused)
	require.Equal(t, 1.0, p.GrantedShare)
	// 20 s provisioning + the 2-minute load, constant: every replica.
	require.Equal(t, 140.0, p.ToServing.P90)
	require.Equal(t, 200.0, p.BoundS)
	require.Len(t, p.PerSeed, DefaultAcquisitionSeeds)
	require.NotEmpty(t, a.Classes)
	for _, cl := range a.Classes {
		require.LessOrEqual(t, cl.Drop, DefaultMaxSLODrop, cl.Name)
	}
	for _, name := range []string{"acquisition: granted share", "acquisition: time to serving", "acquisition: SLO cost"} {
		require.True(t, gateItem(t, c, name).Pass, name)
	}
	require.Contains(t, gateItem(t, c, "acquisition: granted share").Evidence, "usw-h100-8b: 40 of 40 replicas asked granted (100%, want >= 90%)")
	require.Contains(t, gateItem(t, c, "acquisition: time to serving").Evidence, "p90 140s (median seed; worst seed 140s, max 140s) vs bound 200s")
	golden(t, c, "acquisition-reliable")

	// A tighter bar fails the same figures, and says which.
	strict := acqCard(t, AcquisitionOptions{MaxSLODrop: 0.001}, reliable...)
	g := gateItem(t, strict, "acquisition: SLO cost")
	require.False(t, g.Pass)
	require.Contains(t, g.Evidence, "want <= 0.1 pts")
	require.False(t, strict.Passed)
}

// TestAcquisitionStockoutFails: a stockout over the whole drill refuses
// every on-demand replica; the card fails the stage with the refusals.
func TestAcquisitionStockoutFails(t *testing.T) {
	c := acqCard(t, AcquisitionOptions{Faults: []string{"stockout provider=gpu-cloud-b at=0s"}}, reliable...)
	a := c.Acquisition
	require.False(t, a.Untested)
	require.False(t, a.Pass)
	require.Equal(t, []string{"stockout provider=gpu-cloud-b at=0s"}, a.Faults)
	p := a.Pools[0]
	require.Positive(t, p.Replicas)
	require.Zero(t, p.Granted)
	require.Equal(t, 0.0, p.GrantedShare)
	require.Positive(t, p.RefusedBy["stockout"])
	require.Equal(t, p.Refused, p.RefusedBy["stockout"])
	for _, name := range []string{"acquisition: granted share", "acquisition: time to serving", "acquisition: SLO cost"} {
		require.False(t, gateItem(t, c, name).Pass, name)
	}
	ev := gateItem(t, c, "acquisition: granted share").Evidence
	require.Contains(t, ev, "usw-h100-8b: 0 of 40 replicas asked granted (0%, want >= 90%)")
	require.Contains(t, ev, "asks refused (stockout ")
	require.Contains(t, gateItem(t, c, "acquisition: time to serving").Evidence, "none of 40 replicas asked serving within the drill (660s): none granted")
	require.Contains(t, c.GateText(), "FAIL  acquisition: granted share")
	require.False(t, c.Passed)
	golden(t, c, "acquisition-stockout")
}

// TestAcquisitionScenarioFaults: the scenario's own acquisition faults on
// the provider come into the drill, moved to start with the step, their
// spacing kept.
func TestAcquisitionScenarioFaults(t *testing.T) {
	c := acqCard(t, AcquisitionOptions{Seeds: 1})
	require.Equal(t, []string{"stockout pool=usw-h100-8b at=0s for=1m grant=0.25", "stockout pool=usw-h100-8b at=1m"}, c.Acquisition.Faults)
	require.Len(t, c.Acquisition.Seeds, 1)
	require.False(t, c.Acquisition.GrantedPass)
}

// TestAcquisitionUntested: pools with no acquisition block are untested,
// not passed; the drill gives them an autoscaler and says so; the gate
// shows the items untested and does not fail on them.
func TestAcquisitionUntested(t *testing.T) {
	c := card(t, "gpu-cloud-b")
	a := c.Acquisition
	require.True(t, a.Untested)
	require.False(t, a.Pass)
	require.Contains(t, a.Note, "no pool of the provider declares acquisition")
	for _, p := range a.Pools {
		require.False(t, p.Tested, p.Pool)
		require.True(t, p.AutoscaleAdded, p.Pool)
		require.Contains(t, p.Autoscale, "added for the drill: utilization target 0.7", p.Pool)
	}
	g := gateItem(t, c, "acquisition: granted share")
	require.True(t, g.Untested)
	require.False(t, g.Pass)
	require.True(t, c.Passed, c.GateText())
	txt := c.GateText()
	require.Contains(t, txt, "gate PASS (3 items untested)")
	require.Contains(t, txt, "UNTESTED  acquisition: granted share: untested: no pool of the provider declares acquisition")
	require.Contains(t, c.Markdown(), "## 6. Acquisition reliability: UNTESTED")
	b, err := c.JSON()
	require.NoError(t, err)
	require.Contains(t, string(b), `"untested": true`)
}

// TestAcquisitionMixedPools: a provider with one pool declaring
// acquisition is scored on that pool; the other is named untested in the
// gate lines rather than counted as passing.
func TestAcquisitionMixedPools(t *testing.T) {
	c := card(t, "gpu-cloud-b",
		"pools.euw-a100-70b.autoscale={metric: utilization, target: 0.7, min_replicas: 2, max_replicas: 4}",
		"pools.euw-a100-70b.acquisition={delay: {distribution: exponential, mean: 1m}}")
	a := c.Acquisition
	require.False(t, a.Untested, a.Note)
	require.Equal(t, "euw-a100-8b", a.Pools[0].Pool)
	require.False(t, a.Pools[0].Tested)
	require.True(t, a.Pools[0].AutoscaleAdded)
	require.True(t, a.Pools[1].Tested)
	require.False(t, a.Pools[1].AutoscaleAdded)
	require.Equal(t, "declared: utilization target 0.7, 2 to 4 replicas", a.Pools[1].Autoscale)
	require.Equal(t, 138.0, a.Pools[1].DelayP90S)
	g := gateItem(t, c, "acquisition: granted share")
	require.False(t, g.Untested)
	require.Contains(t, g.Evidence, "untested (no acquisition block): euw-a100-8b")
	require.NotContains(t, g.Evidence, "euw-a100-8b: ")
}

func TestAcquisitionDeterministic(t *testing.T) {
	js := func(o AcquisitionOptions) string {
		b, err := acqCard(t, o, reliable...).JSON()
		require.NoError(t, err)
		return string(b)
	}
	first := js(AcquisitionOptions{})
	require.Equal(t, first, js(AcquisitionOptions{}))
	require.NotEqual(t, first, js(AcquisitionOptions{Seeds: 2}))
}

func TestAcquisitionInvalidFault(t *testing.T) {
	_, err := Run(t.Context(), Options{Scenario: "default", Provider: "gpu-cloud-b", Sets: []string{"duration=5m"},
		Acquisition: AcquisitionOptions{Faults: []string{"node-loss pool=euw-a100-8b at=0s"}}})
	var ie *InvalidError
	require.True(t, errors.As(err, &ie), "%v", err)
	require.Contains(t, err.Error(), "want stockout, quota-cap or slow-provisioning")
}

// TestDelayP90: the bound reads the declared distribution's p90, the
// twin's parameterisation (a lognormal keeps its mean).
func TestDelayP90(t *testing.T) {
	for _, tc := range []struct {
		d    *scenarios.Delay
		want time.Duration
	}{
		{nil, 0},
		{&scenarios.Delay{Distribution: "constant", Mean: scenarios.Duration(6 * time.Minute)}, 6 * time.Minute},
		// ln 10 × 60 s = 138.2 s
		{&scenarios.Delay{Distribution: "exponential", Mean: scenarios.Duration(time.Minute)}, 138 * time.Second},
		// 180 s × exp(−0.125 + 1.2816 × 0.5) = 301.5 s; sigma 0 is the default 0.5
		{&scenarios.Delay{Distribution: "lognormal", Mean: scenarios.Duration(3 * time.Minute)}, 301 * time.Second},
		{&scenarios.Delay{Distribution: "lognormal", Mean: scenarios.Duration(3 * time.Minute), Sigma: 0.5}, 301 * time.Second},
	} {
		require.Equal(t, tc.want, delayP90(tc.d), "delayP90(%+v)", tc.d)
	}
}
