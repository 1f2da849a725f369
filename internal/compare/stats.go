package compare

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Confidence is the level of the confidence intervals, and Alpha the
// significance level of the tests: two-sided, so that a difference is
// significant exactly when the baseline's value lies outside the 95 %
// interval of the difference.
const (
	Confidence = 0.95
	Alpha      = 1 - Confidence
)

// Summary describes one sample: the values of one metric under one policy,
// one per seed.
//
// NB: Std and CI95 are NaN when N < 2: one value says nothing about the
// spread. Renderers print "n/a" (text) and null (JSON) for them.
type Summary struct {
	N    int
	Mean float64
	Std  float64 // sample standard deviation (divisor N-1)
	// CI95 is the half-width of the 95 % confidence interval of the mean,
	// t(0.975, N-1)·Std/√N: the interval is Mean ± CI95.
	CI95 float64
}

// Summarize computes the summary of xs. The mean and the sum of squares are
// accumulated in index order, so that the result is a pure function of xs.
func Summarize(xs []float64) Summary {
	s := Summary{N: len(xs), Std: math.NaN(), CI95: math.NaN()}
	if s.N == 0 {
		s.Mean = math.NaN()
		return s
	}
	s.Mean = mean(xs)
	if s.N < 2 {
		return s
	}
	s.Std = stddev(xs, s.Mean)
	s.CI95 = tQuantile(s.N-1) * s.Std / math.Sqrt(float64(s.N))
	return s
}

// Test is the outcome of a two-sided t-test of "no difference".
type Test struct {
	// T is the statistic: (other − baseline) / its standard error. With a
	// standard error of zero it is 0 if the means are equal and ±Inf if
	// not.
	T float64
	// DF is the degrees of freedom: N−1 for the paired test, the
	// Welch–Satterthwaite estimate for Welch's.
	DF float64
	// P is the two-sided p-value. With a standard error of zero, where the
	// t distribution says nothing, it is 1 if the means are equal and 0 if
	// they differ: every run agreed, so any difference is certain.
	P float64
}

// Significant reports whether P < Alpha.
func (t Test) Significant() bool { return t.P < Alpha }

// Welch is Welch's unequal-variances t-test of other against base. It needs
// at least two values on each side.
func Welch(base, other []float64) (Test, error) {
	if len(base) < 2 || len(other) < 2 {
		return Test{}, fmt.Errorf("welch t-test: got %d and %d values, want at least 2 on each side", len(base), len(other))
	}
	mb, mo := mean(base), mean(other)
	vb := sq(stddev(base, mb)) / float64(len(base))
	vo := sq(stddev(other, mo)) / float64(len(other))
	se2 := vb + vo
	if se2 == 0 {
		return degenerate(mo-mb, float64(len(base)+len(other)-2)), nil
	}
	df := sq(se2) / (sq(vb)/float64(len(base)-1) + sq(vo)/float64(len(other)-1))
	return tTest((mo-mb)/math.Sqrt(se2), df), nil
}

// Paired is the paired t-test of other against base: a one-sample t-test of
// the differences other[i] − base[i], which must come from the same seed.
// It needs at least two pairs.
func Paired(base, other []float64) (Test, error) {
	if len(base) != len(other) {
		return Test{}, fmt.Errorf("paired t-test: got %d and %d values, want the same number (one per seed)", len(base), len(other))
	}
	n := len(base)
	if n < 2 {
		return Test{}, fmt.Errorf("paired t-test: got %d pairs, want at least 2", n)
	}
	d := make([]float64, n)
	for i := range d {
		d[i] = other[i] - base[i]
	}
	md := mean(d)
	se := stddev(d, md) / math.Sqrt(float64(n))
	if se == 0 {
		return degenerate(md, float64(n-1)), nil
	}
	return tTest(md/se, float64(n-1)), nil
}

// degenerate is the test when the standard error is zero.
func degenerate(diff, df float64) Test {
	switch {
	case diff == 0:
		return Test{T: 0, DF: df, P: 1}
	case diff > 0:
		return Test{T: math.Inf(1), DF: df, P: 0}
	default:
		return Test{T: math.Inf(-1), DF: df, P: 0}
	}
}

// tTest is the two-sided p-value of t under Student's t with df degrees of
// freedom: 2·CDF(−|t|), which keeps its precision for small p where
// 2·(1 − CDF(|t|)) would round to zero.
func tTest(t, df float64) Test {
	p := 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.CDF(-math.Abs(t))
	return Test{T: t, DF: df, P: min(max(p, 0), 1)}
}

// tQuantile is Student's t quantile for a two-sided interval at Confidence
// with df degrees of freedom: 2.776 for df = 4, 2.262 for df = 9.
func tQuantile(df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(1 - Alpha/2)
}

// mean is the arithmetic mean of xs. NB: identical values give exactly that
// value (0.1 ten times sums to 0.9999999999999999), so that their standard
// deviation is exactly 0 and the zero-variance cases are recognised.
func mean(xs []float64) float64 {
	var s float64
	same := true
	for _, x := range xs {
		s += x
		same = same && x == xs[0]
	}
	if same {
		return xs[0]
	}
	return s / float64(len(xs))
}

// stddev is the sample standard deviation about m, by the two-pass formula
// (no cancellation when the values are large and close together). Identical
// values give exactly 0.
func stddev(xs []float64, m float64) float64 {
	var ss float64
	for _, x := range xs {
		ss += sq(x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

func sq(x float64) float64 { return x * x }
