package trace

import (
	"cmp"
	"errors"
	"io"
	"slices"
	"time"
)

// Tally is how many rows have one value of a field.
type Tally[T cmp.Ordered] struct {
	Value T   `json:"value"`
	Count int `json:"count"`
}

// tallies sorts a count map by descending count, then value.
func tallies[T cmp.Ordered](m map[T]int) []Tally[T] {
	out := make([]Tally[T], 0, len(m))
	for v, c := range m {
		out = append(out, Tally[T]{v, c})
	}
	slices.SortFunc(out, func(a, b Tally[T]) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Value, b.Value)
	})
	return out
}

// JobStats summarise a GPU job list as shared/traces/README.md does for
// T7/T8. Times are whole seconds.
type JobStats struct {
	File    string `json:"file,omitempty"`
	Format  string `json:"format"`
	Jobs    int    `json:"jobs"`
	Skipped int    `json:"skipped_rows"`
	// Sorted reports whether creation times never decrease.
	Sorted bool `json:"sorted_by_creation"`
	// CreationSpan is max − min creation time; ArrivalsPerHour is Jobs
	// over it.
	CreationSpan    time.Duration `json:"-"`
	ArrivalsPerHour float64       `json:"arrivals_per_hour"`

	GPUs        []Tally[int]    `json:"num_gpu"`
	Sharing     int             `json:"gpu_sharing"` // num_gpu = 1 and gpu_milli < 1000
	Constrained int             `json:"gpu_spec_constrained"`
	QoS         []Tally[string] `json:"qos"`
	Phase       []Tally[string] `json:"phase"`
	Unscheduled int             `json:"unscheduled"` // empty scheduled_time
	Lifetime    Dist            `json:"lifetime_s"`  // deletion − creation
	Wait        Dist            `json:"wait_s"`      // scheduled − creation, scheduled jobs only
}

// ComputeJobStats reads r to the end and summarises it. It does not close r.
func ComputeJobStats(r *JobReader) (*JobStats, error) {
	s := &JobStats{Format: r.Format(), File: r.Name(), Sorted: true}
	gpus, qos, phase := map[int]int{}, map[string]int{}, map[string]int{}
	var life, wait counter
	var first, last, prev time.Duration
	var j Job
	for {
		err := r.Next(&j)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if s.Jobs == 0 || j.Created < first {
			first = j.Created
		}
		if s.Jobs == 0 || j.Created > last {
			last = j.Created
		}
		if s.Jobs > 0 && j.Created < prev {
			s.Sorted = false
		}
		prev = j.Created
		s.Jobs++
		gpus[j.GPUs]++
		if j.GPUs == 1 && j.GPUMilli < 1000 {
			s.Sharing++
		}
		if len(j.GPUSpec) > 0 {
			s.Constrained++
		}
		qos[j.QoS]++
		phase[j.Phase]++
		life.add(int64(j.Lifetime() / time.Second))
		if w, ok := j.Wait(); ok {
			wait.add(int64(w / time.Second))
		} else {
			s.Unscheduled++
		}
	}
	s.Skipped = r.Skipped()
	s.CreationSpan = last - first
	if s.CreationSpan > 0 {
		s.ArrivalsPerHour = float64(s.Jobs) / s.CreationSpan.Hours()
	}
	s.GPUs, s.QoS, s.Phase = tallies(gpus), tallies(qos), tallies(phase)
	s.Lifetime, s.Wait = life.dist(), wait.dist()
	return s, nil
}

// NodeStats summarise a node list as shared/traces/README.md does for
// T5/T6/T9.
type NodeStats struct {
	File    string       `json:"file,omitempty"`
	Format  string       `json:"format"`
	Nodes   int          `json:"nodes"`
	GPUs    int          `json:"gpus"`
	Skipped int          `json:"skipped_rows"`
	Models  []ModelCount `json:"models"`
	// GPUsPerNode and CoresPerNode tally nodes by GPU count and by whole
	// CPU cores.
	GPUsPerNode  []Tally[int] `json:"gpus_per_node"`
	CoresPerNode []Tally[int] `json:"cores_per_node"`
}

// ModelCount is the nodes and GPUs of one GPU model ("" for CPU-only nodes).
type ModelCount struct {
	Model string `json:"model"`
	Nodes int    `json:"nodes"`
	GPUs  int    `json:"gpus"`
}

// ComputeNodeStats reads r to the end and summarises it. It does not close r.
func ComputeNodeStats(r *NodeReader) (*NodeStats, error) {
	s := &NodeStats{Format: r.Format(), File: r.Name()}
	models := map[string]*ModelCount{}
	perNode, cores := map[int]int{}, map[int]int{}
	var n Node
	for {
		err := r.Next(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		s.Nodes++
		s.GPUs += n.GPUs
		m := models[n.Model]
		if m == nil {
			m = &ModelCount{Model: n.Model}
			models[n.Model] = m
		}
		m.Nodes++
		m.GPUs += n.GPUs
		perNode[n.GPUs]++
		cores[n.CPUMilli/1000]++
	}
	s.Skipped = r.Skipped()
	for _, m := range models {
		s.Models = append(s.Models, *m)
	}
	slices.SortFunc(s.Models, func(a, b ModelCount) int {
		if c := cmp.Compare(b.Nodes, a.Nodes); c != 0 {
			return c
		}
		return cmp.Compare(a.Model, b.Model)
	})
	s.GPUsPerNode, s.CoresPerNode = tallies(perNode), tallies(cores)
	return s, nil
}
