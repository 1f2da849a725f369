package main

import (
	"strconv"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/shell"
)

// commandLine is a fleetdrill command line of args, each quoted for a
// POSIX shell where it needs it, to print as a reproduce or verify command.
func commandLine(args ...string) string {
	return shell.Line(append([]string{"fleetdrill"}, args...)...)
}

// runArgs are the arguments of the fleetdrill run that replays a run of
// scenario name with the overrides sets at seed: every override in order,
// except the seed's (the run's own seed is stated once, last), then extra.
// A reproduce command made of anything less replays a different run.
func runArgs(name string, sets []string, seed uint64, extra ...string) []string {
	args := []string{"run", name}
	for _, s := range sets {
		if strings.HasPrefix(strings.TrimSpace(s), "seed=") {
			continue
		}
		args = append(args, "--set", s)
	}
	args = append(args, extra...)
	return append(args, "--seed", strconv.FormatUint(seed, 10))
}
