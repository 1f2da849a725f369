package twin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

func TestForecastOfASteadyStreamIsClose(t *testing.T) {
	// A steady Poisson stream of 4 req/s: about 1,200 requests and 1.6M
	// tokens a window, whose sum varies by a few percent.
	rep := run(t, azureLike(4, 4, time.Hour))
	f := rep.Forecast
	require.NotNil(t, f)
	require.Equal(t, ForecastWindow.Seconds(), f.WindowS)
	c := f.Classes["interactive"]
	require.Equal(t, 11, c.Windows, "12 windows in an hour, the first one trains")
	require.Len(t, c.TokensByWindow, 11)
	require.Less(t, c.TokensMAPE, 0.15)
	require.Less(t, c.ConcurrencyMAPE, 0.15)
	require.InDelta(t, 1.6e6, c.NextTokens, 0.2e6)

	// The library's default, at its own load.
	sc, err := scenarios.LoadNamed("default")
	require.NoError(t, err)
	rep = run(t, sc)
	for name, c := range rep.Forecast.Classes {
		require.Equal(t, 5, c.Windows, "class %s: 30 minutes are six windows", name)
		require.Less(t, c.TokensMAPE, 0.15, "class %s", name)
	}
}

func TestForecastErrorSpikesAtAStepThenDecays(t *testing.T) {
	// A second stream of the same class starts at 30m: demand doubles.
	sc := azureLike(8, 4, time.Hour)
	surge := sc.Workload[0]
	surge.Name, surge.Start = "surge", dur(30*time.Minute)
	sc.Workload = append(sc.Workload, surge)
	c := run(t, sc).Forecast.Classes["interactive"]
	e := c.TokensByWindow // e[i] scores window i+1; window 6 starts at 30m
	require.Len(t, e, 11)
	before := 0.0
	for _, x := range e[:5] {
		before = max(before, x)
	}
	spike := e[5]
	require.Greater(t, spike, 0.3, "errors %v", e)
	require.Greater(t, spike, 2*before, "the step stands out: %v", e)
	require.Less(t, e[6], spike, "errors %v", e)
	require.Less(t, e[7], spike/2, "errors %v", e)
	require.Less(t, e[10], 0.15, "errors %v", e)
	require.Equal(t, e[10], c.TokensLastError)
}

func TestForecastSkipsWindowsWithoutDemand(t *testing.T) {
	// A stream that starts at 20m: the windows before have no demand and
	// are not scored; the first with demand was forecast at zero.
	sc := azureLike(4, 2, 40*time.Minute)
	sc.Workload[0].Start = dur(20 * time.Minute)
	c := run(t, sc).Forecast.Classes["interactive"]
	require.Equal(t, []float64{-1, -1, -1, 1}, c.TokensByWindow[:4])
	require.Equal(t, 4, c.Windows)
}

func TestForecastWithoutAFullWindow(t *testing.T) {
	rep := run(t, azureLike(2, 1, 4*time.Minute))
	c := rep.Forecast.Classes["interactive"]
	require.Zero(t, c.Windows)
	require.Zero(t, c.TokensMAPE)
	require.Empty(t, c.TokensByWindow)
	// The section's paths resolve for expectations before the run.
	_, err := rep.Check("forecast.classes.interactive.tokens_mape < 0.2")
	require.NoError(t, err)
}
