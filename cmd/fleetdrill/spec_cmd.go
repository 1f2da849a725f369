package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fleetdrill/fleetdrill/internal/spec"
)

func newSpecCmd() *cobra.Command {
	var (
		tags   string
		format string
		list   bool
	)
	cmd := &cobra.Command{
		Use:   "spec PATH...",
		Short: "Run Gherkin failover specs (.feature files) on the digital twin (@live ones on the live harness)",
		Long: `Run Gherkin failover specs on the digital twin with fleetdrill's built-in steps:
no Go code needed. PATH is a .feature file or a directory of them.

A failing outcome prints what was expected, what was measured, the seed, the
timeline around the fault and the fleetdrill run command that reproduces it.

Tags: untagged scenarios and @twin run on the twin. @live scenarios run on
the live harness (docs/live.md) with the same steps: emulated nodes in
Docker containers behind toxiproxy and the live gateway, faults injected
for real, outcomes judged on the live report; a failure reproduces with
fleetdrill run --live. They need a Docker engine and a minute or so each,
so the default filter is ~@live: select them with --tags @live. --tags
takes godog's syntax: @a (has), ~@a (not), @a && @b (and), @a,@b (or).

--format writes godog's pretty, progress, cucumber (JSON) or events output,
or fleetdrill's JUnit XML for CI test reporters (one testsuite per feature,
one testcase per scenario), each to the console or, as NAME:FILE, to a
file. When every format goes to a file, progress is printed as well.

--list prints the step reference (docs/specs.md has it with notes).

Exit status: 0 when every selected scenario passes (or is skipped, with its
reason printed), 1 when one fails, has an undefined step or is pending, 2
for invalid input.`,
		Example: `  fleetdrill spec features/
  fleetdrill spec failover.feature --tags '@outage && ~@slow'
  fleetdrill spec specs/ --format pretty,junit:spec-report.xml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if list {
				for _, s := range spec.Steps() {
					fmt.Fprintf(out, "%s\n    %s\n    e.g. %s\n", s.Pattern, s.Doc, s.Example)
				}
				return nil
			}
			if len(args) == 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("spec: want at least one .feature file or directory (or --list)")}
			}
			for _, p := range args {
				if _, err := os.Stat(p); err != nil {
					return &exitError{code: exitInvalid, err: fmt.Errorf("spec: %w", err)}
				}
			}
			formats, err := spec.ParseFormats(format)
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("spec: --format: %w", err)}
			}
			// With every format going to a file the console would stay
			// empty: a CI log must still show that the specs ran, which
			// failed and how to reproduce it. progress is the short form.
			if !slices.ContainsFunc(formats, func(f spec.Format) bool { return f.File == "" }) {
				format = "progress," + format
			}
			colors := false
			if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				colors = true
			}
			res := spec.Run(spec.Options{Paths: args, Tags: tags, Format: format, Output: out, Colors: colors})
			if res.Status != 2 {
				for _, f := range formats {
					if f.File != "" {
						fmt.Fprintf(out, "spec: %s report written to %s\n", f.Name, f.File)
					}
				}
			}
			switch {
			case res.Status == 2:
				return &exitError{code: exitInvalid, err: fmt.Errorf("spec: invalid feature files or options (see above)")}
			case res.Status != 0:
				return &exitError{code: exitFailed, err: fmt.Errorf("spec: failed (see above)")}
			}
			if n := len(res.Tally.Skipped); n > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "spec: %d scenario(s) skipped:\n  %s\n", n, strings.Join(res.Tally.Skipped, "\n  "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&tags, "tags", spec.DefaultTags, "run the scenarios whose tags match `EXPR` (godog syntax: @a, ~@a, @a && @b, @a,@b)")
	cmd.Flags().StringVar(&format, "format", "pretty", "output `FORMATS`, comma-separated, each NAME or NAME:FILE: pretty, progress, junit, cucumber (JSON), events")
	cmd.Flags().BoolVar(&list, "list", false, "print every step the specs can use, with an example")
	return cmd
}
