package twin

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/trace"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// jobRecordReader is what a job trace source needs from internal/trace.
type jobRecordReader interface {
	Next(*trace.Job) error
	Close() error
}

var openJobTrace = func(path, format string, skipBad bool) (jobRecordReader, error) {
	return trace.OpenJobs(path, trace.Options{Format: format, SkipBadRows: skipBad})
}

// jobTraceSource replays a pod trace (Alibaba's openb_pod_list) as GPU
// jobs: a pod's creation is the submission, its GPU count the job's (a
// GPU-sharing pod, gpu_milli < 1000, takes one whole GPU: the twin does not
// share devices), its run time deletion − scheduled (deletion − creation
// when it was never scheduled), and its gpu_spec, mapped through gpu_map,
// the accelerators it allows. Pods without GPUs are not jobs: they are
// counted as filtered.
type jobTraceSource struct {
	spec   *scenarios.JobTrace
	report *JobReport
	rd     jobRecordReader
	rec    trace.Job
	path   string
}

func newJobTraceSource(p *plan, js *scenarios.JobStream, rep *JobReport) (*jobTraceSource, error) {
	path := p.sc.TracePath(js.Trace.Path)
	rd, err := openJobTrace(path, js.Trace.Format, js.Trace.SkipBadRows)
	if err != nil {
		return nil, err
	}
	return &jobTraceSource{spec: js.Trace, report: rep, rd: rd, path: path}, nil
}

func (s *jobTraceSource) next() (*job, bool, error) {
	start, window := s.spec.Start.D(), s.spec.Duration.D()
	scale := s.spec.TimeScale
	if scale <= 0 {
		scale = 1
	}
	for {
		err := s.rd.Next(&s.rec)
		if errors.Is(err, io.EOF) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", s.path, err)
		}
		rec := &s.rec
		w := rec.Created - start
		if w < 0 {
			continue
		}
		if window > 0 && w >= window {
			continue // pod lists need not be sorted: read on
		}
		if rec.GPUs == 0 {
			s.report.Filtered++
			continue
		}
		begin := rec.Created
		if rec.ScheduledKnown {
			begin = rec.Scheduled
		}
		work := max(rec.Deleted-begin, time.Second)
		var allowed []string
		for _, g := range rec.GPUSpec {
			if a, ok := s.spec.GPUMap[g]; ok {
				allowed = append(allowed, a)
			}
		}
		if len(rec.GPUSpec) > 0 && len(allowed) == 0 {
			allowed = []string{"(unmapped " + rec.GPUSpec[0] + ")"}
		}
		return &job{submitted: time.Duration(float64(w) * scale), gpus: rec.GPUs, allowed: allowed, work: work}, true, nil
	}
}

func (s *jobTraceSource) close() error { return s.rd.Close() }
