package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var agentURLRE = regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)\n`)

// waitForAgent waits for the agent's "serving ... on URL" line and
// returns the URL.
func waitForAgent(t *testing.T, out, errb *syncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := agentURLRE.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent did not print its address; stdout %q stderr %q", out.String(), errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, body)
	return string(body)
}

func TestAgentCommandServesAndStops(t *testing.T) {
	src := fakeH100Node()
	useGPUs(t, src, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"agent", "--listen", "127.0.0.1:0", "--region", "us-east", "--runtime", "vllm-0.8.5",
			"--models", "llama-3.1-8b"}, &out, &errb)
	}()
	base := waitForAgent(t, &out, &errb)
	require.Contains(t, out.String(), "fleetdrill agent: 8 x NVIDIA H100 80GB HBM3, driver 570.124.06 (CUDA 12.8); serving /inventory and /metrics on http://")

	var doc struct {
		Inventory struct {
			Driver string `json:"driver"`
			GPUs   []any  `json:"gpus"`
		} `json:"inventory"`
		Scenario struct {
			Pools []struct {
				Runtime string   `json:"runtime"`
				Models  []string `json:"models"`
			} `json:"pools"`
		} `json:"scenario"`
	}
	require.NoError(t, json.Unmarshal([]byte(httpGet(t, base+"/inventory")), &doc))
	require.Equal(t, "570.124.06", doc.Inventory.Driver)
	require.Len(t, doc.Inventory.GPUs, 8)
	require.Equal(t, "vllm-0.8.5", doc.Scenario.Pools[0].Runtime)
	require.Equal(t, []string{"llama-3.1-8b"}, doc.Scenario.Pools[0].Models)

	metrics := httpGet(t, base+"/metrics")
	for _, want := range []string{
		`fleetdrill_gpu_utilization_ratio{gpu="7",uuid="GPU-00000007"} 0.25`,
		`fleetdrill_gpu_info{compute_capability="9.0",cuda="12.8",driver="570.124.06",gpu="0",name="NVIDIA H100 80GB HBM3",uuid="GPU-00000000"} 1`,
		"fleetdrill_gpu_xid_watching 0",
		"go_goroutines",
		"process_",
	} {
		require.Contains(t, metrics, want)
	}
	require.NotContains(t, metrics, "fleetdrill_gpu_power_watts{") // the fake reads no power
	require.Equal(t, "ok\n", httpGet(t, base+"/healthz"))
	require.Eventually(t, func() bool { return strings.Contains(errb.String(), "XID errors are not reported on this node") },
		5*time.Second, 5*time.Millisecond, "stderr %s", errb.String())

	cancel() // as SIGTERM would
	select {
	case c := <-code:
		require.Equal(t, exitOK, c, "stderr %s", errb.String())
	case <-time.After(15 * time.Second):
		t.Fatal("agent did not exit after cancel")
	}
	require.Equal(t, 1, src.closes())
}

func TestAgentCommandRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"listen", []string{"--listen", "256.0.0.1:1"}, "fleetdrill: agent: --listen: "},
		{"pool", []string{"--gpus-per-replica", "3"}, "fleetdrill: agent: gpus per replica 3: the 8 h100-80gb-hbm3 GPUs do not divide into replicas of 3\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := fakeH100Node()
			useGPUs(t, src, nil)
			code, out, errs := runCLI(t, append([]string{"agent"}, tt.args...)...)
			require.Equal(t, exitInvalid, code, errs)
			require.Empty(t, out)
			require.True(t, strings.HasPrefix(errs, tt.want), "stderr %q, want it to start %q", errs, tt.want)
			require.Equal(t, 1, strings.Count(errs, "\n"), "want one line on stderr, got %q", errs)
			require.Equal(t, 1, src.closes())
		})
	}
}
