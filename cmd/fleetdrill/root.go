package main

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set with -ldflags "-X main.version=..."; otherwise it comes from
// the module's build information.
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// exitCoder is an error that carries the exit status it should produce.
type exitCoder interface {
	error
	ExitCode() int
}

func asExitCoder(err error, target *exitCoder) bool { return errors.As(err, target) }

// exitError wraps an error with an exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetdrill",
		Short:         "Chaos and failover harness for scarce, heterogeneous GPU inference capacity",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newRunCmd(), newCompareCmd(), newScenariosCmd(), newTraceCmd(), newCalibrateCmd(), newFidelityCmd(), newFaultsCmd(), newSpecCmd(), newTUICmd(), newGatewayCmd(), newNodeCmd(), newVersionCmd())
	root.AddCommand(newInventoryCmd())
	root.AddCommand(newAgentCmd())
	root.AddCommand(newSweepCmd())
	root.AddCommand(newScorecardCmd())
	root.AddCommand(newPlanCmd())
	root.AddCommand(newBenchmarkCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "fleetdrill", buildVersion())
			return err
		},
	}
}
