package anonymize

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/trace"
)

// Source is a stream of records: a Generic log reader, or a trace reader
// behind TraceSource, which redacts its errors.
type Source interface {
	// Next reads the next record into rec: io.EOF at the end, a
	// *RowError for a bad row after which reading can go on.
	Next(rec *trace.Record) error
	Close() error
}

// Optional Source methods Run and the report use.
type (
	// mapper says which input column feeds each output field.
	mapper interface{ Mapped() map[string]string }
	// dropper lists the input columns dropped, with the rows that had a
	// value in each, and how many more names went unlisted.
	dropper interface {
		Dropped() ([]ColumnCount, int)
	}
	// skipper reports rows a source skipped on its own: how many, and
	// the first few.
	skipper interface{ SkippedRows() (int, []RowError) }
	// absolute says the source's times are wall-clock instants made
	// relative to its first row, so the first row need not be the
	// earliest: Run then always rebases.
	absolute interface{ AbsoluteTimes() bool }
)

// Job is one anonymization: where the records come from, how to change
// them, and what to do with bad rows.
type Job struct {
	Input, Format, Output string // for the report only

	// Open opens the input; Run calls it twice when it rebases (once to
	// find the earliest arrival).
	Open func() (Source, error)

	Config Config
	// Rebase sets Config.Shift to the earliest arrival of the input, so
	// that it is at t=0. Run also does this, whatever Rebase says, for a
	// source with absolute times (a generic log with wall-clock times).
	Rebase bool
	// MaxDisorder is how far out of time order the input may be: records
	// are held back that long (in time) and written sorted, as the
	// canonical format requires. A record older than one already written
	// is a bad row. Gateways that log a request when it finishes need
	// about their longest request.
	MaxDisorder time.Duration
	// SkipBadRows skips and counts malformed rows instead of failing.
	SkipBadRows bool

	// Log, if not nil, gets skipped rows and warnings, one per line.
	// Nothing written to it holds a cell value.
	Log io.Writer
}

// MaxLoggedSkips is how many skipped rows Run logs and reports one by one;
// the count covers them all.
const MaxLoggedSkips = 10

// Run reads every record of job's input, anonymizes it and writes it to w
// in time order. Its error and its report never hold a cell value.
func Run(ctx context.Context, job Job, w RecordWriter) (*Report, error) {
	if job.MaxDisorder < 0 {
		return nil, fmt.Errorf("max disorder %v, want >= 0", job.MaxDisorder)
	}
	cfg := job.Config
	if _, err := New(cfg); err != nil { // fail before reading anything
		return nil, err
	}
	src, err := job.Open()
	if err != nil {
		return nil, err
	}
	defer func() { src.Close() }()
	rebase := job.Rebase
	if a, ok := src.(absolute); ok && a.AbsoluteTimes() {
		rebase = true
	}
	if rebase {
		earliest, err := earliest(ctx, src, job.SkipBadRows)
		if err != nil {
			return nil, err
		}
		cfg.Shift = earliest
		src.Close()
		again, err := job.Open()
		if err != nil {
			src = nopSource{}
			return nil, err
		}
		src = again
	}
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	cfg = a.Config()

	rep := &Report{Input: job.Input, Format: job.Format, Output: job.Output}
	skip := func(e *RowError) error {
		if !job.SkipBadRows {
			return e
		}
		rep.Rows.Skipped++
		if len(rep.Skips) < MaxLoggedSkips {
			rep.Skips = append(rep.Skips, *e)
			if job.Log != nil {
				fmt.Fprintf(job.Log, "anonymize: skipped %v\n", e)
			}
		}
		return nil
	}
	timeCol := FieldT
	if m, ok := src.(mapper); ok && m.Mapped()[FieldT] != "" {
		timeCol = m.Mapped()[FieldT]
	}

	var counts fieldCounts
	var rec, out trace.Record
	var held reorder
	written := time.Duration(math.MinInt64) // the last time written
	maxSeen := time.Duration(math.MinInt64)
	flush := func(upTo time.Duration) error {
		for held.Len() > 0 && held.items[0].rec.Time <= upTo {
			it := heap.Pop(&held).(item)
			if err := w.Write(&it.rec); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			counts.add(&it.rec)
			rep.Rows.Written++
			written = it.rec.Time
		}
		return nil
	}
	for n := uint64(0); ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		err := src.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			var re *RowError
			if !errors.As(err, &re) {
				return nil, err
			}
			if err := skip(re); err != nil {
				return nil, err
			}
			continue
		}
		a.Anonymize(&out, &rec)
		// NB: the time is allow-listed, but these messages do not quote
		// it anyway: the column might be mis-mapped.
		if out.Time < 0 {
			if err := skip(&RowError{Line: rec.Line, Column: timeCol, Reason: "arrives before t=0; use --rebase"}); err != nil {
				return nil, err
			}
			continue
		}
		if out.Time < written {
			if err := skip(&RowError{Line: rec.Line, Column: timeCol,
				Reason: fmt.Sprintf("arrives more than --max-disorder (%v) before a later row", job.MaxDisorder)}); err != nil {
				return nil, err
			}
			continue
		}
		heap.Push(&held, item{rec: out.Clone(), seq: n})
		maxSeen = max(maxSeen, out.Time)
		if err := flush(maxSeen - job.MaxDisorder); err != nil {
			return nil, err
		}
	}
	if err := flush(math.MaxInt64); err != nil {
		return nil, err
	}
	if s, ok := src.(skipper); ok {
		n, first := s.SkippedRows()
		rep.Rows.Skipped += n
		for i := range first {
			if len(rep.Skips) < MaxLoggedSkips {
				rep.Skips = append(rep.Skips, first[i])
				if job.Log != nil {
					fmt.Fprintf(job.Log, "anonymize: skipped %v\n", &first[i])
				}
			}
		}
	}
	rep.Rows.Read = rep.Rows.Written + rep.Rows.Skipped
	rep.fill(src, &counts, cfg, rebase)
	if job.Log != nil && rep.Rows.Written > 0 {
		// A JSONL mapping with a typo fails no row: say so.
		for _, c := range append(slices.Clone(rep.Kept), rep.Hashed...) {
			if c.Column != "" && c.Rows == 0 {
				fmt.Fprintf(job.Log, "anonymize: warning: no row has a value in column %s (for %s)\n", quoteName(c.Column), c.Field)
			}
		}
	}
	return rep, nil
}

// earliest reads every record of src and returns the earliest arrival
// time (0 for an empty input). Bad rows fail it unless skipBad is set.
func earliest(ctx context.Context, src Source, skipBad bool) (time.Duration, error) {
	first := time.Duration(math.MaxInt64)
	var rec trace.Record
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		err := src.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			var re *RowError
			if errors.As(err, &re) && skipBad {
				continue
			}
			return 0, err
		}
		first = min(first, rec.Time)
	}
	if first == math.MaxInt64 {
		return 0, nil
	}
	return first, nil
}

// nopSource stands in for a source that failed to reopen.
type nopSource struct{}

func (nopSource) Next(*trace.Record) error { return io.EOF }
func (nopSource) Close() error             { return nil }

// RecordWriter is where anonymized records go: a *trace.Writer.
type RecordWriter interface {
	Write(*trace.Record) error
}

// reorder is a min-heap of held records by (time, arrival order): ties
// keep file order.
type reorder struct{ items []item }

type item struct {
	rec trace.Record
	seq uint64
}

func (h *reorder) Len() int { return len(h.items) }
func (h *reorder) Less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	return a.rec.Time < b.rec.Time || (a.rec.Time == b.rec.Time && a.seq < b.seq)
}
func (h *reorder) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *reorder) Push(x any)    { h.items = append(h.items, x.(item)) }
func (h *reorder) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	h.items[n] = item{}
	h.items = h.items[:n]
	return it
}

// fieldCounts counts the written records that have each output field.
type fieldCounts struct {
	model, class, deadline, service, blocks int
	ids                                     [numFields]int
}

func (c *fieldCounts) add(r *trace.Record) {
	inc := func(n *int, ok bool) {
		if ok {
			*n++
		}
	}
	inc(&c.model, r.Model != "")
	inc(&c.class, r.Class != "")
	inc(&c.deadline, r.Deadline > 0)
	inc(&c.service, r.Service > 0)
	inc(&c.blocks, len(r.Blocks) > 0)
	inc(&c.ids[Tenant], r.Tenant != "")
	inc(&c.ids[User], r.User != "")
	inc(&c.ids[Session], r.Session != "")
}
