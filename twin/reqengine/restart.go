package reqengine

import (
	"time"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Restarts is the rule for a replica restarted in place (a lost node back,
// a driver upgrade's restart or rollback), written once for both drivers:
// the replica comes back empty and loads its model again for its pool's
// cold start, during which the core routes nothing to it; a replica
// restarted while it loads keeps its first load; when its load is over the
// core may route to it again, unless something else holds it (a training
// job, its scaler). What a restart does to the work in flight (it fails at
// once, as on a refused connection) and to the instance (an engine
// emptied, a container started again) is the driver's.
//
// Like the rest of the engine it reads no clock: every call takes the
// driver's now.
type Restarts struct {
	until   []time.Duration // per replica: when its load ends; 0: not loading after a restart
	loading int             // replicas with a load under way: NextAt, asked at every wake-up, scans none when 0
}

// NewRestarts returns the restarts of a fleet of n replicas, none loading.
func NewRestarts(n int) *Restarts { return &Restarts{until: make([]time.Duration, n)} }

// Loading reports whether replica r loads after a restart.
func (rs *Restarts) Loading(r int) bool { return rs.until[r] > 0 }

// Restart restarts replica r now, for coldStart: the core takes it out of
// routing until Loaded hands it back. It reports false, and changes
// nothing, when r loads already, after a restart or (busy) for the
// driver's own reason, such as a scaler's cold start: its first load
// stands.
func (rs *Restarts) Restart(now time.Duration, core *sched.Core, r int, busy bool, coldStart time.Duration) bool {
	if busy || rs.Loading(r) {
		return false
	}
	rs.until[r] = now + max(coldStart, 1) // at least a nanosecond: 0 is "not loading"
	rs.loading++
	core.SetReady(now, r, false)
	return true
}

// NextAt is when the next load ends; 0 when none is under way.
func (rs *Restarts) NextAt() time.Duration {
	var next time.Duration
	if rs.loading == 0 {
		return 0
	}
	for _, u := range rs.until {
		if u > 0 && (next == 0 || u < next) {
			next = u
		}
	}
	return next
}

// Loaded ends the loads due by now and returns their replicas in replica
// order; the core routes to each again where serve says nothing else holds
// it (nil: nothing does).
func (rs *Restarts) Loaded(now time.Duration, core *sched.Core, serve func(r int) bool) []int {
	var done []int
	for r, u := range rs.until {
		if u == 0 || u > now {
			continue
		}
		rs.until[r] = 0
		rs.loading--
		done = append(done, r)
		if serve == nil || serve(r) {
			core.SetReady(now, r, true)
		}
	}
	return done
}
