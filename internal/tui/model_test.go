package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/twin"
)

// newTestModel is a model fed frames by hand, whose commands are
// collected.
func newTestModel(frames ...Frame) (*Model, *[]command) {
	var sent []command
	m := New(nil, func(c command) { sent = append(sent, c) })
	for _, f := range frames {
		m.Update(frameMsg(f))
	}
	return m, &sent
}

func press(m *Model, keys ...string) {
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "space":
			msg = tea.KeyPressMsg{Code: ' ', Text: " "}
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "up":
			msg = tea.KeyPressMsg{Code: tea.KeyUp}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "backspace":
			msg = tea.KeyPressMsg{Code: tea.KeyBackspace}
		case "ctrl+c":
			msg = tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
		default:
			msg = tea.KeyPressMsg{Code: rune(k[0]), Text: k}
		}
		m.Update(msg)
	}
}

func TestKeysSendCommands(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want command
	}{
		{"outage of the pool's region", []string{"o"}, command{kind: cmdInject, line: "regional-outage region=us-east at=0s"}},
		{"brownout of the pool's region", []string{"b"}, command{kind: cmdInject, line: "brownout region=us-east at=0s fail=0.2 latency=200ms"}},
		{"quota of the pool's provider", []string{"x"}, command{kind: cmdInject, line: "quota-exhaustion provider=gpu-cloud-a at=0s"}},
		{"node loss of one replica", []string{"n"}, command{kind: cmdInject, line: "node-loss pool=use-h100-8b at=0s count=1"}},
		{"driver upgrade to a driver the runtime refuses", []string{"d"}, command{kind: cmdInject, line: "driver-upgrade pool=use-h100-8b at=0s driver=535.104"}},
		{"retirement of the route's model", []string{"r"}, command{kind: cmdInject, line: "model-retirement model=llama-3.1-8b at=0s"}},
		{"latency on the pool", []string{"l"}, command{kind: cmdInject, line: "latency pool=use-h100-8b at=0s latency=2s"}},
		{"error burst on the pool", []string{"f"}, command{kind: cmdInject, line: "error-burst pool=use-h100-8b at=0s fail=0.5"}},
		{"cold-start storm on the pool", []string{"c"}, command{kind: cmdInject, line: "cold-start-storm pool=use-h100-8b at=0s"}},
		{"selection moves down a pool", []string{"down", "o"}, command{kind: cmdInject, line: "regional-outage region=eu-west at=0s"}},
		{"selection wraps up to the last pool", []string{"up", "n"}, command{kind: cmdInject, line: "node-loss pool=euc-a100-8b at=0s count=1"}},
		{"tab moves the arrows to routes", []string{"tab", "down", "down", "x"}, command{kind: cmdInject, line: "quota-exhaustion provider=gpu-cloud-a at=0s"}},
		{"space pauses a running drill", []string{"space"}, command{kind: cmdPause}},
		{"p pauses too", []string{"p"}, command{kind: cmdPause}},
		{"s steps a frame", []string{"s"}, command{kind: cmdStep}},
		{". steps an event", []string{"."}, command{kind: cmdStepEvent}},
		{"+ goes a step faster", []string{"+"}, command{kind: cmdSpeed, speed: 120}},
		{"- goes a step slower", []string{"-"}, command{kind: cmdSpeed, speed: 30}},
		{"q, y finishes the drill", []string{"q", "y"}, command{kind: cmdFinish}},
		{"ctrl+c finishes it too", []string{"ctrl+c"}, command{kind: cmdFinish}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
			press(m, tt.keys...)
			if len(*sent) != 1 {
				t.Fatalf("keys %v sent %d commands (%+v), want 1", tt.keys, len(*sent), *sent)
			}
			if got := (*sent)[0]; got != tt.want {
				t.Fatalf("keys %v sent %+v, want %+v", tt.keys, got, tt.want)
			}
			if tt.want.kind == cmdInject {
				if _, err := faults.Parse(tt.want.line); err != nil {
					t.Fatalf("the injected line does not parse: %v", err)
				}
			}
		})
	}
}

func TestPauseTogglesAndShows(t *testing.T) {
	m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
	if !strings.Contains(m.Render(), "running") {
		t.Fatalf("a running drill's status bar does not say running:\n%s", m.Render())
	}
	press(m, "space")
	if !strings.Contains(m.Render(), "paused") {
		t.Fatalf("after space the status bar does not say paused:\n%s", m.Render())
	}
	m.Update(frameMsg(Frame{Snap: calmSnapshot(), Speed: 60, Paused: true}))
	press(m, "space")
	if got := (*sent)[len(*sent)-1]; got.kind != cmdResume {
		t.Fatalf("space on a paused drill sent %+v, want resume", got)
	}
}

func TestSpeedStopsAtTheEnds(t *testing.T) {
	for _, tt := range []struct {
		cur  float64
		dir  int
		want float64
	}{
		{60, 1, 120}, {60, -1, 30}, {45, 1, 60}, {45, -1, 30}, {3000, 1, 3000}, {0.25, -1, 0.25}, {5000, -1, 3000},
	} {
		if got := nextSpeed(tt.cur, tt.dir); got != tt.want {
			t.Errorf("nextSpeed(%g, %d) = %g, want %g", tt.cur, tt.dir, got, tt.want)
		}
	}
}

func TestEndFault(t *testing.T) {
	t.Run("ends the fault on the selected pool's region", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: outageSnapshot(), Speed: 60})
		press(m, "down", "e")
		want := command{kind: cmdEndFault, label: "regional-outage(eu-west)"}
		if len(*sent) != 1 || (*sent)[0] != want {
			t.Fatalf("e sent %+v, want [%+v]", *sent, want)
		}
	})
	t.Run("falls back to the latest injected fault", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: outageSnapshot(), Speed: 60})
		press(m, "e") // use-h100-8b is not hit by the outage
		if len(*sent) != 1 || (*sent)[0].label != "regional-outage(eu-west)" {
			t.Fatalf("e sent %+v, want the injected outage ended", *sent)
		}
	})
	t.Run("nothing active: a notice, no command", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, "e")
		if len(*sent) != 0 {
			t.Fatalf("e sent %+v with no active fault", *sent)
		}
		if !strings.Contains(m.Render(), "no active fault to end") {
			t.Fatalf("no notice on the screen:\n%s", m.Render())
		}
	})
}

func TestFaultToEndPrefersTheSelection(t *testing.T) {
	s := outageSnapshot()
	s.Faults = append(s.Faults,
		faultState("node-loss(use-h100-8b)", "node-loss pool=use-h100-8b at=11m count=1", 11*time.Minute, false),
		faultState("model-retirement(llama-3.1-8b)", "model-retirement model=llama-3.1-8b at=11m30s", 11*time.Minute+30*time.Second, false),
	)
	sel := selection{Pool: "use-h100-8b", Region: "us-east", Provider: "gpu-cloud-a", Model: "llama-3.1-8b"}
	if got := faultToEnd(s.Faults, sel, false); got != "node-loss(use-h100-8b)" {
		t.Errorf("pool focus: faultToEnd = %q, want the node loss", got)
	}
	if got := faultToEnd(s.Faults, sel, true); got != "model-retirement(llama-3.1-8b)" {
		t.Errorf("route focus: faultToEnd = %q, want the retirement", got)
	}
	sel = selection{Pool: "nowhere"}
	if got := faultToEnd(s.Faults, sel, false); got != "regional-outage(eu-west)" {
		t.Errorf("no hit: faultToEnd = %q, want the injected outage", got)
	}
}

func TestFinalFrameShowsTheSummary(t *testing.T) {
	m, sent := newTestModel(Frame{Snap: outageSnapshot(), Speed: 60})
	press(m, "q", "y")
	if !strings.Contains(m.Render(), "finishing the drill") {
		t.Fatalf("after q, before the final frame:\n%s", m.Render())
	}
	m.Update(frameMsg(Frame{Snap: recoveredSnapshot(), Paused: true, Final: &Result{At: 30 * time.Minute}}))
	out := m.Render()
	for _, want := range []string{"Game day summary", "stopped at 30:00 of 40:00", "regional-outage(eu-west) *", "9.00s", "12.8s", "recovered"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	press(m, "esc")
	if !strings.Contains(m.Render(), "Fleet") {
		t.Fatalf("esc did not go back to the console:\n%s", m.Render())
	}
	press(m, "o")
	if len(*sent) != 1 {
		t.Fatalf("keys after the end sent commands: %+v", *sent)
	}
	if !strings.Contains(m.Render(), "the drill has ended") {
		t.Fatalf("no notice that the drill has ended:\n%s", m.Render())
	}
}

// TestRenderFits checks the frame's geometry at many sizes: exactly height
// lines of exactly width cells, whatever the screen.
func TestRenderFits(t *testing.T) {
	frames := history(outageSnapshot(), 24)
	final := Frame{Snap: recoveredSnapshot(), Final: &Result{At: 30 * time.Minute, Ended: true}}
	for _, size := range [][2]int{{80, 24}, {60, 16}, {100, 30}, {119, 40}, {120, 30}, {140, 40}, {200, 60}, {59, 10}} {
		for _, scr := range []string{"console", "help", "routes", "summary"} {
			m, _ := newTestModel(frames...)
			m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
			switch scr {
			case "help":
				press(m, "?")
			case "routes":
				press(m, "tab", "down")
			case "summary":
				m.Update(frameMsg(final))
			}
			lines := strings.Split(m.Render(), "\n")
			wantH := size[1]
			if size[0] < minWidth || size[1] < minHeight {
				wantH = 1
			}
			if len(lines) != wantH {
				t.Errorf("%s at %dx%d: %d lines, want %d", scr, size[0], size[1], len(lines), wantH)
			}
			for i, l := range lines {
				if w := ansi.StringWidth(l); w != size[0] {
					t.Errorf("%s at %dx%d: line %d is %d cells, want %d: %q", scr, size[0], size[1], i, w, size[0], ansi.Strip(l))
					break
				}
			}
		}
	}
}

func TestWhyExplains(t *testing.T) {
	m, _ := newTestModel(Frame{Snap: outageSnapshot(), Speed: 60})
	press(m, "tab")
	check := func(what string, items []string, want []string) {
		t.Helper()
		got := ansi.Strip(strings.Join(items, "\n"))
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s why lacks %q:\n%s", what, w, got)
			}
		}
	}
	check("route", m.whyRoute(), []string{
		"served by llama-3.1-8b (primary)",
		"✓ 1 pool fit: euc-a100-8b",
		"✗ 1 pool out: 1 circuit open", "1 pool not for this route: 1 outside jurisdiction eu", "bank-eu (served in eu): SLO 71.0% of 120 in the last 1m, 35 lost (20 refused, 15 timed out, 0 failed)",
		"queue 41 waiting for llama-3.1-8b",
		"rejected so far: 12 queue-full, 8 deadline",
	})
	press(m, "tab", "down")
	check("pool", m.whyPool(), []string{
		"down: 0 of 3 replicas take work, 3 breakers open",
		"used by 0 routes, skipped by 3 (bank-eu→llama-3.1-8b, retail-us→llama-3.1-8b, global→llama-3.1-8b)",
		"fault: regional-outage(eu-west) since 10:00, detected after 9.00s",
		"eu-west (eu) · provider gpu-cloud-b · serves llama-3.1-8b",
	})
	// At 80×24 the why pane has two lines: the verdicts share them.
	out := ansi.Strip(m.Render())
	if !strings.Contains(out, "down: 0 of 3 replicas take work") || !strings.Contains(out, "skipped by 3") {
		t.Errorf("the compact why pane lost the verdict:\n%s", out)
	}
}

func TestPack(t *testing.T) {
	items := []string{"aaaa", "bbb", "cc", "dddddddddddd"}
	for _, tt := range []struct {
		w, h int
		want string
	}{
		{20, 4, "aaaa|bbb|cc|dddddddddddd"},
		{10, 6, "aaaa|bbb|cc|dddddddddd|dd"},
		{10, 2, "aaaa · bbb|cc|dddddddddddd"},
	} {
		if got := strings.Join(pack(items, tt.w, tt.h, " · "), "|"); got != tt.want {
			t.Errorf("pack(%q, %d, %d) = %q, want %q", items, tt.w, tt.h, got, tt.want)
		}
	}
}

func faultState(label, spec string, start time.Duration, injected bool) twin.FaultState {
	return twin.FaultState{Label: label, Spec: spec, Start: start, Active: true, Detect: -1, Mitigate: -1, Recover: -1, Injected: injected}
}

// The summary says, per tenant a fault touched, what it cost that tenant:
// a tenant nothing else may serve reads so, whatever other traffic moved.
func TestSummaryShowsEachTouchedTenant(t *testing.T) {
	m, _ := newTestModel(Frame{Snap: outageSnapshot(), Speed: 60})
	press(m, "q", "y")
	rep := &twin.Report{Faults: map[string]*twin.FaultReport{"regional-outage(eu-west)": {
		NotMitigatedFor: "bank-eu",
		Tenants: map[string]*twin.Impact{
			"bank-eu": {Requests: 900, Displaced: 900, Lost: 800, TimeToMitigateS: -1, TimeToRecoverS: 12.8, SLOAttainmentDuring: 0.01},
			"global":  {Requests: 500, Displaced: 500, ServedElsewhere: 500, TimeToMitigateS: 5, TimeToRecoverS: 0.1, SLOAttainmentDuring: 1},
			"idle":    {Requests: 10},
		}}}}
	m.Update(frameMsg(Frame{Snap: recoveredSnapshot(), Paused: true, Final: &Result{At: 30 * time.Minute, Report: rep}}))
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 45})
	out := ansi.Strip(m.Render())
	for _, want := range []string{"bank-eu", "✗ nothing else serves it", "lost 800", "global", "elsewhere 500", "M 5.00s"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "idle ·") {
		t.Errorf("a tenant the fault did not touch is listed:\n%s", out)
	}
}

// The latency pane shows an outage while it holds requests: the p99 that
// counts them at their age, and how many wait past the objective.
func TestLatencyShowsTheWaiting(t *testing.T) {
	snap := outageSnapshot()
	c := &snap.Classes[0]
	c.SLOTTFT, c.TTFTP99, c.TTFTP99Waiting, c.Waiting, c.OldestWaiting = 2*time.Second, 140*time.Millisecond, 31*time.Second, 94, 72*time.Second
	m, _ := newTestModel(Frame{Snap: snap, Speed: 60})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 45})
	out := ansi.Strip(m.Render())
	for _, want := range []string{"94 waiting, oldest 72.0s", "31.0s/2.00s"} {
		if !strings.Contains(out, want) {
			t.Errorf("console lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "140ms/2.00s") {
		t.Errorf("the completed requests' p99 alone hides the outage:\n%s", out)
	}
}
