// Package scorecard is the portability test for a new capacity source: the
// pools of one provider in a scenario, put through six stages of twin
// drills (workload inventory, runtime parity, latency variance, data
// boundary, fallback readiness, acquisition reliability) and a production
// gate. See docs/scorecard.md.
package scorecard

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/shell"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
)

// Schema is the version of the scorecard's JSON layout.
const Schema = 1

// Multipliers are the load factors the saturation search tries, in order;
// it stops at the first that breaks an SLO.
var Multipliers = []float64{1, 1.5, 2, 3, 4, 6, 8}

// InvalidError is input the scorecard cannot test: an unknown provider, a
// scenario that does not load for reasons other than the provider's
// compatibility.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// Options say what to test.
type Options struct {
	Scenario string   // library name or file; empty: default
	Sets     []string // --set overrides
	Provider string
	// Live replays the latency stage's ×1 drill on the live harness
	// (liverun: Docker) as well.
	Live bool
	// Command is the command line that reproduces the card, quoted into
	// its evidence; empty: derived from the options.
	Command string
	// TrialReplicas is how many replicas of each of the provider's
	// purchasable types are bought for the drills when the provider has
	// no pool in the fleet yet (a capacity source being evaluated before
	// a purchase); 0 means 1.
	TrialReplicas int
	// Acquisition sets the acquisition stage's drill and bars.
	Acquisition AcquisitionOptions
}

// AcquisitionOptions set stage 6; a zero field takes its default.
type AcquisitionOptions struct {
	Seeds int     // DefaultAcquisitionSeeds
	Step  float64 // the load step's multiplier; 0: stage 3's first breaking one
	// Faults are acquisition faults (stockout, quota-cap,
	// slow-provisioning) added to the drill, as written.
	Faults          []string
	MinGrantedShare float64       // DefaultMinGrantedShare
	ServingSlack    time.Duration // DefaultServingSlack
	MaxSLODrop      float64       // DefaultMaxSLODrop
}

func (o AcquisitionOptions) thresholds() AcquisitionThresholds {
	t := AcquisitionThresholds{MinGrantedShare: o.MinGrantedShare, ServingSlackS: o.ServingSlack.Seconds(), MaxSLODrop: o.MaxSLODrop}
	if t.MinGrantedShare == 0 {
		t.MinGrantedShare = DefaultMinGrantedShare
	}
	if o.ServingSlack == 0 {
		t.ServingSlackS = DefaultServingSlack.Seconds()
	}
	if t.MaxSLODrop == 0 {
		t.MaxSLODrop = DefaultMaxSLODrop
	}
	return t
}

// Card is the scorecard.
type Card struct {
	Schema   int      `json:"schema"`
	Scenario string   `json:"scenario"`
	Provider string   `json:"provider"`
	Pools    []string `json:"pools"`
	// Trial says which purchasable types were bought for the drills,
	// when the provider is not in the fleet yet.
	Trial     string     `json:"trial,omitempty"`
	Regions   []string   `json:"regions"`
	Command   string     `json:"command"`
	Inventory *Inventory `json:"inventory,omitempty"`
	Parity    *Parity    `json:"parity"`
	Latency   *Latency   `json:"latency,omitempty"`
	Boundary  *Boundary  `json:"data_boundary,omitempty"`
	Fallback  *Fallback  `json:"fallback,omitempty"`
	// Acquisition is stage 6 (added in schema 1 without a version bump:
	// a new field).
	Acquisition *Acquisition `json:"acquisition,omitempty"`
	Gate        []GateItem   `json:"gate"`
	Passed      bool         `json:"passed"`
	// NotRun says why stages after parity did not run, when they did not.
	NotRun string `json:"not_run,omitempty"`
}

// GateItem is one line of the production gate.
type GateItem struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Untested: the item could not be measured (pass is false); it does
	// not fail the gate, and the gate line says so.
	Untested bool   `json:"untested,omitempty"`
	Evidence string `json:"evidence"`
	Command  string `json:"command"`
}

// Run builds the scorecard. It returns an *InvalidError for input it
// cannot test; any other error is a failure of the twin.
func Run(ctx context.Context, o Options) (*Card, error) {
	if o.Scenario == "" {
		o.Scenario = scenarios.DefaultName
	}
	if o.Provider == "" {
		return nil, &InvalidError{errors.New("scorecard: --provider is required")}
	}
	sc, err := scenarios.LoadNamedWithSets(o.Scenario, o.Sets)
	if err != nil {
		return invalidScenario(o, err)
	}
	pools, regions := providerPools(sc, o.Provider)
	var trial string
	if len(pools) == 0 {
		// A provider offered only as purchasable types: buy a trial
		// allocation of each for the drills, with --set, so that every
		// command the card prints replays the same fleet.
		var names, sets []string
		for i, p := range sc.Purchasable {
			if p.Provider == o.Provider && p.Replicas == 0 {
				n := max(o.TrialReplicas, 1)
				if p.Purchase != nil && p.Purchase.MaxReplicas > 0 {
					n = min(n, p.Purchase.MaxReplicas)
				}
				sets = append(sets, fmt.Sprintf("purchasable[%d].replicas=%d", i, n))
				names = append(names, fmt.Sprintf("%d × %s", n, p.Name))
			}
		}
		if len(sets) > 0 {
			o.Sets = append(slices.Clip(o.Sets), sets...)
			if sc, err = scenarios.LoadNamedWithSets(o.Scenario, o.Sets); err != nil {
				return invalidScenario(o, err)
			}
			pools, regions = providerPools(sc, o.Provider)
			trial = fmt.Sprintf("%s is not in the fleet: the drills buy a trial of its purchasable types (%s)", o.Provider, strings.Join(names, ", "))
		}
	}
	if o.Command == "" {
		o.Command = command(o.Scenario, o.Provider, o.Sets)
	}
	if len(pools) == 0 {
		return nil, &InvalidError{fmt.Errorf("scorecard: no pool of %s has provider %q (providers: %s)",
			sc.Name, o.Provider, strings.Join(providers(sc), ", "))}
	}
	c := &Card{Schema: Schema, Scenario: sc.Name, Provider: o.Provider, Command: o.Command, Trial: trial}
	for _, i := range pools {
		c.Pools = append(c.Pools, sc.Pools[i].Name)
	}
	c.Regions = regions
	d := &drills{ctx: ctx, base: sc, provider: o.Provider, pools: pools, regions: regions, cmd: o.Command,
		scenario: o.Scenario, sets: o.Sets, acqThresholds: o.Acquisition.thresholds(), acqSeeds: o.Acquisition.Seeds,
		acqStepSet: o.Acquisition.Step, acqFaultsSet: o.Acquisition.Faults}
	if d.acqSeeds <= 0 {
		d.acqSeeds = DefaultAcquisitionSeeds
	}
	c.Parity = parity(sc, o.Provider)
	if c.Inventory, err = d.inventory(); err != nil {
		return nil, err
	}
	if c.Latency, err = d.latency(); err != nil {
		return nil, err
	}
	if o.Live {
		if c.Latency.Live, err = d.live(ctx); err != nil {
			return nil, err
		}
	}
	if c.Boundary, err = d.boundary(); err != nil {
		return nil, err
	}
	if c.Fallback, err = d.fallback(); err != nil {
		return nil, err
	}
	if c.Acquisition, err = d.acquisition(c.Latency); err != nil {
		return nil, err
	}
	obs, err := d.observability()
	if err != nil {
		return nil, err
	}
	rb, err := d.rollback(c.Fallback)
	if err != nil {
		return nil, err
	}
	c.Gate = []GateItem{
		c.Parity.gate(compatCmd(o.Scenario, o.Sets)),
		c.Fallback.gate(o.Command),
		c.Latency.gate(),
		c.Boundary.gate(o.Command),
		obs,
		rb,
	}
	c.Gate = append(c.Gate, c.Acquisition.gates()...)
	c.Passed = true
	for _, g := range c.Gate {
		c.Passed = c.Passed && (g.Pass || g.Untested)
	}
	return c, nil
}

// command is the scorecard's own command line.
func command(scenario, provider string, sets []string) string {
	parts := []string{"fleetdrill", "scorecard", scenario, "--provider", provider}
	for _, s := range sets {
		parts = append(parts, "--set", shell.Quote(s))
	}
	return strings.Join(parts, " ")
}

// compatCmd shows the compatibility matrix the parity stage reads.
func compatCmd(scenario string, sets []string) string {
	parts := []string{"fleetdrill", "scenarios", "compat", scenario}
	for _, s := range sets {
		parts = append(parts, "--set", shell.Quote(s))
	}
	return strings.Join(parts, " ")
}

// providerPools lists the indices of the provider's pools and their
// regions, in scenario order.
func providerPools(sc *scenarios.Scenario, provider string) (pools []int, regions []string) {
	for i, p := range sc.Pools {
		if p.Provider == provider {
			pools = append(pools, i)
			if !slices.Contains(regions, p.Region) {
				regions = append(regions, p.Region)
			}
		}
	}
	return pools, regions
}

func providers(sc *scenarios.Scenario) []string {
	var out []string
	for _, p := range sc.Pools {
		if p.Provider != "" && !slices.Contains(out, p.Provider) {
			out = append(out, p.Provider)
		}
	}
	return out
}

// poolProblem matches the validator's compatibility problems on a pool: a
// driver below a runtime's or model's minimum, a runtime or precision that
// cannot serve a listed model.
var poolProblem = regexp.MustCompile(`^pools\[(\d+)\]\.(driver|models\[\d+\])$`)

// invalidScenario decides whether a scenario that fails to load fails only
// because the provider's pools cannot run what they list — a runtime-parity
// failure, which the card reports (no drill can run on such a fleet) — or
// is invalid input.
func invalidScenario(o Options, err error) (*Card, error) {
	var ve *scenarios.ValidationError
	if !errors.As(err, &ve) {
		return nil, &InvalidError{err}
	}
	base, berr := scenarios.LoadNamed(o.Scenario)
	if berr != nil {
		return nil, &InvalidError{err}
	}
	pools, regions := providerPools(base, o.Provider)
	if len(pools) == 0 {
		return nil, &InvalidError{err}
	}
	par := &Parity{Pass: false}
	for _, p := range ve.Problems {
		m := poolProblem.FindStringSubmatch(p.Path)
		if m == nil || !(strings.Contains(p.Msg, "min_driver") || strings.Contains(p.Msg, "runtime") ||
			strings.Contains(p.Msg, "precision")) {
			return nil, &InvalidError{err}
		}
		i, _ := strconv.Atoi(m[1])
		if i >= len(base.Pools) || !slices.Contains(pools, i) {
			return nil, &InvalidError{err}
		}
		pl := base.Pools[i]
		reason := p.Msg
		if p.Value != "" {
			reason = p.Path + ": got " + p.Value + ", " + p.Msg
		}
		for _, mn := range pl.Models {
			par.Checks = append(par.Checks, ParityCheck{Pool: pl.Name, Model: mn, Servable: false, Reasons: []string{reason}})
		}
	}
	par.Mismatches = len(par.Checks)
	c := &Card{Schema: Schema, Scenario: base.Name, Provider: o.Provider, Command: o.Command, Regions: regions,
		Parity: par, NotRun: "the provider's pools cannot run what they list, so the scenario does not validate and no drill can run: " + err.Error()}
	for _, i := range pools {
		c.Pools = append(c.Pools, base.Pools[i].Name)
	}
	c.Gate = []GateItem{par.gate(command(o.Scenario, o.Provider, o.Sets))}
	for _, name := range []string{"quality", "latency budget", "data boundary", "observability", "rollback",
		"acquisition: granted share", "acquisition: time to serving", "acquisition: SLO cost of the shortfall"} {
		c.Gate = append(c.Gate, GateItem{Name: name, Pass: false, Evidence: "not run: runtime parity failed", Command: o.Command})
	}
	return c, nil
}

// Parity is stage 2: can the provider's pools serve the models the fleet
// serves elsewhere, by the compatibility registry.
type Parity struct {
	Pass       bool          `json:"pass"`
	Mismatches int           `json:"mismatches"`
	Checks     []ParityCheck `json:"checks"`
	// NotOffered are models the fleet serves elsewhere that no pool of the
	// provider lists: a coverage gap, not a mismatch.
	NotOffered []string `json:"not_offered,omitempty"`
	// Notes are runtime divergences: the provider serves the model on a
	// different runtime than the rest of the fleet, and whether its driver
	// could run the fleet's runtime too (informational).
	Notes []string `json:"notes,omitempty"`
}

// ParityCheck is one pool of the provider against one model.
type ParityCheck struct {
	Pool     string   `json:"pool"`
	Model    string   `json:"model"`
	Runtime  string   `json:"runtime"`
	Driver   string   `json:"driver"`
	Servable bool     `json:"servable"`
	Tested   bool     `json:"tested"`
	Reasons  []string `json:"reasons,omitempty"`
}

func fleetPool(sc *scenarios.Scenario, p scenarios.Pool) *fleet.Pool {
	// A profile that does not resolve is untested here; the scenario's
	// validation reports why.
	profiles, _ := compile.PoolProfiles(sc, &p, p.Name)
	return &fleet.Pool{Name: p.Name, Region: p.Region, Accelerator: p.Accelerator, GPUsPerReplica: p.GPUsPerReplica,
		Runtime: p.Runtime, Driver: p.Driver, Models: p.Models, Profiles: profiles}
}

func parity(sc *scenarios.Scenario, provider string) *Parity {
	reg := compile.Registry(sc)
	par := &Parity{Pass: true}
	elsewhere := map[string][]scenarios.Pool{} // model -> other providers' pools
	var models []string
	for _, p := range sc.Pools {
		if p.Provider == provider {
			continue
		}
		for _, m := range p.Models {
			if _, ok := elsewhere[m]; !ok {
				models = append(models, m)
			}
			elsewhere[m] = append(elsewhere[m], p)
		}
	}
	for _, m := range models {
		offered := false
		for _, p := range sc.Pools {
			if p.Provider != provider || !slices.Contains(p.Models, m) {
				continue
			}
			offered = true
			v := reg.Check(fleetPool(sc, p), m)
			par.Checks = append(par.Checks, ParityCheck{Pool: p.Name, Model: m, Runtime: p.Runtime, Driver: p.Driver,
				Servable: v.Servable, Tested: v.Tested, Reasons: v.Reasons})
			if !v.Servable {
				par.Pass = false
				par.Mismatches++
			}
			for _, o := range elsewhere[m] {
				if o.Runtime == p.Runtime {
					continue
				}
				alt := fleetPool(sc, p)
				alt.Runtime = o.Runtime
				av := reg.Check(alt, m)
				note := fmt.Sprintf("%s serves %s on %s; %s (%s) serves it on %s", p.Name, m, p.Runtime, o.Name, o.Provider, o.Runtime)
				if av.Servable {
					note += fmt.Sprintf("; driver %s could run %s too", p.Driver, o.Runtime)
				} else {
					note += "; the same runtime would not run here: " + strings.Join(av.Reasons, "; ")
				}
				if !slices.Contains(par.Notes, note) {
					par.Notes = append(par.Notes, note)
				}
			}
		}
		if !offered {
			par.NotOffered = append(par.NotOffered, m)
		}
	}
	return par
}

func (p *Parity) gate(cmd string) GateItem {
	g := GateItem{Name: "runtime parity", Pass: p.Pass, Command: cmd}
	if p.Pass {
		g.Evidence = fmt.Sprintf("%d pool×model pairings servable by the compatibility registry", len(p.Checks))
		return g
	}
	var bad []string
	for _, c := range p.Checks {
		if !c.Servable {
			bad = append(bad, fmt.Sprintf("%s/%s: %s", c.Pool, c.Model, strings.Join(c.Reasons, "; ")))
		}
	}
	g.Evidence = fmt.Sprintf("%d mismatches: %s", p.Mismatches, strings.Join(bad, " | "))
	return g
}

// dur renders a duration for fault lines: whole seconds.
func dur(d time.Duration) string {
	return strconv.FormatInt(int64(d.Round(time.Second)/time.Second), 10) + "s"
}
