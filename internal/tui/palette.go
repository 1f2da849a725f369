package tui

import (
	"slices"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/twin"
)

// The palette is the console's command line, opened by ':'. It takes a
// fault line in the fault syntax (docs/faults.md) and injects it now, or
// "end LABEL" to end an active fault. at= may be left out: an injected
// fault starts now whatever at= says. Tab completes the word under the
// cursor: the kind first, then the kind's keys, then their values, the
// names from the current snapshot (regions, pools, providers, models).
// While it is open every key but ctrl+c goes to it.

// endWord is the palette's command that ends an active fault.
const endWord = "end"

// newPalette returns the command line's input, styled as the console.
func newPalette(st *styles) textinput.Model {
	ti := textinput.New()
	ti.Prompt = ":"
	ti.CharLimit = 256
	s := textinput.DefaultDarkStyles()
	s.Focused.Prompt = st.key.style
	s.Focused.Text = lipgloss.NewStyle()
	// A steady cursor: a blinking one would need a timer, and frames that
	// differ with the wall clock.
	s.Cursor.Blink = false
	ti.SetStyles(s)
	// Tab and the arrows are the console's, not the input's suggestions.
	none := key.NewBinding(key.WithDisabled())
	ti.KeyMap.AcceptSuggestion, ti.KeyMap.NextSuggestion, ti.KeyMap.PrevSuggestion = none, none, none
	return ti
}

// openPalette opens the command line, empty.
func (m *Model) openPalette() tea.Cmd {
	m.paletteOpen = true
	m.palette.Reset()
	return m.palette.Focus()
}

func (m *Model) closePalette() {
	m.paletteOpen = false
	m.palette.Blur()
	m.palette.Reset()
}

// paletteKey handles a key while the command line is open.
func (m *Model) paletteKey(k tea.KeyPressMsg) tea.Cmd {
	switch k.String() {
	case "esc":
		m.closePalette()
		return nil
	case "enter":
		m.submitPalette()
		return nil
	case "tab":
		m.notice = nil
		m.palette.SetValue(complete(m.palette.Value(), &m.frame.Snap))
		m.palette.CursorEnd()
		return nil
	}
	m.notice = nil // it has been read: the completions come back
	var cmd tea.Cmd
	m.palette, cmd = m.palette.Update(k)
	return cmd
}

// submitPalette runs the command line: a fault line is checked here, so
// that a mistake shows the parser's own words and leaves the line open to
// fix, and sent to the driver only when it parses.
func (m *Model) submitPalette() {
	line := strings.TrimSpace(m.palette.Value())
	if line == "" {
		m.closePalette()
		return
	}
	if m.final != nil {
		m.notice = &Notice{Text: "the drill has ended: q for the summary", Err: true}
		m.closePalette()
		return
	}
	words := strings.Fields(line)
	if words[0] == endWord {
		m.submitEnd(words[1:])
		return
	}
	if !slices.ContainsFunc(words, func(w string) bool { return strings.HasPrefix(w, "at=") }) {
		line += " at=0s" // the drill starts it now whatever at= says
	}
	sp, err := faults.Parse(line)
	if err != nil {
		m.notice = &Notice{Text: oneLine(err.Error()), Err: true}
		return
	}
	m.notice = nil
	m.send(command{kind: cmdInject, line: sp.String()})
	m.closePalette()
}

// submitEnd runs "end LABEL".
func (m *Model) submitEnd(args []string) {
	active := activeLabels(m.frame.Snap.Faults)
	if len(args) != 1 || !slices.Contains(active, args[0]) {
		text := "end LABEL ends an active fault"
		if len(active) == 0 {
			text += "; none is active"
		} else {
			text += "; active: " + strings.Join(active, ", ")
		}
		m.notice = &Notice{Text: text, Err: true}
		return
	}
	m.notice = nil
	m.send(command{kind: cmdEndFault, label: args[0]})
	m.closePalette()
}

// oneLine joins the lines of a multi-line error (faults.Parse reports every
// problem, one a line) for the footer.
func oneLine(s string) string { return strings.Join(strings.Split(s, "\n"), "; ") }

// completions returns the word of line being typed (after its last space)
// and the words that may complete it, in the order tab offers them.
func completions(line string, s *twin.Snapshot) (word string, cands []string) {
	words := strings.Fields(line)
	if len(words) == 0 || !strings.HasSuffix(line, " ") && len(words) == 1 {
		if len(words) == 1 {
			word = words[0]
		}
		return word, withPrefix(append(faults.Kinds(), endWord), word)
	}
	if !strings.HasSuffix(line, " ") {
		word = words[len(words)-1]
	}
	kind := words[0]
	if kind == endWord {
		return word, withPrefix(activeLabels(s.Faults), word)
	}
	if k, v, ok := strings.Cut(word, "="); ok {
		var vals []string
		for _, val := range keyValues(k, s) {
			vals = append(vals, k+"="+val)
		}
		return word, withPrefix(vals, k+"="+v)
	}
	given := map[string]bool{"at": true} // it injects now: at= is not needed
	for _, w := range words[1:] {
		if k, _, ok := strings.Cut(w, "="); ok {
			given[k] = true
		}
	}
	var keys []string
	for _, k := range faults.Keys(faults.Kind(kind)) {
		if !given[k] {
			keys = append(keys, k+"=")
		}
	}
	return word, withPrefix(keys, word)
}

// keyValues are the values offered for key: names from the snapshot for
// targets, a few usual ones for the rest.
func keyValues(key string, s *twin.Snapshot) []string {
	var out []string
	add := func(v string) {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	switch key {
	case "region":
		for _, r := range s.Regions {
			add(r.Name)
		}
	case "pool", "provider":
		for _, r := range s.Regions {
			for _, p := range r.Pools {
				if key == "pool" {
					add(p.Name)
				} else {
					add(p.Provider)
				}
			}
		}
	case "model":
		for _, md := range s.Models {
			add(md.Name)
		}
	case "tenant":
		for _, md := range s.Models {
			for _, r := range md.Routes {
				add(r.Tenant)
			}
		}
	case "driver":
		add(faults.DriverUpgrade.Traits().Console.Driver)
	default:
		out = usualValues[key]
	}
	return out
}

// usualValues are examples for the keys whose values are not names.
var usualValues = map[string][]string{
	"for":     {"1m", "5m", "10m"},
	"fail":    {"0.2", "0.5", "1"},
	"latency": {"200ms", "500ms", "2s"},
	"count":   {"1", "2"},
	"percent": {"25", "50", "100"},
	"notice":  {"0s", "5m"},
	"rpm":     {"0"},
	"tpm":     {"0"},
}

func withPrefix(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) && w != prefix {
			out = append(out, w)
		}
	}
	return out
}

// activeLabels are the labels of the active faults, in snapshot order.
func activeLabels(fs []twin.FaultState) []string {
	var out []string
	for _, f := range fs {
		if f.Active {
			out = append(out, f.Label)
		}
	}
	return out
}

// complete is line after a tab: the word being typed extended to what all
// its completions share, or, when that adds nothing, to the first of them.
// A word completed in full is followed by a space, except a key (key=),
// whose value comes next.
func complete(line string, s *twin.Snapshot) string {
	word, cands := completions(line, s)
	if len(cands) == 0 {
		return line
	}
	next := commonPrefix(cands)
	if len(next) <= len(word) {
		next = cands[0]
	}
	if slices.Contains(cands, next) && len(withPrefix(cands, next)) == 0 && !strings.HasSuffix(next, "=") {
		next += " "
	}
	return line[:len(line)-len(word)] + next
}

func commonPrefix(words []string) string {
	p := words[0]
	for _, w := range words[1:] {
		for !strings.HasPrefix(w, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}
