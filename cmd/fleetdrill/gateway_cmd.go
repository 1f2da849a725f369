package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// backendKeyEnv holds the key the gateway sends its backends (or
// --backend-key-file names a file that does): never a flag, which every
// user sees in a process listing.
const backendKeyEnv = "FLEETDRILL_BACKEND_API_KEY"

// newGatewayCmd is `fleetdrill gateway`: the live gateway, the twin's
// scheduler core on the wall clock in front of real OpenAI-compatible
// backends.
func newGatewayCmd() *cobra.Command {
	var (
		sets          []string
		backendsFile  string
		backendFlags  []string
		checkBackends bool
		keysFile      string
		listen        string
		class         string
		maxTokens     int
		queueTimeout  time.Duration
		speed         float64
		maxBody       int64
		maxInflight   int64
		memLimit      int64
		writeTimeout  time.Duration
		lim           httpguard.Limits
		metricsListen string
		tlsFiles      httpguard.TLSFiles
		backendCA     string
	)
	// The backend key's file, and its flag, refused (see secretSource).
	var backendKeyFile, backendKeyFlag string
	cmd := &cobra.Command{
		Use:   "gateway [SCENARIO] --keys FILE (--backends FILE | --backend POOL=[KIND+]URL...)",
		Short: "Serve an OpenAI-compatible gateway driven by the scheduler core on the wall clock",
		Long: `The scenario gives tenants, classes, models, pools and policy; the backends say
where each pool's replicas answer; the keys say which API key is which tenant.

Backends file, one replica per line (a pool gets as many replicas as lines),
the URL prefixed with the server's kind: vllm, sglang, tgi, fleetdrill (the
emulated node) or openai (any compatible server; the default). The kind says
the health path (/health; /healthz; /v1/models), the load series read from its
/metrics (vLLM, SGLang, TGI) and the request extensions it takes:
  # POOL         [KIND+]BASE-URL
  euw-a100-8b    vllm+http://10.0.1.5:8000
  use-h100-8b    sglang+http://10.0.2.5:30000
At start every backend must list its pool's model on GET /v1/models, under the
scenario's model name (vLLM: --served-model-name).
Keys file, one "TENANT KEY" per line, TENANT a scenario tenant name:
  bank-eu  sk-...

Backends started with an API key (fleetdrill node's $FLEETDRILL_NODE_API_KEY,
vLLM's --api-key) get it from $FLEETDRILL_BACKEND_API_KEY or --backend-key-file
(never a flag; at least 32 characters): every request to a backend, probes
and metrics scrapes included, carries "Authorization: Bearer KEY". A client's
own key never reaches a backend.

Endpoints: POST /v1/chat/completions, POST /v1/completions (stream or not),
GET /v1/models, GET /healthz, GET /metrics. A request names its class with the
header X-Fleetdrill-Class (default: the scenario's first class).

--speed N runs the gateway N times faster than real time, in front of nodes
started with the same --speed: the scenario's durations (probe interval,
health timeout, backoff, deadlines, queue timeout) are model time, and so
are the Retry-After sent and the latencies in /metrics.`,
		Example: `  fleetdrill gateway eu-residency --keys keys.txt --backends backends.txt
  fleetdrill gateway my-fleet.yaml --keys keys.txt --backend use-h100-8b=vllm+http://127.0.0.1:8001`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			invalid := func(err error) error { return &exitError{code: exitInvalid, err: fmt.Errorf("gateway: %w", err)} }
			if cmd.Flags().Changed("queue-timeout") {
				// A shorthand of the scenario's key, so that the twin
				// replaying this scenario bounds the same waits.
				if queueTimeout < 0 {
					return invalid(fmt.Errorf("--queue-timeout: got %v, want a duration ≥ 0 (0: no bound but the class deadline)", queueTimeout))
				}
				sets = append(sets, "policy.admission.queue_timeout="+queueTimeout.String())
			}
			sc, err := scenarios.LoadNamedWithSets(name, sets)
			if err != nil {
				return invalid(err)
			}
			if keysFile == "" {
				return invalid(errors.New("--keys FILE is required"))
			}
			keys, err := gateway.ReadKeysFile(keysFile)
			if err != nil {
				return invalid(err)
			}
			backendKey, err := backendKeySecret.read(backendKeyFile, cmd.Flags().Changed("backend-key"))
			if err != nil {
				return invalid(err)
			}
			backends := map[string][]string{}
			if backendsFile != "" {
				if backends, err = gateway.ReadBackendsFile(backendsFile); err != nil {
					return invalid(err)
				}
			}
			for _, b := range backendFlags {
				if err := gateway.AddBackend(backends, b); err != nil {
					return invalid(err)
				}
			}
			certs, tlsConf, err := tlsFiles.Load()
			if err != nil {
				return invalid(err)
			}
			var backendPool *x509.CertPool
			if backendCA != "" {
				if backendPool, err = httpguard.LoadCertPool(backendCA); err != nil {
					return invalid(fmt.Errorf("--backend-ca: %w", err))
				}
			}
			setMemoryLimit(cmd, "gateway", memLimit, maxInflight)
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			logger := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			gw, err := gateway.New(gateway.Config{BackendCA: backendPool, BackendKey: backendKey, Scenario: sc, Backends: backends, Keys: keys, DefaultClass: class,
				DefaultMaxTokens: maxTokens, Speed: speed, Registry: reg, Logger: logger, Seed: sc.Seed,
				MaxBodyBytes: maxBody, MaxInflightBodyBytes: maxInflight, StreamWriteTimeout: writeTimeout,
				MetricsApart: metricsListen != ""})
			if err != nil {
				return invalid(err)
			}
			defer gw.Close()
			if checkBackends {
				// A fleet that cannot serve the scenario is refused now,
				// not found out by the first request.
				if err := gw.Backends().Check(cmd.Context()); err != nil {
					return invalid(fmt.Errorf("%w\n(--check-backends=false starts anyway)", err))
				}
				// A server taking less than the scenario believes is
				// said at start: its limit is what the gateway routes by.
				for _, l := range gw.Backends().Limits() {
					if l.Lower() {
						fmt.Fprintln(cmd.ErrOrStderr(), "gateway:", l)
					}
				}
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return invalid(err)
			}
			if metricsListen != "" {
				mln, err := net.Listen("tcp", metricsListen)
				if err != nil {
					ln.Close()
					return invalid(fmt.Errorf("--metrics-listen: %w", err))
				}
				ctx, cancel := context.WithCancel(cmd.Context())
				wait := serveMetrics(ctx, cmd, mln, gw)
				defer wait()
				defer cancel() // runs first: the metrics server shuts down, then wait
			}
			defer reloadOnSIGHUP(cmd.Context(), certs, logger)()
			return serveGateway(cmd.Context(), cmd, lim, ln, tlsConf, gw, sc.Name)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&sets, "set", nil, "override a scenario field: `path=value` (repeatable)")
	f.StringVar(&backendsFile, "backends", "", "backends file: one `POOL [KIND+]BASE-URL` per replica")
	f.StringArrayVar(&backendFlags, "backend", nil, "add a replica: `POOL=[KIND+]URL` (repeatable); KIND is openai (default: any compatible server), vllm, sglang, tgi or fleetdrill (the emulated node), e.g. use-h100-8b=vllm+http://10.0.0.5:8000")
	f.BoolVar(&checkBackends, "check-backends", true, "at start, check that every backend lists its pool's model on GET /v1/models")
	f.StringVar(&keysFile, "keys", "", "keys file (mode 0600): one `TENANT KEY` per line, KEY at least 32 characters or sha256:HEX, its digest")
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&metricsListen, "metrics-listen", "", "serve /metrics (tenant names, backend addresses) on this address only, not on --listen")
	f.StringVar(&class, "class", "", "class of requests without X-Fleetdrill-Class (default: the scenario's first)")
	f.IntVar(&maxTokens, "default-max-tokens", 256, "output token estimate of a request without max_tokens")
	f.DurationVar(&queueTimeout, "queue-timeout", 0, "longest wait in the core's queue for a replica (model time): sets the scenario's policy.admission.queue_timeout (default: the scenario's; none bounds the wait but the class deadline)")
	f.Float64Var(&speed, "speed", 1, "model seconds per wall second, as the nodes' --speed (1 is real time)")
	f.Int64Var(&maxBody, "max-body", gateway.DefaultMaxBodyBytes, "largest request body in bytes: 413 beyond it")
	f.Int64Var(&maxInflight, "max-inflight-body", gateway.DefaultMaxInflightBodyBytes, "request body bytes held at once, all requests together: 429 with Retry-After beyond it")
	f.Int64Var(&memLimit, "memory-limit", 0, "the Go runtime's soft memory limit in bytes (0: --max-inflight-body + 128 MiB; -1: none; $GOMEMLIMIT, when set, wins)")
	addServerFlags(cmd, &lim)
	addTLSFlags(cmd, &tlsFiles)
	f.StringVar(&backendCA, "backend-ca", "", "trust the CAs in this `FILE` (PEM) for https backends, instead of the system's")
	backendKeySecret.addFlags(cmd, &backendKeyFile, &backendKeyFlag,
		"file (mode 0600) holding the API key sent to every backend as a bearer token (default $"+backendKeyEnv+"; neither: none sent)")
	f.DurationVar(&writeTimeout, "write-timeout", gateway.DefaultStreamWriteTimeout, "longest wait for one write to a client (a stream's chunk), not for the whole answer")
	return cmd
}

// setMemoryLimit sets the runtime's soft memory limit of the command named
// name (gateway, node): limit bytes, or httpguard.SoftMemoryLimit(budget)
// when limit is 0, none when negative; nothing when $GOMEMLIMIT is set
// (the runtime has read it).
func setMemoryLimit(cmd *cobra.Command, name string, limit, budget int64) {
	if os.Getenv("GOMEMLIMIT") != "" || limit < 0 {
		return
	}
	if limit == 0 {
		limit = httpguard.SoftMemoryLimit(budget)
	}
	debug.SetMemoryLimit(limit)
	fmt.Fprintf(cmd.ErrOrStderr(), "fleetdrill %s: soft memory limit %d MiB (--memory-limit)\n", name, limit>>20)
}

// serveGateway serves gw on ln until ctx ends, then shuts down gracefully.
// With tlsConf set, it serves https.
func serveGateway(ctx context.Context, cmd *cobra.Command, lim httpguard.Limits, ln net.Listener, tlsConf *tls.Config, gw *gateway.Gateway, scenario string) error {
	lim.OnRefused = gw.Limits().RefusedConnection
	srv := lim.Server(gw.Handler())
	sln, scheme := tlsListener(lim.Listener(ln), tlsConf)
	fmt.Fprintf(cmd.ErrOrStderr(), "fleetdrill gateway: scenario %s, listening on %s://%s\n", scenario, scheme, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(sln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
