package twin

import (
	"slices"
	"time"
)

// Impact is what a fault did to one tenant or one class: the requests that
// arrived while it was active, how they ended, where the ones it displaced
// were served instead, and the detection, mitigation and recovery as that
// tenant or class saw them. A fault's own mitigation and recovery are its
// worst touched tenant's (see FaultReport): an unbound tenant served in
// another region does not make an outage "mitigated" for a tenant bound to
// the dark one.
type Impact struct {
	// Requests arrived while the fault was active; Displaced are those
	// for a model the fault's pools serve, in a pool the tenant may use
	// (a retirement: for the retired model). A tenant or class with
	// displaced requests is touched.
	Requests  uint64 `json:"requests"`
	Displaced uint64 `json:"displaced"`
	// How the requests that arrived while it was active ended.
	Completed uint64            `json:"completed"`
	Refused   map[string]uint64 `json:"refused"` // by reason
	Failed    uint64            `json:"failed"`
	TimedOut  uint64            `json:"timed_out"`
	Cancelled uint64            `json:"cancelled"`
	// Lost got no answer: refused, failed or timed out.
	Lost uint64 `json:"lost"`
	// ServedElsewhere are displaced requests completed by a replica the
	// fault did not hit (a retirement: by a fallback model), by pool and
	// by the model that answered.
	ServedElsewhere uint64            `json:"served_elsewhere"`
	ServedByPool    map[string]uint64 `json:"served_by_pool"`
	ServedModel     map[string]uint64 `json:"served_model"`
	// SLO attainment of its requests arriving during the fault and in the
	// ten minutes after it ended (a request with no answer is a miss).
	SLOAttainmentDuring Ratio  `json:"slo_attainment_during"`
	SLOAttainmentAfter  Ratio  `json:"slo_attainment_after"`
	FinishedDuring      uint64 `json:"finished_during"`
	FinishedAfter       uint64 `json:"finished_after"`
	// Detection is the gateway's, the same for every tenant. Mitigation:
	// from the fault's start to the first displaced request of this
	// tenant served elsewhere after the detection. Recovery: from the
	// fault's end to the first request of this tenant served after it.
	// Never when it did not happen, or (mitigation) was not needed: no
	// displaced request arrived after the detection.
	TimeToDetectS   Seconds `json:"time_to_detect_s"`
	TimeToMitigateS Seconds `json:"time_to_mitigate_s"`
	TimeToRecoverS  Seconds `json:"time_to_recover_s"`
}

// impactRT accumulates one tenant's or class's Impact during a run.
type impactRT struct {
	Impact
	during, after        sloCount
	needs                bool          // a displaced request arrived after the detection, while active
	sentAfter            bool          // a request arrived after the fault ended
	mitigated, recovered time.Duration // -1: not yet
}

func newImpactRT() *impactRT {
	return &impactRT{mitigated: -1, recovered: -1,
		Impact: Impact{Refused: map[string]uint64{}, ServedByPool: map[string]uint64{}, ServedModel: map[string]uint64{}}}
}

// ending is a finished request as the faults see it.
type ending struct {
	tenant, class  int
	model, served  int // requested; answered (completed requests)
	replica        int // that answered; -1 none
	arrived, ended time.Duration
	met            bool
	result         Result
	reason         string // of a refusal
	canary         int    // the canary (index + 1) an attempt of it was routed to; 0: none
}

// activeAt reports whether the fault was active at t.
func (f *faultRT) activeAt(t time.Duration) bool {
	return t >= f.start && (f.end == 0 || t < f.end)
}

// displacedFor reports whether a request of tenant for model is traffic
// the fault displaced: a retirement's model, or a model one of its pools
// serves in a pool the tenant may use. A canary's candidate pool displaces
// only requests that were routed to its canary: no other route reaches it.
func (p *plan) displacedFor(f *faultRT, tenant, model, canary int) bool {
	if f.eff.onModel() {
		return slices.Contains(f.models, model)
	}
	for _, pi := range f.pools {
		if k := p.candidateOf(pi); k > 0 && k != canary {
			continue
		}
		if p.mayServe(pi, tenant, model) {
			return true
		}
	}
	return false
}

// mayServe reports whether pool may serve a request of tenant for model:
// it serves the model, in a region the tenant's jurisdiction allows.
func (p *plan) mayServe(pool, tenant, model int) bool {
	tj, pl := p.core.Tenants[tenant].Jurisdiction, &p.core.Pools[pool]
	return pl.Serves[model] && (tj == "" || pl.Jurisdiction == tj || p.core.IgnoreResidency)
}

// noteEnding attributes a finished request to every fault's impact on its
// tenant and class.
func noteEnding(p *plan, fs []*faultRT, e *ending) {
	if e.replica >= len(p.replicas) {
		e.replica = -1 // not one of the plan's (a live replay's extra)
	}
	for _, f := range fs {
		f.noteEnding(p, e)
	}
}

func (f *faultRT) noteEnding(p *plan, e *ending) {
	during := f.activeAt(e.arrived)
	after := f.end > 0 && e.arrived >= f.end && e.arrived < f.end+10*time.Minute
	completedLate := e.result == Completed && f.end > 0 && e.ended >= f.end
	if !during && !after && !completedLate {
		return
	}
	displaced := p.displacedFor(f, e.tenant, e.model, e.canary)
	elsewhere := false
	if e.result == Completed && displaced {
		if f.eff.onModel() {
			elsewhere = e.served != e.model
		} else {
			elsewhere = e.replica >= 0 && !slices.Contains(f.replicas, e.replica)
		}
	}
	if f.tenants == nil {
		f.tenants, f.classes = map[int]*impactRT{}, map[int]*impactRT{}
	}
	for i, m := range [2]map[int]*impactRT{f.tenants, f.classes} {
		key := e.tenant
		if i == 1 {
			key = e.class
		}
		im := m[key]
		if im == nil {
			im = newImpactRT()
			m[key] = im
		}
		im.add(p, f, e, during, after, displaced, elsewhere)
	}
}

// add counts e in im (see noteEnding for the flags).
func (im *impactRT) add(p *plan, f *faultRT, e *ending, during, after, displaced, elsewhere bool) {
	if during {
		im.Requests++
		im.during.done++
		if e.met {
			im.during.met++
		}
		switch e.result {
		case Completed:
			im.Completed++
		case Rejected:
			im.Refused[e.reason]++
			im.Lost++
		case Failed:
			im.Failed++
			im.Lost++
		case TimedOut:
			im.TimedOut++
			im.Lost++
		case Cancelled:
			im.Cancelled++
		}
		if displaced {
			im.Displaced++
			if f.detected >= 0 && e.arrived >= f.detected {
				im.needs = true
			}
		}
		if elsewhere {
			im.ServedElsewhere++
			if e.replica >= 0 { // unknown for a live answer without X-Fleetdrill-Replica
				im.ServedByPool[p.pools[p.replicas[e.replica].Pool].Spec.Name]++
			}
			im.ServedModel[p.sc.Models[e.served].Name]++
		}
	}
	if after {
		im.after.done++
		if e.met {
			im.after.met++
		}
	}
	if elsewhere && im.mitigated < 0 && f.detected >= 0 && e.ended >= f.detected && f.activeAt(e.ended) {
		im.mitigated = e.ended
	}
	if f.end > 0 && e.arrived >= f.end {
		im.sentAfter = true
	}
	if e.result == Completed && f.end > 0 && e.ended >= f.end && im.recovered < 0 {
		im.recovered = e.ended
	}
}

// touched reports whether the fault displaced any of im's requests.
func (im *impactRT) touched() bool { return im != nil && im.Displaced > 0 }

// report is im's Impact, with its times relative to the fault.
func (im *impactRT) report(f *faultRT) *Impact {
	if im == nil {
		im = newImpactRT()
	}
	out := im.Impact
	out.SLOAttainmentDuring = ratioOf(im.during.met, im.during.done)
	out.SLOAttainmentAfter = ratioOf(im.after.met, im.after.done)
	out.FinishedDuring, out.FinishedAfter = im.during.done, im.after.done
	out.TimeToDetectS = since(f.detected, f.start)
	out.TimeToMitigateS = Never
	if im.needs {
		out.TimeToMitigateS = since(im.mitigated, f.start)
	}
	out.TimeToRecoverS = Never
	if f.end > 0 && im.touched() {
		out.TimeToRecoverS = since(im.recovered, f.end)
	}
	return &out
}

// mitigatedAt is when the fault was mitigated for every tenant that needed
// it (the latest of their mitigations, and the fleet's first), or -1 with
// the first tenant it is not mitigated for: the gateway serving an unbound
// tenant elsewhere does not mitigate an outage for a tenant only the dark
// pools may serve. stranded is -1 when none is.
func (f *faultRT) mitigatedAt() (at time.Duration, stranded int) {
	at = f.mitigated
	for _, t := range sortedKeys(f.tenants) {
		im := f.tenants[t]
		if !im.needs {
			continue
		}
		if im.mitigated < 0 {
			return -1, t
		}
		at = max(at, im.mitigated)
	}
	return at, -1
}

// recoveredAt is when the fault was recovered: its affected replicas serve
// again and every tenant it touched is served again (the latest), or -1
// while either is not.
func (f *faultRT) recoveredAt() time.Duration {
	at := f.recovered
	if at < 0 {
		return -1
	}
	for _, t := range sortedKeys(f.tenants) {
		im := f.tenants[t]
		if !im.touched() || !im.sentAfter {
			continue // a tenant that sent nothing after the end has nothing to recover
		}
		if im.recovered < 0 {
			return -1
		}
		at = max(at, im.recovered)
	}
	return at
}

// since is t - from in seconds, Never when t is -1 (it did not happen).
func since(t, from time.Duration) Seconds {
	if t < 0 {
		return Never
	}
	return Seconds(round((t - from).Seconds(), 6))
}

func sortedKeys(m map[int]*impactRT) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// candidateOf is the canary (index + 1) whose candidate pool pi is; 0: none.
func (p *plan) candidateOf(pi int) int {
	for k, cr := range p.core.Canaries {
		if slices.Contains(cr.Pools, pi) {
			return k + 1
		}
	}
	return 0
}
