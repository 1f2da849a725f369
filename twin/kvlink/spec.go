package kvlink

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Spec is what one kind of link can do, per GPU: each GPU of a decode
// replica receives its own shard of the KV cache (tensor parallelism
// splits the KV heads), over its own NVLink ports or its own NIC (a DGX
// H100 has one 400 Gb/s NIC per GPU, rail-optimised), so a replica's link
// moves GPUs × BandwidthGBs.
type Spec struct {
	Name string
	// BandwidthGBs is the payload rate in one direction, in GB/s (1e9
	// bytes per second).
	BandwidthGBs float64
	// Latency is what a transfer costs besides its bytes: connection
	// lookup, descriptor preparation, the transfer's start and its
	// completion notice.
	Latency time.Duration
	// Source says where both figures come from.
	Source string
}

// nixlSetup is NIXL's cost of one transfer besides its payload, measured
// on an RDMA path: 0.73 ms to look up the blocks' descriptors, 0.42 ms to
// prepare the transfer and 0.16 ms to start it (Llama 3.1 8B, 5,000-token
// prompts; ai-dynamo/dynamo#1314, the log after the fix).
const nixlSetup = 1310 * time.Microsecond

// specs are the built-in link kinds, by name.
var specs = []Spec{
	{
		Name: "nvlink", BandwidthGBs: 450, Latency: 8 * time.Microsecond,
		Source: "NVIDIA H100 datasheet: NVLink 4, 900 GB/s per GPU both ways, 450 one way; " +
			"latency: UCX's cuda_ipc transport, 1,000 ns latency + 7,000 ns overhead (ucx_info -d in vllm-project/vllm#26382)",
	},
	{
		Name: "rdma", BandwidthGBs: 50, Latency: nixlSetup,
		Source: "NVIDIA ConnectX-7 datasheet: 400 Gb/s NDR InfiniBand per port, one port per GPU; " +
			"latency: NIXL's per-transfer setup measured over RDMA (ai-dynamo/dynamo#1314)",
	},
	{
		Name: "tcp", BandwidthGBs: 12.5, Latency: nixlSetup,
		Source: "IEEE 802.3ba: 100 Gb/s Ethernet line rate; latency as rdma (NIXL's setup). " +
			"A transfer that falls back to TCP measures far below line rate: 0.5 GB/s against 49 GB/s on the same node " +
			"(vllm-project/vllm#52607); give the measured figure with link-degraded",
	},
}

// DefaultLease is how long a prefill replica keeps a prompt's KV for a
// decode replica that no longer fetches it, unless its pool says
// (kv_lease_duration): vLLM's NIXL kv_lease_duration default
// (vllm-project/vllm#41383).
const DefaultLease = 30 * time.Second

// Lookup returns the built-in link kind name (nvlink, rdma or tcp), or an
// error naming the kinds there are.
func Lookup(name string) (Spec, error) {
	i := slices.IndexFunc(specs, func(s Spec) bool { return s.Name == name })
	if i < 0 {
		return Spec{}, fmt.Errorf("unknown link kind %q: one of %s", name, strings.Join(Kinds(), ", "))
	}
	return specs[i], nil
}

// Kinds lists the built-in link kinds' names.
func Kinds() []string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return names
}

// Bytes is the KV cache a transfer of tokens carries, at kvBytesPerToken
// (one token's K and V over every layer, at the cache's dtype: the whole
// replica's, summed over its tensor-parallel shards).
func Bytes(kvBytesPerToken float64, tokens int) float64 {
	return kvBytesPerToken * float64(max(tokens, 0))
}

// Duration is a transfer's time alone on a link: latency + bytes /
// bandwidth (bandwidth in bytes per second).
func Duration(bytes, bandwidth float64, latency time.Duration) time.Duration {
	return latency + seconds(bytes/bandwidth)
}

// seconds converts seconds to a Duration, rounded up to the nanosecond:
// a transfer is never over before its last byte.
func seconds(s float64) time.Duration {
	d := s * float64(time.Second)
	t := time.Duration(d)
	if float64(t) < d {
		t++
	}
	return t
}
