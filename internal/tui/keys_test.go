package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/fleetdrill/fleetdrill/faults"
)

// typeText types s into the model, a key a rune.
func typeText(m *Model, s string) {
	for _, r := range s {
		m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// footerText is the footer at the model's width, without styles.
func footerText(m *Model) string { return ansi.Strip(m.footer(m.width)) }

// Help pauses a running drill while it is open and resumes it when it
// closes, unless the operator had paused it before; a live replay cannot
// pause, so there help just shows.
func TestHelpPausesWhileOpen(t *testing.T) {
	tests := []struct {
		name  string
		frame Frame
		keys  []string
		want  []command
	}{
		{"pauses a running drill", Frame{Speed: 60}, []string{"?"}, []command{{kind: cmdPause}}},
		{"resumes it on close", Frame{Speed: 60}, []string{"?", "x"}, []command{{kind: cmdPause}, {kind: cmdResume}}},
		{"the closing key does nothing else", Frame{Speed: 60}, []string{"?", "o"}, []command{{kind: cmdPause}, {kind: cmdResume}}},
		{"leaves a paused drill paused", Frame{Speed: 60, Paused: true}, []string{"?", "x"}, nil},
		{"only shows on a live replay", Frame{Speed: 1, Live: true}, []string{"?", "x"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.frame
			f.Snap = calmSnapshot()
			m, sent := newTestModel(f)
			press(m, tt.keys...)
			if !slices.Equal(*sent, tt.want) {
				t.Fatalf("keys %v sent %+v, want %+v", tt.keys, *sent, tt.want)
			}
			if open := len(tt.keys) == 1; m.showHelp != open {
				t.Fatalf("keys %v: help shown %v, want %v", tt.keys, m.showHelp, open)
			}
		})
	}
	t.Run("the status bar says paused while it is open", func(t *testing.T) {
		m, _ := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, "?")
		if out := ansi.Strip(m.Render()); !strings.Contains(out, "paused") {
			t.Fatalf("with the help open:\n%s", out)
		}
	})
	t.Run("a pause from the help is not undone after the drill ends", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, "?")
		m.Update(frameMsg(Frame{Snap: recoveredSnapshot(), Paused: true, Final: &Result{Ended: true}}))
		press(m, "esc")
		if want := []command{{kind: cmdPause}}; !slices.Equal(*sent, want) {
			t.Fatalf("sent %+v, want %+v", *sent, want)
		}
	})
}

// q on a running drill asks first: y finishes it, any other key carries
// on; ctrl+c quits at once; on the summary q quits.
func TestQuitAsksFirst(t *testing.T) {
	tests := []struct {
		name   string
		keys   []string
		want   []command
		screen screen
	}{
		{"q asks and sends nothing", []string{"q"}, nil, screenConsole},
		{"q then y finishes", []string{"q", "y"}, []command{{kind: cmdFinish}}, screenSummary},
		{"q then n carries on", []string{"q", "n"}, nil, screenConsole},
		{"q then another key carries on without acting on it", []string{"q", "o"}, nil, screenConsole},
		{"q then esc carries on", []string{"q", "esc"}, nil, screenConsole},
		{"ctrl+c does not ask", []string{"ctrl+c"}, []command{{kind: cmdFinish}}, screenConsole},
		{"ctrl+c quits from the prompt", []string{"q", "ctrl+c"}, []command{{kind: cmdFinish}}, screenConsole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
			press(m, tt.keys...)
			if !slices.Equal(*sent, tt.want) {
				t.Fatalf("keys %v sent %+v, want %+v", tt.keys, *sent, tt.want)
			}
			if m.screen != tt.screen {
				t.Fatalf("keys %v: screen %v, want %v", tt.keys, m.screen, tt.screen)
			}
		})
	}
	t.Run("the footer asks", func(t *testing.T) {
		m, _ := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, "q")
		if got := footerText(m); !strings.Contains(got, "finish the drill now? y/n") {
			t.Fatalf("after q the footer is %q, want the question", got)
		}
		press(m, "n")
		if got := footerText(m); strings.Contains(got, "finish the drill") || !strings.Contains(got, "q quit") {
			t.Fatalf("after n the footer is %q, want the help bar", got)
		}
	})
	t.Run("an ended drill does not ask", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		m.Update(frameMsg(Frame{Snap: recoveredSnapshot(), Paused: true, Final: &Result{Ended: true, At: 30 * time.Minute}}))
		press(m, "esc", "q")
		if m.screen != screenSummary || len(*sent) != 0 {
			t.Fatalf("q after the end: screen %v, sent %+v; want the summary, nothing sent", m.screen, *sent)
		}
	})
}

// The command line: completions from the catalogue and the snapshot, tab
// to complete, enter to inject, the parser's own words for a mistake.
func TestPalette(t *testing.T) {
	t.Run("completions", func(t *testing.T) {
		snap := outageSnapshot()
		for _, tt := range []struct {
			line string
			want []string
		}{
			{"", append(faults.Kinds(), "end")},
			{"b", []string{"brownout"}},
			{"regional-outage ", []string{"region=", "for="}},
			{"brownout region=eu-west ", []string{"pool=", "for=", "count=", "percent=", "fail=", "latency="}},
			{"regional-outage region=", []string{"region=us-east", "region=eu-west", "region=eu-central"}},
			{"regional-outage region=eu", []string{"region=eu-west", "region=eu-central"}},
			{"node-loss pool=euc", []string{"pool=euc-a100-8b"}},
			{"quota-exhaustion provider=", []string{"provider=gpu-cloud-a", "provider=gpu-cloud-b", "provider=gpu-cloud-c"}},
			{"model-retirement model=", []string{"model=llama-3.1-8b"}},
			{"end ", []string{"regional-outage(eu-west)"}},
			{"no-such-kind ", nil},
		} {
			if _, got := completions(tt.line, &snap); !slices.Equal(got, tt.want) {
				t.Errorf("completions(%q) = %q, want %q", tt.line, got, tt.want)
			}
		}
	})
	t.Run("tab", func(t *testing.T) {
		snap := outageSnapshot()
		for _, tt := range []struct{ line, want string }{
			{"", "regional-outage "},
			{"reg", "regional-outage "},
			{"regional-outage ", "regional-outage region="},
			{"regional-outage region=", "regional-outage region=us-east "},
			{"regional-outage region=eu", "regional-outage region=eu-"},
			{"regional-outage region=eu-c", "regional-outage region=eu-central "},
			{"regional-outage region=eu-west for=", "regional-outage region=eu-west for=1m "},
			{"no-such-kind ", "no-such-kind "},
		} {
			if got := complete(tt.line, &snap); got != tt.want {
				t.Errorf("complete(%q) = %q, want %q", tt.line, got, tt.want)
			}
		}
	})
	t.Run("a pasted line lands in the palette, and enter injects it", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, ":")
		m.Update(tea.PasteMsg{Content: "node-loss pool=use-h100-8b count=1"})
		press(m, "enter")
		if len(*sent) != 1 || (*sent)[0].kind != cmdInject || !strings.HasPrefix((*sent)[0].line, "node-loss pool=use-h100-8b") {
			t.Fatalf("sent %+v, want the pasted node loss injected", *sent)
		}
	})
	t.Run("the footer shows the regions, tab completes, enter injects", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, ":")
		typeText(m, "regional-outage region=")
		got := footerText(m)
		for _, want := range []string{":regional-outage region=", "us-east", "eu-west", "eu-central"} {
			if !strings.Contains(got, want) {
				t.Errorf("footer %q lacks %q", got, want)
			}
		}
		// Keys go to the command line, not to the console: o, q and the
		// digits sent nothing.
		if len(*sent) != 0 {
			t.Fatalf("typing sent %+v", *sent)
		}
		press(m, "down", "tab")
		typeText(m, "for=5m")
		if v := m.palette.Value(); v != "regional-outage region=us-east for=5m" {
			t.Fatalf("after tab the line is %q", v)
		}
		press(m, "enter")
		want := []command{{kind: cmdInject, line: "regional-outage region=us-east at=0s for=5m"}}
		if !slices.Equal(*sent, want) {
			t.Fatalf("enter sent %+v, want %+v", *sent, want)
		}
		if m.paletteOpen {
			t.Fatal("the command line is still open after a good line")
		}
	})
	t.Run("a bad line shows the parser's error and stays open", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, ":")
		typeText(m, "regional-outage regoin=eu-west")
		press(m, "enter")
		_, perr := faults.Parse("regional-outage regoin=eu-west at=0s")
		if len(*sent) != 0 || !m.paletteOpen || m.palette.Value() != "regional-outage regoin=eu-west" {
			t.Fatalf("after a bad line: sent %+v, open %v, line %q; want nothing sent and the line kept", *sent, m.paletteOpen, m.palette.Value())
		}
		if m.notice == nil || !m.notice.Err || m.notice.Text != oneLine(perr.Error()) {
			t.Fatalf("notice %+v, want the parser's error %q", m.notice, perr)
		}
		m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
		if got := footerText(m); !strings.Contains(got, ":regional-outage regoin=eu-west") || !strings.Contains(got, "regoin") || !strings.Contains(got, "unknown key") {
			t.Fatalf("the footer %q does not show the line and the error", got)
		}
		// Fix it: the line is still there to edit.
		press(m, "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace", "backspace")
		typeText(m, "region=eu-west")
		press(m, "enter")
		if want := []command{{kind: cmdInject, line: "regional-outage region=eu-west at=0s"}}; !slices.Equal(*sent, want) {
			t.Fatalf("after the fix sent %+v, want %+v", *sent, want)
		}
	})
	t.Run("end LABEL ends a fault", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: outageSnapshot(), Speed: 60})
		press(m, ":")
		typeText(m, "end nothing")
		press(m, "enter")
		if len(*sent) != 0 || m.notice == nil || !strings.Contains(m.notice.Text, "active: regional-outage(eu-west)") {
			t.Fatalf("end of no fault: sent %+v, notice %+v", *sent, m.notice)
		}
		m.palette.SetValue("end ")
		press(m, "tab", "enter")
		if want := []command{{kind: cmdEndFault, label: "regional-outage(eu-west)"}}; !slices.Equal(*sent, want) {
			t.Fatalf("sent %+v, want %+v", *sent, want)
		}
	})
	t.Run("esc closes it and the keys are the console's again", func(t *testing.T) {
		m, sent := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, ":")
		typeText(m, "brownout")
		press(m, "esc", "space")
		if want := []command{{kind: cmdPause}}; m.paletteOpen || !slices.Equal(*sent, want) {
			t.Fatalf("after esc, space: open %v, sent %+v; want closed and a pause", m.paletteOpen, *sent)
		}
		press(m, ":")
		if m.palette.Value() != "" {
			t.Fatalf("the command line opens with %q, want it empty", m.palette.Value())
		}
	})
	t.Run(": does nothing special on the help or the summary", func(t *testing.T) {
		m, _ := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
		press(m, "?", ":")
		if m.paletteOpen || m.showHelp {
			t.Fatalf("after ?, : the command line is open %v, help %v; want both closed", m.paletteOpen, m.showHelp)
		}
		m.Update(frameMsg(Frame{Snap: recoveredSnapshot(), Paused: true, Final: &Result{Ended: true}}))
		press(m, ":")
		if m.paletteOpen || m.screen != screenSummary {
			t.Fatalf("on the summary : opened the command line (%v) or left it (screen %v)", m.paletteOpen, m.screen)
		}
	})
}

// The help bar ends with ? help and q quit at every width, and labels as
// many inject keys as fit, most used first, with … when some do not.
func TestFooterFitsTheWidth(t *testing.T) {
	allInject := []string{"o outage", "b brownout", "x quota", "n node", "d driver", "r retire", "l latency", "f errors", "c cold"}
	for _, tt := range []struct {
		w      int
		inject int // inject keys labelled
		more   bool
	}{
		{60, 2, true},
		{80, 5, true},
		{120, 9, true},
		{200, 9, false},
	} {
		for _, notice := range []string{"", "regional-outage(us-east) injected at 05:00"} {
			m, _ := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
			m.Update(tea.WindowSizeMsg{Width: tt.w, Height: 24})
			if notice != "" {
				m.notice = &Notice{Text: notice}
			}
			got := footerText(m)
			if w := ansi.StringWidth(got); w != tt.w {
				t.Errorf("width %d: the footer is %d cells: %q", tt.w, w, got)
			}
			trimmed := strings.TrimRight(got, " ")
			if !strings.HasSuffix(trimmed, "? help  q quit") {
				t.Errorf("width %d: the footer %q does not end with ? help  q quit", tt.w, got)
			}
			if notice != "" {
				// First, and whole where there is room (at 60 it is cut).
				if !strings.HasPrefix(got, " "+notice[:24]) || tt.w >= 80 && !strings.HasPrefix(got, " "+notice+" │ ") {
					t.Errorf("width %d: the footer %q does not start with the notice", tt.w, got)
				}
				continue
			}
			n := 0
			for _, l := range allInject {
				if strings.Contains(got, l) {
					n++
				}
			}
			if n != tt.inject {
				t.Errorf("width %d: %d inject keys labelled in %q, want %d", tt.w, n, got, tt.inject)
			}
			for _, l := range allInject[:n] {
				if !strings.Contains(got, l) {
					t.Errorf("width %d: %q lacks %q: the most used come first", tt.w, got, l)
				}
			}
			if more := strings.Contains(got, "… ? help"); more != tt.more {
				t.Errorf("width %d: … shown %v, want %v: %q", tt.w, more, tt.more, got)
			}
		}
	}
	// A notice too long for the line is cut, never ? and q.
	m, _ := newTestModel(Frame{Snap: calmSnapshot(), Speed: 60})
	m.notice = &Notice{Text: strings.Repeat("very long notice ", 10), Err: true}
	if got := strings.TrimRight(footerText(m), " "); !strings.HasSuffix(got, "? help  q quit") || !strings.Contains(got, "very long") {
		t.Errorf("with a long notice the footer is %q", got)
	}
}

// A live replay's footer offers no key it refuses: no pause, no step.
func TestLiveFooterOffersNoPause(t *testing.T) {
	m, _ := newTestModel(Frame{Snap: calmSnapshot(), Speed: 5, Live: true})
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 40})
	got := footerText(m)
	if strings.Contains(got, "space pause") || !strings.Contains(got, "o outage") {
		t.Errorf("live footer %q: want the inject keys and no pause", got)
	}
	m, _ = newTestModel(Frame{Snap: calmSnapshot(), Speed: 5})
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 40})
	if got := footerText(m); !strings.Contains(got, "space pause") {
		t.Errorf("drill footer %q lacks the pause", got)
	}
}

// TestInjectKeysMatchTraits holds the console's inject keys to the fault
// catalogue: a key exactly for each kind whose faults.Traits.ConsoleKey
// gives one, in its rank order, that injects a valid line on a full
// selection, and no key bound twice across the console.
func TestInjectKeysMatchTraits(t *testing.T) {
	km := newKeyMap()
	var want []faults.Kind
	for _, name := range faults.Kinds() {
		k := faults.Kind(name)
		ck := k.Traits().ConsoleKey
		if ck.Key == "" {
			continue
		}
		want = append(want, k)
		i := slices.IndexFunc(km.Inject, func(ik kindKey) bool { return ik.kind == k })
		if i < 0 {
			t.Errorf("%s: its traits give console key %q, but internal/tui/keys.go binds none", k, ck.Key)
			continue
		}
		if ik := km.Inject[i]; !slices.Equal(ik.Keys(), []string{ck.Key}) || ik.label != ck.Label || ik.Help().Desc != ck.Help {
			t.Errorf("%s: bound to %v (%q, %q), its traits say %q (%q, %q)", k, ik.Keys(), ik.label, ik.Help().Desc, ck.Key, ck.Label, ck.Help)
		}
		sel := selection{Pool: "p", Region: "r", Provider: "v", Model: "m", Tenant: "t"}
		if line, why := faultLine(k, sel); line == "" {
			t.Errorf("%s: its key injects nothing on a full selection: %s", k, why)
		}
	}
	var got []faults.Kind
	for _, ik := range km.Inject {
		got = append(got, ik.kind)
	}
	slices.SortStableFunc(want, func(a, b faults.Kind) int {
		return a.Traits().ConsoleKey.Rank - b.Traits().ConsoleKey.Rank
	})
	if !slices.Equal(got, want) {
		t.Errorf("inject keys for %v, want %v (the kinds with a faults.Traits.ConsoleKey, by rank)", got, want)
	}
	bound := map[string]string{}
	for _, col := range km.FullHelp() {
		for _, b := range col {
			for _, k := range b.Keys() {
				if prev, dup := bound[k]; dup {
					t.Errorf("key %q is bound to %q and %q", k, prev, b.Help().Desc)
				}
				bound[k] = b.Help().Desc
			}
		}
	}
}
