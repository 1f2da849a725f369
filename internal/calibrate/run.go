// Package calibrate fits the twin's step-time profile to measured serving
// runs and reports how faithfully the twin then reproduces them.
//
// A run is a set of requests with their measured timeline — queued,
// scheduled, first token, last token — plus, for vLLM runs, the engine's
// settings and a per-second time series. Fit turns a run into a
// latency.Profile by linear least squares (gonum); Replay runs the same
// arrivals and token counts through the twin and compares. Transfer scales a
// calibrated profile to another model or accelerator by the roofline, so one
// measured run informs pools that have none.
//
// It reads files and drives the twin; it must not be imported by the twin.
// Start with LoadRun, Fit and Replay.
package calibrate

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Request is one measured request. Times are seconds on one clock, with the
// first arrival at 0.
type Request struct {
	ID            string
	Input, Output int
	// Arrived is when the server queued it; Scheduled when the engine first
	// ran it; First and Last the first and last output tokens.
	Arrived, Scheduled, First, Last float64
}

// TTFT, TPOT, E2E and QueueWait, in seconds, by the definitions of the
// shared profiles README (P4).
func (r *Request) TTFT() float64      { return r.First - r.Arrived }
func (r *Request) E2E() float64       { return r.Last - r.Arrived }
func (r *Request) QueueWait() float64 { return r.Scheduled - r.Arrived }
func (r *Request) TPOT() float64 {
	if r.Output <= 1 {
		return 0
	}
	return (r.Last - r.First) / float64(r.Output-1)
}

// Engine is what a run says of the serving engine.
type Engine struct {
	Model            string // e.g. meta-llama/Llama-3.1-8B
	Version          string // e.g. 0.19.0
	TP, DP           int
	MaxSeqs          int
	MaxBatchedTokens int
	KVTokens         int    // measured capacity (num_gpu_blocks × block_size); 0 when not recorded
	GPU              string // from the hardware block or the run's folder name
}

// Tick is one second of the engine's own time series.
type Tick struct {
	T                float64
	Running, Waiting int
	KVPct            float64
}

// Run is a measured run.
type Run struct {
	Name     string
	Engine   Engine
	Requests []Request // in arrival order
	Series   []Tick
}

// LoadRun reads a vLLM run directory in the layout of
// shared/profiles/vllm_measured_llmservingsim/<GPU>_<model>/: meta.json,
// requests.jsonl and timeseries.csv.
func LoadRun(dir string) (*Run, error) {
	run := &Run{Name: filepath.Base(filepath.Clean(dir))}
	if err := run.loadMeta(filepath.Join(dir, "meta.json")); err != nil {
		return nil, err
	}
	if err := run.loadRequests(filepath.Join(dir, "requests.jsonl")); err != nil {
		return nil, err
	}
	if err := run.loadSeries(filepath.Join(dir, "timeseries.csv")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if run.Engine.GPU == "" {
		// The RTX PRO 6000 runs record no hardware block: the folder
		// name, <GPU>_<model>, is the only record of the device.
		if gpu, _, ok := strings.Cut(run.Name, "_"); ok {
			run.Engine.GPU = gpu
		}
	}
	return run, nil
}

func (run *Run) loadMeta(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	var m struct {
		Model   string `json:"model"`
		Version string `json:"vllm_version"`
		Engine  struct {
			TP               int `json:"tensor_parallel_size"`
			DP               int `json:"data_parallel_size"`
			MaxSeqs          int `json:"max_num_seqs"`
			MaxBatchedTokens int `json:"max_num_batched_tokens"`
		} `json:"engine_kwargs"`
		KV *struct {
			Tokens int `json:"num_kv_tokens"`
		} `json:"kv_cache"`
		Hardware *struct {
			Device string `json:"device_name"`
		} `json:"hardware"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("calibrate: %s: %w", path, err)
	}
	e := &run.Engine
	e.Model, e.Version = m.Model, m.Version
	e.TP, e.DP = max(m.Engine.TP, 1), max(m.Engine.DP, 1)
	e.MaxSeqs, e.MaxBatchedTokens = m.Engine.MaxSeqs, m.Engine.MaxBatchedTokens
	if m.KV != nil {
		e.KVTokens = m.KV.Tokens
	}
	if m.Hardware != nil {
		e.GPU = strings.ReplaceAll(strings.TrimPrefix(m.Hardware.Device, "NVIDIA GeForce "), " ", "")
	}
	var bad []string
	if e.MaxSeqs < 1 {
		bad = append(bad, fmt.Sprintf("engine_kwargs.max_num_seqs: got %d, want >= 1", e.MaxSeqs))
	}
	if e.MaxBatchedTokens < 1 {
		bad = append(bad, fmt.Sprintf("engine_kwargs.max_num_batched_tokens: got %d, want >= 1", e.MaxBatchedTokens))
	}
	if len(bad) > 0 {
		return fmt.Errorf("calibrate: %s: %s", path, strings.Join(bad, "; "))
	}
	return nil
}

// loadRequests reads requests.jsonl. The *_ts fields share one monotonic
// clock; arrival_time is wall-clock and is never mixed with them (README
// P4): queued_ts is the arrival.
func (run *Run) loadRequests(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r struct {
			ID        string   `json:"request_id"`
			Input     *int     `json:"input_toks"`
			Output    *int     `json:"output_toks"`
			Queued    *float64 `json:"queued_ts"`
			Scheduled *float64 `json:"scheduled_ts"`
			First     *float64 `json:"first_token_ts"`
			Last      *float64 `json:"last_token_ts"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("calibrate: %s:%d: %w", path, line, err)
		}
		if r.Input == nil || r.Output == nil || r.Queued == nil || r.Scheduled == nil || r.First == nil || r.Last == nil {
			return fmt.Errorf("calibrate: %s:%d: want input_toks, output_toks, queued_ts, scheduled_ts, first_token_ts and last_token_ts", path, line)
		}
		req := Request{ID: r.ID, Input: *r.Input, Output: *r.Output, Arrived: *r.Queued, Scheduled: *r.Scheduled,
			First: *r.First, Last: *r.Last}
		if err := req.check(); err != nil {
			return fmt.Errorf("calibrate: %s:%d: %w", path, line, err)
		}
		run.Requests = append(run.Requests, req)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("calibrate: %s: %w", path, err)
	}
	return run.normalize(path)
}

func (r *Request) check() error {
	switch {
	case r.Input < 1 || r.Output < 1:
		return fmt.Errorf("input %d, output %d tokens: want >= 1 each", r.Input, r.Output)
	case !(r.Arrived <= r.Scheduled && r.Scheduled <= r.First && r.First <= r.Last):
		return fmt.Errorf("times out of order: want arrival <= scheduled <= first token <= last token")
	}
	return nil
}

// normalize sorts by arrival and moves the clock so the first arrival is 0.
func (run *Run) normalize(path string) error {
	if len(run.Requests) == 0 {
		return fmt.Errorf("calibrate: %s: no requests", path)
	}
	slices.SortStableFunc(run.Requests, func(a, b Request) int {
		switch {
		case a.Arrived < b.Arrived:
			return -1
		case a.Arrived > b.Arrived:
			return 1
		}
		return 0
	})
	t0 := run.Requests[0].Arrived
	for i := range run.Requests {
		r := &run.Requests[i]
		r.Arrived -= t0
		r.Scheduled -= t0
		r.First -= t0
		r.Last -= t0
	}
	return nil
}

func (run *Run) loadSeries(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cr := csv.NewReader(f)
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("calibrate: %s: %w", path, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, need := range []string{"t", "running", "waiting", "kv_cache_pct"} {
		if _, ok := col[need]; !ok {
			return fmt.Errorf("calibrate: %s: no %q column (have %s)", path, need, strings.Join(header, ", "))
		}
	}
	line := 1
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		line++
		if err != nil {
			return fmt.Errorf("calibrate: %s:%d: %w", path, line, err)
		}
		num := func(name string) (float64, error) {
			v, err := strconv.ParseFloat(rec[col[name]], 64)
			if err != nil || math.IsNaN(v) {
				return 0, fmt.Errorf("calibrate: %s:%d: %s: got %q, want a number", path, line, name, rec[col[name]])
			}
			return v, nil
		}
		var tk Tick
		var vals [4]float64
		for i, name := range []string{"t", "running", "waiting", "kv_cache_pct"} {
			if vals[i], err = num(name); err != nil {
				return err
			}
		}
		tk.T, tk.Running, tk.Waiting, tk.KVPct = vals[0], int(vals[1]), int(vals[2]), vals[3]
		run.Series = append(run.Series, tk)
	}
}

// LoadRequests reads a generic log of measured requests, CSV with a header
// or JSONL, for calibrating from a gateway's own logs. Columns (keys):
// arrival (seconds), input_tokens, output_tokens, ttft (seconds), e2e
// (seconds), and optionally queue_wait (seconds). Without queue_wait the
// requests are taken as scheduled on arrival, so queueing is folded into
// TTFT; say so when comparing.
func LoadRequests(path string, engine Engine) (*Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	defer f.Close()
	run := &Run{Name: filepath.Base(path), Engine: engine}
	add := func(line int, get func(string) (float64, bool, error)) error {
		var v [6]float64
		var has [6]bool
		for i, k := range []string{"arrival", "input_tokens", "output_tokens", "ttft", "e2e", "queue_wait"} {
			x, ok, err := get(k)
			if err != nil {
				return fmt.Errorf("calibrate: %s:%d: %s: %w", path, line, k, err)
			}
			if !ok && i < 5 {
				return fmt.Errorf("calibrate: %s:%d: %s: missing; want arrival, input_tokens, output_tokens, ttft, e2e (seconds and tokens)", path, line, k)
			}
			v[i], has[i] = x, ok
		}
		r := Request{Input: int(v[1]), Output: int(v[2]), Arrived: v[0], Scheduled: v[0], First: v[0] + v[3], Last: v[0] + v[4]}
		if has[5] {
			r.Scheduled = v[0] + v[5]
		}
		if err := r.check(); err != nil {
			return fmt.Errorf("calibrate: %s:%d: %w", path, line, err)
		}
		run.Requests = append(run.Requests, r)
		return nil
	}
	if strings.HasSuffix(path, ".jsonl") || strings.HasSuffix(path, ".json") {
		sc := bufio.NewScanner(f)
		line := 0
		for sc.Scan() {
			line++
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			var obj map[string]any
			if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
				return nil, fmt.Errorf("calibrate: %s:%d: %w", path, line, err)
			}
			err := add(line, func(k string) (float64, bool, error) {
				x, ok := obj[k]
				if !ok || x == nil {
					return 0, false, nil
				}
				n, isNum := x.(float64)
				if !isNum {
					return 0, true, fmt.Errorf("got %v, want a number", x)
				}
				return n, true, nil
			})
			if err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("calibrate: %s: %w", path, err)
		}
	} else {
		cr := csv.NewReader(f)
		header, err := cr.Read()
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: %w", path, err)
		}
		col := map[string]int{}
		for i, h := range header {
			col[strings.TrimSpace(h)] = i
		}
		line := 1
		for {
			rec, err := cr.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			line++
			if err != nil {
				return nil, fmt.Errorf("calibrate: %s:%d: %w", path, line, err)
			}
			err = add(line, func(k string) (float64, bool, error) {
				i, ok := col[k]
				if !ok || strings.TrimSpace(rec[i]) == "" {
					return 0, false, nil
				}
				n, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
				if err != nil {
					return 0, true, fmt.Errorf("got %q, want a number", rec[i])
				}
				return n, true, nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	if err := run.normalize(path); err != nil {
		return nil, err
	}
	return run, nil
}
