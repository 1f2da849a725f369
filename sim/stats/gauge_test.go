package stats

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const sec = time.Second

func TestTimeGaugeStepFunction(t *testing.T) {
	// Value over time (first update at 1s):
	//   [1s,3s): 2   [3s,4s): 5   [4s,6s): 0   [6s,...): 1
	var g TimeGauge
	g.Set(1*sec, 2)
	g.Set(3*sec, 5)
	g.Set(4*sec, 0)
	g.Set(6*sec, 1)

	require.Equal(t, 1.0, g.Value())
	require.Equal(t, 5.0, g.Max())

	tests := []struct {
		now      time.Duration
		integral float64 // value·seconds since the first update at 1s
		mean     float64
	}{
		{6 * sec, 2*2 + 5*1 + 0*2, 9.0 / 5},
		{6*sec + 500*time.Millisecond, 9.5, 9.5 / 5.5},
		{7 * sec, 9 + 1, 10.0 / 6},
		{10 * sec, 9 + 4, 13.0 / 9},
		// Before the last update (6s): read as of 6s.
		{2 * sec, 9, 9.0 / 5},
	}
	for _, tt := range tests {
		require.Equal(t, tt.integral, g.Integral(tt.now), "Integral(%v)", tt.now)
		require.InEpsilon(t, tt.mean, g.Mean(tt.now), 1e-15, "Mean(%v)", tt.now)
	}
}

func TestTimeGaugeIntegralWhileBuilding(t *testing.T) {
	// Integral read between updates integrates the current value up to now.
	var g TimeGauge
	g.Set(0, 3)
	require.Equal(t, 4.5, g.Integral(1500*time.Millisecond))
	g.Set(1500*time.Millisecond, 1)
	require.Equal(t, 5.0, g.Integral(2*sec))
	require.Equal(t, 2.5, g.Mean(2*sec))
	// Reading does not change the gauge.
	require.Equal(t, 5.0, g.Integral(2*sec))
	require.Equal(t, 1.0, g.Value())
}

func TestTimeGaugeAdd(t *testing.T) {
	// A queue: one arrival at 0, another at 1s, both leave at 2s.
	var g TimeGauge
	g.Add(0, 1)
	g.Add(1*sec, 1)
	g.Add(2*sec, -2)
	require.Equal(t, 0.0, g.Value())
	require.Equal(t, 2.0, g.Max())
	require.Equal(t, 3.0, g.Integral(3*sec))
	require.Equal(t, 1.0, g.Mean(3*sec))
}

func TestTimeGaugeOutOfOrder(t *testing.T) {
	var g TimeGauge
	g.Set(0, 1)
	g.Set(5*sec, 3)
	// An update dated before the last one takes effect at 5s: it must neither
	// subtract area (3·(2s-5s) would) nor move the gauge's clock back.
	g.Set(2*sec, 10)
	require.Equal(t, 10.0, g.Value())
	require.Equal(t, 10.0, g.Max())
	require.Equal(t, 5.0, g.Integral(5*sec), "area up to 5s is 1·5s; the 3 was held for no time")
	require.Equal(t, 15.0, g.Integral(6*sec))

	// Reads dated in the past are clamped to the last update, never negative.
	require.Equal(t, 5.0, g.Integral(1*sec))
	require.Equal(t, 1.0, g.Mean(1*sec))
	require.Equal(t, 5.0, g.Integral(-time.Hour))

	// Later updates continue from 5s.
	g.Set(7*sec, 0)
	require.Equal(t, 25.0, g.Integral(8*sec))
	require.InEpsilon(t, 25.0/8, g.Mean(8*sec), 1e-15)

	// Add dated in the past also applies at the last update time.
	g.Add(1*sec, 4)
	require.Equal(t, 4.0, g.Value())
	require.Equal(t, 25.0, g.Integral(7*sec))
	require.Equal(t, 29.0, g.Integral(8*sec))
}

func TestTimeGaugeEmptyAndInstant(t *testing.T) {
	var g TimeGauge
	require.Zero(t, g.Value())
	require.Zero(t, g.Max())
	require.Zero(t, g.Integral(5*sec))
	require.Zero(t, g.Mean(5*sec))

	g.Set(10*sec, 4)
	require.Zero(t, g.Mean(10*sec), "no time elapsed: mean is 0, not NaN")
	require.Zero(t, g.Integral(10*sec))
	// Time before the first update does not count.
	require.Equal(t, 40.0, g.Integral(20*sec))
	require.Equal(t, 4.0, g.Mean(20*sec))
}

func TestTimeGaugeNegativeValues(t *testing.T) {
	// Max is the largest value held, even if all are negative.
	var g TimeGauge
	g.Set(0, -3)
	g.Set(1*sec, -1)
	require.Equal(t, -1.0, g.Max())
	require.Equal(t, -4.0, g.Integral(2*sec))
}

func TestTimeGaugeUtilisationAccumulatesExactly(t *testing.T) {
	// A server busy 1ms out of every 3ms for an hour of virtual time: a million
	// small steps must still integrate to exactly 1200s busy.
	var g TimeGauge
	const period = 3 * time.Millisecond
	n := int(time.Hour / period)
	for i := range n {
		at := time.Duration(i) * period
		g.Set(at, 1)
		g.Set(at+time.Millisecond, 0)
	}
	require.Equal(t, 1200.0, g.Integral(time.Hour))
	require.InEpsilon(t, 1.0/3, g.Mean(time.Hour), 1e-15)
}

func BenchmarkTimeGaugeAdd(b *testing.B) {
	var g TimeGauge
	var now time.Duration
	b.ReportAllocs()
	for b.Loop() {
		now += time.Microsecond
		g.Add(now, 1)
	}
}
