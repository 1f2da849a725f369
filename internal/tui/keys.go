package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"

	"github.com/fleetdrill/fleetdrill/faults"
)

// keyMap holds every binding of the console. The help bar and the help
// overlay are built from it (ShortHelp, FullHelp), so what they show is
// what works.
type keyMap struct {
	Pause, Step, StepEvent, Faster, Slower key.Binding
	Up, Down, Focus                        key.Binding

	// Inject holds a key per fault kind the console injects, in help
	// order; what each injects on the selection is its kind's console spec
	// (faults.ConsoleSpec, faultLine).
	Inject   []kindKey
	EndFault key.Binding

	Help, Quit, Abort, Back key.Binding
}

// kindKey is the key that injects a kind of fault.
type kindKey struct {
	kind faults.Kind
	key.Binding
}

func newKeyMap() keyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return keyMap{
		Pause:     b([]string{"space", "p"}, "space", "pause/resume"),
		Step:      b([]string{"s"}, "s", "step a frame"),
		StepEvent: b([]string{"."}, ".", "step an event"),
		Faster:    b([]string{"+", "=", "]"}, "+", "faster"),
		Slower:    b([]string{"-", "_", "["}, "-", "slower"),

		Up:    b([]string{"up", "k"}, "↑/k", "select up"),
		Down:  b([]string{"down", "j"}, "↓/j", "select down"),
		Focus: b([]string{"tab", "shift+tab", "left", "right"}, "tab", "pools/routes"),

		Inject: []kindKey{
			{faults.RegionalOutage, b([]string{"o"}, "o", "regional outage (pool's region)")},
			{faults.Brownout, b([]string{"b"}, "b", "brownout (pool's region)")},
			{faults.QuotaExhaustion, b([]string{"x"}, "x", "quota exhaustion (pool's provider)")},
			{faults.NodeLoss, b([]string{"n"}, "n", "node loss (1 replica of the pool)")},
			{faults.DriverUpgrade, b([]string{"d"}, "d", "driver upgrade to "+faults.DriverUpgrade.Traits().Console.Driver+" (pool)")},
			{faults.ModelRetirement, b([]string{"r"}, "r", "model retirement (route's model)")},
			{faults.Latency, b([]string{"l"}, "l", "latency +2s (pool)")},
			{faults.ErrorBurst, b([]string{"f"}, "f", "error burst 50% (pool)")},
			{faults.ColdStartStorm, b([]string{"c"}, "c", "cold-start storm (pool)")},
		},
		EndFault: b([]string{"e"}, "e", "end the selection's fault"),

		Help:  b([]string{"?"}, "?", "help"),
		Quit:  b([]string{"q"}, "q", "quit: summary"),
		Abort: b([]string{"ctrl+c"}, "ctrl+c", "quit now"),
		Back:  b([]string{"esc"}, "esc", "back"),
	}
}

// ShortHelp is the help bar: the keys an operator needs most.
func (k keyMap) ShortHelp() []key.Binding {
	short := func(b key.Binding, desc string) key.Binding {
		b.SetHelp(b.Help().Key, desc)
		return b
	}
	var letters []string
	for _, ik := range k.Inject {
		letters = append(letters, ik.Help().Key)
	}
	inject := key.NewBinding(key.WithKeys(k.Inject[0].Keys()...), key.WithHelp(strings.Join(letters, " "), "inject"))
	speed := key.NewBinding(key.WithKeys("+"), key.WithHelp("+/-", "speed"))
	return []key.Binding{
		short(k.Pause, "pause"), short(k.Step, "step"), speed,
		inject, short(k.EndFault, "end fault"), short(k.Focus, "pane"), k.Help, short(k.Quit, "quit"),
	}
}

// FullHelp is the help overlay, one column per group.
func (k keyMap) FullHelp() [][]key.Binding {
	var injectBindings []key.Binding
	for _, ik := range k.Inject {
		injectBindings = append(injectBindings, ik.Binding)
	}
	return [][]key.Binding{
		{k.Pause, k.Step, k.StepEvent, k.Faster, k.Slower, k.Up, k.Down, k.Focus, k.Help, k.Quit, k.Abort},
		append(injectBindings, k.EndFault),
	}
}
