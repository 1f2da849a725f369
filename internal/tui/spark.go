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
	level int // 0: within 80 % of the SLO (or no SLO), 1: within the SLO, 2: over it
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
		breach = false
		for _, v := range vals {
			if v > scale {
				scale = v
			}
		}
	}
	for _, v := range vals {
		switch {
		case math.IsNaN(v):
			out = append(out, sparkCell{r: ' '})
		case breach && v > scale:
			out = append(out, sparkCell{r: sparkLevels[7], level: 2})
		case scale <= 0 || v <= 0:
			out = append(out, sparkCell{r: sparkLevels[0]})
		default:
			i := int(math.Ceil(v/scale*7)) - 1
			i = max(0, min(i, 6))
			lvl := 0
			if breach && v > 0.8*scale {
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
