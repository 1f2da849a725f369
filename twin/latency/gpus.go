package latency

// This file is the spec-sheet table of accelerators the physical step-time
// model (physics.go) reads. Every figure is a published one, named in the
// row's Source; the model's fitted coefficients (coeffs.go), not this table,
// absorb the gap between spec sheet and what kernels reach.

import (
	"fmt"
	"slices"
	"strings"
)

// GPU is one accelerator type as its vendor's spec sheet describes it.
type GPU struct {
	Name    string   // canonical, e.g. "H100-SXM"
	Aliases []string // other names users, nvidia-smi and benchmark files use
	// Family groups devices whose step-time coefficients are fitted
	// together: "hopper", "ampere", "ada", "blackwell", "cdna3".
	Family string

	// MemoryGB is device memory in 10⁹ bytes, as the spec sheet quotes it
	// (a vendor's "80 GB" is nearer 80 GiB: an H100's driver reports about
	// 79 GiB, some 85·10⁹ bytes). The RTX4090 row instead holds what its
	// driver reports, as internal/calibrate/transfer.go does.
	MemoryGB float64
	// DriverMiB is the memory total the driver reports (nvidia-smi's
	// memory.total), which vLLM's gpu_memory_utilization is a share of; 0
	// means MemoryGB. The spec sheet's "80 GB" H100 reports 81,559 MiB
	// (85.5 × 10⁹ bytes): sizing the KV cache from the spec figure
	// underestimates it by 7–11 % on the train/val runs.
	DriverMiB    float64
	BandwidthGBs float64 // HBM/GDDR bandwidth, GB/s
	BF16TFLOPs   float64 // dense BF16 tensor TFLOP/s with FP32 accumulation (no sparsity)
	// FP8TFLOPs is dense FP8 tensor TFLOP/s; 0 where the device has no FP8
	// tensor cores (A100): FP8 weights are then dequantised and the GEMMs
	// run at BF16.
	FP8TFLOPs float64

	// LinkGBs is the per-GPU, one-direction bandwidth of the link a
	// tensor-parallel all-reduce uses: NVLink, or PCIe where there is no
	// NVLink. On a point-to-point mesh (Link "xgmi") it is one peer link;
	// TPLinkGBs gives what a group of GPUs gets.
	LinkGBs float64
	Link    string // "nvlink3", "nvlink4", "nvlink5", "pcie4", "pcie5", "xgmi"
	// LinkLatencyUS is a rough latency of that link (see the link
	// constants below for where each comes from). The physical model uses
	// it as a ratio: an all-reduce's fixed cost (coefficient allreduce_us,
	// fitted on NVLink 4) scales with it, once per all-reduce whatever the
	// group's size (vLLM's custom all-reduce is one-shot for small
	// messages, not a ring of 2(TP−1) steps).
	LinkLatencyUS float64

	Source string // where the figures come from
}

// Rough per-step latencies of a collective. They are orders of magnitude,
// not measurements of these exact systems; physics.go scales its fitted
// all-reduce cost by the ratio of a link's latency to NVLink's.
const (
	// NCCL point-to-point over NVLink takes about 3–4 µs per message
	// without CUDA graphs (NVIDIA/nccl#1984: sendrecv_perf 3.7 µs on
	// H800), and an NVLS all-reduce of a few KB on two H100s about 6 µs
	// (NVIDIA/nccl#1259). physics.go's coefficient is fitted at 3 µs.
	nvlinkStepUS = 3.0
	// PCIe peer traffic crosses a switch or the CPU's root complex, and
	// GeForce cards have peer-to-peer disabled so it bounces through host
	// memory: about three times NVLink's per-step cost.
	pcieStepUS = 10.0
	// Infinity Fabric (xGMI) links are direct GPU-to-GPU like NVLink, but
	// RCCL's small-message path is less tuned; no measurement at hand, so
	// a little above NVLink.
	xgmiStepUS = 5.0
)

// GPUs is the table LookupGPU searches. To model a new accelerator, add a
// row with its spec-sheet figures and say where they come from.
var GPUs = []GPU{
	{
		Name:      "H100-SXM",
		Aliases:   []string{"H100", "h100-sxm", "H100-SXM5", "H100-SXM5-80GB", "H100-SXM-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H100-SXM-80GB"},
		Family:    "hopper",
		DriverMiB: 81559, MemoryGB: 80, BandwidthGBs: 3350, BF16TFLOPs: 989.4, FP8TFLOPs: 1978.9,
		LinkGBs: 450, Link: "nvlink4", LinkLatencyUS: nvlinkStepUS,
		Source: "NVIDIA H100 Tensor Core GPU datasheet (SXM5): 80 GB HBM3, 3.35 TB/s, BF16 1,979 / FP8 3,958 TFLOPS with sparsity (half dense), NVLink 900 GB/s bidirectional",
	},
	{
		Name:      "H100-PCIe",
		Aliases:   []string{"H100-PCIe-80GB", "NVIDIA H100 PCIe"},
		Family:    "hopper",
		DriverMiB: 81559, MemoryGB: 80, BandwidthGBs: 2000, BF16TFLOPs: 756.5, FP8TFLOPs: 1513,
		// An NVLink bridge joins pairs of cards only (600 GB/s); groups of
		// more than two all-reduce over PCIe.
		LinkGBs: 64, Link: "pcie5", LinkLatencyUS: pcieStepUS,
		Source: "NVIDIA H100 datasheet (PCIe) and product brief PB-11133-001: 80 GB HBM2e, 2 TB/s, BF16 1,513 / FP8 3,026 TFLOPS with sparsity (half dense), PCIe Gen5 128 GB/s bidirectional",
	},
	{
		Name:      "H200-SXM",
		Aliases:   []string{"H200", "h200-sxm", "H200-SXM-141GB", "NVIDIA H200", "NVIDIA H200-SXM-141GB"},
		Family:    "hopper",
		DriverMiB: 143771, MemoryGB: 141, BandwidthGBs: 4800, BF16TFLOPs: 989.4, FP8TFLOPs: 1978.9,
		LinkGBs: 450, Link: "nvlink4", LinkLatencyUS: nvlinkStepUS,
		Source: "NVIDIA H200 Tensor Core GPU datasheet (SXM): 141 GB HBM3e, 4.8 TB/s, compute as H100 SXM, NVLink 900 GB/s bidirectional",
	},
	{
		Name:      "A100-SXM-40GB",
		Aliases:   []string{"A100-40GB", "A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"},
		Family:    "ampere",
		DriverMiB: 40960, MemoryGB: 40, BandwidthGBs: 1555, BF16TFLOPs: 312,
		LinkGBs: 300, Link: "nvlink3", LinkLatencyUS: nvlinkStepUS,
		Source: "NVIDIA A100 Tensor Core GPU datasheet (SXM 40GB): 40 GB HBM2, 1,555 GB/s, BF16 312 TFLOPS dense, no FP8, NVLink 600 GB/s bidirectional",
	},
	{
		Name:      "A100-SXM-80GB",
		Aliases:   []string{"A100", "A100-80GB", "a100-sxm-80gb", "A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM-80GB"},
		Family:    "ampere",
		DriverMiB: 81920, MemoryGB: 80, BandwidthGBs: 2039, BF16TFLOPs: 312,
		LinkGBs: 300, Link: "nvlink3", LinkLatencyUS: nvlinkStepUS,
		Source: "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB): 80 GB HBM2e, 2,039 GB/s, BF16 312 TFLOPS dense, no FP8, NVLink 600 GB/s bidirectional",
	},
	{
		Name:      "L40S",
		Aliases:   []string{"l40s", "NVIDIA L40S"},
		Family:    "ada",
		DriverMiB: 46068, MemoryGB: 48, BandwidthGBs: 864, BF16TFLOPs: 362.05, FP8TFLOPs: 733,
		LinkGBs: 32, Link: "pcie4", LinkLatencyUS: pcieStepUS, // no NVLink
		Source: "NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s, BF16 362.05 / FP8 733 TFLOPS dense (733 / 1,466 with sparsity), PCIe Gen4 x16 64 GB/s bidirectional, NVLink not supported",
	},
	{
		Name:      "B200",
		Aliases:   []string{"HGX B200", "B200-SXM", "B200-180GB", "NVIDIA B200"},
		Family:    "blackwell",
		DriverMiB: 183359, MemoryGB: 180, BandwidthGBs: 8000, BF16TFLOPs: 2250, FP8TFLOPs: 4500,
		LinkGBs: 900, Link: "nvlink5", LinkLatencyUS: nvlinkStepUS,
		Source: "NVIDIA HGX B200 / DGX B200 datasheets: 1,440 GB HBM3e and 64 TB/s over 8 GPUs (180 GB, 8 TB/s each; the 192 GB of early announcements is what its eight HBM3e stacks hold, not what HGX B200 enables), 36 PF BF16 / 72 PF FP8 with sparsity over 8 GPUs (2.25 / 4.5 PF dense each), NVLink 5 1.8 TB/s bidirectional",
	},
	{
		Name:    "RTX4090",
		Aliases: []string{"RTX 4090", "GeForce RTX 4090", "NVIDIA GeForce RTX 4090"},
		Family:  "ada",
		// 23.52 GiB as the driver reports it (25,250,627,584 bytes), the
		// figure internal/calibrate/transfer.go uses; the box says 24 GB.
		DriverMiB: 24081, MemoryGB: 25.25, BandwidthGBs: 1008,
		// GeForce cards run BF16 (and FP16 with FP32 accumulation) at half
		// the FP16-accumulate rate: 165.2 dense, where 330.3 is FP16 with
		// FP16 accumulation, which vLLM's GEMMs do not use. FP8 likewise:
		// 330.3 with FP32 accumulation.
		BF16TFLOPs: 165.2, FP8TFLOPs: 330.3,
		LinkGBs: 32, Link: "pcie4", LinkLatencyUS: pcieStepUS, // no NVLink, no peer-to-peer
		Source: "NVIDIA Ada Lovelace architecture whitepaper v1.01, GeForce RTX 4090: 1,008 GB/s; peak BF16 tensor 165.2 dense (FP32 accumulate), FP8 330.3 dense (FP32 accumulate); PCIe Gen4 x16; memory as the calibration run's hardware block reports it",
	},
	{
		Name:      "RTXPRO6000",
		Aliases:   []string{"RTX PRO 6000", "RTX PRO 6000 Blackwell", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"},
		Family:    "blackwell",
		DriverMiB: 97887, MemoryGB: 96, BandwidthGBs: 1792, BF16TFLOPs: 503.8, FP8TFLOPs: 1007.6,
		LinkGBs: 64, Link: "pcie5", LinkLatencyUS: pcieStepUS, // no NVLink
		Source: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet: 96 GB GDDR7, 1,792 GB/s, 4,000 AI TOPS (FP4 with sparsity), i.e. 503.8 BF16 / 1,007.6 FP8 TFLOPS dense with FP32 accumulation; PCIe Gen5 x16",
	},
	{
		Name:      "MI300X",
		Aliases:   []string{"mi300x", "Instinct MI300X", "AMD Instinct MI300X", "AMD Instinct MI300X 192GB HBM3", "AMD Instinct MI300X-NPS1-SPX-192GB-750W", "AMD MI300X-NPS1-SPX-192GB-750W"},
		Family:    "cdna3",
		DriverMiB: 196592, MemoryGB: 192, BandwidthGBs: 5300, BF16TFLOPs: 1307.4, FP8TFLOPs: 2614.9,
		// Seven Infinity Fabric links of 128 GB/s bidirectional wire the
		// 8 GPUs of a platform point to point: 64 GB/s one way per peer.
		// A tensor-parallel group of n GPUs drives n−1 of them at once
		// (TPLinkGBs); LinkGBs is the one link a pair shares.
		LinkGBs: 64, Link: "xgmi", LinkLatencyUS: xgmiStepUS,
		Source: "AMD Instinct MI300X data sheet: 192 GB HBM3, 5.3 TB/s, BF16 1,307.4 / FP8 2,614.9 TFLOPS dense, 7 Infinity Fabric links at 128 GB/s (896 GB/s aggregate) in a fully connected 8-GPU platform",
	},
}

// TPLinkGBs is the one-direction bandwidth per GPU a tensor-parallel group
// of tp GPUs can all-reduce over. Switched links (NVLink with NVSwitch,
// PCIe) give every GPU its full LinkGBs whatever the group; a point-to-point
// mesh (xgmi) gives one link per peer, so a group of tp drives tp−1 links
// (RCCL runs rings over all of them).
func (g GPU) TPLinkGBs(tp int) float64 {
	if g.Link == "xgmi" && tp > 2 {
		return g.LinkGBs * float64(tp-1)
	}
	return g.LinkGBs
}

// normGPUName folds the spellings of one name together: case, and '-',
// '_' and ' ' (so "H100 SXM", "h100_sxm" and "H100-SXM" are one name).
func normGPUName(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', ' ':
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(s)))
}

// LookupGPU finds a GPU by its canonical name or any alias, ignoring case
// and '-', '_', ' '.
func LookupGPU(name string) (GPU, error) {
	key := normGPUName(name)
	if key != "" {
		for _, g := range GPUs {
			if normGPUName(g.Name) == key {
				return g, nil
			}
			for _, a := range g.Aliases {
				if normGPUName(a) == key {
					return g, nil
				}
			}
		}
	}
	return GPU{}, fmt.Errorf("unknown GPU %q: known GPUs are %s (aliases such as H100 or A100-80GB also work); to model another accelerator, add a row with its spec-sheet figures to latency.GPUs (twin/latency/gpus.go)",
		name, strings.Join(GPUNames(), ", "))
}

// GPUNames returns the canonical names of the table, sorted.
func GPUNames() []string {
	names := make([]string, 0, len(GPUs))
	for _, g := range GPUs {
		names = append(names, g.Name)
	}
	slices.Sort(names)
	return names
}

// MemoryBytes is the device memory vLLM sizes its KV cache from: what the
// driver reports, else the spec sheet's figure.
func (g GPU) MemoryBytes() float64 {
	if g.DriverMiB > 0 {
		return g.DriverMiB * (1 << 20)
	}
	return g.MemoryGB * 1e9
}
