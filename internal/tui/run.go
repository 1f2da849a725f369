package tui

import (
	"context"
	"fmt"

	tea "charm.land/bubbletea/v2"
)

// Options configures Run.
type Options struct {
	Driver DriverOptions
	// Program options for the tea.Program (tests set input, output, size
	// and colour profile).
	Program []tea.ProgramOption
	// Base is the scenario as the operator gave it, for the summary's
	// replay command.
	Base Base
}

// Run runs a drill of eng in the console until the operator quits, and
// returns how the drill ended. The driver runs on its own goroutine; the
// program on the caller's. The result is there even when the program
// fails (its error is returned beside it), so a drill can still be
// recorded.
func Run(ctx context.Context, eng Engine, opts Options) (Result, error) {
	d, err := NewDriver(eng, opts.Driver)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resc := make(chan Result, 1)
	go func() { resc <- d.Run(ctx) }()
	m := New(d.Frames(), d.Send)
	m.base = opts.Base
	p := tea.NewProgram(m, append([]tea.ProgramOption{tea.WithContext(ctx)}, opts.Program...)...)
	_, perr := p.Run()
	d.Finish()
	res := <-resc
	if perr != nil {
		return res, fmt.Errorf("console: %w", perr)
	}
	return res, nil
}
