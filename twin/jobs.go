package twin

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/sim"
	"github.com/fleetdrill/fleetdrill/sim/stats"
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

// jobsRT is the runner's job state.
type jobsRT struct {
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

func (r *runner) initJobs() error {
	sc := r.p.sc
	r.jobs.held = make([]int, len(r.p.pools))
	r.jobs.byRepl = make([]*job, len(r.replicas))
	r.jobs.calmUntil = make([]time.Duration, len(r.p.pools))
	for i := range sc.Jobs {
		js := &sc.Jobs[i]
		r.jobs.reports = append(r.jobs.reports, &JobReport{Kind: js.Kind})
		var src jobSource
		if js.Trace != nil {
			ts, err := newJobTraceSource(r.p, js, r.jobs.reports[i])
			if err != nil {
				return fmt.Errorf("jobs %s: %w", js.Name, err)
			}
			src = ts
		} else {
			st := scenarios.Stream{Name: js.Name, Arrivals: js.Arrivals}
			src = &syntheticJobs{spec: js, gen: newGenerator(&st, r.s.Rand("jobs/"+js.Name), r.s.Rand("jobs/"+js.Name+"/unused"), r.duration)}
		}
		r.jobs.sources = append(r.jobs.sources, src)
	}
	return nil
}

func (r *runner) startJobs() {
	for i := range r.jobs.sources {
		r.scheduleJob(i)
	}
}

func (r *runner) scheduleJob(i int) {
	j, ok, err := r.jobs.sources[i].next()
	if err != nil {
		if r.err == nil {
			r.err = fmt.Errorf("jobs %s: %w", r.p.sc.Jobs[i].Name, err)
		}
		return
	}
	if !ok {
		return
	}
	js := &r.p.sc.Jobs[i]
	j.stream, j.window, j.checkpoint, j.preempt = i, js.Window.D(), js.CheckpointInterval.D(), js.Preemptible
	j.id = r.jobs.nextID
	r.jobs.nextID++
	r.s.At(j.submitted, func() { r.submitJob(j) })
}

func (r *runner) submitJob(j *job) {
	r.scheduleJob(j.stream)
	rep := r.jobs.reports[j.stream]
	rep.Submitted++
	if !r.placeable(j) {
		j.state = jobUnplaceable
		rep.Unplaceable++
		return
	}
	r.jobs.pending = append(r.jobs.pending, j)
	r.placeJobs()
}

// eligible reports whether job j may ever run on pool pi.
func (r *runner) eligible(j *job, pi int) bool {
	pp := &r.p.pools[pi]
	if len(j.allowed) > 0 && !slices.Contains(j.allowed, pp.Spec.Accelerator) {
		return false
	}
	if t := r.p.sc.Jobs[j.stream].Tenant; t != "" {
		if tj := r.p.sc.Tenants[r.p.tenants[t]].Jurisdiction; tj != "" && tj != pp.Region.Jurisdiction {
			return false
		}
	}
	return r.jobReplicas(j, pi) <= r.jobCap(pi)
}

// jobReplicas is how many of pool pi's replicas job j needs.
func (r *runner) jobReplicas(j *job, pi int) int {
	g := r.p.pools[pi].Spec.GPUsPerReplica
	return (j.gpus + g - 1) / g
}

// jobCap is how many of pool pi's replicas jobs may hold.
func (r *runner) jobCap(pi int) int {
	return int(math.Floor(r.p.sc.Policy.Jobs.MaxPoolShare * float64(r.poolReplicas(pi))))
}

func (r *runner) poolReplicas(pi int) int {
	n := 0
	for i := range r.replicas {
		if r.replicas[i].pool == pi {
			n++
		}
	}
	return n
}

func (r *runner) placeable(j *job) bool {
	for pi := range r.p.pools {
		if r.eligible(j, pi) {
			return true
		}
	}
	return false
}

// placeJobs starts what it can of the pending jobs, in order, on pools with
// room whose models have nothing queued; while jobs wait it retries every
// 30 s of simulated time.
func (r *runner) placeJobs() {
	now := r.s.Now()
	kept := r.jobs.pending[:0]
	for _, j := range r.jobs.pending {
		if !r.placeJob(now, j) {
			kept = append(kept, j)
		}
	}
	clear(r.jobs.pending[len(kept):])
	r.jobs.pending = kept
	if len(r.jobs.pending) > 0 && !r.jobs.tick.Pending() && now < r.end {
		r.jobs.tick = r.s.After(30*time.Second, r.placeJobs)
	}
}

func (r *runner) placeJob(now time.Duration, j *job) bool {
	for pi := range r.p.pools {
		if !r.eligible(j, pi) || r.jobs.held[pi]+r.jobReplicas(j, pi) > r.jobCap(pi) || r.backlogged(pi) || now < r.jobs.calmUntil[pi] {
			continue
		}
		// The least loaded free replicas drain fastest.
		var free []int
		for ri := range r.replicas {
			// A lost node is no place for a job: it would look idle.
			down := r.faultState != nil && r.faultState[ri].Down
			if r.replicas[ri].pool == pi && r.jobs.byRepl[ri] == nil && !r.replicas[ri].loading && !r.replicas[ri].absent && !down {
				free = append(free, ri)
			}
		}
		need := r.jobReplicas(j, pi)
		if len(free) < need {
			continue
		}
		slices.SortStableFunc(free, func(a, b int) int { return r.core.Inflight(a) - r.core.Inflight(b) })
		j.pool, j.replicas, j.state = pi, append([]int(nil), free[:need]...), jobDraining
		r.jobs.held[pi] += need
		for _, ri := range j.replicas {
			r.jobs.byRepl[ri] = j
			r.core.SetReady(now, ri, false)
		}
		r.jobs.active = append(r.jobs.active, j)
		r.maybeStartJob(j)
		return true
	}
	return false
}

// backlogged reports whether a model pool pi serves has requests queued.
func (r *runner) backlogged(pi int) bool {
	for mi, serves := range r.p.core.Pools[pi].Serves {
		if serves && r.core.QueueLen(mi) > 0 {
			return true
		}
	}
	return false
}

// maybeStartJob starts a draining job once its replicas are empty.
func (r *runner) maybeStartJob(j *job) {
	if j.state != jobDraining {
		return
	}
	for _, ri := range j.replicas {
		if r.core.Inflight(ri) > 0 {
			return
		}
	}
	now := r.s.Now()
	j.state, j.started = jobRunning, now
	rep := r.jobs.reports[j.stream]
	rep.Started++
	if !j.waited {
		j.waited = true
		rep.wait.AddDuration(now - j.submitted)
	}
	j.timer = r.s.After(j.work, func() { r.finishJob(j) })
}

func (r *runner) finishJob(j *job) {
	now := r.s.Now()
	rep := r.jobs.reports[j.stream]
	rep.GPUHoursUsed += (now - j.started).Hours() * float64(j.gpus)
	rep.Completed++
	if j.window == 0 || now-j.submitted <= j.window {
		rep.CompletedInWindow++
	}
	j.state = jobDone
	r.releaseJob(j, true)
	r.placeJobs()
}

// releaseJob gives a job's replicas back to serving: after a cold start if
// the job ran on them (the model was unloaded), at once if it was only
// draining.
func (r *runner) releaseJob(j *job, ran bool) {
	now := r.s.Now()
	r.jobs.held[j.pool] -= len(j.replicas)
	for _, ri := range j.replicas {
		r.jobs.byRepl[ri] = nil
		if !ran {
			r.core.SetReady(now, ri, true)
			r.dispatch()
			continue
		}
		r.replicas[ri].loading = true
		r.pools[j.pool].ColdStarts++
		ri := ri
		r.s.After(r.p.pools[j.pool].Spec.ColdStart.D(), func() {
			r.replicas[ri].loading = false
			if r.jobs.byRepl[ri] == nil {
				r.core.SetReady(r.s.Now(), ri, true)
				r.dispatch()
			}
		})
	}
	j.replicas = nil
	r.jobs.active = slices.DeleteFunc(r.jobs.active, func(x *job) bool { return x == j })
}

// preemptFor stops the most recently started preemptible job on a pool
// serving model m, when m's queue is past the policy's threshold.
func (r *runner) preemptFor(m int) {
	limit := r.p.sc.Policy.Jobs.PreemptQueue
	if limit == 0 || r.core.QueueLen(m) <= limit {
		return
	}
	var victim *job
	for _, j := range r.jobs.active {
		if j.preempt && r.p.core.Pools[j.pool].Serves[m] && (victim == nil || j.started >= victim.started) {
			victim = j
		}
	}
	if victim == nil {
		return
	}
	r.stopJob(victim, fmt.Sprintf("for %s (queue %d)", r.p.sc.Models[m].Name, r.core.QueueLen(m)))
}

// preemptCalm is how long jobs stay off a pool after a preemption there:
// long enough for the replicas given back to reload and drain the queue
// that caused it.
const preemptCalm = 10 * time.Minute

// stopJob preempts a job (for serving, or because a node under it was lost):
// it loses the work since its last checkpoint, gives its replicas back and
// goes to the head of the job queue.
func (r *runner) stopJob(victim *job, why string) {
	now := r.s.Now()
	rep := r.jobs.reports[victim.stream]
	rep.Preemptions++
	r.jobs.calmUntil[victim.pool] = now + preemptCalm
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
	r.event(now, "job-preempted", fmt.Sprintf("%s job %d on pool %s %s", rep.Kind, victim.id,
		r.p.pools[victim.pool].Spec.Name, why))
	r.releaseJob(victim, ran)
	victim.state = jobPending
	r.jobs.pending = append([]*job{victim}, r.jobs.pending...)
	if !r.jobs.tick.Pending() {
		r.jobs.tick = r.s.After(30*time.Second, r.placeJobs)
	}
}

// jobsAtEnd closes the jobs' books for the report.
func (r *runner) jobsAtEnd() {
	now := r.s.Now()
	for _, j := range r.jobs.active {
		rep := r.jobs.reports[j.stream]
		if j.state == jobRunning {
			rep.RunningAtEnd++
			rep.GPUHoursUsed += (now - j.started).Hours() * float64(j.gpus)
		} else {
			rep.PendingAtEnd++ // draining: not started
		}
	}
	for _, j := range r.jobs.pending {
		r.jobs.reports[j.stream].PendingAtEnd++
	}
	r.jobs.active, r.jobs.pending = nil, nil
}
