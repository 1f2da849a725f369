package stats

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const sampleCount = 100_000

// distributions are latency-like value generators (seconds), each drawn from
// its own seeded PCG so the tests are reproducible.
var distributions = []struct {
	name string
	draw func(r *rand.Rand) float64
}{
	{"exponential", func(r *rand.Rand) float64 { return 0.2 * r.ExpFloat64() }},
	{"lognormal", func(r *rand.Rand) float64 { return math.Exp(math.Log(0.05) + 1.2*r.NormFloat64()) }},
	{"uniform", func(r *rand.Rand) float64 { return 0.010 + 0.990*r.Float64() }},
	{"bimodal", func(r *rand.Rand) float64 {
		// 90% fast cache hits around 20ms, 10% slow path around 2s.
		if r.Float64() < 0.9 {
			return math.Abs(0.020 + 0.002*r.NormFloat64())
		}
		return math.Abs(2.0 + 0.3*r.NormFloat64())
	}},
	{"constant", func(*rand.Rand) float64 { return 0.25 }},
	{"log-uniform 1µs..1day", func(r *rand.Rand) float64 {
		// Spans the full range SketchMaxBins is sized for; any collapse would
		// break the low quantiles.
		return math.Exp(math.Log(1e-6) + r.Float64()*math.Log(86400/1e-6))
	}},
}

func samples(seed uint64, n int, draw func(*rand.Rand) float64) []float64 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = draw(r)
	}
	return xs
}

// exactQuantile returns the value DDSketch targets for q: the element of
// 0-based rank ⌊q·(n-1)⌋ in sorted order (GetValueAtQuantile computes
// rank = q*(count-1) and KeyAtRank returns the bin whose cumulative count
// first exceeds it).
func exactQuantile(sorted []float64, q float64) float64 {
	rank := float64(q * float64(len(sorted)-1))
	return sorted[int(rank)]
}

func relErr(got, want float64) float64 {
	if want == 0 {
		return math.Abs(got)
	}
	return math.Abs(got-want) / math.Abs(want)
}

// accuracyTolerance is RelativeAccuracy plus a hair for float rounding of the
// logarithm at bin boundaries.
const accuracyTolerance = RelativeAccuracy * (1 + 1e-9)

func TestSketchAccuracy(t *testing.T) {
	quantiles := []float64{0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999}
	for i, d := range distributions {
		t.Run(d.name, func(t *testing.T) {
			xs := samples(uint64(i+1), sampleCount, d.draw)
			s := NewSketch()
			for _, x := range xs {
				s.Add(x)
			}
			sorted := slices.Clone(xs)
			slices.Sort(sorted)

			worst := 0.0
			for _, q := range quantiles {
				want := exactQuantile(sorted, q)
				got := s.Quantile(q)
				e := relErr(got, want)
				worst = max(worst, e)
				require.LessOrEqualf(t, e, accuracyTolerance,
					"q=%v: sketch %v, exact %v", q, got, want)
			}
			t.Logf("worst relative error over %d quantiles: %.4f%%", len(quantiles), 100*worst)

			sum := s.Summary()
			require.Equal(t, uint64(sampleCount), sum.Count)
			for _, c := range []struct {
				q   float64
				got float64
			}{{0.50, sum.P50}, {0.90, sum.P90}, {0.95, sum.P95}, {0.99, sum.P99}} {
				require.LessOrEqualf(t, relErr(c.got, exactQuantile(sorted, c.q)), accuracyTolerance, "summary q=%v", c.q)
			}
			require.Equal(t, sorted[len(sorted)-1], sum.Max)
		})
	}
}

func TestSketchConstantIsExact(t *testing.T) {
	// Clamping to [Min, Max] makes a constant stream exact, not just within 1%.
	s := NewSketch()
	for range 1000 {
		s.Add(0.123)
	}
	for _, q := range []float64{0, 0.5, 0.99, 1} {
		require.Equal(t, 0.123, s.Quantile(q), "q=%v", q)
	}
}

func TestSketchCollapseKeepsUpperQuantiles(t *testing.T) {
	// Values spanning 1e-15..1e5 (a ratio of 1e20, beyond the γ^2048 ≈ 6e17
	// that SketchMaxBins covers) force the lowest bins to collapse. The upper
	// quantiles must keep their accuracy.
	xs := samples(42, sampleCount, func(r *rand.Rand) float64 {
		return math.Exp(math.Log(1e-15) + r.Float64()*math.Log(1e20))
	})
	s := NewSketch()
	for _, x := range xs {
		s.Add(x)
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		require.LessOrEqualf(t, relErr(s.Quantile(q), exactQuantile(sorted, q)), accuracyTolerance, "q=%v", q)
	}
	require.Equal(t, uint64(sampleCount), s.Count())
	require.Equal(t, sorted[0], s.Min())
}

func TestSketchMergeEqualsSingle(t *testing.T) {
	xs := samples(7, sampleCount, distributions[3].draw) // bimodal
	xs = append(xs, -1, math.NaN())                      // rejected values must merge too

	single := NewSketch()
	for _, x := range xs {
		single.Add(x)
	}

	splits := []struct {
		name string
		in   func(i int) bool // true: value i goes to sketch a
	}{
		{"halves", func(i int) bool { return i < len(xs)/2 }},
		{"interleaved", func(i int) bool { return i%2 == 0 }},
		{"all in b", func(int) bool { return false }},
		{"all in a", func(int) bool { return true }},
	}
	for _, sp := range splits {
		t.Run(sp.name, func(t *testing.T) {
			var a, b Sketch // zero values must merge as well as NewSketch ones
			for i, x := range xs {
				if sp.in(i) {
					a.Add(x)
				} else {
					b.Add(x)
				}
			}
			a.Merge(&b)

			for q := 0.0; q <= 1.0; q += 0.005 {
				require.Equal(t, single.Quantile(q), a.Quantile(q), "q=%v", q)
			}
			require.Equal(t, single.Count(), a.Count())
			require.Equal(t, single.Rejected(), a.Rejected())
			require.Equal(t, uint64(2), a.Rejected())
			require.Equal(t, single.Min(), a.Min())
			require.Equal(t, single.Max(), a.Max())
			require.InEpsilon(t, single.Sum(), a.Sum(), 1e-14)
			require.InEpsilon(t, single.Mean(), a.Mean(), 1e-14)
		})
	}
}

func TestSketchMergeLeavesOtherUnchanged(t *testing.T) {
	a, b := NewSketch(), NewSketch()
	for i := range 100 {
		a.Add(float64(i))
		b.Add(float64(1000 + i))
	}
	before := b.Summary()
	a.Merge(b)
	require.Equal(t, before, b.Summary())
	require.Equal(t, uint64(200), a.Count())
	require.Equal(t, 1099.0, a.Max())
}

func TestSketchMergeEdgeCases(t *testing.T) {
	t.Run("nil", func(t *testing.T) {
		s := NewSketch()
		s.Add(1)
		s.Merge(nil)
		require.Equal(t, uint64(1), s.Count())
	})
	t.Run("empty into full", func(t *testing.T) {
		s := NewSketch()
		s.Add(2)
		before := s.Summary()
		s.Merge(NewSketch())
		require.Equal(t, before, s.Summary())
	})
	t.Run("full into empty", func(t *testing.T) {
		src := NewSketch()
		src.Add(3)
		src.Add(5)
		var dst Sketch
		dst.Merge(src)
		require.Equal(t, src.Summary(), dst.Summary())
		require.Equal(t, 3.0, dst.Min())
	})
	t.Run("rejected only", func(t *testing.T) {
		src := NewSketch()
		src.Add(-1)
		dst := NewSketch()
		dst.Merge(src)
		require.Equal(t, uint64(1), dst.Rejected())
		require.Equal(t, uint64(0), dst.Count())
	})
	t.Run("self doubles", func(t *testing.T) {
		s := NewSketch()
		for i := 1; i <= 10; i++ {
			s.Add(float64(i))
		}
		s.Add(-1)
		p50 := s.Quantile(0.5)
		s.Merge(s)
		require.Equal(t, uint64(20), s.Count())
		require.Equal(t, uint64(2), s.Rejected())
		require.Equal(t, 110.0, s.Sum())
		require.Equal(t, 1.0, s.Min())
		require.Equal(t, 10.0, s.Max())
		require.Equal(t, p50, s.Quantile(0.5))
	})
}

func TestSketchEmpty(t *testing.T) {
	for _, s := range []*Sketch{NewSketch(), new(Sketch)} {
		require.Equal(t, uint64(0), s.Count())
		require.Equal(t, uint64(0), s.Rejected())
		require.Zero(t, s.Sum())
		require.Zero(t, s.Mean())
		require.Zero(t, s.Min())
		require.Zero(t, s.Max())
		for _, q := range []float64{-1, 0, 0.5, 1, 2} {
			require.Zero(t, s.Quantile(q))
		}
		require.Equal(t, Summary{}, s.Summary())
	}
}

func TestSketchRejected(t *testing.T) {
	tests := []struct {
		name string
		add  func(s *Sketch)
	}{
		{"negative", func(s *Sketch) { s.Add(-0.5) }},
		{"negative tiny", func(s *Sketch) { s.Add(-math.SmallestNonzeroFloat64) }},
		{"NaN", func(s *Sketch) { s.Add(math.NaN()) }},
		{"+Inf", func(s *Sketch) { s.Add(math.Inf(1)) }},
		{"-Inf", func(s *Sketch) { s.Add(math.Inf(-1)) }},
		{"MaxFloat64", func(s *Sketch) { s.Add(math.MaxFloat64) }},
		{"negative duration", func(s *Sketch) { s.AddDuration(-time.Millisecond) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSketch()
			s.Add(1)
			s.Add(2)
			before := s.Summary()
			require.NotPanics(t, func() { tt.add(s) })
			require.Equal(t, uint64(1), s.Rejected())
			require.Equal(t, before, s.Summary(), "a rejected value must not change any statistic")
			require.Equal(t, 1.0, s.Min())
		})
	}
}

func TestSketchZeroValues(t *testing.T) {
	s := NewSketch()
	s.Add(math.Copysign(0, -1))
	s.Add(0)
	s.Add(1e-320) // below the smallest indexable value: recorded as 0 by DDSketch
	s.Add(1)
	require.Equal(t, uint64(4), s.Count())
	require.Zero(t, s.Rejected())
	require.False(t, math.Signbit(s.Min()), "-0 must be stored as +0")
	require.Zero(t, s.Quantile(0))
	require.Zero(t, s.Quantile(0.5))
	require.InEpsilon(t, 1.0, s.Quantile(1), RelativeAccuracy)
}

func TestSketchExactMoments(t *testing.T) {
	xs := samples(99, 10_000, distributions[1].draw) // lognormal
	s := NewSketch()
	exact := new(big.Float).SetPrec(2048)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		s.Add(x)
		exact.Add(exact, new(big.Float).SetFloat64(x))
		lo, hi = min(lo, x), max(hi, x)
	}
	want, _ := exact.Float64()
	require.Equal(t, lo, s.Min())
	require.Equal(t, hi, s.Max())
	// Naive summation of 10k values is off by ~1e-13 relative; the
	// compensated sum must be within a few ulps of the exact one.
	require.InEpsilon(t, want, s.Sum(), 1e-15)
	require.InEpsilon(t, want/float64(len(xs)), s.Mean(), 1e-15)
	require.Equal(t, uint64(len(xs)), s.Count())
}

func TestSketchSumIsCompensated(t *testing.T) {
	// Naive summation loses every +1 after 1e16 (the spacing of float64 there
	// is 2); the compensated sum keeps them.
	s := NewSketch()
	s.Add(1e16)
	for range 1000 {
		s.Add(1)
	}
	require.Equal(t, 1e16+1000, s.Sum())
}

func TestSketchAddDuration(t *testing.T) {
	s := NewSketch()
	s.AddDuration(1500 * time.Millisecond)
	s.AddDuration(500 * time.Microsecond)
	require.Equal(t, 1.5, s.Max())
	require.Equal(t, 0.0005, s.Min())
	require.Equal(t, 1.5005, s.Sum())
}

func TestSketchQuantileArgument(t *testing.T) {
	s := NewSketch()
	for _, x := range samples(5, 1000, distributions[0].draw) {
		s.Add(x)
	}
	require.Equal(t, s.Quantile(0), s.Quantile(-0.5), "q < 0 clamps to 0")
	require.Equal(t, s.Quantile(1), s.Quantile(1.5), "q > 1 clamps to 1")
	require.Equal(t, s.Quantile(1), s.Quantile(math.Inf(1)))
	require.True(t, math.IsNaN(s.Quantile(math.NaN())))
	require.GreaterOrEqual(t, s.Quantile(0), s.Min())
	require.LessOrEqual(t, s.Quantile(1), s.Max())
	require.InEpsilon(t, s.Max(), s.Quantile(1), RelativeAccuracy)
	require.InEpsilon(t, s.Min(), s.Quantile(0), RelativeAccuracy)
	// Monotone in q.
	prev := s.Quantile(0)
	for q := 0.01; q <= 1; q += 0.01 {
		cur := s.Quantile(q)
		require.GreaterOrEqual(t, cur, prev, "q=%v", q)
		prev = cur
	}
}

func TestSketchDeterministic(t *testing.T) {
	build := func() *Sketch {
		s := NewSketch()
		for _, x := range samples(11, 20_000, distributions[1].draw) {
			s.Add(x)
		}
		return s
	}
	a, b := build(), build()
	require.Equal(t, a.Summary(), b.Summary())
	for q := 0.0; q <= 1; q += 0.001 {
		require.Equal(t, math.Float64bits(a.Quantile(q)), math.Float64bits(b.Quantile(q)), "q=%v", q)
	}
	require.Equal(t, math.Float64bits(a.Sum()), math.Float64bits(b.Sum()))
}

func TestSummaryJSON(t *testing.T) {
	s := NewSketch()
	s.Add(2)
	b, err := json.Marshal(s.Summary())
	require.NoError(t, err)
	var m map[string]float64
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, map[string]float64{
		"count": 1, "mean": 2, "p50": 2, "p90": 2, "p95": 2, "p99": 2, "max": 2,
	}, m)

	// An empty summary must encode too (no NaN, which encoding/json rejects).
	_, err = json.Marshal(NewSketch().Summary())
	require.NoError(t, err)
}

func TestSketchAddDoesNotAllocate(t *testing.T) {
	xs := samples(3, 4096, distributions[0].draw)
	s := NewSketch()
	for _, x := range xs { // warm up: let the bin array reach its size
		s.Add(x)
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		s.Add(xs[i%len(xs)])
		i++
	})
	require.Zero(t, allocs)
}

func BenchmarkSketchAdd(b *testing.B) {
	xs := samples(1, 4096, distributions[1].draw) // lognormal latencies
	s := NewSketch()
	for _, x := range xs { // steady state: bins already allocated
		s.Add(x)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Add(xs[i&(len(xs)-1)])
		i++
	}
}

func BenchmarkSketchSummary(b *testing.B) {
	s := NewSketch()
	for _, x := range samples(1, sampleCount, distributions[1].draw) {
		s.Add(x)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Summary()
	}
}

// AddDurationAll leaves every sketch as AddDuration on each would, for
// values in and out of the indexable range, on fresh sketches, clones and
// sketches that already hold values.
func TestAddDurationAllIsAddDurationOnEach(t *testing.T) {
	vals := []time.Duration{0, 1, 3 * time.Millisecond, 2 * time.Second, -time.Second, 90 * time.Minute, time.Duration(math.MaxInt64)}
	var a1, a2, b1, b2 Sketch
	for _, s := range []*Sketch{&a1, &a2, &b1, &b2} {
		s.AddDuration(time.Second)
	}
	c1 := a1.clone()
	c2 := a1.clone()
	for i := range 2000 {
		d := vals[i%len(vals)] + time.Duration(i)*time.Microsecond
		AddDurationAll(d, &a1, &b1, c1)
		a2.AddDuration(d)
		b2.AddDuration(d)
		c2.AddDuration(d)
	}
	for _, p := range [][2]*Sketch{{&a1, &a2}, {&b1, &b2}, {c1, c2}} {
		if p[0].Summary() != p[1].Summary() || p[0].Rejected() != p[1].Rejected() || p[0].Sum() != p[1].Sum() {
			t.Fatalf("AddDurationAll %+v, AddDuration %+v", p[0].Summary(), p[1].Summary())
		}
	}
}
