package tui

import (
	"slices"

	"charm.land/bubbles/v2/key"

	"github.com/fleetdrill/fleetdrill/faults"
)

// keyMap holds every binding of the console. The help bar and the help
// overlay are built from it (ShortHelp, FullHelp), so what they show is
// what works.
type keyMap struct {
	Pause, Step, StepEvent, Faster, Slower key.Binding
	Up, Down, Focus                        key.Binding

	// Inject holds a key per fault kind the console injects, most used
	// first (the help bar keeps that order when it runs out of room):
	// the kinds with a faults.Traits.ConsoleKey, in its Rank order. What
	// each injects on the selection is its kind's console spec
	// (faults.ConsoleSpec, faultLine).
	Inject   []kindKey
	EndFault key.Binding
	Palette  key.Binding // the command line: a fault line typed out

	Help, Quit, Abort, Back key.Binding
}

// kindKey is the key that injects a kind of fault; label is its word on
// the help bar.
type kindKey struct {
	kind  faults.Kind
	label string
	key.Binding
}

func newKeyMap() keyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return keyMap{
		Pause:     b([]string{"space", "p"}, "space", "pause/resume"),
		Step:      b([]string{"s"}, "s", "step a frame"),
		StepEvent: b([]string{"."}, ".", "next event"),
		Faster:    b([]string{"+", "=", "]"}, "+", "faster"),
		Slower:    b([]string{"-", "_", "["}, "-", "slower"),

		Up:    b([]string{"up", "k"}, "↑/k", "select up"),
		Down:  b([]string{"down", "j"}, "↓/j", "select down"),
		Focus: b([]string{"tab", "shift+tab", "left", "right"}, "tab", "pools/routes"),

		Inject:   injectKeys(),
		EndFault: b([]string{"e"}, "e", "end the selection's fault"),
		Palette:  b([]string{":"}, ":", "type a fault line (tab completes)"),

		Help:  b([]string{"?"}, "?", "help (pauses)"),
		Quit:  b([]string{"q"}, "q", "quit (asks y/n)"),
		Abort: b([]string{"ctrl+c"}, "ctrl+c", "quit now"),
		Back:  b([]string{"esc"}, "esc", "back"),
	}
}

// injectKeys are the keys of the kinds the console injects: those with a
// faults.Traits.ConsoleKey, in its Rank order.
func injectKeys() []kindKey {
	var out []kindKey
	for _, name := range faults.Kinds() {
		k := faults.Kind(name)
		ck := k.Traits().ConsoleKey
		if ck.Key == "" {
			continue
		}
		out = append(out, kindKey{k, ck.Label,
			key.NewBinding(key.WithKeys(ck.Key), key.WithHelp(ck.Key, ck.Help))})
	}
	slices.SortStableFunc(out, func(a, b kindKey) int {
		return a.kind.Traits().ConsoleKey.Rank - b.kind.Traits().ConsoleKey.Rank
	})
	return out
}

// ShortHelp is the help bar, most used first: the bar shows as many as fit
// its width, in this order, except the last two, help and quit, which it
// always shows.
func (k keyMap) ShortHelp() []key.Binding {
	short := func(b key.Binding, desc string) key.Binding {
		b.SetHelp(b.Help().Key, desc)
		return b
	}
	out := []key.Binding{short(k.Pause, "pause")}
	for _, ik := range k.Inject {
		out = append(out, short(ik.Binding, ik.label))
	}
	speed := key.NewBinding(key.WithKeys("+", "-"), key.WithHelp("+/-", "speed"))
	return append(out,
		short(k.EndFault, "end fault"), short(k.Palette, "command"), k.StepEvent, short(k.Step, "step"),
		speed, short(k.Focus, "pane"),
		short(k.Help, "help"), short(k.Quit, "quit"))
}

// FullHelp is the help overlay, one column per group.
func (k keyMap) FullHelp() [][]key.Binding {
	var injectBindings []key.Binding
	for _, ik := range k.Inject {
		injectBindings = append(injectBindings, ik.Binding)
	}
	return [][]key.Binding{
		{k.Pause, k.Step, k.StepEvent, k.Faster, k.Slower, k.Up, k.Down, k.Focus, k.Help, k.Quit, k.Abort},
		append(injectBindings, k.EndFault, k.Palette),
	}
}
