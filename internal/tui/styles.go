package tui

import (
	"image/color"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// Colours are the 16 basic ANSI ones, so the console follows the
// terminal's palette and theme. Bubble Tea downsamples them to what the
// terminal supports (no colour at all under NO_COLOR or without a TTY);
// nothing depends on colour alone: health has a glyph (● ◐ ○), the
// selection a marker (▸), a breach of the SLO a full block (█).
var (
	colRed     = lipgloss.Color("1")
	colGreen   = lipgloss.Color("2")
	colYellow  = lipgloss.Color("3")
	colBlue    = lipgloss.Color("4")
	colMagenta = lipgloss.Color("5")
	colCyan    = lipgloss.Color("6")
	colGrey    = lipgloss.Color("8")
)

// paint is a lipgloss style reduced to the escape sequences around its
// text. The console's styles are colours and attributes only (no padding,
// borders or widths), for which that is all Render does; doing it once per
// style instead of per call makes a frame several times cheaper.
type paint struct {
	pre, post string
	style     lipgloss.Style // the style itself, for components that want one
}

func newPaint(st lipgloss.Style) paint {
	r := st.Render("x")
	i := strings.Index(r, "x")
	return paint{pre: r[:i], post: r[i+1:], style: st}
}

// Render wraps s in the style's sequences.
func (p paint) Render(s string) string {
	if s == "" || p.pre == "" {
		return s
	}
	return p.pre + s + p.post
}

// styles are the console's styles, built once.
type styles struct {
	bold, dim                 paint
	ok, warn, bad, info, note paint
	title, titleFocused       paint
	border, borderFocused     paint
	selected                  paint
	status, statusKey         paint
	paused, running, ended    paint
	key, keyDesc              paint
}

func newStyles() *styles {
	s := lipgloss.NewStyle
	fg := func(c color.Color) lipgloss.Style { return s().Foreground(c) }
	p := newPaint
	return &styles{
		bold:          p(s().Bold(true)),
		dim:           p(fg(colGrey)),
		ok:            p(fg(colGreen)),
		warn:          p(fg(colYellow)),
		bad:           p(fg(colRed).Bold(true)),
		info:          p(fg(colCyan)),
		note:          p(fg(colMagenta)),
		title:         p(s().Bold(true)),
		titleFocused:  p(fg(colCyan).Bold(true)),
		border:        p(fg(colGrey)),
		borderFocused: p(fg(colCyan)),
		selected:      p(s().Reverse(true)),
		status:        p(s().Bold(true)),
		statusKey:     p(fg(colBlue).Bold(true)),
		paused:        p(fg(colYellow).Bold(true)),
		running:       p(fg(colGreen).Bold(true)),
		ended:         p(fg(colMagenta).Bold(true)),
		key:           p(fg(colBlue).Bold(true)),
		keyDesc:       p(fg(colGrey)),
	}
}

// box draws lines in a rounded frame of outer size w×h with the title in
// its top edge; lines are truncated or padded to fit. It returns exactly h
// lines of exactly w cells, so boxes join side by side line by line.
func (st *styles) box(title string, lines []string, w, h int, focused bool) []string {
	if w < 4 || h < 2 {
		return blank(w, h)
	}
	bs, ts := st.border, st.title
	if focused {
		bs, ts = st.borderFocused, st.titleFocused
	}
	inner := w - 2
	title = fit(title, max(inner-3, 0))
	title = strings.TrimRight(title, " ")
	tw := ansi.StringWidth(title)
	fill := max(inner-tw-3, 0)
	out := make([]string, 0, h)
	out = append(out, bs.Render("╭─ ")+ts.Render(title)+bs.Render(" "+strings.Repeat("─", fill)+"╮"))
	bar := bs.Render("│")
	for i := range h - 2 {
		line := ""
		if i < len(lines) {
			line = lines[i]
		}
		out = append(out, bar+fit(line, inner)+bar)
	}
	out = append(out, bs.Render("╰"+strings.Repeat("─", inner)+"╯"))
	return out
}

// content is a box's content: its lines, and how many lines of it are out of
// view above and below them (a scrolled list), with hidden set when what is
// out of view needs attention (a pool down), so the marker says so.
type content struct {
	lines        []string
	above, below int
	// What needs attention out of view on each side, e.g. "1 down": shown
	// in red in that side's marker, so an operator scrolls the right way.
	alarmAbove, alarmBelow string
}

// boxPane is box with scroll markers: "↑ N more" in the top edge and
// "↓ N more" in the bottom edge when part of the content is out of view, so
// a list that scrolls never looks complete.
func (st *styles) boxPane(title string, p content, w, h int, focused bool) []string {
	out := st.box(title, p.lines, w, h, focused)
	if len(out) < 2 || w < 16 {
		return out
	}
	bs := st.border
	if focused {
		bs = st.borderFocused
	}
	marker := func(arrow string, n int, alarm string) string {
		txt := " " + arrow + " " + count(n) + " more"
		if alarm != "" {
			return st.dim.Render(txt+",") + " " + st.bad.Render(alarm) + " "
		}
		return st.dim.Render(txt + " ")
	}
	edge := func(left, right string, n int, arrow string) string {
		m := marker(arrow, n, p.alarmBelow)
		fill := w - 2 - 2 - ansi.StringWidth(m)
		if fill < 0 {
			return ""
		}
		return bs.Render(left+"──") + m + bs.Render(strings.Repeat("─", fill)+right)
	}
	if p.above > 0 {
		// The title stays; the marker goes at the right of the top edge.
		m := marker("↑", p.above, p.alarmAbove)
		mw := ansi.StringWidth(m)
		top := out[0]
		if tw := ansi.StringWidth(top); tw > mw+6 {
			out[0] = ansi.Truncate(top, tw-mw-2, "") + m + bs.Render("─╮")
			if ansi.StringWidth(out[0]) != w {
				out[0] = top
			}
		}
	}
	if p.below > 0 {
		if e := edge("╰", "╯", p.below, "↓"); e != "" {
			out[len(out)-1] = e
		}
	}
	return out
}

// blank is h lines of w spaces.
func blank(w, h int) []string {
	out := make([]string, max(h, 0))
	sp := strings.Repeat(" ", max(w, 0))
	for i := range out {
		out[i] = sp
	}
	return out
}

// beside joins columns of equal height line by line.
func beside(cols ...[]string) []string {
	if len(cols) == 0 {
		return nil
	}
	h := 0
	for _, c := range cols {
		h = max(h, len(c))
	}
	out := make([]string, h)
	var b strings.Builder
	for i := range h {
		b.Reset()
		for _, c := range cols {
			if i < len(c) {
				b.WriteString(c[i])
			}
		}
		out[i] = b.String()
	}
	return out
}
