package twin

import (
	"math"
	"sort"
	"time"
)

// An autoscaled pool's shortfall: the time it serves fewer replicas than it
// asks for (serving < requested in its series), and what that did to the
// SLOs of the tenants it may serve.
//
// Both the twin and the live Recorder count by the same code: each measured
// request is counted once, when it ends (or in flight at the end), against
// whether each autoscaled pool that may serve it was short when it
// arrived. By then its arrival is in the past, so the pool's series so far
// (the twin's Scaler as it runs) answers as the finished series (the
// Recorder's snapshot, replayed after the replay) does.

// ShortfallTenant is one tenant's measured requests that an autoscaled pool
// may serve (AutoscaleReport.Tenants): of a model the pool serves, in a
// jurisdiction that allows the pool's region. Each is counted by whether the
// pool was short when it arrived, whichever pool served it. Attainment is
// as a group's slo_attainment: finished requests (in flight at the end
// left out) that met every objective of their class; refused, failed and
// timed out ones miss.
type ShortfallTenant struct {
	Arrived          uint64 `json:"arrived"`
	ArrivedShort     uint64 `json:"arrived_short"`
	FinishedShort    uint64 `json:"finished_short"`
	FinishedNotShort uint64 `json:"finished_not_short"`
	// SLOAttainmentShort is of the requests that arrived while the pool
	// was short, SLOAttainmentNotShort of the others.
	// Each is null when none of its requests finished.
	SLOAttainmentShort    Ratio `json:"slo_attainment_short"`
	SLOAttainmentNotShort Ratio `json:"slo_attainment_not_short"`
}

// shortfall counts one autoscaled pool's tenants for its report.
type shortfall struct {
	pool     string
	mayServe [][]bool // [tenant][model]: the pool may serve the request
	short    func(t time.Duration) bool
	tenants  [][2]shortCounts // [tenant][1 if short]
}

type shortCounts struct{ arrived, inFlight, met uint64 }

// watchShortfall counts the requests pool may serve by short(arrival):
// whether the pool was short then.
func (t *tally) watchShortfall(p *plan, pool int, short func(time.Duration) bool) {
	sf := &shortfall{pool: p.pools[pool].Spec.Name, short: short,
		mayServe: make([][]bool, len(p.core.Tenants)), tenants: make([][2]shortCounts, len(p.core.Tenants))}
	for tn := range sf.mayServe {
		sf.mayServe[tn] = make([]bool, len(p.core.Pools[pool].Serves))
		for m := range sf.mayServe[tn] {
			sf.mayServe[tn][m] = p.mayServe(pool, tn, m)
		}
	}
	t.shortfalls = append(t.shortfalls, sf)
}

// ended counts a measured request of tenant for model that arrived at
// arrived and ended (inFlight: was still in flight at the end), met
// whether it met its SLO, in each autoscaled pool that may serve it.
func (t *tally) ended(tenant, model int, arrived time.Duration, met, inFlight bool) {
	for _, sf := range t.shortfalls {
		if row := sf.mayServe[tenant]; model < 0 || model >= len(row) || !row[model] {
			continue
		}
		k := 0
		if sf.short(arrived) {
			k = 1
		}
		c := &sf.tenants[tenant][k]
		c.arrived++
		if inFlight {
			c.inFlight++
		}
		if met {
			c.met++
		}
	}
}

// shortfallTenants is pool's tenant rows: every tenant whose jurisdiction
// lets the pool serve it, so that expectations on them resolve before the
// run.
func (t *tally) shortfallTenants(pool string) map[string]ShortfallTenant {
	for _, sf := range t.shortfalls {
		if sf.pool != pool {
			continue
		}
		out := map[string]ShortfallTenant{}
		for tn, row := range sf.mayServe {
			if !anyTrue(row) {
				continue
			}
			ns, s := sf.tenants[tn][0], sf.tenants[tn][1]
			r := ShortfallTenant{Arrived: ns.arrived + s.arrived, ArrivedShort: s.arrived,
				FinishedShort: s.arrived - s.inFlight, FinishedNotShort: ns.arrived - ns.inFlight}
			r.SLOAttainmentShort = ratioOf(s.met, r.FinishedShort)
			r.SLOAttainmentNotShort = ratioOf(ns.met, r.FinishedNotShort)
			out[t.sc.Tenants[tn].Name] = r
		}
		return out
	}
	return nil
}

func anyTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}

// ShortAt reports whether series (a pool's replicas at each change) was
// short at t: serving fewer replicas than requested.
func ShortAt(series []ReplicaCount, t time.Duration) bool {
	ts := math.Round(t.Seconds()*1e6) / 1e6 // as the series' timestamps
	// The entry in force at ts: the twin asks of a request that ended
	// just now, so mostly the last or one before; else a binary search.
	i := len(series) - 1
	for n := 0; i >= 0 && series[i].TS > ts; n++ {
		if n == 4 {
			i = sort.Search(i, func(j int) bool { return series[j].TS > ts }) - 1
			break
		}
		i--
	}
	return i >= 0 && series[i].Serving < series[i].Requested
}

// shortfallOf is how long series was short within [0, end) seconds, its
// replica-seconds short (∫ requested − serving), and its longest short
// stretch.
func shortfallOf(series []ReplicaCount, end float64) (short, replicaS, longest float64) {
	stretch := 0.0
	for i, c := range series {
		if c.TS >= end {
			break
		}
		next := end
		if i+1 < len(series) {
			next = min(series[i+1].TS, end)
		}
		d := next - c.TS
		if gap := c.Requested - c.Serving; gap > 0 {
			short += d
			replicaS += float64(gap) * d
			stretch += d
			longest = max(longest, stretch)
		} else {
			stretch = 0
		}
	}
	return short, replicaS, longest
}
