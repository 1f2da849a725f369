package tui

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/fleetdrill/fleetdrill/twin"
)

// Golden frames are pinned to a colour profile: ASCII (no colour, bold
// and reverse kept: what a terminal without colours shows, and a diff a
// person can read), and for one frame ANSI, the 16 colours the console
// uses. Regenerate with `go test ./internal/tui -update` and read the diff.

// probe wraps the model so a test can ask the running program for the
// frame it would draw now, from the program's own goroutine (no race).
type probe struct{ *Model }

// screenMsg asks the probe for the frame.
type screenMsg struct{ reply chan<- string }

func (p probe) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if s, ok := msg.(screenMsg); ok {
		s.reply <- p.Render()
		return p, nil
	}
	_, cmd := p.Model.Update(msg)
	return p, cmd
}

// console runs a model in a teatest program of w×h with the colour
// profile pinned.
func console(t *testing.T, m *Model, w, h int) *teatest.TestModel {
	t.Helper()
	return teatest.NewTestModel(t, probe{m},
		teatest.WithInitialTermSize(w, h),
		teatest.WithProgramOptions(tea.WithColorProfile(colorprofile.ANSI)))
}

// screen returns the frame the program would draw now.
func screenNow(t *testing.T, tm *teatest.TestModel) string {
	t.Helper()
	reply := make(chan string, 1)
	tm.Send(screenMsg{reply})
	select {
	case s := <-reply:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("the program did not answer")
		return ""
	}
}

// screenWhere polls the program's frame until ok holds for its plain text.
func screenWhere(t *testing.T, tm *teatest.TestModel, what string, ok func(plain string) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := screenNow(t, tm)
		if ok(ansi.Strip(s)) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the screen never showed %s; last:\n%s", what, ansi.Strip(s))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pinned downsamples a frame to profile p, as Bubble Tea's renderer would
// for a terminal of that profile.
func pinned(s string, p colorprofile.Profile) string {
	var b strings.Builder
	w := &colorprofile.Writer{Forward: &b, Profile: p}
	_, _ = w.WriteString(s)
	return b.String()
}

// feed returns a channel holding frames, then left open.
func feed(frames ...Frame) chan Frame {
	ch := make(chan Frame, len(frames)+1)
	for _, f := range frames {
		ch <- f
	}
	return ch
}

// startSnapshot is the drill's first frame: nothing has run yet.
func startSnapshot() Frame {
	s := calmSnapshot()
	s.Now = 0
	for i := range s.Regions {
		p := &s.Regions[i].Pools[0]
		p.Up, p.Health, p.Utilization, p.Running, p.Waiting, p.Inflight, p.Dispatched = 0, "down", 0, 0, 0, 0, 0
	}
	c := &s.Classes[0]
	c.TTFTP99, c.E2EP99, c.Attainment, c.Completed, c.Finished, c.TotalArrived, c.TotalSLOMet = 0, 0, 1, 0, 0, 0, 0
	s.Models[0].Queue = 0
	s.Events = []twin.TimelineEvent{
		{TS: 0, Kind: "cold-start", Detail: "pool use-h100-8b: 3 replicas loading (2m0s)"},
		{TS: 0, Kind: "cold-start", Detail: "pool euw-a100-8b: 3 replicas loading (2m0s)"},
		{TS: 0, Kind: "cold-start", Detail: "pool euc-a100-8b: 3 replicas loading (2m0s)"},
	}
	s.Requests = twin.Counts{}
	return Frame{Snap: s, Speed: 60, Paused: true}
}

func quit(t *testing.T, tm *teatest.TestModel) {
	t.Helper()
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
}

func TestGoldenStart(t *testing.T) {
	m := New(feed(startSnapshot()), func(command) {})
	tm := console(t, m, 80, 24)
	s := screenWhere(t, tm, "the first frame", func(p string) bool { return strings.Contains(p, "paused") })
	quit(t, tm)
	golden.RequireEqual(t, pinned(s, colorprofile.ASCII))
}

// outageFrames is twelve minutes of history ending two minutes into the
// eu-west outage.
func outageFrames() []Frame { return history(outageSnapshot(), 24) }

func TestGoldenOutage(t *testing.T) {
	for _, tt := range []struct {
		name    string
		w, h    int
		profile colorprofile.Profile
	}{
		{"80x24", 80, 24, colorprofile.ASCII},
		{"120x40", 120, 40, colorprofile.ASCII},
		{"200x60", 200, 60, colorprofile.ASCII},
		{"80x24-ansi", 80, 24, colorprofile.ANSI},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := New(feed(outageFrames()...), func(command) {})
			tm := console(t, m, tt.w, tt.h)
			s := screenWhere(t, tm, "12:00", func(p string) bool { return strings.Contains(p, "sim 12:00") })
			quit(t, tm)
			golden.RequireEqual(t, pinned(s, tt.profile))
		})
	}
}

func TestGoldenSummary(t *testing.T) {
	frames := append(outageFrames(), Frame{Snap: recoveredSnapshot(), Paused: true, Speed: 60,
		Final: &Result{At: 30 * time.Minute, Report: summaryReport(),
			Recorded: []string{"regional-outage region=eu-west at=10m for=15m"}}})
	m := New(feed(frames...), func(command) {})
	m.base = Base{Name: "gameday-regional-outage", Sets: []string{"seed=11"}}
	tm := console(t, m, 80, 24)
	s := screenWhere(t, tm, "the summary", func(p string) bool { return strings.Contains(p, "Game day summary") })
	quit(t, tm)
	golden.RequireEqual(t, pinned(s, colorprofile.ASCII))
}

// summaryReport is the final report behind the summary's golden frame:
// one expectation failed, the tenants' totals.
func summaryReport() *twin.Report {
	tenant := func(arrived, met, rejected, timedOut, fallbacks uint64) *twin.Group {
		g := &twin.Group{SLOMet: met, SLOAttainment: twin.Ratio(float64(met) / float64(arrived))}
		g.Arrived, g.Rejected, g.TimedOut, g.Fallbacks = arrived, rejected, timedOut, fallbacks
		return g
	}
	return &twin.Report{Scenario: "gameday-regional-outage", Seed: 11,
		Requests: twin.Counts{Arrived: 9000},
		Tenants: map[string]*twin.Group{
			"bank-eu":   tenant(3000, 2961, 20, 15, 0),
			"retail-us": tenant(4000, 3998, 0, 0, 0),
			"global":    tenant(2000, 1985, 10, 0, 0),
		},
		Expectations: []twin.Expectation{
			{Expr: "interactive.ttft.p99 < 2s", Value: 2.8, Pass: false},
			{Expr: "interactive.slo_attainment >= 0.99", Value: 0.99378, Pass: true},
			{Expr: "residency_violations == 0", Value: 0, Pass: true},
		}}
}

func TestGoldenHelp(t *testing.T) {
	m := New(feed(outageFrames()...), func(command) {})
	tm := console(t, m, 80, 24)
	screenWhere(t, tm, "12:00", func(p string) bool { return strings.Contains(p, "sim 12:00") })
	tm.Type("?")
	s := screenWhere(t, tm, "the help", func(p string) bool { return strings.Contains(p, "any key closes") })
	quit(t, tm)
	golden.RequireEqual(t, pinned(s, colorprofile.ASCII))
}

// TestKeysDriveTheDrill runs the console on a real driver and a fake
// engine, as fleetdrill tui does: o injects an outage of the selected
// pool's region into the engine, space pauses the drill and the status
// bar says so, q then y finishes the drill and shows the summary, and a
// second q quits the program.
func TestKeysDriveTheDrill(t *testing.T) {
	eng := newFake(calmSnapshot())
	d, err := NewDriver(eng, DriverOptions{Speed: 60, FrameEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resc := make(chan Result, 1)
	go func() { resc <- d.Run(ctx) }()
	m := New(d.Frames(), d.Send)
	tm := console(t, m, 80, 24)
	screenWhere(t, tm, "the fleet, running", func(p string) bool {
		return strings.Contains(p, "use-h100-8b") && strings.Contains(p, "running")
	})

	tm.Type("o")
	screenWhere(t, tm, "the injection's notice", func(p string) bool {
		return strings.Contains(p, "regional-outage(us-east) injected at")
	})
	if injected, _, _, _ := eng.calls(); !slices.Equal(injected, []string{"regional-outage region=us-east at=0s"}) {
		t.Fatalf("the engine received %q, want the outage of us-east", injected)
	}

	tm.Send(tea.KeyPressMsg{Code: ' ', Text: " "})
	screenWhere(t, tm, "paused", func(p string) bool { return strings.Contains(p, "⏸ paused") })
	// The status bar says paused as soon as the key is pressed; give the
	// driver a few frames to take the command before watching the engine.
	time.Sleep(100 * time.Millisecond)
	_, _, before, _ := eng.calls()
	time.Sleep(100 * time.Millisecond)
	if _, _, after, _ := eng.calls(); after != before {
		t.Fatalf("the engine advanced %d times while paused", after-before)
	}

	// q asks before it finishes a running drill; y finishes it.
	tm.Type("q")
	screenWhere(t, tm, "the quit prompt", func(p string) bool { return strings.Contains(p, "finish the drill now? y/n") })
	tm.Type("y")
	screenWhere(t, tm, "the summary", func(p string) bool {
		return strings.Contains(p, "Game day summary") && strings.Contains(p, "regional-outage(us-east) *")
	})
	tm.Type("q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	final := tm.FinalModel(t).(probe)
	if final.final == nil || final.final.Ended {
		t.Fatalf("final result %+v, want a drill stopped by the operator", final.final)
	}
	res := <-resc
	if len(res.Recorded) != 1 || !strings.HasPrefix(res.Recorded[0], "regional-outage region=us-east at=5m") {
		t.Fatalf("recorded %q, want the injected outage at its time", res.Recorded)
	}
	if _, _, _, reported := eng.calls(); !reported {
		t.Fatal("the engine's report was not taken")
	}
}
