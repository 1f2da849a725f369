package stats

import (
	"math"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// RelativeAccuracy is the relative accuracy of every [Sketch]: a quantile
// estimate q̂ of a true quantile x satisfies |q̂-x| ≤ RelativeAccuracy·x, as long
// as the sketch has not collapsed (see [SketchMaxBins]). 1% is well below the
// differences that matter when comparing serving configurations, and it keeps
// a sketch of second-scale latencies to a few hundred bins.
const RelativeAccuracy = 0.01

// SketchMaxBins caps the number of bins, and so the memory, of a [Sketch].
//
// With relative accuracy α = 0.01 the logarithmic mapping uses bins whose
// bounds grow by γ = (1+α)/(1-α) ≈ 1.020202, so covering values from a to b
// takes ln(b/a)/ln(γ) bins. Latencies from 1µs to 1 day span a ratio of
// 8.64e10, which takes ln(8.64e10)/ln(γ) ≈ 1259.07, i.e. 1260 bins. The cap of
// 2048 leaves headroom: it covers a ratio of γ^2048 ≈ 6.2e17 (1ns to about 19
// years) at full accuracy, and bounds one sketch at 2048 float64 counts
// (16 KiB). Bins are allocated only as the observed range grows, so a sketch of
// values within a factor of 10 of each other holds under 200 bins (115 spanned
// plus the store's growth slack).
//
// If values ever span a wider range, the store collapses its lowest bins into
// one: the lowest quantiles lose their accuracy guarantee while the upper ones
// (p50 and above for latencies, the ones that are reported) keep it.
const SketchMaxBins = 2048

// Sketch is a streaming quantile sketch of non-negative values, typically
// latencies in seconds. Quantiles come from a DDSketch with [RelativeAccuracy];
// count, sum, mean, min and max are tracked exactly alongside it (sum with
// compensated summation).
//
// Values that cannot be tracked — negative, NaN, +Inf or beyond the sketch's
// maximum indexable value (about 1.7e308) — are not added: they are counted in
// [Sketch.Rejected] so that a model bug producing negative latencies shows up in
// the results instead of disappearing. They do not contribute to Count, Sum,
// Min, Max or any quantile. Positive values below about 2.2e-308 are recorded
// as 0.
//
// The zero value is an empty sketch ready to use. A Sketch is deterministic:
// the same values added in the same order give bit-identical results. It is not
// safe for concurrent use.
type Sketch struct {
	dd       *ddsketch.DDSketch                // nil until the first value or merge
	pos      *store.CollapsingLowestDenseStore // dd's positive values; nil in a clone
	count    uint64                            // accepted values
	rejected uint64                            // values refused by Add, see the type comment
	sum      float64                           // running sum of accepted values
	sumComp  float64                           // Neumaier compensation term for sum
	min, max float64                           // exact extremes; valid only when count > 0
}

// NewSketch returns an empty sketch. It is equivalent to new(Sketch).
func NewSketch() *Sketch {
	return &Sketch{}
}

// init allocates the underlying DDSketch. Deferred to first use so that the
// zero Sketch is usable and sketches that never see a value cost nothing.
func (s *Sketch) init() {
	// LogCollapsingLowestDenseDDSketch, built here to keep its positive
	// store at hand (AddDurationAll).
	m, err := mapping.NewLogarithmicMapping(RelativeAccuracy)
	if err != nil {
		// Only an invalid accuracy constant can fail, which is a programming error.
		panic("stats: creating DDSketch: " + err.Error())
	}
	s.pos = store.NewCollapsingLowestDenseStore(SketchMaxBins)
	s.dd = ddsketch.NewDDSketch(m, s.pos, store.NewCollapsingLowestDenseStore(SketchMaxBins))
}

// Add records one value. See [Sketch] for the values that are rejected
// instead.
func (s *Sketch) Add(v float64) {
	// !(v >= 0) is true for negatives and NaN alike.
	if !(v >= 0) {
		s.rejected++
		return
	}
	if v == 0 {
		v = 0 // turn -0 into +0 so Min never reports -0
	}
	if s.dd == nil {
		s.init()
	}
	// The only error left is ErrUntrackableTooHigh (+Inf and values near
	// MaxFloat64); DDSketch leaves itself unchanged in that case.
	if err := s.dd.Add(v); err != nil {
		s.rejected++
		return
	}
	s.counted(v)
}

// index is the bucket index every Sketch's DDSketch gives a positive value
// (they share RelativeAccuracy, so their mappings agree).
var index = func() mapping.IndexMapping {
	m, err := mapping.NewLogarithmicMapping(RelativeAccuracy)
	if err != nil {
		panic("stats: creating the index mapping: " + err.Error())
	}
	return m
}()

// AddDurationAll records d in seconds in every sketch of ss, exactly as
// AddDuration on each would, computing the value's bucket once: a request's
// figure goes to its class's and its tenant's sketches (and its windows'),
// and the bucket's logarithm is the dearest part of an add.
func AddDurationAll(d time.Duration, ss ...*Sketch) {
	v := d.Seconds()
	if !(v > index.MinIndexableValue()) || v > index.MaxIndexableValue() {
		for _, s := range ss {
			s.Add(v) // zero, negative or out of range: each sketch's own rules
		}
		return
	}
	i := index.Index(v)
	for _, s := range ss {
		if s.dd == nil {
			s.init()
		}
		if s.pos == nil { // a clone: its store is only reachable through dd
			s.Add(v)
			continue
		}
		s.pos.Add(i) // what DDSketch.Add does for a positive value
		s.counted(v)
	}
}

// AddDuration records d in seconds. Negative durations are rejected like
// negative values.
func (s *Sketch) AddDuration(d time.Duration) {
	s.Add(d.Seconds())
}

// counted records accepted value v in the exact figures: extremes, count
// and sum.
func (s *Sketch) counted(v float64) {
	if s.count == 0 {
		s.min, s.max = v, v
	} else {
		s.min = min(s.min, v)
		s.max = max(s.max, v)
	}
	s.count++
	s.addSum(v)
}

// addSum adds v to the running sum with Neumaier's compensated summation, so
// that Sum and Mean stay accurate to the last bits over millions of values of
// mixed magnitude.
func (s *Sketch) addSum(v float64) {
	t := s.sum + v
	if math.Abs(s.sum) >= math.Abs(v) {
		s.sumComp += (s.sum - t) + v
	} else {
		s.sumComp += (v - t) + s.sum
	}
	s.sum = t
}

// Count returns the number of accepted values.
func (s *Sketch) Count() uint64 { return s.count }

// Rejected returns the number of values that Add refused: negative, NaN, +Inf
// or too large to index.
func (s *Sketch) Rejected() uint64 { return s.rejected }

// Sum returns the exact (compensated) sum of the accepted values, in their
// unit; 0 when empty.
func (s *Sketch) Sum() float64 { return s.sum + s.sumComp }

// Mean returns Sum/Count, or 0 when the sketch is empty.
func (s *Sketch) Mean() float64 {
	if s.count == 0 {
		return 0
	}
	return s.Sum() / float64(s.count)
}

// Min returns the smallest accepted value exactly, or 0 when empty.
func (s *Sketch) Min() float64 {
	if s.count == 0 {
		return 0
	}
	return s.min
}

// Max returns the largest accepted value exactly, or 0 when empty.
func (s *Sketch) Max() float64 {
	if s.count == 0 {
		return 0
	}
	return s.max
}

// Quantile returns an estimate of the q-quantile, within [RelativeAccuracy] of
// the value of rank ⌊q·(Count-1)⌋ (0-based) among the sorted values — DDSketch's
// rank definition. The estimate is clamped to [Min, Max], so Quantile(0) and
// Quantile(1) never lie outside the observed range.
//
// It returns 0 when the sketch is empty, so that summaries of idle components
// stay finite and JSON-encodable. q below 0 is treated as 0 and q above 1 as 1;
// a NaN q yields NaN. Cost: one scan over at most [SketchMaxBins] bins.
func (s *Sketch) Quantile(q float64) float64 {
	if s.count == 0 {
		return 0
	}
	if math.IsNaN(q) {
		return math.NaN()
	}
	q = min(max(q, 0), 1)
	v, err := s.dd.GetValueAtQuantile(q)
	if err != nil {
		// Unreachable: q is in [0,1] and the sketch is not empty.
		panic("stats: DDSketch quantile: " + err.Error())
	}
	return min(max(v, s.min), s.max)
}

// Merge adds every value recorded by other into s, as if they had been added
// to s directly: the resulting quantiles are exactly those of one sketch fed
// both streams (as long as neither collapsed), and Count, Rejected, Min and Max
// combine exactly. Sum may differ from the single-stream sum in the last bits
// because addition is reordered. other is not modified; merging nil is a no-op
// and merging s into itself doubles every count.
func (s *Sketch) Merge(other *Sketch) {
	if other == nil {
		return
	}
	if other == s {
		other = s.clone()
	}
	s.rejected += other.rejected
	if other.count == 0 {
		return
	}
	if s.dd == nil {
		s.init()
	}
	if err := s.dd.MergeWith(other.dd); err != nil {
		// Unreachable: every Sketch uses the same index mapping.
		panic("stats: merging DDSketches: " + err.Error())
	}
	if s.count == 0 {
		s.min, s.max = other.min, other.max
	} else {
		s.min = min(s.min, other.min)
		s.max = max(s.max, other.max)
	}
	s.count += other.count
	s.addSum(other.sum)
	s.sumComp += other.sumComp
}

// clone returns a deep copy of s.
func (s *Sketch) clone() *Sketch {
	c := *s
	if s.dd != nil {
		c.dd = s.dd.Copy()
	}
	c.pos = nil // the copy's store is inside c.dd: AddDurationAll adds to it by Add
	return &c
}

// Summary is the digest of a [Sketch] written into results. Values are in the
// unit that was added (seconds for [Sketch.AddDuration]); every field is 0 for
// an empty sketch. P50…P99 are estimates within [RelativeAccuracy]; Count,
// Mean and Max are exact.
type Summary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Summary returns the digest of s.
func (s *Sketch) Summary() Summary {
	return Summary{
		Count: s.count,
		Mean:  s.Mean(),
		P50:   s.Quantile(0.50),
		P90:   s.Quantile(0.90),
		P95:   s.Quantile(0.95),
		P99:   s.Quantile(0.99),
		Max:   s.Max(),
	}
}
