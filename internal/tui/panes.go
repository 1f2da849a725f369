package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/fleetdrill/fleetdrill/twin"
)

// window returns the lines to show of body so that line sel (-1: none) is
// visible in h lines, scrolling as little as possible from the top.
func window(body []string, sel, h int) []string {
	if len(body) <= h || h <= 0 {
		return body
	}
	start := 0
	if sel >= h {
		start = sel - h + 1
	}
	return body[start : start+h]
}

// healthGlyph is a pool's health as a glyph whose shape reads without
// colour.
func (st *styles) healthGlyph(h string) string {
	switch h {
	case "healthy":
		return st.ok.Render("●")
	case "degraded":
		return st.warn.Render("◐")
	case "down":
		return st.bad.Render("○")
	}
	return st.dim.Render("·")
}

// fleetLines is the fleet map: regions and their pools with health (the
// router's view), replicas up, utilisation, waiting sequences and
// requests in flight.
func (m *Model) fleetLines(w, h int) []string {
	st := m.st
	s := &m.frame.Snap
	if len(s.Regions) == 0 {
		return []string{st.dim.Render("waiting for the first snapshot…")}
	}
	nameW := 4
	for _, p := range m.pools {
		nameW = max(nameW, ansi.StringWidth(p.pool.Name))
	}
	wideCols := w >= 46
	cols := 5 + 1 + 4 + 1 + 5 // up, util, wait
	if wideCols {
		cols += 6 // in flight
	}
	nameW = min(nameW, max(w-4-cols-1, 6))
	hdr := "    " + padRight("pool", nameW) + " " + padLeft("up", 5) + " " + padLeft("util", 4) + " " + padLeft("queue", 5)
	if wideCols {
		hdr += " " + padLeft("in-fl", 5)
	}
	var body []string
	sel := -1
	for _, r := range s.Regions {
		down := 0
		for _, p := range r.Pools {
			if p.Health == "down" {
				down++
			}
		}
		rl := st.bold.Render(r.Name)
		if r.Jurisdiction != "" {
			rl += st.dim.Render(" · " + r.Jurisdiction)
		}
		if down > 0 && down == len(r.Pools) {
			rl += " " + st.bad.Render("DOWN")
		} else if down > 0 {
			rl += " " + st.warn.Render(itoa(down)+" of "+itoa(len(r.Pools))+" pools down")
		}
		body = append(body, rl)
		for i := range r.Pools {
			p := &r.Pools[i]
			marker := "  "
			name := padRight(p.Name, nameW)
			if ansi.StringWidth(name) > nameW {
				name = ansi.Truncate(name, nameW, "…")
			}
			if p.Name == m.selPool {
				sel = len(body)
				marker = st.info.Render("▸ ")
				if m.focus == paneFleet {
					name = st.selected.Render(name)
				} else {
					name = st.bold.Render(name)
				}
			}
			up := padLeft(itoa(p.Up)+"/"+itoa(p.Replicas), 5)
			switch {
			case p.Up == 0 && p.Replicas > 0:
				up = st.bad.Render(up)
			case p.Up < p.Replicas:
				up = st.warn.Render(up)
			}
			line := marker + st.healthGlyph(p.Health) + " " + name + " " + up + " " +
				padLeft(strconv.Itoa(int(p.Utilization*100+0.5))+"%", 4) + " " + padLeft(itoa(p.Waiting), 5)
			if wideCols {
				line += " " + padLeft(itoa(p.Inflight), 5)
			}
			body = append(body, line)
		}
	}
	return append([]string{st.dim.Render(hdr)}, window(body, sel, h-1)...)
}

// classLines shows each class's TTFT and end-to-end p99 against the SLO
// as sparklines over the last minutes, SLO attainment, and rejected and
// deferred rates, in 3, 2 or 1 lines per class as room allows.
func (m *Model) classLines(w, h int) []string {
	st := m.st
	cs := m.frame.Snap.Classes
	if len(cs) == 0 {
		return []string{st.dim.Render("no classes yet")}
	}
	per := 3
	if len(cs)*3 > h {
		per = 2
	}
	if len(cs)*2 > h {
		per = 1
	}
	const valW = 13 // "13.3s/2m00s"
	var out []string
	for _, c := range cs {
		hist := m.hist[c.Name]
		// Where room is short, a zero rate is left out.
		tight := w < 48
		l1 := st.bold.Render(c.Name) + st.dim.Render(" met ") + m.attainment(c.Attainment)
		if c.SLOTTFT > 0 && c.OldestWaiting > c.SLOTTFT {
			// Requests waiting past the objective now: the breach as it
			// happens, with how many and how long (before the rates, which
			// a narrow pane cuts first).
			l1 += " " + st.bad.Render(count(c.Waiting)+" waiting, oldest "+secs(c.OldestWaiting))
		}
		if c.RejectedPS > 0 || !tight {
			l1 += st.dim.Render(" rej ") + rate(c.RejectedPS)
		}
		if c.DeferredPS > 0 || !tight {
			l1 += st.dim.Render(" def ") + rate(c.DeferredPS)
		}

		spark := func(sr *series, slo time.Duration, n int) string {
			if hist == nil || n <= 0 {
				return strings.Repeat(" ", max(n, 0))
			}
			return st.sparkline(sparkCells(sr.tail(n), slo.Seconds(), n))
		}
		switch per {
		case 3:
			n := w - 9 - valW - 1
			out = append(out, l1,
				st.dim.Render("TTFT p99 ")+spark(hist.ttft, c.SLOTTFT, n)+" "+m.latency(c.TTFTP99Now(), c.SLOTTFT, c.Completed+uint64(c.Waiting)),
				st.dim.Render("E2E  p99 ")+spark(hist.e2e, c.SLOE2E, n)+" "+m.latency(c.E2EP99, c.SLOE2E, c.Completed))
		case 2:
			n := (w - 2*(5+valW+1) - 1) / 2
			out = append(out, l1,
				st.dim.Render("TTFT ")+spark(hist.ttft, c.SLOTTFT, n)+" "+padRight(m.latency(c.TTFTP99Now(), c.SLOTTFT, c.Completed+uint64(c.Waiting)), valW)+" "+
					st.dim.Render("E2E ")+spark(hist.e2e, c.SLOE2E, n)+" "+m.latency(c.E2EP99, c.SLOE2E, c.Completed))
		default:
			out = append(out, l1+" "+spark(hist.ttft, c.SLOTTFT, 8)+" "+m.latency(c.TTFTP99Now(), c.SLOTTFT, c.Completed+uint64(c.Waiting)))
		}
	}
	return out
}

// attainment colours an SLO attainment: ≥ 99 % fine, ≥ 95 % a warning,
// below that bad.
func (m *Model) attainment(f float64) string {
	switch {
	case f >= 0.99:
		return m.st.ok.Render(pct(f))
	case f >= 0.95:
		return m.st.warn.Render(pct(f))
	}
	return m.st.bad.Render(pct(f))
}

func rate(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "/s" }

// latency prints a p99 against its SLO, red when over it; a dash when no
// request completed in the window.
func (m *Model) latency(v, slo time.Duration, completed uint64) string {
	if completed == 0 {
		return m.st.dim.Render("—")
	}
	txt := secs(v)
	if slo > 0 && v > slo {
		txt = m.st.bad.Render(txt)
	}
	if slo > 0 {
		txt += m.st.dim.Render("/" + secs(slo))
	}
	return txt
}

// ladder is the degradation ladder's state on one line.
func (m *Model) ladder() string {
	st := m.st
	d := m.frame.Snap.Degradation
	if d == nil {
		return st.dim.Render("degradation: no ladder")
	}
	var b strings.Builder
	b.WriteString(st.dim.Render("degradation "))
	for i := range d.Steps {
		if i < d.Engaged {
			b.WriteString(st.warn.Render("▮"))
		} else {
			b.WriteString(st.dim.Render("▯"))
		}
	}
	b.WriteString(" " + itoa(d.Engaged) + "/" + itoa(len(d.Steps)))
	if d.Engaged > 0 && d.Engaged <= len(d.Steps) {
		b.WriteString(" " + st.note.Render(d.Steps[d.Engaged-1]))
	} else {
		b.WriteString(st.dim.Render(" none engaged"))
	}
	return b.String()
}

// routeLines is queue depth by model and, per tenant, where its requests
// go now: the model itself, a fallback, or nowhere.
func (m *Model) routeLines(w, h int) []string {
	st := m.st
	s := &m.frame.Snap
	head := m.ladder()
	if len(s.Models) == 0 {
		return []string{head}
	}
	tw := 4
	for _, r := range m.routes {
		tw = max(tw, ansi.StringWidth(r.route.Tenant))
	}
	tw = min(tw, max(w/3, 6))
	var body []string
	sel := -1
	for _, md := range s.Models {
		q := itoa(md.Queue)
		if md.Queue > 0 {
			q = st.warn.Render(q)
		}
		body = append(body, st.bold.Render(md.Name)+st.dim.Render("  queue ")+q)
		for i := range md.Routes {
			r := &md.Routes[i]
			marker := "  "
			tenant := padRight(r.Tenant, tw)
			if ansi.StringWidth(tenant) > tw {
				tenant = ansi.Truncate(tenant, tw, "…")
			}
			if md.Name == m.selModel && r.Tenant == m.selTenant {
				sel = len(body)
				marker = st.info.Render("▸ ")
				if m.focus == paneRoutes {
					tenant = st.selected.Render(tenant)
				} else {
					tenant = st.bold.Render(tenant)
				}
			}
			var to string
			switch {
			case r.Served == "":
				to = st.bad.Render("✗ nothing serves it")
			case r.Fallback:
				to = st.warn.Render("⤷ "+r.Served) + st.dim.Render(" fallback")
			default:
				to = st.ok.Render("→ ") + r.Served
			}
			// Pools that fit, of those considered.
			fitN, all := len(r.Pools), len(r.Pools)+skippedTotal(r.Skipped)
			pools := itoa(fitN) + "/" + itoa(all) + " pools"
			if fitN < all {
				pools = st.warn.Render(pools)
			} else {
				pools = st.dim.Render(pools)
			}
			body = append(body, marker+tenant+" "+to+st.dim.Render(" · ")+pools)
		}
	}
	return append([]string{head}, window(body, sel, h-1)...)
}

func skippedTotal(rs []twin.ReasonCount) int {
	n := 0
	for _, r := range rs {
		n += r.Count
	}
	return n
}

// eventStyle colours an event kind by what it means for the drill.
func (m *Model) eventStyle(kind string) string {
	st := m.st
	switch {
	case kind == "fault-start":
		return st.bad.Render(kind)
	case kind == "detected", kind == "breaker-open", kind == "retirement-notice":
		return st.warn.Render(kind)
	case kind == "mitigated", kind == "route-change":
		return st.info.Render(kind)
	case kind == "degrade":
		return st.note.Render(kind)
	case kind == "fault-end", kind == "recovered", kind == "restore", kind == "ready", kind == "breaker-closed":
		return st.ok.Render(kind)
	}
	return st.dim.Render(kind)
}

// eventLines is the tail of the timeline, newest last.
func (m *Model) eventLines(w, h int) []string {
	ev := m.frame.Snap.Events
	if len(ev) == 0 {
		return []string{m.st.dim.Render("no events yet")}
	}
	if len(ev) > h {
		ev = ev[len(ev)-h:]
	}
	kw := 12
	if w >= 60 {
		kw = 17
	}
	out := make([]string, 0, len(ev))
	for _, e := range ev {
		k := e.Kind
		pad := ""
		if n := ansi.StringWidth(k); n < kw {
			pad = strings.Repeat(" ", kw-n)
		}
		out = append(out, m.st.dim.Render(clockTenths(eventTime(e)))+" "+m.eventStyle(k)+pad+" "+e.Detail)
	}
	return out
}

// faultLines lists the drill's faults, newest first: active or ended, and
// the time to detect, mitigate and recover so far.
func (m *Model) faultLines(w, h int) []string {
	st := m.st
	fs := m.frame.Snap.Faults
	if len(fs) == 0 {
		return []string{st.dim.Render("no faults yet: o b x n d r l f c inject one")}
	}
	out := make([]string, 0, len(fs)+1)
	for i := len(fs) - 1; i >= 0 && len(out) < h-1; i-- {
		f := fs[i]
		label := f.Label
		if f.Injected {
			label += "*"
		}
		var mark, times string
		switch {
		case f.Active:
			mark = st.bad.Render("●")
		case f.Start > m.frame.Snap.Now:
			mark, label = st.dim.Render("◌"), st.dim.Render(label)
			times = st.dim.Render("scheduled at " + clock(f.Start))
		default:
			mark = st.ok.Render("✓")
		}
		if times == "" {
			when := clock(f.Start) + "–"
			if f.End > 0 {
				when += clock(f.End)
			}
			mit := since(f.Mitigate)
			if f.NotMitigatedFor != "" {
				// Other traffic may have moved; this tenant's has not.
				mit = st.bad.Render("✗ " + f.NotMitigatedFor)
			}
			times = st.dim.Render(when+" D ") + since(f.Detect) + st.dim.Render(" M ") + mit + st.dim.Render(" R ") + since(f.Recover)
		}
		if ansi.StringWidth(label)+ansi.StringWidth(times)+3 > w {
			out = append(out, mark+" "+label, "  "+times)
			continue
		}
		out = append(out, mark+" "+label+" "+times)
	}
	return append(out, st.dim.Render("* injected · D detected, M mitigated (from the start), R recovered (from the end)"))
}

func eventTime(e twin.TimelineEvent) time.Duration {
	return time.Duration(e.TS * float64(time.Second))
}

// whyLines explains the selection: for a pool, the router's verdict on it,
// which routes use or skip it and the faults on it; for a route, where its
// requests go and why the other pools were skipped, with counts, the way
// the Kubernetes scheduler simulator shows each plugin's verdict.
func (m *Model) whyLines(w, h int) []string {
	items := m.whyPool()
	if m.focus == paneRoutes {
		items = m.whyRoute()
	}
	return pack(items, w, h, m.st.dim.Render(" · "))
}

// pack lays out items, most important first, in h lines of w cells: one
// item per line, wrapped, when there is room for that; otherwise items
// share lines (joined by sep) where they fit, and what does not fit is
// cut at the edge.
func pack(items []string, w, h int, sep string) []string {
	// NB: the wrapper always breaks after a hyphen, which would split
	// llama-3.1-8b; a non-breaking hyphen (one cell too) stands in for it.
	const nbHyphen = "\u2011"
	var wrapped []string
	for _, it := range items {
		text := lipgloss.Wrap(strings.ReplaceAll(it, "-", nbHyphen), w, " ,")
		wrapped = append(wrapped, strings.Split(strings.ReplaceAll(text, nbHyphen, "-"), "\n")...)
	}
	if len(wrapped) <= h {
		return wrapped
	}
	if len(items) <= h {
		return items
	}
	sw := ansi.StringWidth(sep)
	var out []string
	cur, cw := "", 0
	for _, it := range items {
		iw := ansi.StringWidth(it)
		switch {
		case cur == "":
			cur, cw = it, iw
		case cw+sw+iw <= w:
			cur += sep + it
			cw += sw + iw
		default:
			out = append(out, cur)
			cur, cw = it, iw
		}
	}
	return append(out, cur)
}

func (m *Model) whyPool() []string {
	st := m.st
	i := m.poolIndex()
	if i < 0 {
		return []string{st.dim.Render("select a pool with ↑/↓")}
	}
	ref := m.pools[i]
	p := ref.pool
	var verdict string
	switch p.Health {
	case "healthy":
		verdict = st.ok.Render("healthy")
	case "degraded":
		verdict = st.warn.Render("degraded")
	case "down":
		verdict = st.bad.Render("down")
	default:
		verdict = st.dim.Render(p.Health)
	}
	l1 := verdict + ": " + itoa(p.Up) + " of " + itoa(p.Replicas) + " replicas take work"
	if p.Open > 0 {
		l1 += ", " + st.bad.Render(itoa(p.Open)+" breaker"+plural(p.Open)+" open")
	}
	if others := p.Replicas - p.Up - p.Open; others > 0 {
		l1 += ", " + itoa(others) + " loading or out of service"
	}
	load := fmt.Sprintf("util %d%%, %d running, %d waiting, %d in flight",
		int(p.Utilization*100+0.5), p.Running, p.Waiting, p.Inflight)

	var used, skipped []string
	for _, r := range m.routes {
		if !slices.Contains(p.Models, r.model) && !slices.Contains(p.Models, r.route.Served) {
			continue
		}
		name := r.route.Tenant + "→" + r.model
		if slices.Contains(r.route.Pools, p.Name) {
			used = append(used, name)
		} else {
			skipped = append(skipped, name)
		}
	}
	l2 := "used by " + itoa(len(used)) + " route" + plural(len(used))
	if len(used) > 0 {
		l2 += " (" + strings.Join(used, ", ") + ")"
	}
	if len(skipped) > 0 {
		l2 += ", " + st.warn.Render("skipped by "+itoa(len(skipped))) + " (" + strings.Join(skipped, ", ") + ")"
	}
	var fl []string
	for _, f := range m.frame.Snap.Faults {
		if !f.Active || !faultHits(f.Spec, selection{Pool: p.Name, Region: ref.region, Provider: p.Provider}, false) {
			continue
		}
		txt := st.bad.Render(f.Label) + " since " + clock(f.Start)
		if f.Detect >= 0 {
			txt += ", detected after " + secs(f.Detect)
		} else {
			txt += ", " + st.warn.Render("not detected yet")
		}
		fl = append(fl, txt)
	}
	l3 := st.dim.Render("no active fault on it")
	if len(fl) > 0 {
		l3 = "fault" + plural(len(fl)) + ": " + strings.Join(fl, "; ")
	}
	l4 := st.dim.Render(ref.region+" ("+ref.jurisdiction+") · provider "+p.Provider+" · serves ") +
		strings.Join(p.Models, ", ") + st.dim.Render(" · dispatched "+count(p.Dispatched))
	return []string{l1, l2, l3, load, l4}
}

func (m *Model) whyRoute() []string {
	st := m.st
	i := m.routeIndex()
	if i < 0 {
		return []string{st.dim.Render("select a route with tab, then ↑/↓")}
	}
	ref := m.routes[i]
	r := ref.route
	var l1 string
	switch {
	case r.Served == "":
		l1 = st.bad.Render("nothing serves "+r.Tenant+" → "+ref.model+" now") + ": requests wait, are deferred or rejected"
	case r.Fallback:
		l1 = st.warn.Render("served by the fallback "+r.Served) + " (" + ref.model + " has no pool for " + r.Tenant + ")"
	default:
		l1 = st.ok.Render("served by "+r.Served) + " (primary)"
	}
	// The reasons first: they are the why.
	items := []string{l1}
	if n := skippedTotal(r.Skipped); n > 0 {
		items = append(items, st.bad.Render("✗ "+itoa(n)+" pool"+plural(n)+" skipped")+": "+reasonList(r.Skipped))
	}
	if len(r.Pools) > 0 {
		items = append(items, st.ok.Render("✓ "+itoa(len(r.Pools))+" pool"+plural(len(r.Pools))+" fit")+formatList(r.Pools))
	}
	items = append(items, "queue "+itoa(ref.queue)+" waiting for "+ref.model)
	if rej := reasonsOf(m.frame.Snap.Rejections); len(rej) > 0 {
		items = append(items, "rejected so far: "+reasonList(rej))
	} else {
		items = append(items, st.dim.Render("no rejections so far"))
	}
	return items
}

func formatList(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return ": " + strings.Join(xs, ", ")
}

// reasonList prints reasons with counts, most frequent first: "2 outside
// jurisdiction eu, 1 circuit open".
func reasonList(rs []twin.ReasonCount) string {
	rs = slices.Clone(rs)
	slices.SortStableFunc(rs, func(a, b twin.ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Reason, b.Reason))
	})
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = itoa(r.Count) + " " + r.Reason
	}
	return strings.Join(parts, ", ")
}

func reasonsOf(m map[string]uint64) []twin.ReasonCount {
	out := make([]twin.ReasonCount, 0, len(m))
	for k, v := range m {
		if v > 0 {
			out = append(out, twin.ReasonCount{Reason: k, Count: int(v)})
		}
	}
	return out
}
