package tui

import "charm.land/bubbles/v2/key"

// keyMap holds every binding of the console. The help bar and the help
// overlay are built from it (ShortHelp, FullHelp), so what they show is
// what works.
type keyMap struct {
	Pause, Step, StepEvent, Faster, Slower key.Binding
	Up, Down, Focus                        key.Binding

	Outage, Brownout, Quota, NodeLoss, Driver, Retire, Latency, Errors, ColdStart key.Binding
	EndFault                                                                      key.Binding

	Help, Quit, Abort, Back key.Binding
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

		Outage:    b([]string{"o"}, "o", "regional outage (pool's region)"),
		Brownout:  b([]string{"b"}, "b", "brownout (pool's region)"),
		Quota:     b([]string{"x"}, "x", "quota exhaustion (pool's provider)"),
		NodeLoss:  b([]string{"n"}, "n", "node loss (1 replica of the pool)"),
		Driver:    b([]string{"d"}, "d", "driver upgrade to "+badDriver+" (pool)"),
		Retire:    b([]string{"r"}, "r", "model retirement (route's model)"),
		Latency:   b([]string{"l"}, "l", "latency +2s (pool)"),
		Errors:    b([]string{"f"}, "f", "error burst 50% (pool)"),
		ColdStart: b([]string{"c"}, "c", "cold-start storm (pool)"),
		EndFault:  b([]string{"e"}, "e", "end the selection's fault"),

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
	inject := key.NewBinding(key.WithKeys("o"), key.WithHelp("o b x n d r l f c", "inject"))
	speed := key.NewBinding(key.WithKeys("+"), key.WithHelp("+/-", "speed"))
	return []key.Binding{
		short(k.Pause, "pause"), short(k.Step, "step"), speed,
		inject, short(k.EndFault, "end fault"), short(k.Focus, "pane"), k.Help, short(k.Quit, "quit"),
	}
}

// FullHelp is the help overlay, one column per group.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Pause, k.Step, k.StepEvent, k.Faster, k.Slower, k.Up, k.Down, k.Focus, k.Help, k.Quit, k.Abort},
		{k.Outage, k.Brownout, k.Quota, k.NodeLoss, k.Driver, k.Retire, k.Latency, k.Errors, k.ColdStart, k.EndFault},
	}
}
