package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/httpguard"
)

// serveMetrics serves gw's /metrics on ln, apart from the API
// (--metrics-listen), until ctx ends; the returned function waits for it
// to shut down.
func serveMetrics(ctx context.Context, cmd *cobra.Command, ln net.Listener, gw *gateway.Gateway) func() {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", gateway.MetricsHandler(gw.Registry()))
	// The metrics listener is one more listener: the same limits.
	lim := httpguard.Defaults()
	srv := lim.Server(mux)
	ln = lim.Listener(ln)
	fmt.Fprintf(cmd.ErrOrStderr(), "fleetdrill gateway: metrics on http://%s/metrics\n", ln.Addr())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return func() { <-done }
}
