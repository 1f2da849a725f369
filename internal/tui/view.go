package tui

import (
	"cmp"
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

// need is the height a box needs for n lines of content.
func need(n int) int { return n + 2 }

// fleetNeed is the height the fleet pane needs to show every pool.
func (m *Model) fleetNeed() int {
	return need(1 + len(m.frame.Snap.Regions) + len(m.pools))
}

// classNeed is the height the classes pane needs at three lines a class.
func (m *Model) classNeed() int { return need(max(3*len(m.frame.Snap.Classes), 1)) }

// classWant is the height the classes pane uses at four lines a class,
// where there is room.
func (m *Model) classWant() int { return need(max(4*len(m.frame.Snap.Classes), 1)) }

// tenantNeed is the height the tenants pane needs to show every route.
func (m *Model) tenantNeed() int {
	n := 2 + len(m.routes)
	if len(m.frame.Snap.Models) > 1 {
		n += len(m.frame.Snap.Tenants)
	}
	return need(n)
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// compact is the layout below wideWidth×wideHeight, 80×24 included: fleet
// beside classes, tenants beside events, the why pane under them. The top
// row is as tall as the fleet or the classes need, within bounds; the
// tenants and events take the rest.
func (m *Model) compact(w, h int) []string {
	whyH := 4
	if h >= 26 {
		whyH = 6
	}
	rest := h - whyH
	topH := clamp(max(m.fleetNeed(), m.classNeed()), 5, rest-5)
	midH := rest - topH
	lw := w / 2
	rw := w - lw
	out := make([]string, 0, h)
	out = append(out, beside(
		m.st.boxPane(m.fleetTitle(), m.fleetLines(lw-2, topH-2), lw, topH, m.focus == paneFleet),
		m.st.box("Classes · p99 vs SLO", m.classLines(rw-2, topH-2), rw, topH, false),
	)...)
	// The tenants take more of the middle row than the events: their
	// figures are the alarm, the events' text is cut anyway.
	tw := w * 55 / 100
	out = append(out, beside(
		m.st.boxPane(m.routesTitle(), m.tenantLines(tw-2, midH-2), tw, midH, m.focus == paneRoutes),
		m.st.boxPane("Events", m.eventLines(w-tw-2, midH-2, false), w-tw, midH, false),
	)...)
	out = append(out, m.st.box(m.whyTitle(), m.whyLines(w-2, whyH-2), w, whyH, false)...)
	return out
}

// wide is the layout from wideWidth×wideHeight: fleet over tenants; classes,
// faults and the why pane; and the event log down the right, its lines
// wrapped rather than cut. Each pane is as tall as its content needs, within
// bounds; from 180 columns the fleet column is wide enough for two columns
// of regions.
func (m *Model) wide(w, h int) []string {
	c1 := w * 38 / 100
	if w >= 180 {
		c1 = w * 45 / 100
	}
	c2 := w * 30 / 100
	if w >= 180 {
		c2 = w * 27 / 100
	}
	c3 := w - c1 - c2
	fleetH := clamp(m.fleetNeed(), 6, h-6)
	if fleetH > h/2 && m.tenantNeed() > h-fleetH {
		// Both want more than there is: the fleet may fold or use two
		// columns, the tenants only scroll.
		fleetH = max(h/2, h-m.tenantNeed())
	}
	tenantsH := h - fleetH
	classH := clamp(m.classWant(), 5, h*45/100)
	faultsH := clamp(need(len(m.frame.Snap.Faults)+2), 4, (h-classH)/2)
	whyH := h - classH - faultsH
	left := slices.Concat(
		m.st.boxPane(m.fleetTitle(), m.fleetLines(c1-2, fleetH-2), c1, fleetH, m.focus == paneFleet),
		m.st.boxPane(m.routesTitle(), m.tenantLines(c1-2, tenantsH-2), c1, tenantsH, m.focus == paneRoutes))
	mid := slices.Concat(
		m.st.box("Classes · p99 vs SLO", m.classLines(c2-2, classH-2), c2, classH, false),
		m.st.box("Faults", m.faultLines(c2-2, faultsH-2), c2, faultsH, false),
		m.st.box(m.whyTitle(), m.whyLines(c2-2, whyH-2), c2, whyH, false))
	right := m.st.boxPane("Events", m.eventLines(c3-2, h-2, true), c3, h, false)
	return beside(left, mid, right)
}

func (m *Model) fleetTitle() string {
	return "Fleet · router's view"
}

func (m *Model) routesTitle() string {
	return "Tenants · SLO, losses, where served"
}

func (m *Model) whyTitle() string {
	if m.focus == paneRoutes {
		if m.selModel != "" {
			return "Why · " + m.selTenant + " → " + m.selModel
		}
		return "Why"
	}
	if m.selPool != "" {
		return "Why · pool " + m.selPool
	}
	return "Why"
}

// breaches are the classes out of their SLO now: TTFT p99 counting the
// requests still waiting, or end-to-end p99, over the objective, or fewer
// than 95 % of the window's requests within it (the attainment the classes
// pane paints red: refusals and time-outs miss the SLO without a latency).
func (m *Model) breaches() []string {
	var out []string
	for _, c := range m.frame.Snap.Classes {
		ttft := c.SLOTTFT > 0 && c.Completed+uint64(c.Waiting) > 0 && c.TTFTP99Now() > c.SLOTTFT
		e2e := c.SLOE2E > 0 && c.Completed > 0 && c.E2EP99 > c.SLOE2E
		att := c.Finished > 0 && c.Attainment < 0.95
		if ttft || e2e || att {
			out = append(out, c.Name)
		}
	}
	return out
}

// statusBar is the top line. The alarm — the drill's state (paused,
// stopped), faults active, classes over their SLO — is never cut: where the
// line is too long the decorative parts go first (the request count, the
// seed, the progress bar, the name of the tool, then the scenario's name is
// shortened).
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
	state += " " + speedText(m.frame.Speed)
	if m.frame.Behind {
		state += st.warn.Render(" (behind)")
	}
	// The clock runs against the arrivals' end; the drain after it is
	// said, not added.
	clk := "sim " + st.bold.Render(clock(s.Now))
	switch {
	case s.Duration > 0 && s.Now > s.Duration:
		clk += st.dim.Render(" draining")
	case s.Duration > 0:
		clk += st.dim.Render(" / " + clock(s.Duration))
	case s.End > 0:
		clk += st.dim.Render(" / " + clock(s.End))
	}
	var alarm []string
	active := 0
	for _, f := range s.Faults {
		if f.Active {
			active++
		}
	}
	if active > 0 {
		alarm = append(alarm, st.bad.Render("● "+itoa(active)+" fault"+plural(active)+" active"))
	}
	if b := m.breaches(); len(b) > 0 {
		alarm = append(alarm, st.bad.Render("✗ SLO "+strings.Join(b, ", ")))
	}
	alarmText := strings.Join(alarm, sep)
	shortAlarm := func() string {
		var a []string
		if active > 0 {
			a = append(a, st.bad.Render("●"+itoa(active)+" fault"+plural(active)))
		}
		if b := m.breaches(); len(b) > 0 {
			a = append(a, st.bad.Render("✗SLO "+itoa(len(b))))
		}
		return strings.Join(a, " ")
	}

	progress := ""
	if end := cmp.Or(s.Duration, s.End); end > 0 {
		const bw = 12
		n := int(float64(bw) * float64(min(s.Now, end)) / float64(end))
		n = max(0, min(n, bw))
		progress = " " + st.info.Render(strings.Repeat("█", n)) + st.dim.Render(strings.Repeat("░", bw-n))
	}
	seed := "seed " + utoa(s.Seed)
	reqs := ""
	if s.Requests.Arrived > 0 {
		reqs = count(s.Requests.Arrived) + " req"
	}
	brand := st.status.Render("fleetdrill") + " "
	name := s.Scenario

	compose := func(brand, name, progress, alarmText, seed, reqs string) string {
		parts := []string{brand + st.info.Render(name), clk + progress, state}
		if name == "" && brand == "" {
			parts = parts[1:]
		}
		if alarmText != "" {
			parts = append(parts, alarmText)
		}
		for _, p := range []string{seed, reqs} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		return " " + strings.Join(parts, sep)
	}
	// From the fullest line to the barest, the first that fits.
	tries := []func() string{
		func() string { return compose(brand, name, progress, alarmText, seed, reqs) },
		func() string { return compose(brand, name, progress, alarmText, seed, "") },
		func() string { return compose(brand, name, progress, alarmText, "", "") },
		func() string { return compose(brand, name, "", alarmText, "", "") },
		func() string { return compose("", name, "", alarmText, "", "") },
	}
	for _, try := range tries {
		if line := try(); ansi.StringWidth(line) <= w {
			return fit(line, w)
		}
	}
	// Shorten the scenario's name, then the alarm's words; the alarm stays.
	for _, a := range []string{alarmText, shortAlarm()} {
		base := ansi.StringWidth(compose("", "", "", a, "", ""))
		if room := w - base - 3; room >= 6 {
			return fit(compose("", ansi.Truncate(name, room, "…"), "", a, "", ""), w)
		}
		if base <= w {
			return fit(compose("", "", "", a, "", ""), w)
		}
	}
	return fit(" "+shortAlarm()+" "+state, w)
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
			m.st.key.Render("↑/↓") + m.st.keyDesc.Render(" scroll the summary")
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
