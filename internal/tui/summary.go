package tui

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/fleetdrill/fleetdrill/internal/report"
	"github.com/fleetdrill/fleetdrill/twin"
)

// pathKinds are the timeline events of the degradation and recovery path.
var pathKinds = []string{
	"fault-start", "retirement-notice", "detected", "mitigated", "route-change",
	"degrade", "restore", "canary-hold", "canary-resume", "canary-rollback", "fault-end", "recovered",
}

// summary is the screen after q (or when the run ends), a document that
// scrolls: how the drill ended and whether its expectations held (each
// with the value measured), the command that replays it, the run's totals,
// each tenant's SLO and losses, per fault the time to detect, mitigate and
// recover and the tenants it touched, the path as lanes over the run's
// time, and the path's events.
func (m *Model) summary(w, h int) []string {
	st := m.st
	s := &m.frame.Snap
	if m.final == nil {
		return st.box("Summary", []string{st.dim.Render("finishing the drill…")}, w, h, true)
	}
	inner := w - 2
	var out []string
	wrap := func(line string) {
		out = append(out, strings.Split(lipgloss.Wrap(line, inner, " "), "\n")...)
	}
	gap := func() { out = append(out, "") }
	how := "stopped at " + clock(m.final.At) + " of " + clock(cmp.Or(s.Duration, s.End))
	if m.final.Ended {
		how = "ran to its end at " + clock(m.final.At)
	}
	out = append(out, st.bold.Render(s.Scenario)+st.dim.Render(" · seed "+utoa(s.Seed)+" · ")+how)
	out = append(out, m.verdict()...)
	if len(m.final.Recorded) > 0 || m.base.Name != "" {
		label := "replay: "
		if !m.final.Ended {
			// The record has every fault at its time, but the command runs
			// the scenario to its end, and a fault still active at the
			// stop lasts to that end.
			label = "replay (to the scenario's end): "
		}
		wrap(st.dim.Render(label) + ReplayCommand(m.base, m.final.Recorded))
	}
	if m.final.Err != nil {
		out = append(out, st.bad.Render("report: "+m.final.Err.Error()))
	}
	gap()
	rq := s.Requests
	wrap("requests " + count(rq.Arrived) + " arrived" + st.dim.Render(" · ") + count(rq.Completed) + " completed" +
		st.dim.Render(" · ") + count(rq.Rejected) + " rejected" + st.dim.Render(" · ") + count(rq.Deferred) + " deferred" +
		st.dim.Render(" · ") + count(rq.Failed) + " failed" + st.dim.Render(" · ") + count(rq.TimedOut) + " timed out" +
		st.dim.Render(" · ") + count(rq.Retries) + " retries")
	var cl []string
	for _, c := range s.Classes {
		// The report's figure where there is one (measured requests that
		// finished, as the expectations judge them); else the drill's.
		met, of := c.TotalSLOMet, c.TotalArrived
		if rep := m.final.Report; rep != nil && rep.Classes[c.Name] != nil {
			g := rep.Classes[c.Name]
			met, of = g.SLOMet, g.Arrived-g.InFlightAtEnd
		}
		if of == 0 {
			cl = append(cl, c.Name+st.dim.Render(" no request finished"))
			continue
		}
		cl = append(cl, c.Name+" SLO met "+m.attainment(float64(met)/float64(of))+st.dim.Render(" ("+count(met)+" of "+count(of)+")"))
	}
	if len(cl) > 0 {
		wrap(strings.Join(cl, st.dim.Render(" · ")))
	}
	out = append(out, m.tenantTotals(inner)...)

	lw := 10
	for _, f := range s.Faults {
		lw = max(lw, ansi.StringWidth(f.Label)+2)
	}
	lw = min(lw, max(inner*2/5, 12))
	gap()
	if len(s.Faults) == 0 {
		out = append(out, st.dim.Render("no faults in this drill"))
	} else {
		const cw = 9
		col := func(x string) string { return padLeft(x, cw) }
		out = append(out, st.bold.Render(padRight("fault", lw)+col("start")+col("end")+col("detect")+col("mitigate")+col("recover")))
		for _, f := range s.Faults {
			label := f.Label
			if f.Injected {
				label += " *"
			}
			label = fit(label, lw)
			if f.Start > s.Now {
				out = append(out, st.dim.Render(label+col(clock(f.Start))+"  not reached"))
				continue
			}
			end := "—"
			if f.End > 0 {
				end = clock(f.End)
			} else if f.Active {
				end = "open"
			}
			mit := col(since(f.Mitigate))
			if f.NotMitigatedFor != "" {
				mit = "  " + st.bad.Render("✗ "+f.NotMitigatedFor)
			}
			out = append(out, label+col(clock(f.Start))+col(end)+
				col(since(f.Detect))+mit+col(since(f.Recover)))
			out = append(out, m.tenantImpact(f.Label, inner)...)
		}
		out = append(out, st.dim.Render("* injected; detect and mitigate from the fault's start, recover from its end; — never"))
	}

	// Lanes: each fault's active span with its detection (D), mitigation
	// (M) and recovery (R), and the ladder's engaged steps, over the run.
	laneW := inner - lw
	span := max(s.Now, time.Second)
	if laneW >= 10 && len(s.Faults) > 0 {
		gap()
		out = append(out, st.bold.Render(padRight("path", lw))+st.dim.Render(padRight("0:00", laneW-len(clock(span)))+clock(span)))
		for _, f := range s.Faults {
			if f.Start <= s.Now {
				out = append(out, fit(f.Label, lw-1)+" "+m.faultLane(f, span, laneW))
			}
		}
		if d := s.Degradation; d != nil && len(d.Steps) > 0 {
			out = append(out, fit("ladder", lw-1)+" "+m.ladderLane(s.Events, len(d.Steps), span, laneW))
		}
		legend := "━ active  D detected  M mitigated  R recovered"
		if s.Degradation != nil {
			legend += "  ▁▂▃ ladder steps engaged"
		}
		out = append(out, st.dim.Render(padRight("", lw)+legend))
	}

	// The path's events. The report's timeline is whole; a snapshot's
	// keeps the latest events only.
	events := s.Events
	if m.final.Report != nil && len(m.final.Report.Timeline) > 0 {
		events = m.final.Report.Timeline
	}
	var path []string
	for _, e := range events {
		if slices.Contains(pathKinds, e.Kind) {
			path = append(path, st.dim.Render(clockTenths(eventTime(e)))+" "+m.eventStyle(padRight(e.Kind, 17))+" "+e.Detail)
		}
	}
	gap()
	out = append(out, st.bold.Render("degradation and recovery path")+st.dim.Render(" ("+itoa(len(path))+" events)"))
	if len(path) == 0 {
		out = append(out, st.dim.Render("nothing happened"))
	}
	out = append(out, path...)

	// The whole summary scrolls, with markers.
	room := h - 2
	m.scroll = max(0, min(m.scroll, len(out)-room))
	c := content{lines: out}
	if len(out) > room {
		c = content{lines: out[m.scroll : m.scroll+room], above: m.scroll, below: len(out) - m.scroll - room}
	}
	return st.boxPane("Game day summary", c, w, h, true)
}

// verdict is whether the drill's expectations held, then each with the
// value measured; a drill with no request has no data to judge.
func (m *Model) verdict() []string {
	st := m.st
	rep := m.final.Report
	if rep == nil {
		return nil
	}
	if m.frame.Snap.Requests.Arrived == 0 && rep.Requests.Arrived == 0 {
		return []string{st.warn.Render("no data: no request arrived before the drill stopped; nothing to judge")}
	}
	if len(rep.Expectations) == 0 {
		return []string{st.dim.Render("the scenario sets no expectations")}
	}
	failed, skipped := 0, 0
	for _, e := range rep.Expectations {
		switch {
		case e.Skipped:
			skipped++
		case !e.Pass:
			failed++
		}
	}
	n := len(rep.Expectations)
	var head string
	switch {
	case failed == 0:
		head = st.ok.Render("PASS") + " · " + itoa(n-skipped) + " of " + itoa(n) + " expectations held"
	default:
		head = st.bad.Render("FAIL") + " · " + itoa(failed) + " of " + itoa(n) + " expectations failed"
	}
	if skipped > 0 {
		head += st.dim.Render(", " + itoa(skipped) + " skipped for no data")
	}
	if !m.final.Ended {
		head += st.dim.Render(" (on the run so far)")
	}
	out := []string{head}
	for _, e := range rep.Expectations {
		mark := st.ok.Render("✓")
		switch {
		case e.Skipped:
			mark = st.dim.Render("–")
		case !e.Pass:
			mark = st.bad.Render("✗")
		}
		out = append(out, "  "+mark+" "+e.Expr+st.dim.Render("  ")+report.Measured(e))
	}
	return out
}

// tenantTotals is a line per tenant from the final report: its SLO
// attainment over the run and what it lost, worst first.
func (m *Model) tenantTotals(w int) []string {
	rep := m.final.Report
	if rep == nil || len(rep.Tenants) == 0 {
		return nil
	}
	st := m.st
	finished := func(g *twin.Group) uint64 { return g.Arrived - g.InFlightAtEnd }
	names := slices.Sorted(maps.Keys(rep.Tenants))
	// Worst first; a tenant with nothing finished has no attainment to
	// rank, and goes last.
	slices.SortStableFunc(names, func(a, b string) int {
		ga, gb := rep.Tenants[a], rep.Tenants[b]
		if (finished(ga) == 0) != (finished(gb) == 0) {
			if finished(ga) == 0 {
				return 1
			}
			return -1
		}
		return cmp.Compare(ga.SLOAttainment.Or(0), gb.SLOAttainment.Or(0))
	})
	nw := 6
	for _, n := range names {
		nw = max(nw, ansi.StringWidth(n))
	}
	out := []string{st.bold.Render("tenants")}
	for _, n := range names {
		g := rep.Tenants[n]
		if finished(g) == 0 {
			out = append(out, fit("  "+padRight(n, nw)+st.dim.Render(" no request finished"), w))
			continue
		}
		// Attainment is of the finished requests: those in flight at the
		// end are neither met nor missed.
		line := "  " + padRight(n, nw) + " SLO " + m.attainment(g.SLOAttainment.Or(0)) + st.dim.Render(" ("+count(g.SLOMet)+" of "+count(finished(g))+")")
		if lost := g.Rejected + g.Failed + g.TimedOut; lost > 0 {
			line += " · " + st.bad.Render("lost "+count(lost)) + st.dim.Render(" ("+count(g.Rejected)+" refused, "+count(g.TimedOut)+" timed out, "+count(g.Failed)+" failed)")
		}
		if g.Fallbacks > 0 {
			line += st.dim.Render(" · ") + count(g.Fallbacks) + st.dim.Render(" by a fallback")
		}
		out = append(out, fit(line, w))
	}
	return out
}

// laneCell is one cell of a lane: a glyph and its style.
type laneCell struct {
	r     rune
	style int // 0 dim, 1 bad (active), 2 warn (D), 3 info (M), 4 ok (R), 5 note (ladder)
}

func (m *Model) renderLane(cells []laneCell) string {
	var b, run strings.Builder
	cur := -1
	flush := func() {
		if run.Len() == 0 {
			return
		}
		st := m.st
		s := []func(string) string{st.dim.Render, st.bad.Render, st.warn.Render, st.info.Render, st.ok.Render, st.note.Render}[cur]
		b.WriteString(s(run.String()))
		run.Reset()
	}
	for _, c := range cells {
		if c.style != cur {
			flush()
			cur = c.style
		}
		run.WriteRune(c.r)
	}
	flush()
	return b.String()
}

// faultLane draws a fault over [0, span] in w cells.
func (m *Model) faultLane(f twin.FaultState, span time.Duration, w int) string {
	at := func(t time.Duration) int {
		return max(0, min(int(float64(t)/float64(span)*float64(w-1)+0.5), w-1))
	}
	cells := make([]laneCell, w)
	for i := range cells {
		cells[i] = laneCell{r: '─'}
	}
	end := span
	if f.End > 0 && f.End < span {
		end = f.End
	}
	for i := at(f.Start); i <= at(end); i++ {
		cells[i] = laneCell{r: '━', style: 1}
	}
	// A marker that lands on another moves right, so that D and M a
	// tenth of a second apart both show.
	mark := func(t time.Duration, r rune, style int) {
		i := at(t)
		for i < w-1 && cells[i].style >= 2 {
			i++
		}
		cells[i] = laneCell{r: r, style: style}
	}
	if f.Detect >= 0 {
		mark(f.Start+f.Detect, 'D', 2)
	}
	if f.Mitigate >= 0 {
		mark(f.Start+f.Mitigate, 'M', 3)
	}
	if f.Recover >= 0 && f.End > 0 {
		mark(f.End+f.Recover, 'R', 4)
	}
	return m.renderLane(cells)
}

// ladderLane draws the ladder's engaged steps over [0, span] in w cells,
// from the timeline's degrade and restore events ("step 2 cap-output
// ...": step 2 engaged; "step 2 ... released": back to 1).
func (m *Model) ladderLane(events []twin.TimelineEvent, steps int, span time.Duration, w int) string {
	type change struct {
		at    time.Duration
		level int
	}
	var changes []change
	for _, e := range events {
		if e.Kind != "degrade" && e.Kind != "restore" {
			continue
		}
		f := strings.Fields(e.Detail)
		if len(f) < 2 || f[0] != "step" {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		if e.Kind == "restore" {
			n--
		}
		changes = append(changes, change{eventTime(e), n})
	}
	cells := make([]laneCell, w)
	level, j := 0, 0
	for i := range cells {
		t := time.Duration(float64(span) * float64(i) / float64(max(w-1, 1)))
		for j < len(changes) && changes[j].at <= t {
			level = changes[j].level
			j++
		}
		idx := 0
		if level > 0 {
			idx = max(1, min(level*7/steps, 7))
			cells[i] = laneCell{r: sparkLevels[idx], style: 5}
			continue
		}
		cells[i] = laneCell{r: sparkLevels[0]}
	}
	return m.renderLane(cells)
}

// tenantImpact is a line per tenant the fault touched, from the final
// report: when it was mitigated and recovered for that tenant, how many of
// its requests the fault displaced, were served elsewhere and were lost,
// and its SLO attainment while the fault lasted. A fault reads mitigated
// only when every tenant it displaced was.
func (m *Model) tenantImpact(label string, w int) []string {
	if m.final == nil || m.final.Report == nil {
		return nil
	}
	fr := m.final.Report.Faults[label]
	if fr == nil {
		return nil
	}
	st := m.st
	// The report's seconds, -1 for never: since prints that as a dash.
	secsOr := func(v twin.Seconds) string { return since(time.Duration(float64(v) * float64(time.Second))) }
	var out []string
	for _, name := range slices.Sorted(maps.Keys(fr.Tenants)) {
		im := fr.Tenants[name]
		if im.Displaced == 0 && im.Lost == 0 {
			continue
		}
		mit := "M " + secsOr(im.TimeToMitigateS)
		if im.TimeToMitigateS < 0 && im.Displaced > 0 && im.ServedElsewhere == 0 {
			mit = st.bad.Render("✗ nothing else serves it")
		}
		att := st.dim.Render("-") // nothing finished during it: no attainment
		if im.SLOAttainmentDuring.Measured() {
			att = m.attainment(float64(im.SLOAttainmentDuring))
		}
		line := "  " + name + st.dim.Render(" · ") + mit + st.dim.Render(" · R ") + secsOr(im.TimeToRecoverS) +
			st.dim.Render(" · displaced ") + count(im.Displaced) + st.dim.Render(" · elsewhere ") + count(im.ServedElsewhere) +
			st.dim.Render(" · lost ") + count(im.Lost) + st.dim.Render(" · SLO during ") + att
		out = append(out, fit(line, w))
	}
	return out
}
