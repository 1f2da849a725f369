package main

import (
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/httpguard"
)

// The gateway and the node take the listener limits as flags, defaulting
// to httpguard.Defaults, and their body limits.
func TestServerLimitFlags(t *testing.T) {
	d := httpguard.Defaults()
	want := map[string]string{
		"read-header-timeout": d.ReadHeaderTimeout.String(),
		"body-timeout":        d.BodyTimeout.String(),
		"idle-timeout":        d.IdleTimeout.String(),
		"max-header-bytes":    "65536",
		"max-conns":           "4096",
		"max-conns-per-ip":    "1024",
	}
	defaultOf := func(cmd *cobra.Command, name string) string {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f.DefValue
		}
		return "(no such flag)"
	}
	for name, cmd := range map[string]*cobra.Command{"gateway": newGatewayCmd(), "node": newNodeCmd()} {
		for f, v := range want {
			if got := defaultOf(cmd, f); got != v {
				t.Errorf("%s --%s: default %q, want %q", name, f, got, v)
			}
		}
	}
	gw := newGatewayCmd()
	for f, v := range map[string]string{"max-body": "1048576", "max-inflight-body": "134217728", "memory-limit": "0",
		"write-timeout": gateway.DefaultStreamWriteTimeout.String()} {
		if got := defaultOf(gw, f); got != v {
			t.Errorf("gateway --%s: default %q, want %q", f, got, v)
		}
	}
	nd := newNodeCmd()
	for f, v := range map[string]string{"max-body": "16777216", "max-inflight-body": "67108864", "memory-limit": "0"} {
		if got := defaultOf(nd, f); got != v {
			t.Errorf("node --%s: default %q, want %q", f, got, v)
		}
	}
	if d.IdleTimeout != 60*time.Second {
		t.Errorf("default idle timeout %v, want 60s", d.IdleTimeout)
	}
}
