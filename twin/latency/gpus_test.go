package latency

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestLookupGPU(t *testing.T) {
	tests := []struct{ name, want string }{
		{"H100", "H100-SXM"},
		{"H100-SXM", "H100-SXM"},
		{"h100-sxm", "H100-SXM"},
		{"h100_sxm", "H100-SXM"},
		{" H100 SXM ", "H100-SXM"},
		{"H100-SXM5-80GB", "H100-SXM"},
		{"NVIDIA H100 80GB HBM3", "H100-SXM"},
		{"NVIDIA H100-SXM-80GB", "H100-SXM"},
		{"H100 PCIe", "H100-PCIe"},
		{"H200", "H200-SXM"},
		{"h200-sxm", "H200-SXM"},
		{"A100", "A100-SXM-80GB"},
		{"A100-80GB", "A100-SXM-80GB"},
		{"a100-sxm-80gb", "A100-SXM-80GB"},
		{"NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"},
		{"A100-40GB", "A100-SXM-40GB"},
		{"L40S", "L40S"},
		{"l40s", "L40S"},
		{"B200", "B200"},
		{"RTX4090", "RTX4090"},
		{"rtx 4090", "RTX4090"},
		{"NVIDIA GeForce RTX 4090", "RTX4090"},
		{"RTXPRO6000", "RTXPRO6000"},
		{"RTX PRO 6000", "RTXPRO6000"},
		{"mi300x", "MI300X"},
		{"AMD Instinct MI300X", "MI300X"},
		{"AMD Instinct MI300X-NPS1-SPX-192GB-750W", "MI300X"},
	}
	for _, tc := range tests {
		g, err := LookupGPU(tc.name)
		if err != nil {
			t.Errorf("LookupGPU(%q) error: %v", tc.name, err)
			continue
		}
		if g.Name != tc.want {
			t.Errorf("LookupGPU(%q) = %s, want %s", tc.name, g.Name, tc.want)
		}
	}
}

func TestLookupGPUUnknown(t *testing.T) {
	for _, name := range []string{"TPU-v5e", "", "  ", "H100-SXM-X"} {
		_, err := LookupGPU(name)
		if err == nil {
			t.Errorf("LookupGPU(%q) = nil error, want unknown", name)
			continue
		}
		for _, w := range []string{"unknown GPU", "H100-SXM", "MI300X", "latency.GPUs"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("LookupGPU(%q) error %q does not say %q", name, err, w)
			}
		}
	}
}

// TestGPUTableWellFormed: every row complete and plausible, and no name
// that two rows answer to.
func TestGPUTableWellFormed(t *testing.T) {
	families := []string{"hopper", "ampere", "ada", "blackwell", "cdna3"}
	links := map[string]float64{"nvlink3": nvlinkStepUS, "nvlink4": nvlinkStepUS, "nvlink5": nvlinkStepUS,
		"pcie4": pcieStepUS, "pcie5": pcieStepUS, "xgmi": xgmiStepUS}
	owner := map[string]string{}
	for _, g := range GPUs {
		if !slices.Contains(families, g.Family) {
			t.Errorf("%s: Family %q, want one of %v", g.Name, g.Family, families)
		}
		if lat, ok := links[g.Link]; !ok || g.LinkLatencyUS != lat {
			t.Errorf("%s: Link %q with latency %v µs; want a known link with its latency", g.Name, g.Link, g.LinkLatencyUS)
		}
		if g.MemoryGB <= 0 || g.BandwidthGBs <= 0 || g.BF16TFLOPs <= 0 || g.LinkGBs <= 0 {
			t.Errorf("%s: missing a figure: %+v", g.Name, g)
		}
		// FP8 runs at twice BF16's rate wherever it exists (within the
		// L40S sheet's rounding: 733 against 362.05).
		if g.FP8TFLOPs != 0 && math.Abs(g.FP8TFLOPs/g.BF16TFLOPs-2) > 0.03 {
			t.Errorf("%s: FP8 %v TFLOP/s is not twice BF16's %v", g.Name, g.FP8TFLOPs, g.BF16TFLOPs)
		}
		if (g.FP8TFLOPs == 0) != (g.Family == "ampere") {
			t.Errorf("%s: FP8TFLOPs %v; only Ampere lacks FP8 tensor cores", g.Name, g.FP8TFLOPs)
		}
		if g.Source == "" {
			t.Errorf("%s: no Source", g.Name)
		}
		for _, n := range append([]string{g.Name}, g.Aliases...) {
			key := normGPUName(n)
			if prev, ok := owner[key]; ok && prev != g.Name {
				t.Errorf("%q names both %s and %s", n, prev, g.Name)
			}
			owner[key] = g.Name
		}
	}
	names := GPUNames()
	if len(names) != len(GPUs) || !slices.IsSorted(names) {
		t.Errorf("GPUNames() = %v: want all %d canonical names, sorted", names, len(GPUs))
	}
}

// TestGPUSpecs pins the spec-sheet figures the task names.
func TestGPUSpecs(t *testing.T) {
	tests := []struct {
		name                          string
		memGB, bwGBs, bf16, fp8, link float64
		kind                          string
	}{
		{"H100-SXM", 80, 3350, 989, 1979, 450, "nvlink4"},
		{"H100-PCIe", 80, 2000, 756, 1513, 64, "pcie5"},
		{"H200-SXM", 141, 4800, 989, 1979, 450, "nvlink4"},
		{"A100-SXM-40GB", 40, 1555, 312, 0, 300, "nvlink3"},
		{"A100-SXM-80GB", 80, 2039, 312, 0, 300, "nvlink3"},
		{"L40S", 48, 864, 362, 733, 32, "pcie4"},
		{"B200", 180, 8000, 2250, 4500, 900, "nvlink5"},
		{"RTX4090", 23.52 * (1 << 30) / 1e9, 1008, 165, 330, 32, "pcie4"},
		{"RTXPRO6000", 96, 1792, 504, 1008, 64, "pcie5"},
		{"MI300X", 192, 5300, 1307, 2615, 64, "xgmi"},
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.005*want }
	for _, tc := range tests {
		g, err := LookupGPU(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if !near(g.MemoryGB, tc.memGB) || !near(g.BandwidthGBs, tc.bwGBs) || !near(g.BF16TFLOPs, tc.bf16) ||
			!near(g.FP8TFLOPs, tc.fp8) || g.LinkGBs != tc.link || g.Link != tc.kind {
			t.Errorf("%s = %+v\nwant memory %v GB, %v GB/s, BF16 %v, FP8 %v TFLOP/s, %s %v GB/s",
				tc.name, g, tc.memGB, tc.bwGBs, tc.bf16, tc.fp8, tc.kind, tc.link)
		}
	}
}

// The accelerators derive.go builds the built-in profiles for must be in
// the table with the same figures.
func TestGPUsMatchDeriveAccelerators(t *testing.T) {
	for _, a := range accelerators {
		g, err := LookupGPU(a.Name)
		if err != nil {
			t.Errorf("derive.go accelerator %s: %v", a.Name, err)
			continue
		}
		if g.MemoryGB != a.MemoryGB || math.Abs(g.BandwidthGBs-a.BandwidthTBs*1000) > 1 || math.Abs(g.BF16TFLOPs-a.BF16TFLOPs) > 1 {
			t.Errorf("%s: table %v GB, %v GB/s, %v TFLOP/s; derive.go %v GB, %v TB/s, %v TFLOP/s",
				a.Name, g.MemoryGB, g.BandwidthGBs, g.BF16TFLOPs, a.MemoryGB, a.BandwidthTBs, a.BF16TFLOPs)
		}
	}
}

func TestTPLinkGBs(t *testing.T) {
	h100, _ := LookupGPU("H100")
	mi300x, _ := LookupGPU("MI300X")
	tests := []struct {
		g    GPU
		tp   int
		want float64
	}{
		{h100, 1, 450}, {h100, 8, 450},
		{mi300x, 1, 64}, {mi300x, 2, 64}, {mi300x, 4, 192}, {mi300x, 8, 448},
	}
	for _, tc := range tests {
		if got := tc.g.TPLinkGBs(tc.tp); got != tc.want {
			t.Errorf("%s.TPLinkGBs(%d) = %v, want %v", tc.g.Name, tc.tp, got, tc.want)
		}
	}
}
