package twin

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// arrival is the next request of a stream, before it becomes a request.
type arrival struct {
	at       time.Duration
	in, out  int
	blocks   []uint64      // prefix-block hashes; owned by the arrival
	tenant   int           // -1: the stream's
	class    int           // -1: the stream's
	model    int           // -1: the stream's
	deadline time.Duration // relative; 0: the class's
}

// source produces a stream's arrivals in time order. next returns false
// when the stream has ended, and an error when its input is bad (a trace
// row), which ends the run.
type source interface {
	next() (arrival, bool, error)
	close() error
}

// generator draws one synthetic stream's arrivals and token counts. Each
// stream has its own random streams, named after it, so adding a stream to a
// scenario does not change the draws of the others.
type generator struct {
	arr, tok *rand.Rand
	spec     *scenarios.Stream
	rate     float64 // mean requests per second
	shape    float64 // gamma shape k = 1/cv², 0 for Poisson
	start    time.Duration
	stop     time.Duration
	in, out  tokenDist
	last     time.Duration
}

func (g *generator) next() (arrival, bool, error) {
	t, ok := g.nextTime(g.last)
	if !ok {
		return arrival{}, false, nil
	}
	g.last = t
	in, out := g.tokens()
	return arrival{at: t, in: in, out: out, tenant: -1, class: -1, model: -1}, true, nil
}

func (g *generator) close() error { return nil }

func newGenerator(spec *scenarios.Stream, arr, tok *rand.Rand, duration time.Duration) *generator {
	g := &generator{arr: arr, tok: tok, spec: spec, rate: spec.Arrivals.Rate, start: spec.Start.D(), stop: spec.Stop.D(),
		in: newTokenDist(spec.InputTokens), out: newTokenDist(spec.OutputTokens)}
	if g.stop == 0 || g.stop > duration {
		g.stop = duration
	}
	if spec.Arrivals.Process == "gamma" && spec.Arrivals.CV > 0 {
		g.shape = 1 / (spec.Arrivals.CV * spec.Arrivals.CV)
	}
	return g
}

// factor is the diurnal modulation of the rate at t.
func (g *generator) factor(t time.Duration) float64 {
	d := g.spec.Diurnal
	if d == nil || d.Amplitude == 0 {
		return 1
	}
	period := d.Period.D()
	if period <= 0 {
		period = 24 * time.Hour
	}
	phase := 2 * math.Pi * float64(t-d.Peak.D()) / float64(period)
	return 1 + d.Amplitude*math.Cos(phase)
}

// nextTime returns the arrival after t, and false when the stream has
// ended.
func (g *generator) nextTime(t time.Duration) (time.Duration, bool) {
	if g.rate <= 0 {
		return 0, false
	}
	if t < g.start {
		t = g.start
	}
	amp := 0.0
	if g.spec.Diurnal != nil {
		amp = g.spec.Diurnal.Amplitude
	}
	for {
		var gap float64 // seconds at the peak rate
		peak := g.rate * (1 + amp)
		if g.shape > 0 {
			gap = gammaDraw(g.arr, g.shape) / (g.shape * peak)
		} else {
			gap = g.arr.ExpFloat64() / peak
		}
		t += time.Duration(gap * float64(time.Second))
		if t >= g.stop {
			return 0, false
		}
		// Thinning (Lewis and Shedler): keep the candidate with probability
		// rate(t)/peak. For Poisson arrivals this is exact; for gamma it
		// keeps the burstiness at the peak and thins it elsewhere.
		if amp == 0 || g.arr.Float64()*(1+amp) < g.factor(t) {
			return t, true
		}
	}
}

// tokens draws the input and output lengths of one request.
func (g *generator) tokens() (in, out int) {
	return g.in.draw(g.tok), g.out.draw(g.tok)
}

// tokenDist is a named distribution of token counts with its parameters
// prepared once (a lognormal's μ and σ cost two logarithms to derive).
type tokenDist struct {
	scenarios.Distribution
	mu, sigma float64 // lognormal
}

func newTokenDist(d scenarios.Distribution) tokenDist {
	t := tokenDist{Distribution: d}
	if d.Dist == "lognormal" && d.Mean > 0 {
		s2 := math.Log(1 + d.CV*d.CV)
		t.mu, t.sigma = math.Log(d.Mean)-s2/2, math.Sqrt(s2)
	}
	return t
}

// draw samples a token count, clipped to [min, max] and at least 1.
func (d *tokenDist) draw(r *rand.Rand) int {
	var v float64
	switch d.Dist {
	case "constant":
		v = d.Mean
	case "uniform":
		v = float64(d.Min) + r.Float64()*float64(d.Max-d.Min+1)
	case "exponential":
		v = r.ExpFloat64() * d.Mean
	case "lognormal":
		v = math.Exp(d.mu + d.sigma*r.NormFloat64())
	default:
		v = d.Mean
	}
	n := int(math.Round(v))
	if d.Dist == "uniform" {
		n = int(v)
	}
	if d.Max > 0 && n > d.Max {
		n = d.Max
	}
	if n < d.Min {
		n = d.Min
	}
	return max(n, 1)
}

// gammaDraw samples Gamma(k, 1) by Marsaglia and Tsang's method (2000),
// boosting shapes below 1 with Gamma(k) = Gamma(k+1)·U^(1/k).
func gammaDraw(r *rand.Rand, k float64) float64 {
	if k < 1 {
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		return gammaDraw(r, k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
