package sched

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// A Scaler is one autoscaled pool's capacity over time, written once for
// both drivers: the Autoscaler's decisions, the provider's answers
// (acquisition), and each replica's life from asked for to handed back.
// The twin advances it in simulated time, the live gateway on the wall
// clock (where a replica provisioned is a container started), and with
// the same seed and the same measurements both make the same decisions
// and the same draws: their replica timelines agree.
//
// Every sync period the Scaler measures the pool (through the driver) and
// runs its Autoscaler, which sets `requested`, the HPA's spec.replicas.
// What the provider has not granted is asked for at once and again after
// each refusal's retry-after, like a pending pod the cluster autoscaler
// keeps trying to place. A grant comes from the reservation first (no
// provisioning delay), then on demand up to the burst cap, after a
// provisioning delay drawn from the Scaler's stream; either then loads
// its model (ColdStart) before the driver routes to it. A scale-down
// cancels what has not arrived, then releases replicas, newest first: a
// released replica takes no new work and is gone once what it has in
// flight finishes (seen at the next sync).
//
// The driver calls Advance at NextAt (and may call it at any time: it
// does what is due). Transitions reach the driver through ScalerEnv; like
// the core, a Scaler reads no clock, and draws only from the stream it is
// given (ScalerConfig.Draw). It is not safe for concurrent use.

// Reasons a provider refuses a scale-up.
const (
	RefusedReservation = "reservation" // reservation used and the burst cap reached
	RefusedStockout    = "stockout"    // the provider has no capacity (fault stockout)
	RefusedQuota       = "quota"       // the account's GPU quota (fault quota-cap)
)

// RefusalReasons lists them in the order reports give them.
var RefusalReasons = []string{RefusedReservation, RefusedStockout, RefusedQuota}

// NoRefusals is a RefusedBy with every reason at 0, so that an expectation
// may name a reason that never happened.
func NoRefusals() map[string]uint64 {
	m := make(map[string]uint64, len(RefusalReasons))
	for _, why := range RefusalReasons {
		m[why] = 0
	}
	return m
}

// ReplicaState is an autoscaled replica's place in its life.
type ReplicaState uint8

// Replica states.
const (
	RepAbsent       ReplicaState = iota // not provisioned
	RepProvisioning                     // granted, the instance not yet up
	RepWarming                          // up, loading its model
	RepServing                          // routable
	RepDraining                         // released, finishing what it has
)

// ScalerConfig configures one pool's Scaler.
type ScalerConfig struct {
	Pool     string // for events
	Policy   AutoscalePolicy
	Replicas int // serving at the start (they hold the reservation first)
	Max      int // replicas the pool has room for, present or not
	// Reserved replicas are granted at once; BurstCap caps the on-demand
	// ones beyond them (-1: no cap).
	Reserved int
	BurstCap int
	// Delay draws an on-demand replica's provisioning delay from the
	// acquisition stream; nil: none.
	Delay      func() time.Duration
	ColdStart  time.Duration
	RetryAfter time.Duration // after a refusal; 0: the sync period
	// GPUsPerReplica, for a quota-cap's free GPUs.
	GPUsPerReplica int
	// MaxBatch is a replica's batch slots, for the utilization metric.
	MaxBatch int
	// End: no sync or ask after it: the end of the run's arrivals, so
	// that what the pool asks for answers the run's load, and a drain
	// (however long a run's requests take) asks
	// nothing. Its transitions and releases still happen.
	End time.Duration
	// Draw is the acquisition stream's uniform draw in [0,1), for a
	// stockout's grants; Delay draws from the same stream. The driver
	// owns the stream (the core draws no random number of its own).
	Draw func() float64
}

// Offer is what the provider does with an ask now: the active
// acquisition faults' effect.
type Offer struct {
	Stocked bool    // a stockout holds...
	Grant   float64 // ...and grants this share of each ask (rounded at random)
	Factor  float64 // provisioning delay multiplier (slow-provisioning); 0 means 1
	// FreeGPUs is what a quota-cap leaves the account; math.MaxInt: none.
	FreeGPUs int
}

// NoFaults is an Offer with no acquisition fault active.
var NoFaults = Offer{Grant: 1, Factor: 1, FreeGPUs: math.MaxInt}

// ScalerEnv is the driver, as a Scaler sees it.
type ScalerEnv interface {
	// Measure returns the pool's busy slot-seconds so far (Core.PoolBusy),
	// the requests waiting for its models, and their longest predicted
	// wait: Core.ScalerMeasure, in both drivers.
	Measure() (busy float64, queued int, wait time.Duration)
	// Inflight is what replica k of the pool has in flight.
	Inflight(k int) int
	// Offer is the provider's answer now; read only when the Scaler asks.
	Offer() Offer
	// Quiet says the run has nothing more to scale for (no request live
	// and none to come): the Scaler stops syncing.
	Quiet() bool
	// Provisioned: replica k's instance is up and loads its model
	// (present, not ready). Loaded: its model has loaded; the driver
	// makes it routable and calls Serving (at once, or once the live
	// instance answers). Released: k takes no new work. Gone: k is
	// handed back.
	Provisioned(k int)
	Loaded(k int)
	Released(k int)
	Gone(k int)
	// Event is a decision or change for the timeline.
	Event(ev ScalerEvent)
}

// ScalerEvent is one entry for the timeline.
type ScalerEvent struct {
	At     time.Duration
	Kind   string // scale, grant, refused, replica-ready
	Detail string
}

// ReplicaCount is an autoscaled pool's replicas at a moment: asked for,
// provisioning (granted, not up), warming (loading), serving and
// draining.
type ReplicaCount struct {
	TS           float64 `json:"ts"`
	Requested    int     `json:"requested"`
	Provisioning int     `json:"provisioning"`
	Warming      int     `json:"warming"`
	Serving      int     `json:"serving"`
	Draining     int     `json:"draining"`
}

// ScalerTally is what a Scaler did.
type ScalerTally struct {
	ScaleUps, ScaleDowns uint64
	// Asked counts replicas asked of the provider (each ask of a retried
	// replica), Granted those granted (Reserved of them from the
	// reservation), Refused those refused, by reason in RefusedBy.
	Asked, Granted, Reserved, Refused uint64
	RefusedBy                         map[string]uint64
	MinServing, MaxServing            int
	// ToServing is each replica's time from first asked for to serving.
	ToServing []time.Duration
	// The provider's last refusal: how many, when, why.
	LastRefused    int
	LastRefusedAt  time.Duration
	LastRefusedWhy string
	Series         []ReplicaCount
}

// due is a replica's timed transition: provisioned, or loaded.
type due struct {
	at  time.Duration
	k   int
	gen int
	seq uint64
}

// Scaler is one autoscaled pool's capacity; see the comment above.
type Scaler struct {
	cfg ScalerConfig
	as  *Autoscaler

	state    []ReplicaState
	reserved []bool
	askedAt  []time.Duration
	upAt     []time.Duration
	gen      []int // bumped on release: stale transitions do nothing

	requested int
	askedFrom []time.Duration // when each replica not yet granted was first asked for
	retryAt   time.Duration   // a refusal's retry; -1: none pending
	nextSync  time.Duration   // -1: no more syncs
	lastBusy  float64
	lastSync  time.Duration
	dues      []due
	seq       uint64

	tally ScalerTally
	// Replica-hours paid for, within End's duration, and overall.
	duration                           time.Duration
	reservedHours, burstHours, upHours float64
}

// NewScaler returns a Scaler for cfg, its starting replicas serving and
// its first sync a sync period from 0. Duration bounds the paid hours
// (the scenario's duration).
func NewScaler(cfg ScalerConfig, duration time.Duration) (*Scaler, error) {
	as, err := NewAutoscaler(cfg.Policy)
	if err != nil {
		return nil, err
	}
	if cfg.Replicas > cfg.Max {
		return nil, fmt.Errorf("pool %s: %d replicas at the start, room for %d", cfg.Pool, cfg.Replicas, cfg.Max)
	}
	if cfg.Draw == nil {
		return nil, fmt.Errorf("pool %s: a scaler needs its acquisition stream", cfg.Pool)
	}
	n := cfg.Max
	s := &Scaler{cfg: cfg, as: as, duration: duration, retryAt: -1, nextSync: cfg.Policy.SyncPeriod,
		state: make([]ReplicaState, n), reserved: make([]bool, n), askedAt: make([]time.Duration, n),
		upAt: make([]time.Duration, n), gen: make([]int, n), requested: cfg.Replicas,
		tally: ScalerTally{MinServing: cfg.Replicas, MaxServing: cfg.Replicas,
			// Every reason, so that an expectation may name one that never
			// happened.
			RefusedBy: NoRefusals()}}
	for k := range cfg.Replicas {
		s.state[k], s.reserved[k] = RepServing, k < cfg.Reserved
	}
	as.Seed(0, cfg.Replicas)
	s.record(0)
	return s, nil
}

// Policy returns the pool's autoscaling policy.
func (s *Scaler) Policy() AutoscalePolicy { return s.cfg.Policy }

// Requested is the count the pool asks for.
func (s *Scaler) Requested() int { return s.requested }

// State is replica k's state.
func (s *Scaler) State(k int) ReplicaState { return s.state[k] }

// Held counts the replicas the pool holds from the provider (granted and
// not yet handed back), for a quota-cap's free GPUs.
func (s *Scaler) Held() int {
	n := 0
	for _, st := range s.state {
		if st != RepAbsent {
			n++
		}
	}
	return n
}

// Tally returns what the Scaler did so far (shared slices: read only).
func (s *Scaler) Tally() ScalerTally { return s.tally }

// Counts is the pool's replicas now.
func (s *Scaler) Counts(now time.Duration) ReplicaCount {
	c := ReplicaCount{TS: math.Round(now.Seconds()*1e6) / 1e6, Requested: s.requested}
	for _, st := range s.state {
		switch st {
		case RepProvisioning:
			c.Provisioning++
		case RepWarming:
			c.Warming++
		case RepServing:
			c.Serving++
		case RepDraining:
			c.Draining++
		}
	}
	return c
}

// NextAt is when Advance next has something to do; -1: nothing.
func (s *Scaler) NextAt() time.Duration {
	at := time.Duration(-1)
	earlier := func(t time.Duration) {
		if t >= 0 && (at < 0 || t < at) {
			at = t
		}
	}
	for _, d := range s.dues {
		earlier(d.at)
	}
	earlier(s.retryAt)
	earlier(s.nextSync)
	return at
}

// Advance does what is due at now, in time order, each at its own
// instant: replicas provisioned or loaded in the order they fell due,
// syncs and a refusal's retry. At one instant, dues go first, then the
// sync, then the retry. A driver that calls it late (the live gateway,
// its timer firing after the instant) gets the decisions of one that
// calls it on time.
func (s *Scaler) Advance(now time.Duration, env ScalerEnv) {
	for {
		i := -1
		for j, d := range s.dues {
			if d.at <= now && (i < 0 || d.at < s.dues[i].at || d.at == s.dues[i].at && d.seq < s.dues[i].seq) {
				i = j
			}
		}
		syncDue := s.nextSync >= 0 && s.nextSync <= now
		retryDue := s.retryAt >= 0 && s.retryAt <= now
		switch {
		case i >= 0 && (!syncDue || s.dues[i].at <= s.nextSync) && (!retryDue || s.dues[i].at <= s.retryAt):
			d := s.dues[i]
			s.dues = append(s.dues[:i], s.dues[i+1:]...)
			if s.gen[d.k] != d.gen {
				continue
			}
			switch s.state[d.k] {
			case RepProvisioning:
				s.state[d.k], s.upAt[d.k] = RepWarming, d.at
				env.Provisioned(d.k)
				s.after(d.at, s.cfg.ColdStart, d.k)
				s.record(d.at)
			case RepWarming:
				env.Loaded(d.k)
			}
		case syncDue && (!retryDue || s.nextSync <= s.retryAt):
			at := s.nextSync
			s.sync(at, env)
			s.nextSync = at + s.cfg.Policy.SyncPeriod
			if s.nextSync > s.cfg.End || env.Quiet() {
				s.nextSync = -1
			}
		case retryDue:
			at := s.retryAt
			s.retryAt = -1
			s.acquire(at, env)
			s.record(at)
		default:
			return
		}
	}
}

// after schedules replica k's next transition d after now.
func (s *Scaler) after(now, d time.Duration, k int) {
	s.seq++
	s.dues = append(s.dues, due{at: now + d, k: k, gen: s.gen[k], seq: s.seq})
}

// Serving: the driver routes to replica k from now (its model loaded).
func (s *Scaler) Serving(now time.Duration, k int, env ScalerEnv) {
	if s.state[k] != RepWarming {
		return // released meanwhile
	}
	s.state[k] = RepServing
	waited := now - s.askedAt[k]
	s.tally.ToServing = append(s.tally.ToServing, waited)
	env.Event(ScalerEvent{now, "replica-ready", fmt.Sprintf("pool %s: replica %d serving, %v after it was asked for", s.cfg.Pool, k, waited)})
	s.record(now)
}

// Failed: replica k's instance did not start (the live driver's
// Provisioner failed). It is handed back, paid for up to now, and what
// the pool still wants is asked for again at the next sync or retry.
func (s *Scaler) Failed(now time.Duration, k int, env ScalerEnv) {
	if s.state[k] != RepWarming && s.state[k] != RepProvisioning {
		return
	}
	s.gen[k]++
	if s.state[k] == RepWarming {
		s.reservedHours, s.burstHours, s.upHours = s.paid(k, now, s.reservedHours, s.burstHours, s.upHours)
	}
	s.state[k] = RepAbsent
	env.Gone(k)
	s.record(now)
}

// measure is the policy's metric now.
func (s *Scaler) measure(now time.Duration, env ScalerEnv) float64 {
	busy, queued, wait := env.Measure()
	n := max(s.requested, 1)
	switch s.cfg.Policy.Metric {
	case MetricWait:
		return wait.Seconds()
	case MetricQueue:
		return float64(queued) / float64(n)
	}
	// Utilization: busy slots averaged since the last sync, over the
	// replicas asked for (those not serving yet count as idle, as the
	// HPA counts a pod not ready on a scale-up).
	slots := float64(n) * float64(s.cfg.MaxBatch) * (now - s.lastSync).Seconds()
	u := 0.0
	if slots > 0 {
		u = (busy - s.lastBusy) / slots
	}
	s.lastBusy, s.lastSync = busy, now
	return u
}

// sync is one sync period's evaluation.
func (s *Scaler) sync(now time.Duration, env ScalerEnv) {
	// Released replicas whose work has finished are gone.
	for k, st := range s.state {
		if st == RepDraining && env.Inflight(k) == 0 {
			s.gone(k, now, env)
		}
	}
	metric := s.measure(now, env)
	n, changed := s.as.Evaluate(now, s.requested, metric)
	if changed {
		dir := "up"
		if n > s.requested {
			s.tally.ScaleUps++
		} else {
			s.tally.ScaleDowns++
			dir = "down"
		}
		p := s.cfg.Policy
		env.Event(ScalerEvent{now, "scale", fmt.Sprintf("pool %s: scale %s %d → %d (%s %.3g, target %.3g)",
			s.cfg.Pool, dir, s.requested, n, p.Metric, metric, p.Target)})
		if n < s.requested {
			s.release(s.requested-n, now, env)
		}
		s.requested = n
	}
	s.acquire(now, env)
	s.record(now)
}

// live counts the replicas granted and not released.
func (s *Scaler) live() (n, reserved, burst int) {
	for k, st := range s.state {
		if st == RepProvisioning || st == RepWarming || st == RepServing {
			n++
			if s.reserved[k] {
				reserved++
			} else {
				burst++
			}
		}
	}
	return n, reserved, burst
}

// acquire asks the provider for what the pool wants and has not been
// granted: the reservation first, then on demand up to the burst cap,
// less what an active stockout or quota-cap refuses.
func (s *Scaler) acquire(now time.Duration, env ScalerEnv) {
	n, heldRes, heldBurst := s.live()
	// A slot still draining is not free: what it would take waits for
	// the next sync (or retry) after it is gone, unasked.
	free := 0
	for _, st := range s.state {
		if st == RepAbsent {
			free++
		}
	}
	want := min(s.requested-n, free)
	if want <= 0 || (s.retryAt >= 0 && now < s.retryAt) || now > s.cfg.End {
		return
	}
	for len(s.askedFrom) < want {
		s.askedFrom = append(s.askedFrom, now)
	}
	s.tally.Asked += uint64(want)
	refused := map[string]int{}
	res := min(want, max(s.cfg.Reserved-heldRes, 0))
	onDemand := want - res
	if s.cfg.BurstCap >= 0 && onDemand > s.cfg.BurstCap-heldBurst {
		capped := max(s.cfg.BurstCap-heldBurst, 0)
		refused[RefusedReservation] += onDemand - capped
		onDemand = capped
	}
	offer := env.Offer()
	if offer.Stocked {
		// The stockout grants its share of the ask, rounded at random
		// (one draw on the acquisition stream): a quarter of 8 is 2, a
		// quarter of 1 is a one-in-four chance of 1, not a floor of 0.
		g := 0
		if onDemand > 0 && offer.Grant > 0 {
			whole, frac := math.Modf(float64(onDemand) * min(offer.Grant, 1))
			g = int(whole)
			if s.cfg.Draw() < frac {
				g++
			}
		}
		refused[RefusedStockout] += onDemand - g
		onDemand = g
	}
	if offer.FreeGPUs < math.MaxInt {
		fit := max(offer.FreeGPUs, 0) / max(s.cfg.GPUsPerReplica, 1)
		if res+onDemand > fit {
			over := res + onDemand - fit
			cut := min(over, onDemand)
			onDemand -= cut
			res -= over - cut
			refused[RefusedQuota] += over
		}
	}
	factor := offer.Factor
	if factor == 0 {
		factor = 1
	}
	for range res {
		s.grant(true, 1, now)
	}
	for range onDemand {
		s.grant(false, factor, now)
	}
	s.tally.Granted += uint64(res + onDemand)
	s.tally.Reserved += uint64(res)
	if res+onDemand > 0 {
		env.Event(ScalerEvent{now, "grant", fmt.Sprintf("pool %s: %d of %d replicas granted (%d reserved)", s.cfg.Pool, res+onDemand, want, res)})
	}
	total := 0
	var whys []string
	for _, why := range RefusalReasons {
		if k := refused[why]; k > 0 {
			total += k
			whys = append(whys, why)
			s.tally.RefusedBy[why] += uint64(k)
			env.Event(ScalerEvent{now, "refused", fmt.Sprintf("pool %s: %d replicas refused (%s)", s.cfg.Pool, k, why)})
		}
	}
	if total > 0 {
		s.tally.Refused += uint64(total)
		s.tally.LastRefused, s.tally.LastRefusedAt, s.tally.LastRefusedWhy = total, now, strings.Join(whys, ", ")
		retry := s.cfg.RetryAfter
		if retry <= 0 {
			retry = s.cfg.Policy.SyncPeriod
		}
		s.retryAt = now + retry
	}
}

// grant provisions one replica: at once from the reservation, or after a
// drawn delay on demand; then it loads its model.
func (s *Scaler) grant(reserved bool, factor float64, now time.Duration) {
	k := -1
	for i, st := range s.state {
		if st == RepAbsent {
			k = i
			break
		}
	}
	if k < 0 {
		return // acquire asks for free slots only
	}
	s.state[k], s.reserved[k] = RepProvisioning, reserved
	s.askedAt[k] = s.askedFrom[0]
	s.askedFrom = s.askedFrom[1:]
	delay := time.Duration(0)
	if s.cfg.Delay != nil && !reserved {
		delay = time.Duration(float64(s.cfg.Delay()) * factor)
	}
	s.after(now, delay, k)
}

// release gives back n replicas: what has not arrived first, then the
// newest.
func (s *Scaler) release(n int, now time.Duration, env ScalerEnv) {
	live, _, _ := s.live()
	pending := min(max(s.requested-live, 0), n)
	s.askedFrom = s.askedFrom[:max(len(s.askedFrom)-pending, 0)]
	n -= pending
	for _, st := range []ReplicaState{RepProvisioning, RepWarming, RepServing} {
		for k := len(s.state) - 1; k >= 0 && n > 0; k-- {
			if s.state[k] != st {
				continue
			}
			n--
			s.gen[k]++
			if st == RepProvisioning {
				s.state[k] = RepAbsent
				continue // never up: nothing paid
			}
			s.state[k] = RepDraining
			env.Released(k)
			if env.Inflight(k) == 0 {
				s.gone(k, now, env)
			}
		}
	}
}

// gone: replica k has drained and is handed back; it is paid for until
// now.
func (s *Scaler) gone(k int, now time.Duration, env ScalerEnv) {
	s.state[k] = RepAbsent
	env.Gone(k)
	s.reservedHours, s.burstHours, s.upHours = s.paid(k, now, s.reservedHours, s.burstHours, s.upHours)
}

// paid adds replica k's paid time up to until to the given hours: all of
// it to up, and the part within the duration to reserved or burst.
func (s *Scaler) paid(k int, until time.Duration, res, burst, up float64) (float64, float64, float64) {
	// A replica up after until (a report made before it came) costs
	// nothing yet.
	up += max(until-s.upAt[k], 0).Hours()
	h := max(min(until, s.duration)-min(s.upAt[k], s.duration), 0).Hours()
	if s.reserved[k] {
		return res + h, burst, up
	}
	return res, burst + h, up
}

// Paid is the replica-hours paid for up to now: reserved and burst within
// the duration, and up overall (for the pool's utilization). The replicas
// still held count up to now.
func (s *Scaler) Paid(now time.Duration) (reserved, burst, up float64) {
	reserved, burst, up = s.reservedHours, s.burstHours, s.upHours
	for k, st := range s.state {
		if st == RepWarming || st == RepServing || st == RepDraining {
			reserved, burst, up = s.paid(k, now, reserved, burst, up)
		}
	}
	return reserved, burst, up
}

// record appends the counts to the series when they changed.
func (s *Scaler) record(now time.Duration) {
	c := s.Counts(now)
	series := s.tally.Series
	if n := len(series); n > 0 {
		last := series[n-1]
		last.TS = c.TS
		if last == c {
			return
		}
		if series[n-1].TS == c.TS {
			series = series[:n-1]
		}
	}
	s.tally.Series = append(series, c)
	s.tally.MinServing = min(s.tally.MinServing, c.Serving)
	s.tally.MaxServing = max(s.tally.MaxServing, c.Serving)
}
