package stats

import "time"

// TimeGauge is a quantity that changes in steps over virtual time — a queue
// depth, the number of busy slots, a utilisation fraction — and reports its
// time-weighted integral and mean. Times are virtual: time.Duration since the
// start of the run, as the simulator's clock reports them.
//
// The gauge holds each value from the moment it is set until the next update
// (a right-continuous step function). It starts at the time of its first
// update, with value 0 before that update is applied; time before the first
// update does not count towards the mean.
//
// Time never runs backwards for a gauge: a now earlier than the last update is
// treated as the last update time. The update still takes effect (the value
// changes, Max is updated) but it adds no area, and the gauge's clock does not
// move back, so an out-of-order call can never subtract area or corrupt the
// integral.
//
// The integral is accumulated in value·nanoseconds and converted to
// value·seconds only when read, so integer-valued gauges (queue depths) over
// integer-nanosecond steps accumulate exactly as long as the area stays below
// 2^53 ns (about 104 days at value 1).
//
// The zero value is a gauge that has never been updated. It is not safe for
// concurrent use.
type TimeGauge struct {
	started bool
	start   time.Duration // time of the first update
	last    time.Duration // time of the latest update (never decreases)
	value   float64       // current value, held since last
	max     float64       // largest value held; valid only when started
	area    float64       // ∫ value dt from start to last, in value·nanoseconds
}

// clamp returns now, or the last update time if now is earlier.
func (g *TimeGauge) clamp(now time.Duration) time.Duration {
	return max(now, g.last)
}

// Set changes the value to v at virtual time now.
func (g *TimeGauge) Set(now time.Duration, v float64) {
	if !g.started {
		g.started = true
		g.start, g.last = now, now
		g.value, g.max = v, v
		return
	}
	now = g.clamp(now)
	g.area += g.value * float64(now-g.last)
	g.last = now
	g.value = v
	g.max = max(g.max, v)
}

// Add changes the value by delta at virtual time now. On a gauge that has
// never been updated it starts from 0, so Add(now, 1) sets the value to 1.
func (g *TimeGauge) Add(now time.Duration, delta float64) {
	g.Set(now, g.value+delta)
}

// Value returns the current value; 0 before the first update.
func (g *TimeGauge) Value() float64 { return g.value }

// Max returns the largest value the gauge has held; 0 before the first update.
func (g *TimeGauge) Max() float64 { return g.max }

// Integral returns ∫ value dt in value·seconds from the first update up to
// now, counting the current value as held until now. It does not modify the
// gauge. A now before the last update is treated as the last update time; 0
// before the first update.
func (g *TimeGauge) Integral(now time.Duration) float64 {
	if !g.started {
		return 0
	}
	now = g.clamp(now)
	area := g.area + g.value*float64(now-g.last)
	return area / float64(time.Second)
}

// Mean returns the time-weighted mean value over [first update, now], i.e.
// Integral(now) divided by the elapsed seconds. It returns 0 when no virtual
// time has elapsed since the first update (or there was none), rather than
// dividing by zero.
func (g *TimeGauge) Mean(now time.Duration) float64 {
	if !g.started {
		return 0
	}
	now = g.clamp(now)
	elapsed := now - g.start
	if elapsed <= 0 {
		return 0
	}
	area := g.area + g.value*float64(now-g.last)
	return area / float64(elapsed)
}
