package calibrate

import (
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/modelfile"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// Placement is how a model is laid out on a run's GPUs.
type Placement struct {
	GPU   latency.GPU
	Model latency.ModelConfig
	TP    int // tensor parallel: GPUs per replica
	EP    int // expert parallel across replicas: each holds 1/EP of the routed experts
}

// Resolve finds a run's GPU in latency.GPUs and its model among the
// shipped configs (latency.LookupModel: the Hugging Face name the run
// records) or, when the run names a config.json, in that file. The model is
// renamed to what the run calls it, without the org, so reports and the
// replayed scenario read "Llama-3.1-8B" rather than the shipped config whose
// shape it shares.
func Resolve(e Engine) (Placement, error) {
	gpu, err := latency.LookupGPU(e.GPU)
	if err != nil {
		return Placement{}, fmt.Errorf("calibrate: %w", err)
	}
	m, err := modelfile.Resolve(e.Model, "")
	if err != nil {
		return Placement{}, fmt.Errorf("calibrate: %w", err)
	}
	if name := path.Base(strings.ReplaceAll(e.Model, `\`, "/")); !strings.HasSuffix(strings.ToLower(name), ".json") && name != "." && name != "/" {
		m.Name = name
	}
	p := Placement{GPU: gpu, Model: m, TP: max(e.TP, 1), EP: 1}
	if m.IsMoE() && e.DP > 1 {
		p.EP = e.DP // the MoE run shards experts across its data-parallel ranks
	}
	if pl := (latency.Placement{GPU: gpu, Model: m, TP: p.TP, EP: p.expertGPUs()}); pl.Normalize() != nil {
		return Placement{}, fmt.Errorf("calibrate: %s on %d × %s (dp %d): %w", e.Model, p.TP, gpu.Name, e.DP, pl.Normalize())
	}
	return p, nil
}

// expertGPUs is the expert-parallel degree as the physical model counts
// it: GPUs (TP × the EP replicas), where Placement.EP counts replicas; 0
// when the experts are not spread.
func (p Placement) expertGPUs() int {
	if p.EP <= 1 {
		return 0
	}
	return p.EP * p.TP
}

// Equal reports whether two placements are the same layout of the same
// model on the same device (latency.GPU, holding its aliases in a slice,
// cannot be compared with ==).
func (p Placement) Equal(q Placement) bool {
	return p.GPU.Name == q.GPU.Name && p.Model == q.Model && p.TP == q.TP && p.EP == q.EP
}

// bytesPerParam is 1 for FP8 checkpoints, else 2 (BF16/FP16, as the runs
// serve).
func (p Placement) bytesPerParam() float64 {
	if p.Model.Quantization == "fp8" {
		return 1
	}
	return 2
}

// physical is the placement as the physical model sees it (its sizing is
// the one sizing of weights and KV the project has): expert parallelism
// counted in GPUs, precision the checkpoint's. Resolve has checked it.
func (p Placement) physical() latency.Placement {
	pl := latency.Placement{GPU: p.GPU, Model: p.Model, TP: p.TP, EP: p.expertGPUs()}
	_ = pl.Normalize()
	return pl
}

// weightBytesPerGPU is the weight memory each GPU holds: tensor parallelism
// splits every weight; expert parallelism splits the routed experts over
// its GPUs instead (latency.Placement.WeightBytesPerGPU).
func (p Placement) weightBytesPerGPU() float64 { return p.physical().WeightBytesPerGPU() }

// kvBytesPerTokenPerGPU is one token's 16-bit KV cache on each GPU of a
// replica: tensor parallelism splits KV heads, but a group wider than the
// model's KV heads replicates them (and MLA's single latent is replicated
// on every GPU).
func (p Placement) kvBytesPerTokenPerGPU() float64 { return p.physical().KVBytesPerTokenPerGPU() }

// streamedBytesPerGPU is what a decode step reads of each GPU's weights:
// all of them but the input embedding, of which a step gathers only its
// tokens' rows (a tied embedding is read whole, as the LM head).
func (p Placement) streamedBytesPerGPU() float64 {
	w := p.weightBytesPerGPU()
	if !p.Model.TiedEmbeddings {
		w -= float64(p.Model.Vocab) * float64(p.Model.Hidden) * p.bytesPerParam() / float64(p.TP)
	}
	return w
}

// prefillFLOPsPerGPU is one prompt token's matmul work on each GPU: twice
// the parameters it is computed with, less the embedding (a lookup) and the
// LM head (run only for a prompt's last token).
func (p Placement) prefillFLOPsPerGPU() float64 {
	_, active := p.Model.Params()
	return 2 * (active - p.Model.EmbeddingParams()) / float64(p.TP)
}

// sustainedBF16TFLOPs is the BF16 GEMM throughput devices sustain, where
// measured: the mean over 2048² to 10240² square BF16 matmuls of one
// PyTorch 2.7/CUDA 12.8 benchmark run on each (zzc0721/torch-performance-
// test-data on GitHub, issues 78, 79 and 160). Kernels do not run at the
// spec sheet's peak, and not at one fraction of it: the RTX 4090 sustains
// 96 % of its 165.2 (a half-rate FP32-accumulate pipeline that holds its
// boost clock), the RTX PRO 6000 Workstation 67 % of its 503.8 (188 SMs
// under a 600 W limit), the H100 SXM 75 % of its 989.4. The measured runs
// agree: fitted on themselves, the 4090's prefill token costs 2.35 times
// the PRO 6000's (refined; 1.77 by the linear stage), where the spec ratio
// is 3.05 and the sustained one 2.11. Transferred from the PRO 6000 with
// the spec ratio, the 4090's end-to-end p50 comes out 15 % slow (35 % when
// the per-sequence cost scaled with it too); with the sustained ratio,
// 6.2 % (docs/fidelity.md's out-of-sample check). The mean over sizes, not
// the best size, because prefill chunks run from a few hundred tokens to
// 2048; the best sizes' ratio, 2.24, gives 8.3 %.
var sustainedBF16TFLOPs = map[string]float64{
	"RTX4090":    158.8, // 164.8, 151.5, 160.2, 158.5
	"RTXPRO6000": 335.3, // 288.7, 368.4, 350.3, 333.9 (Workstation Edition)
	"H100-SXM":   745.6, // 676.6, 788.7, 797.5, 719.7
}

// defaultGEMMEfficiency is the fraction of the spec-sheet peak assumed
// where nothing is measured: that of the datacenter and professional parts
// above (67–75 %); the H800 PCIe in the same benchmark sustains 65 %.
const defaultGEMMEfficiency = 0.7

// tflops is the dense tensor throughput the model's GEMMs sustain: BF16
// with FP32 accumulation (vLLM's BF16 GEMMs; GeForce cards run it at half
// their FP16-accumulate rate), or, for an FP8 checkpoint on a device with
// FP8 tensor cores, FP8 at the same fraction of its peak.
func (p Placement) tflops() float64 {
	eff := defaultGEMMEfficiency
	if s, ok := sustainedBF16TFLOPs[p.GPU.Name]; ok {
		eff = s / p.GPU.BF16TFLOPs
	}
	if p.Model.Quantization == "fp8" && p.GPU.FP8TFLOPs > 0 {
		return eff * p.GPU.FP8TFLOPs
	}
	return eff * p.GPU.BF16TFLOPs
}

// KVTokens estimates a replica's KV capacity from memory when the run does
// not record it: (memory × 0.9 − activation reserve − weights) per GPU,
// over the KV bytes per token each GPU holds. Memory is what the driver
// reports (latency.GPU.MemoryBytes), which gpu_memory_utilization is a
// share of.
func (p Placement) KVTokens() int { return p.physical().KVTokens(0.9) }

// Transfer predicts the profile of placement to from one calibrated on from,
// by the roofline with a fixed overhead:
//
//   - a step's base cost is a fixed overhead (scheduling, sampling, kernel
//     launches: host work that does not scale with the device) plus the
//     time to stream each GPU's weights (all but the input embedding) at
//     its memory bandwidth. The overhead is what the calibrated base has
//     beyond that read on the source (never negative); the target gets the
//     same overhead plus its own read;
//   - the per-token KV cost scales with KV bytes per token per GPU over
//     bandwidth (decode attention is memory-bound);
//   - the prefill cost per token scales with its matmul FLOPs per GPU
//     (twice the active parameters less embedding and LM head, over the
//     tensor-parallel degree) over the BF16 throughput GEMMs sustain on the
//     device (prefill is compute-bound; see sustainedBF16TFLOPs for why not
//     the spec sheet's);
//   - the per-sequence cost scales with layers only. It is not the decode
//     token's matmuls, which hide under the weight read at the batches
//     these engines run, but per-request host work and per-layer kernel
//     overheads. The RTX 4090 run shows it: in its decode-only seconds
//     (6–17, KV cache full) a step takes 25.2–25.6 ms whether 39 or 25
//     requests run, as this transfer predicts (25.8 and 24.9 ms), while
//     scaling the per-sequence cost by the spec throughput ratio (3.05)
//     adds 3–5 ms a step.
//
// Engine settings (max batched tokens, KV capacity) are not predictions:
// they come from the target. Not modelled: tensor-parallel all-reduce and
// expert-parallel all-to-all — docs/fidelity.md gives the errors this
// leaves.
func Transfer(cal latency.Profile, from, to Placement) latency.Profile {
	readFrom := from.streamedBytesPerGPU() / (from.GPU.BandwidthGBs * 1e3) // µs: bytes / (GB/s × 1e9) × 1e6
	readTo := to.streamedBytesPerGPU() / (to.GPU.BandwidthGBs * 1e3)
	overhead := math.Max(cal.StepBase-readFrom, 0)
	p := cal
	p.StepBase = overhead + readTo
	p.PerKVToken = cal.PerKVToken * to.kvBytesPerTokenPerGPU() / from.kvBytesPerTokenPerGPU() *
		from.GPU.BandwidthGBs / to.GPU.BandwidthGBs
	p.PerPrefillToken = cal.PerPrefillToken * (to.prefillFLOPsPerGPU() / to.tflops()) / (from.prefillFLOPsPerGPU() / from.tflops())
	p.PerSeq = cal.PerSeq * float64(to.Model.Layers) / float64(from.Model.Layers)
	p.Source = fmt.Sprintf("transferred from %s/%s to %s/%s (roofline with fixed overhead)", from.GPU.Name, from.Model.Name, to.GPU.Name, to.Model.Name)
	return p
}
