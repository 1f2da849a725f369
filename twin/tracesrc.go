package twin

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/trace"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// recordReader is what a trace source needs from internal/trace.
type recordReader interface {
	Next(*trace.Record) error
	Close() error
	Skipped() int
}

// traceSource replays a trace as a stream: a window of it, time-scaled, at
// a scaled rate, with mapping rules assigning tenants, classes and models.
//
// Rate scaling above 1 superposes k = ⌈rate_scale⌉ copies of the window,
// each shifted by a seeded offset of up to a minute (wrapping around the
// window's end, so no copy loses requests) and thinned to rate_scale/k; below
// 1 one copy is thinned. Short shifts keep the trace's minute-scale shape
// (its peaks stay where they were) while decorrelating the copies' bursts.
type traceSource struct {
	spec     *scenarios.TraceSource
	stream   *scenarios.Stream
	plan     *plan
	rng      *rand.Rand
	copies   copyHeap
	keep     float64 // probability of keeping a record of a copy
	start    time.Duration
	stop     time.Duration
	mapping  []mapRule
	anyShare bool
	skipped  *int // rows the first copy's reader skipped (skip_bad_rows)
}

type mapRule struct {
	when                 scenarios.MapMatch
	share                float64
	tenant, class, model int
}

// openTrace opens a trace file; a variable so that tests can substitute it.
var openTrace = func(path, format string, skipBad bool) (recordReader, error) {
	return trace.Open(path, trace.Options{Format: format, SkipBadRows: skipBad})
}

func newTraceSource(p *plan, sp streamPlan, rng *rand.Rand, duration time.Duration, skipped *int) (*traceSource, error) {
	spec := sp.spec.Trace
	ts := &traceSource{spec: spec, stream: sp.spec, plan: p, rng: rng, start: sp.spec.Start.D(), stop: sp.spec.Stop.D(),
		skipped: skipped}
	if ts.stop == 0 || ts.stop > duration {
		ts.stop = duration
	}
	for _, m := range sp.spec.Mapping {
		r := mapRule{when: m.When, share: m.Share, tenant: -1, class: -1, model: -1}
		if m.Tenant != "" {
			r.tenant = p.tenants[m.Tenant]
		}
		if m.Class != "" {
			r.class = p.classes[m.Class]
		}
		if m.Model != "" {
			r.model = p.models[m.Model]
		}
		ts.anyShare = ts.anyShare || m.Share > 0
		ts.mapping = append(ts.mapping, r)
	}
	scale := spec.RateScale
	if scale <= 0 {
		scale = 1
	}
	k := max(1, int(math.Ceil(scale)))
	ts.keep = scale / float64(k)

	path := p.sc.TracePath(spec.Path)
	window := spec.Duration.D()
	if window == 0 && k > 1 {
		// Wrapping copies needs the window's length: a quick first pass.
		span, err := traceSpan(path, spec)
		if err != nil {
			return nil, err
		}
		window = span + 1
	}
	for j := range k {
		var shift time.Duration
		if j > 0 {
			shift = time.Duration(rng.Int64N(int64(min(window, time.Minute))))
		}
		c, err := newCopy(path, spec, j, shift, window)
		c.skipped = ts.skipped
		if err != nil {
			ts.close()
			return nil, err
		}
		if err := c.advance(); err != nil {
			ts.close()
			return nil, err
		}
		if c.ok {
			heap.Push(&ts.copies, c)
		} else {
			c.close()
		}
	}
	return ts, nil
}

func (ts *traceSource) next() (arrival, bool, error) {
	scale := ts.spec.TimeScale
	if scale <= 0 {
		scale = 1
	}
	for ts.copies.Len() > 0 {
		c := ts.copies[0]
		rec := &c.rec
		at := ts.start + time.Duration(float64(c.t)*scale)
		keep := ts.keep >= 1 || ts.rng.Float64() < ts.keep
		a := arrival{at: at, in: max(rec.Input, 1), out: max(rec.Output, 1), tenant: -1, class: -1, model: -1,
			deadline: rec.Deadline}
		if keep && len(rec.Blocks) > 0 {
			a.blocks = append([]uint64(nil), rec.Blocks...)
		}
		if keep {
			ts.mapRecord(rec, &a)
		}
		if err := c.advance(); err != nil {
			return arrival{}, false, err
		}
		if c.ok {
			heap.Fix(&ts.copies, 0)
		} else {
			heap.Pop(&ts.copies)
			c.close()
		}
		if at >= ts.stop {
			return arrival{}, false, nil
		}
		if !keep {
			continue
		}
		return a, true, nil
	}
	return arrival{}, false, nil
}

// mapRecord applies the first matching rule. A request no rule takes (no
// match, or a draw past every share) keeps the stream's tenant, class and
// model.
func (ts *traceSource) mapRecord(rec *trace.Record, a *arrival) {
	if len(ts.mapping) == 0 {
		return
	}
	u := 0.0
	if ts.anyShare {
		u = ts.rng.Float64()
	}
	for _, r := range ts.mapping {
		if (r.when.Model != "" && r.when.Model != rec.Model) ||
			(r.when.Class != "" && r.when.Class != rec.Class) ||
			(r.when.Tenant != "" && r.when.Tenant != rec.Tenant) {
			continue
		}
		if r.share > 0 {
			if u >= r.share {
				u -= r.share
				continue
			}
		}
		a.tenant, a.class, a.model = r.tenant, r.class, r.model
		return
	}
}

func (ts *traceSource) close() error {
	var errs []error
	for _, c := range ts.copies {
		errs = append(errs, c.close())
	}
	ts.copies = nil
	return errors.Join(errs...)
}

// traceSpan reads a trace once for the time of its last record in the
// window.
func traceSpan(path string, spec *scenarios.TraceSource) (time.Duration, error) {
	rd, err := openTrace(path, spec.Format, spec.SkipBadRows)
	if err != nil {
		return 0, err
	}
	defer rd.Close()
	var rec trace.Record
	var last time.Duration
	for {
		err := rd.Next(&rec)
		if errors.Is(err, io.EOF) {
			return max(last-spec.Start.D(), 0), nil
		}
		if err != nil {
			return 0, err
		}
		if rec.Time >= spec.Start.D() {
			last = rec.Time
		}
	}
}

// traceCopy is one shifted copy of the window: records with window time in
// [W−shift, W) first, moved to [0, shift), then those in [0, W−shift),
// moved to [shift, W). Without a shift it is a plain pass.
type traceCopy struct {
	path   string
	spec   *scenarios.TraceSource
	idx    int
	shift  time.Duration
	window time.Duration // 0: unbounded (only without a shift)
	pass   int           // 0: the wrapped tail, 1: the rest
	rd     recordReader
	rec    trace.Record
	t      time.Duration // current record's time in the copy's window
	ok     bool

	// skipped receives the rows the reader skipped, from the first copy
	// only: the others read the same rows again.
	skipped *int
}

func newCopy(path string, spec *scenarios.TraceSource, idx int, shift, window time.Duration) (*traceCopy, error) {
	c := &traceCopy{path: path, spec: spec, idx: idx, shift: shift, window: window, pass: 1}
	if shift > 0 {
		c.pass = 0
	}
	return c, c.open()
}

func (c *traceCopy) open() error {
	rd, err := openTrace(c.path, c.spec.Format, c.spec.SkipBadRows)
	if err != nil {
		return err
	}
	c.rd = rd
	return nil
}

// advance moves to the copy's next record, setting ok.
func (c *traceCopy) advance() error {
	start := c.spec.Start.D()
	for {
		err := c.rd.Next(&c.rec)
		if errors.Is(err, io.EOF) {
			if c.pass == 0 {
				// Second pass: the window's head.
				c.rd.Close()
				c.pass = 1
				if err := c.open(); err != nil {
					return err
				}
				continue
			}
			c.ok = false
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.path, err)
		}
		w := c.rec.Time - start // time within the window
		if w < 0 {
			continue
		}
		if c.window > 0 && w >= c.window {
			if c.pass == 0 {
				// The rest of the file is past the window: go to pass 1.
				c.rd.Close()
				c.pass = 1
				if err := c.open(); err != nil {
					return err
				}
				continue
			}
			c.ok = false
			return nil
		}
		switch {
		case c.shift == 0:
			c.t = w
		case c.pass == 0:
			if w < c.window-c.shift {
				continue // pass 0 takes only the tail
			}
			c.t = w + c.shift - c.window
		default:
			if w >= c.window-c.shift {
				c.ok = false // pass 1 ends where the tail began
				return nil
			}
			c.t = w + c.shift
		}
		c.ok = true
		return nil
	}
}

func (c *traceCopy) close() error {
	if c.rd == nil {
		return nil
	}
	if c.idx == 0 && c.skipped != nil {
		*c.skipped += c.rd.Skipped()
	}
	err := c.rd.Close()
	c.rd = nil
	return err
}

// copyHeap orders copies by their next record's time, then by copy index,
// so that ties (Mooncake's quantised timestamps) keep file order within a
// copy and a fixed order across copies.
type copyHeap []*traceCopy

func (h copyHeap) Len() int { return len(h) }
func (h copyHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].idx < h[j].idx
}
func (h copyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *copyHeap) Push(x any)   { *h = append(*h, x.(*traceCopy)) }
func (h *copyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
