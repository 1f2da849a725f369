package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Format names, as Options.Format and Reader.Format spell them.
const (
	FormatAzure     = "azure"
	FormatMooncake  = "mooncake"
	FormatBurstGPT  = "burstgpt"
	FormatGenAI     = "alibaba-genai"
	FormatCanonical = "canonical"

	FormatPod      = "alibaba-pod"
	FormatNode     = "alibaba-node"
	FormatSpotNode = "alibaba-spot-node"
)

// kind is what a format's rows are: requests (Reader), GPU jobs (JobReader)
// or nodes (NodeReader).
type kind int

const (
	kindRequests kind = iota
	kindJobs
	kindNodes
)

func (k kind) String() string {
	switch k {
	case kindJobs:
		return "a GPU job (pod) list"
	case kindNodes:
		return "a GPU node list"
	}
	return "a request trace"
}

func (k kind) opener() string {
	switch k {
	case kindJobs:
		return "OpenJobs"
	case kindNodes:
		return "OpenNodes"
	}
	return "Open"
}

type column struct {
	name     string
	optional bool
}

// format describes one trace layout. CSV formats list their columns; a
// file's header may order them freely and add others (ignored), but must
// have every required one. JSONL formats have no header: keys identify them.
type format struct {
	name  string
	kind  kind
	jsonl bool
	cols  []column
	// header is the layout as the source publishes it, for messages.
	header string
}

// Column positions in each CSV format's cols.
const (
	azTime, azInput, azOutput = 0, 1, 2

	bgTime, bgModel, bgInput, bgOutput, bgTotal, bgLogType, bgSession = 0, 1, 2, 3, 4, 5, 6

	gaTime, gaType, gaStatus, gaExec, gaGroup, gaPrompt, gaModel = 0, 1, 2, 3, 4, 5, 6

	podName, podCPU, podMem, podGPUs, podGPUMilli, podSpec, podQoS, podPhase, podCreated, podDeleted, podScheduled = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10

	nodeName, nodeCPU, nodeMem, nodeGPUs, nodeModel = 0, 1, 2, 3, 4

	spotModel, spotGPUs, spotCPUs, spotName = 0, 1, 2, 3
)

func req(names ...string) []column {
	cols := make([]column, len(names))
	for i, n := range names {
		cols[i] = column{name: n}
	}
	return cols
}

var formats = []*format{
	{name: FormatAzure, cols: req("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
		header: "TIMESTAMP,ContextTokens,GeneratedTokens"},
	{name: FormatBurstGPT, cols: []column{
		{name: "Timestamp"}, {name: "Model", optional: true}, {name: "Request tokens"}, {name: "Response tokens"},
		{name: "Total tokens", optional: true}, {name: "Log Type", optional: true}, {name: "Session ID", optional: true}},
		header: "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"},
	{name: FormatGenAI, cols: []column{
		{name: "gmt_create"}, {name: "predict_type"}, {name: "predict_status", optional: true}, {name: "exec_time_seconds"},
		{name: "groupId", optional: true}, {name: "prompt_length"}, {name: "checkpoint_model_version_id", optional: true}},
		header: "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora"},
	{name: FormatMooncake, jsonl: true,
		header: `{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]}`},
	{name: FormatCanonical, jsonl: true,
		header: `{"t": 0.5, "input": 100, "output": 20, ...}`},
	{name: FormatPod, kind: kindJobs, cols: []column{
		{name: "name"}, {name: "cpu_milli"}, {name: "memory_mib"}, {name: "num_gpu"}, {name: "gpu_milli"},
		{name: "gpu_spec", optional: true}, {name: "qos", optional: true}, {name: "pod_phase", optional: true},
		{name: "creation_time"}, {name: "deletion_time"}, {name: "scheduled_time", optional: true}},
		header: "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"},
	{name: FormatNode, kind: kindNodes, cols: req("sn", "cpu_milli", "memory_mib", "gpu", "model"),
		header: "sn,cpu_milli,memory_mib,gpu,model"},
	{name: FormatSpotNode, kind: kindNodes, cols: req("gpu_model", "gpu_capacity_num", "cpu_num", "node_name"),
		header: "gpu_model,gpu_capacity_num,cpu_num,node_name"},
}

func formatByName(name string) (*format, error) {
	for _, f := range formats {
		if f.name == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("unknown trace format %q: want one of %s", name, strings.Join(FormatNames(), ", "))
}

// FormatNames lists every format name a reader accepts, sorted.
func FormatNames() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.name
	}
	sort.Strings(names)
	return names
}

// layout is a format bound to one file: where each of its columns sits in
// the file's rows.
type layout struct {
	f      *format
	col    []int // format column -> field index, -1 when an optional one is absent
	fields int   // fields per row
}

// splitHeader splits a CSV header line on commas, trimming spaces around
// each name.
func splitHeader(line []byte) []string {
	parts := bytes.Split(line, []byte{','})
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = string(bytes.Trim(p, ` "`))
	}
	return names
}

// bind maps f's columns onto a header; ok=false when a required one is
// missing.
func (f *format) bind(names []string) (layout, bool) {
	l := layout{f: f, col: make([]int, len(f.cols)), fields: len(names)}
	for i, c := range f.cols {
		l.col[i] = -1
		for j, n := range names {
			if n == c.name {
				l.col[i] = j
				break
			}
		}
		if l.col[i] < 0 && !c.optional {
			return layout{}, false
		}
	}
	return l, true
}

func (f *format) required() string {
	var names []string
	for _, c := range f.cols {
		if !c.optional {
			names = append(names, c.name)
		}
	}
	return strings.Join(names, ",")
}

// detect reads the first line of s and chooses the format: the one forced
// by name, or the one whose header (CSV) or keys (JSONL) the line carries.
// For JSONL the line is pushed back: it is the first record.
func detect(s *lineSource, forced string) (layout, error) {
	var want *format
	if forced != "" {
		f, err := formatByName(forced)
		if err != nil {
			return layout{}, err
		}
		want = f
	}
	line, err := s.next()
	if err != nil {
		if errors.Is(err, io.EOF) && want != nil && want.jsonl {
			return layout{f: want}, nil // an empty JSONL trace has no records
		}
		if errors.Is(err, io.EOF) {
			return layout{}, fmt.Errorf("%s: empty file: want %s", s.name, expected(want))
		}
		return layout{}, err
	}
	if line[0] == '{' {
		if want != nil && want.jsonl {
			s.pushBack()
			return layout{f: want}, nil
		}
		if want == nil {
			if f := detectJSONL(line); f != nil {
				s.pushBack()
				return layout{f: f}, nil
			}
		}
	} else if want == nil || !want.jsonl {
		names := splitHeader(line)
		for _, f := range formats {
			if f.jsonl || (want != nil && f != want) {
				continue
			}
			if l, ok := f.bind(names); ok {
				return l, nil
			}
		}
	}
	return layout{}, fmt.Errorf("%s:%d: unrecognised trace: got %s, want %s", s.name, s.line, quote(line), expected(want))
}

// expected describes what a file of format f (every format when nil) starts
// with, for messages.
func expected(f *format) string {
	describe := func(f *format) string {
		if f.jsonl {
			return fmt.Sprintf("%s JSONL like %s", f.name, f.header)
		}
		return fmt.Sprintf("%s header %q (required columns %s)", f.name, f.header, f.required())
	}
	if f != nil {
		return describe(f)
	}
	parts := make([]string, len(formats))
	for i, f := range formats {
		parts[i] = describe(f)
	}
	return "one of: " + strings.Join(parts, "; ")
}

// detectJSONL tells Mooncake from canonical JSONL by the first object's
// keys; nil when it is neither.
func detectJSONL(line []byte) *format {
	var sc jsonScanner
	sc.reset(line)
	has := map[string]bool{}
	ok := sc.object(func(key []byte) bool {
		has[string(key)] = true
		return sc.skipValue()
	})
	if !ok {
		return nil
	}
	switch {
	case has["timestamp"] && has["input_length"] && has["output_length"]:
		f, _ := formatByName(FormatMooncake)
		return f
	case has["t"] && has["input"] && has["output"]:
		f, _ := formatByName(FormatCanonical)
		return f
	}
	return nil
}

// Detect opens path and returns its format (as Options.Format would force
// it, or as detected), reading only the first line.
func Detect(path string, opts Options) (string, error) {
	src, err := openLineSource(path, false)
	if err != nil {
		return "", err
	}
	defer src.close()
	lay, err := detect(src, opts.Format)
	if err != nil {
		return "", err
	}
	return lay.f.name, nil
}

// IsRequestFormat reports whether a format holds requests (read with Open)
// rather than GPU jobs (OpenJobs) or nodes (OpenNodes).
func IsRequestFormat(name string) bool {
	f, err := formatByName(name)
	return err == nil && f.kind == kindRequests
}
