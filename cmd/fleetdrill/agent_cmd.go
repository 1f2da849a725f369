package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/gpu"
)

func newAgentCmd() *cobra.Command {
	var (
		o      gpu.PoolOptions
		listen string
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Serve this GPU node's inventory and live NVML readings over HTTP",
		Long: `Run on a GPU node: serve the inventory (as fleetdrill inventory --format json
prints it) on /inventory, live NVML readings on /metrics (Prometheus: GPU
utilisation, memory used and total, power, temperature, XID errors) and
/healthz. The pool flags shape /inventory's scenario fragment, as for
inventory. See docs/inventory.md for the series.

SIGTERM or SIGINT stops it. Needs the NVIDIA driver and a build with cgo.
Exit status: 0 after a clean shutdown, 2 when NVML is unavailable or a flag
is invalid (one line on stderr).`,
		Example: `  fleetdrill agent
  fleetdrill agent --listen 0.0.0.0:9400 --region us-east --runtime vllm-0.8.5 --models llama-3.1-8b
  curl -s http://127.0.0.1:9400/inventory | jq .scenario`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAgent(cmd.Context(), cmd, listen, o)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9400", "address of /inventory, /metrics and /healthz")
	addPoolFlags(cmd, &o)
	return cmd
}

func runAgent(parent context.Context, cmd *cobra.Command, listen string, o gpu.PoolOptions) error {
	if err := checkPoolFlags(o); err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("agent: %w", err)}
	}
	ctx, stop := signal.NotifyContext(parent, syscall.SIGTERM, os.Interrupt)
	defer stop()

	src, err := openGPUs()
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("agent: %w", err)}
	}
	defer src.Close() // after the XID watcher has stopped, below

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	a, err := gpu.NewAgent(gpu.AgentConfig{Source: src, Pool: o, Registry: reg, Logger: logger})
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("agent: %w", err)}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("agent: --listen: %w", err)}
	}

	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		switch err := a.WatchXIDs(watchCtx); {
		case errors.Is(err, gpu.ErrNoXIDEvents):
			logger.Info("XID errors are not reported on this node", "reason", err)
		case err != nil:
			logger.Error("XID events stopped", "err", err)
		}
	}()
	defer func() { stopWatch(); <-watched }()

	// The agent's listener, within fleetdrill's listener limits.
	lim := httpguard.Defaults()
	srv := lim.Server(a.Handler())
	ln = lim.Listener(ln)
	fmt.Fprintf(cmd.OutOrStdout(), "fleetdrill agent: %s; serving /inventory and /metrics on http://%s\n",
		a.Inventory().Summary(), ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("agent: %w", serveErr)
	}
	return nil
}
