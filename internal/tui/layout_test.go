package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// render is the model's frame at w×h, without styles.
func render(m *Model, w, h int) string {
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return ansi.Strip(m.Render())
}

// The header never loses the alarm: at every width the console draws, down
// to the narrowest, a paused drill with a fault active and a class over its
// SLO says all three on the top line.
func TestAlarmSurvivesTheNarrowestWidth(t *testing.T) {
	for w := minWidth; w <= 200; w++ {
		m, _ := newTestModel(Frame{Snap: outageSnapshot(), Speed: 60, Paused: true})
		top := strings.SplitN(render(m, w, 24), "\n", 2)[0]
		if n := ansi.StringWidth(top); n != w {
			t.Fatalf("width %d: the header is %d cells", w, n)
		}
		for _, want := range []string{"paused", "1 fault", "SLO"} {
			if !strings.Contains(top, want) {
				t.Errorf("width %d: the header lacks %q: %q", w, want, top)
			}
		}
	}
}

// The outage frame answers the SRE's questions at 80×24: what is down,
// which tenants are hurt and how badly, where traffic went, whether the
// class's SLO holds.
func TestOutageFrameAnswers(t *testing.T) {
	m, _ := newTestModel(outageFrames()...)
	out := render(m, 80, 24)
	for _, want := range []string{
		"eu-west · eu DOWN", "○ euw-a100-8b", // what is down
		"bank-eu", "71.0% lost 35", // who is hurt, how badly
		"→ euc-a100-8b",         // where its traffic went
		"✗ SLO interactive",     // the class's SLO does not hold
		"30 waiting, oldest 41", // and why, while it happens
		"38.0s/2.00s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the 80×24 outage frame lacks %q:\n%s", want, out)
		}
	}
}

// manyRegions is a fleet of n healthy regions of two pools with the last
// region down, the selection on the first pool.
func manyRegions(n int) twin.Snapshot {
	s := outageSnapshot()
	s.Regions = nil
	for r := range n {
		rs := twin.RegionState{Name: fmt.Sprintf("region-%d", r), Jurisdiction: "us"}
		for p := range 2 {
			ps := twin.PoolState{Name: fmt.Sprintf("r%d-pool-%d", r, p), Provider: "cloud", Replicas: 2, Up: 2, Health: "healthy", Slots: 128}
			if r == n-1 {
				ps.Up, ps.Health = 0, "down"
			}
			rs.Pools = append(rs.Pools, ps)
		}
		s.Regions = append(s.Regions, rs)
	}
	return s
}

// A down region is never out of view without a word: where the fleet does
// not fit, healthy regions fold into a line each; where even that does not
// fit, the scroll marker counts the pools down below the edge.
func TestDownRegionNeverHidden(t *testing.T) {
	for _, tt := range []struct {
		regions    int
		w, h       int
		wantFolded bool
		wantMarker bool
	}{
		{5, 80, 24, true, false},
		{14, 80, 24, true, true},
		{5, 200, 60, false, false},
	} {
		t.Run(fmt.Sprintf("%d regions at %dx%d", tt.regions, tt.w, tt.h), func(t *testing.T) {
			m, _ := newTestModel(Frame{Snap: manyRegions(tt.regions), Speed: 60})
			out := render(m, tt.w, tt.h)
			down := fmt.Sprintf("region-%d · us DOWN", tt.regions-1)
			switch {
			case tt.wantMarker:
				if !strings.Contains(out, "more, 2 down") {
					t.Errorf("no marker counts the pools down out of view:\n%s", out)
				}
			default:
				if !strings.Contains(out, down) {
					t.Errorf("the down region is not on screen:\n%s", out)
				}
			}
			if folded := strings.Contains(out, "2 pools healthy"); folded != tt.wantFolded {
				t.Errorf("healthy regions folded = %v, want %v:\n%s", folded, tt.wantFolded, out)
			}
		})
	}
}

// Scroll markers: a list cut by its pane says how much is out of view on
// each side, and what needs attention there on that side only.
func TestScrollMarkers(t *testing.T) {
	snap := manyRegions(30)
	m, _ := newTestModel(Frame{Snap: snap, Speed: 60})
	m.selPool = "r15-pool-0" // a healthy region in the middle: folds stop short of it
	for i := range snap.Regions[:15] {
		// The first half down too, so both edges hide pools down.
		if i < 2 {
			for j := range snap.Regions[i].Pools {
				snap.Regions[i].Pools[j].Up, snap.Regions[i].Pools[j].Health = 0, "down"
			}
		}
	}
	m.Update(frameMsg(Frame{Snap: snap, Speed: 60}))
	c := m.fleetLines(38, 8)
	if c.above == 0 || c.below == 0 {
		t.Fatalf("the selection in the middle of 30 regions leaves nothing out of view: above %d, below %d", c.above, c.below)
	}
	if c.alarmAbove != "4 down" || c.alarmBelow != "2 down" {
		t.Errorf("alarms out of view: above %q, below %q; want 4 down above (regions 0, 1) and 2 down below (region 29)", c.alarmAbove, c.alarmBelow)
	}
	out := render(m, 80, 24)
	if !strings.Contains(out, "↑ ") || !strings.Contains(out, "more, 4 down") || !strings.Contains(out, "more, 2 down") {
		t.Errorf("the markers do not say what is down on each side:\n%s", out)
	}
}

// The event log groups a pool's breaker transitions, and shows each for
// the pool selected.
func TestBreakerEventsGrouped(t *testing.T) {
	m, _ := newTestModel(Frame{Snap: outageSnapshot(), Speed: 60})
	plain := func() string {
		return ansi.Strip(strings.Join(m.eventLines(200, 40, false).lines, "\n"))
	}
	if out := plain(); !strings.Contains(out, "pool euw-a100-8b: 3 replicas closed → open by 10:12.2") ||
		strings.Count(out, "breaker-open") != 1 {
		t.Errorf("the breaker transitions are not grouped:\n%s", out)
	}
	m.selPool = "euw-a100-8b"
	if out := plain(); strings.Count(out, "breaker closed → open") != 3 {
		t.Errorf("the selected pool's transitions are not each shown:\n%s", out)
	}
	// A replica that flaps is one replica opening its breaker many times.
	snap := outageSnapshot()
	for i := range 5 {
		snap.Events = append(snap.Events, twin.TimelineEvent{TS: 640 + float64(i), Kind: "breaker-open",
			Detail: "pool use-h100-8b replica 7: replica 7 breaker closed → open"})
	}
	m, _ = newTestModel(Frame{Snap: snap, Speed: 60})
	m.selPool = "euc-a100-8b" // the selected pool's events are each shown
	if out := plain(); !strings.Contains(out, "pool use-h100-8b: 1 replica closed → open, 5 times") {
		t.Errorf("a flapping replica is counted as many:\n%s", out)
	}
}

// The latency panel breaches within one refresh of a region going dark
// with requests waiting: a real drill of the regional outage, a frame a
// simulated second, the console shows the class over its SLO at the first
// frame where a request has waited past the objective, though the
// completed requests' p99 alone is still within it.
func TestLatencyBreachesWithinOneRefresh(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("gameday-regional-outage", []string{"duration=14m", "drain=1m"})
	d := newDrill(t, sc, err)
	m, _ := newTestModel()
	const outage = 10 * time.Minute
	d.Advance(outage - 30*time.Second)
	const refresh = time.Second
	hidden := false
	for t0 := d.Now(); t0 < outage+3*time.Minute; t0 += refresh {
		d.Advance(t0 + refresh)
		snap := d.Snapshot()
		m.Update(frameMsg(Frame{Snap: snap, Speed: 60}))
		c := snap.Classes[0]
		out := render(m, 80, 24)
		top := strings.SplitN(out, "\n", 2)[0]
		// The objective is a p99: it is breached when the p99 that counts
		// the waiting requests at their age is over it.
		breached := c.TTFTP99Now() > c.SLOTTFT
		if snap.Now < outage && breached {
			t.Fatalf("%v: TTFT p99 %v over the SLO before the outage", snap.Now, c.TTFTP99Now())
		}
		if !breached {
			if strings.Contains(top, "✗ SLO") && c.TTFTP99 <= c.SLOTTFT && c.E2EP99 <= c.SLOE2E && c.Attainment >= 0.95 {
				t.Fatalf("%v: the header says SLO breach with nothing over it:\n%s", snap.Now, out)
			}
			continue
		}
		// The first frame over the objective: the header, the class line
		// and its value say so in this frame, not the next.
		if !strings.Contains(top, "✗ SLO interactive") {
			t.Errorf("%v: TTFT p99 with the waiting is %v (SLO %v) and the header does not say so:\n%s", snap.Now, c.TTFTP99Now(), c.SLOTTFT, out)
		}
		if !strings.Contains(out, "waiting, oldest") {
			t.Errorf("%v: the class line does not say requests wait:\n%s", snap.Now, out)
		}
		if !strings.Contains(out, secs(c.TTFTP99Now())+"/"+secs(c.SLOTTFT)) {
			t.Errorf("%v: the TTFT value shown is not the p99 with the waiting, %v:\n%s", snap.Now, secs(c.TTFTP99Now()), out)
		}
		hidden = c.TTFTP99 <= c.SLOTTFT
		t.Logf("breach shown at %v, %v into the outage: oldest waiting %v, p99 with waiting %v, completed p99 %v",
			snap.Now, snap.Now-outage, c.OldestWaiting, c.TTFTP99Now(), c.TTFTP99)
		break
	}
	if !hidden {
		t.Errorf("no frame had a request waiting past the SLO while the completed p99 was within it: the test shows nothing")
	}
}

// A canary's candidate pool says whose it is and the share it takes, and
// the rollback shows on the event log as a warning line with its figures.
func TestCanaryOnTheConsole(t *testing.T) {
	sc, err := scenarios.Load("../../twin/testdata/canary.yaml")
	d := newDrill(t, sc, err)
	m, _ := newTestModel()
	m.selPool = "neo-h100"
	frame := func(at time.Duration) string {
		d.Advance(at)
		m.Update(frameMsg(Frame{Snap: d.Snapshot(), Speed: 60}))
		return render(m, 200, 60)
	}
	if out := frame(10 * time.Minute); !strings.Contains(out, "candidate of canary neocloud: takes 5%") {
		t.Errorf("at 10m the candidate's detail lacks its canary at 5%%:\n%s", out)
	}
	out := frame(14 * time.Minute)
	for _, want := range []string{"candidate of canary neocloud: takes 0%", "canary-rollback", "> 2.00%"} {
		if !strings.Contains(out, want) {
			t.Errorf("after the rollback the frame lacks %q:\n%s", want, out)
		}
	}
}

// An autoscaled pool shows the replicas serving of those it asks for, with
// ↑ while more are on the way, and in its detail what its scaler holds;
// after a stockout the provider's refusal shows, in the warn style while
// the pool is short. A real drill: M/M/c at 1.5 times what its 4
// replicas serve, autoscaled to 8 with a 2 min provisioning delay, and a
// stockout from 2m45s to 6m45s that refuses the second scale-up.
func TestAutoscaleOnTheConsole(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("mmc", []string{"duration=12m", "warmup=0s", "drain=1m",
		"pools.mmc.autoscale={metric: utilization, target: 0.7, min_replicas: 4, max_replicas: 8, sync_period: 30s}",
		"pools.mmc.acquisition={delay: {distribution: constant, mean: 2m}}",
		"pools.mmc.cold_start=30s",
		"workload.poisson.arrivals.rate=3",
		"faults=[stockout pool=mmc at=2m45s for=4m]"})
	d := newDrill(t, sc, err)
	m, _ := newTestModel()
	m.selPool = "mmc"
	var pool twin.PoolState
	frame := func(at time.Duration) string {
		d.Advance(at)
		snap := d.Snapshot()
		pool = snap.Regions[0].Pools[0]
		if pool.Autoscale == nil {
			t.Fatalf("%v: the autoscaled pool's snapshot has no scaler", at)
		}
		m.Update(frameMsg(Frame{Snap: snap, Speed: 60}))
		out := render(m, 80, 24)
		for i, l := range strings.Split(out, "\n") {
			if n := ansi.StringWidth(l); n != 80 {
				t.Fatalf("%v: line %d is %d cells wide:\n%s", at, i, n, out)
			}
		}
		return out
	}
	fleetLine := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, " mmc ") && strings.Contains(l, "%") {
				return l
			}
		}
		t.Fatalf("no pool line for mmc:\n%s", out)
		return ""
	}
	expect := func(at time.Duration, out string, wants ...string) {
		t.Helper()
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("%v: the frame lacks %q:\n%s", at, want, out)
			}
		}
	}

	// 30s: the first sync asks for 6; two are provisioning at 1m.
	at := time.Minute
	out := frame(at)
	if !strings.Contains(fleetLine(out), "4/6↑") {
		t.Errorf("%v: the pool line does not show 4 serving of 6 asked, on the way:\n%s", at, out)
	}
	expect(at, out, "autoscaled: 6 requested, 2 provisioning, 4 serving")
	if up := m.poolUp(&pool); up != padLeft("4/6↑", 5) {
		t.Errorf("%v: replicas on the way, none refused: the up column is %q, want it plain", at, up)
	}
	// 2m30s: up, loading their model until 3m.
	at = 2*time.Minute + 45*time.Second
	out = frame(at)
	expect(at, out, "4/6↑", "autoscaled: 6 requested, 2 warming, 4 serving")
	// 3m: the scale-up to 8 meets the stockout, refused and asked again
	// each sync period.
	at = 4 * time.Minute
	out = frame(at)
	if !strings.Contains(fleetLine(out), "6/8↑") {
		t.Errorf("%v: the pool line does not show 6 serving of 8 asked:\n%s", at, out)
	}
	expect(at, out, "autoscaled: 8 requested, 6 serving; 2 refused (stockout) at 04:00 (4 in all)")
	if a := pool.Autoscale; a.Short() != 2 || a.LastRefusedWhy != twin.RefusedStockout {
		t.Errorf("%v: the scaler is %+v, want 2 short, refused for the stockout", at, *a)
	}
	if up, want := m.poolUp(&pool), m.st.warn.Render(padLeft("6/8↑", 5)); up != want {
		t.Errorf("%v: refused replicas still asked for: the up column is %q, want %q (warn)", at, up, want)
	}
	if !strings.Contains(m.autoscaleLine(pool.Autoscale), m.st.warn.Render("2 refused (stockout) at 04:00 (4 in all)")) {
		t.Errorf("%v: the refusal is not a warning while the pool is short: %q", at, m.autoscaleLine(pool.Autoscale))
	}
	if wide := render(m, 200, 60); !strings.Contains(wide, "refused      pool mmc: 2 replicas refused") {
		t.Errorf("%v: the event log lacks the refusal:\n%s", at, wide)
	}
	if got, want := m.eventStyle("refused"), m.st.warn.Render("refused"); got != want {
		t.Errorf("a refusal's event kind is %q, want the warn style %q", got, want)
	}
	// 6m45s: the stockout ends, the next ask is granted at 7m and serves
	// at 9m30s; the refusal stays in the detail, no longer a warning.
	at = 10 * time.Minute
	out = frame(at)
	if l := fleetLine(out); !strings.Contains(l, " 8/8 ") || strings.Contains(l, "↑") {
		t.Errorf("%v: all 8 serve and the pool line says otherwise: %q", at, l)
	}
	expect(at, out, "autoscaled: 8 requested, 8 serving; 2 refused (stockout) at 06:30 (14 in all)")
	if up := m.poolUp(&pool); up != padLeft("8/8", 5) {
		t.Errorf("%v: the up column is %q, want it plain", at, up)
	}
}

// newDrill is a twin drill of sc, loaded with err; the test stops on
// either's error.
func newDrill(t *testing.T, sc *scenarios.Scenario, err error) *twin.Drill {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	d, err := twin.NewDrill(sc, twin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
