package latency

import (
	"fmt"
	"math"
	"strings"
)

// This file is the twin's physical step-time model: the time of one engine
// iteration from what is in its batch, for any model (a Hugging Face
// config.json) on any accelerator of the table (gpus.go) at any
// tensor-parallel degree. It has two kinds of coefficients, fixed by two
// kinds of measurement (docs/profiles.md says why each term is there):
//
//   - the device's (DeviceCoeffs, devices.go): how close each kind of
//     kernel comes to the spec sheet, fitted per GPU to op-level timings of
//     vLLM's own kernels (GEMMs, paged and flash attention, fused MoE,
//     custom all-reduce), never to end-to-end runs;
//   - the engine's (Coeffs): the host's per-step, per-layer and
//     per-sequence costs around those kernels and the client's per-request
//     cost, fitted to end-to-end benchmark runs (internal/calibrate).
//
// Per step, per GPU of the tensor-parallel group (the device's kernels'
// times scaled by the engine's in-engine factors: fixed costs by FixedX,
// weight streaming by WeightsX, KV reads by KVX, compute by ComputeX):
//
//	step = c.Step + c.Layer·L + c.Seq·S                         host and launch gaps
//	     + G·gemm_fixed + max(FLOPs/(peak·ec), bytes/(BW·ew))     GEMMs (dense, attention projections, LM head)
//	     + activation bytes/(BW·ew)                               norms, RoPE, SiLU, residuals
//	     + L·(prefill_fixed + FLOPs_attn/(peak16·ea))             flash attention of prefill chunks
//	     + L·(decode_fixed + KV bytes/(BW·ekv))                   paged attention (decode, chunks' context)
//	     + 2·L·allreduce(message)                                 tensor parallelism (measured table ≤ 8 MiB)
//	     + L_moe·(moe_fixed + max(FLOPs/(peak·ecm·m/(m+mh)), touched experts' bytes/(BW·ewm)))
//
// for S sequences in the step (decoders and prefill chunks) and N tokens
// through the GEMMs. The GEMM term is one roofline over the whole batch, so
// a few hundred prefill tokens riding in a memory-bound decode step cost
// what they really cost: almost nothing until the batch's arithmetic
// intensity crosses the ridge point.

// Coeffs are the engine's coefficients (fitted to end-to-end runs) and,
// optionally, overrides of the device's measured efficiencies. Overheads
// are in µs.
type Coeffs struct {
	// Compute, Weights and KV override the device's measured GEMM compute,
	// weight-streaming and paged-attention KV efficiencies (shares of the
	// spec sheet's peak) when set; 0 takes the GPU's measured kernels
	// (DeviceFor). `calibrate RUN --physics` fits them for a GPU that has
	// no kernel measurements.
	Compute float64 `yaml:"compute_eff,omitempty" json:"compute_eff,omitempty"`
	Weights float64 `yaml:"weight_eff,omitempty" json:"weight_eff,omitempty"`
	KV      float64 `yaml:"kv_eff,omitempty" json:"kv_eff,omitempty"`
	// Link and AllReduce model an all-reduce where no measured table
	// covers the GPU and tensor-parallel degree: a fixed cost per
	// all-reduce (at NVLink's latency, scaled by the link's) and a share
	// of the link's bandwidth.
	Link      float64 `yaml:"link_eff" json:"link_eff"`
	AllReduce float64 `yaml:"allreduce_us" json:"allreduce_us"`

	// ComputeX, WeightsX and KVX scale the measured kernels' times inside
	// the engine: GEMM and attention compute, weight streaming and KV
	// reads (1, or 0, is as measured). A microbenchmark runs one kernel
	// over and over, alone, on a cool GPU; in a serving step its
	// neighbours share the L2 and the memory system, and clocks settle
	// under sustained load. One set for every GPU: each GPU's kernels stay
	// its own, these say how the engine's use of them differs.
	ComputeX float64 `yaml:"compute_x,omitempty" json:"compute_x,omitempty"`
	WeightsX float64 `yaml:"weights_x,omitempty" json:"weights_x,omitempty"`
	KVX      float64 `yaml:"kv_x,omitempty" json:"kv_x,omitempty"`
	// FixedX scales the kernels' measured fixed costs (launch and tail):
	// a microbenchmark launches each kernel on its own, where vLLM replays
	// a decode step's kernels from a CUDA graph, which hides most of the
	// launch (1, or 0, is as measured).
	FixedX float64 `yaml:"fixed_x,omitempty" json:"fixed_x,omitempty"`

	Step     float64 `yaml:"step_us" json:"step_us"`           // per step: scheduling, sampling, input preparation
	Layer    float64 `yaml:"layer_us" json:"layer_us"`         // per layer per step: the small kernels' launches and gaps
	Seq      float64 `yaml:"seq_us" json:"seq_us"`             // per sequence per step: metadata, sampling, detokenising
	MoELayer float64 `yaml:"moe_layer_us" json:"moe_layer_us"` // per MoE layer per step beyond the fused kernel (routing)

	// Request is the client-side cost of a request outside the engine
	// (HTTP, tokenisation, the first detokenised chunk), µs: it delays
	// when the request reaches the engine.
	Request float64 `yaml:"request_us" json:"request_us"`
}

// Names and pointers of the coefficients, in a fixed order, for fitting.
func (c *Coeffs) Fields() []struct {
	Name string
	P    *float64
} {
	return []struct {
		Name string
		P    *float64
	}{
		{"compute_eff", &c.Compute}, {"weight_eff", &c.Weights}, {"kv_eff", &c.KV}, {"link_eff", &c.Link},
		{"compute_x", &c.ComputeX}, {"weights_x", &c.WeightsX}, {"kv_x", &c.KVX}, {"fixed_x", &c.FixedX},
		{"step_us", &c.Step}, {"layer_us", &c.Layer}, {"seq_us", &c.Seq}, {"allreduce_us", &c.AllReduce},
		{"moe_layer_us", &c.MoELayer}, {"request_us", &c.Request},
	}
}

// Check reports the first coefficient out of its range.
func (c Coeffs) Check() error {
	for _, f := range c.Fields() {
		v := *f.P
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("coefficient %s = %g: want a finite number >= 0", f.Name, v)
		}
	}
	for _, e := range []struct {
		name string
		v    float64
	}{{"compute_eff", c.Compute}, {"weight_eff", c.Weights}, {"kv_eff", c.KV}} {
		if e.v > 1 {
			return fmt.Errorf("coefficient %s = %g: want an efficiency in (0, 1] (a share of the spec sheet's peak), or 0 for the GPU's measured kernels", e.name, e.v)
		}
	}
	if c.Link <= 0 || c.Link > 1 {
		return fmt.Errorf("coefficient link_eff = %g: want an efficiency in (0, 1]: a share of the link's bandwidth", c.Link)
	}
	return nil
}

// Placement is a model laid out on a replica: the accelerator, the model's
// shape, the tensor-parallel degree and the precisions.
type Placement struct {
	GPU   GPU
	Model ModelConfig
	TP    int
	// Precision of the weights: "bf16", "fp16" or "fp8" ("" is the
	// checkpoint's own; a 16-bit precision on an FP8 checkpoint is an
	// error: vLLM runs the weights it is given). KVDtype of the KV
	// cache: "" follows the engine's default (bf16/fp16, even for FP8
	// weights, as vLLM does unless kv_cache_dtype is set), or "fp8".
	Precision string
	KVDtype   string
	// EP spreads whole routed experts over EP GPUs (vLLM's
	// --enable-expert-parallel, over the TP × DP GPUs of a data-parallel
	// group) instead of slicing every expert across the TP group: each GPU
	// holds E/EP experts and serves the tokens of all EP/TP replicas that
	// pick them, which travel there and back (all-to-all). 0 or 1: sliced.
	EP int
}

// Normalize checks a placement and fills defaults.
func (p *Placement) Normalize() error {
	if p.TP < 1 {
		p.TP = 1
	}
	if p.TP > 64 {
		return fmt.Errorf("tensor_parallel %d: want 1..64", p.TP)
	}
	if p.EP > 1 && (p.EP%p.TP != 0 || p.EP > 512) {
		return fmt.Errorf("expert_parallel %d: want a multiple of tensor_parallel (%d): the GPUs of EP/TP replicas", p.EP, p.TP)
	}
	if p.EP > 1 && p.Model.IsMoE() && p.Model.Experts%p.EP != 0 {
		return fmt.Errorf("expert_parallel %d: %s has %d experts per layer; want a degree that divides them", p.EP, p.Model.Name, p.Model.Experts)
	}
	switch strings.ToLower(p.Precision) {
	case "":
		p.Precision = "bf16"
		if p.Model.Quantization == "fp8" {
			p.Precision = "fp8" // the checkpoint itself is FP8
		}
	case "bf16", "fp16", "float16", "bfloat16":
		if p.Model.Quantization == "fp8" {
			return fmt.Errorf("precision %s: the %s checkpoint is FP8; want fp8 (or leave precision out), or a 16-bit checkpoint's config", p.Precision, p.Model.Name)
		}
		p.Precision = "bf16"
	case "fp8":
		p.Precision = "fp8"
	default:
		return fmt.Errorf("precision %q: want bf16, fp16 or fp8", p.Precision)
	}
	switch strings.ToLower(p.KVDtype) {
	case "", "auto", "bf16", "fp16":
		p.KVDtype = "bf16"
	case "fp8", "fp8_e4m3", "fp8_e5m2":
		p.KVDtype = "fp8"
	default:
		return fmt.Errorf("kv_cache_dtype %q: want auto, bf16 or fp8", p.KVDtype)
	}
	if p.Model.Layers < 1 || p.Model.Hidden < 1 {
		return fmt.Errorf("model %q has no layers or hidden size", p.Model.Name)
	}
	if p.GPU.BandwidthGBs <= 0 || p.GPU.BF16TFLOPs <= 0 {
		return fmt.Errorf("GPU %q has no bandwidth or FLOP/s figure", p.GPU.Name)
	}
	return nil
}

func (p Placement) weightBytes() float64 {
	if p.Precision == "fp8" {
		return 1
	}
	return 2
}

func (p Placement) kvBytes() float64 {
	if p.KVDtype == "fp8" {
		return 1
	}
	return 2
}

// kvShare is the share of the model's KV heads one GPU holds: 1/TP, but
// never less than one head (vLLM replicates KV heads when there are fewer
// than GPUs).
func (p Placement) kvShare() float64 {
	h := max(p.Model.KVHeads, 1)
	return max(float64(h)/float64(p.TP), 1) / float64(h)
}

// WeightBytesPerGPU is the weight memory of one GPU. Embeddings and the LM
// head stay in 16 bits in FP8 checkpoints (they are not quantised).
func (p Placement) WeightBytesPerGPU() float64 {
	total, _ := p.Model.Params()
	emb := p.Model.EmbeddingParams()
	routed := 0.0
	if p.Model.IsMoE() {
		routed = float64(p.Model.MoELayers) * float64(p.Model.Experts) * p.Model.ExpertParams()
	}
	// Routed experts are split over the EP GPUs when spread, else sliced
	// over the TP group like everything else.
	return ((total-emb-routed)*p.weightBytes()+emb*2)/float64(p.TP) + routed*p.weightBytes()/float64(max(p.TP, p.EP))
}

// KVBytesPerTokenPerGPU is one token's KV footprint on one GPU.
func (p Placement) KVBytesPerTokenPerGPU() float64 {
	return p.Model.KVBytesPerToken(p.kvBytes()) * p.kvShare()
}

// activationReserveGB is the memory per GPU, in 10⁹ bytes, that vLLM keeps
// for activations, CUDA graphs and the CUDA context beyond weights and KV.
// Derived from the RTX 4090 run (shared/profiles/vllm_measured_llmservingsim),
// the only per-request run that records its KV capacity: 25.25·10⁹ bytes ×
// 0.9 − 16.06·10⁹ of weights leaves 6.66·10⁹, of which the measured 41,408
// tokens × 128 KiB use 5.43·10⁹. With it, the capacity derived for the six
// H100 placements of the sim-to-real runs is within 2 % of what vLLM
// reported (TestKVTokensDerived). MODELING.md warns that ignoring it
// overestimates KV capacity (LLMServingSim PR #59).
const activationReserveGB = 1.24

// KVTokens estimates a replica's KV capacity when the engine's own figure
// (num_gpu_blocks × block_size) is not known: what gpu_memory_utilization
// leaves per GPU after weights and the activation reserve, over one token's
// KV per GPU.
func (p Placement) KVTokens(memUtil float64) int {
	if memUtil <= 0 {
		memUtil = 0.9
	}
	free := p.GPU.MemoryBytes()*memUtil - activationReserveGB*1e9 - p.WeightBytesPerGPU()
	return int(max(free, 0) / p.KVBytesPerTokenPerGPU())
}

// Physics is a placement's step-time model with its coefficients, reduced
// to the constants the hot path needs.
type Physics struct {
	coeffs Coeffs
	dev    DeviceCoeffs
	desc   string

	overhead   float64 // µs per step: Step + Layer·L + MoE layers + GEMM launches
	seqUS      float64 // µs per sequence
	denseBytes float64 // weight bytes per GPU read every step (everything but routed experts)
	actBytes   float64 // elementwise activation bytes per token per GPU (norms, RoPE, SiLU, residuals)
	expertB    float64 // bytes per GPU of one routed expert in one layer
	localExp   float64 // routed experts per MoE layer on this GPU
	tokScale   float64 // tokens reaching the experts per token of this replica (EP/TP replicas share them)
	moeLayers  float64
	experts    float64 // routed experts per MoE layer
	topK       float64
	flopsTok   float64 // dense linear FLOPs per token per GPU
	expFlopTok float64 // routed experts' FLOPs per token per GPU
	lmHeadFlop float64 // FLOPs per GPU per token that produces logits
	attnFlop   float64 // prefill attention FLOPs per GPU per (token × context token)
	kvBytes    float64 // bytes per GPU per KV token read
	bw         float64 // bytes per µs of weight streaming
	kvBW       float64 // bytes per µs of paged-attention KV reads
	peak       float64 // FLOPs per µs the GEMMs reach
	attnPeak   float64 // FLOPs per µs prefill attention reaches
	attnFixed  float64 // µs per step with prefill chunks (L launches)
	decFixed   float64 // µs per step with KV to read (L launches)
	moePeak    float64 // FLOPs per µs the fused MoE kernel reaches with many tokens per expert
	moeHalf    float64 // tokens per expert at which it reaches half of that
	moeBW      float64 // bytes per µs of its expert reads
	moeFixed   float64 // µs per MoE layer
	tp         float64
	arBytesTok float64 // all-reduce message bytes per token (hidden × 2)
	ar         []ARPoint
	arScale    float64 // message bytes per byte of the table's link
	arFixed    float64 // µs per all-reduce (link model, where nothing is measured)
	linkBW     float64 // bytes per µs (link model)
	ringShare  float64 // share of the message each GPU sends in a ring (link model)
	layers     float64
	a2aBytes   float64 // all-to-all bytes per routed token per MoE layer (expert parallel), 0 otherwise
}

// nvlinkLatencyUS is the link latency the all-reduce coefficient is fitted
// at (NVLink 4 on H100): a slower link's fixed cost scales with its own.
const nvlinkLatencyUS = 3.0

// gemmsPerLayer is how many GEMM kernels a layer launches: QKV, O, and the
// MLP's fused gate-up and down.
const gemmsPerLayer = 4

// NewPhysics reduces a placement and coefficients to a step-time model,
// with the GPU's measured kernels (DeviceFor).
func NewPhysics(pl Placement, c Coeffs) (*Physics, error) {
	if err := pl.Normalize(); err != nil {
		return nil, err
	}
	if err := c.Check(); err != nil {
		return nil, err
	}
	dev, devNote := DeviceFor(pl.GPU)
	m := pl.Model
	tp := float64(pl.TP)
	wb := pl.weightBytes()
	L := float64(m.Layers)
	moeL := 0.0
	if m.IsMoE() {
		moeL = float64(m.MoELayers)
	}
	denseL := L - moeL
	// Weights read every step whatever the batch: attention, dense MLPs,
	// shared experts, and the LM head (the input embedding is a lookup).
	lm := float64(m.Vocab) * float64(m.Hidden)
	always := L*m.AttnParams() + denseL*m.DenseMLPParams() + moeL*m.SharedExpertParams()
	ph := &Physics{coeffs: c, dev: dev, layers: L, tp: tp, moeLayers: moeL}
	ph.denseBytes = (always*wb + lm*2) / tp
	h := float64(m.Hidden)
	hd := m.headDim()
	qkv := (float64(max(m.Heads, 1)) + 2*m.kvHeads()) * hd
	inter := float64(m.Intermediate)
	if moeL > 0 && denseL == 0 {
		inter = float64(m.SharedExperts * m.SharedIntermediate)
	}
	// Per token per layer, 16-bit: two fused residual-add RMSNorms (read
	// two vectors, write two), RoPE over Q and K, SiLU-and-mul over the
	// gated MLP's two halves; split over TP where the tensor is.
	ph.actBytes = L * 2 * (8*h + (2*qkv+3*inter)/tp)
	if moeL > 0 {
		ph.experts = float64(m.Experts)
		ph.topK = float64(max(m.ExpertsPerToken, 1))
		ph.expertB = m.ExpertParams() * wb / tp
		ph.localExp, ph.tokScale = ph.experts, 1
		// Expert work per GPU is the same either way: sliced, every GPU
		// does 1/TP of each token's; spread, 1/EP of EP/TP replicas'.
		ph.expFlopTok = 2 * ph.topK * m.ExpertParams() / tp
		if ep := float64(max(pl.EP, 1)); ep > 1 {
			ph.expertB = m.ExpertParams() * wb
			ph.localExp = ph.experts / ep
			ph.tokScale = ep / tp
			// Each routed 16-bit activation leaves for another GPU with
			// probability (EP−1)/EP; step charges dispatch and combine.
			ph.a2aBytes = h * 2 * (ep - 1) / ep
		}
	}
	ph.flopsTok = 2 * always / tp
	ph.lmHeadFlop = 2 * lm / tp
	heads := float64(max(m.Heads, 1))
	// QKᵀ and AV: 2 FLOPs per multiply-add, two matmuls, per head and
	// layer, for each (query token, context token) pair.
	ph.attnFlop = 4 * L * heads * hd / tp
	ph.kvBytes = pl.KVBytesPerTokenPerGPU()

	bw := pl.GPU.BandwidthGBs * 1e3 // GB/s → bytes/µs
	peak, ec, ecm, ew := pl.GPU.BF16TFLOPs, dev.GEMMCompute, dev.MoECompute, dev.GEMMWeights
	if pl.Precision == "fp8" && pl.GPU.FP8TFLOPs > 0 && dev.GEMMComputeFP8 > 0 {
		// FP8 GEMMs (activations quantised on the fly) at their measured
		// share of the FP8 peak; weights stream as 16-bit ones do.
		peak, ec, ecm = pl.GPU.FP8TFLOPs, dev.GEMMComputeFP8, dev.MoEComputeFP8
	}
	ekv := dev.AttnKV
	if c.Compute > 0 {
		ec, ecm = c.Compute, c.Compute*dev.MoECompute/dev.GEMMCompute
	}
	if c.Weights > 0 {
		ew = c.Weights
	}
	if c.KV > 0 {
		ekv = c.KV
	}
	cx, wx, kx := orOne(c.ComputeX), orOne(c.WeightsX), orOne(c.KVX)
	ph.bw = bw * ew / wx
	ph.kvBW = bw * ekv / kx
	ph.peak = peak * 1e6 * ec / cx // TFLOP/s → FLOP/µs
	ph.attnPeak = pl.GPU.BF16TFLOPs * 1e6 * dev.AttnPrefill / cx
	fx := orOne(c.FixedX)
	ph.attnFixed = L * dev.AttnPrefillFixedUS * fx
	ph.decFixed = L * dev.AttnDecodeFixedUS * fx
	ph.moePeak = peak * 1e6 * ecm / cx
	ph.moeHalf = dev.MoEHalfTokens
	ph.moeBW = bw * dev.MoEWeights * ew / dev.GEMMWeights / wx
	ph.moeFixed = moeL * dev.MoEFixedUS * fx
	gemms := gemmsPerLayer*denseL + 2*moeL + 1 // MoE layers: QKV and O (the experts are the fused kernel)
	if m.SharedExperts > 0 {
		gemms += 2 * moeL
	}
	ph.overhead = c.Step + c.Layer*L + c.MoELayer*moeL + gemms*dev.GEMMFixedUS*fx
	ph.seqUS = c.Seq
	if group := max(pl.TP, pl.EP); group > 1 {
		ph.ar, ph.arScale = dev.allReduceAt(pl.TP), orOne(dev.ARBytesScale)
		lat := pl.GPU.LinkLatencyUS
		if lat <= 0 {
			lat = nvlinkLatencyUS
		}
		ph.arFixed = c.AllReduce * lat / nvlinkLatencyUS
		ph.linkBW = max(pl.GPU.TPLinkGBs(group), 1) * 1e3 * c.Link
	}
	if pl.TP > 1 {
		ph.arBytesTok = h * 2
		ph.ringShare = 2 * (tp - 1) / tp // ring: 2(TP−1)/TP of the message
	}
	ph.desc = fmt.Sprintf("physics: %s × %s tp%d %s (weights %.1f GB/GPU, KV %.0f B/token/GPU; %s)",
		pl.GPU.Name, m.Name, pl.TP, pl.Precision, ph.denseBytes/1e9+ph.expertB*ph.localExp*moeL/1e9, ph.kvBytes, devNote)
	return ph, nil
}

// orOne is x, or 1 when x is 0 (a multiplier left out).
func orOne(x float64) float64 {
	if x == 0 {
		return 1
	}
	return x
}

// Coeffs returns the coefficients the model was built with.
func (ph *Physics) Coeffs() Coeffs { return ph.coeffs }

// Device returns the device coefficients the model was built with.
func (ph *Physics) Device() DeviceCoeffs { return ph.dev }

// String says what the model describes.
func (ph *Physics) String() string { return ph.desc }

// Chunk is the prefill of part of one prompt in a step: Tokens new tokens
// after Context tokens already in the KV cache.
type Chunk struct {
	Tokens, Context int
}

// Batch is what one engine step runs.
type Batch struct {
	Decoders int     // sequences producing one token each
	DecodeKV int64   // KV tokens those sequences hold (read once each)
	Chunks   []Chunk // prefill work
}

// Step returns a step's duration in µs.
func (ph *Physics) Step(b Batch) float64 {
	n := float64(b.Decoders)
	seqs := n
	logits := n
	attn := 0.0
	kv := float64(b.DecodeKV)
	for _, c := range b.Chunks {
		t := float64(c.Tokens)
		n += t
		seqs++
		logits++ // the chunk's last token (only the final chunk's is sampled; close enough)
		attn += t * (float64(c.Context) + t/2)
		kv += float64(c.Context)
	}
	return ph.step(n, seqs, logits, attn, kv)
}

// customAllReduceMax is the largest message vLLM's custom all-reduce
// takes (its max_size, 8 MiB); larger ones go to NCCL, which the link
// model stands for.
const customAllReduceMax = 8 << 20

// allReduce is one all-reduce of a message of bytes, µs: the measured
// custom all-reduce where it applies, else a ring over the link.
func (ph *Physics) allReduce(bytes float64) float64 {
	if len(ph.ar) > 0 && bytes <= customAllReduceMax {
		return interpAR(ph.ar, bytes*ph.arScale)
	}
	return ph.arFixed + bytes*ph.ringShare/ph.linkBW
}

func (ph *Physics) step(n, seqs, logits, attnPairs, kv float64) float64 {
	if n <= 0 {
		return 0
	}
	bytes := ph.denseBytes
	flops := ph.flopsTok*n + ph.lmHeadFlop*logits
	t := ph.overhead + ph.seqUS*seqs
	t += math.Max(flops/ph.peak, bytes/ph.bw) + n*ph.actBytes/ph.bw
	if ph.moeLayers > 0 {
		// Experts touched by the routed tokens, each picking topK of E,
		// under uniform routing: E·(1 − (1 − k/E)^n) per layer. The
		// kernel's efficiency grows with the tokens each expert gets.
		routed := n * ph.tokScale
		touched := ph.localExp * (1 - math.Pow(1-ph.topK/ph.experts, routed))
		perExpert := routed * ph.topK / ph.experts
		eff := perExpert / (perExpert + ph.moeHalf)
		t += ph.moeFixed + ph.moeLayers*math.Max(ph.expFlopTok*n/(ph.moePeak*eff), touched*ph.expertB/ph.moeBW)
		if ph.a2aBytes > 0 {
			t += ph.moeLayers * 2 * (ph.arFixed + ph.topK*n*ph.a2aBytes/ph.linkBW)
		}
	}
	if attnPairs > 0 {
		t += ph.attnFixed + ph.attnFlop*attnPairs/ph.attnPeak
	}
	if kv > 0 {
		t += ph.decFixed + kv*ph.kvBytes/ph.kvBW
	}
	if ph.tp > 1 {
		t += 2 * ph.layers * ph.allReduce(n*ph.arBytesTok)
	}
	return t
}

// DecodeRun returns a run of pure decode steps with decoders sequences
// holding kv KV tokens at its start as a + c·i for step i: only the KV
// read grows, by one token per sequence per step.
func (ph *Physics) DecodeRun(decoders int, kv int64) (a, c float64) {
	n := float64(decoders)
	a = ph.step(n, n, n, 0, float64(kv))
	c = n * ph.kvBytes / ph.kvBW
	return a, c
}

// RequestOverhead is the client-side delay before a request reaches the
// engine, µs.
func (ph *Physics) RequestOverhead() float64 { return ph.coeffs.Request }

// EngineDefaults are vLLM's default max_num_seqs and max_num_batched_tokens
// for its OpenAI server (EngineArgs.get_batch_defaults): 1024 and 8192 on
// devices with at least 70 GiB that are not A100s, 256 and 2048 otherwise
// (A100 excluded after vLLM PR #17885 measured lower throughput with the
// larger budget).
func EngineDefaults(g GPU) (maxSeqs, maxBatchedTokens int) {
	if g.MemoryBytes() >= 70*(1<<30) && g.Family != "ampere" {
		return 1024, 8192
	}
	return 256, 2048
}
