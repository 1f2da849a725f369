package twin

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/sim/stats"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// GPU jobs — training, fine-tuning, batch embedding — share the pools with
// serving. A job needs GPUs on one pool whose accelerator it allows; it
// takes whole replicas out of serving (they stop receiving requests, drain,
// then run the job), never more than policy.jobs.max_pool_share of a pool,
// and only from pools whose models have nothing queued: jobs harvest idle
// capacity. When a model's queue grows past policy.jobs.preempt_queue, the
// most recently started preemptible job on a pool serving it is stopped: it
// loses the work since its last checkpoint, goes back to the head of the job
// queue, and its replicas reload their model (a cold start) before serving
// again.

type jobState uint8

const (
	jobPending jobState = iota
	jobDraining
	jobRunning
	jobDone
	jobUnplaceable
)

type job struct {
	id         int
	stream     int
	gpus       int
	allowed    []string // accelerator names; nil: any
	work       time.Duration
	submitted  time.Duration
	window     time.Duration
	checkpoint time.Duration
	preempt    bool

	state    jobState
	pool     int
	replicas []int
	started  time.Duration
	waited   bool // first start recorded
	timer    sim.Timer
}

// JobReport is the report of one job stream. Every job submitted is
// accounted for once: Submitted = Completed + Unplaceable + PendingAtEnd +
// RunningAtEnd.
type JobReport struct {
	Kind              string        `json:"kind"`
	Submitted         uint64        `json:"submitted"`
	Started           uint64        `json:"started"`
	Completed         uint64        `json:"completed"`
	CompletedInWindow uint64        `json:"completed_in_window"`
	Preemptions       uint64        `json:"preemptions"`
	Unplaceable       uint64        `json:"unplaceable"`
	Filtered          uint64        `json:"filtered"` // trace pods that are not GPU jobs (no GPU); not submitted
	PendingAtEnd      uint64        `json:"pending_at_end"`
	RunningAtEnd      uint64        `json:"running_at_end"`
	GPUHoursUsed      float64       `json:"gpu_hours_used"`
	GPUHoursWasted    float64       `json:"gpu_hours_wasted"` // lost to preemption since the last checkpoint
	Wait              stats.Summary `json:"wait_s"`           // submission to first start

	wait stats.Sketch
}

// Balanced reports whether the jobs' accounting invariant holds.
func (j *JobReport) Balanced() bool {
	return j.Submitted == j.Completed+j.Unplaceable+j.PendingAtEnd+j.RunningAtEnd
}

// jobSource produces a job stream's jobs in time order.
type jobSource interface {
	next() (*job, bool, error)
	close() error
}

// syntheticJobs draws jobs of a fixed shape at the stream's arrivals.
type syntheticJobs struct {
	gen  *generator
	spec *scenarios.JobStream
}

func (s *syntheticJobs) next() (*job, bool, error) {
	t, ok := s.gen.nextTime(s.gen.last)
	if !ok {
		return nil, false, nil
	}
	s.gen.last = t
	return &job{submitted: t, gpus: s.spec.GPUs, allowed: s.spec.Accelerators, work: s.spec.Duration.D()}, true, nil
}

func (s *syntheticJobs) close() error { return nil }

// jobsRT is the run's jobs: their queue, the replicas they hold and their
// reports. It takes replicas from serving and gives them back through the
// core and the replicas' loading flag, and learns what it needs of the rest
// of the run through the few hooks below rather than the runner.
type jobsRT struct {
	p        *plan
	s        *sim.Sim
	core     *sched.Core
	replicas []replicaRT // the runner's: built before the run, never resliced
	pools    []*PoolReport
	end      time.Duration
	down     func(ri int) bool // the replica is down (ground truth): no place for a job
	event    func(at time.Duration, kind, detail string)
	dispatch func()      // replicas came back to serving
	fail     func(error) // a job source failed: the run stops with it

	sources []jobSource
	pending []*job // FIFO; preempted jobs return to the front
	active  []*job // draining or running
	held    []int  // replicas held by jobs, per pool
	reports []*JobReport
	byRepl  []*job // job holding each replica
	// calmUntil holds jobs off a pool after a preemption there, so that a
	// job is not placed in a lull of the queue and preempted again a
	// minute later (a thrash that wastes both the job's work and the
	// replicas' reloads).
	calmUntil []time.Duration
	tick      sim.Timer
	nextID    int
}

func (jobs *jobsRT) init(duration time.Duration) error {
	sc := jobs.p.sc
	jobs.held = make([]int, len(jobs.p.pools))
	jobs.byRepl = make([]*job, len(jobs.replicas))
	jobs.calmUntil = make([]time.Duration, len(jobs.p.pools))
	for i := range sc.Jobs {
		js := &sc.Jobs[i]
		jobs.reports = append(jobs.reports, &JobReport{Kind: js.Kind})
		var src jobSource
		if js.Trace != nil {
			ts, err := newJobTraceSource(jobs.p, js, jobs.reports[i])
			if err != nil {
				return fmt.Errorf("jobs %s: %w", js.Name, err)
			}
			src = ts
		} else {
			st := scenarios.Stream{Name: js.Name, Arrivals: js.Arrivals}
			src = &syntheticJobs{spec: js, gen: newGenerator(&st, jobs.s.Rand("jobs/"+js.Name), jobs.s.Rand("jobs/"+js.Name+"/unused"), duration)}
		}
		jobs.sources = append(jobs.sources, src)
	}
	return nil
}

func (jobs *jobsRT) start() {
	for i := range jobs.sources {
		jobs.schedule(i)
	}
}

func (jobs *jobsRT) schedule(i int) {
	j, ok, err := jobs.sources[i].next()
	if err != nil {
		jobs.fail(fmt.Errorf("jobs %s: %w", jobs.p.sc.Jobs[i].Name, err))
		return
	}
	if !ok {
		return
	}
	js := &jobs.p.sc.Jobs[i]
	j.stream, j.window, j.checkpoint, j.preempt = i, js.Window.D(), js.CheckpointInterval.D(), js.Preemptible
	j.id = jobs.nextID
	jobs.nextID++
	jobs.s.At(j.submitted, func() { jobs.submit(j) })
}

func (jobs *jobsRT) submit(j *job) {
	jobs.schedule(j.stream)
	rep := jobs.reports[j.stream]
	rep.Submitted++
	if !jobs.placeable(j) {
		j.state = jobUnplaceable
		rep.Unplaceable++
		return
	}
	jobs.pending = append(jobs.pending, j)
	jobs.place()
}

// eligible reports whether job j may ever run on pool pi.
func (jobs *jobsRT) eligible(j *job, pi int) bool {
	pp := &jobs.p.pools[pi]
	if len(j.allowed) > 0 && !slices.Contains(j.allowed, pp.Spec.Accelerator) {
		return false
	}
	if t := jobs.p.sc.Jobs[j.stream].Tenant; t != "" {
		if tj := jobs.p.sc.Tenants[jobs.p.tenants[t]].Jurisdiction; tj != "" && tj != pp.Region.Jurisdiction {
			return false
		}
	}
	return jobs.need(j, pi) <= jobs.capOf(pi)
}

// need is how many of pool pi's replicas job j needs.
func (jobs *jobsRT) need(j *job, pi int) int {
	g := jobs.p.pools[pi].Spec.GPUsPerReplica
	return (j.gpus + g - 1) / g
}

// capOf is how many of pool pi's replicas jobs may hold.
func (jobs *jobsRT) capOf(pi int) int {
	return int(math.Floor(jobs.p.sc.Policy.Jobs.MaxPoolShare * float64(jobs.poolReplicas(pi))))
}

func (jobs *jobsRT) poolReplicas(pi int) int {
	n := 0
	for i := range jobs.replicas {
		if jobs.replicas[i].pool == pi {
			n++
		}
	}
	return n
}

func (jobs *jobsRT) placeable(j *job) bool {
	for pi := range jobs.p.pools {
		if jobs.eligible(j, pi) {
			return true
		}
	}
	return false
}

// place starts what it can of the pending jobs, in order, on pools with
// room whose models have nothing queued; while jobs wait it retries every
// 30 s of simulated time.
func (jobs *jobsRT) place() {
	now := jobs.s.Now()
	kept := jobs.pending[:0]
	for _, j := range jobs.pending {
		if !jobs.placeOne(now, j) {
			kept = append(kept, j)
		}
	}
	clear(jobs.pending[len(kept):])
	jobs.pending = kept
	if len(jobs.pending) > 0 && !jobs.tick.Pending() && now < jobs.end {
		jobs.tick = jobs.s.After(30*time.Second, jobs.place)
	}
}

func (jobs *jobsRT) placeOne(now time.Duration, j *job) bool {
	for pi := range jobs.p.pools {
		if !jobs.eligible(j, pi) || jobs.held[pi]+jobs.need(j, pi) > jobs.capOf(pi) || jobs.backlogged(pi) || now < jobs.calmUntil[pi] {
			continue
		}
		// The least loaded free replicas drain fastest.
		var free []int
		for ri := range jobs.replicas {
			// A lost node is no place for a job: it would look idle.
			down := jobs.down(ri)
			if jobs.replicas[ri].pool == pi && jobs.byRepl[ri] == nil && !jobs.replicas[ri].loading && !jobs.replicas[ri].absent && !down {
				free = append(free, ri)
			}
		}
		need := jobs.need(j, pi)
		if len(free) < need {
			continue
		}
		slices.SortStableFunc(free, func(a, b int) int { return jobs.core.Inflight(a) - jobs.core.Inflight(b) })
		j.pool, j.replicas, j.state = pi, append([]int(nil), free[:need]...), jobDraining
		jobs.held[pi] += need
		for _, ri := range j.replicas {
			jobs.byRepl[ri] = j
			jobs.core.SetReady(now, ri, false)
		}
		jobs.active = append(jobs.active, j)
		jobs.maybeStart(j)
		return true
	}
	return false
}

// backlogged reports whether a model pool pi serves has requests queued.
func (jobs *jobsRT) backlogged(pi int) bool {
	for mi, serves := range jobs.p.core.Pools[pi].Serves {
		if serves && jobs.core.QueueLen(mi) > 0 {
			return true
		}
	}
	return false
}

// maybeStart starts a draining job once its replicas are empty.
func (jobs *jobsRT) maybeStart(j *job) {
	if j.state != jobDraining {
		return
	}
	for _, ri := range j.replicas {
		if jobs.core.Inflight(ri) > 0 {
			return
		}
	}
	now := jobs.s.Now()
	j.state, j.started = jobRunning, now
	rep := jobs.reports[j.stream]
	rep.Started++
	if !j.waited {
		j.waited = true
		rep.wait.AddDuration(now - j.submitted)
	}
	j.timer = jobs.s.After(j.work, func() { jobs.finish(j) })
}

func (jobs *jobsRT) finish(j *job) {
	now := jobs.s.Now()
	rep := jobs.reports[j.stream]
	rep.GPUHoursUsed += (now - j.started).Hours() * float64(j.gpus)
	rep.Completed++
	if j.window == 0 || now-j.submitted <= j.window {
		rep.CompletedInWindow++
	}
	j.state = jobDone
	jobs.release(j, true)
	jobs.place()
}

// release gives a job's replicas back to serving: after a cold start if
// the job ran on them (the model was unloaded), at once if it was only
// draining.
func (jobs *jobsRT) release(j *job, ran bool) {
	now := jobs.s.Now()
	jobs.held[j.pool] -= len(j.replicas)
	for _, ri := range j.replicas {
		jobs.byRepl[ri] = nil
		if !ran {
			jobs.core.SetReady(now, ri, true)
			jobs.dispatch()
			continue
		}
		jobs.replicas[ri].loading = true
		jobs.pools[j.pool].ColdStarts++
		ri := ri
		jobs.s.After(jobs.p.pools[j.pool].Spec.ColdStart.D(), func() {
			jobs.replicas[ri].loading = false
			if jobs.byRepl[ri] == nil {
				jobs.core.SetReady(jobs.s.Now(), ri, true)
				jobs.dispatch()
			}
		})
	}
	j.replicas = nil
	jobs.active = slices.DeleteFunc(jobs.active, func(x *job) bool { return x == j })
}

// preemptFor stops the most recently started preemptible job on a pool
// serving model m, when m's queue is past the policy's threshold.
func (jobs *jobsRT) preemptFor(m int) {
	limit := jobs.p.sc.Policy.Jobs.PreemptQueue
	if limit == 0 || jobs.core.QueueLen(m) <= limit {
		return
	}
	var victim *job
	for _, j := range jobs.active {
		if j.preempt && jobs.p.core.Pools[j.pool].Serves[m] && (victim == nil || j.started >= victim.started) {
			victim = j
		}
	}
	if victim == nil {
		return
	}
	jobs.stop(victim, fmt.Sprintf("for %s (queue %d)", jobs.p.sc.Models[m].Name, jobs.core.QueueLen(m)))
}

// preemptCalm is how long jobs stay off a pool after a preemption there:
// long enough for the replicas given back to reload and drain the queue
// that caused it.
const preemptCalm = 10 * time.Minute

// stop preempts a job (for serving, or because a node under it was lost):
// it loses the work since its last checkpoint, gives its replicas back and
// goes to the head of the job queue.
func (jobs *jobsRT) stop(victim *job, why string) {
	now := jobs.s.Now()
	rep := jobs.reports[victim.stream]
	rep.Preemptions++
	jobs.calmUntil[victim.pool] = now + preemptCalm
	ran := victim.state == jobRunning
	if ran {
		victim.timer.Stop()
		elapsed := now - victim.started
		var saved time.Duration
		if victim.checkpoint > 0 {
			saved = elapsed / victim.checkpoint * victim.checkpoint
		}
		rep.GPUHoursUsed += elapsed.Hours() * float64(victim.gpus)
		rep.GPUHoursWasted += (elapsed - saved).Hours() * float64(victim.gpus)
		victim.work -= saved
	}
	jobs.event(now, "job-preempted", fmt.Sprintf("%s job %d on pool %s %s", rep.Kind, victim.id,
		jobs.p.pools[victim.pool].Spec.Name, why))
	jobs.release(victim, ran)
	victim.state = jobPending
	jobs.pending = append([]*job{victim}, jobs.pending...)
	if !jobs.tick.Pending() {
		jobs.tick = jobs.s.After(30*time.Second, jobs.place)
	}
}

// atEnd closes the jobs' books for the report.
func (jobs *jobsRT) atEnd() {
	now := jobs.s.Now()
	for _, j := range jobs.active {
		rep := jobs.reports[j.stream]
		if j.state == jobRunning {
			rep.RunningAtEnd++
			rep.GPUHoursUsed += (now - j.started).Hours() * float64(j.gpus)
		} else {
			rep.PendingAtEnd++ // draining: not started
		}
	}
	for _, j := range jobs.pending {
		jobs.reports[j.stream].PendingAtEnd++
	}
	jobs.active, jobs.pending = nil, nil
}

// holds reports whether a job holds replica ri.
func (jobs *jobsRT) holds(ri int) bool { return jobs.byRepl != nil && jobs.byRepl[ri] != nil }

// drained is told a request left replica ri: a job draining it may start.
func (jobs *jobsRT) drained(ri int) {
	if j := jobs.byRepl[ri]; j != nil {
		jobs.maybeStart(j)
	}
}

// lost is told replica ri went down: a job on it is preempted.
func (jobs *jobsRT) lost(ri int) {
	if jobs.holds(ri) {
		jobs.stop(jobs.byRepl[ri], "(a node under it was lost)")
	}
}
