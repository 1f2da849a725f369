package calibrate

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// The fit recovers the twin's step-time model,
//
//	step = base + per_seq·B + per_prefill_token·P + per_kv_token·K,
//
// from request timelines alone. Two kinds of interval give linear equations
// in the four coefficients:
//
//   - A request's decode, from first to last token, is exactly out−1 steps.
//     Its duration is n·base + per_seq·ΣB + per_kv·ΣK + per_prefill·ΣP over
//     those steps; with steps spread evenly, ΣB ≈ n·B̄ and ΣK ≈ n·K̄ for the
//     time averages B̄ (requests in the batch) and K̄ (KV tokens they hold,
//     growing linearly through each decode), and ΣP is the prefill work of
//     every request whose prefill overlaps the interval, prorated by the
//     overlap. Dividing by n gives an equation for the request's TPOT.
//   - A request's prefill, from scheduled to first token, is m steps, one
//     per chunk of the token budget (max_num_batched_tokens). It
//     identifies the prefill cost directly.
//
// Rows are weighted by 1/duration, so the fit minimises relative error, the
// way errors are reported; coefficients are kept non-negative by an active
// set (a negative one is pinned to zero and the rest refitted), since a
// negative cost would be fitting noise.

// Fit is a calibrated profile with how well it fits.
type Fit struct {
	Profile latency.Profile
	Engine  Engine
	// Rows are the equations used: decode intervals and prefill intervals.
	DecodeRows, PrefillRows int
	// Residuals, relative to each interval's measured duration: RMS and
	// median absolute, for each kind of interval.
	DecodeRMSRel, DecodeMedianRel   float64
	PrefillRMSRel, PrefillMedianRel float64
	// Pinned names the coefficients the active set held at zero.
	Pinned []string
}

var coefNames = [4]string{"step_base_us", "per_seq_us", "per_prefill_token_us", "per_kv_token_us"}

// FitProfile fits the step-time profile of run.
func FitProfile(run *Run) (*Fit, error) {
	reqs := run.Requests
	budget := float64(max(run.Engine.MaxBatchedTokens, 1))
	var rows [][4]float64 // base, B, P, K multipliers, in steps (× µs coefficients)
	var ys []float64      // interval durations, µs
	var kinds []bool      // true: decode row
	for i := range reqs {
		r := &reqs[i]
		if r.Output >= 3 && r.Last > r.First {
			n := float64(r.Output - 1)
			b, k, p := load(reqs, r.First, r.Last)
			rows = append(rows, [4]float64{n, n * b, p, n * k})
			ys = append(ys, (r.Last-r.First)*1e6)
			kinds = append(kinds, true)
		}
		if r.First > r.Scheduled {
			b, k, p := load(reqs, r.Scheduled, r.First)
			// Its prefill takes one step per chunk of the token budget.
			// (Counting steps by a co-running decoder's token rate would
			// overcount: prefill steps are longer than the average step.)
			m := math.Max(1, math.Ceil(float64(r.Input)/budget))
			rows = append(rows, [4]float64{m, m * b, p, m * k})
			ys = append(ys, (r.First-r.Scheduled)*1e6)
			kinds = append(kinds, false)
		}
	}
	if len(rows) < 8 {
		return nil, fmt.Errorf("calibrate: %s: %d usable intervals, want at least 8 (requests with 3+ output tokens)", run.Name, len(rows))
	}
	coef, pinned, err := nnls(rows, ys)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %s: %w", run.Name, err)
	}
	f := &Fit{Engine: run.Engine}
	for _, j := range pinned {
		f.Pinned = append(f.Pinned, coefNames[j])
	}
	f.Profile = latency.Profile{StepBase: coef[0], PerSeq: coef[1], PerPrefillToken: coef[2], PerKVToken: coef[3],
		MaxBatchedTokens: run.Engine.MaxBatchedTokens, KVTokens: run.Engine.KVTokens,
		Source: fmt.Sprintf("fleetdrill calibrate %s (vLLM %s, %d requests)", run.Name, run.Engine.Version, len(reqs))}
	var dec, pre []float64
	for i, row := range rows {
		pred := row[0]*coef[0] + row[1]*coef[1] + row[2]*coef[2] + row[3]*coef[3]
		rel := (pred - ys[i]) / ys[i]
		if kinds[i] {
			dec = append(dec, rel)
		} else {
			pre = append(pre, rel)
		}
	}
	f.DecodeRows, f.PrefillRows = len(dec), len(pre)
	f.DecodeRMSRel, f.DecodeMedianRel = rms(dec), medianAbs(dec)
	f.PrefillRMSRel, f.PrefillMedianRel = rms(pre), medianAbs(pre)
	return f, nil
}

// load returns, over [a, b], the time-averaged number of requests in the
// batch, the time-averaged KV tokens held by decoding requests, and the
// prefill tokens processed (prorated by overlap).
func load(reqs []Request, a, b float64) (batch, kv, prefill float64) {
	span := b - a
	if span <= 0 {
		return 0, 0, 0
	}
	for i := range reqs {
		q := &reqs[i]
		if q.Arrived > b {
			break // sorted by arrival: nobody later is in the interval
		}
		// In the batch from scheduled to last token.
		if o := overlap(a, b, q.Scheduled, q.Last); o > 0 {
			batch += o / span
		}
		// Decoding: KV grows from input to input+output.
		if o := overlap(a, b, q.First, q.Last); o > 0 && q.Last > q.First {
			lo, hi := math.Max(a, q.First), math.Min(b, q.Last)
			mid := (lo + hi) / 2
			held := float64(q.Input) + float64(q.Output)*(mid-q.First)/(q.Last-q.First)
			kv += held * o / span
		}
		// Prefill work, spread over scheduled → first token.
		switch {
		case q.First > q.Scheduled:
			if o := overlap(a, b, q.Scheduled, q.First); o > 0 {
				prefill += float64(q.Input) * o / (q.First - q.Scheduled)
			}
		case q.First >= a && q.First <= b:
			prefill += float64(q.Input)
		}
	}
	return batch, kv, prefill
}

func overlap(a, b, c, d float64) float64 {
	return math.Max(0, math.Min(b, d)-math.Max(a, c))
}

// nnls solves min ‖W(Ax − y)‖ with x ≥ 0, W = diag(1/y), by an active set:
// solve by least squares (QR), pin the most negative coefficient to zero,
// repeat.
func nnls(rows [][4]float64, ys []float64) ([4]float64, []int, error) {
	free := []int{0, 1, 2, 3}
	var pinned []int
	for len(free) > 0 {
		A := mat.NewDense(len(rows), len(free), nil)
		y := mat.NewVecDense(len(rows), nil)
		for i, row := range rows {
			w := 1 / ys[i]
			for j, c := range free {
				A.Set(i, j, row[c]*w)
			}
			y.SetVec(i, 1)
		}
		var qr mat.QR
		qr.Factorize(A)
		var x mat.VecDense
		if err := qr.SolveVecTo(&x, false, y); err != nil {
			return [4]float64{}, nil, fmt.Errorf("least squares: %w", err)
		}
		worst, at := 0.0, -1
		for j := range free {
			if v := x.AtVec(j); v < worst {
				worst, at = v, j
			}
		}
		if at < 0 {
			var out [4]float64
			for j, c := range free {
				out[c] = x.AtVec(j)
			}
			return out, pinned, nil
		}
		pinned = append(pinned, free[at])
		free = append(free[:at:at], free[at+1:]...)
	}
	return [4]float64{}, pinned, fmt.Errorf("least squares: every coefficient came out negative")
}

func rms(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x * x
	}
	return math.Sqrt(s / float64(len(xs)))
}

func medianAbs(xs []float64) float64 {
	var sk stats.Sketch
	for _, x := range xs {
		sk.Add(math.Abs(x))
	}
	return sk.Quantile(0.5)
}
