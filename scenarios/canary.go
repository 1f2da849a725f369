package scenarios

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Canary is a route version: a share of one model's eligible traffic sent
// to candidate pools (a new provider, accelerator or runtime), stepped up
// on a schedule while its checks pass, and returned to the baseline (every
// other pool serving the model) when a rollback trigger fires. Candidate
// pools are reachable only through their canary. Shadow mirrors a share of
// the eligible traffic to the candidate as well, its answers discarded.
// docs/canary.md walks a migration through it.
type Canary struct {
	Name  string `yaml:"name"`
	Model string `yaml:"model"`
	// Candidate names the pools the canary sends its share to; no other
	// route reaches them.
	Candidate []string `yaml:"candidate"`
	// Eligible traffic: requests of these tenants, classes and tenant
	// jurisdictions (each empty: any), and never a tenant whose
	// jurisdiction no candidate pool satisfies.
	Tenants       []string `yaml:"tenants,omitempty"`
	Classes       []string `yaml:"classes,omitempty"`
	Jurisdictions []string `yaml:"jurisdictions,omitempty"`
	// Start is when the first step begins; before it the canary takes no
	// traffic (its shadow, if any, runs from the start of the run).
	Start Duration `yaml:"start,omitempty"`
	// Steps are the shares of eligible traffic in turn, each held for its
	// For while the checks pass; the last step's share stays (a last
	// share of 1 is the promotion). Empty: shadow only.
	Steps []CanaryStep `yaml:"steps,omitempty"`
	// EvaluateEvery is how often the triggers are evaluated; default 30s.
	EvaluateEvery Duration `yaml:"evaluate_every,omitempty"`
	// Window is the sliding window the figures are taken over; default 2m.
	Window Duration `yaml:"window,omitempty"`
	// MinRequests is the least number of canary attempts in the window
	// before any trigger is judged (so one slow request does not roll the
	// canary back); default 20. A trigger against the baseline also needs
	// as many baseline attempts.
	MinRequests int `yaml:"min_requests,omitempty"`
	// BreachFor is how many evaluations in a row a trigger must fire
	// before the canary acts; default 1.
	BreachFor int `yaml:"breach_for,omitempty"`
	// OnBreach is what a breach does: rollback (default: the share goes to
	// 0 and stays there) or hold (no step up until the figures fall under
	// clear_below of every threshold, then the schedule resumes).
	OnBreach string `yaml:"on_breach,omitempty"`
	// ClearBelow is the fraction of each threshold a held canary's figures
	// must fall under before it steps again; default 0.8.
	ClearBelow float64 `yaml:"clear_below,omitempty"`
	// RollbackIf are the triggers, each "<figure> > <threshold>" (or
	// "quality < <floor>") over the canary's own attempts in the window:
	// error_rate > 2%, ttft_p99 > slo, e2e_p95 > 1.5x baseline,
	// cost_per_success > 1.3x baseline, quality < 0.8.
	RollbackIf []string `yaml:"rollback_if,omitempty"`
	Shadow     *Shadow  `yaml:"shadow,omitempty"`
}

// CanaryStep is one step of a canary's schedule.
type CanaryStep struct {
	Share float64  `yaml:"share"` // of eligible traffic, in (0, 1]
	For   Duration `yaml:"for,omitempty"`
}

// Shadow mirrors eligible requests to the candidate: the copy's answer is
// discarded, never returned to the client nor counted against its
// tenant's quota, and the copy is the first thing shed.
type Shadow struct {
	Share float64 `yaml:"share"` // of eligible requests mirrored, in (0, 1]
	// CancelWithPrimary cancels the copy when the original finishes.
	CancelWithPrimary bool `yaml:"cancel_with_primary,omitempty"`
	// MaxSlots is the share of the candidate's batch slots copies may hold
	// at once (default 0.5), so shadows never starve the canary's own
	// traffic; copies beyond it are shed.
	MaxSlots float64 `yaml:"max_slots,omitempty"`
}

// The canary's breach actions.
const (
	OnBreachRollback = "rollback"
	OnBreachHold     = "hold"
)

var onBreachActions = []string{OnBreachRollback, OnBreachHold}

// Canary trigger figures.
const (
	FigErrorRate      = "error_rate"
	FigTTFT           = "ttft"
	FigE2E            = "e2e"
	FigCostPerSuccess = "cost_per_success"
	FigQuality        = "quality"
)

// CanaryTrigger is one parsed rollback_if line.
type CanaryTrigger struct {
	Text     string  // as written
	Figure   string  // error_rate, ttft, e2e, cost_per_success, quality
	Quantile float64 // ttft, e2e: 0.99 for p99
	// Below: the trigger fires under the threshold (quality); else above.
	Below bool
	// One of: Value, an absolute threshold (a fraction, seconds or
	// currency units); SLO, the tightest objective of the eligible classes
	// for the figure; Baseline, a multiple of the baseline route's figure
	// over the same window.
	Value    float64
	SLO      bool
	Baseline float64
}

// ParseCanaryTrigger parses one rollback_if line.
func ParseCanaryTrigger(s string) (CanaryTrigger, error) {
	t := CanaryTrigger{Text: s}
	var lhs, rhs string
	switch {
	case strings.Contains(s, ">"):
		lhs, rhs, _ = strings.Cut(s, ">")
	case strings.Contains(s, "<"):
		lhs, rhs, _ = strings.Cut(s, "<")
		t.Below = true
	default:
		return t, fmt.Errorf("%q: want \"<figure> > <threshold>\", e.g. \"error_rate > 2%%\" or \"ttft_p99 > slo\"", s)
	}
	lhs, rhs = strings.TrimSpace(lhs), strings.TrimSpace(rhs)
	if strings.HasPrefix(rhs, "=") {
		return t, fmt.Errorf("%q: want > or < (a trigger fires past its threshold)", s)
	}
	switch {
	case lhs == FigErrorRate, lhs == FigCostPerSuccess, lhs == FigQuality:
		t.Figure = lhs
	case strings.HasPrefix(lhs, "ttft_p"), strings.HasPrefix(lhs, "e2e_p"):
		fig, p, _ := strings.Cut(lhs, "_p")
		q, err := strconv.ParseFloat(p, 64)
		if err != nil || !(q > 0 && q < 100) {
			return t, fmt.Errorf("%q: %s: want a percentile such as %s_p99 or %s_p99.9", s, lhs, fig, fig)
		}
		t.Figure, t.Quantile = fig, q/100
	default:
		return t, fmt.Errorf("%q: figure %q, want error_rate, ttft_pNN, e2e_pNN, cost_per_success or quality", s, lhs)
	}
	if t.Below != (t.Figure == FigQuality) {
		if t.Below {
			return t, fmt.Errorf("%q: %s fires above its threshold; want >", s, lhs)
		}
		return t, fmt.Errorf("%q: quality fires below its floor; want quality < 0.8", s)
	}
	latency := t.Figure == FigTTFT || t.Figure == FigE2E
	switch {
	case rhs == "slo":
		if !latency {
			return t, fmt.Errorf("%q: only ttft_pNN and e2e_pNN compare with the class SLO", s)
		}
		t.SLO = true
		return t, nil
	case strings.HasSuffix(rhs, "baseline"):
		m := strings.TrimSpace(strings.TrimSuffix(rhs, "baseline"))
		f, err := strconv.ParseFloat(strings.TrimSuffix(m, "x"), 64)
		if !strings.HasSuffix(m, "x") || err != nil || !(f > 0) || math.IsInf(f, 0) {
			return t, fmt.Errorf("%q: want a multiple of the baseline's figure, e.g. 1.5x baseline", s)
		}
		if t.Figure == FigQuality {
			return t, fmt.Errorf("%q: quality takes an absolute floor in (0, 1], e.g. quality < 0.8", s)
		}
		t.Baseline = f
		return t, nil
	}
	if latency {
		d, err := time.ParseDuration(rhs)
		if err != nil || d <= 0 {
			return t, fmt.Errorf("%q: want a duration (2s, 500ms), slo or a multiple such as 1.5x baseline", s)
		}
		t.Value = d.Seconds()
		return t, nil
	}
	pct := strings.HasSuffix(rhs, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(rhs, "%"), 64)
	if pct {
		f /= 100
	}
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return t, fmt.Errorf("%q: want a number > 0 (a share as 2%% or 0.02), or a multiple such as 2x baseline", s)
	}
	if (t.Figure == FigErrorRate || t.Figure == FigQuality) && f > 1 {
		return t, fmt.Errorf("%q: %s is a share; want a threshold in (0, 1] (2%% or 0.02)", s, t.Figure)
	}
	t.Value = f
	return t, nil
}

// canaryDefaults fills a canary's defaults.
func canaryDefaults(c *Canary) {
	if c.EvaluateEvery == 0 {
		c.EvaluateEvery = Duration(30 * time.Second)
	}
	if c.Window == 0 {
		c.Window = Duration(2 * time.Minute)
	}
	if c.MinRequests == 0 {
		c.MinRequests = 20
	}
	if c.BreachFor == 0 {
		c.BreachFor = 1
	}
	if c.OnBreach == "" {
		c.OnBreach = OnBreachRollback
	}
	if c.ClearBelow == 0 {
		c.ClearBelow = 0.8
	}
	if c.Shadow != nil && c.Shadow.MaxSlots == 0 {
		c.Shadow.MaxSlots = 0.5
	}
}

// canaries checks the canaries: references, that a pool is a candidate of
// one canary only and serves its model, that the baseline keeps a pool, the
// schedule and the triggers.
func (v *validator) canaries(pools, models, tenants, classes map[string]int) {
	s := v.s
	if len(s.Canaries) == 0 {
		return
	}
	v.names("canaries", len(s.Canaries), func(i int) string { return s.Canaries[i].Name })
	owner := map[string]string{}
	byModel := map[string]int{}
	for i, c := range s.Canaries {
		p := at("canaries", i)
		if !v.ref(p+".model", c.Model, models, "model") {
			continue
		}
		if j, dup := byModel[c.Model]; dup {
			// Each would count the other's candidate as its baseline, and
			// the second would get only what the first left.
			v.add(p+".model", q(c.Model), "already moved by "+at("canaries", j)+"; one canary per model at a time")
		} else {
			byModel[c.Model] = i
		}
		if len(c.Candidate) == 0 {
			v.add(p+".candidate", "", "missing; want the pools the canary sends its share to, e.g. [neo-h100]")
		}
		for j, name := range c.Candidate {
			cp := at(p+".candidate", j)
			if !v.ref(cp, name, pools, "pool") {
				continue
			}
			if o, dup := owner[name]; dup {
				v.add(cp, q(name), "already a candidate of canary "+q(o)+"; a pool is reachable through one canary only")
				continue
			}
			owner[name] = c.Name
			if pl := s.Pools[pools[name]]; !slices.Contains(pl.Models, c.Model) {
				v.add(cp, q(name), fmt.Sprintf("the pool does not serve %s; want a pool whose models list it", c.Model))
			} else if len(pl.Models) > 1 {
				v.add(cp, q(name), fmt.Sprintf("the pool also serves %s, which no route would reach: a candidate is reachable only through its canary; want a pool that serves %s only", strings.Join(slices.DeleteFunc(slices.Clone(pl.Models), func(m string) bool { return m == c.Model }), ", "), c.Model))
			} else if pl.Autoscale != nil {
				v.add(cp, q(name), "the pool autoscales; a canary's candidate keeps a fixed count for now (its shadow's slots are sized from it): leave autoscale out of the candidate")
			} else if pl.Replicas == 0 {
				v.add(cp, q(name), "the pool has no replicas: the canary's share would wait for capacity that never comes; want a pool with replicas")
			}
		}
		v.refs(p+".tenants", c.Tenants, tenants, "tenant", false)
		v.refs(p+".classes", c.Classes, classes, "class", false)
		for j, jur := range c.Jurisdictions {
			v.name(at(p+".jurisdictions", j), jur, true)
		}
		v.nonNegDuration(p+".start", c.Start)
		for j, st := range c.Steps {
			sp := at(p+".steps", j)
			if !(st.Share > 0 && st.Share <= 1) {
				v.add(sp+".share", num(st.Share), "want the share of eligible traffic in (0, 1], e.g. 0.05")
			}
			if j > 0 && st.Share < c.Steps[j-1].Share {
				v.add(sp+".share", num(st.Share), fmt.Sprintf("want >= the step before (%g): steps only go up; a breach rolls back", c.Steps[j-1].Share))
			}
			v.nonNegDuration(sp+".for", st.For)
			if st.For == 0 && j < len(c.Steps)-1 {
				v.add(sp+".for", "", "missing; want how long the step holds before the next, e.g. 5m (only the last step may leave it out)")
			}
		}
		if c.EvaluateEvery <= 0 {
			v.add(p+".evaluate_every", c.EvaluateEvery.String(), "want > 0 (leave it out for the default 30s)")
		}
		if c.Window < c.EvaluateEvery {
			v.add(p+".window", c.Window.String(), fmt.Sprintf("want >= evaluate_every (%s): each evaluation reads the window", c.EvaluateEvery))
		}
		v.atLeast(p+".min_requests", c.MinRequests, 1)
		v.atLeast(p+".breach_for", c.BreachFor, 1)
		v.enum(p+".on_breach", c.OnBreach, onBreachActions)
		if !(c.ClearBelow > 0 && c.ClearBelow <= 1) {
			v.add(p+".clear_below", num(c.ClearBelow), "want a fraction in (0, 1]")
		}
		if len(c.Steps) > 0 && len(c.RollbackIf) == 0 {
			v.add(p+".rollback_if", "", "missing; a canary needs a trigger to roll back on, e.g. [\"error_rate > 2%\", \"ttft_p99 > slo\"]")
		}
		if len(c.Steps) == 0 && c.Shadow == nil {
			v.add(p+".steps", "", "missing; want a schedule of shares, or a shadow for a shadow-only route")
		}
		for j, line := range c.RollbackIf {
			t, err := ParseCanaryTrigger(line)
			if err != nil {
				v.add(at(p+".rollback_if", j), "", err.Error())
				continue
			}
			if t.SLO && !v.canaryHasSLO(c, t.Figure) {
				v.add(at(p+".rollback_if", j), q(line), "no eligible class has an SLO on "+t.Figure+"; want a duration instead of slo")
			}
		}
		if sh := c.Shadow; sh != nil {
			if !(sh.Share > 0 && sh.Share <= 1) {
				v.add(p+".shadow.share", num(sh.Share), "want the share of eligible requests mirrored, in (0, 1]")
			}
			if !(sh.MaxSlots > 0 && sh.MaxSlots <= 1) {
				v.add(p+".shadow.max_slots", num(sh.MaxSlots), "want the share of the candidate's batch slots copies may hold, in (0, 1]")
			}
		}
	}
	// Every model a canary moves must keep a baseline pool.
	for i, c := range s.Canaries {
		base := false
		for _, pl := range s.Pools {
			if _, cand := owner[pl.Name]; !cand && slices.Contains(pl.Models, c.Model) && pl.Replicas > 0 {
				base = true
			}
		}
		if _, ok := models[c.Model]; ok && !base {
			v.add(at("canaries", i)+".candidate", "", "every pool with replicas serving "+c.Model+" is a candidate; want a baseline pool left to roll back to")
		}
	}
}

// canaryHasSLO reports whether an eligible class of c has an objective for
// the figure (ttft or e2e).
func (v *validator) canaryHasSLO(c Canary, figure string) bool {
	for _, cl := range v.s.Classes {
		if len(c.Classes) > 0 && !slices.Contains(c.Classes, cl.Name) {
			continue
		}
		if (figure == FigTTFT && cl.SLO.TTFT > 0) || (figure == FigE2E && cl.SLO.E2E > 0) {
			return true
		}
	}
	return false
}
