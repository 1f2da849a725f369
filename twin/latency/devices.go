package latency

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// DeviceCoeffs are what op-level measurements of one GPU running vLLM's
// kernels fix: how close each kind of kernel comes to the spec sheet's
// peak, and what it costs at the least. They are fitted by
// kernelfit_test.go to measured kernel timings (testdata/kernels/), not to
// end-to-end runs, so a GPU's coefficients say what its kernels do and
// nothing about the engine around them. Efficiencies are shares of the
// spec sheet's figures (gpus.go); times in µs.
type DeviceCoeffs struct {
	GPU string // the spec-table row measured

	// GEMMs: t = GEMMFixedUS + max(FLOPs/(peak·GEMMCompute), bytes/(BW·GEMMWeights)).
	GEMMCompute, GEMMWeights, GEMMFixedUS float64
	// The compute share with FP8 weights (0 where the GPU has no FP8
	// GEMMs); FP8 weights stream at GEMMWeights.
	GEMMComputeFP8 float64

	// Decode (paged) attention: t = AttnDecodeFixedUS + KV bytes/(BW·AttnKV), per layer.
	// (Fitted on reads of 8 to 512 sequences. An efficiency falling with
	// the query heads per KV head fits at g^−0.06 on H100 and g^0 on A100
	// and L40S; with it the leave-one-model-out E2E error rose from 8.0 %
	// to 9.4 %, so it is left out.)
	AttnKV, AttnDecodeFixedUS float64
	// Prefill (flash) attention: t = AttnPrefillFixedUS + FLOPs/(peak16·AttnPrefill), per layer.
	AttnPrefill, AttnPrefillFixedUS float64

	// Fused MoE, per MoE layer: t = MoEFixedUS + max(FLOPs/(peak·MoECompute·m/(m+MoEHalfTokens)),
	// touched experts' bytes/(BW·MoEWeights)), m the tokens per expert.
	MoECompute, MoEHalfTokens, MoEWeights, MoEFixedUS float64
	MoEComputeFP8                                     float64

	// AllReduce is vLLM's custom all-reduce (CUDA-graph captured) as
	// measured: latency against message size per tensor-parallel degree.
	// ARBytesScale (0 is 1) scales a message's size before the lookup: a
	// table borrowed from a slower link of the same kind moves the bytes
	// of a faster one in the time it took for fewer.
	AllReduce    []ARPoint
	ARBytesScale float64
}

// ARPoint is one all-reduce measurement.
type ARPoint struct {
	TP    int
	Bytes float64
	US    float64
}

// DeviceFor returns a GPU's measured kernel coefficients, or, for a GPU
// without kernel measurements, those of the measured GPU nearest to it
// (same architecture where there is one), with a note saying so. The
// efficiencies are shares of each GPU's own spec sheet, so the borrowed
// ones apply to the GPU's own peak and bandwidth.
func DeviceFor(g GPU) (DeviceCoeffs, string) {
	if d, ok := measuredDevices[g.Name]; ok {
		return d, "measured kernels of " + g.Name
	}
	from := "H100-SXM"
	switch g.Family {
	case "ampere":
		from = "A100-SXM-80GB"
	case "ada":
		from = "L40S"
	}
	d := measuredDevices[from]
	d.AllReduce = nil
	note := fmt.Sprintf("no kernel measurements of %s: %s's kernel efficiencies on its spec sheet", g.Name, from)
	// A PCIe card all-reduces over PCIe as the measured L40S does (no
	// NVLink, peer traffic through the root complex or a switch), its
	// bytes scaled by the links' bandwidths (Gen5 moves twice Gen4's).
	// Over NVLink or xGMI, the link model (Coeffs.Link, AllReduce)
	// stands in: no table measured another machine's fabric.
	if l40s := measuredDevices["L40S"]; strings.HasPrefix(g.Link, "pcie") && g.LinkGBs > 0 {
		ref, _ := LookupGPU("L40S")
		d.AllReduce, d.ARBytesScale = l40s.AllReduce, ref.LinkGBs/g.LinkGBs
		note += "; L40S's measured PCIe all-reduce"
	}
	return d, note
}

// allReduceAt returns the measured all-reduce table at a tensor-parallel
// degree, nil when none was measured at it.
func (d DeviceCoeffs) allReduceAt(tp int) []ARPoint {
	var out []ARPoint
	for _, p := range d.AllReduce {
		if p.TP == tp {
			out = append(out, p)
		}
	}
	return out
}

// interpAR interpolates a measured all-reduce table (sorted by size)
// linearly in the message size between measurements, and beyond the
// largest one at its bandwidth.
func interpAR(pts []ARPoint, bytes float64) float64 {
	if bytes <= pts[0].Bytes {
		return pts[0].US
	}
	i, _ := slices.BinarySearchFunc(pts, bytes, func(p ARPoint, b float64) int { return cmp.Compare(p.Bytes, b) })
	if i >= len(pts) {
		last := pts[len(pts)-1]
		return last.US * bytes / last.Bytes
	}
	a, b := pts[i-1], pts[i]
	return a.US + (b.US-a.US)*(bytes-a.Bytes)/(b.Bytes-a.Bytes)
}
