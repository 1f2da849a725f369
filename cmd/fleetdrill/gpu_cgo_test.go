//go:build cgo

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/gpu"
	"github.com/fleetdrill/fleetdrill/internal/gpu/gpumock"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// noNVML is what the commands say with cgo on a machine without the
// NVIDIA driver.
const noNVML = "no NVIDIA driver: libnvidia-ml.so.1 not found (NVML ERROR_LIBRARY_NOT_FOUND)"

// useDGXH100 makes the commands open a mock DGX H100 through the NVML
// adapter, as they would the driver's library.
func useDGXH100(t *testing.T, xids <-chan nvml.EventData) *server.Server {
	t.Helper()
	s := dgxh100.New()
	gpumock.Complete(s, gpumock.H100, xids)
	old := openGPUs
	openGPUs = func() (gpu.Source, error) { return gpu.NewNVML(s) }
	t.Cleanup(func() { openGPUs = old })
	return s
}

func TestInventoryCommandOnMockDGXH100(t *testing.T) {
	useDGXH100(t, nil)
	code, out, errs := runCLI(t, "inventory", "--region", "us-east", "--runtime", "vllm-0.6.3", "--models", "llama-3.1-8b")
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "# 8 x NVIDIA H100 80GB HBM3, hopper, compute capability 9.0, MIG disabled, ECC enabled, NVLink 18/18 links active per GPU")
	sc, err := scenarios.Parse("pasted.yaml", pasteFragment(t, out))
	require.NoError(t, err, "stdout:\n%s", out)
	require.Equal(t, "on-prem-h100-80gb-hbm3", sc.Pools[0].Name) // pasted first under pools:
	require.Equal(t, "550.54.15", sc.Pools[0].Driver)
	require.Equal(t, 8, sc.Pools[0].Replicas)
}

func TestAgentCommandOnMockDGXH100(t *testing.T) {
	xids := make(chan nvml.EventData)
	s := useDGXH100(t, xids)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"agent", "--listen", "127.0.0.1:0"}, &out, &errb) }()
	base := waitForAgent(t, &out, &errb)

	// The watcher is subscribed once the agent says so on /metrics.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(httpGet(t, base+"/metrics"), "fleetdrill_gpu_xid_watching 1") {
		require.True(t, time.Now().Before(deadline), "the XID watcher never started; stderr %s", errb.String())
		time.Sleep(10 * time.Millisecond)
	}
	uuid, _ := s.Devices[2].GetUUID()
	xids <- nvml.EventData{Device: s.Devices[2], EventType: nvml.EventTypeXidCriticalError, EventData: 48}
	xids <- nvml.EventData{EventType: nvml.EventTypeXidCriticalError, EventData: 13} // the first is counted
	metrics := httpGet(t, base+"/metrics")
	require.Contains(t, metrics, `fleetdrill_gpu_xid_errors_total{gpu="2",uuid="`+uuid+`",xid="48"} 1`)
	require.Contains(t, metrics, `fleetdrill_gpu_power_watts{gpu="7",uuid="`)
	require.Contains(t, metrics, "go_goroutines")
	require.Contains(t, errb.String(), "XID error")

	cancel()
	select {
	case c := <-code:
		require.Equal(t, exitOK, c, "stderr %s", errb.String())
	case <-time.After(15 * time.Second):
		t.Fatal("agent did not exit after cancel")
	}
}
