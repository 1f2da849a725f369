package livefleet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
)

// Labels on every container and network of a live fleet.
const (
	LabelManaged = "dev.fleetdrill.managed" // "true"
	LabelRun     = "dev.fleetdrill.run"     // the run id
	LabelPool    = "dev.fleetdrill.pool"    // containers only
	LabelRegion  = "dev.fleetdrill.region"
)

const (
	apiPort   = "8000/tcp"
	adminPort = "9000/tcp"
)

// Options configure Build.
type Options struct {
	// Scenario is a library name or a file path (scenarios.LoadNamed).
	// A file's relative references are not available inside containers.
	Scenario string
	// Sets are scenario overrides, applied here and passed to every node.
	Sets []string
	// Pools limits the fleet to these pools; empty: every pool with a
	// latency profile (service-time pools cannot run on a node).
	Pools []string
	// Replicas caps the containers per pool; 0: the scenario's replicas.
	Replicas int
	// AdminToken is the nodes' admin bearer token; "": a random one.
	AdminToken string
	// Image runs this existing image instead of building ImageName (e.g.
	// fleetdrill-node:dev from make image-node); "": $FLEETDRILL_NODE_IMAGE
	// (ImageEnv), which make test sets after building the image once for
	// every test process.
	Image string
	// ModuleDir is the fleetdrill module root to build from; "": found with
	// go env GOMOD.
	ModuleDir string
	// Speed is each node's --speed (model seconds per wall second); 0: 1.
	Speed float64
	// StartupTimeout bounds each node's wait for /healthz; 0: 30s.
	StartupTimeout time.Duration
	// BuildLog receives the docker build output; nil: discarded.
	BuildLog io.Writer
	// Logger logs fleet events; nil: nothing.
	Logger *slog.Logger
}

// Fleet is a running live fleet. Close it (it is safe to call twice).
type Fleet struct {
	RunID      string
	Scenario   *scenarios.Scenario
	AdminToken string
	Nodes      []*Node
	// Networks maps a region to its Docker network.
	Networks map[string]*testcontainers.DockerNetwork
	// OutageMode is how Inject emulates a regional outage.
	OutageMode OutageMode

	log     *slog.Logger
	proxies *toxiproxy.ApiServer
	// What a node's container is run with, kept for the nodes started
	// later (an autoscaled pool's, StartNode).
	image    string
	src      []byte
	sets     []string
	speed    float64
	timeout  time.Duration
	docker   *testcontainers.DockerClient
	mu       sync.Mutex
	closed   bool
	injected int
}

// Node is one emulated replica.
type Node struct {
	Name     string // POOL-INDEX, also its alias on the region's network
	Pool     string
	Region   string
	Provider string
	Models   []string
	Driver   string // the scenario's driver
	// Role is its pool's part in disaggregated serving (prefill, decode
	// or ""): a prefill node advertises its alias for decode nodes' pulls.
	Role string

	Container *testcontainers.DockerContainer
	proxy     *toxiproxy.Proxy

	mu       sync.Mutex
	adminURL string
	stopped  bool
	// Deferred: an autoscaled pool's replica beyond those it starts
	// with; its container is run by StartNode when the pool's scaler has
	// it provisioned (Container nil until then).
	Deferred bool
	seed     int
	// op serialises what starts and stops the node's container
	// (StartNode, StopNode, RestartNode, a node-loss fault).
	op sync.Mutex
}

// BaseURL is the node's API behind its proxy: http://127.0.0.1:PORT.
// It does not change over the node's life.
func (n *Node) BaseURL() string { return "http://" + n.proxy.Listen }

// AdminURL is the node's admin API base (http://127.0.0.1:PORT; the API is
// under /admin/faults). It changes when the node is restarted.
func (n *Node) AdminURL() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.adminURL
}

// Upstream is the node's published API address the proxy forwards to.
func (n *Node) Upstream() string { return n.proxy.Upstream }

// Backends returns the gateway's backends: pool → the nodes' proxy URLs, of
// kind fleetdrill (the emulated node: its health path, its exact lengths).
func (f *Fleet) Backends() map[string][]string {
	out := map[string][]string{}
	for _, n := range f.Nodes {
		out[n.Pool] = append(out[n.Pool], "fleetdrill+"+n.BaseURL())
	}
	return out
}

// BackendLines returns Backends as a gateway backends file.
func (f *Fleet) BackendLines() string {
	var b strings.Builder
	for _, n := range f.Nodes {
		fmt.Fprintf(&b, "%s fleetdrill+%s\n", n.Pool, n.BaseURL())
	}
	return b.String()
}

// Node returns the node called name, or nil.
func (f *Fleet) Node(name string) *Node {
	for _, n := range f.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Build starts a live fleet for opts.Scenario. On error everything it
// started is removed.
func Build(ctx context.Context, opts Options) (_ *Fleet, err error) {
	setEnv()
	sc, err := scenarios.LoadNamedWithSets(opts.Scenario, opts.Sets)
	if err != nil {
		return nil, fmt.Errorf("livefleet: %w", err)
	}
	var src []byte
	if scenarios.IsLibraryName(opts.Scenario) || opts.Scenario == "" {
		name := opts.Scenario
		if name == "" {
			name = scenarios.DefaultName
		}
		src, err = scenarios.Source(name)
	} else {
		src, err = os.ReadFile(opts.Scenario)
	}
	if err != nil {
		return nil, fmt.Errorf("livefleet: %w", err)
	}
	image := opts.Image
	if image == "" {
		image = os.Getenv(ImageEnv)
	}
	if image == "" {
		if err := buildImage(ctx, opts.ModuleDir, opts.BuildLog); err != nil {
			return nil, err
		}
		image = ImageName
	}
	token := opts.AdminToken
	if token == "" {
		token = randomHex(16)
	}
	f := &Fleet{
		RunID:      randomHex(6),
		Scenario:   sc,
		AdminToken: token,
		Networks:   map[string]*testcontainers.DockerNetwork{},
		log:        opts.Logger,
		proxies:    toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()),
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	// testcontainers logs every container's life to stderr by default: it
	// goes to the fleet's logger, at debug level, instead.
	tclog.SetDefault(debugLogger{f.log})
	defer func() {
		if err != nil {
			f.Close(context.WithoutCancel(ctx))
		}
	}()
	if f.docker, err = testcontainers.NewDockerClientWithOpts(ctx); err != nil {
		return nil, fmt.Errorf("livefleet: docker client: %w", err)
	}

	// The nodes, pool by pool in scenario order.
	for _, p := range sc.Pools {
		if len(opts.Pools) > 0 && !slices.Contains(opts.Pools, p.Name) {
			continue
		}
		if len(opts.Pools) == 0 && (p.Service != nil || len(p.Profiles) == 0) {
			continue
		}
		reps, start := p.Replicas, p.Replicas
		if p.Autoscale != nil {
			// An autoscaled pool has a node for each replica it may
			// have; those beyond `replicas` start when its scaler has
			// them provisioned.
			reps = compile.PoolReplicas(&p)
		} else if opts.Replicas > 0 {
			reps = min(reps, opts.Replicas)
			start = reps
		}
		for i := range reps {
			f.Nodes = append(f.Nodes, &Node{Name: fmt.Sprintf("%s-%d", p.Name, i), Pool: p.Name, Region: p.Region,
				Provider: p.Provider, Models: slices.Clone(p.Models), Driver: p.Driver, Role: p.Role, Deferred: i >= start})
		}
	}
	for _, name := range opts.Pools {
		if !slices.ContainsFunc(sc.Pools, func(p scenarios.Pool) bool { return p.Name == name }) {
			return nil, fmt.Errorf("livefleet: scenario %s has no pool %q", sc.Name, name)
		}
	}
	if len(f.Nodes) == 0 {
		return nil, fmt.Errorf("livefleet: scenario %s: no pool to emulate", sc.Name)
	}

	// One network per region that has nodes.
	for _, n := range f.Nodes {
		if f.Networks[n.Region] != nil {
			continue
		}
		nw, err := network.New(ctx, network.WithLabels(f.labels(LabelRegion, n.Region)))
		if nw != nil {
			f.Networks[n.Region] = nw
		}
		if err != nil {
			return nil, fmt.Errorf("livefleet: network for region %s: %w", n.Region, err)
		}
	}

	f.timeout = opts.StartupTimeout
	if f.timeout == 0 {
		f.timeout = 30 * time.Second
	}
	f.speed = opts.Speed
	if f.speed == 0 {
		f.speed = 1
	}
	f.image, f.src, f.sets = image, src, append(slices.Clone(opts.Sets), nodeSets(sc)...)
	// Start the containers in parallel, bar the deferred.
	errs := make([]error, len(f.Nodes))
	var wg sync.WaitGroup
	for i, n := range f.Nodes {
		n.seed = i + 1
		if n.Deferred {
			continue
		}
		wg.Go(func() { errs[i] = f.run(ctx, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, n := range f.Nodes {
		up := "127.0.0.1:1" // a deferred node's: nothing answers until it starts
		if !n.Deferred {
			var admin string
			if up, admin, err = n.endpoints(ctx); err != nil {
				return nil, err
			}
			n.adminURL = "http://" + admin
		}
		n.proxy = toxiproxy.NewProxy(f.proxies, n.Name, "127.0.0.1:0", up)
		if err := f.proxies.Collection.Add(n.proxy, true); err != nil {
			return nil, fmt.Errorf("livefleet: proxy for %s: %w", n.Name, err)
		}
		f.log.Info("node up", "node", n.Name, "region", n.Region, "proxy", n.proxy.Listen, "upstream", up, "admin", n.adminURL, "deferred", n.Deferred)
	}
	return f, nil
}

// labels are a fleet object's labels.
func (f *Fleet) labels(extra ...string) map[string]string {
	m := map[string]string{LabelManaged: "true", LabelRun: f.RunID}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// run runs node n's container and waits for its health.
func (f *Fleet) run(ctx context.Context, n *Node) error {
	args := []string{"--listen", "0.0.0.0:8000", "--admin-listen", "0.0.0.0:9000",
		"--scenario", "/scenario.yaml", "--pool", n.Pool,
		"--seed", strconv.Itoa(n.seed), "--speed", strconv.FormatFloat(f.speed, 'g', -1, 64), "--drain", "1s"}
	for _, s := range f.sets {
		args = append(args, "--set", s)
	}
	if n.Role == "prefill" {
		// Decode nodes pull its KV on the region's network, by alias.
		args = append(args, "--kv-advertise", n.Name+":8000")
	}
	ctr, err := testcontainers.Run(ctx, f.image,
		testcontainers.WithName("fleetdrill-"+f.RunID+"-"+n.Name),
		testcontainers.WithCmd(args...),
		testcontainers.WithEnv(map[string]string{"FLEETDRILL_ADMIN_TOKEN": f.AdminToken}),
		testcontainers.WithExposedPorts(apiPort, adminPort),
		testcontainers.WithLabels(f.labels(LabelPool, n.Pool, LabelRegion, n.Region)),
		testcontainers.WithFiles(testcontainers.ContainerFile{Reader: bytes.NewReader(f.src),
			ContainerFilePath: "/scenario.yaml", FileMode: 0o644}),
		network.WithNetwork([]string{n.Name}, f.Networks[n.Region]),
		testcontainers.WithWaitStrategy(wait.ForHTTP("/healthz").WithPort(apiPort).
			WithStartupTimeout(f.timeout).WithPollInterval(50*time.Millisecond)),
	)
	n.mu.Lock()
	n.Container = ctr // may be set on error too: Close removes it
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("livefleet: node %s: %w%s", n.Name, err, logTail(ctx, ctr))
	}
	return nil
}

// StartNode starts a deferred node (an autoscaled pool's replica its
// scaler has provisioned), or one StopNode stopped, and points its proxy
// at it once it answers. A started node is a no-op.
func (f *Fleet) StartNode(ctx context.Context, n *Node) error {
	n.op.Lock()
	defer n.op.Unlock()
	n.mu.Lock()
	ctr, stopped := n.Container, n.stopped
	n.mu.Unlock()
	if ctr != nil {
		if !stopped {
			return nil
		}
		return f.restart(ctx, n)
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return fmt.Errorf("livefleet: start %s: the fleet is closed", n.Name)
	}
	if err := f.run(ctx, n); err != nil {
		return err
	}
	up, err := n.attach(ctx)
	if err != nil {
		return err
	}
	f.log.Info("node started", "node", n.Name, "upstream", up, "admin", n.AdminURL())
	return nil
}

// attach points the node's proxy at its container's published port
// (Docker assigns new host ports on every start) and notes its admin
// address; it returns the upstream. The proxy keeps its state: a node
// started inside a regional outage (its proxy disabled) is in the outage
// too.
func (n *Node) attach(ctx context.Context) (string, error) {
	up, admin, err := n.endpoints(ctx)
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	n.adminURL = "http://" + admin
	n.stopped = false
	n.mu.Unlock()
	return up, n.repoint(up)
}

// repoint points the node's proxy at upstream, enabled as it was.
func (n *Node) repoint(upstream string) error {
	n.proxy.Lock()
	enabled := n.proxy.Enabled
	n.proxy.Unlock()
	if err := n.proxy.Update(&toxiproxy.Proxy{Listen: n.proxy.Listen, Upstream: upstream, Enabled: enabled}); err != nil {
		return fmt.Errorf("livefleet: point proxy %s at %s: %w", n.Name, upstream, err)
	}
	return nil
}

// StopNode stops a node's container (an autoscaled replica handed back);
// StartNode starts it again.
func (f *Fleet) StopNode(ctx context.Context, n *Node) error {
	n.op.Lock()
	defer n.op.Unlock()
	stopped, err := f.stop(ctx, n)
	if stopped {
		f.log.Info("node stopped", "node", n.Name)
	}
	return err
}

// stop stops n's container, with n.op held, and points its proxy at
// nothing: Docker may give its host port to another container. It says
// whether it stopped one (false: none ran).
func (f *Fleet) stop(ctx context.Context, n *Node) (bool, error) {
	n.mu.Lock()
	ctr, stopped := n.Container, n.stopped
	n.mu.Unlock()
	if ctr == nil || stopped {
		return false, nil
	}
	d := time.Second
	if err := ctr.Stop(ctx, &d); err != nil {
		return false, fmt.Errorf("livefleet: stop %s: %w", n.Name, err)
	}
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	return true, n.repoint("127.0.0.1:1")
}

// endpoints returns the node's published API and admin addresses.
func (n *Node) endpoints(ctx context.Context) (api, admin string, err error) {
	if api, err = n.Container.PortEndpoint(ctx, apiPort, ""); err != nil {
		return "", "", fmt.Errorf("livefleet: node %s: %w", n.Name, err)
	}
	if admin, err = n.Container.PortEndpoint(ctx, adminPort, ""); err != nil {
		return "", "", fmt.Errorf("livefleet: node %s: %w", n.Name, err)
	}
	return api, admin, nil
}

// Close stops the proxies, removes the containers and networks, then sweeps
// anything else labelled with this run. It is safe to call more than once.
func (f *Fleet) Close(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	var errs []error
	if f.proxies != nil {
		if err := f.proxies.Collection.Clear(); err != nil {
			errs = append(errs, err)
		}
	}
	var wg sync.WaitGroup
	cerrs := make([]error, len(f.Nodes))
	for i, n := range f.Nodes {
		n.mu.Lock()
		ctr := n.Container
		n.mu.Unlock()
		if ctr == nil {
			continue
		}
		wg.Go(func() {
			if err := testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(time.Second)); err != nil {
				cerrs[i] = fmt.Errorf("livefleet: remove %s: %w", n.Name, err)
			}
		})
	}
	wg.Wait()
	errs = append(errs, cerrs...)
	regions := make([]string, 0, len(f.Networks))
	for r := range f.Networks {
		regions = append(regions, r)
	}
	sort.Strings(regions)
	for _, r := range regions {
		if err := f.Networks[r].Remove(ctx); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("livefleet: remove network %s: %w", r, err))
		}
	}
	if f.docker != nil {
		if err := sweep(ctx, f.docker.Client, f.RunID); err != nil {
			errs = append(errs, err)
		}
		f.docker.Close()
	}
	return errors.Join(errs...)
}

func isNotFound(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "not found")
}

// Managed lists the IDs of containers (running or not) and networks
// labelled dev.fleetdrill.managed=true, and of run runID when it is not "".
func Managed(ctx context.Context, runID string) (containers, networks []string, err error) {
	setEnv()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer cli.Close()
	return managed(ctx, cli.Client, runID)
}

func managedFilters(runID string) client.Filters {
	f := make(client.Filters).Add("label", LabelManaged+"=true")
	if runID != "" {
		f.Add("label", LabelRun+"="+runID)
	}
	return f
}

func managed(ctx context.Context, cli *client.Client, runID string) (containers, networks []string, err error) {
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: managedFilters(runID)})
	if err != nil {
		return nil, nil, err
	}
	for _, c := range cs.Items {
		containers = append(containers, c.ID)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: managedFilters(runID)})
	if err != nil {
		return nil, nil, err
	}
	for _, n := range ns.Items {
		networks = append(networks, n.ID)
	}
	return containers, networks, nil
}

// Sweep force-removes every container and network labelled
// dev.fleetdrill.managed=true (of run runID when it is not ""): the cleanup
// for runs that were killed before Close.
func Sweep(ctx context.Context, runID string) error {
	setEnv()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	return sweep(ctx, cli.Client, runID)
}

func sweep(ctx context.Context, cli *client.Client, runID string) error {
	cs, ns, err := managed(ctx, cli, runID)
	if err != nil {
		return fmt.Errorf("livefleet: sweep: %w", err)
	}
	var errs []error
	for _, id := range cs {
		if _, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("livefleet: sweep container %s: %w", id[:12], err))
		}
	}
	for _, id := range ns {
		if _, err := cli.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("livefleet: sweep network %s: %w", id[:12], err))
		}
	}
	return errors.Join(errs...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// debugLogger passes testcontainers' log lines to a slog logger at debug
// level.
type debugLogger struct{ l *slog.Logger }

func (d debugLogger) Printf(format string, v ...any) {
	d.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "component", "testcontainers")
}

// nodeSets strip what a node does not use from its copy of the scenario:
// the workload (whose trace files are not in the container) becomes one
// synthetic stream, and jobs, faults and expectations go.
func nodeSets(sc *scenarios.Scenario) []string {
	if len(sc.Tenants) == 0 || len(sc.Classes) == 0 || len(sc.Models) == 0 {
		return nil // the loader has refused such a scenario already
	}
	stream := fmt.Sprintf(`workload=[{name: node-stub, tenant: %q, class: %q, model: %q, arrivals: {process: poisson, rate: 1}, `+
		`input_tokens: {dist: constant, mean: 1}, output_tokens: {dist: constant, mean: 1}}]`,
		sc.Tenants[0].Name, sc.Classes[0].Name, sc.Models[0].Name)
	return []string{stream, "jobs=[]", "faults=[]", "expect=[]"}
}

// logTail is the end of a failed container's output, to say why it failed.
func logTail(ctx context.Context, ctr *testcontainers.DockerContainer) string {
	if ctr == nil {
		return ""
	}
	rc, err := ctr.Logs(context.WithoutCancel(ctx))
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 1<<16))
	out := strings.TrimSpace(string(b))
	if len(out) > 600 {
		out = "…" + out[len(out)-600:]
	}
	if out == "" {
		return ""
	}
	return "; its output: " + out
}
