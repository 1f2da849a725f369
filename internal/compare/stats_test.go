package compare

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummarizeCI(t *testing.T) {
	// By hand: mean 3, s = sqrt(10/4) = 1.5811, t(0.975, 4) = 2.776445
	// (any t table), half-width = 2.776445 · 1.5811 / sqrt(5) = 1.963243.
	s := Summarize([]float64{1, 2, 3, 4, 5})
	require.Equal(t, 5, s.N)
	require.InDelta(t, 3, s.Mean, 1e-12)
	require.InDelta(t, math.Sqrt(2.5), s.Std, 1e-12)
	require.InDelta(t, 1.963243, s.CI95, 1e-6)

	// t(0.975, 9) = 2.262157.
	require.InDelta(t, 2.262157, tQuantile(9), 1e-6)
}

func TestSummarizeOneValue(t *testing.T) {
	s := Summarize([]float64{7.5})
	require.Equal(t, 1, s.N)
	require.Equal(t, 7.5, s.Mean)
	require.True(t, math.IsNaN(s.Std), "std of one value = %v, want NaN (undefined)", s.Std)
	require.True(t, math.IsNaN(s.CI95), "CI of one value = %v, want NaN (undefined)", s.CI95)
	require.Equal(t, "7.5 ± n/a", formatCell(s))

	_, err := Paired([]float64{1}, []float64{2})
	require.ErrorContains(t, err, "want at least 2")
	_, err = Welch([]float64{1}, []float64{2, 3})
	require.ErrorContains(t, err, "want at least 2")
	require.Nil(t, compareTo([]float64{1}, []float64{2}))
}

func TestSummarizeIdenticalValues(t *testing.T) {
	// 0.1 summed ten times is not 1; the mean must still be 0.1 and the
	// spread exactly 0, not a rounding residue.
	xs := make([]float64, 10)
	for i := range xs {
		xs[i] = 0.1
	}
	s := Summarize(xs)
	require.Equal(t, 0.1, s.Mean)
	require.Equal(t, 0.0, s.Std)
	require.Equal(t, 0.0, s.CI95)
	require.Equal(t, "0.1 ± 0", formatCell(s))
}

// TestWelchTextbook checks the examples of the Wikipedia article "Welch's
// t-test" (section Examples), which give t, ν and p to two or three digits;
// the finer digits were computed independently by numeric integration of
// Student's t density.
func TestWelchTextbook(t *testing.T) {
	tests := []struct {
		name      string
		a1, a2    []float64
		t, df, p  float64
		roundedTo float64
	}{{
		name: "example 1, equal sizes",
		a1:   []float64{27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4},
		a2:   []float64{27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4},
		t:    2.455356, df: 24.988529, p: 0.021378,
	}, {
		name: "example 2, unequal sizes and variances",
		a1:   []float64{17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8},
		a2: []float64{21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8,
			20.7, 21.7, 21.5, 22.5, 23.6, 21.5, 22.5, 23.5, 21.5, 21.8},
		t: 1.565434, df: 9.904741, p: 0.148842,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Welch(tt.a1, tt.a2)
			require.NoError(t, err)
			require.InDelta(t, tt.t, got.T, 1e-5, "Welch t")
			require.InDelta(t, tt.df, got.DF, 1e-5, "Welch–Satterthwaite df")
			require.InDelta(t, tt.p, got.P, 1e-5, "two-sided p")
			// Swapping the samples flips t and keeps p.
			back, err := Welch(tt.a2, tt.a1)
			require.NoError(t, err)
			require.InDelta(t, -got.T, back.T, 1e-12)
			require.InDelta(t, got.P, back.P, 1e-12)
		})
	}
}

func TestPaired(t *testing.T) {
	// Differences 1, 2, 2, 0, 2: mean 1.4, s = sqrt(0.8), se = 0.4, t = 3.5
	// with 4 df, two-sided p = 0.024896 (numeric integration).
	base := []float64{1, 2, 3, 4, 5}
	other := []float64{2, 4, 5, 4, 7}
	got, err := Paired(base, other)
	require.NoError(t, err)
	require.InDelta(t, 3.5, got.T, 1e-12)
	require.Equal(t, 4.0, got.DF)
	require.InDelta(t, 0.024896, got.P, 1e-6)
	require.True(t, got.Significant())

	// The same numbers unpaired: the spread between seeds swamps the
	// difference, and Welch's test sees nothing. This is why compare
	// marks significance by the paired test.
	w, err := Welch(base, other)
	require.NoError(t, err)
	require.InDelta(t, 0.230511, w.P, 1e-6)
	require.False(t, w.Significant())

	c := compareTo(base, other)
	require.NotNil(t, c)
	require.InDelta(t, 1.4, c.Diff, 1e-12)
	require.Equal(t, got.P, c.P())
	require.True(t, c.Significant())

	_, err = Paired(base, other[:4])
	require.ErrorContains(t, err, "want the same number")
}

func TestZeroVariance(t *testing.T) {
	same := []float64{3, 3, 3}
	tests := []struct {
		name        string
		base, other []float64
		wantP       float64
	}{
		{"all equal", same, []float64{3, 3, 3}, 1},
		{"constant, different", same, []float64{4, 4, 4}, 0},
		{"constant shift", []float64{1, 2, 3}, []float64{2, 3, 4}, 0}, // paired only: the differences are all 1
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Paired(tt.base, tt.other)
			require.NoError(t, err)
			require.False(t, math.IsNaN(p.P) || math.IsNaN(p.T), "Paired = %+v, want no NaN", p)
			require.Equal(t, tt.wantP, p.P, "paired p")
			w, err := Welch(tt.base, tt.other)
			require.NoError(t, err)
			require.False(t, math.IsNaN(w.P) || math.IsNaN(w.T) || math.IsNaN(w.DF), "Welch = %+v, want no NaN", w)
		})
	}
	w, err := Welch(same, []float64{3, 3, 3})
	require.NoError(t, err)
	require.Equal(t, 1.0, w.P)
	w, err = Welch(same, []float64{4, 4, 4})
	require.NoError(t, err)
	require.Equal(t, 0.0, w.P)
	require.True(t, math.IsInf(w.T, 1))
	// One side constant, the other not: an ordinary test with n−1 df of the
	// varying side.
	w, err = Welch(same, []float64{2, 3, 4})
	require.NoError(t, err)
	require.Equal(t, 1.0, w.P)
	require.InDelta(t, 2.0, w.DF, 1e-12)
}

func TestFormatCell(t *testing.T) {
	tests := []struct {
		s    Summary
		want string
	}{
		{Summary{N: 10, Mean: 1.23456, CI95: 0.05634}, "1.235 ± 0.056"},
		{Summary{N: 10, Mean: 45.61, CI95: 8.84}, "45.6 ± 8.8"},
		{Summary{N: 10, Mean: 1234.5, CI95: 123.4}, "1234 ± 123"},
		{Summary{N: 10, Mean: 0.00123, CI95: 0.0000456}, "0.001230 ± 0.000046"},
		{Summary{N: 10, Mean: 0.5, CI95: 0}, "0.5 ± 0"},
		{Summary{N: 1, Mean: 2, CI95: math.NaN()}, "2 ± n/a"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, formatCell(tt.s), "formatCell(%+v)", tt.s)
	}
}
