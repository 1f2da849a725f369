package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// clock prints a simulated time as a clock from the start of the run:
// 12:34, or 1:02:03 past the hour.
func clock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	h, m, sec := s/3600, (s/60)%60, s%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, sec)
	}
	return fmt.Sprintf("%02d:%02d", m, sec)
}

// clockTenths is clock with tenths of a second, for the event log.
func clockTenths(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%s.%d", clock(d), int64(d%time.Second/(100*time.Millisecond)))
}

// secs prints a latency compactly: 47ms, 0.51s, 13.3s, 2m05s.
func secs(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d < 100*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		s := int64(d / time.Second)
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	default:
		m := int64(d / time.Minute)
		return fmt.Sprintf("%dh%02dm", m/60, m%60)
	}
}

// span prints a span of time as an operator says it: 1m, 5m, 1m30s, 45s.
func span(d time.Duration) string {
	if d >= time.Minute && d%time.Second == 0 {
		m, sec := int64(d/time.Minute), int64(d%time.Minute/time.Second)
		if sec == 0 {
			return strconv.FormatInt(m, 10) + "m"
		}
		return fmt.Sprintf("%dm%02ds", m, sec)
	}
	return secs(d)
}

// since prints a fault's time-to-something (-1: not yet) as a latency or
// a dash.
func since(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return secs(d)
}

// pct prints a fraction as a percentage with one decimal.
// Short of 100 % never prints as 100.0 %: 99.96 % is 99.9 %, so that a
// miss never reads as a perfect score.
func pct(f float64) string {
	if f < 1 && f > 0.999 {
		return "99.9%"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
}

// count prints a count with thousands separators: 12,345.
func count[T ~int | ~uint64](n T) string {
	s := strconv.FormatUint(uint64(n), 10)
	if n < 0 {
		s = strconv.FormatInt(int64(n), 10)
	}
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	lead := len(s) % 3
	if lead == 0 {
		lead = 3
	}
	b.WriteString(s[:lead])
	for i := lead; i < len(s); i += 3 {
		b.WriteByte(',')
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// speedText prints a speed: ×60, ×0.5.
func speedText(s float64) string {
	return "×" + strconv.FormatFloat(s, 'g', 4, 64)
}

// fit truncates a styled line to w cells (with an ellipsis) and pads it
// with spaces to exactly w.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	n := ansi.StringWidth(s)
	if n > w {
		s = ansi.Truncate(s, w, "…")
		n = ansi.StringWidth(s)
	}
	if n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// padRight pads a plain string to w cells (no truncation).
func padRight(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// padLeft right-aligns a plain string in w cells.
func padLeft(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return strings.Repeat(" ", w-n) + s
	}
	return s
}
