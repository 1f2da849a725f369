package tui

import (
	"slices"
	"strconv"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// Layout thresholds. Below minWidth×minHeight the console asks for a
// bigger terminal; from wideWidth×wideHeight it lays out three columns.
const (
	minWidth, minHeight   = 60, 16
	wideWidth, wideHeight = 120, 30
)

// Render draws the whole screen as a string of exactly height lines of
// width cells: the status bar, the screen shown and the help bar.
func (m *Model) Render() string {
	w, h := m.width, m.height
	if w < minWidth || h < minHeight {
		return fit("fleetdrill tui needs at least 60×16; this terminal is "+itoa(w)+"×"+itoa(h), max(w, 1))
	}
	lines := make([]string, 0, h)
	lines = append(lines, m.statusBar(w))
	bodyH := h - 2
	switch {
	case m.showHelp:
		lines = append(lines, m.helpOverlay(w, bodyH)...)
	case m.screen == screenSummary:
		lines = append(lines, m.summary(w, bodyH)...)
	case w >= wideWidth && h >= wideHeight:
		lines = append(lines, m.wide(w, bodyH)...)
	default:
		lines = append(lines, m.compact(w, bodyH)...)
	}
	lines = append(lines, m.footer(w))
	return strings.Join(lines, "\n")
}

// compact is the layout for 80×24 and up to wideWidth: fleet beside
// classes, routes beside events, the why pane under them.
func (m *Model) compact(w, h int) []string {
	whyH := 4
	if h >= 26 {
		whyH = 6
	}
	rest := h - whyH
	topH := rest - rest/2
	midH := rest / 2
	lw := w / 2
	rw := w - lw
	out := make([]string, 0, h)
	out = append(out, beside(
		m.st.box(m.fleetTitle(), m.fleetLines(lw-2, topH-2), lw, topH, m.focus == paneFleet),
		m.st.box("Classes · p99 vs SLO", m.classLines(rw-2, topH-2), rw, topH, false),
	)...)
	out = append(out, beside(
		m.st.box(m.routesTitle(), m.routeLines(lw-2, midH-2), lw, midH, m.focus == paneRoutes),
		m.st.box("Events", m.eventLines(rw-2, midH-2), rw, midH, false),
	)...)
	out = append(out, m.st.box(m.whyTitle(), m.whyLines(w-2, whyH-2), w, whyH, false)...)
	return out
}

// wide is the layout from wideWidth×wideHeight: fleet over routes, classes
// over the why pane, and the event log down the right.
func (m *Model) wide(w, h int) []string {
	c1 := w * 34 / 100
	c2 := w * 32 / 100
	c3 := w - c1 - c2
	// Each pane is as tall as it needs, within bounds; the faults and the
	// why pane take the rest.
	s := &m.frame.Snap
	fleetH := max(6, min(2+1+len(s.Regions)+len(m.pools), h*45/100))
	routesH := max(5, min(2+1+len(s.Models)+len(m.routes), (h-fleetH)*60/100))
	faultsH := h - fleetH - routesH
	classH := max(6, min(2+3*len(s.Classes), h*50/100))
	whyH := h - classH
	left := slices.Concat(
		m.st.box(m.fleetTitle(), m.fleetLines(c1-2, fleetH-2), c1, fleetH, m.focus == paneFleet),
		m.st.box(m.routesTitle(), m.routeLines(c1-2, routesH-2), c1, routesH, m.focus == paneRoutes),
		m.st.box("Faults", m.faultLines(c1-2, faultsH-2), c1, faultsH, false))
	mid := slices.Concat(
		m.st.box("Classes · p99 vs SLO", m.classLines(c2-2, classH-2), c2, classH, false),
		m.st.box(m.whyTitle(), m.whyLines(c2-2, whyH-2), c2, whyH, false))
	right := m.st.box("Events", m.eventLines(c3-2, h-2), c3, h, false)
	return beside(left, mid, right)
}

func (m *Model) fleetTitle() string {
	return "Fleet · router's view"
}

func (m *Model) routesTitle() string {
	return "Queues and routes"
}

func (m *Model) whyTitle() string {
	if m.focus == paneRoutes {
		if m.selModel != "" {
			return "Why · route " + m.selTenant + " → " + m.selModel
		}
		return "Why"
	}
	if m.selPool != "" {
		return "Why · pool " + m.selPool
	}
	return "Why"
}

// statusBar is the top line: scenario, seed, state, speed, simulated
// clock and progress, and the run's totals.
func (m *Model) statusBar(w int) string {
	st := m.st
	s := &m.frame.Snap
	sep := st.dim.Render(" │ ")
	var state string
	switch {
	case m.final != nil && m.final.Ended:
		state = st.ended.Render("■ ended")
	case m.final != nil || m.finishing:
		state = st.ended.Render("■ stopped")
	case !m.have:
		state = st.dim.Render("… starting")
	case m.frame.Paused:
		state = st.paused.Render("⏸ paused")
	case m.frame.Live:
		state = st.running.Render("● live")
	default:
		state = st.running.Render("▶ running")
	}
	// Most important first: what runs, where it is, whether it moves.
	parts := []string{
		st.status.Render("fleetdrill") + " " + st.info.Render(s.Scenario),
		"sim " + st.bold.Render(clock(s.Now)) + st.dim.Render(" / "+clock(s.End)),
		state + " " + speedText(m.frame.Speed),
	}
	if m.frame.Behind {
		parts[2] += st.warn.Render(" (behind)")
	}
	if s.End > 0 && w >= 100 {
		const bw = 12
		n := int(float64(bw) * float64(s.Now) / float64(s.End))
		n = max(0, min(n, bw))
		parts[1] += " " + st.info.Render(strings.Repeat("█", n)) + st.dim.Render(strings.Repeat("░", bw-n))
	}
	parts = append(parts, "seed "+utoa(s.Seed))
	if s.Requests.Arrived > 0 {
		parts = append(parts, count(s.Requests.Arrived)+" req")
	}
	if len(s.Faults) > 0 {
		active := 0
		for _, f := range s.Faults {
			if f.Active {
				active++
			}
		}
		if active > 0 {
			parts = append(parts, st.bad.Render(itoa(active)+" fault"+plural(active)+" active"))
		}
	}
	// Drop trailing parts that do not fit, rather than cut one in half.
	line := " " + strings.Join(parts, sep)
	for len(parts) > 2 && ansi.StringWidth(line) > w {
		parts = parts[:len(parts)-1]
		line = " " + strings.Join(parts, sep)
	}
	return fit(line, w)
}

// footer is the last line: the command line while it is open, the quit
// prompt while it asks, else the latest notice, then the key help, which
// always ends with ? and q and shows as many other keys as fit.
func (m *Model) footer(w int) string {
	switch {
	case m.paletteOpen:
		return m.paletteLine(w)
	case m.confirmQuit:
		return m.quitPrompt(w)
	}
	var bar string
	if m.screen == screenSummary && !m.showHelp {
		bar = m.st.key.Render("q") + m.st.keyDesc.Render(" quit • ") +
			m.st.key.Render("esc") + m.st.keyDesc.Render(" back to the console • ") +
			m.st.key.Render("↑/↓") + m.st.keyDesc.Render(" scroll the timeline")
	}
	if m.notice != nil {
		ns := m.st.info
		if m.notice.Err {
			ns = m.st.bad
		}
		sep := m.st.dim.Render(" │ ")
		if bar == "" {
			// The notice takes what it needs, leaving room for ? and q.
			minBar := m.hintBar(0)
			text := fit(m.notice.Text, max(w-4-ansi.StringWidth(minBar), 1))
			text = strings.TrimRight(text, " ")
			bar = m.hintBar(w - 1 - ansi.StringWidth(text) - 3)
			return fit(" "+ns.Render(text)+sep+bar, w)
		}
		return fit(" "+ns.Render(m.notice.Text)+sep+bar, w)
	}
	if bar == "" {
		bar = m.hintBar(w - 1)
	}
	return fit(" "+bar, w)
}

// helpOverlay is the full key help, in a box.
func (m *Model) helpOverlay(w, h int) []string {
	m.help.SetWidth(w - 4)
	text := m.help.FullHelpView(m.keys.FullHelp())
	intro := m.st.bold.Render("Time") + m.st.dim.Render(" runs paced to the wall clock at the speed shown, and stands still while this help is open; space pauses, s steps a frame and . runs to the next event of the timeline. ") +
		m.st.bold.Render("Faults") + m.st.dim.Render(" start now, on the selected pool (or its region or provider) or route; e ends the latest active one on the selection; : takes a fault line (tab completes it, at= may be left out) or end LABEL. --record writes them all to a scenario file.")
	lines := strings.Split(lipgloss.Wrap(intro, w-2, " "), "\n")
	lines = append(lines, "")
	lines = append(lines, strings.Split(text, "\n")...)
	lines = append(lines, "", m.st.dim.Render("any key closes this help"))
	return m.st.box("Keys", lines, w, h, true)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func itoa(n int) string { return count(n) }

func utoa(n uint64) string { return strconv.FormatUint(n, 10) }
