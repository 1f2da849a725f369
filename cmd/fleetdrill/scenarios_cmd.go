package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// newScenariosCmd is `fleetdrill scenarios`: the embedded library and the
// validator, for authors who want to check a file without running it.
func newScenariosCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenarios",
		Short: "List, show and validate scenarios",
		Long: "Scenarios are YAML files (schema version 1, see docs/scenarios.md). A library of\n" +
			"ready scenarios is built into the binary; `fleetdrill run` takes a library name or a file.",
	}
	cmd.AddCommand(newScenariosListCmd(), newScenariosShowCmd(), newScenariosValidateCmd(), newScenariosCompatCmd())
	return cmd
}

func newScenariosListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tDESCRIPTION")
			for _, s := range scenarios.List() {
				fmt.Fprintf(w, "%s\t%s\n", s.Name, s.Description)
			}
			return w.Flush()
		},
	}
}

func newScenariosShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Print a built-in scenario's YAML, to copy and edit",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := scenarios.Source(args[0])
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("scenarios show: %w", err)}
			}
			_, err = cmd.OutOrStdout().Write(src)
			return err
		},
	}
}

func newScenariosValidateCmd() *cobra.Command {
	var sets []string
	cmd := &cobra.Command{
		Use:   "validate FILE|NAME...",
		Short: "Check scenarios and report every problem at once",
		Long: "validate checks each scenario (a file, or a built-in name) and prints \"ok NAME\",\n" +
			"or every problem it has, one per line as FILE:LINE: PATH: got VALUE, WANT.\n" +
			"The exit status is 2 if any scenario is invalid.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			invalid := 0
			for _, arg := range args {
				_, err := scenarios.LoadNamedWithSets(arg, sets)
				if err == nil {
					fmt.Fprintln(cmd.OutOrStdout(), "ok", arg)
					continue
				}
				invalid++
				var ve *scenarios.ValidationError
				if errors.As(err, &ve) {
					for _, p := range ve.Problems {
						fmt.Fprintln(cmd.ErrOrStderr(), p)
					}
					continue
				}
				fmt.Fprintln(cmd.ErrOrStderr(), err)
			}
			if invalid > 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("scenarios validate: %d of %d scenarios invalid", invalid, len(args))}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a field before validating, e.g. --set pools[0].replicas=8 (repeatable)")
	return cmd
}

func newScenariosCompatCmd() *cobra.Command {
	var sets []string
	cmd := &cobra.Command{
		Use:   "compat [SCENARIO]",
		Short: "Show which pools can serve which models, and why not",
		Long: "For every pool and model of the scenario, the compatibility registry's verdict:\n" +
			"tested (a measured profile exists), untested, or incompatible with the reasons\n" +
			"(runtime, driver, precision, memory). Routing obeys exactly this.",
		Example: "  fleetdrill scenarios compat default --set pools.use-h100-8b.driver=535.104",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := scenarios.DefaultName
			if len(args) == 1 {
				name = args[0]
			}
			// A pool that lists a model it cannot run is a validation
			// error, with its line; this shows the rest of the matrix.
			sc, err := scenarios.LoadNamedWithSets(name, sets)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "POOL\tMODEL\tROUTABLE\tKV TOKENS\tVERDICT")
			for _, p := range twin.Compatibility(sc) {
				routable := "no"
				if p.Routable {
					routable = "yes"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", p.Pool, p.Model, routable, p.Verdict.KVTokens, p.Verdict)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override a scenario field: `path=value` (repeatable)")
	return cmd
}
