//go:build cgo

package gpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/gpu/gpumock"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
)

func openMock(t *testing.T, s *server.Server) *NVML {
	t.Helper()
	src, err := NewNVML(s)
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	return src
}

// pasteInto pastes a fragment into testdata/catalogue.yaml and loads it.
func pasteInto(t *testing.T, fragment []byte) (*scenarios.Scenario, error) {
	t.Helper()
	base, err := os.ReadFile(filepath.Join("testdata", "catalogue.yaml"))
	require.NoError(t, err)
	return scenarios.Parse("catalogue.yaml", paste(t, base, fragment))
}

func TestDGXInventoryLoadsAsScenarioPool(t *testing.T) {
	for _, tt := range []struct {
		name      string
		server    *server.Server
		hw        gpumock.HW
		product   string
		accel     string
		memMiB    uint64
		cc        string
		arch      string
		driver    string
		cuda      string
		memoryGiB float64
		precs     []string
		bandwidth float64
	}{
		{"dgxa100", dgxa100.New(), gpumock.A100, "Mock NVIDIA A100-SXM4-40GB", "mock-a100-sxm4-40gb", 40960, "8.0", "ampere",
			"550.54.15", "12.4", 40, []string{"bf16", "fp16"}, 1555.2},
		{"dgxh100", dgxh100.New(), gpumock.H100, "NVIDIA H100 80GB HBM3", "h100-80gb-hbm3", 81920, "9.0", "hopper",
			"550.54.15", "12.4", 80, []string{"bf16", "fp16", "fp8"}, 3352.3},
		{"dgxh200", dgxh200.New(), gpumock.H200, "NVIDIA H200 141GB HBM3e", "h200-141gb-hbm3e", 144384, "9.0", "hopper",
			"550.54.15", "12.4", 141, []string{"bf16", "fp16", "fp8"}, 4916.7},
		{"dgxb200", dgxb200.New(), gpumock.B200, "NVIDIA B200 180GB HBM3e", "b200-180gb-hbm3e", 184320, "10.0", "blackwell",
			"560.28.03", "12.6", 180, []string{"bf16", "fp16", "fp8", "fp4"}, 8183.8},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gpumock.Complete(tt.server, tt.hw, nil)
			src := openMock(t, tt.server)
			inv, err := src.Inventory()
			require.NoError(t, err)
			require.Equal(t, tt.driver, inv.Driver)
			require.Equal(t, tt.cuda, inv.CUDA)
			require.Len(t, inv.GPUs, 8)
			for i, g := range inv.GPUs {
				require.Equal(t, i, g.Index)
				require.True(t, strings.HasPrefix(g.UUID, "GPU-"), g.UUID)
				require.Equal(t, tt.product, g.Name)
				require.Equal(t, tt.memMiB<<20, g.MemoryBytes)
				require.Equal(t, tt.cc, g.ComputeCapability)
				require.Equal(t, tt.arch, g.Architecture)
				require.Equal(t, "disabled", g.MIG)
				require.Equal(t, "enabled", g.ECC)
				require.Equal(t, &NVLink{Links: tt.hw.NVLinks, Active: tt.hw.NVLinks}, g.NVLink)
				require.Equal(t, tt.bandwidth, g.BandwidthGBs)
			}

			frag, err := inv.Fragment(PoolOptions{Pool: "lab-" + tt.name, Region: "us-east", Runtime: "vllm-0.6.3",
				Models: []string{"llama-3.1-8b"}})
			require.NoError(t, err)
			text, err := frag.YAML()
			require.NoError(t, err)
			golden(t, tt.name+".yaml", text)

			sc, err := pasteInto(t, text)
			require.NoError(t, err, "pasted:\n%s", text)
			require.Len(t, sc.Accelerators, 1)
			require.Equal(t, scenarios.Accelerator{Name: tt.accel, MemoryGiB: tt.memoryGiB, UsableFraction: 0.9,
				Precisions: tt.precs, BandwidthGBs: tt.bandwidth}, sc.Accelerators[0])
			require.Len(t, sc.Pools, 1)
			require.Equal(t, scenarios.Pool{Name: "lab-" + tt.name, Region: "us-east", Provider: "on-prem", Accelerator: tt.accel,
				GPUsPerReplica: 1, Replicas: 8, Runtime: "vllm-0.6.3", Driver: tt.driver,
				Models: []string{"llama-3.1-8b"}, MaxBatch: 256}, sc.Pools[0])
			// The registry, which routing obeys, agrees: every replica
			// can serve the model.
			for _, p := range twin.Compatibility(sc) {
				require.True(t, p.Verdict.Servable, "%s/%s: %s", p.Pool, p.Model, p.Verdict)
			}
		})
	}
}

// TestOldDriverRefusedEndToEnd: a node with an old driver, as NVML
// reports it, is described as a pool with that driver; the scenario
// loader refuses the pool with a runtime the driver is too old for, and
// the twin's compatibility registry says why a runtime upgrade would
// fail while the installed runtime serves.
func TestOldDriverRefusedEndToEnd(t *testing.T) {
	s, err := server.New(
		server.WithGPUs(gpus.Multiple(8, gpus.H100_SXM5_80GB)...),
		server.WithDriverVersion("535.104.05"),
		server.WithNVMLVersion("12.535.104.05"),
		server.WithCUDADriverVersion(12020),
	)
	require.NoError(t, err)
	gpumock.Complete(s, gpumock.H100, nil)
	inv, err := openMock(t, s).Inventory()
	require.NoError(t, err)
	require.Equal(t, "535.104.05", inv.Driver)
	require.Equal(t, "12.2", inv.CUDA)

	opts := PoolOptions{Pool: "lab-h100", Region: "us-east", Runtime: "vllm-0.8.5", Models: []string{"llama-3.1-8b"}}
	frag, err := inv.Fragment(opts)
	require.NoError(t, err)
	text, err := frag.YAML()
	require.NoError(t, err)
	require.Contains(t, string(text), "driver: 535.104.05 # NVML; supports CUDA up to 12.2")
	_, err = pasteInto(t, text)
	require.ErrorContains(t, err, `pools[0].driver: got "535.104.05", want >= 570.26, the min_driver of runtime vllm-0.8.5`)

	// With the runtime the node runs today, the pool loads...
	opts.Runtime = "vllm-0.4.3"
	frag, err = inv.Fragment(opts)
	require.NoError(t, err)
	text, err = frag.YAML()
	require.NoError(t, err)
	sc, err := pasteInto(t, text)
	require.NoError(t, err, "pasted:\n%s", text)
	reg := compile.Registry(sc)
	ps := sc.Pools[0]
	pool := fleet.Pool{Name: ps.Name, Region: ps.Region, Accelerator: ps.Accelerator, GPUsPerReplica: ps.GPUsPerReplica,
		Runtime: ps.Runtime, Driver: ps.Driver, Models: ps.Models}
	v := reg.Check(&pool, "llama-3.1-8b")
	require.True(t, v.Servable, "%s", v)

	// ... and the registry refuses the upgrade to a runtime built for a
	// newer CUDA, with the reason an operator reads.
	for _, tt := range []struct{ runtime, reason string }{
		{"vllm-0.6.3", "driver 535.104.05 < 550.54 required by vllm-0.6.3"},
		{"vllm-0.8.5", "driver 535.104.05 < 570.26 required by vllm-0.8.5"},
	} {
		pool.Runtime = tt.runtime
		v := reg.Check(&pool, "llama-3.1-8b")
		require.False(t, v.Servable)
		require.Equal(t, []string{tt.reason}, v.Reasons)
		require.Equal(t, "incompatible: "+tt.reason, v.String())
	}
}

func TestUnsupportedOptionalsAreLeftOut(t *testing.T) {
	s := dgxh100.New()
	gpumock.Complete(s, gpumock.HW{NoReadings: true}, nil)
	src := openMock(t, s)
	inv, err := src.Inventory()
	require.NoError(t, err)
	g := inv.GPUs[0]
	require.Equal(t, "disabled", g.ECC)
	require.Nil(t, g.NVLink)
	require.Zero(t, g.BandwidthGBs)

	rs, err := src.Readings()
	require.NoError(t, err)
	require.Len(t, rs, 8)
	require.Nil(t, rs[0].Utilization)
	require.Nil(t, rs[0].PowerWatts)
	require.Nil(t, rs[0].TemperatureCelsius)
	require.Equal(t, float64(81920<<20), *rs[0].MemoryTotalBytes)

	reg := prometheus.NewRegistry()
	a, err := NewAgent(AgentConfig{Source: src, Registry: reg})
	require.NoError(t, err)
	require.ErrorIs(t, a.WatchXIDs(t.Context()), ErrNoXIDEvents)
	require.Equal(t, 0.0, testutil.ToFloat64(a.watching))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Equal(t, 8, testutil.CollectAndCount(reg, MetricMemoryTotal))
	require.Equal(t, 0, testutil.CollectAndCount(reg, MetricPower, MetricTemperature, MetricUtilization))
}

func TestMIGModeIsReported(t *testing.T) {
	s := dgxh100.New()
	gpumock.Complete(s, gpumock.H100, nil)
	_, ret := s.Devices[2].SetMigMode(nvml.DEVICE_MIG_ENABLE)
	require.Equal(t, nvml.SUCCESS, ret)
	inv, err := openMock(t, s).Inventory()
	require.NoError(t, err)
	require.Equal(t, "enabled", inv.GPUs[2].MIG)
	require.Equal(t, "disabled", inv.GPUs[3].MIG)
	frag, err := inv.Fragment(PoolOptions{})
	require.NoError(t, err)
	text, err := frag.YAML()
	require.NoError(t, err)
	require.Contains(t, string(text), "MIG enabled on 1 of 8")
	require.Contains(t, string(text), "# MIG is enabled on 1 of the 8 GPUs: this pool counts whole GPUs, not MIG instances")
}

func TestNVMLAgentReadingsAndXIDs(t *testing.T) {
	s := dgxh200.New()
	xids := make(chan nvml.EventData)
	gpumock.Complete(s, gpumock.H200, xids)
	src := openMock(t, s)
	reg := prometheus.NewRegistry()
	a, err := NewAgent(AgentConfig{Source: src, Registry: reg})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var watchErr error
	wg.Go(func() { watchErr = a.WatchXIDs(ctx) })
	lost := s.Devices[3]
	xids <- nvml.EventData{Device: lost, EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	xids <- nvml.EventData{Device: lost, EventType: nvml.EventTypeXidCriticalError, EventData: 79}
	xids <- nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: 13}                       // no device
	xids <- nvml.EventData{Device: s.Devices[0], EventType: nvml.EventTypeXidCriticalError, EventData: 48} // the three before are counted

	uuid3, _ := lost.GetUUID()
	require.Equal(t, 2.0, testutil.ToFloat64(a.xids.WithLabelValues("3", uuid3, "79")))
	require.Equal(t, 1.0, testutil.ToFloat64(a.xids.WithLabelValues("", "", "13")))
	require.Equal(t, 1.0, testutil.ToFloat64(a.watching))

	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)
	for name, n := range map[string]int{MetricInfo: 8, MetricUtilization: 8, MetricMemoryUsed: 8, MetricMemoryTotal: 8,
		MetricPower: 8, MetricTemperature: 8} {
		require.Equal(t, n, testutil.CollectAndCount(reg, name), name)
	}
	rs, err := src.Readings()
	require.NoError(t, err)
	require.Equal(t, Reading{Index: 5, UUID: rs[5].UUID, Utilization: fl(0.5), MemoryUsedBytes: fl(0),
		MemoryTotalBytes: fl(144384 << 20), PowerWatts: fl(350), TemperatureCelsius: fl(45)}, rs[5])

	cancel()
	wg.Wait()
	require.NoError(t, watchErr)
	require.Equal(t, 0.0, testutil.ToFloat64(a.watching))
}

func TestXIDWaitFailureStopsTheWatcher(t *testing.T) {
	s := dgxh100.New()
	gpumock.Complete(s, gpumock.H100, make(chan nvml.EventData))
	set := &mock.EventSet{
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) { return nvml.EventData{}, nvml.ERROR_GPU_IS_LOST },
	}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	started := false
	err := openMock(t, s).WatchXIDs(t.Context(), func() { started = true }, func(XID) { t.Error("no XID expected") })
	require.True(t, started)
	require.ErrorIs(t, err, nvml.ERROR_GPU_IS_LOST)
	require.Len(t, set.FreeCalls(), 1)
}

func TestClosedSource(t *testing.T) {
	s := dgxh100.New()
	gpumock.Complete(s, gpumock.H100, nil)
	src, err := NewNVML(s)
	require.NoError(t, err)
	require.NoError(t, src.Close())
	require.NoError(t, src.Close()) // once
	_, err = src.Inventory()
	require.ErrorIs(t, err, ErrClosed)
	_, err = src.Readings()
	require.ErrorIs(t, err, ErrClosed)
	require.Len(t, s.ShutdownCalls(), 1)
}

func TestInventoryNamesTheGPUThatFails(t *testing.T) {
	s := dgxh100.New()
	gpumock.Complete(s, gpumock.H100, nil)
	s.Devices[6].(*server.Device).GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	_, err := openMock(t, s).Inventory()
	require.ErrorIs(t, err, nvml.ERROR_GPU_IS_LOST)
	require.ErrorContains(t, err, "NVML: gpu 6: name: ")
}

func TestInitFailures(t *testing.T) {
	for _, tt := range []struct {
		ret  nvml.Return
		want string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver: libnvidia-ml.so.1 not found (NVML ERROR_LIBRARY_NOT_FOUND)"},
		{nvml.ERROR_DRIVER_NOT_LOADED, "the NVIDIA driver is not loaded (NVML ERROR_DRIVER_NOT_LOADED)"},
		{nvml.ERROR_LIB_RM_VERSION_MISMATCH, "NVML init failed: ERROR_LIB_RM_VERSION_MISMATCH (return code 18)"},
	} {
		t.Run(tt.ret.Error(), func(t *testing.T) {
			s := dgxh100.New()
			s.InitFunc = func() nvml.Return { return tt.ret }
			_, err := NewNVML(s)
			require.ErrorIs(t, err, ErrUnavailable)
			require.EqualError(t, err, tt.want)
		})
	}
}

// TestOpenWithoutDriver uses the real library: on a machine without the
// NVIDIA driver, Open says so in one line.
func TestOpenWithoutDriver(t *testing.T) {
	src, err := Open()
	if err == nil {
		src.Close()
		t.Skip("this machine has an NVIDIA driver")
	}
	require.True(t, errors.Is(err, ErrUnavailable), "%v", err)
	require.EqualError(t, err, "no NVIDIA driver: libnvidia-ml.so.1 not found (NVML ERROR_LIBRARY_NOT_FOUND)")
}
