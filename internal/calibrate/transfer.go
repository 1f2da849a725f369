package calibrate

import (
	"fmt"
	"math"
	"strings"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// GPU is an accelerator's spec-sheet figures, for sizing KV caches and
// scaling profiles between devices.
type GPU struct {
	Name         string
	MemoryGiB    float64 // per device
	BandwidthGBs float64 // memory bandwidth, GB/s
	// TFLOPS is dense BF16/FP16 tensor throughput, TFLOP/s (FP16
	// accumulate, without sparsity: the figure comparable across the
	// table).
	TFLOPS float64
	Source string
}

// GPUs are the devices of the measured runs, keyed by the names the runs'
// folders use, with the source of each figure.
var GPUs = map[string]GPU{
	"RTX4090": {Name: "RTX4090", MemoryGiB: 23.52, BandwidthGBs: 1008, TFLOPS: 330,
		Source: "NVIDIA Ada Lovelace architecture whitepaper v1.01, RTX 4090: 1008 GB/s, 330.3 dense FP16 tensor TFLOPS (FP16 accumulate); memory as the run's hardware block reports it (25,250,627,584 bytes)"},
	"RTXPRO6000": {Name: "RTXPRO6000", MemoryGiB: 96, BandwidthGBs: 1792, TFLOPS: 500,
		Source: "NVIDIA RTX PRO 6000 Blackwell Workstation datasheet: 96 GB GDDR7, 1792 GB/s, 4000 sparse FP4 AI TOPS, i.e. about 500 dense FP16 TFLOPS"},
}

// ModelShape is what sizing and scaling need of a model.
type ModelShape struct {
	Name                     string
	ParamsB, ActiveParamsB   float64 // billions; active differs for MoE
	Layers, KVHeads, HeadDim int
	Source                   string
}

// KVBytesPerToken in BF16, for the whole model.
func (m ModelShape) KVBytesPerToken() float64 {
	return latency.KVBytesPerToken(m.Layers, m.KVHeads, m.HeadDim, 2, 1)
}

// Models are the models of the measured runs, keyed by their Hugging Face
// names.
var Models = map[string]ModelShape{
	"meta-llama/Llama-3.1-8B": {Name: "Llama-3.1-8B", ParamsB: 8.03, ActiveParamsB: 8.03, Layers: 32, KVHeads: 8, HeadDim: 128,
		Source: "config.json: 32 layers, 8 KV heads, head_dim 128; 8.03B parameters"},
	"Qwen/Qwen3-32B": {Name: "Qwen3-32B", ParamsB: 32.8, ActiveParamsB: 32.8, Layers: 64, KVHeads: 8, HeadDim: 128,
		Source: "config.json: 64 layers, 8 KV heads, head_dim 128; 32.8B parameters (model card)"},
	"Qwen/Qwen3-30B-A3B-Instruct-2507": {Name: "Qwen3-30B-A3B", ParamsB: 30.5, ActiveParamsB: 3.3, Layers: 48, KVHeads: 4, HeadDim: 128,
		Source: "config.json: 48 layers, 4 KV heads, head_dim 128, 128 experts (8 active); 30.5B parameters, 3.3B active (model card)"},
}

// activationReserveGiB is the memory per GPU that vLLM keeps for activations
// and CUDA graphs, beyond weights and KV cache. Derived from the RTX 4090
// run, the only one that records its KV capacity: 23.52 GiB × 0.9 − 14.96
// GiB of weights leaves 6.21 GiB, of which the measured 41,408 tokens × 128
// KiB use 5.05 GiB. MODELING.md warns that ignoring it overestimates KV.
const activationReserveGiB = 1.16

// Placement is how a model is laid out on a run's GPUs.
type Placement struct {
	GPU   GPU
	Model ModelShape
	TP    int // tensor parallel: GPUs per replica
	EP    int // expert parallel across replicas: each holds 1/EP of the experts
}

// Resolve finds a run's GPU, model and layout in the tables.
func Resolve(e Engine) (Placement, error) {
	gpu, ok := GPUs[e.GPU]
	if !ok {
		return Placement{}, fmt.Errorf("calibrate: GPU %q is not in the table (have %s); add its spec-sheet figures to calibrate.GPUs", e.GPU, keys(GPUs))
	}
	m, ok := Models[e.Model]
	if !ok {
		return Placement{}, fmt.Errorf("calibrate: model %q is not in the table (have %s); add its shape to calibrate.Models", e.Model, keys(Models))
	}
	p := Placement{GPU: gpu, Model: m, TP: max(e.TP, 1), EP: 1}
	if m.ActiveParamsB < m.ParamsB && e.DP > 1 {
		p.EP = e.DP // the MoE run shards experts across its data-parallel ranks
	}
	return p, nil
}

// weightBytesPerGPU is the weight memory each GPU holds (BF16).
func (p Placement) weightBytesPerGPU() float64 {
	return p.Model.ParamsB * 1e9 * 2 / float64(p.TP*p.EP)
}

// KVTokens estimates a replica's KV capacity from memory when the run does
// not record it: (memory × 0.9 − weights − activation reserve) per GPU,
// times the GPUs of a replica, over the KV bytes per token.
func (p Placement) KVTokens() int {
	const gib = 1 << 30
	free := (p.GPU.MemoryGiB*0.9-activationReserveGiB)*gib - p.weightBytesPerGPU()
	return int(max(free, 0) * float64(p.TP) / p.Model.KVBytesPerToken())
}

// Transfer predicts the profile of placement to from one calibrated on from,
// by the roofline with a fixed overhead:
//
//   - a step's base cost is a fixed overhead (scheduling, sampling, kernel
//     launches: host work that does not scale with the device) plus the
//     time to read each GPU's weights at its memory bandwidth. The overhead
//     is what the calibrated base has beyond that read on the source
//     (never negative); the target gets the same overhead plus its own read;
//   - the per-token KV cost scales with KV bytes per token per GPU over
//     bandwidth (decode attention is memory-bound);
//   - the prefill cost per token scales with FLOPs per token per GPU (twice
//     the active parameters over the tensor-parallel degree) over dense
//     throughput (prefill is compute-bound);
//   - the per-sequence cost scales with layers over throughput.
//
// Engine settings (max batched tokens, KV capacity) are not predictions:
// they come from the target. Not modelled: tensor-parallel all-reduce,
// expert-parallel all-to-all, and kernels' efficiency differing between
// architectures — docs/fidelity.md gives the errors this leaves.
func Transfer(cal latency.Profile, from, to Placement) latency.Profile {
	fl := from.GPU.TFLOPS / to.GPU.TFLOPS
	readFrom := from.weightBytesPerGPU() / (from.GPU.BandwidthGBs * 1e3) // µs: bytes / (GB/s × 1e9) × 1e6
	readTo := to.weightBytesPerGPU() / (to.GPU.BandwidthGBs * 1e3)
	overhead := math.Max(cal.StepBase-readFrom, 0)
	p := cal
	p.StepBase = overhead + readTo
	p.PerKVToken = cal.PerKVToken * (to.Model.KVBytesPerToken() / float64(to.TP)) / (from.Model.KVBytesPerToken() / float64(from.TP)) *
		from.GPU.BandwidthGBs / to.GPU.BandwidthGBs
	p.PerPrefillToken = cal.PerPrefillToken * (to.Model.ActiveParamsB / float64(to.TP)) / (from.Model.ActiveParamsB / float64(from.TP)) * fl
	p.PerSeq = cal.PerSeq * float64(to.Model.Layers) / float64(from.Model.Layers) * fl
	p.Source = fmt.Sprintf("transferred from %s/%s to %s/%s (roofline with fixed overhead)", from.GPU.Name, from.Model.Name, to.GPU.Name, to.Model.Name)
	return p
}

func keys[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sortStrings(ks)
	return strings.Join(ks, ", ")
}
