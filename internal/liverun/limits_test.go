package liverun

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// The tester's hybrid run, without Docker: every pool of eu-residency is
// an external endpoint, an emulated node answering as vLLM started with
// --max-model-len 1024 on loopback, while the scenario believes its
// replicas take 131,072 tokens. The start-up output names the servers'
// limit; a request longer than it is refused by the gateway as the
// client's (400 context_length_exceeded, rejected no-compatible-pool),
// none counts as a backend failure; and the twin, told the same limits,
// refuses exactly the same requests.
func TestHybridRunRoutesByTheServersContextLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("a real-time replay of 25 s: external endpoints run at speed 1")
	}
	base, err := scenarios.LoadNamedWithSets("eu-residency", nil)
	require.NoError(t, err)
	const limit = 1024
	ext := map[string][]string{}
	for _, pool := range []string{"use-h100-8b", "euw-a100-8b"} {
		ext[pool] = []string{"vllm+" + startVLLMNode(t, base, pool, limit)}
	}
	var mu sync.Mutex
	var said []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Scenario: "eu-residency", Replicas: 1, Backends: ext,
		Sets:     []string{"duration=10s", "warmup=0s", "drain=15s"},
		Progress: func(s string) { mu.Lock(); said = append(said, s); mu.Unlock() }})
	require.NoError(t, err)

	mu.Lock()
	out := strings.Join(said, "\n")
	mu.Unlock()
	for _, pool := range []string{"use-h100-8b", "euw-a100-8b"} {
		assert.Contains(t, out, "pool "+pool+" backend ", "start-up names each server's limit")
	}
	assert.Contains(t, out, "model llama-3.1-8b takes at most 1024 tokens (GET /v1/models max_model_len), below the scenario's")
	require.Len(t, res.Limits, 2)

	live, tw := res.Live, res.Twin
	require.NoError(t, live.CheckAccounting())
	require.Equal(t, tw.Requests.Arrived, live.Requests.Arrived, "the replay sends the twin's requests")
	tooLong := live.Rejections[sched.ReasonNoRoute]
	require.Positive(t, tooLong, "inputs of mean 1,155 tokens: many exceed 1,024")
	assert.Zero(t, live.Requests.Failed, "no request counted as a backend failure")
	assert.Zero(t, live.Rejections["upstream-invalid-request"], "no too-long request reached a server")
	assert.Equal(t, tw.Rejections[sched.ReasonNoRoute], tooLong, "the twin refuses the same requests")
	assert.Positive(t, live.Requests.Completed)
	t.Logf("arrived %d: live completed %d, refused too long %d, failed %d; twin completed %d, refused too long %d",
		live.Requests.Arrived, live.Requests.Completed, tooLong, live.Requests.Failed,
		tw.Requests.Completed, tw.Rejections[sched.ReasonNoRoute])
}
