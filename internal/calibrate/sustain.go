package calibrate

// This file finds the twin's sustainable rate for an experiment: how far
// its load could rise before the twin's queue stops being bounded. A twin
// whose engine collapses at a load the real engine carried is wrong in a
// way latency errors at the measured load do not show.

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

const (
	// SustainableCap and SustainableFloor bound the search for the
	// sustainable factor: a twin still bounded at 16 × the offered load
	// has headroom enough for any verdict here (and replays there cost 16
	// times as much); one backed up at 1/16 of it is simply too slow.
	SustainableCap   = 16.0
	SustainableFloor = 1.0 / 16
	// sustainableSteps bisections of a factor-of-two bracket on a log
	// scale leave the factor known to 2^(1/32), 2.2 %.
	sustainableSteps = 5
)

// Sustainable is the twin's sustainable rate for one experiment: the
// largest factor f such that the experiment, with every stage's rate
// multiplied by f (same durations, request shapes and seed), does not back
// up on any stage in the twin (BenchPrediction.BackedUp's criterion).
type Sustainable struct {
	// Factor is the largest bounded factor found; it is below 1 exactly
	// when the replay at the experiment's own rates backs up.
	Factor float64
	// Rate is Factor × Offered, in requests per second.
	Rate float64
	// Offered is the experiment's highest stage rate.
	Offered float64
	// AtLeast: still bounded at SustainableCap, so Rate is a lower bound.
	// Below: backed up even at SustainableFloor (Factor is 0).
	AtLeast, Below bool
	// Replays the search ran.
	Replays int
}

// SustainableRate finds an experiment's sustainable rate with coefficients
// c: from f = 1 it doubles (or halves) f until the bounded/backed-up
// boundary is bracketed, then bisects the bracket on a log scale five times,
// which leaves the bounded factor it returns within 2^(1/32) (2.2 %) of one
// that backs up. Deterministic: every replay is seeded. The search assumes
// that a bounded factor's lower ones are bounded too; near the boundary a
// Poisson stage's queue grows or not by chance, which moves the answer by
// up to some 10 % for a small change of f (or of the seed). Replays that
// back up stop at the first stage end that does, but a bounded one near
// the boundary replays f times the experiment's requests: the search costs
// some 8 replays at the sustainable load (about 10 s on 2 cores for the 13
// sim-to-real experiments, whose plain replay takes 0.3 s). Below 1 it is
// cheaper than one replay at the offered load.
func SustainableRate(s *BenchSetup, c latency.Coeffs) (Sustainable, error) {
	res := Sustainable{Offered: offeredRate(s)}
	bounded := func(f float64) (bool, error) {
		res.Replays++
		p, err := replayBenchmark(scaleRates(s, f), c, true)
		if err != nil {
			return false, err
		}
		return len(p.BackedUp) == 0, nil
	}
	ok, err := bounded(1)
	if err != nil {
		return res, err
	}
	// Bracket: lo bounded, hi = 2·lo backed up.
	lo, hi := 1.0, 1.0
	if ok {
		for hi = 2; ; hi *= 2 {
			if hi > SustainableCap {
				res.Factor, res.Rate, res.AtLeast = lo, lo*res.Offered, true
				return res, nil
			}
			if ok, err = bounded(hi); err != nil {
				return res, err
			} else if !ok {
				break
			}
			lo = hi
		}
	} else {
		for lo = 0.5; ; lo /= 2 {
			if lo < SustainableFloor {
				res.Below = true
				return res, nil
			}
			if ok, err = bounded(lo); err != nil {
				return res, err
			} else if ok {
				break
			}
			hi = lo
		}
	}
	for range sustainableSteps {
		mid := math.Sqrt(lo * hi)
		if ok, err = bounded(mid); err != nil {
			return res, err
		} else if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	res.Factor, res.Rate = lo, lo*res.Offered
	return res, nil
}

// offeredRate is an experiment's highest stage rate.
func offeredRate(s *BenchSetup) float64 {
	r := 0.0
	for _, st := range s.Workload.Stages {
		r = max(r, st.Rate)
	}
	return r
}

// scaleRates returns a copy of s with every stage's rate multiplied by f.
func scaleRates(s *BenchSetup, f float64) *BenchSetup {
	c := *s
	c.Workload.Stages = slices.Clone(s.Workload.Stages)
	for i := range c.Workload.Stages {
		c.Workload.Stages[i].Rate *= f
	}
	return &c
}

// BenchSustainable is one experiment's sustainable rate in a score.
type BenchSustainable struct {
	Experiment string `json:"experiment"`
	// Offered is the highest stage rate (requests/s); Sustainable the
	// twin's sustainable rate; Headroom their ratio (Sustainable.Factor).
	Offered     float64 `json:"offered_rate"`
	Sustainable float64 `json:"sustainable_rate"`
	Headroom    float64 `json:"headroom"`
	// AtLeast: the twin was still bounded at the search's cap, so the rate
	// is a lower bound.
	AtLeast bool `json:"sustainable_at_least,omitempty"`
	// MeasuredKeptUp: every measured stage's TTFT mean is under 5 s.
	MeasuredKeptUp bool `json:"measured_kept_up"`
	// Collapses: the twin backs up where the engine kept up, by the
	// stage-end criterion at the offered load (BenchScore.BackedUpNames) or
	// because a stage the engine kept up with runs faster than the twin's
	// sustainable rate.
	Collapses bool `json:"collapses"`
	Replays   int  `json:"replays"`
}

// AddSustainable finds experiments' sustainable rates (in parallel, with
// the coefficients the score ran with) and adds them to the score: with
// all, every experiment's; without, only those of the experiments whose
// replay at the offered load backed up, whose search stays below 1× and is
// cheap. setups are the ones the score was computed on, in the same order.
func (sc *BenchScore) AddSustainable(ctx context.Context, setups []*BenchSetup, all bool) error {
	out := make([]Sustainable, len(setups))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, s := range setups {
		if !all && len(sc.Predictions[i].BackedUp) == 0 {
			continue
		}
		c := BuiltinCoeffs(s)
		if sc.Coeffs != nil {
			c = *sc.Coeffs
		}
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var err error
			if out[i], err = SustainableRate(s, c); err != nil {
				return fmt.Errorf("sustainable rate: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	sc.Sustainable = nil
	for i, s := range setups {
		r := out[i]
		if r.Replays == 0 {
			continue // not searched
		}
		b := BenchSustainable{Experiment: s.Name, Offered: r.Offered, Sustainable: round4(r.Rate),
			Headroom: round4(r.Factor), AtLeast: r.AtLeast, MeasuredKeptUp: true, Replays: r.Replays,
			Collapses: slices.Contains(sc.BackedUpNames, s.Name)}
		measured := false
		for st, m := range s.Measured {
			ttft, ok := m["ttft_mean"]
			if !ok {
				continue
			}
			measured = true
			keptUp := ttft < measuredBackedUpMS
			b.MeasuredKeptUp = b.MeasuredKeptUp && keptUp
			if n, err := strconv.Atoi(st); err == nil && n >= 0 && n < len(s.Workload.Stages) &&
				keptUp && !r.AtLeast && r.Rate < s.Workload.Stages[n].Rate {
				b.Collapses = true
			}
		}
		b.MeasuredKeptUp = b.MeasuredKeptUp && measured
		sc.Sustainable = append(sc.Sustainable, b)
	}
	return nil
}

// Collapsed returns the experiments where the twin backs up though the
// engine kept up: BackedUpNames, and with AddSustainable's figures also
// those whose sustainable rate is below a stage the engine kept up with.
func (sc *BenchScore) Collapsed() []string {
	names := slices.Clone(sc.BackedUpNames)
	for _, b := range sc.Sustainable {
		if b.Collapses && !slices.Contains(names, b.Experiment) {
			names = append(names, b.Experiment)
		}
	}
	return names
}
