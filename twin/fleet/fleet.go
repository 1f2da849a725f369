// Package fleet describes the simulated fleet's capabilities and answers the
// compatibility question at the heart of routing: can pool P serve model M,
// and was that pairing tested? A refusal says why, in operator language
// ("driver 535.104 < 550.54 required by vllm-0.6.3").
//
// It is pure data and arithmetic: it must not import sim, the scheduler, or
// anything that does I/O. Start with Registry.Check.
package fleet

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// Accelerator is an accelerator type.
type Accelerator struct {
	Name           string
	MemoryGiB      float64
	UsableFraction float64
	Precisions     []string
}

// Runtime is a serving engine build.
type Runtime struct {
	Name      string
	Server    string
	Version   string
	CUDA      string
	MinDriver string
}

// Model is one model version.
type Model struct {
	Name          string
	ParametersB   float64
	Layers        int
	KVHeads       int
	HeadDim       int
	Precision     string
	ContextLength int
	Runtimes      []string
	MinDriver     string
	Quality       float64
	Fallbacks     []string
}

// Pool is a set of identical replicas.
type Pool struct {
	Name           string
	Region         string
	Accelerator    string
	GPUsPerReplica int
	Runtime        string
	Driver         string
	Models         []string
	// Profiles holds the measured profile for each tested model.
	Profiles map[string]latency.Profile
	// Service marks a request-level service-time pool (no batching model);
	// its pairings count as tested.
	Service bool
}

// MinKVTokens is the KV cache a replica must have room for, beyond the
// weights, for a pairing to count as servable: one full 4k-token request.
// A replica that can hold the weights but not one request is useless.
const MinKVTokens = 4096

// Registry holds the fleet's catalogue.
type Registry struct {
	accels   map[string]Accelerator
	runtimes map[string]Runtime
	models   map[string]Model
}

// NewRegistry builds a registry from the catalogue.
func NewRegistry(accels []Accelerator, runtimes []Runtime, models []Model) *Registry {
	r := &Registry{
		accels:   make(map[string]Accelerator, len(accels)),
		runtimes: make(map[string]Runtime, len(runtimes)),
		models:   make(map[string]Model, len(models)),
	}
	for _, a := range accels {
		r.accels[a.Name] = a
	}
	for _, rt := range runtimes {
		r.runtimes[rt.Name] = rt
	}
	for _, m := range models {
		r.models[m.Name] = m
	}
	return r
}

// Model returns a model by name.
func (r *Registry) Model(name string) (Model, bool) {
	m, ok := r.models[name]
	return m, ok
}

// Verdict is the answer to "can pool P serve model M?".
type Verdict struct {
	Servable bool
	Tested   bool     // a measured profile exists (or the pool is a service-time pool)
	Reasons  []string // why not servable; empty when servable
	// KVTokens is the KV capacity per replica in tokens (measured when the
	// profile gives it, otherwise derived from memory).
	KVTokens int64
}

func (v Verdict) String() string {
	switch {
	case !v.Servable:
		return "incompatible: " + strings.Join(v.Reasons, "; ")
	case !v.Tested:
		return "compatible, untested"
	default:
		return "compatible, tested"
	}
}

// precisionBytes is the storage size of one weight or KV element.
var precisionBytes = map[string]float64{
	"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5,
}

// Precisions lists the precisions the registry knows, widest first.
var Precisions = []string{"fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"}

// PrecisionBytes returns the storage size in bytes of one weight or KV
// element in precision p.
func PrecisionBytes(p string) (float64, bool) {
	b, ok := precisionBytes[p]
	return b, ok
}

// Check answers whether pool p can serve model name, and why not.
func (r *Registry) Check(p *Pool, name string) Verdict {
	var v Verdict
	m, ok := r.models[name]
	if !ok {
		v.Reasons = append(v.Reasons, fmt.Sprintf("model %s is not in the catalogue", name))
		return v
	}
	if !slices.Contains(p.Models, name) {
		v.Reasons = append(v.Reasons, fmt.Sprintf("pool %s does not list %s among its models", p.Name, name))
	}
	rt, rtOK := r.runtimes[p.Runtime]
	if !rtOK {
		v.Reasons = append(v.Reasons, fmt.Sprintf("runtime %s is not in the catalogue", p.Runtime))
	} else {
		if !slices.Contains(m.Runtimes, rt.Name) {
			v.Reasons = append(v.Reasons, fmt.Sprintf("runtime %s is not one %s accepts (%s)",
				rt.Name, m.Name, strings.Join(m.Runtimes, ", ")))
		}
		if rt.MinDriver != "" && CompareVersions(p.Driver, rt.MinDriver) < 0 {
			v.Reasons = append(v.Reasons, fmt.Sprintf("driver %s < %s required by %s", p.Driver, rt.MinDriver, rt.Name))
		}
	}
	if m.MinDriver != "" && CompareVersions(p.Driver, m.MinDriver) < 0 {
		v.Reasons = append(v.Reasons, fmt.Sprintf("driver %s < %s required by %s", p.Driver, m.MinDriver, m.Name))
	}
	a, aOK := r.accels[p.Accelerator]
	if !aOK {
		v.Reasons = append(v.Reasons, fmt.Sprintf("accelerator %s is not in the catalogue", p.Accelerator))
	} else {
		if !slices.Contains(a.Precisions, m.Precision) {
			v.Reasons = append(v.Reasons, fmt.Sprintf("%s does not support %s (supports %s)",
				a.Name, m.Precision, strings.Join(a.Precisions, ", ")))
		}
		kv, why := kvCapacity(a, m, p)
		if why != "" {
			v.Reasons = append(v.Reasons, why)
		}
		v.KVTokens = kv
	}
	prof, tested := p.Profiles[name]
	if tested && prof.KVTokens > 0 {
		v.KVTokens = int64(prof.KVTokens)
	}
	v.Tested = tested || p.Service
	v.Servable = len(v.Reasons) == 0
	return v
}

// Fit sizes model m on a replica of gpus accelerators a: the KV tokens left
// after the weights, and the smallest number of GPUs that holds the weights
// plus MinKVTokens of cache. The scenario validator and the registry both
// use it, so a scenario that validates is one the registry can serve.
func Fit(a Accelerator, m Model, gpus int) (kvTokens int64, minGPUs int, ok bool) {
	bytes, known := precisionBytes[m.Precision]
	perToken := latency.KVBytesPerToken(m.Layers, m.KVHeads, m.HeadDim, 1, 1) * bytes
	perGPU := a.MemoryGiB * a.UsableFraction * gib
	if !known || perToken <= 0 || perGPU <= 0 {
		return 0, 0, false
	}
	need := m.ParametersB*1e9*bytes + float64(MinKVTokens)*perToken
	minGPUs = int(math.Ceil(need / perGPU))
	free := perGPU*float64(gpus) - m.ParametersB*1e9*bytes
	if free < float64(MinKVTokens)*perToken {
		return 0, minGPUs, false
	}
	return int64(free / perToken), minGPUs, true
}

const gib = 1 << 30

// kvCapacity returns the KV tokens a replica of p can hold for m after its
// weights, or a reason when the weights and a minimum cache do not fit.
func kvCapacity(a Accelerator, m Model, p *Pool) (int64, string) {
	bytes, ok := precisionBytes[m.Precision]
	if !ok {
		return 0, fmt.Sprintf("unknown precision %s", m.Precision)
	}
	if latency.KVBytesPerToken(m.Layers, m.KVHeads, m.HeadDim, 1, 1) <= 0 {
		return 0, fmt.Sprintf("model %s has no KV geometry (layers, kv_heads, head_dim)", m.Name)
	}
	kv, minGPUs, fits := Fit(a, m, p.GPUsPerReplica)
	if !fits {
		weights := m.ParametersB * 1e9 * bytes
		usable := a.MemoryGiB * a.UsableFraction * gib * float64(p.GPUsPerReplica)
		need := float64(MinKVTokens) * latency.KVBytesPerToken(m.Layers, m.KVHeads, m.HeadDim, 1, 1) * bytes
		return 0, fmt.Sprintf("%s weights (%.0f GiB) plus a %d-token KV cache (%.1f GiB) exceed %d×%s usable memory (%.0f GiB); want >= %d GPUs",
			m.Name, weights/gib, MinKVTokens, need/gib, p.GPUsPerReplica, a.Name, usable/gib, minGPUs)
	}
	return kv, ""
}

// CompareVersions compares dotted numeric versions ("550.54.15" vs "535.104"),
// component by component; missing components count as zero. Non-numeric
// components compare as strings, so the order is total and deterministic.
func CompareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		x, y := "0", "0"
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		xi, errx := strconv.Atoi(x)
		yi, erry := strconv.Atoi(y)
		if errx == nil && erry == nil {
			if xi != yi {
				if xi < yi {
					return -1
				}
				return 1
			}
			continue
		}
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}
