package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The agent's series. Labels name hardware (the GPU's index and UUID, an
// XID code), never a tenant.
const (
	MetricInfo        = "fleetdrill_gpu_info"
	MetricUtilization = "fleetdrill_gpu_utilization_ratio"
	MetricMemoryUsed  = "fleetdrill_gpu_memory_used_bytes"
	MetricMemoryTotal = "fleetdrill_gpu_memory_total_bytes"
	MetricPower       = "fleetdrill_gpu_power_watts"
	MetricTemperature = "fleetdrill_gpu_temperature_celsius"
	MetricXIDErrors   = "fleetdrill_gpu_xid_errors_total"
	MetricXIDWatching = "fleetdrill_gpu_xid_watching"
)

// AgentConfig configures an Agent.
type AgentConfig struct {
	Source Source
	// Pool is what /inventory's scenario fragment is built with.
	Pool PoolOptions
	// Registry receives the agent's series. It must be the agent's own,
	// never prometheus.DefaultRegisterer: the agent may run beside other
	// fleetdrill servers in one process (tests do).
	Registry *prometheus.Registry
	Logger   *slog.Logger // nil: discard
}

// Agent serves a node's GPUs over HTTP: /inventory (JSON), /metrics
// (Prometheus) and /healthz.
type Agent struct {
	src      Source
	pool     PoolOptions
	reg      *prometheus.Registry
	log      *slog.Logger
	inv      Inventory // at start, for fleetdrill_gpu_info
	xids     *prometheus.CounterVec
	watching prometheus.Gauge
}

// NewAgent reads the inventory once (a node whose GPUs cannot say what
// they are has nothing to serve), checks that the pool options describe
// it, and registers the agent's series.
func NewAgent(cfg AgentConfig) (*Agent, error) {
	if cfg.Source == nil || cfg.Registry == nil {
		return nil, errors.New("gpu agent: a Source and a Registry are required")
	}
	if cfg.Registry == prometheus.DefaultRegisterer {
		return nil, errors.New("gpu agent: give the agent its own registry, not the default one")
	}
	inv, err := cfg.Source.Inventory()
	if err != nil {
		return nil, err
	}
	if _, err := inv.Fragment(cfg.Pool); err != nil {
		return nil, err
	}
	a := &Agent{src: cfg.Source, pool: cfg.Pool, reg: cfg.Registry, log: cfg.Logger, inv: inv}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.xids = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricXIDErrors,
		Help: "XID errors the driver reported (NVML critical-error events), by GPU and XID code; a series appears with the first error of its code.",
	}, []string{"gpu", "uuid", "xid"})
	a.watching = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricXIDWatching,
		Help: "1 while the agent receives XID events, 0 when the GPUs cannot report them (then " + MetricXIDErrors + " stays empty).",
	})
	for _, c := range []prometheus.Collector{&collector{a: a}, a.xids, a.watching} {
		if err := cfg.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("gpu agent: %w", err)
		}
	}
	return a, nil
}

// Inventory is the inventory the agent read at start.
func (a *Agent) Inventory() Inventory { return a.inv }

// WatchXIDs counts XID errors until ctx is done. It returns at once with
// ErrNoXIDEvents (wrapped) when the source cannot report them, and
// fleetdrill_gpu_xid_watching stays 0.
func (a *Agent) WatchXIDs(ctx context.Context) error {
	w, ok := a.src.(XIDWatcher)
	if !ok {
		return ErrNoXIDEvents
	}
	defer a.watching.Set(0)
	return w.WatchXIDs(ctx, func() { a.watching.Set(1) }, func(x XID) {
		gpu := ""
		if x.GPU >= 0 {
			gpu = strconv.Itoa(x.GPU)
		}
		a.xids.WithLabelValues(gpu, x.UUID, strconv.FormatUint(x.Code, 10)).Inc()
		a.log.Warn("XID error", "gpu", gpu, "uuid", x.UUID, "xid", x.Code)
	})
}

// Handler serves /inventory, /metrics and /healthz.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /inventory", a.serveInventory)
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(a.log.Handler(), slog.LevelError),
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	return mux
}

func (a *Agent) serveInventory(w http.ResponseWriter, _ *http.Request) {
	doc, err := NewDocument(a.src, a.pool)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(doc)
}

// NewDocument reads the source's inventory and describes it with o.
func NewDocument(src Source, o PoolOptions) (*Document, error) {
	inv, err := src.Inventory()
	if err != nil {
		return nil, err
	}
	frag, err := inv.Fragment(o)
	if err != nil {
		return nil, err
	}
	return &Document{Inventory: inv, Scenario: frag}, nil
}

// collector reads the GPUs at each scrape.
type collector struct{ a *Agent }

var (
	gpuLabels   = []string{"gpu", "uuid"}
	descInfo    = prometheus.NewDesc(MetricInfo, "The GPU's product, driver, CUDA version and compute capability as labels; always 1.", []string{"gpu", "uuid", "name", "driver", "cuda", "compute_capability"}, nil)
	descUtil    = prometheus.NewDesc(MetricUtilization, "Share of the last sample period (1/6 s to 1 s, by product) during which a kernel ran on the GPU (NVML utilization.gpu / 100).", gpuLabels, nil)
	descMemUsed = prometheus.NewDesc(MetricMemoryUsed, "GPU memory allocated, in bytes (NVML memory info).", gpuLabels, nil)
	descMemTot  = prometheus.NewDesc(MetricMemoryTotal, "GPU memory in total, in bytes (NVML memory info).", gpuLabels, nil)
	descPower   = prometheus.NewDesc(MetricPower, "Power draw of the GPU and its memory, in watts (NVML power usage).", gpuLabels, nil)
	descTemp    = prometheus.NewDesc(MetricTemperature, "GPU die temperature, in degrees Celsius.", gpuLabels, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descUtil, descMemUsed, descMemTot, descPower, descTemp} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	inv := c.a.inv
	for _, g := range inv.GPUs {
		ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1,
			strconv.Itoa(g.Index), g.UUID, g.Name, inv.Driver, inv.CUDA, g.ComputeCapability)
	}
	rs, err := c.a.src.Readings()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descUtil, fmt.Errorf("reading the GPUs: %w", err))
		return
	}
	for _, r := range rs {
		labels := []string{strconv.Itoa(r.Index), r.UUID}
		for _, m := range []struct {
			desc *prometheus.Desc
			v    *float64
		}{
			{descUtil, r.Utilization},
			{descMemUsed, r.MemoryUsedBytes},
			{descMemTot, r.MemoryTotalBytes},
			{descPower, r.PowerWatts},
			{descTemp, r.TemperatureCelsius},
		} {
			if m.v != nil {
				ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, *m.v, labels...)
			}
		}
	}
}
