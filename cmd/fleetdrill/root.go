package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// version is set with -ldflags "-X main.version=..."; otherwise it comes from
// the module's build information.
var version = ""

// commit and modified are set by make build (-ldflags "-X main.commit=...
// -X main.modified=true"): the toolchain stamps no commit in a git worktree
// (its .git is a file, which go build does not take for a repository) or
// with -buildvcs=false, and the version should still say which code it is.
// The toolchain's own stamp, when there is one, wins.
var commit, modified = "", ""

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
	root.SetFlagErrorFunc(flagError)
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
		Short: "Print the version and the commit it was built from",
		Long: `Print the module version and the commit the binary was built from, as the Go
toolchain stamped them: go build and go install in a git checkout stamp the
commit (and a version: the tag, or a pseudo-version v0.0.0-DATE-COMMIT; +dirty
when the work tree had changes); go run, go test and -buildvcs=false stamp
neither, and the version says so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			_, err := fmt.Fprintln(cmd.OutOrStdout(), describeBuild(version, commit, modified == "true", bi))
			return err
		},
	}
}

// describeBuild is the version command's line: the version (ldflags' if
// set, else the module's) and the commit the toolchain stamped, so that a
// "(devel)" never stands alone: it either has its commit beside it or says
// why there is none.
func describeBuild(ldflagsVersion, ldflagsCommit string, ldflagsModified bool, bi *debug.BuildInfo) string {
	v := ldflagsVersion
	rev, at, modified := ldflagsCommit, "", ldflagsModified
	if bi != nil {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev, modified = s.Value, false // vcs.modified follows
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if rev == "" {
		if v == "(devel)" {
			return "fleetdrill (devel), no commit stamped: go run, go test, -buildvcs=false and git worktrees carry none; " +
				"make build stamps it"
		}
		return "fleetdrill " + v
	}
	commit := "commit " + rev
	if at != "" {
		commit += " of " + at
	}
	if modified {
		commit += ", with uncommitted changes"
	}
	return fmt.Sprintf("fleetdrill %s (%s)", v, commit)
}

// badFlagValue is pflag's message for a value its parser refused:
// invalid argument "-1" for "--seed" flag: strconv.ParseUint: parsing ...
var badFlagValue = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?(--[\w-]+)" flag: `)

// flagError rewrites a flag value the parser refused in the project's
// words — the flag, what was given, what is wanted — rather than
// strconv's ("strconv.ParseUint: parsing "-1": invalid syntax").
func flagError(cmd *cobra.Command, err error) error {
	m := badFlagValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	f := cmd.Flags().Lookup(strings.TrimPrefix(m[2], "--"))
	if f == nil {
		return err
	}
	want := map[string]string{
		"uint64":   "a whole number from 0 to 18446744073709551615",
		"uint":     "a whole number, 0 or more",
		"int":      "a whole number",
		"int64":    "a whole number",
		"float64":  "a number, such as 0.5 or 60",
		"duration": "a duration with a unit, such as 30s, 5m or 1h30m",
		"bool":     "true or false",
	}[f.Value.Type()]
	if want == "" {
		return err
	}
	// pflag quoted the value already: give it back as typed.
	got, uerr := strconv.Unquote(`"` + m[1] + `"`)
	if uerr != nil {
		got = m[1]
	}
	return fmt.Errorf("%s: got %q, want %s", m[2], got, want)
}
