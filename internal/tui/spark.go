package tui

import (
	"math"
	"strings"
	"time"
)

// The sparklines are drawn here, with block characters, rather than with
// ntcharts: its v2 (for Bubble Tea v2 and Lip Gloss v2) is not served by
// the module proxy this project builds from, and v0.4 pulls in Bubble Tea
// and Lip Gloss v1. A sparkline is twenty lines of code; scaling to the
// SLO, which a generic chart would not do, is most of it.

// sparkBucket is the simulated time one sparkline cell covers, and
// sparkCap the number of cells kept: the last 30 simulated minutes.
const (
	sparkBucket = 10 * time.Second
	sparkCap    = 180
)

// series is a ring of values, one per sparkBucket of simulated time: the
// largest sample that fell in the bucket (a p99 is about peaks). Buckets
// no snapshot fell in (the console skips simulated time at high speed)
// repeat the value before them: the samples are already windowed p99s,
// so the last one is the best estimate of the gap.
type series struct {
	vals [sparkCap]float64
	last int64 // bucket index of the newest value; -1 when empty
	n    int   // values held, ≤ sparkCap
}

func newSeries() *series { return &series{last: -1} }

// add records v (NaN: no value, e.g. no request completed) at simulated
// time t. Times before the newest bucket (or before 0) are ignored.
func (s *series) add(t time.Duration, v float64) {
	if t < 0 {
		return
	}
	b := int64(t / sparkBucket)
	switch {
	case s.last < 0:
		s.last, s.n = b, 1
		s.vals[b%sparkCap] = v
	case b == s.last:
		old := s.vals[b%sparkCap]
		if math.IsNaN(old) || v > old {
			s.vals[b%sparkCap] = v
		}
	case b > s.last:
		prev := s.vals[s.last%sparkCap]
		gap := min(b-s.last-1, sparkCap)
		for i := int64(1); i <= gap; i++ {
			s.vals[(b-i)%sparkCap] = prev
		}
		s.vals[b%sparkCap] = v
		s.n = int(min(int64(s.n)+b-s.last, sparkCap))
		s.last = b
	}
}

// tail returns the newest k values, oldest first; fewer when fewer are
// held.
func (s *series) tail(k int) []float64 {
	k = min(k, s.n)
	out := make([]float64, k)
	for i := range k {
		out[i] = s.vals[(s.last-int64(k-1-i))%sparkCap]
	}
	return out
}

// sparkLevels are the eight block heights, lowest first.
var sparkLevels = []rune("▁▂▃▄▅▆▇█")

// sparkCell is one cell of a sparkline: its glyph and how it compares with
// the SLO.
type sparkCell struct {
	r     rune
	level int // 0: within 80 % of the SLO, 1: within the SLO, 2: over it, 3: no SLO
}

func neutral(breach bool) int {
	if breach {
		return 0
	}
	return 3
}

// niceCeil is the smallest of 1, 2 and 5 × 10ⁿ at or above v (v > 0).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, k := range []float64{1, 2, 5, 10} {
		if k*p >= v {
			return k * p
		}
	}
	return 10 * p
}

// sparkCells scales values to the SLO: 0..slo fills ▁ to ▇, and a value
// over the SLO is a full block █, so a breach shows by its shape even
// without colour. Without an SLO (slo ≤ 0) the values scale to their own
// maximum. NaN (no value) is a space. The result is left-padded with
// spaces to w cells.
func sparkCells(vals []float64, slo float64, w int) []sparkCell {
	out := make([]sparkCell, 0, w)
	for range w - len(vals) {
		out = append(out, sparkCell{r: ' '})
	}
	if len(vals) > w {
		vals = vals[len(vals)-w:]
	}
	scale, breach := slo, true
	if scale <= 0 {
		// Without an objective there is no breach to show: the values
		// scale to a round ceiling above their maximum (1, 2 or 5 × 10ⁿ),
		// so a steady value sits mid-height rather than at the top, and
		// the cells are neutral (level 3), never a warning.
		breach = false
		for _, v := range vals {
			if v > scale {
				scale = v
			}
		}
		scale = niceCeil(scale)
	}
	for _, v := range vals {
		switch {
		case math.IsNaN(v):
			out = append(out, sparkCell{r: ' '})
		case breach && v > scale:
			out = append(out, sparkCell{r: sparkLevels[7], level: 2})
		case scale <= 0 || v <= 0:
			out = append(out, sparkCell{r: sparkLevels[0], level: neutral(breach)})
		default:
			i := int(math.Ceil(v/scale*7)) - 1
			i = max(0, min(i, 6))
			lvl := 0
			switch {
			case !breach:
				lvl = 3
			case v > 0.8*scale:
				lvl = 1
			}
			out = append(out, sparkCell{r: sparkLevels[i], level: lvl})
		}
	}
	return out
}

// sparkline renders cells with st's styles, one style call per run of
// cells at the same level.
func (st *styles) sparkline(cells []sparkCell) string {
	var b, run strings.Builder
	lvl := -1
	flush := func() {
		if run.Len() == 0 {
			return
		}
		switch lvl {
		case 1:
			b.WriteString(st.warn.Render(run.String()))
		case 2:
			b.WriteString(st.bad.Render(run.String()))
		case 3:
			b.WriteString(st.dim.Render(run.String()))
		default:
			b.WriteString(st.ok.Render(run.String()))
		}
		run.Reset()
	}
	for _, c := range cells {
		if c.level != lvl {
			flush()
			lvl = c.level
		}
		run.WriteRune(c.r)
	}
	flush()
	return b.String()
}

// plainSpark is the sparkline without styles, for tests and logs.
func plainSpark(cells []sparkCell) string {
	var b strings.Builder
	for _, c := range cells {
		b.WriteRune(c.r)
	}
	return b.String()
}
