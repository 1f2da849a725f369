package sched

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Latency outlier ejection, after Envoy's outlier detection: breakers see
// failures only, so a replica that answers every request — slowly — keeps
// its traffic forever. The core keeps, per replica, an EWMA of the time
// from dispatch to first token (ObserveLatency), and its peers' median of
// those EWMAs is the reference. A replica is judged on its recent samples:
// its window, the last MinSamples (since it last returned). It is an
// outlier when its EWMA, the median of its window and its latest sample
// are each slower than Factor × the reference and by at least MinExcess
// (or slower than MaxLatency, when set). It is then taken out of routing for
// BaseEjection × the times it was ejected (at most 10 base intervals, as
// Envoy's max_ejection_time defaults to ten of its base_ejection_time),
// never more than MaxShare of its pool and never its pool's last replica,
// and returns when the interval ends (Ready.WakeAt asks for the Tick).
//
// NB: the judgement needs the window, not the EWMA alone, because an
// average remembers: a brownout's slow samples kept a replica's EWMA over
// the bound for a dozen healthy samples after the brownout ended, and a
// replica spared during it (its pool's share already ejected, or busy)
// was ejected seconds after it ended, healthy (issue 36). A replica whose
// latest answer, or most of whose window, is healthy is never ejected for
// what it did before. The EWMA stays a condition too: five samples are
// noisy, and a healthy 70B replica's window of long prompts can sit over
// the bound where its average of about twenty does not. A brownout's added
// latency makes every sample slow, which ejects as soon as the EWMA
// crosses, as before. The window is counted in samples, not seconds: a
// replica a fault makes slow gets fewer of them, and a time window left it
// unjudged. The samples are kept in a ring per replica (Core.recent),
// MinSamples long.
//
// NB: the peers are every replica serving the same model, in every pool,
// not the replica's own pool: the commonest latency fault — a congested
// load balancer, a region's network — slows a whole pool at once, and a
// pool's own median then hides it. The price is that a pool on slower
// hardware (A100s beside H100s) must stay within Factor of the fleet's
// median, which the default 3 leaves room for; MaxShare bounds what a
// mistake costs.

// Outlier configures latency outlier ejection.
type Outlier struct {
	Disabled bool
	// Factor: a replica whose latency EWMA exceeds Factor × its peers'
	// median, and the median by MinExcess, is an outlier; default 3.
	Factor float64
	// MinExcess over the peers' median below which no replica is an
	// outlier, whatever the ratio; default 500ms. NB: a ratio of small
	// latencies is noise — an A100 answering in 120 ms beside H100s in
	// 30 ms is 4× slower and nobody's problem — and a quarter of the
	// MLPerf 2 s TTFT objective is a slowdown a user notices.
	MinExcess time.Duration
	// MaxLatency, when > 0, is an absolute bound: a replica whose EWMA
	// exceeds it is an outlier whatever its peers do. Off by default: a
	// fleet-wide overload would otherwise eject half of every pool.
	MaxLatency time.Duration
	// MinSamples a replica needs (since it last returned) before it is
	// judged: its window, the latest MinSamples samples, is what is
	// judged; default 5.
	MinSamples int
	// BaseEjection is the first ejection's length; the n-th lasts n times
	// as long; default 30s.
	BaseEjection time.Duration
	// MaxShare of a pool's replicas (for one model) that may be ejected
	// at once; default 0.5. At least one replica is always kept.
	MaxShare float64
}

// Defaults of Outlier, exported for the scenario layer's documentation.
const (
	DefaultOutlierFactor     = 3.0
	DefaultOutlierMinExcess  = 500 * time.Millisecond
	DefaultOutlierMinSamples = 5
	DefaultOutlierEjection   = 30 * time.Second
	DefaultOutlierMaxShare   = 0.5
	// DefaultLatencyHalfLife is Config.LatencyHalfLife's default.
	DefaultLatencyHalfLife = 30 * time.Second
)

// latencyWeight is the weight of a new sample in a replica's latency EWMA:
// about the last twenty requests, so one slow request (a long prompt, 3 s
// on a 70B) moves it by a tenth of its excess and ejects nothing, while a
// brownout's added 1.5 s crosses the bounds within four or five requests.
const latencyWeight = 0.1

// refRefresh is how often (model time) a model's peer median is read
// afresh from its peerSet (and whenever a replica joins or leaves the
// peers): the median an ejection is judged against is at most a second
// old, as it was when each read sorted the peers.
const refRefresh = time.Second

// Ejection is a replica taken out of routing as a latency outlier, or put
// back (Returned), for the timeline and the logs.
type Ejection struct {
	Replica  int
	At       time.Duration
	Until    time.Duration // when it returns; for an ejection
	Returned bool
	// Latency is the median first token (from dispatch) of the window
	// that ejected the replica, Reference its peers' median when it was
	// ejected (0 when the absolute bound ejected it without peers).
	Latency, Reference time.Duration
}

func (e Ejection) String() string {
	if e.Returned {
		return fmt.Sprintf("replica %d returns to routing", e.Replica)
	}
	s := fmt.Sprintf("replica %d ejected for %v: first token in %v", e.Replica, e.Until-e.At, e.Latency.Round(time.Millisecond))
	if e.Reference > 0 {
		s += fmt.Sprintf(", its peers' median %v", e.Reference.Round(time.Millisecond))
	}
	return s
}

type outlierState struct {
	lat       float64 // EWMA of dispatch to first token, seconds
	samples   int     // since it last returned to routing
	ejections int     // times ejected, less one per healthy return
	ejected   bool
	until     time.Duration
}

type peerRef struct {
	median float64 // seconds; 0: too few peers with samples
	at     time.Duration
	valid  bool
}

func (o *Outlier) setDefaults() error {
	if o.Factor == 0 {
		o.Factor = DefaultOutlierFactor
	}
	if o.MinExcess == 0 {
		o.MinExcess = DefaultOutlierMinExcess
	}
	if o.MinSamples == 0 {
		o.MinSamples = DefaultOutlierMinSamples
	}
	if o.BaseEjection == 0 {
		o.BaseEjection = DefaultOutlierEjection
	}
	if o.MaxShare == 0 {
		o.MaxShare = DefaultOutlierMaxShare
	}

	switch {
	case o.Factor <= 1:
		return fmt.Errorf("sched: outlier factor %v, want > 1 (a multiple of the peers' median)", o.Factor)
	case o.MinSamples < 1:
		return fmt.Errorf("sched: outlier min samples %d, want >= 1", o.MinSamples)
	case o.BaseEjection < 0 || o.MaxLatency < 0 || o.MinExcess < 0:
		return fmt.Errorf("sched: outlier durations must be >= 0")
	case o.MaxShare < 0 || o.MaxShare > 1:
		return fmt.Errorf("sched: outlier max share %v, want a fraction in (0, 1]", o.MaxShare)
	}
	return nil
}

// ObserveLatency records that a request on replica r took lat from its
// dispatch to its first token (the injected latency of a brownout
// included, the core's queue wait not). It feeds the lowest-latency
// strategy's pool estimate and the replica's outlier detection; an
// ejection it causes is in Ready's Ejections.
func (c *Core) ObserveLatency(now time.Duration, r int, lat time.Duration) {
	rs := &c.replicas[r]
	ps := &c.pools[rs.Pool]
	s := lat.Seconds()
	// The pool's estimate starts from its decayed value (see estimate):
	// a pool that has been quiet weighs its new sample more.
	if ps.latencyAt == 0 && ps.latency == 0 {
		ps.latency = s
	} else {
		ps.latency = 0.9*c.estimate(now, ps) + 0.1*s
	}
	ps.latencyAt = now
	c.advanceEjection(now, r)
	o := &rs.out
	if o.samples == 0 {
		o.lat = s
	} else {
		o.lat += latencyWeight * (s - o.lat)
	}
	o.samples++
	k := c.outlier.MinSamples
	c.recent[r*k+(o.samples-1)%k] = s
	if o.samples == c.outlier.MinSamples {
		c.refs[rs.Model].valid = false // one more peer to count
	}
	if o.samples >= c.outlier.MinSamples {
		c.repeer(r) // its EWMA moved
	}
	if c.outlier.Disabled || o.ejected || o.samples < c.outlier.MinSamples {
		return
	}
	if rs.blocked || 2*rs.inflight >= rs.MaxBatch {
		// NB: a replica slow because it is busy — pushing back, or half
		// its batch taken — is overloaded, not faulty: ejecting it would
		// pile its load on its pool's others (a spot loss's survivors)
		// and make them slow in turn. Only a replica slow with room to
		// spare is an outlier.
		return
	}
	recent := c.windowMedian(r)
	ref := c.peerMedian(now, rs.Model)
	over := func(x float64) bool {
		return (ref > 0 && x > c.outlier.Factor*ref && x-ref > c.outlier.MinExcess.Seconds()) ||
			(c.outlier.MaxLatency > 0 && x > c.outlier.MaxLatency.Seconds())
	}
	slow := over(o.lat) && over(recent) && over(s)
	if !slow {
		if o.samples == c.outlier.MinSamples && o.ejections > 0 {
			// Healthy since its return: the next ejection is shorter,
			// as Envoy lowers its multiplier for a host that behaves.
			o.ejections--
		}
		return
	}
	if !c.mayEject(r) {
		return
	}
	o.ejections = min(o.ejections+1, 10)
	o.ejected, o.until = true, now+c.outlier.BaseEjection*time.Duration(o.ejections)
	c.repeer(r)
	c.fix(r)
	c.refs[rs.Model].valid = false // one peer fewer
	c.wake(o.until)
	c.ejections = append(c.ejections, Ejection{Replica: r, At: now, Until: o.until,
		Latency: secs(recent), Reference: secs(ref)})
}

// windowMedian is what replica r is judged on: the (lower) median of its
// window, its last MinSamples samples; it has that many.
func (c *Core) windowMedian(r int) float64 {
	k := c.outlier.MinSamples
	var buf [16]float64
	v := append(buf[:0], c.recent[r*k:(r+1)*k]...)
	slices.Sort(v)
	return v[(k-1)/2]
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// mayEject reports whether ejecting replica r keeps its pool's ejected
// share within MaxShare and at least one of its replicas in routing.
func (c *Core) mayEject(r int) bool {
	g := &c.groups[c.replicas[r].group]
	ejected := 0
	for _, x := range g.heap {
		if c.replicas[x].out.ejected {
			ejected++
		}
	}
	limit := min(int(math.Floor(c.outlier.MaxShare*float64(len(g.heap))+1e-9)), len(g.heap)-1)
	return ejected+1 <= limit
}

// peerMedian is the lower median of the latency EWMAs of the replicas
// serving model m that have MinSamples samples and are in routing, or 0
// when fewer than two have. The lower median, so that of two replicas the
// slow one is measured against the fast one, not against their mean.
func (c *Core) peerMedian(now time.Duration, m int) float64 {
	ref := &c.refs[m]
	if ref.valid && now-ref.at < refRefresh {
		return ref.median
	}
	med := c.peerMedianOf(&c.peers[m]) // the peers' EWMAs, kept ordered (peers.go)
	*ref = peerRef{median: med, at: now, valid: true}
	return med
}

// advanceEjection returns replica r to routing once its ejection is over,
// judged afresh: its old samples are forgotten.
func (c *Core) advanceEjection(now time.Duration, r int) {
	o := &c.replicas[r].out
	if !o.ejected || now < o.until {
		return
	}
	o.ejected, o.samples, o.lat = false, 0, 0
	c.repeer(r)
	c.fix(r)
	c.ejections = append(c.ejections, Ejection{Replica: r, At: now, Returned: true})
	c.fill(now, r)
}

// returnEjected returns every replica whose ejection is over and asks for
// a wake-up at the next one's end.
func (c *Core) returnEjected(now time.Duration) {
	for r := range c.replicas {
		if o := &c.replicas[r].out; o.ejected {
			c.advanceEjection(now, r)
			if o.ejected {
				c.wake(o.until)
			}
		}
	}
}

// wake asks for a Tick at at, unless one is asked for earlier.
func (c *Core) wake(at time.Duration) {
	if c.wakeAt == 0 || at < c.wakeAt {
		c.wakeAt = at
	}
}

// Ejected reports whether replica r is ejected from routing as a latency
// outlier at now.
func (c *Core) Ejected(now time.Duration, r int) bool {
	c.advanceEjection(now, r)
	return c.replicas[r].out.ejected
}

// estimate is pool ps's predicted time to first token at now, in seconds:
// its EWMA, decayed toward zero with the time since its last sample, by
// half every LatencyHalfLife.
//
// NB: this is how lowest-latency routing recovers. A pool that got no
// traffic gets no fresh sample, so an undecayed estimate from a brownout
// (or a cold start) would keep it out for good. Decaying toward an
// optimistic prior makes a quiet pool look better and better until it is
// tried again: one request re-measures it, and if it is still slow it
// drops out for a few more half-lives. We chose this over Finagle's
// peak-EWMA with power-of-two-choices because the core draws no random
// numbers (the same inputs give the same decisions, in the twin and
// replayed from a gateway's log), and with two or three pools per model
// two random choices are most of the pools anyway; the exploration it
// buys is bounded by the half-life, not a fixed share of traffic.
func (c *Core) estimate(now time.Duration, ps *poolState) float64 {
	if ps.latency == 0 || now <= ps.latencyAt {
		return ps.latency
	}
	return ps.latency * math.Exp2(-float64(now-ps.latencyAt)/float64(c.halfLife))
}
