package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Source is a node's GPUs: what they are and how they are doing. The NVML
// adapter implements it (NewNVML, Open); tests use fakes or go-nvml's mock
// servers through the adapter. Implementations are safe for concurrent use.
type Source interface {
	// Inventory says what the GPUs are. It fails when a GPU cannot say
	// even its name, UUID, memory or compute capability.
	Inventory() (Inventory, error)
	// Readings reads every GPU now, in index order. A reading a GPU does
	// not support (or that fails) is nil in its Reading; only a failure
	// to reach the GPUs at all is an error.
	Readings() ([]Reading, error)
	// Close releases the source (NVML's Shutdown).
	Close() error
}

// XIDWatcher is a Source that can also report XID errors as they happen
// (NVML's critical-error events).
type XIDWatcher interface {
	// WatchXIDs subscribes to XID errors, calls started once it has,
	// then calls fn for each XID error until ctx is done, and returns
	// nil. It returns an error at once when the GPUs cannot report XIDs
	// at all (ErrNoXIDEvents), or later if waiting fails.
	WatchXIDs(ctx context.Context, started func(), fn func(XID)) error
}

// XID is one XID error: the driver's code for a GPU fault (79: fallen off
// the bus, 48: double-bit ECC error, 13: graphics engine exception...).
type XID struct {
	GPU  int // index; -1 when the event named no GPU this source knows
	UUID string
	Code uint64
}

// ErrUnavailable is what every failure to reach NVML wraps: no driver,
// driver not loaded, or a build without cgo.
var ErrUnavailable = errors.New("NVML unavailable")

// ErrNoXIDEvents is what WatchXIDs returns when no GPU can report XIDs.
var ErrNoXIDEvents = errors.New("no GPU reports XID events")

// ErrClosed is what a closed Source answers.
var ErrClosed = errors.New("GPU source closed")

// unavailableError says why NVML cannot be reached, in one line, and is
// ErrUnavailable.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string        { return e.msg }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Inventory is what a node's GPUs are.
type Inventory struct {
	Driver string `json:"driver"`         // kernel driver, e.g. 550.54.15
	CUDA   string `json:"cuda,omitempty"` // newest CUDA the driver supports, e.g. 12.4
	NVML   string `json:"nvml,omitempty"` // e.g. 12.550.54.15
	GPUs   []GPU  `json:"gpus"`
}

// GPU is one device. Optional fields are empty (or nil) when the GPU or
// the driver does not report them.
type GPU struct {
	Index        int    `json:"index"`
	UUID         string `json:"uuid"`
	Name         string `json:"name"` // the product name, e.g. NVIDIA H100 80GB HBM3
	Architecture string `json:"architecture,omitempty"`
	PCIBusID     string `json:"pci_bus_id,omitempty"`
	MemoryBytes  uint64 `json:"memory_bytes"` // total framebuffer as NVML reports it
	// ComputeCapability is CUDA's major.minor, e.g. 9.0 for Hopper.
	ComputeCapability string `json:"compute_capability"`
	// MIG and ECC are "enabled" or "disabled" (the current mode).
	MIG string `json:"mig,omitempty"`
	ECC string `json:"ecc,omitempty"`
	// NVLink counts the links the GPU reports and those active; nil
	// without NVLink.
	NVLink *NVLink `json:"nvlink,omitempty"`
	// BandwidthGBs is the peak memory bandwidth in GB/s, from the memory
	// bus width and the maximum memory clock (double data rate); 0 when
	// either is unknown.
	BandwidthGBs float64 `json:"memory_bandwidth_gbs,omitempty"`
	// BusWidthBits and MaxMemClockMHz are what BandwidthGBs came from.
	BusWidthBits   int `json:"memory_bus_width_bits,omitempty"`
	MaxMemClockMHz int `json:"max_memory_clock_mhz,omitempty"`
}

// NVLink is a GPU's NVLink state.
type NVLink struct {
	Links  int `json:"links"`
	Active int `json:"active"`
}

// Reading is one GPU's live state. Nil fields were not available.
type Reading struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	// Utilization is the share of the last sample period during which a
	// kernel ran (NVML's GPU utilisation), 0 to 1.
	Utilization        *float64 `json:"utilization_ratio,omitempty"`
	MemoryUsedBytes    *float64 `json:"memory_used_bytes,omitempty"`
	MemoryTotalBytes   *float64 `json:"memory_total_bytes,omitempty"`
	PowerWatts         *float64 `json:"power_watts,omitempty"`
	TemperatureCelsius *float64 `json:"temperature_celsius,omitempty"`
}

// CUDAVersion formats NVML's CUDA driver version (1000·major + 10·minor,
// e.g. 12040) as major.minor ("12.4").
func CUDAVersion(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// Precisions are the scenario precisions a GPU of compute capability
// major.minor runs natively, widest first as twin/fleet lists them: fp16
// everywhere, bf16 from Ampere (8.0), fp8 from Ada and Hopper (8.9), fp4
// from Blackwell (10.0). Integer formats are left for the author to add.
func Precisions(major, minor int) []string {
	cc := major*10 + minor
	var p []string
	if cc >= 80 {
		p = append(p, "bf16")
	}
	p = append(p, "fp16")
	if cc >= 89 {
		p = append(p, "fp8")
	}
	if cc >= 100 {
		p = append(p, "fp4")
	}
	return p
}

// Bandwidth is the peak memory bandwidth in GB/s of a bus busBits wide at
// a maximum memory clock of clockMHz, double data rate: NVML reports HBM's
// and GDDR's clocks so that this gives the datasheet figure (H100 SXM:
// 5120 bits at 2619 MHz, 3352 GB/s; RTX 4090: 384 bits at 10501 MHz,
// 1008 GB/s). It is rounded to 0.1 GB/s.
func Bandwidth(busBits, clockMHz int) float64 {
	if busBits <= 0 || clockMHz <= 0 {
		return 0
	}
	return math.Round(float64(busBits)/8*float64(clockMHz)*2/1000*10) / 10
}

// AcceleratorName turns a product name into a scenario name: lower case,
// without "NVIDIA", words joined by hyphens ("NVIDIA H100 80GB HBM3" is
// h100-80gb-hbm3).
func AcceleratorName(product string) string {
	var words []string
	for _, w := range strings.FieldsFunc(strings.ToLower(product), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '.'
	}) {
		if w = strings.Trim(w, "."); w != "" && w != "nvidia" {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return "gpu"
	}
	return strings.Join(words, "-")
}

// computeCapability splits "9.0" into 9 and 0.
func computeCapability(cc string) (major, minor int) {
	fmt.Sscanf(cc, "%d.%d", &major, &minor)
	return major, minor
}

// Summary is the one-line description of the GPUs: "8 x NVIDIA H100 80GB
// HBM3, driver 550.54.15 (CUDA 12.4)".
func (inv Inventory) Summary() string {
	var parts []string
	for _, g := range groups(inv.GPUs) {
		parts = append(parts, fmt.Sprintf("%d x %s", len(g.gpus), g.gpus[0].Name))
	}
	if len(parts) == 0 {
		parts = []string{"no GPUs"}
	}
	s := strings.Join(parts, " + ") + ", driver " + inv.Driver
	if inv.CUDA != "" {
		s += " (CUDA " + inv.CUDA + ")"
	}
	return s
}

// group is the GPUs of one product, in index order.
type group struct {
	name string // accelerator name
	gpus []GPU
}

// groups splits GPUs by accelerator name, in order of first appearance.
func groups(gpus []GPU) []group {
	var out []group
	at := map[string]int{}
	for _, g := range gpus {
		name := AcceleratorName(g.Name)
		i, ok := at[name]
		if !ok {
			i = len(out)
			at[name] = i
			out = append(out, group{name: name})
		}
		out[i].gpus = append(out[i].gpus, g)
	}
	return out
}
