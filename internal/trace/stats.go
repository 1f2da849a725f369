package trace

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"time"
)

// Stats summarise a request trace the way shared/traces/README.md does, so
// that a reader can be checked against its published figures.
//
// Reading streams; Stats do not quite: exact nearest-rank percentiles keep a
// count per distinct value (O(distinct token counts), not O(N)), block
// statistics keep every distinct block id (O(distinct blocks)), PerMinute
// keeps one count per minute of the trace, and the sliding window holds the
// requests of one minute.
type Stats struct {
	File     string
	Format   string
	Requests int
	Skipped  int // rows skipped as malformed (Options.SkipBadRows)

	// Start is the wall-clock time of Time 0 (the first request) for
	// absolute formats; zero for relative ones.
	Start time.Time
	// Duration is the span between the first and the last arrival,
	// max(Time) - min(Time): not a count of wall-clock minutes.
	Duration time.Duration
	// Rate is Requests / Duration in requests per second (N, not N-1);
	// 0 when Duration is.
	Rate float64

	Input, Output Dist // token counts

	// PeakFixed is the busiest fixed one-minute bin, bin = ⌊(t − origin) /
	// 1 min⌋, the earliest on ties. The origin is the wall-clock minute of
	// the first request for absolute formats and the file's t = 0 for
	// relative ones. PeakSliding is max over i of #{j : tᵢ ≤ tⱼ < tᵢ + 1 min}:
	// windows that start at each request.
	PeakFixed, PeakSliding Peak
	// PerMinute counts requests per fixed bin from the origin; nil for
	// traces longer than maxPerMinuteBins minutes.
	PerMinute []int

	Blocks *BlockStats // nil when no request has prefix blocks
}

// Peak is a one-minute request count and where its minute starts, as Time.
type Peak struct {
	Count int
	Start time.Duration
}

// Dist is an exact summary of integer values. P50 and P99 are nearest-rank:
// the ⌈p/100·N⌉-th smallest value (1-based).
type Dist struct {
	Mean float64 `json:"mean"`
	Sum  int64   `json:"sum"`
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	P50  int64   `json:"p50"`
	P99  int64   `json:"p99"`
	N    int64   `json:"n"`
}

// BlockStats describe prefix-block reuse, in file order with an unlimited
// cache.
type BlockStats struct {
	Total    int64 `json:"total"`
	Distinct int64 `json:"distinct"`
	// SeenBefore is the fraction of blocks that appeared in an earlier
	// request; PrefixHit the fraction in each request's leading run of
	// such blocks (what a prefix cache can reuse).
	SeenBefore float64 `json:"seen_before"`
	PrefixHit  float64 `json:"prefix_hit"`
	PerRequest Dist    `json:"per_request"`
	// LengthMismatch counts requests whose len(blocks) is not
	// ⌈input/BlockTokens⌉.
	LengthMismatch int `json:"length_mismatch"`
}

// maxPerMinuteBins bounds Stats.PerMinute (a year of minutes).
const maxPerMinuteBins = 366 * 24 * 60

// ComputeStats reads r to the end and summarises it. It does not close r.
func ComputeStats(r *Reader) (*Stats, error) {
	var a statsAcc
	var rec Record
	for {
		err := r.Next(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if a.n == 0 {
			if start, ok := r.Start(); ok {
				// Fixed bins start at the first request's wall-clock minute.
				a.origin = -start.Sub(start.Truncate(time.Minute))
			}
		}
		a.add(&rec)
	}
	s := a.stats()
	s.File, s.Format, s.Skipped = r.Name(), r.Format(), r.Skipped()
	s.Start, _ = r.Start()
	return s, nil
}

// statsAcc accumulates Stats from records in arrival order.
type statsAcc struct {
	n           int
	first, last time.Duration
	in, out     counter
	origin      time.Duration // fixed bins start at origin + k minutes

	bin, binCount int
	fixed         Peak
	perMinute     []int
	tooLong       bool

	win     []time.Duration // arrivals of the open sliding windows
	head    int
	sliding Peak

	blocks                counter
	seen                  map[uint64]int // block -> request index of first sight
	total, reused, prefix int64
	hasBlocks             bool
	noBlocks              int64 // requests without blocks
	mismatch              int
}

func (a *statsAcc) add(rec *Record) {
	t := rec.Time
	if a.n == 0 || t < a.first {
		a.first = t
	}
	if a.n == 0 || t > a.last {
		a.last = t
	}
	a.n++
	a.in.add(int64(rec.Input))
	a.out.add(int64(rec.Output))

	// Fixed bins: arrivals are sorted, so bins only move forward.
	bin := int((t - a.origin) / time.Minute)
	if a.n == 1 || bin != a.bin {
		a.closeBin()
		a.bin, a.binCount = bin, 0
	}
	a.binCount++
	if !a.tooLong {
		if bin >= maxPerMinuteBins {
			a.tooLong, a.perMinute = true, nil
		} else {
			for len(a.perMinute) <= bin {
				a.perMinute = append(a.perMinute, 0)
			}
			a.perMinute[bin]++
		}
	}

	for a.head < len(a.win) && a.win[a.head]+time.Minute <= t {
		a.closeWindow()
	}
	a.win = append(a.win, t)

	a.addBlocks(rec)
}

func (a *statsAcc) closeBin() {
	if a.binCount > a.fixed.Count {
		a.fixed = Peak{Count: a.binCount, Start: time.Duration(a.bin)*time.Minute + a.origin}
	}
}

// closeWindow ends the sliding window that starts at the oldest open
// arrival: every arrival after it in win is less than a minute later.
func (a *statsAcc) closeWindow() {
	if c := len(a.win) - a.head; c > a.sliding.Count {
		a.sliding = Peak{Count: c, Start: a.win[a.head]}
	}
	a.head++
	if a.head >= 1024 && 2*a.head >= len(a.win) {
		a.win = a.win[:copy(a.win, a.win[a.head:])]
		a.head = 0
	}
}

func (a *statsAcc) addBlocks(rec *Record) {
	if len(rec.Blocks) == 0 {
		if rec.Input > 0 {
			a.mismatch++
		}
		a.noBlocks++
		return
	}
	if !a.hasBlocks {
		a.hasBlocks = true
		a.seen = make(map[uint64]int)
	}
	if len(rec.Blocks) != (rec.Input+BlockTokens-1)/BlockTokens {
		a.mismatch++
	}
	a.blocks.add(int64(len(rec.Blocks)))
	cur := a.n // 1-based request index
	leading := true
	for _, h := range rec.Blocks {
		first, ok := a.seen[h]
		if !ok {
			a.seen[h] = cur
		}
		if ok && first < cur {
			a.reused++
			if leading {
				a.prefix++
			}
		} else {
			leading = false
		}
	}
	a.total += int64(len(rec.Blocks))
}

func (a *statsAcc) stats() *Stats {
	a.closeBin()
	for a.head < len(a.win) {
		a.closeWindow()
	}
	s := &Stats{
		Requests:    a.n,
		Input:       a.in.dist(),
		Output:      a.out.dist(),
		PeakFixed:   a.fixed,
		PeakSliding: a.sliding,
		PerMinute:   a.perMinute,
	}
	if a.n > 0 {
		s.Duration = a.last - a.first
	}
	if s.Duration > 0 {
		s.Rate = float64(a.n) / s.Duration.Seconds()
	}
	if a.hasBlocks {
		a.blocks.addN(0, a.noBlocks)
		s.Blocks = &BlockStats{
			Total:          a.total,
			Distinct:       int64(len(a.seen)),
			SeenBefore:     float64(a.reused) / float64(a.total),
			PrefixHit:      float64(a.prefix) / float64(a.total),
			PerRequest:     a.blocks.dist(),
			LengthMismatch: a.mismatch,
		}
	}
	return s
}

// counter keeps exact counts per distinct value, for nearest-rank
// percentiles.
type counter struct {
	counts     map[int64]int64
	n, sum     int64
	minv, maxv int64
}

func (c *counter) add(v int64) { c.addN(v, 1) }

// addN adds k copies of v.
func (c *counter) addN(v, k int64) {
	if k == 0 {
		return
	}
	if c.counts == nil {
		c.counts = make(map[int64]int64)
	}
	if c.n == 0 || v < c.minv {
		c.minv = v
	}
	if c.n == 0 || v > c.maxv {
		c.maxv = v
	}
	c.counts[v] += k
	c.n += k
	c.sum += k * v
}

func (c *counter) dist() Dist {
	if c.n == 0 {
		return Dist{}
	}
	values := make([]int64, 0, len(c.counts))
	for v := range c.counts {
		values = append(values, v)
	}
	slices.Sort(values)
	return Dist{
		Mean: float64(c.sum) / float64(c.n),
		Sum:  c.sum,
		Min:  c.minv,
		Max:  c.maxv,
		P50:  c.nearestRank(values, 50),
		P99:  c.nearestRank(values, 99),
		N:    c.n,
	}
}

// nearestRank returns the ⌈p/100·N⌉-th smallest value.
func (c *counter) nearestRank(sorted []int64, p int64) int64 {
	rank := (p*c.n + 99) / 100
	var cum int64
	for _, v := range sorted {
		cum += c.counts[v]
		if cum >= rank {
			return v
		}
	}
	return sorted[len(sorted)-1]
}

// MarshalJSON writes durations in seconds and the start in RFC 3339.
func (s Stats) MarshalJSON() ([]byte, error) {
	type peak struct {
		Count  int     `json:"count"`
		StartS float64 `json:"start_s"`
		Wall   string  `json:"start_wall,omitempty"`
	}
	mk := func(p Peak) peak {
		out := peak{Count: p.Count, StartS: p.Start.Seconds()}
		if !s.Start.IsZero() {
			out.Wall = s.Start.Add(p.Start).Format(time.RFC3339Nano)
		}
		return out
	}
	var start string
	if !s.Start.IsZero() {
		start = s.Start.Format(time.RFC3339Nano)
	}
	return json.Marshal(struct {
		File        string      `json:"file,omitempty"`
		Format      string      `json:"format"`
		Requests    int         `json:"requests"`
		Skipped     int         `json:"skipped_rows"`
		Start       string      `json:"start,omitempty"`
		DurationS   float64     `json:"duration_s"`
		Rate        float64     `json:"rate_per_s"`
		Input       Dist        `json:"input_tokens"`
		Output      Dist        `json:"output_tokens"`
		PeakFixed   peak        `json:"peak_minute_fixed"`
		PeakSliding peak        `json:"peak_minute_sliding"`
		PerMinute   []int       `json:"per_minute,omitempty"`
		Blocks      *BlockStats `json:"blocks,omitempty"`
	}{s.File, s.Format, s.Requests, s.Skipped, start, s.Duration.Seconds(), s.Rate,
		s.Input, s.Output, mk(s.PeakFixed), mk(s.PeakSliding), s.PerMinute, s.Blocks})
}
