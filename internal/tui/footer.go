package tui

import (
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// The footer's pieces: the help bar, the command line and the quit prompt.
// footer (view.go) chooses which one shows.

// hint is a key of the help bar, rendered, with its width in cells.
type hint struct {
	key   string
	text  string
	width int
}

// hintSep is the space between two hints.
const hintSep = "  "

// newHints renders the help bar's keys (keyMap.ShortHelp), once: the keys
// never change, only how many of them fit.
func (m *Model) newHints() []hint {
	var out []hint
	for _, b := range m.keys.ShortHelp() {
		h := b.Help()
		text := m.st.key.Render(h.Key) + " " + m.st.keyDesc.Render(h.Desc)
		out = append(out, hint{h.Key, text, ansi.StringWidth(text)})
	}
	return out
}

// hintBar is the help bar in w cells or fewer: the last two hints (help and
// quit) always, the others before them in order while they fit, and "…"
// before ? when some did not.
func (m *Model) hintBar(w int) string {
	hs := m.hints
	pinned, rest := hs[len(hs)-2:], hs[:len(hs)-2]
	tail := pinned[0].text + hintSep + pinned[1].text
	tailW := pinned[0].width + len(hintSep) + pinned[1].width
	more := m.st.dim.Render("…") + " "
	const moreW = 2
	var b strings.Builder
	used := 0
	if m.frame.Live {
		// The wall clock drives a live replay: no pause, no step.
		rest = slices.DeleteFunc(slices.Clone(rest), func(h hint) bool { return h.key == "space" || h.key == "s" || h.key == "." })
	}
	for i, h := range rest {
		need := h.width + len(hintSep)
		// The last hint needs no "…"; any other must leave room for it.
		room := w - tailW
		if i < len(rest)-1 {
			room -= moreW
		}
		if used+need > room {
			b.WriteString(more)
			break
		}
		b.WriteString(h.text + hintSep)
		used += need
	}
	b.WriteString(tail)
	return b.String()
}

// paletteLine is the open command line: the input, then the latest notice
// or else the words tab would complete it with, as many as fit.
func (m *Model) paletteLine(w int) string {
	if iw := max(w-4, 8); m.palette.Width() != iw {
		m.palette.SetWidth(iw)
	}
	// The input pads itself to its width; the completions go in that room.
	in := " " + strings.TrimRight(m.palette.View(), " ")
	avail := w - ansi.StringWidth(in) - len(hintSep)
	if n := m.notice; n != nil {
		// The latest outcome (a line the parser refused) until the next key.
		ns := m.st.info
		if n.Err {
			ns = m.st.bad
		}
		return fit(in+hintSep+ns.Render(n.Text), w)
	}
	word, cands := completions(m.palette.Value(), &m.frame.Snap)
	var shown []string
	used := 0
	for _, c := range cands {
		if _, v, ok := strings.Cut(c, "="); ok && strings.Contains(word, "=") {
			c = v // a value: its key is typed already
		}
		cw := ansi.StringWidth(c) + len(hintSep)
		if used+cw > avail {
			break
		}
		shown = append(shown, c)
		used += cw
	}
	if len(shown) > 0 {
		return fit(in+hintSep+m.st.dim.Render(strings.Join(shown, hintSep)), w)
	}
	// Nothing to complete: what the keys do, if it fits.
	keys := m.st.key.Render("enter") + m.st.keyDesc.Render(" runs it  ") + m.st.key.Render("esc") + m.st.keyDesc.Render(" closes")
	if ansi.StringWidth(keys) <= avail {
		return fit(in+hintSep+keys, w)
	}
	return fit(in, w)
}

// quitPrompt asks before q finishes a running drill.
func (m *Model) quitPrompt(w int) string {
	st := m.st
	return fit(" "+st.warn.Render("finish the drill now?")+" "+st.key.Render("y")+st.keyDesc.Render("/")+st.key.Render("n")+
		st.dim.Render("  (y shows the summary; any other key carries on)"), w)
}
