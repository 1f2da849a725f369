package fleet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

func testRegistry() *Registry {
	return NewRegistry(
		[]Accelerator{
			{Name: "h100", MemoryGiB: 80, UsableFraction: 0.9, Precisions: []string{"bf16", "fp8"}},
			{Name: "l4", MemoryGiB: 24, UsableFraction: 0.9, Precisions: []string{"fp16"}},
		},
		[]Runtime{
			{Name: "vllm-0.6.3", Server: "vllm", Version: "0.6.3", MinDriver: "550.54"},
			{Name: "tgi-2.0", Server: "tgi", Version: "2.0", MinDriver: "535.0"},
		},
		[]Model{
			{Name: "llama-8b", ParametersB: 8, Layers: 32, KVHeads: 8, HeadDim: 128, Precision: "bf16",
				Runtimes: []string{"vllm-0.6.3"}, MinDriver: "535.104"},
			{Name: "llama-70b", ParametersB: 70, Layers: 80, KVHeads: 8, HeadDim: 128, Precision: "bf16",
				Runtimes: []string{"vllm-0.6.3"}},
		},
	)
}

func TestCheck(t *testing.T) {
	r := testRegistry()
	base := Pool{Name: "p", Accelerator: "h100", GPUsPerReplica: 1, Runtime: "vllm-0.6.3", Driver: "550.90",
		Models: []string{"llama-8b", "llama-70b"}, Profiles: map[string]latency.Profile{"llama-8b": {}}}
	tests := []struct {
		name        string
		edit        func(p *Pool)
		model       string
		servable    bool
		tested      bool
		wantReasons []string
	}{
		{"tested pairing", func(*Pool) {}, "llama-8b", true, true, nil},
		{"old driver", func(p *Pool) { p.Driver = "535.104" }, "llama-8b", false, true,
			[]string{"driver 535.104 < 550.54 required by vllm-0.6.3"}},
		{"runtime not accepted", func(p *Pool) { p.Runtime = "tgi-2.0" }, "llama-8b", false, true,
			[]string{"runtime tgi-2.0 is not one llama-8b accepts (vllm-0.6.3)"}},
		{"precision", func(p *Pool) { p.Accelerator = "l4" }, "llama-8b", false, true,
			[]string{"l4 does not support bf16 (supports fp16)"}},
		{"70b does not fit one gpu", func(*Pool) {}, "llama-70b", false, false,
			[]string{"llama-70b weights (130 GiB) plus a 4096-token KV cache (1.2 GiB) exceed 1×h100 usable memory (72 GiB); want >= 2 GPUs"}},
		{"70b fits four gpus, untested", func(p *Pool) { p.GPUsPerReplica = 4 }, "llama-70b", true, false, nil},
		{"not listed", func(p *Pool) { p.Models = []string{"llama-70b"} }, "llama-8b", false, true,
			[]string{"pool p does not list llama-8b among its models"}},
		{"unknown model", func(*Pool) {}, "gpt-x", false, false, []string{"model gpt-x is not in the catalogue"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base
			tt.edit(&p)
			v := r.Check(&p, tt.model)
			require.Equal(t, tt.servable, v.Servable, "Check(%s) = %v", tt.model, v)
			require.Equal(t, tt.tested, v.Tested)
			require.Equal(t, tt.wantReasons, v.Reasons)
		})
	}
}

func TestKVCapacityFromMemory(t *testing.T) {
	r := testRegistry()
	p := Pool{Name: "p", Accelerator: "h100", GPUsPerReplica: 1, Runtime: "vllm-0.6.3", Driver: "560",
		Models: []string{"llama-8b"}}
	v := r.Check(&p, "llama-8b")
	// 72 GiB usable − 16e9 bytes of weights, at 128 KiB per token.
	want := int64(467753) // floor((80·0.9 GiB − 16e9 B) / 131072 B)
	require.Equal(t, want, v.KVTokens)
	p.Profiles = map[string]latency.Profile{"llama-8b": {KVTokens: 200_000}}
	require.Equal(t, int64(200_000), r.Check(&p, "llama-8b").KVTokens, "a measured capacity wins")
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"550.54", "550.54", 0},
		{"550.54.15", "550.54", 1},
		{"535.104", "550.54", -1},
		{"550.100", "550.54", 1},
		{"12.4", "12.10", -1},
		{"1.0", "1", 0},
		{"550.54", "550.54.0", 0},
		{"535.104.05", "550.54", -1},
		{"570.26", "570.124.06", -1}, // numeric, not lexical: 26 < 124
		{"12.10", "12.9", 1},
		{"1.a", "1.b", -1},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, CompareVersions(tt.a, tt.b), "CompareVersions(%q, %q)", tt.a, tt.b)
	}
}
