package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestCUDAVersion(t *testing.T) {
	for _, tt := range []struct {
		in   int
		want string
	}{{12040, "12.4"}, {12020, "12.2"}, {12080, "12.8"}, {11080, "11.8"}, {13000, "13.0"}, {0, ""}} {
		if got := CUDAVersion(tt.in); got != tt.want {
			t.Errorf("CUDAVersion(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPrecisions(t *testing.T) {
	for _, tt := range []struct {
		major, minor int
		want         []string
	}{
		{7, 0, []string{"fp16"}},                        // V100
		{8, 0, []string{"bf16", "fp16"}},                // A100
		{8, 9, []string{"bf16", "fp16", "fp8"}},         // L4, RTX 4090
		{9, 0, []string{"bf16", "fp16", "fp8"}},         // H100, H200
		{10, 0, []string{"bf16", "fp16", "fp8", "fp4"}}, // B200
		{12, 0, []string{"bf16", "fp16", "fp8", "fp4"}}, // RTX PRO 6000 Blackwell
	} {
		if got := Precisions(tt.major, tt.minor); !slices.Equal(got, tt.want) {
			t.Errorf("Precisions(%d, %d) = %v, want %v", tt.major, tt.minor, got, tt.want)
		}
	}
}

func TestBandwidth(t *testing.T) {
	for _, tt := range []struct {
		name        string
		bits, clock int
		want        float64
	}{
		{"H100 SXM", 5120, 2619, 3352.3},
		{"A100 80GB SXM", 5120, 1593, 2039},
		{"H200", 6144, 3201, 4916.7},
		{"RTX 4090", 384, 10501, 1008.1},
		{"unknown clock", 5120, 0, 0},
	} {
		if got := Bandwidth(tt.bits, tt.clock); got != tt.want {
			t.Errorf("%s: Bandwidth(%d, %d) = %v, want %v", tt.name, tt.bits, tt.clock, got, tt.want)
		}
	}
}

func TestAcceleratorName(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"},
		{"NVIDIA H200 141GB HBM3e", "h200-141gb-hbm3e"},
		{"Mock NVIDIA A100-SXM4-40GB", "mock-a100-sxm4-40gb"},
		{"NVIDIA GeForce RTX 4090", "geforce-rtx-4090"},
		{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell-server-edition"},
		{"NVIDIA", "gpu"},
	} {
		if got := AcceleratorName(tt.in); got != tt.want {
			t.Errorf("AcceleratorName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// fakeH100s is an 8-GPU H100 node as a real driver would describe it.
func fakeH100s(n int) Inventory {
	inv := Inventory{Driver: "570.124.06", CUDA: "12.8", NVML: "12.570.124.06"}
	for i := range n {
		inv.GPUs = append(inv.GPUs, GPU{
			Index: i, UUID: "GPU-" + strings.Repeat(string(rune('a'+i)), 8), Name: "NVIDIA H100 80GB HBM3",
			Architecture: "hopper", MemoryBytes: 81559 << 20, ComputeCapability: "9.0", MIG: "disabled", ECC: "enabled",
			NVLink: &NVLink{Links: 18, Active: 18}, BusWidthBits: 5120, MaxMemClockMHz: 2619, BandwidthGBs: 3352.3,
		})
	}
	return inv
}

// paste inserts a fragment's accelerator and pool items under a scenario's
// own accelerators: and pools: keys, as an author pasting it would.
func paste(t *testing.T, scenario, fragment []byte) []byte {
	t.Helper()
	section := map[string][]string{}
	key := ""
	for _, line := range strings.Split(strings.TrimRight(string(fragment), "\n"), "\n") {
		switch {
		case line == "accelerators:" || line == "pools:":
			key = strings.TrimSuffix(line, ":")
		case key != "":
			section[key] = append(section[key], line)
		}
	}
	require.NotEmpty(t, section["accelerators"], "fragment:\n%s", fragment)
	require.NotEmpty(t, section["pools"], "fragment:\n%s", fragment)
	var out []string
	for _, line := range strings.Split(string(scenario), "\n") {
		out = append(out, line)
		if k := strings.TrimSuffix(line, ":"); k != line && section[k] != nil {
			out = append(out, section[k]...)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// loadPasted pastes the fragment into the default library scenario and
// loads it.
func loadPasted(t *testing.T, fragment []byte) (*scenarios.Scenario, error) {
	t.Helper()
	base, err := scenarios.Source(scenarios.DefaultName)
	require.NoError(t, err)
	return scenarios.Parse("pasted.yaml", paste(t, base, fragment))
}

func poolNamed(sc *scenarios.Scenario, name string) *scenarios.Pool {
	for i := range sc.Pools {
		if sc.Pools[i].Name == name {
			return &sc.Pools[i]
		}
	}
	return nil
}

func TestFragmentLoadsAsScenario(t *testing.T) {
	frag, err := fakeH100s(8).Fragment(PoolOptions{Pool: "lab-h100", Region: "us-east", Runtime: "vllm-0.8.5",
		Models: []string{"llama-3.1-8b", "llama-3.1-70b"}, GPUsPerReplica: 4})
	require.NoError(t, err)
	text, err := frag.YAML()
	require.NoError(t, err)
	golden(t, "fake-h100.yaml", text)

	sc, err := loadPasted(t, text)
	require.NoError(t, err, "pasted:\n%s", text)
	p := poolNamed(sc, "lab-h100")
	require.NotNil(t, p)
	require.Equal(t, scenarios.Pool{Name: "lab-h100", Region: "us-east", Provider: "on-prem", Accelerator: "h100-80gb-hbm3",
		GPUsPerReplica: 4, Replicas: 2, Runtime: "vllm-0.8.5", Driver: "570.124.06",
		Models: []string{"llama-3.1-8b", "llama-3.1-70b"}, MaxBatch: 256}, *p)
	i := slices.IndexFunc(sc.Accelerators, func(a scenarios.Accelerator) bool { return a.Name == "h100-80gb-hbm3" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, scenarios.Accelerator{Name: "h100-80gb-hbm3", MemoryGiB: 79.6, UsableFraction: 0.9,
		Precisions: []string{"bf16", "fp16", "fp8"}, BandwidthGBs: 3352.3}, sc.Accelerators[i])

	// The JSON form is YAML too: pasted as flow, it loads the same.
	js, err := json.Marshal(frag)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(js, &m))
	flow := []byte("accelerators:\n" + flowItems(t, m["accelerators"]) + "pools:\n" + flowItems(t, m["pools"]))
	sc2, err := loadPasted(t, flow)
	require.NoError(t, err, "pasted:\n%s", flow)
	require.Equal(t, *p, *poolNamed(sc2, "lab-h100"))
}

// flowItems writes a JSON array's elements as YAML sequence items.
func flowItems(t *testing.T, arr json.RawMessage) string {
	var items []json.RawMessage
	require.NoError(t, json.Unmarshal(arr, &items))
	var b strings.Builder
	for _, it := range items {
		b.WriteString("  - " + string(it) + "\n")
	}
	return b.String()
}

func TestFragmentWithoutPlacementSaysWhatToSet(t *testing.T) {
	frag, err := fakeH100s(2).Fragment(PoolOptions{})
	require.NoError(t, err)
	text, err := frag.YAML()
	require.NoError(t, err)
	for _, want := range []string{
		"name: on-prem-h100-80gb-hbm3",
		`region: "" # set: a region of the scenario (--region)`,
		`runtime: "" # set: a runtime of the scenario with min_driver <= 570.124.06 (--runtime)`,
		"models: [] # set: models of the scenario it serves (--models)",
		"# 2 x NVIDIA H100 80GB HBM3, hopper, compute capability 9.0, MIG disabled, ECC enabled, NVLink 18/18 links active per GPU",
	} {
		require.Contains(t, string(text), want)
	}
	_, err = loadPasted(t, text)
	require.Error(t, err)
	for _, want := range []string{".region: missing", ".runtime: missing", ".models: missing"} {
		require.Contains(t, err.Error(), want)
	}
}

func TestFragmentOfMixedNode(t *testing.T) {
	inv := fakeH100s(2)
	inv.GPUs = append(inv.GPUs,
		GPU{Index: 2, UUID: "GPU-l4", Name: "NVIDIA L4", MemoryBytes: 23034 << 20, ComputeCapability: "8.9", MIG: "", ECC: "enabled"},
		GPU{Index: 3, UUID: "GPU-l4b", Name: "NVIDIA L4", MemoryBytes: 23034 << 20, ComputeCapability: "8.9", ECC: "disabled"})
	inv.GPUs[1].MIG = "enabled"
	frag, err := inv.Fragment(PoolOptions{Pool: "lab", Region: "us-east", Runtime: "vllm-0.8.5", Models: []string{"llama-3.1-8b"}})
	require.NoError(t, err)
	require.Equal(t, []string{"lab-h100-80gb-hbm3", "lab-l4"}, []string{frag.Pools[0].Name, frag.Pools[1].Name})
	text, err := frag.YAML()
	require.NoError(t, err)
	golden(t, "fake-mixed.yaml", text)
	require.Contains(t, string(text), "MIG enabled on 1 of 2")
	require.Contains(t, string(text), "MIG is enabled on 1 of the 2 GPUs")
	require.Contains(t, string(text), "ECC enabled on 1 of 2")
	sc, err := loadPasted(t, text)
	require.NoError(t, err, "pasted:\n%s", text)
	require.Equal(t, 2, poolNamed(sc, "lab-l4").Replicas)

	_, err = inv.Fragment(PoolOptions{Accelerator: "h100-sxm"})
	require.ErrorContains(t, err, "one accelerator name given for 2 kinds of GPU (h100-80gb-hbm3, l4)")
}

func TestFragmentErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		inv  Inventory
		o    PoolOptions
		want string
	}{
		{"no GPUs", Inventory{Driver: "570.124.06"}, PoolOptions{}, "no GPUs to describe"},
		{"replicas do not divide", fakeH100s(8), PoolOptions{GPUsPerReplica: 3}, "gpus per replica 3: the 8 h100-80gb-hbm3 GPUs do not divide into replicas of 3"},
		{"negative", fakeH100s(8), PoolOptions{GPUsPerReplica: -1, MaxBatch: -2, UsableFraction: 1.5},
			"gpus per replica: got -1, want >= 1; max batch: got -2, want >= 1; usable fraction: got 1.5, want > 0 and <= 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.inv.Fragment(tt.o)
			require.EqualError(t, err, tt.want)
		})
	}
}

// golden compares got with testdata/name, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	require.Equal(t, string(want), string(got), "%s differs; go test -update rewrites it (read the diff)", path)
}

// fakeSource is a Source whose readings the test sets.
type fakeSource struct {
	mu       sync.Mutex
	inv      Inventory
	invErr   error
	readings []Reading
	readErr  error
	xids     chan XID // nil: not an XIDWatcher's events (WatchXIDs says so)
	closed   bool
}

func (f *fakeSource) Inventory() (Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inv, f.invErr
}

func (f *fakeSource) Readings() ([]Reading, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.readings), f.readErr
}

func (f *fakeSource) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeSource) WatchXIDs(ctx context.Context, started func(), fn func(XID)) error {
	if f.xids == nil {
		return ErrNoXIDEvents
	}
	started()
	for {
		select {
		case <-ctx.Done():
			return nil
		case x := <-f.xids:
			fn(x)
		}
	}
}

func fl(f float64) *float64 { return &f }

func newFakeAgent(t *testing.T, src *fakeSource) (*Agent, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a, err := NewAgent(AgentConfig{Source: src, Pool: PoolOptions{Region: "us-east", Runtime: "vllm-0.8.5",
		Models: []string{"llama-3.1-8b"}}, Registry: reg})
	require.NoError(t, err)
	return a, reg
}

func TestAgentMetrics(t *testing.T) {
	src := &fakeSource{inv: fakeH100s(2), readings: []Reading{
		{Index: 0, UUID: "GPU-aaaaaaaa", Utilization: fl(0.87), MemoryUsedBytes: fl(70 << 30), MemoryTotalBytes: fl(81559 << 20),
			PowerWatts: fl(612.5), TemperatureCelsius: fl(71)},
		{Index: 1, UUID: "GPU-bbbbbbbb", Utilization: fl(0), MemoryUsedBytes: fl(0), MemoryTotalBytes: fl(81559 << 20)}, // no power or temperature
	}, xids: make(chan XID)}
	a, reg := newFakeAgent(t, src)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.WatchXIDs(ctx) }()
	src.xids <- XID{GPU: 1, UUID: "GPU-bbbbbbbb", Code: 79}
	src.xids <- XID{GPU: 1, UUID: "GPU-bbbbbbbb", Code: 79}
	src.xids <- XID{GPU: -1, Code: 13}
	src.xids <- XID{GPU: 0, UUID: "GPU-aaaaaaaa", Code: 48} // the watcher has counted the three before

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)

	want := `
# HELP fleetdrill_gpu_power_watts Power draw of the GPU and its memory, in watts (NVML power usage).
# TYPE fleetdrill_gpu_power_watts gauge
fleetdrill_gpu_power_watts{gpu="0",uuid="GPU-aaaaaaaa"} 612.5
# HELP fleetdrill_gpu_temperature_celsius GPU die temperature, in degrees Celsius.
# TYPE fleetdrill_gpu_temperature_celsius gauge
fleetdrill_gpu_temperature_celsius{gpu="0",uuid="GPU-aaaaaaaa"} 71
# HELP fleetdrill_gpu_utilization_ratio Share of the last sample period (1/6 s to 1 s, by product) during which a kernel ran on the GPU (NVML utilization.gpu / 100).
# TYPE fleetdrill_gpu_utilization_ratio gauge
fleetdrill_gpu_utilization_ratio{gpu="0",uuid="GPU-aaaaaaaa"} 0.87
fleetdrill_gpu_utilization_ratio{gpu="1",uuid="GPU-bbbbbbbb"} 0
# HELP fleetdrill_gpu_memory_used_bytes GPU memory allocated, in bytes (NVML memory info).
# TYPE fleetdrill_gpu_memory_used_bytes gauge
fleetdrill_gpu_memory_used_bytes{gpu="0",uuid="GPU-aaaaaaaa"} 7.516192768e+10
fleetdrill_gpu_memory_used_bytes{gpu="1",uuid="GPU-bbbbbbbb"} 0
# HELP fleetdrill_gpu_xid_watching 1 while the agent receives XID events, 0 when the GPUs cannot report them (then fleetdrill_gpu_xid_errors_total stays empty).
# TYPE fleetdrill_gpu_xid_watching gauge
fleetdrill_gpu_xid_watching 1
# HELP fleetdrill_gpu_info The GPU's product, driver, CUDA version and compute capability as labels; always 1.
# TYPE fleetdrill_gpu_info gauge
fleetdrill_gpu_info{compute_capability="9.0",cuda="12.8",driver="570.124.06",gpu="0",name="NVIDIA H100 80GB HBM3",uuid="GPU-aaaaaaaa"} 1
fleetdrill_gpu_info{compute_capability="9.0",cuda="12.8",driver="570.124.06",gpu="1",name="NVIDIA H100 80GB HBM3",uuid="GPU-bbbbbbbb"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		MetricPower, MetricTemperature, MetricUtilization, MetricMemoryUsed, MetricXIDWatching, MetricInfo))
	require.Equal(t, 2.0, testutil.ToFloat64(a.xids.WithLabelValues("1", "GPU-bbbbbbbb", "79")))
	require.Equal(t, 1.0, testutil.ToFloat64(a.xids.WithLabelValues("", "", "13")))

	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 0.0, testutil.ToFloat64(a.watching))
}

func TestAgentWithoutXIDEvents(t *testing.T) {
	a, reg := newFakeAgent(t, &fakeSource{inv: fakeH100s(1)})
	require.ErrorIs(t, a.WatchXIDs(t.Context()), ErrNoXIDEvents)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fleetdrill_gpu_xid_watching 1 while the agent receives XID events, 0 when the GPUs cannot report them (then fleetdrill_gpu_xid_errors_total stays empty).
# TYPE fleetdrill_gpu_xid_watching gauge
fleetdrill_gpu_xid_watching 0
`), MetricXIDWatching))
}

func TestAgentHandler(t *testing.T) {
	src := &fakeSource{inv: fakeH100s(2), readings: []Reading{{Index: 0, UUID: "GPU-aaaaaaaa", Utilization: fl(0.5)}}}
	a, _ := newFakeAgent(t, src)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	code, body := get("/inventory")
	require.Equal(t, http.StatusOK, code, body)
	var doc struct {
		Inventory Inventory `json:"inventory"`
		Scenario  struct {
			Accelerators []map[string]any `json:"accelerators"`
			Pools        []map[string]any `json:"pools"`
		} `json:"scenario"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	require.Equal(t, src.inv, doc.Inventory)
	require.Equal(t, "h100-80gb-hbm3", doc.Scenario.Accelerators[0]["name"])
	require.Equal(t, 2.0, doc.Scenario.Pools[0]["replicas"])
	require.Equal(t, "570.124.06", doc.Scenario.Pools[0]["driver"])

	code, body = get("/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `fleetdrill_gpu_utilization_ratio{gpu="0",uuid="GPU-aaaaaaaa"} 0.5`)

	code, body = get("/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	// A failed reading leaves the rest of the scrape; a failed inventory
	// is a 503 that says why.
	src.mu.Lock()
	src.readErr, src.invErr = errors.New("GPU is lost"), errors.New("NVML: gpu 1: name: GPU is lost")
	src.mu.Unlock()
	code, body = get("/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "fleetdrill_gpu_info{")
	require.NotContains(t, body, "fleetdrill_gpu_utilization_ratio{")
	code, body = get("/inventory")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"error":"NVML: gpu 1: name: GPU is lost"}`, body)
}

func TestNewAgentRefuses(t *testing.T) {
	_, err := NewAgent(AgentConfig{Source: &fakeSource{inv: fakeH100s(1)}, Registry: prometheus.DefaultRegisterer.(*prometheus.Registry)})
	require.ErrorContains(t, err, "its own registry")
	_, err = NewAgent(AgentConfig{Source: &fakeSource{inv: fakeH100s(8)}, Registry: prometheus.NewRegistry(), Pool: PoolOptions{GPUsPerReplica: 3}})
	require.ErrorContains(t, err, "do not divide")
	_, err = NewAgent(AgentConfig{Source: &fakeSource{invErr: errors.New("boom")}, Registry: prometheus.NewRegistry()})
	require.EqualError(t, err, "boom")
}

func TestSummary(t *testing.T) {
	inv := fakeH100s(8)
	require.Equal(t, "8 x NVIDIA H100 80GB HBM3, driver 570.124.06 (CUDA 12.8)", inv.Summary())
	inv.GPUs = append(inv.GPUs, GPU{Name: "NVIDIA L4"})
	require.Equal(t, "8 x NVIDIA H100 80GB HBM3 + 1 x NVIDIA L4, driver 570.124.06 (CUDA 12.8)", inv.Summary())
	require.Equal(t, "no GPUs, driver 1", Inventory{Driver: "1"}.Summary())
}
