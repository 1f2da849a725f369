package sched

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// The rollout controller, written once for both drivers, as the ladder is.
//
// Beside the core, the driver feeds Observe every attempt of a canary's
// model that ended (on the canary, on the baseline, or a shadow copy), and
// calls Evaluate at NextAt: each canary whose evaluation is due starts its
// schedule, steps up, holds, resumes or rolls back, and the driver applies
// the decisions' shares with Core.SetCanaryShare. The triggers read the
// canary's own attempts over a sliding window (eight buckets), against
// absolute thresholds or the baseline's figures over the same window, and
// are judged only with MinRequests attempts in it (and as many baseline
// attempts for a relative trigger), so one slow request rolls nothing
// back; BreachFor evaluations in a row must fire. A held canary resumes
// once every figure falls under ClearBelow of its threshold.
//
//	ro := sched.NewRollouts(cfg)               // nil without canaries
//	ro.Observe(now, req, replica, ok, ttft, e2e, met)
//	for _, d := range ro.Evaluate(now) { core.SetCanaryShare(now, d.Canary, d.To) }
//	next := ro.NextAt()
//
// Like the core it reads no clock and draws no random number; it is not
// safe for concurrent use.

// RolloutSpec is a canary's schedule and triggers.
type RolloutSpec struct {
	Start       time.Duration
	Steps       []RolloutStep
	Every       time.Duration // evaluation interval
	Window      time.Duration // the triggers' sliding window
	MinRequests int
	BreachFor   int
	Hold        bool    // on breach: hold the step (else roll back)
	ClearBelow  float64 // a held canary resumes under this share of every threshold
	Triggers    []RolloutTrigger
}

// RolloutStep is one step of the schedule.
type RolloutStep struct {
	Share float64
	For   time.Duration // 0: the last step, held
}

// RolloutTrigger is one rollback trigger.
type RolloutTrigger struct {
	Text     string
	Figure   string  // error_rate, ttft, e2e, cost_per_success, quality
	Quantile float64 // ttft, e2e
	Below    bool    // fires under the threshold (quality)
	Value    float64 // absolute threshold (seconds for latencies); 0 when relative
	Baseline float64 // multiple of the baseline's figure; 0 when absolute
}

// Rollout actions.
const (
	ActStart    = "start"
	ActStepUp   = "step-up"
	ActPromote  = "promote"
	ActHold     = "hold"
	ActResume   = "resume"
	ActRollback = "rollback"
)

// RolloutDecision is one decision of a canary's rollout.
type RolloutDecision struct {
	Canary   int
	Name     string
	At       time.Duration
	Action   string
	From, To float64 // share of eligible traffic
	// Why says what the figures were: the trigger that fired with its
	// value and sample, or that every check passed.
	Why string
}

// RolloutVersion is what one route version of a canary served.
type RolloutVersion struct {
	Attempts, Failed, Succeeded, SLOMet uint64
	TTFT, E2E                           *ddsketch.DDSketch // seconds, succeeded attempts
	Cost                                float64            // replica time the attempts held, priced
	Quality                             float64            // sum over succeeded attempts
}

// RolloutReport is a canary's history.
type RolloutReport struct {
	Name      string
	Share     float64 // now
	State     string  // pending, stepping, held, rolled-back, promoted
	Step      int     // index into the schedule; -1 before it started
	Decisions []RolloutDecision
	// Canary, Baseline: eligible traffic on each version; Shadow: the
	// copies (Failed counts shed and cancelled copies separately).
	Canary, Baseline, Shadow                RolloutVersion
	ShadowSent, ShadowShed, ShadowCancelled uint64
	// PerMinute are the eligible attempts per minute of the run on the
	// canary and on the baseline: the measured share over time.
	PerMinute [][2]uint64
	// RolledBackAt is when the canary was rolled back; -1: never.
	RolledBackAt time.Duration
}

const rolloutBuckets = 8

// Rollout states.
const (
	statePending    = "pending"
	stateStepping   = "stepping"
	stateHeld       = "held"
	stateRolledBack = "rolled-back"
	statePromoted   = "promoted"
)

// Rollouts is the rollout controllers of a core's canaries.
type Rollouts struct {
	cfg *Config
	cs  []rollout
}

type rollout struct {
	spec     RolloutSpec
	route    *CanaryRoute
	cand     []bool // per pool: a candidate of this canary
	state    string
	step     int
	since    time.Duration // the step's start (or its resumption)
	next     time.Duration // next evaluation
	share    float64
	breaches int
	width    time.Duration // of a window bucket
	win      [2][rolloutBuckets + 1]bucket
	// steps: each version's figures since the step began (or resumed),
	// judged while the window holds too few canary attempts.
	steps   [2]figures
	scratch [2]figures // the window's figures, reused
	rep     RolloutReport
}

// figures are what a route version's attempts add up to over a span (a
// window bucket, the window, a step).
type figures struct {
	attempts, failed, ok uint64
	ttft, e2e            *ddsketch.DDSketch // seconds, succeeded attempts
	cost, quality        float64
}

func newFigures() figures { return figures{ttft: newSketch(), e2e: newSketch()} }

// reset empties f, keeping its sketches' memory.
func (f *figures) reset() {
	ttft, e2e := f.ttft, f.e2e
	ttft.Clear()
	e2e.Clear()
	*f = figures{ttft: ttft, e2e: e2e}
}

func (f *figures) add(ok bool, ttft, e2e time.Duration, quality, cost float64) {
	f.attempts++
	if ok {
		f.ok++
		f.ttft.Add(ttft.Seconds())
		f.e2e.Add(e2e.Seconds())
		f.quality += quality
	} else {
		f.failed++
	}
	f.cost += cost
}

func (f *figures) merge(o *figures) {
	f.attempts += o.attempts
	f.failed += o.failed
	f.ok += o.ok
	f.cost += o.cost
	f.quality += o.quality
	if o.ok > 0 {
		_ = f.ttft.MergeWith(o.ttft) // same mapping: cannot fail
		_ = f.e2e.MergeWith(o.e2e)
	}
}

// bucket is one bucket of the sliding window.
type bucket struct {
	idx int64 // bucket number (time / width); -1 empty
	figures
}

// NewRollouts builds the controllers of cfg's canaries; nil without any.
func NewRollouts(cfg *Config) *Rollouts {
	if len(cfg.Canaries) == 0 {
		return nil
	}
	ro := &Rollouts{cfg: cfg, cs: make([]rollout, len(cfg.Canaries))}
	for k := range cfg.Canaries {
		cr := &cfg.Canaries[k]
		c := &ro.cs[k]
		c.spec, c.route, c.state, c.step = cr.Rollout, cr, statePending, -1
		c.cand = make([]bool, len(cfg.Pools))
		for _, pi := range cr.Pools {
			c.cand[pi] = true
		}
		c.next = cr.Rollout.Start
		c.width = max(cr.Rollout.Window/rolloutBuckets, time.Millisecond)
		for v := range c.win {
			for i := range c.win[v] {
				c.win[v][i].idx = -1
			}
		}
		c.steps = [2]figures{newFigures(), newFigures()}
		c.scratch = [2]figures{newFigures(), newFigures()}
		c.rep = RolloutReport{Name: cr.Name, Step: -1, RolledBackAt: -1,
			Canary: newVersion(), Baseline: newVersion(), Shadow: newVersion()}
		if len(cr.Rollout.Steps) == 0 {
			c.next = math.MaxInt64 // shadow only: nothing to evaluate
		}
	}
	return ro
}

func newSketch() *ddsketch.DDSketch {
	dd, err := ddsketch.LogCollapsingLowestDenseDDSketch(0.01, 2048)
	if err != nil {
		panic("sched: ddsketch: " + err.Error()) // only a bad constant fails
	}
	return dd
}

func newVersion() RolloutVersion { return RolloutVersion{TTFT: newSketch(), E2E: newSketch()} }

// NextAt is when Evaluate next has something to do; math.MaxInt64: never.
func (ro *Rollouts) NextAt() time.Duration {
	next := time.Duration(math.MaxInt64)
	for k := range ro.cs {
		next = min(next, ro.cs[k].next)
	}
	return next
}

// Observe records an attempt that ended: on replica, ok or failed, its
// time to first token and end to end (from dispatch), and whether its
// request met its class's SLO. Attempts of requests no canary's eligible
// traffic holds are ignored.
func (ro *Rollouts) Observe(now time.Duration, req *Request, replica int, ok bool, ttft, e2e time.Duration, met bool) {
	for k := range ro.cs {
		c := &ro.cs[k]
		cr := c.route
		v := 0 // baseline
		switch {
		case req.Shadow:
			if req.Route != k+1 {
				continue
			}
			c.rep.Shadow.add(ro.cfg, req, replica, ok, ttft, e2e, met)
			continue
		case req.Model != cr.Model || (cr.Tenants != nil && !cr.Tenants[req.Tenant]) || (cr.Classes != nil && !cr.Classes[req.Class]):
			continue
		case req.Route == k+1 && (replica < 0 || c.cand[ro.cfg.Replicas[replica].Pool]):
			// On the candidate, or expired waiting for it (replica -1).
			v = 1
		}
		ver := &c.rep.Baseline
		if v == 1 {
			ver = &c.rep.Canary
		}
		ver.add(ro.cfg, req, replica, ok, ttft, e2e, met)
		quality, cost := ro.cfg.Models[req.Served].Quality, attemptCost(ro.cfg, replica, e2e)
		c.bucket(v, now).add(ok, ttft, e2e, quality, cost)
		c.steps[v].add(ok, ttft, e2e, quality, cost)
		minute := int(now / time.Minute)
		for len(c.rep.PerMinute) <= minute {
			c.rep.PerMinute = append(c.rep.PerMinute, [2]uint64{})
		}
		c.rep.PerMinute[minute][1-v]++
	}
}

// ShadowSent counts a copy of canary k sent.
func (ro *Rollouts) ShadowSent(k int) { ro.cs[k].rep.ShadowSent++ }

// ShadowEnded counts a copy of canary k that never ran to its end: shed
// (refused or dropped from its queue) or cancelled with its original.
func (ro *Rollouts) ShadowEnded(k int, cancelled bool) {
	if cancelled {
		ro.cs[k].rep.ShadowCancelled++
	} else {
		ro.cs[k].rep.ShadowShed++
	}
}

func attemptCost(cfg *Config, replica int, held time.Duration) float64 {
	if replica < 0 || replica >= len(cfg.Replicas) {
		return 0
	}
	r := cfg.Replicas[replica]
	return cfg.Pools[r.Pool].PricePerHour * held.Hours() / float64(max(r.MaxBatch, 1))
}

func (v *RolloutVersion) add(cfg *Config, req *Request, replica int, ok bool, ttft, e2e time.Duration, met bool) {
	v.Attempts++
	if ok {
		v.Succeeded++
		v.TTFT.Add(ttft.Seconds())
		v.E2E.Add(e2e.Seconds())
		v.Quality += cfg.Models[req.Served].Quality
	} else {
		v.Failed++
	}
	if met {
		v.SLOMet++
	}
	v.Cost += attemptCost(cfg, replica, e2e)
}

// bucket is version v's window bucket for now, emptied when it is reused.
func (c *rollout) bucket(v int, now time.Duration) *figures {
	idx := int64(now / c.width)
	b := &c.win[v][idx%(rolloutBuckets+1)]
	if b.idx != idx {
		if b.ttft == nil {
			b.figures = newFigures()
		}
		b.idx = idx
		b.reset()
	}
	return &b.figures
}

// window is version v's figures over the window ending now.
func (c *rollout) window(v int, now time.Duration) figures {
	f := c.scratch[v]
	f.reset()
	hi := int64(now / c.width)
	for i := range c.win[v] {
		// The buckets from the one holding now-Window to now's: the
		// whole window (and up to a bucket more), however now falls.
		if b := &c.win[v][i]; b.idx >= 0 && b.idx <= hi && b.idx >= hi-rolloutBuckets {
			f.merge(&b.figures)
		}
	}
	return f
}

// value is the figure a trigger reads; ok false when the sample has none
// (no attempt succeeded for a latency, quality or cost).
func (f figures) value(t RolloutTrigger) (float64, bool) {
	switch t.Figure {
	case "error_rate":
		return float64(f.failed) / float64(f.attempts), f.attempts > 0
	case "ttft", "e2e":
		sk := f.ttft
		if t.Figure == "e2e" {
			sk = f.e2e
		}
		if f.ok == 0 {
			return 0, false
		}
		q, err := sk.GetValueAtQuantile(t.Quantile)
		return q, err == nil
	case "quality":
		return f.quality / float64(f.ok), f.ok > 0
	case "cost_per_success":
		if f.ok == 0 {
			return math.Inf(1), f.attempts > 0
		}
		return f.cost / float64(f.ok), true
	}
	return 0, false
}

// judge evaluates the triggers over the canary's figures can against the
// baseline's base over the same span: fired names the first that fired,
// with its figures; clear is true when every figure is under clearBelow of
// its threshold (of those judged, at least one); enough is false (and
// nothing is judged) when can holds fewer than MinRequests attempts. A
// relative trigger is judged only with as many baseline attempts (at a
// share of 1 the baseline has none), and a figure with no value (a
// latency with nothing succeeded) is not judged.
func (c *rollout) judge(can, base figures, span string) (fired string, clear, enough bool) {
	if can.attempts < uint64(c.spec.MinRequests) {
		return "", false, false
	}
	sample := fmt.Sprintf("%d canary attempts %s", can.attempts, span)
	judged := 0
	clear = true
	for _, t := range c.spec.Triggers {
		v, ok := can.value(t)
		if !ok {
			continue
		}
		thr, what := t.Value, ""
		if t.Baseline > 0 {
			bv, bok := base.value(t)
			if base.attempts < uint64(c.spec.MinRequests) || !bok {
				continue
			}
			thr, what = t.Baseline*bv, fmt.Sprintf(" (%gx baseline %s)", t.Baseline, figure(t, bv))
		}
		op, fires := ">", v > thr
		if t.Below {
			op, fires = "<", v < thr
		}
		if fires {
			return fmt.Sprintf("%s: %s %s %s %s%s, %s", t.Text, t.name(), figure(t, v), op, figure(t, thr), what, sample), false, true
		}
		judged++
		if t.Below {
			clear = clear && v*c.spec.ClearBelow >= thr
		} else {
			clear = clear && v < c.spec.ClearBelow*thr
		}
	}
	return "", clear && judged > 0, true
}

// judgeNow judges the window ending now, or, while it holds fewer than
// MinRequests canary attempts (a small share of little traffic), the step
// so far; span says which, for the decision's why.
func (c *rollout) judgeNow(now time.Duration) (fired string, clear, enough bool, span string) {
	span = "in the last " + c.spec.Window.String()
	fired, clear, enough = c.judge(c.window(1, now), c.window(0, now), span)
	if !enough {
		span = "since the step began"
		fired, clear, enough = c.judge(c.steps[1], c.steps[0], span)
	}
	return fired, clear, enough, span
}

func (t RolloutTrigger) name() string {
	if t.Figure == "ttft" || t.Figure == "e2e" {
		return t.Figure + "_p" + strconv.FormatFloat(t.Quantile*100, 'g', -1, 64)
	}
	return t.Figure
}

// figure prints a trigger's value in its unit.
func figure(t RolloutTrigger, v float64) string {
	switch t.Figure {
	case "error_rate":
		return strconv.FormatFloat(v*100, 'f', 2, 64) + "%"
	case "ttft", "e2e":
		return time.Duration(v * float64(time.Second)).Round(time.Millisecond).String()
	case "cost_per_success":
		if math.IsInf(v, 1) {
			return "∞ (no success)"
		}
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// Evaluate runs every canary whose evaluation is due at now and returns
// the decisions taken, in canary order.
func (ro *Rollouts) Evaluate(now time.Duration) []RolloutDecision {
	var out []RolloutDecision
	for k := range ro.cs {
		c := &ro.cs[k]
		if now < c.next {
			continue
		}
		for c.next <= now {
			c.next += c.spec.Every
		}
		if d, ok := c.evaluate(now); ok {
			d.Canary, d.Name, d.At = k, c.route.Name, now
			c.rep.Decisions = append(c.rep.Decisions, d)
			out = append(out, d)
		}
		if c.state == stateRolledBack {
			c.next = math.MaxInt64
		}
	}
	return out
}

func (c *rollout) evaluate(now time.Duration) (RolloutDecision, bool) {
	steps := c.spec.Steps
	if c.state == statePending {
		c.state, c.step = c.stepState(0), 0
		c.newStep(now)
		return c.move(steps[0].Share, ActStart, "the schedule begins"), true
	}
	fired, clear, enough, span := c.judgeNow(now)
	if fired != "" {
		c.breaches++
		if c.breaches < c.spec.BreachFor {
			return RolloutDecision{}, false
		}
		switch {
		case !c.spec.Hold:
			c.state = stateRolledBack
			c.rep.RolledBackAt = now
			return c.move(0, ActRollback, fired), true
		case c.state != stateHeld:
			c.state = stateHeld
			return c.move(c.share, ActHold, fired), true
		}
		return RolloutDecision{}, false
	}
	c.breaches = 0
	if c.state == stateHeld {
		if !clear {
			return RolloutDecision{}, false
		}
		c.state = c.stepState(c.step)
		c.newStep(now)
		return c.move(c.share, ActResume, fmt.Sprintf("every figure under %g%% of its threshold %s", c.spec.ClearBelow*100, span)), true
	}
	if (c.state != stateStepping && c.state != statePromoted) || c.step == len(steps)-1 || now-c.since < steps[c.step].For {
		return RolloutDecision{}, false
	}
	if !enough || c.steps[1].attempts < uint64(c.spec.MinRequests) {
		// Too small a sample to call the step good: it is extended.
		return RolloutDecision{}, false
	}
	// The step as a whole must pass too, not only its last window.
	if f, _, _ := c.judge(c.steps[1], c.steps[0], "since the step began"); f != "" {
		return RolloutDecision{}, false
	}
	n := c.steps[1].attempts
	c.step++
	c.newStep(now)
	act := ActStepUp
	if c.state = c.stepState(c.step); c.state == statePromoted {
		act = ActPromote
	}
	return c.move(steps[c.step].Share, act, fmt.Sprintf("every check passed over the step's %d canary attempts", n)), true
}

// stepState is the state on step i: promoted on a last step of the
// whole traffic, else stepping.
func (c *rollout) stepState(i int) string {
	if steps := c.spec.Steps; i == len(steps)-1 && steps[i].Share >= 1 {
		return statePromoted
	}
	return stateStepping
}

// newStep starts a step (or resumes one): its figures start afresh.
func (c *rollout) newStep(now time.Duration) {
	c.since = now
	c.steps[0].reset()
	c.steps[1].reset()
}

func (c *rollout) move(to float64, act, why string) RolloutDecision {
	d := RolloutDecision{Action: act, From: c.share, To: to, Why: why}
	c.share = to
	return d
}

// Report returns canary k's history so far.
func (ro *Rollouts) Report(k int) RolloutReport {
	c := &ro.cs[k]
	r := c.rep
	r.Share, r.State, r.Step = c.share, c.state, c.step
	r.Decisions = append([]RolloutDecision(nil), r.Decisions...)
	r.PerMinute = append([][2]uint64(nil), r.PerMinute...)
	return r
}

// Len is the number of canaries.
func (ro *Rollouts) Len() int { return len(ro.cs) }
