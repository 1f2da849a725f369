package tui

import (
	"math"
	"testing"
	"time"
)

func TestSparkCells(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name   string
		vals   []float64
		slo    float64
		w      int
		want   string
		levels []int
	}{
		{"scaled to the SLO, breach is a full block", []float64{0.25, 1, 1.9, 2, 3}, 2, 5, "▁▄▇▇█", []int{0, 0, 1, 1, 2}},
		{"left-padded when the history is short", []float64{1, 2}, 2, 5, "   ▄▇", []int{0, 0, 0, 0, 1}},
		{"only the newest fit", []float64{3, 3, 0.1, 0.1}, 2, 2, "▁▁", []int{0, 0}},
		{"no value is a space", []float64{1, nan, 1}, 2, 3, "▄ ▄", []int{0, 0, 0}},
		{"zero is the floor", []float64{0, 2}, 2, 2, "▁▇", []int{0, 1}},
		{"without an SLO, scaled to a round ceiling above the maximum, neutral", []float64{1, 2, 4}, 0, 3, "▂▃▆", []int{3, 3, 3}},
		{"without an SLO, a steady value sits mid-height", []float64{7, 7}, 0, 2, "▅▅", []int{3, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cells := sparkCells(tt.vals, tt.slo, tt.w)
			if got := plainSpark(cells); got != tt.want {
				t.Errorf("sparkCells(%v, slo %g, w %d) = %q, want %q", tt.vals, tt.slo, tt.w, got, tt.want)
			}
			for i, c := range cells {
				if c.level != tt.levels[i] {
					t.Errorf("cell %d level = %d, want %d", i, c.level, tt.levels[i])
				}
			}
		})
	}
}

func TestSeries(t *testing.T) {
	s := newSeries()
	if got := s.tail(5); len(got) != 0 {
		t.Fatalf("empty series tail = %v, want none", got)
	}
	s.add(0, 1)
	s.add(3*time.Second, 4) // same bucket: the peak stays
	s.add(5*time.Second, 2)
	s.add(30*time.Second, 7) // two buckets later: the gap repeats 4
	s.add(20*time.Second, 9) // in the past: ignored
	want := []float64{4, 4, 4, 7}
	got := s.tail(10)
	if len(got) != len(want) {
		t.Fatalf("tail = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("tail = %v, want %v", got, want)
		}
	}
	// Past the ring's capacity only the newest sparkCap are kept, in order.
	for i := range 2 * sparkCap {
		s.add(time.Duration(40+10*i)*time.Second, float64(i))
	}
	got = s.tail(sparkCap + 5)
	if len(got) != sparkCap || got[0] != sparkCap || got[sparkCap-1] != 2*sparkCap-1 {
		t.Fatalf("after wrapping, tail has %d values from %v to %v; want %d from %d to %d",
			len(got), got[0], got[len(got)-1], sparkCap, sparkCap, 2*sparkCap-1)
	}
	// A gap longer than the ring fills it with the last value.
	s.add(time.Hour*10, 1)
	got = s.tail(3)
	if got[0] != 2*sparkCap-1 || got[2] != 1 {
		t.Fatalf("after a long gap, tail(3) = %v, want [%d %d 1]", got, 2*sparkCap-1, 2*sparkCap-1)
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{clock(0), "00:00"},
		{clock(754 * time.Second), "12:34"},
		{clock(3723 * time.Second), "1:02:03"},
		{clockTenths(609100 * time.Millisecond), "10:09.1"},
		{secs(47 * time.Millisecond), "47ms"},
		{secs(510 * time.Millisecond), "510ms"},
		{secs(2800 * time.Millisecond), "2.80s"},
		{secs(13300 * time.Millisecond), "13.3s"},
		{secs(125 * time.Second), "2m05s"},
		{secs(time.Hour), "1h00m"},
		{secs(0), "0s"},
		{since(-1), "—"},
		{count(uint64(1234567)), "1,234,567"},
		{count(-1234), "-1,234"},
		{count(999), "999"},
		{speedText(60), "×60"},
		{speedText(0.25), "×0.25"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
