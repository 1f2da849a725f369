package main

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/gpu"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// fakeGPUs is a gpu.Source with fixed answers.
type fakeGPUs struct {
	inv      gpu.Inventory
	readings []gpu.Reading
	mu       sync.Mutex
	closed   int
}

func (f *fakeGPUs) Inventory() (gpu.Inventory, error) { return f.inv, nil }
func (f *fakeGPUs) Readings() ([]gpu.Reading, error)  { return f.readings, nil }
func (f *fakeGPUs) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed++
	return nil
}

func (f *fakeGPUs) closes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// fakeH100Node is an 8-GPU H100 node with a recent driver.
func fakeH100Node() *fakeGPUs {
	f := &fakeGPUs{inv: gpu.Inventory{Driver: "570.124.06", CUDA: "12.8", NVML: "12.570.124.06"}}
	for i := range 8 {
		uuid := "GPU-0000000" + string(rune('0'+i))
		f.inv.GPUs = append(f.inv.GPUs, gpu.GPU{Index: i, UUID: uuid, Name: "NVIDIA H100 80GB HBM3",
			MemoryBytes: 81559 << 20, ComputeCapability: "9.0", MIG: "disabled", ECC: "enabled",
			NVLink: &gpu.NVLink{Links: 18, Active: 18}, BusWidthBits: 5120, MaxMemClockMHz: 2619, BandwidthGBs: 3352.3})
		util := 0.25
		f.readings = append(f.readings, gpu.Reading{Index: i, UUID: uuid, Utilization: &util})
	}
	return f
}

// useGPUs makes the commands open src (or fail with err) for one test.
func useGPUs(t *testing.T, src gpu.Source, err error) {
	t.Helper()
	old := openGPUs
	openGPUs = func() (gpu.Source, error) { return src, err }
	t.Cleanup(func() { openGPUs = old })
}

// pasteFragment inserts an inventory fragment's items under the default
// scenario's accelerators: and pools:, as an author pasting it would.
func pasteFragment(t *testing.T, fragment string) []byte {
	t.Helper()
	base, err := scenarios.Source(scenarios.DefaultName)
	require.NoError(t, err)
	section := map[string][]string{}
	key := ""
	for _, line := range strings.Split(strings.TrimRight(fragment, "\n"), "\n") {
		switch {
		case line == "accelerators:" || line == "pools:":
			key = strings.TrimSuffix(line, ":")
		case key != "":
			section[key] = append(section[key], line)
		}
	}
	var out []string
	for _, line := range strings.Split(string(base), "\n") {
		out = append(out, line)
		if k := strings.TrimSuffix(line, ":"); k != line && section[k] != nil {
			out = append(out, section[k]...)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

func TestInventoryCommandPrintsAPoolTheLoaderAccepts(t *testing.T) {
	src := fakeH100Node()
	useGPUs(t, src, nil)
	code, out, errs := runCLI(t, "inventory", "--pool", "lab-h100", "--region", "us-east", "--runtime", "vllm-0.8.5",
		"--models", "llama-3.1-8b,llama-3.1-70b", "--gpus-per-replica", "4", "--accelerator", "h100-lab")
	require.Equal(t, exitOK, code, errs)
	require.Empty(t, errs)
	require.Equal(t, 1, src.closes())
	require.True(t, strings.HasPrefix(out, "# fleetdrill inventory: 8 x NVIDIA H100 80GB HBM3, driver 570.124.06 (CUDA 12.8)\n"), out)

	sc, err := scenarios.Parse("pasted.yaml", pasteFragment(t, out))
	require.NoError(t, err, "stdout:\n%s", out)
	var pool *scenarios.Pool
	for i := range sc.Pools {
		if sc.Pools[i].Name == "lab-h100" {
			pool = &sc.Pools[i]
		}
	}
	require.NotNil(t, pool, out)
	require.Equal(t, scenarios.Pool{Name: "lab-h100", Region: "us-east", Provider: "on-prem", Accelerator: "h100-lab",
		GPUsPerReplica: 4, Replicas: 2, Runtime: "vllm-0.8.5", Driver: "570.124.06",
		Models: []string{"llama-3.1-8b", "llama-3.1-70b"}, MaxBatch: 256}, *pool)
}

func TestInventoryCommandJSON(t *testing.T) {
	useGPUs(t, fakeH100Node(), nil)
	code, out, errs := runCLI(t, "inventory", "--format", "json", "--region", "us-east")
	require.Equal(t, exitOK, code, errs)
	var doc struct {
		Inventory gpu.Inventory `json:"inventory"`
		Scenario  struct {
			Accelerators []struct {
				Name       string   `json:"name"`
				MemoryGiB  float64  `json:"memory_gib"`
				Precisions []string `json:"precisions"`
			} `json:"accelerators"`
			Pools []struct {
				Name     string `json:"name"`
				Region   string `json:"region"`
				Replicas int    `json:"replicas"`
				Driver   string `json:"driver"`
			} `json:"pools"`
		} `json:"scenario"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Len(t, doc.Inventory.GPUs, 8)
	require.Equal(t, "GPU-00000003", doc.Inventory.GPUs[3].UUID)
	require.Equal(t, "h100-80gb-hbm3", doc.Scenario.Accelerators[0].Name)
	require.Equal(t, 79.6, doc.Scenario.Accelerators[0].MemoryGiB)
	require.Equal(t, []string{"bf16", "fp16", "fp8"}, doc.Scenario.Accelerators[0].Precisions)
	require.Equal(t, "on-prem-h100-80gb-hbm3", doc.Scenario.Pools[0].Name)
	require.Equal(t, "us-east", doc.Scenario.Pools[0].Region)
	require.Equal(t, 8, doc.Scenario.Pools[0].Replicas)
	require.Equal(t, "570.124.06", doc.Scenario.Pools[0].Driver)
}

// requireOneLine checks the shape of every refusal: nothing on stdout,
// exit status 2, and one line on stderr.
func requireOneLine(t *testing.T, code int, out, errs, want string) {
	t.Helper()
	require.Equal(t, exitInvalid, code, "stderr: %s", errs)
	require.Empty(t, out)
	require.Equal(t, 1, strings.Count(errs, "\n"), "want one line on stderr, got %q", errs)
	require.Equal(t, want+"\n", errs)
}

func TestInventoryCommandRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"format", []string{"--format", "xml"}, `fleetdrill: inventory: --format "xml": want yaml or json`},
		{"replicas", []string{"--gpus-per-replica", "3"},
			"fleetdrill: inventory: gpus per replica 3: the 8 h100-80gb-hbm3 GPUs do not divide into replicas of 3"},
		{"several problems, one line", []string{"--gpus-per-replica", "0", "--max-batch", "-1", "--usable-fraction", "0", "--format", "toml"},
			`fleetdrill: inventory: --format "toml": want yaml or json; --gpus-per-replica: got 0, want >= 1; --max-batch: got -1, want >= 1; --usable-fraction: got 0, want > 0 and <= 1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			useGPUs(t, fakeH100Node(), nil)
			code, out, errs := runCLI(t, append([]string{"inventory"}, tt.args...)...)
			requireOneLine(t, code, out, errs, tt.want)
		})
	}
}

func TestInventoryCommandWithoutNVML(t *testing.T) {
	useGPUs(t, nil, errors.New("no NVIDIA driver: libnvidia-ml.so.1 not found (NVML ERROR_LIBRARY_NOT_FOUND)"))
	code, out, errs := runCLI(t, "inventory")
	requireOneLine(t, code, out, errs,
		"fleetdrill: inventory: no NVIDIA driver: libnvidia-ml.so.1 not found (NVML ERROR_LIBRARY_NOT_FOUND)")
}

// TestInventoryCommandWithoutDriver opens the real NVML: with cgo and no
// driver (libnvidia-ml.so.1) on this machine, or without cgo, it fails in
// one line with exit status 2.
func TestInventoryCommandWithoutDriver(t *testing.T) {
	if src, err := gpu.Open(); err == nil {
		src.Close()
		t.Skip("this machine has an NVIDIA driver")
	}
	for _, cmd := range []string{"inventory", "agent"} {
		code, out, errs := runCLI(t, cmd)
		requireOneLine(t, code, out, errs, "fleetdrill: "+cmd+": "+noNVML)
	}
}
