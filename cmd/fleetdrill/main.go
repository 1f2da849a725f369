// Command fleetdrill is the chaos and failover harness for scarce,
// heterogeneous GPU inference capacity. main only parses and dispatches; the
// work lives in the packages it calls.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses, stable so that CI can call fleetdrill directly.
const (
	exitOK      = 0 // every expectation passed
	exitFailed  = 1 // an expectation failed
	exitInvalid = 2 // invalid input or usage, or a capability not available
)

// run executes the command line args and returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "fleetdrill: %v\n", err)
		var ec exitCoder
		if asExitCoder(err, &ec) {
			return ec.ExitCode()
		}
		return exitInvalid
	}
	return exitOK
}
