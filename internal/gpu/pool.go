package gpu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// Defaults of PoolOptions' zero fields.
const (
	DefaultProvider = "on-prem"
	// DefaultUsableFraction is vLLM's default gpu_memory_utilization.
	DefaultUsableFraction = 0.9
	// DefaultMaxBatch is vLLM's default max_num_seqs.
	DefaultMaxBatch = 256
)

// PoolOptions is what NVML cannot know about the pool a node's GPUs make:
// where it is, who provides it, and what it serves. Region, Runtime and
// Models must name entries of the scenario the fragment goes into.
type PoolOptions struct {
	// Pool names the pool; empty: <provider>-<accelerator>. On a node with
	// several kinds of GPU, each kind makes a pool, named Pool-<accelerator>.
	Pool     string
	Region   string
	Provider string // empty: DefaultProvider
	// Accelerator replaces the name derived from the product name (to
	// match a scenario's own, such as h100-sxm); one kind of GPU only.
	Accelerator    string
	Runtime        string
	Models         []string
	GPUsPerReplica int     // tensor-parallel degree; 0: 1
	MaxBatch       int     // 0: DefaultMaxBatch
	UsableFraction float64 // 0: DefaultUsableFraction
}

// Fragment is the scenario text for a node's GPUs: one accelerator and one
// pool for each kind of GPU, to paste under a scenario's accelerators: and
// pools:.
type Fragment struct {
	Accelerators []scenarios.Accelerator `yaml:"accelerators"`
	Pools        []scenarios.Pool        `yaml:"pools"`

	inv    Inventory
	opts   PoolOptions
	groups []group
}

// Fragment describes the inventory as scenario accelerators and pools.
func (inv Inventory) Fragment(o PoolOptions) (*Fragment, error) {
	if o.Provider == "" {
		o.Provider = DefaultProvider
	}
	if o.GPUsPerReplica == 0 {
		o.GPUsPerReplica = 1
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.UsableFraction == 0 {
		o.UsableFraction = DefaultUsableFraction
	}
	gs := groups(inv.GPUs)
	var errs []string
	switch {
	case len(gs) == 0:
		errs = append(errs, "no GPUs to describe")
	case o.Accelerator != "" && len(gs) > 1:
		names := make([]string, len(gs))
		for i, g := range gs {
			names[i] = g.name
		}
		errs = append(errs, fmt.Sprintf("one accelerator name given for %d kinds of GPU (%s); leave it out", len(gs), strings.Join(names, ", ")))
	}
	if o.GPUsPerReplica < 1 {
		errs = append(errs, fmt.Sprintf("gpus per replica: got %d, want >= 1", o.GPUsPerReplica))
	}
	if o.MaxBatch < 1 {
		errs = append(errs, fmt.Sprintf("max batch: got %d, want >= 1", o.MaxBatch))
	}
	if !(o.UsableFraction > 0 && o.UsableFraction <= 1) {
		errs = append(errs, fmt.Sprintf("usable fraction: got %g, want > 0 and <= 1", o.UsableFraction))
	}
	f := &Fragment{inv: inv, opts: o, groups: gs}
	for _, g := range gs {
		if o.GPUsPerReplica >= 1 && len(g.gpus)%o.GPUsPerReplica != 0 {
			errs = append(errs, fmt.Sprintf("gpus per replica %d: the %d %s GPUs do not divide into replicas of %d",
				o.GPUsPerReplica, len(g.gpus), g.name, o.GPUsPerReplica))
		}
		first := g.gpus[0]
		accel := g.name
		if o.Accelerator != "" {
			accel = o.Accelerator
		}
		major, minor := computeCapability(first.ComputeCapability)
		f.Accelerators = append(f.Accelerators, scenarios.Accelerator{
			Name:           accel,
			MemoryGiB:      math.Floor(float64(first.MemoryBytes)/(1<<30)*10) / 10, // never more than there is
			UsableFraction: o.UsableFraction,
			Precisions:     Precisions(major, minor),
			BandwidthGBs:   first.BandwidthGBs,
		})
		name := o.Pool
		switch {
		case name == "":
			name = o.Provider + "-" + accel
		case len(gs) > 1:
			name += "-" + accel
		}
		models := slices.Clone(o.Models)
		if models == nil {
			models = []string{}
		}
		f.Pools = append(f.Pools, scenarios.Pool{
			Name:           name,
			Region:         o.Region,
			Provider:       o.Provider,
			Accelerator:    accel,
			GPUsPerReplica: o.GPUsPerReplica,
			Replicas:       len(g.gpus) / max(o.GPUsPerReplica, 1),
			Runtime:        o.Runtime,
			Driver:         inv.Driver,
			Models:         models,
			MaxBatch:       o.MaxBatch,
		})
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return f, nil
}

// YAML is the fragment as scenario YAML, with comments that say where each
// value came from and which ones the author must still set.
func (f *Fragment) YAML() ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(f); err != nil {
		return nil, err
	}
	inv, o := f.inv, f.opts
	doc.HeadComment = strings.Join([]string{
		"fleetdrill inventory: " + inv.Summary(),
		"Paste the accelerators under a scenario's accelerators: and the pools under",
		"its pools:. region, runtime and models must name the scenario's own",
		"(--region, --runtime, --models); the runtime's min_driver must be <= " + inv.Driver + ".",
	}, "\n")
	accels, pools := value(&doc, "accelerators"), value(&doc, "pools")
	for i, g := range f.groups {
		first := g.gpus[0]
		a, p := accels.Content[i], pools.Content[i]
		// Short lists in flow style, as the library scenarios write
		// them; a block list would also misplace its line comment.
		value(a, "precisions").Style = yaml.FlowStyle
		value(p, "models").Style = yaml.FlowStyle
		a.HeadComment = describe(g)
		comment(a, "memory_gib", fmt.Sprintf("%d MiB as NVML reports it", first.MemoryBytes>>20))
		comment(a, "usable_fraction", "vLLM's default gpu_memory_utilization")
		comment(a, "precisions", "from compute capability "+first.ComputeCapability)
		if first.BandwidthGBs > 0 {
			comment(a, "bandwidth_gbs", fmt.Sprintf("%d-bit bus at %d MHz, double data rate (NVML)",
				first.BusWidthBits, first.MaxMemClockMHz))
		}
		if n := countMode(g.gpus, func(g GPU) string { return g.MIG }, "enabled"); n > 0 {
			p.HeadComment = fmt.Sprintf("MIG is enabled on %d of the %d GPUs: this pool counts whole GPUs, not MIG instances", n, len(g.gpus))
		}
		comment(p, "gpus_per_replica", "tensor-parallel degree (--gpus-per-replica)")
		comment(p, "replicas", fmt.Sprintf("%d GPUs / %d per replica", len(g.gpus), max(o.GPUsPerReplica, 1)))
		if inv.CUDA != "" {
			comment(p, "driver", "NVML; supports CUDA up to "+inv.CUDA)
		}
		comment(p, "max_batch", "vLLM's default max_num_seqs (--max-batch)")
		comment(p, "price_per_gpu_hour", "set: currency units per GPU-hour, for cost reports")
		comment(p, "cold_start", "set: time to load a model onto a replica")
		if o.Region == "" {
			comment(p, "region", "set: a region of the scenario (--region)")
		}
		if o.Runtime == "" {
			comment(p, "runtime", "set: a runtime of the scenario with min_driver <= "+inv.Driver+" (--runtime)")
		}
		if len(o.Models) == 0 {
			comment(p, "models", "set: models of the scenario it serves (--models)")
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// describe is the comment above an accelerator: what NVML says that the
// scenario schema has no field for.
func describe(g group) string {
	first := g.gpus[0]
	parts := []string{fmt.Sprintf("%d x %s", len(g.gpus), first.Name)}
	if first.Architecture != "" {
		parts = append(parts, first.Architecture)
	}
	parts = append(parts, "compute capability "+first.ComputeCapability)
	if s := modes(g.gpus, func(g GPU) string { return g.MIG }); s != "" {
		parts = append(parts, "MIG "+s)
	}
	if s := modes(g.gpus, func(g GPU) string { return g.ECC }); s != "" {
		parts = append(parts, "ECC "+s)
	}
	var links []string
	for _, gp := range g.gpus {
		if gp.NVLink != nil {
			links = append(links, fmt.Sprintf("%d/%d", gp.NVLink.Active, gp.NVLink.Links))
		}
	}
	switch {
	case len(links) == 0:
	case len(slices.Compact(slices.Clone(links))) == 1 && len(links) == len(g.gpus):
		parts = append(parts, "NVLink "+links[0]+" links active per GPU")
	default:
		parts = append(parts, "NVLink links active per GPU: "+strings.Join(links, " "))
	}
	return strings.Join(parts, ", ")
}

// modes summarises a mode over GPUs: "enabled", "disabled", or "enabled on
// 2 of 8" when they differ; "" when none reports it.
func modes(gpus []GPU, mode func(GPU) string) string {
	first, reported, same := "", 0, true
	for _, g := range gpus {
		m := mode(g)
		if m == "" {
			continue
		}
		if reported == 0 {
			first = m
		}
		same = same && m == first
		reported++
	}
	switch {
	case reported == 0:
		return ""
	case same && reported == len(gpus):
		return first
	}
	return fmt.Sprintf("enabled on %d of %d", countMode(gpus, mode, "enabled"), len(gpus))
}

func countMode(gpus []GPU, mode func(GPU) string, want string) int {
	n := 0
	for _, g := range gpus {
		if mode(g) == want {
			n++
		}
	}
	return n
}

// value returns the value of key in mapping m.
func value(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// comment sets the line comment of key's value in mapping m.
func comment(m *yaml.Node, key, text string) {
	if v := value(m, key); v != nil {
		v.LineComment = text
	}
}

// MarshalJSON writes the fragment as JSON with the scenario's key names,
// in the YAML's order (JSON is YAML, so this too loads as a scenario
// fragment).
func (f *Fragment) MarshalJSON() ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(struct {
		Accelerators []scenarios.Accelerator `yaml:"accelerators"`
		Pools        []scenarios.Pool        `yaml:"pools"`
	}{f.Accelerators, f.Pools}); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := nodeJSON(&buf, &doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// nodeJSON writes a YAML node tree (as yaml.Node.Encode makes it: no
// aliases, no documents) as JSON, keeping the order of mapping keys.
func nodeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			if err := nodeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := nodeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return fmt.Errorf("number %q has no JSON form", n.Value)
			}
			buf.WriteString(strconv.FormatFloat(f, 'f', -1, 64))
		case "!!bool":
			b, err := strconv.ParseBool(n.Value)
			if err != nil {
				return fmt.Errorf("bool %q: %w", n.Value, err)
			}
			buf.WriteString(strconv.FormatBool(b))
		case "!!null":
			buf.WriteString("null")
		default:
			s, _ := json.Marshal(n.Value)
			buf.Write(s)
		}
	default:
		return fmt.Errorf("YAML node kind %d has no JSON form", n.Kind)
	}
	return nil
}

// Document is what the agent serves on /inventory and `fleetdrill
// inventory --format json` prints: the inventory and its scenario fragment.
type Document struct {
	Inventory Inventory `json:"inventory"`
	Scenario  *Fragment `json:"scenario"`
}
