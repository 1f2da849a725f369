package trace

import (
	"bytes"
	"io"
	"math"
	"time"
)

// Job is one GPU task (pod) of Alibaba's GPU cluster trace (openb_pod_list_*,
// format alibaba-pod). It is not a request: it asks for whole or shared GPUs
// for a lifetime.
type Job struct {
	Name      string
	CPUMilli  int // CPU request, milli-cores
	MemoryMiB int
	GPUs      int // num_gpu
	// GPUMilli is the share of each GPU, 1000 = a whole one; below 1000
	// (with GPUs == 1) the pod shares a GPU.
	GPUMilli int
	// GPUSpec lists the GPU models the job may run on; empty means any.
	GPUSpec []string
	QoS     string // LS, BE, Burstable, Guaranteed
	Phase   string // pod_phase: Running, Failed, Pending, Succeeded

	// Created, Deleted and Scheduled are relative to the trace's start.
	Created time.Duration
	Deleted time.Duration
	// Scheduled is meaningful only when ScheduledKnown: the trace leaves
	// scheduled_time empty for pods that never ran (the Pending ones).
	Scheduled      time.Duration
	ScheduledKnown bool

	Line int // the job's line in its file
}

// Wait is how long the job waited to be scheduled; ok is false when it
// never was.
func (j *Job) Wait() (d time.Duration, ok bool) {
	if !j.ScheduledKnown {
		return 0, false
	}
	return j.Scheduled - j.Created, true
}

// Lifetime is deletion minus creation.
func (j *Job) Lifetime() time.Duration { return j.Deleted - j.Created }

// Node is one machine of a cluster inventory: Alibaba's openb_node_list_*
// (format alibaba-node) or the spot-GPU trace's node_info_df.csv
// (alibaba-spot-node).
type Node struct {
	Name      string
	GPUs      int
	Model     string // GPU model; "" for a CPU-only node
	CPUMilli  int    // milli-cores (alibaba-spot-node gives whole cores: ×1000)
	MemoryMiB int    // 0 when the list does not say (alibaba-spot-node)
	Line      int
}

// JobReader streams the jobs of a pod list. Next reuses the Job it is
// given, GPUSpec's backing array included.
type JobReader struct {
	base
	strs [3]intern
}

// OpenJobs opens a GPU job list (alibaba-pod), gzipped or not.
func OpenJobs(path string, opts Options) (*JobReader, error) {
	src, err := openLineSource(path, opts.SkipBadRows)
	if err != nil {
		return nil, err
	}
	b, err := newBase(src, opts, kindJobs)
	if err != nil {
		src.close()
		return nil, err
	}
	return &JobReader{base: b}, nil
}

// NewJobReader reads a GPU job list from r; name is used in messages.
func NewJobReader(r io.Reader, name string, opts Options) (*JobReader, error) {
	src, err := newLineSource(r, name, opts.SkipBadRows)
	if err != nil {
		return nil, err
	}
	b, err := newBase(src, opts, kindJobs)
	if err != nil {
		return nil, err
	}
	return &JobReader{base: b}, nil
}

// maxSeconds keeps whole-second times within a time.Duration.
const maxSeconds = math.MaxInt64 / int64(time.Second)

func (b *base) seconds(c int, name string) (time.Duration, *RowError) {
	raw := b.field(c)
	n, ok := parseUint(raw)
	if !ok || n > uint64(maxSeconds) {
		return 0, b.src.rowError(name, raw, "non-negative integer seconds")
	}
	return time.Duration(n) * time.Second, nil
}

func (b *base) count(c int, name string) (int, *RowError) {
	raw := b.field(c)
	n, ok := parseCount(raw)
	if !ok {
		return 0, b.src.rowError(name, raw, wantCount)
	}
	return n, nil
}

// Next reads the next job into j, returning io.EOF after the last. Jobs are
// not required to be sorted.
func (r *JobReader) Next(j *Job) error {
	return r.nextRow(func(line []byte) *RowError {
		*j = Job{GPUSpec: j.GPUSpec[:0], Line: r.src.line}
		return r.parse(line, j)
	})
}

func (r *JobReader) parse(line []byte, j *Job) *RowError {
	if e := r.split(line); e != nil {
		return e
	}
	var e *RowError
	if j.Name = string(r.field(podName)); j.Name == "" {
		return r.src.rowError("name", nil, "a pod name")
	}
	if j.CPUMilli, e = r.count(podCPU, "cpu_milli"); e != nil {
		return e
	}
	if j.MemoryMiB, e = r.count(podMem, "memory_mib"); e != nil {
		return e
	}
	if j.GPUs, e = r.count(podGPUs, "num_gpu"); e != nil {
		return e
	}
	if j.GPUMilli, e = r.count(podGPUMilli, "gpu_milli"); e != nil {
		return e
	}
	if j.GPUMilli > 1000 {
		return r.src.rowError("gpu_milli", r.field(podGPUMilli), "0..1000 (thousandths of one GPU)")
	}
	if spec := r.field(podSpec); len(spec) > 0 {
		for m := range bytes.SplitSeq(spec, []byte{'|'}) {
			if len(m) == 0 {
				return r.src.rowError("gpu_spec", spec, "GPU models separated by | (like V100M16|V100M32), or empty")
			}
			j.GPUSpec = append(j.GPUSpec, r.strs[0].get(m))
		}
	}
	j.QoS = r.strs[1].get(r.field(podQoS))
	j.Phase = r.strs[2].get(r.field(podPhase))
	if j.Created, e = r.seconds(podCreated, "creation_time"); e != nil {
		return e
	}
	if j.Deleted, e = r.seconds(podDeleted, "deletion_time"); e != nil {
		return e
	}
	if j.Deleted < j.Created {
		return r.src.rowError("deletion_time", r.field(podDeleted), "no earlier than creation_time")
	}
	if len(r.field(podScheduled)) > 0 {
		if j.Scheduled, e = r.seconds(podScheduled, "scheduled_time"); e != nil {
			return e
		}
		if j.Scheduled < j.Created {
			return r.src.rowError("scheduled_time", r.field(podScheduled), "no earlier than creation_time, or empty")
		}
		j.ScheduledKnown = true
	}
	return nil
}

// NodeReader streams the nodes of a cluster inventory.
type NodeReader struct {
	base
	strs intern
}

// OpenNodes opens a node list (alibaba-node or alibaba-spot-node), gzipped
// or not.
func OpenNodes(path string, opts Options) (*NodeReader, error) {
	src, err := openLineSource(path, opts.SkipBadRows)
	if err != nil {
		return nil, err
	}
	b, err := newBase(src, opts, kindNodes)
	if err != nil {
		src.close()
		return nil, err
	}
	return &NodeReader{base: b}, nil
}

// NewNodeReader reads a node list from r; name is used in messages.
func NewNodeReader(r io.Reader, name string, opts Options) (*NodeReader, error) {
	src, err := newLineSource(r, name, opts.SkipBadRows)
	if err != nil {
		return nil, err
	}
	b, err := newBase(src, opts, kindNodes)
	if err != nil {
		return nil, err
	}
	return &NodeReader{base: b}, nil
}

// Next reads the next node into n, returning io.EOF after the last.
func (r *NodeReader) Next(n *Node) error {
	return r.nextRow(func(line []byte) *RowError {
		*n = Node{Line: r.src.line}
		return r.parse(line, n)
	})
}

func (r *NodeReader) parse(line []byte, n *Node) *RowError {
	if e := r.split(line); e != nil {
		return e
	}
	var e *RowError
	if r.lay.f.name == FormatSpotNode {
		if n.Name = string(r.field(spotName)); n.Name == "" {
			return r.src.rowError("node_name", nil, "a node name")
		}
		n.Model = r.strs.get(r.field(spotModel))
		if n.GPUs, e = r.count(spotGPUs, "gpu_capacity_num"); e != nil {
			return e
		}
		cores, e := r.count(spotCPUs, "cpu_num")
		if e != nil {
			return e
		}
		if cores > maxCount/1000 {
			return r.src.rowError("cpu_num", r.field(spotCPUs), "a plausible core count")
		}
		n.CPUMilli = cores * 1000
		return nil
	}
	if n.Name = string(r.field(nodeName)); n.Name == "" {
		return r.src.rowError("sn", nil, "a node name")
	}
	n.Model = r.strs.get(r.field(nodeModel))
	if n.CPUMilli, e = r.count(nodeCPU, "cpu_milli"); e != nil {
		return e
	}
	if n.MemoryMiB, e = r.count(nodeMem, "memory_mib"); e != nil {
		return e
	}
	if n.GPUs, e = r.count(nodeGPUs, "gpu"); e != nil {
		return e
	}
	return nil
}
