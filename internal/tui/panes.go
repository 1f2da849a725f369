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

// window returns the lines of body to show in h lines so that line sel
// (-1: none) is visible, scrolling as little as possible from the top, and
// how many lines are out of view above and below. alarm, when set, marks
// the lines that need attention: the marker counts those out of view.
func window(body []string, alarm []bool, sel, h int, what string) content {
	if len(body) <= h || h <= 0 {
		return content{lines: body}
	}
	start := 0
	if sel >= h {
		start = sel - h + 1
	}
	c := content{lines: body[start : start+h], above: start, below: len(body) - start - h}
	above, below := 0, 0
	for i, a := range alarm {
		switch {
		case !a:
		case i < start:
			above++
		case i >= start+h:
			below++
		}
	}
	if above > 0 {
		c.alarmAbove = count(above) + " " + what
	}
	if below > 0 {
		c.alarmBelow = count(below) + " " + what
	}
	return c
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

// fleetBlock is a region of the fleet map: its heading, its pools' lines,
// and the one line it folds into when room is short (a region whose pools
// are all healthy and not selected).
type fleetBlock struct {
	head, folded string
	pools        []string
	alarm        []bool // per pool line: down
	sel          int    // the selected pool's line, -1
	foldable     bool
}

func (b *fleetBlock) lines(folded bool) ([]string, []bool, int) {
	if folded {
		return []string{b.folded}, []bool{false}, -1
	}
	sel := -1
	if b.sel >= 0 {
		sel = b.sel + 1
	}
	return append([]string{b.head}, b.pools...), append([]bool{false}, b.alarm...), sel
}

// fleetCols are the fleet map's columns after the pool's name, as room
// allows: replicas up (of those it has, or for an autoscaled pool of those
// it asks for: poolUp), busy (share of replicas with a batch running),
// saturation (share of batch slots in use), queued sequences, in flight.
type fleetCols struct{ sat, inflight bool }

func (c fleetCols) width() int {
	w := 5 + 1 + 4 + 1 + 5 // up, busy, queue
	if c.sat {
		w += 5
	}
	if c.inflight {
		w += 6
	}
	return w
}

// fleetLines is the fleet map: regions and their pools with health (the
// router's view), replicas up, how busy and saturated, waiting sequences
// and requests in flight. Where the map does not fit it uses two columns
// (wide panes), then folds healthy regions into a line each, then scrolls,
// with markers that count the pools down out of view.
func (m *Model) fleetLines(w, h int) content {
	st := m.st
	s := &m.frame.Snap
	if len(s.Regions) == 0 {
		return content{lines: []string{st.dim.Render("waiting for the first snapshot…")}}
	}
	nameW := 4
	for _, p := range m.pools {
		nameW = max(nameW, ansi.StringWidth(p.pool.Name))
	}
	build := func(w int) ([]fleetBlock, string) {
		cols := fleetCols{sat: w >= 36, inflight: w >= 50}
		nw := min(nameW, max(w-4-cols.width()-1, 6))
		hdr := "    " + padRight("pool", nw) + " " + padLeft("up", 5) + " " + padLeft("busy", 4)
		if cols.sat {
			hdr += " " + padLeft("sat", 4)
		}
		hdr += " " + padLeft("queue", 5)
		if cols.inflight {
			hdr += " " + padLeft("in-fl", 5)
		}
		blocks := make([]fleetBlock, 0, len(s.Regions))
		for _, r := range s.Regions {
			b := fleetBlock{sel: -1, foldable: true}
			down, busy, n := 0, 0.0, 0
			for _, p := range r.Pools {
				if p.Health == "down" {
					down++
				}
				if p.Health != "healthy" {
					b.foldable = false
				}
				busy += p.Utilization
				n++
			}
			rl := st.bold.Render(r.Name)
			if r.Jurisdiction != "" {
				rl += st.dim.Render(" · " + r.Jurisdiction)
			}
			b.folded = rl + " " + st.ok.Render("●") + st.dim.Render(" "+itoa(n)+" pool"+plural(n)+" healthy")
			if down > 0 && down == len(r.Pools) {
				rl += " " + st.bad.Render("DOWN")
			} else if down > 0 {
				rl += " " + st.warn.Render(itoa(down)+" of "+itoa(len(r.Pools))+" pools down")
			}
			b.head = rl
			for i := range r.Pools {
				p := &r.Pools[i]
				marker := "  "
				name := padRight(p.Name, nw)
				if ansi.StringWidth(name) > nw {
					name = ansi.Truncate(name, nw, "…")
				}
				if p.Name == m.selPool {
					b.sel, b.foldable = len(b.pools), false
					marker = st.info.Render("▸ ")
					if m.focus == paneFleet {
						name = st.selected.Render(name)
					} else {
						name = st.bold.Render(name)
					}
				}
				up := m.poolUp(p)
				line := marker + st.healthGlyph(p.Health) + " " + name + " " + up + " " + padLeft(percent(p.Utilization), 4)
				if cols.sat {
					sat := padLeft(percent(p.Saturation()), 4)
					if p.Slots == 0 {
						sat = padLeft("—", 4)
					} else if p.Saturation() >= 0.9 {
						sat = st.warn.Render(sat)
					}
					line += " " + sat
				}
				line += " " + padLeft(itoa(p.Waiting), 5)
				if cols.inflight {
					line += " " + padLeft(itoa(p.Inflight), 5)
				}
				b.pools = append(b.pools, line)
				b.alarm = append(b.alarm, p.Health == "down")
			}
			blocks = append(blocks, b)
		}
		return blocks, st.dim.Render(hdr)
	}
	flatten := func(blocks []fleetBlock, fold bool) (body []string, alarm []bool, sel int) {
		sel = -1
		for i := range blocks {
			l, a, sl := blocks[i].lines(fold && blocks[i].foldable)
			if sl >= 0 {
				sel = len(body) + sl
			}
			body = append(body, l...)
			alarm = append(alarm, a...)
		}
		return body, alarm, sel
	}
	blocks, hdr := build(w)
	body, alarm, sel := flatten(blocks, false)
	if len(body) <= h-1 {
		return content{lines: append([]string{hdr}, body...)}
	}
	// Two columns, each region whole, where the pane is wide enough.
	const colMin = 44
	if w >= 2*colMin+1 {
		cw := (w - 1) / 2
		cblocks, chdr := build(cw)
		for _, fold := range []bool{false, true} {
			if left, right, ok := twoColumns(cblocks, fold, h-1); ok {
				out := []string{fit(chdr, cw) + " " + chdr}
				for i := range max(len(left), len(right)) {
					var l, r string
					if i < len(left) {
						l = left[i]
					}
					if i < len(right) {
						r = right[i]
					}
					out = append(out, fit(l, cw)+" "+r)
				}
				return content{lines: out}
			}
		}
	}
	if folded, falarm, fsel := flatten(blocks, true); len(folded) < len(body) {
		body, alarm, sel = folded, falarm, fsel
	}
	c := window(body, alarm, sel, h-1, "down")
	c.lines = append([]string{hdr}, c.lines...)
	return c
}

// twoColumns splits the regions between two columns of at most h lines,
// the first as full as the second or fuller; ok is false when they do not
// fit.
func twoColumns(blocks []fleetBlock, fold bool, h int) (left, right []string, ok bool) {
	total := 0
	for i := range blocks {
		l, _, _ := blocks[i].lines(fold && blocks[i].foldable)
		total += len(l)
	}
	// The regions stay in order: the first ones on the left.
	onRight := false
	for i := range blocks {
		l, _, _ := blocks[i].lines(fold && blocks[i].foldable)
		if !onRight && len(left) < (total+1)/2 && len(left)+len(l) <= h {
			left = append(left, l...)
			continue
		}
		onRight = true
		right = append(right, l...)
	}
	return left, right, len(left) <= h && len(right) <= h
}

// percent prints a share as a whole percentage.
func percent(f float64) string { return strconv.Itoa(int(f*100+0.5)) + "%" }

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
	if len(cs)*4 <= h {
		per = 4
	}
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
		// Requests waiting past the objective now: the breach as it
		// happens, with how many and how long, on a line of its own where
		// there is room, else before the rates (which a narrow pane cuts
		// first).
		waitLine := st.dim.Render("none waiting past the SLO")
		switch {
		case c.SLOTTFT <= 0 && c.Waiting > 0:
			waitLine = st.dim.Render(count(c.Waiting) + " waiting, oldest " + secs(c.OldestWaiting) + " (no TTFT objective)")
		case c.SLOTTFT <= 0:
			waitLine = st.dim.Render("none waiting (no TTFT objective)")
		}
		if c.SLOTTFT > 0 && c.OldestWaiting > c.SLOTTFT {
			waitLine = st.bad.Render(count(c.Waiting) + " waiting, oldest " + secs(c.OldestWaiting))
			if per < 4 {
				l1 += " " + waitLine
			}
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
		case 4:
			n := w - 9 - valW - 1
			out = append(out, l1, waitLine,
				st.dim.Render("TTFT p99 ")+spark(hist.ttft, c.SLOTTFT, n)+" "+m.latency(c.TTFTP99Now(), c.SLOTTFT, c.Completed+uint64(c.Waiting)),
				st.dim.Render("E2E  p99 ")+spark(hist.e2e, c.SLOE2E, n)+" "+m.latency(c.E2EP99, c.SLOE2E, c.Completed))
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

// tenantState returns the snapshot's state of the tenant named, nil
// without one (a driver that does not report tenants).
func (m *Model) tenantState(name string) *twin.TenantState {
	ts := m.frame.Snap.Tenants
	for i := range ts {
		if ts[i].Name == name {
			return &ts[i]
		}
	}
	return nil
}

// hurt is whether a tenant fares badly now: below 99 % of its SLO, or
// with requests lost, in the window.
func hurt(t *twin.TenantState) bool {
	// Requests waiting with nothing finished is an outage holding them:
	// the attainment (1 without any) does not show it, the waiting does.
	return t != nil && (t.Finished > 0 && t.Attainment < 0.99 || t.Lost() > 0 || t.Finished == 0 && t.Waiting > 0)
}

// routeServed is whether a completion of the window belongs to the route
// as it is now: the model serving it, as a fallback or not, in a pool that
// would take the request now. A pool gone dark served the last minute's
// requests but takes none now: counting it would point at the outage.
func routeServed(r *twin.RouteState, sv twin.TenantServed) bool {
	return sv.Model == r.Served && sv.Fallback == r.Fallback && slices.Contains(r.Pools, sv.Pool)
}

// routeTo says where a tenant's requests for a model go now: nothing, a
// fallback, or of the pools that would take them now the one that served
// most of them in the window (else the first), with its share.
func (m *Model) routeTo(r *twin.RouteState, t *twin.TenantState) string {
	st := m.st
	where := ""
	if t != nil {
		var total, top uint64
		for _, sv := range t.Served {
			if !routeServed(r, sv) {
				continue
			}
			total += sv.Count
			if sv.Count > top {
				top, where = sv.Count, sv.Pool
			}
		}
		if where != "" && top < total {
			where += st.dim.Render(" " + percent(float64(top)/float64(total)))
		}
	}
	if where == "" && len(r.Pools) > 0 {
		where = r.Pools[0]
		if len(r.Pools) > 1 {
			where += st.dim.Render(" +" + itoa(len(r.Pools)-1))
		}
	}
	switch {
	case r.Served == "":
		return st.bad.Render("✗ nothing serves it")
	case r.Fallback:
		return st.warn.Render("⤷ "+r.Served) + st.dim.Render(" fallback ") + where
	}
	return st.ok.Render("→ ") + where
}

// servedRegion is the region of the pool that served most of a route's
// requests in the window, for the two-line layout.
func (m *Model) servedRegion(r *twin.RouteState, t *twin.TenantState) string {
	if t == nil || r.Served == "" {
		return ""
	}
	var top uint64
	region := ""
	for _, sv := range t.Served {
		if routeServed(r, sv) && sv.Count > top {
			top, region = sv.Count, sv.Region
		}
	}
	if region == "" && len(r.Pools) > 0 {
		// Nothing of the window served where it goes now: the region of
		// the first pool that would take it.
		for _, p := range m.pools {
			if p.pool.Name == r.Pools[0] {
				region = p.region
			}
		}
	}
	if region == "" {
		return ""
	}
	return m.st.dim.Render(" in " + region)
}

// tenantFigures is a tenant's SLO attainment in the window and what it
// lost and has waiting, coloured by how bad.
func (m *Model) tenantFigures(t *twin.TenantState, waiting bool) string {
	st := m.st
	if t == nil {
		return ""
	}
	var out string
	if t.Finished > 0 {
		out = m.attainment(t.Attainment)
	} else {
		out = st.dim.Render("  —  ")
	}
	if n := t.Lost(); n > 0 {
		out += " " + st.bad.Render("lost "+count(n))
	}
	if t.Waiting > 0 && (waiting || t.Finished == 0) {
		// With nothing finished the waiting is all there is to show.
		out += st.dim.Render(" · ") + st.warn.Render(count(t.Waiting)+" waiting")
	}
	return out
}

// tenantLines is, per tenant, how it fares (SLO attainment in the window,
// requests lost, requests waiting) and where its requests for each model go
// now: the model itself, a fallback, or nowhere, and the pool that serves
// them. The degradation ladder and the queues head it. With one model a
// tenant is one line; with more, a line per model under the tenant's.
func (m *Model) tenantLines(w, h int) content {
	st := m.st
	s := &m.frame.Snap
	head := []string{m.ladder()}
	if len(s.Models) > 0 {
		qs := make([]string, 0, len(s.Models))
		for _, md := range s.Models {
			q := itoa(md.Queue)
			if md.Queue > 0 {
				q = st.warn.Render(q)
			}
			qs = append(qs, md.Name+" "+q)
		}
		head = append(head, st.dim.Render("queued ")+strings.Join(qs, st.dim.Render(" · ")))
	}
	if len(m.routes) == 0 {
		return content{lines: head}
	}
	// Tenants in the snapshot's order, then any only the routes name.
	var order []string
	for _, t := range s.Tenants {
		order = append(order, t.Name)
	}
	for _, r := range m.routes {
		if !slices.Contains(order, r.route.Tenant) {
			order = append(order, r.route.Tenant)
		}
	}
	tw := 4
	for _, n := range order {
		tw = max(tw, ansi.StringWidth(n))
	}
	tw = min(tw, max(w/3, 6))
	name := func(n string) string {
		p := padRight(n, tw)
		if ansi.StringWidth(p) > tw {
			p = ansi.Truncate(p, tw, "…")
		}
		return p
	}
	// With one model a tenant takes one line where room is short, two
	// (its figures, then where it is served) where there is room.
	oneLine := len(s.Models) <= 1 && len(head)+2*len(order) > h
	var body []string
	var alarm []bool
	sel := -1
	for _, tn := range order {
		t := m.tenantState(tn)
		jur := ""
		if t != nil && t.Jurisdiction != "" && w >= 50 {
			jur = st.dim.Render(" " + t.Jurisdiction)
		}
		if !oneLine {
			line := st.bold.Render(tn) + jur + " " + m.tenantFigures(t, true)
			if t != nil && t.Waiting > 0 && t.OldestWaiting > 0 {
				line += st.dim.Render(", oldest ") + secs(t.OldestWaiting)
			}
			body = append(body, line)
			alarm = append(alarm, hurt(t))
		}
		for i := range m.routes {
			ref := &m.routes[i]
			if ref.route.Tenant != tn {
				continue
			}
			marker, label := "  ", ref.model
			if oneLine {
				label = name(tn)
			}
			if ref.model == m.selModel && tn == m.selTenant {
				sel = len(body)
				marker = st.info.Render("▸ ")
				if m.focus == paneRoutes {
					label = st.selected.Render(label)
				} else {
					label = st.bold.Render(label)
				}
			}
			line := marker + label
			if oneLine {
				line += jur + " " + m.tenantFigures(t, w >= 50)
				// The destination after the figures, aligned where room
				// allows: the figures are the alarm, the pool the detail.
				line += " " + m.routeTo(ref.route, t)
			} else {
				line = "  " + line + " " + m.routeTo(ref.route, t) + m.servedRegion(ref.route, t)
			}
			body = append(body, line)
			alarm = append(alarm, oneLine && hurt(t) || ref.route.Served == "")
		}
	}
	c := window(body, alarm, sel, h-len(head), "hurt")
	c.lines = append(head, c.lines...)
	return c
}

func skippedTotal(rs []twin.ReasonCount) int {
	n := 0
	for _, r := range rs {
		n += r.Count
	}
	return n
}

// poolUp is a pool's "up" column, five cells: the replicas taking work of
// those it has, or, for an autoscaled pool, of those it asks for, with ↑
// while more are on the way (↓ while released ones drain), in the warn
// style while the provider has refused some it still asks for.
func (m *Model) poolUp(p *twin.PoolState) string {
	st := m.st
	const w = 5
	if a := p.Autoscale; a != nil {
		txt := itoa(p.Up) + "/" + itoa(a.Requested)
		switch {
		case a.OnTheWay() > 0 && len(txt) < w:
			txt += "↑"
		case a.Draining > 0 && len(txt) < w:
			txt += "↓"
		}
		up := padLeft(txt, w)
		switch {
		case p.Up == 0 && a.Requested > 0:
			return st.bad.Render(up)
		case a.Short() > 0 || p.Up < a.Serving:
			// Refused replicas still asked for, or serving ones the
			// router does not send work to (a breaker open).
			return st.warn.Render(up)
		}
		return up
	}
	up := padLeft(itoa(p.Up)+"/"+itoa(p.Replicas), w)
	switch {
	case p.Up == 0 && p.Replicas > 0:
		up = st.bad.Render(up)
	case p.Up < p.Replicas:
		up = st.warn.Render(up)
	}
	return up
}

// autoscaleLine is an autoscaled pool's scaler in words: what it asks
// for and holds, and the provider's last refusal.
func (m *Model) autoscaleLine(a *twin.AutoscaleState) string {
	st := m.st
	parts := []string{itoa(a.Requested) + " requested"}
	for _, c := range []struct {
		n    int
		what string
	}{{a.Provisioning, "provisioning"}, {a.Warming, "warming"}, {a.Serving, "serving"}, {a.Draining, "draining"}} {
		if c.n > 0 || c.what == "serving" {
			parts = append(parts, itoa(c.n)+" "+c.what)
		}
	}
	line := "autoscaled: " + strings.Join(parts, ", ")
	if a.LastRefused > 0 {
		ref := itoa(a.LastRefused) + " refused (" + a.LastRefusedWhy + ") at " + clock(a.LastRefusedAt)
		if a.Refused > uint64(a.LastRefused) {
			ref += " (" + count(a.Refused) + " in all)"
		}
		if a.Short() > 0 {
			// Still asked for: the refusal holds the pool short now.
			ref = st.warn.Render(ref)
		}
		line += "; " + ref
	}
	return line
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
	case kind == "refused":
		return st.warn.Render(kind)
	case kind == "scale", kind == "grant":
		return st.info.Render(kind)
	case kind == "replica-ready":
		return st.ok.Render(kind)
	case kind == "canary-rollback", kind == "canary-hold":
		return st.warn.Render(kind)
	case strings.HasPrefix(kind, "canary-"):
		return st.info.Render(kind)
	case kind == "fault-end", kind == "recovered", kind == "restore", kind == "ready", kind == "breaker-closed":
		return st.ok.Render(kind)
	}
	return st.dim.Render(kind)
}

// eventRow is a line of the event log: one timeline event, or a pool's
// breaker transitions of one kind grouped (n of them, from t to last).
type eventRow struct {
	t, last      time.Duration
	kind, detail string
	n            int      // events in the row
	replicas     []string // a breaker row's distinct replicas
}

// breakerGroupSpan is how far apart a pool's breaker transitions of one
// kind may be and still share a line of the event log.
const breakerGroupSpan = time.Minute

// breakerPool parses a breaker event's detail, "pool P replica N: replica
// N breaker closed → open", into the pool, the replica and the transition.
func breakerPool(detail string) (pool, replica, transition string, ok bool) {
	rest, ok := strings.CutPrefix(detail, "pool ")
	if !ok {
		return "", "", "", false
	}
	pool, rest, ok = strings.Cut(rest, " replica ")
	if !ok {
		return "", "", "", false
	}
	replica, rest, _ = strings.Cut(rest, ":")
	if _, tr, ok := strings.Cut(rest, " breaker "); ok {
		return pool, replica, tr, true
	}
	return pool, replica, "", true
}

// eventRows groups the timeline for the log: a pool's breaker transitions
// of one kind within breakerGroupSpan share a row ("3 replicas closed →
// open"), except for the pool selected in the fleet pane, whose rows are
// each shown.
func (m *Model) eventRows(ev []twin.TimelineEvent) []eventRow {
	rows := make([]eventRow, 0, len(ev))
	open := map[string]int{} // kind+pool → its row
	expand := ""
	if m.focus == paneFleet {
		expand = m.selPool
	}
	for _, e := range ev {
		t := eventTime(e)
		if strings.HasPrefix(e.Kind, "breaker-") {
			if pool, replica, tr, ok := breakerPool(e.Detail); ok && pool != expand {
				key := e.Kind + " " + pool
				if i, ok := open[key]; ok && t-rows[i].t <= breakerGroupSpan {
					// A replica that flaps is one replica, many
					// transitions: the row says both.
					r := &rows[i]
					r.n++
					r.last = t
					if !slices.Contains(r.replicas, replica) {
						r.replicas = append(r.replicas, replica)
					}
					k := len(r.replicas)
					r.detail = "pool " + pool + ": " + itoa(k) + " replica" + plural(k)
					if tr != "" {
						r.detail += " " + tr
					}
					if r.n > k {
						r.detail += ", " + itoa(r.n) + " times"
					}
					continue
				}
				open[key] = len(rows)
				rows = append(rows, eventRow{t: t, last: t, kind: e.Kind, detail: e.Detail, n: 1, replicas: []string{replica}})
				continue
			}
		}
		rows = append(rows, eventRow{t: t, last: t, kind: e.Kind, detail: e.Detail, n: 1})
	}
	return rows
}

// eventLines is the tail of the timeline, newest last, a pool's breaker
// transitions grouped (eventRows). Where wrap is set (wide layouts) a long
// event's text continues on the lines below it instead of being cut.
func (m *Model) eventLines(w, h int, wrap bool) content {
	ev := m.frame.Snap.Events
	if len(ev) == 0 {
		return content{lines: []string{m.st.dim.Render("no events yet")}}
	}
	rows := m.eventRows(ev)
	kw := 12
	if w >= 60 {
		kw = 17
	}
	indent := 8 + kw + 1 // "12:00.0 " + kind + " "
	var out [][]string   // per row, newest first
	used := 0
	shown := 0
	for i := len(rows) - 1; i >= 0 && used < h; i-- {
		r := rows[i]
		k := r.kind
		pad := ""
		if n := ansi.StringWidth(k); n < kw {
			pad = strings.Repeat(" ", kw-n)
		}
		detail := r.detail
		if r.n > 1 {
			detail += m.st.dim.Render(" by " + clockTenths(r.last))
		}
		lead := m.st.dim.Render(clockTenths(r.t)) + " " + m.eventStyle(k) + pad + " "
		lines := []string{lead + detail}
		switch {
		case !wrap || ansi.StringWidth(detail) <= w-indent:
		case w-indent >= 20:
			wrapped := strings.Split(lipgloss.Wrap(detail, w-indent, " "), "\n")
			lines = []string{lead + wrapped[0]}
			for _, l := range wrapped[1:] {
				lines = append(lines, strings.Repeat(" ", indent)+l)
			}
		default:
			// Too narrow beside the time and kind: the text goes under
			// them, indented, across the pane.
			lines = []string{lead}
			for _, l := range strings.Split(lipgloss.Wrap(detail, max(w-2, 8), " "), "\n") {
				lines = append(lines, "  "+l)
			}
		}
		if used+len(lines) > h {
			if used > 0 {
				break
			}
			lines = lines[:h]
		}
		out = append(out, lines)
		used += len(lines)
		shown++
	}
	c := content{above: len(rows) - shown}
	for i := len(out) - 1; i >= 0; i-- {
		c.lines = append(c.lines, out[i]...)
	}
	return c
}

// faultLines lists the drill's faults, newest first: active or ended, and
// the time to detect, mitigate and recover so far.
func (m *Model) faultLines(w, h int) []string {
	st := m.st
	fs := m.frame.Snap.Faults
	if len(fs) == 0 {
		return []string{st.dim.Render("no faults yet: ? lists the keys that inject one, : types one")}
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
	load := fmt.Sprintf("%s of replicas busy, %s of batch slots in use (%d of %d), %d running, %d waiting, %d in flight",
		percent(p.Utilization), percent(p.Saturation()), p.Inflight, p.Slots, p.Running, p.Waiting, p.Inflight)

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
	if p.Role == "prefill" {
		// A prefill pool serves no route: it computes prompts for the
		// decode pools of its region.
		l2 = "prefills " + strings.Join(p.Models, ", ") + " for the decode pools of " + ref.region + ": " +
			itoa(p.Inflight) + " prompt" + plural(p.Inflight) + " under way"
	}
	if p.Canary != "" {
		// A candidate pool is reached only through its canary: the
		// routes' view does not apply, its share does.
		share := st.info.Render(fmt.Sprintf("%.4g%%", 100*p.CanaryShare))
		if p.CanaryShare == 0 {
			share = st.warn.Render("0%")
		}
		l2 = "candidate of canary " + p.Canary + ": takes " + share + " of its eligible traffic"
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
	verb := " · serves "
	if p.Role == "prefill" {
		verb = " · prefills "
	}
	l4 := st.dim.Render(ref.region+" ("+ref.jurisdiction+") · provider "+p.Provider+verb) +
		strings.Join(p.Models, ", ") + st.dim.Render(" · dispatched "+count(p.Dispatched))
	var linkLine []string
	if k := p.Link; k != nil {
		// A decode pool's KV link: what moves into it, and at what rate
		// against its own (a silent fallback to TCP shows here first).
		rate := fmt.Sprintf("%.4g GB/s", k.BandwidthGBs)
		if k.BandwidthGBs < k.OwnGBs {
			rate = st.bad.Render(rate) + st.dim.Render(fmt.Sprintf(" (its own %.4g)", k.OwnGBs))
		}
		lat := secs(k.Latency)
		if k.Latency > k.OwnLatency {
			lat = st.warn.Render(lat) + st.dim.Render(" (its own "+secs(k.OwnLatency)+")")
		}
		linkLine = []string{"KV link in: " + itoa(k.Transfers) + " transfer" + plural(k.Transfers) + " under way at " + rate + " per replica, " + lat + " each"}
	}
	if p.Role != "" {
		l4 += st.dim.Render(" · role " + p.Role)
	}
	var lines []string
	if p.Autoscale != nil {
		lines = []string{l1, m.autoscaleLine(p.Autoscale), l2, l3, load}
	} else {
		lines = []string{l1, l2, l3, load}
	}
	return append(append(lines, linkLine...), l4)
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
	// Pools skipped by design (another jurisdiction, another model, too
	// small) are the route's shape; those skipped for trouble (a breaker
	// open, not ready, quota) are the news.
	var trouble, byDesign []twin.ReasonCount
	for _, rc := range r.Skipped {
		if troubleReason(rc.Reason) {
			trouble = append(trouble, rc)
		} else {
			byDesign = append(byDesign, rc)
		}
	}
	if n := skippedTotal(trouble); n > 0 {
		items = append(items, st.bad.Render("✗ "+itoa(n)+" pool"+plural(n)+" out")+": "+reasonList(trouble))
	}
	if t := m.tenantState(r.Tenant); t != nil {
		items = append(items, m.tenantWhy(t))
	}
	if n := skippedTotal(byDesign); n > 0 {
		items = append(items, st.dim.Render(itoa(n)+" pool"+plural(n)+" not for this route: "+reasonList(byDesign)))
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

// troubleReason is whether a pool skipped for reason is out of service
// (breaker open, not ready, quota exhausted) rather than not meant for the
// route. The reasons are the router's (sched's Skip constants).
func troubleReason(reason string) bool {
	for _, p := range []string{"circuit open", "not ready", "provider quota"} {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}

// tenantWhy is a tenant's figures over the window in words.
func (m *Model) tenantWhy(t *twin.TenantState) string {
	st := m.st
	jur := "anywhere"
	if t.Jurisdiction != "" {
		jur = "in " + t.Jurisdiction
	}
	out := t.Name + st.dim.Render(" (served "+jur+"): ")
	if t.Finished == 0 {
		out += st.dim.Render("nothing finished in the last " + span(m.window()))
	} else {
		out += "SLO " + m.attainment(t.Attainment) + st.dim.Render(" of "+count(t.Finished)+" in the last "+span(m.window()))
	}
	if n := t.Lost(); n > 0 {
		out += ", " + st.bad.Render(count(n)+" lost") + st.dim.Render(" ("+count(t.Rejected)+" refused, "+count(t.TimedOut)+" timed out, "+count(t.Failed)+" failed)")
	}
	if t.Waiting > 0 {
		out += ", " + st.warn.Render(count(t.Waiting)+" waiting, oldest "+secs(t.OldestWaiting))
	}
	var where []string
	for _, sv := range t.Served {
		w := sv.Pool + " (" + sv.Region
		if sv.Fallback {
			w += ", fallback " + sv.Model
		}
		where = append(where, w+") "+count(sv.Count))
	}
	if len(where) > 0 {
		out += st.dim.Render("; served by ") + strings.Join(where, ", ")
	}
	return out
}

// window is the span of the snapshot's recent figures.
func (m *Model) window() time.Duration {
	for _, c := range m.frame.Snap.Classes {
		if c.Window > 0 {
			return c.Window
		}
	}
	return time.Minute
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
