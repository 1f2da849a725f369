package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/internal/node"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// adminTokenEnv holds the admin token (or --admin-token-file names a file
// that does): never a flag, which every user sees in a process listing.
const adminTokenEnv = "FLEETDRILL_ADMIN_TOKEN"

// nodeAPIKeyEnv holds the key the inference API requires (or
// --api-key-file names a file that does), for the same reason.
const nodeAPIKeyEnv = "FLEETDRILL_NODE_API_KEY"

// defaultNodeDriver is the driver a node reports when neither --driver nor
// a scenario pool names one.
const defaultNodeDriver = "550.127.05"

type nodeFlags struct {
	listen, adminListen, adminToken string
	adminTokenFile, adminTokenFlag  string
	apiKey, apiKeyFile, apiKeyFlag  string
	profile, scenario, pool         string
	sets, models, minDrivers        []string
	maxBatch                        int
	kvTokens, maxModelLen           int64
	driver                          string
	seed                            uint64
	speed                           float64
	drain                           time.Duration
	flavor                          string
	kvAdvertise                     string
	maxBody, maxInflight, memLimit  int64
	lim                             httpguard.Limits
	tls                             httpguard.TLSFiles
}

func newNodeCmd() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run an emulated OpenAI-compatible inference node",
		Long: `Run an emulated inference node: /v1/chat/completions and /v1/completions
(streaming or not), /v1/models, /health, /healthz and /metrics, with token
timing from the twin's continuous-batching model in wall time. Prompt content
is only counted (ceil(characters/4), or the x_fleetdrill.input_tokens field or
the X-Fleetdrill-Input-Tokens header), never logged; the node generates exactly
max_tokens (or x_fleetdrill.output_tokens / X-Fleetdrill-Output-Tokens) tokens.

--flavor vllm answers as vLLM's OpenAI server (0.10.1 and later) does, for a
gateway's vllm backends: /health only (200, empty body; /healthz is a 404),
{"error": {..., "code": 404}} error bodies with vLLM's types and messages,
vLLM's model cards, and vLLM's series on /metrics (vllm:num_requests_running,
vllm:num_requests_waiting, vllm:kv_cache_usage_perc, token counters, time to
first token) from the engine. --flavor vllm-0.8 answers as vLLM 0.8: flat
{"object": "error"} bodies and vllm:gpu_cache_usage_perc. Timing is the
twin's in every flavor.

The model comes from --profile (a built-in latency profile) or from a scenario
pool (--scenario and --pool: its models, profiles, driver, max batch and the
twin's compatibility rules).

With $FLEETDRILL_NODE_API_KEY or --api-key-file (never a flag; at least 32
characters), every /v1 path needs "Authorization: Bearer KEY", as with vLLM's
--api-key: 401 without it. /health, /healthz and /metrics stay open for
probes and scrapes.

With --admin-listen, a second listener serves /admin/faults (GET, POST a JSON
patch, DELETE to reset), which needs "Authorization: Bearer TOKEN"
($FLEETDRILL_ADMIN_TOKEN or --admin-token-file, never a flag): quota exhaustion (429 with
Retry-After), model retirement (404 model_not_found), a driver change (503 for
models the driver cannot run) and an error rate (seeded 500s).

A body is at most --max-body bytes (413 beyond), the bodies being read at
once at most --max-inflight-body (429 with Retry-After beyond), and the Go
runtime's soft memory limit is --memory-limit (default: --max-inflight-body
+ 128 MiB). A body that is not UTF-8 JSON, n other than 1, or a stated token
count outside [1, 2^31-1] is a 400 naming the field or header.

SIGTERM or SIGINT drains: in-flight requests get up to --drain to finish.
Exit status: 0 after a clean shutdown, 2 for invalid flags.`,
		Example: `  fleetdrill node --listen 127.0.0.1:8000
  fleetdrill node --profile h100-sxm/llama-3.1-70b/tp4 --models llama-3.1-70b --max-batch 64
  fleetdrill node --flavor vllm --listen 127.0.0.1:8001
  fleetdrill node --scenario gameday-driver-upgrade --pool use-h100-8b-a \
      --admin-listen 127.0.0.1:9000 --admin-token-file /run/secrets/admin-token
  curl -H "Authorization: Bearer $TOKEN" -d '{"quota_exhausted":true,"retry_after_s":20}' \
      http://127.0.0.1:9000/admin/faults`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.readAdminToken(cmd.Flags().Changed("admin-token")); err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("node: %w", err)}
			}
			if err := f.readAPIKey(cmd.Flags().Changed("api-key")); err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("node: %w", err)}
			}
			cfg, err := nodeConfig(&f, cmd.Flags().Changed("profile"))
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("node: %w", err)}
			}
			return runNode(cmd.Context(), &f, cfg, cmd)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8000", "address of the OpenAI-compatible API")
	fl.StringVar(&f.adminListen, "admin-listen", "", "address of the fault-control API (off when empty)")
	adminTokenSecret.addFlags(cmd, &f.adminTokenFile, &f.adminTokenFlag,
		"file (mode 0600) holding the bearer token the admin API requires (default $"+adminTokenEnv+")")
	nodeAPIKeySecret.addFlags(cmd, &f.apiKeyFile, &f.apiKeyFlag,
		"file (mode 0600) holding the API key every /v1 request must bear (default $"+nodeAPIKeyEnv+"; neither: no key, open)")
	fl.StringVar(&f.profile, "profile", "h100-sxm/llama-3.1-8b/tp1", "built-in latency profile (see docs/profiles.md)")
	fl.StringVar(&f.scenario, "scenario", "", "take the pool's models, profiles and driver from this scenario (library name or file)")
	fl.StringVar(&f.pool, "pool", "", "the scenario pool to emulate (with --scenario)")
	fl.StringArrayVar(&f.sets, "set", nil, "override a scenario field, as for run (repeatable)")
	fl.StringSliceVar(&f.models, "models", nil, "models to serve (default: the profile's model, or the pool's models)")
	fl.StringArrayVar(&f.minDrivers, "min-driver", nil, "MODEL=VERSION: lowest driver a model runs with, with --profile (repeatable)")
	fl.StringVar(&f.kvAdvertise, "kv-advertise", "", "HOST:PORT decode nodes pull this prefill node's KV cache from (default: the host its prefill requests came to); a pool's role comes from --scenario")
	fl.IntVar(&f.maxBatch, "max-batch", 0, "sequences running at once (default: the pool's max_batch, else 256)")
	fl.Int64Var(&f.kvTokens, "kv-tokens", 0, "KV cache capacity in tokens (default: the profile's or pool's, else 131072)")
	fl.Int64Var(&f.maxModelLen, "max-model-len", 0, "longest request (input + output tokens) taken, published as max_model_len on /v1/models, as vLLM's flag (default: the KV capacity)")
	fl.StringVar(&f.driver, "driver", "", "driver version the node reports (default: the pool's, else "+defaultNodeDriver+")")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the error-rate fault's random stream")
	fl.Float64Var(&f.speed, "speed", 1, "model seconds per wall second (1 is real time)")
	fl.Int64Var(&f.maxBody, "max-body", node.DefaultMaxBodyBytes, "largest request body in bytes: 413 beyond it")
	fl.Int64Var(&f.maxInflight, "max-inflight-body", node.DefaultMaxInflightBodyBytes, "request body bytes held at once, all requests together (a body is held while it is counted): 429 with Retry-After beyond it")
	fl.Int64Var(&f.memLimit, "memory-limit", 0, "the Go runtime's soft memory limit in bytes (0: --max-inflight-body + 128 MiB; -1: none; $GOMEMLIMIT, when set, wins)")
	addServerFlags(cmd, &f.lim) // both listeners, API and admin
	addTLSFlags(cmd, &f.tls)    // both listeners too
	fl.DurationVar(&f.drain, "drain", 10*time.Second, "how long in-flight requests may finish after SIGTERM")
	flavors := make([]string, len(node.Flavors))
	for i, fv := range node.Flavors {
		flavors[i] = string(fv)
	}
	fl.StringVar(&f.flavor, "flavor", string(node.FlavorFleetdrill),
		"server to answer as: "+strings.Join(flavors, ", "))
	return cmd
}

// nodeConfig turns the flags into a node configuration, collecting every
// problem.
func nodeConfig(f *nodeFlags, profileSet bool) (node.Config, error) {
	var cfg node.Config
	var errs []error
	switch {
	case f.scenario != "":
		if profileSet {
			errs = append(errs, errors.New("--profile and --scenario: give one"))
		}
		if f.pool == "" {
			return cfg, errors.Join(append(errs, errors.New("--scenario needs --pool"))...)
		}
		sc, err := scenarios.LoadNamedWithSets(f.scenario, f.sets)
		if err != nil {
			return cfg, errors.Join(append(errs, err)...)
		}
		cfg, err = node.FromScenario(sc, f.pool)
		if err != nil {
			return cfg, errors.Join(append(errs, err)...)
		}
		if len(f.minDrivers) > 0 {
			errs = append(errs, errors.New("--min-driver: the scenario's compatibility rules apply with --scenario"))
		}
		if len(f.models) > 0 {
			var keep []node.Model
			for _, name := range f.models {
				i := slices.IndexFunc(cfg.Models, func(m node.Model) bool { return m.Name == name })
				if i < 0 {
					errs = append(errs, fmt.Errorf("--models: pool %s does not serve %s", f.pool, name))
					continue
				}
				keep = append(keep, cfg.Models[i])
			}
			cfg.Models = keep
		}
	default:
		if f.pool != "" || len(f.sets) > 0 {
			errs = append(errs, errors.New("--pool and --set need --scenario"))
		}
		prof, ok := latency.Builtin(f.profile)
		if !ok {
			return cfg, errors.Join(append(errs, fmt.Errorf("--profile %q: not a built-in profile (have %s)",
				f.profile, strings.Join(latency.BuiltinRefs(), ", ")))...)
		}
		models := f.models
		if len(models) == 0 {
			// "h100-sxm/llama-3.1-8b/tp1" serves llama-3.1-8b.
			parts := strings.Split(f.profile, "/")
			models = []string{parts[min(1, len(parts)-1)]}
		}
		mins, err := node.ParseMinDrivers(f.minDrivers)
		if err != nil {
			errs = append(errs, fmt.Errorf("--min-driver: %w", err))
		}
		for _, m := range models {
			cfg.Models = append(cfg.Models, node.Model{Name: m, Profile: prof, MinDriver: mins[m]})
		}
		cfg.Driver = defaultNodeDriver
	}
	if f.driver != "" {
		cfg.Driver = f.driver
	}
	if f.maxBatch != 0 {
		cfg.MaxBatch = f.maxBatch
	}
	cfg.KVTokens, cfg.MaxModelLen, cfg.Seed, cfg.Speed = f.kvTokens, f.maxModelLen, f.seed, f.speed
	if cfg.KV != nil {
		// A node process pulls KV over real sockets, through its own
		// toxiproxy proxies (the admin API's link faults).
		cfg.KV.Wire, cfg.KV.Advertise = true, f.kvAdvertise
	} else if f.kvAdvertise != "" {
		errs = append(errs, errors.New("--kv-advertise: this node has no part in disaggregated serving (its scenario pool's role is not prefill or decode)"))
	}
	cfg.APIKey = f.apiKey
	cfg.MaxBodyBytes, cfg.MaxInflightBodyBytes = f.maxBody, f.maxInflight
	if f.maxBody <= 0 {
		errs = append(errs, fmt.Errorf("--max-body: got %d, want > 0 bytes", f.maxBody))
	}
	if f.maxInflight < f.maxBody {
		errs = append(errs, fmt.Errorf("--max-inflight-body: got %d, want at least --max-body (%d): one body of the largest size must fit", f.maxInflight, f.maxBody))
	}
	flavor, err := node.ParseFlavor(f.flavor)
	if err != nil {
		errs = append(errs, fmt.Errorf("--%w", err))
	}
	cfg.Flavor = flavor
	if f.speed <= 0 {
		errs = append(errs, fmt.Errorf("--speed: got %g, want > 0", f.speed))
	}
	if f.adminListen != "" && f.adminToken == "" {
		errs = append(errs, fmt.Errorf("--admin-listen needs $%s or --admin-token-file", adminTokenEnv))
	}
	return cfg, errors.Join(errs...)
}

func runNode(parent context.Context, f *nodeFlags, cfg node.Config, cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(parent, syscall.SIGTERM, os.Interrupt)
	defer stop()

	certs, tlsConf, err := f.tls.Load()
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("node: %w", err)}
	}
	setMemoryLimit(cmd, "node", f.memLimit, f.maxInflight)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Registerer, cfg.Gatherer = reg, reg
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	cfg.Logger = logger
	n, err := node.New(cfg)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("node: --listen: %w", err)}
	}
	// Each listener counts the connections its per-address cap closes.
	apiLim, adminLim := f.lim, f.lim
	apiLim.OnRefused, adminLim.OnRefused = n.RefusedConnection(node.ListenerAPI), n.RefusedConnection(node.ListenerAdmin)
	servers := []*http.Server{apiLim.Server(n.Handler())}
	sln, scheme := tlsListener(apiLim.Listener(ln), tlsConf)
	listeners := []net.Listener{sln}
	if f.adminListen != "" {
		aln, err := net.Listen("tcp", f.adminListen)
		if err != nil {
			ln.Close()
			return &exitError{code: exitInvalid, err: fmt.Errorf("node: --admin-listen: %w", err)}
		}
		servers = append(servers, adminLim.Server(n.AdminHandler(f.adminToken)))
		aln, _ = tlsListener(adminLim.Listener(aln), tlsConf)
		listeners = append(listeners, aln)
	}

	engCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	go n.Run(engCtx)

	names := make([]string, len(cfg.Models))
	for i, m := range cfg.Models {
		names[i] = m.Name
	}
	defer reloadOnSIGHUP(ctx, certs, logger)() // watching before the address is printed
	out := cmd.OutOrStdout()
	as := ""
	if cfg.Flavor != node.FlavorFleetdrill {
		as = " as " + string(cfg.Flavor)
	}
	keyed := ""
	if cfg.APIKey != "" {
		keyed = " (API key required on /v1)"
	}
	fmt.Fprintf(out, "fleetdrill node: serving %s%s on %s://%s%s\n", strings.Join(names, ", "), as, scheme, ln.Addr(), keyed)
	if len(listeners) > 1 {
		fmt.Fprintf(out, "fleetdrill node: admin API on %s://%s/admin/faults\n", scheme, listeners[1].Addr())
	}

	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() { errc <- s.Serve(listeners[i]) }()
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	logger.Info("shutting down", "drain", f.drain)
	// Drain: stop accepting and let in-flight requests finish on the
	// still-running engine; past the deadline, stop the engine (which
	// fails what is left) and close the connections.
	dctx, cancel := context.WithTimeout(context.Background(), f.drain)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(dctx); err != nil {
			stopEngine()
			s.Close()
		}
	}
	stopEngine()
	<-n.Stopped()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("node: %w", serveErr)
	}
	return nil
}
