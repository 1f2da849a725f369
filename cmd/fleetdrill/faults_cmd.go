package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/faults"
)

// newFaultsCmd is `fleetdrill faults`: the catalogue, and a checker for fault
// lines before they go into a scenario's `faults:` list.
func newFaultsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "faults",
		Short: "List the fault kinds and check fault lines",
		Long: "A fault is one line: a kind, its target, when it starts and how long it lasts, e.g.\n" +
			"  regional-outage region=us-east at=10m for=15m\n" +
			"docs/faults.md is the catalogue; a scenario lists its faults under `faults:`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, k := range faults.Kinds() {
				fmt.Fprintln(cmd.OutOrStdout(), faults.Describe(faults.Kind(k)))
			}
			return nil
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "check LINE...",
		Short: "Parse and validate fault lines; print each in canonical form",
		Long: "Each argument is one fault line (quote it). Every problem of every line is reported\n" +
			"at once; the exit status is 2 if any line is invalid.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			specs, err := faults.ParseAll(args)
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("faults check: %w", err)}
			}
			for _, s := range specs {
				fmt.Fprintln(cmd.OutOrStdout(), s.String())
			}
			return nil
		},
	})
	return cmd
}
