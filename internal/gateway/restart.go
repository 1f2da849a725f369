package gateway

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/reqengine"
)

// Restarts: a replica restarted in place (a lost node back, a driver
// upgrade's restart) comes back empty and loads its model again before it
// serves, by the engine's rule (reqengine.Restarts, which the twin's
// restartReplica follows too): the core routes nothing to it for its
// pool's cold_start of model time, a replica restarted while it loads
// keeps its first load, and then the core may route to it again. What is
// the gateway's: the work in flight fails at once (the fault layer refuses
// the replica while it loads), and the prober leaves it alone (the twin
// probes no loading replica, so its breaker stays as the restart found
// it). The harness (internal/liverun) calls Restart at the instant the twin
// restarts; what it does to the instance (a container or in-process node
// started again, an external server left alone) is its own.

// restarts is the gateway's replicas loading after a restart: the
// engine's (EngineConfig.Restarts), and the fault layer's cuts. Guarded by
// the gateway's mu.
type restarts struct {
	*reqengine.Restarts
	cut []func() // per replica: removes the fault-layer injection that fails its work while it loads
	// taken and done gather Ready.Restarted and Ready.Loaded (deliver)
	// for the call that stepped them (Restart, onWake).
	taken, done []int
}

// loading says whether replica i is loading after a restart. Called with mu
// held.
func (r *restarts) loading(i int) bool { return r.Loading(i) }

// Restart restarts the given replicas (as ReplicaIndex numbers them) now,
// under reqengine.Restarts' rule (see restarts). It returns the replicas it
// restarted (those not loading already), and an error naming any replica
// out of range, in which case it restarts none.
func (g *Gateway) Restart(replicas []int) ([]int, error) {
	var errs []error
	for _, r := range replicas {
		if r < 0 || r >= len(g.replicas) {
			errs = append(errs, fmt.Errorf("replica %d: want in [0, %d)", r, len(g.replicas)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gateway: restart: %w", err)
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil
	}
	now := g.clk.now()
	for _, r := range replicas {
		g.stepLocked(now, reqengine.Event{Kind: reqengine.Restart, Replica: r, After: coldStart(g.sc.Pools, g.replicas[r].pool)})
	}
	fresh := g.rs.taken
	g.rs.taken = nil
	g.mu.Unlock()
	if len(fresh) == 0 {
		return nil, nil
	}
	// What the replicas had in flight fails at once, as on a refused
	// connection (the fault layer cuts open streams); nothing new reaches
	// them while they load. The fault layer's lock is never taken with
	// the gateway's, so this is outside it.
	rms := make([]func(), len(fresh))
	for i, r := range fresh {
		rm, err := g.faults.Inject([]int{r}, UpstreamFault{Kind: "restart", Down: DownRefuse})
		if err != nil {
			return nil, err // a replica in range always injects: a gateway bug
		}
		rms[i] = rm
	}
	g.mu.Lock()
	var late []func()
	for i, r := range fresh {
		if !g.rs.loading(r) {
			late = append(late, rms[i]) // loaded already (a zero cold start)
			continue
		}
		g.rs.cut[r] = rms[i]
	}
	g.mu.Unlock()
	for _, f := range late {
		f()
	}
	g.log.Info("replicas restarted: loading their model", "replicas", fresh, "pools", g.faults.poolsOf(fresh))
	return fresh, nil
}

// loaded ends the fault-layer cut of the replicas whose load after a
// restart is over (the engine made them routable again where nothing
// holds them): called by onWake, without mu, with the replicas the Tick
// loaded.
func (g *Gateway) loaded(done []int, cuts []func()) {
	for _, c := range cuts {
		c()
	}
	if len(done) > 0 {
		g.log.Info("replicas loaded after a restart: routable again", "replicas", done)
	}
}

// probedLocked says whether replica i is probed now: not while it loads
// after a restart (the twin probes no loading replica), and an autoscaled
// one only while its instance runs. Called with mu held.
func (g *Gateway) probedLocked(i int) bool {
	return !g.rs.loading(i) && g.as.probed(i)
}

// coldStart is the cold start of the pool named pool.
func coldStart(pools []scenarios.Pool, pool string) time.Duration {
	i := slices.IndexFunc(pools, func(p scenarios.Pool) bool { return p.Name == pool })
	return pools[i].ColdStart.D()
}
