package main

import (
	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
)

// addServerFlags adds the flags of a listener's limits (see
// internal/httpguard), defaulting to httpguard.Defaults.
func addServerFlags(cmd *cobra.Command, l *httpguard.Limits) {
	*l = httpguard.Defaults()
	fs := cmd.Flags()
	fs.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", l.ReadHeaderTimeout, "longest wait for a request's headers")
	fs.DurationVar(&l.BodyTimeout, "body-timeout", l.BodyTimeout, "longest wait for a request's body, after its headers (0: none)")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", l.MaxHeaderBytes, "largest request headers in bytes")
	fs.IntVar(&l.MaxConns, "max-conns", l.MaxConns, "connections open at once, per listener; more wait to be accepted (0: no cap)")
}
