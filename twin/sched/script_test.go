package sched

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs the scheduler scripts in testdata/scripts: each file
// declares a fleet, builds a core with `config`, and then drives it one input
// at a time, printing every decision the core makes. Time is always explicit
// (at=...): the core is pure, and so is the script.
//
// To regenerate the expected output after a behaviour change:
//
//	go test ./twin/sched -run TestScripts -rewrite
//
// and read the diff: only commit it if you understand what caused it.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		env := newScriptEnv()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out := env.handle(t, td)
			if c := env.core; c != nil {
				// The routing keys are current after every step: each
				// change to what they read fixed them (lessReplica).
				for r := range c.replicas {
					if c.rank[r] != c.rankKey(r) {
						t.Fatalf("%s: after %q, replica %d's routing key is stale", td.Pos, td.Cmd, r)
					}
				}
			}
			return out
		})
	})
}

// scriptEnv is one script's world: the fleet being declared, then the core
// built from it and the requests the script has offered.
type scriptEnv struct {
	cfg  Config
	core *Core

	// Declared by name, resolved when config builds the core, so that a
	// model may name fallbacks declared after it.
	fallbacks [][]string // per model
	serves    [][]string // per pool
	kv        []int64    // per pool: a replica's KV tokens, for every model

	reqs       map[uint64]*Request
	wake       time.Duration // WakeAt as last printed; 0: none
	unroutable []*Request    // taken from Ready, for `unroutable`
}

func newScriptEnv() *scriptEnv {
	return &scriptEnv{reqs: map[uint64]*Request{}}
}

// handle runs one directive and returns what it printed.
func (e *scriptEnv) handle(t *testing.T, td *datadriven.TestData) string {
	var b strings.Builder
	switch td.Cmd {
	case "tenant":
		// Example: tenant name=t1 jurisdiction=eu tpm=6000 concurrency=2 cohort=team weight=2
		e.declaring(t, td)
		checkArgs(t, td, "name", "jurisdiction", "tpm", "concurrency", "cohort", "weight")
		e.cfg.Tenants = append(e.cfg.Tenants, Tenant{
			Name:            str(t, td, "name", ""),
			Jurisdiction:    str(t, td, "jurisdiction", ""),
			Weight:          float(t, td, "weight", 1),
			TokensPerMinute: float(t, td, "tpm", 0),
			MaxConcurrency:  integer(t, td, "concurrency", 0),
			Cohort:          str(t, td, "cohort", ""),
		})

	case "class":
		// Example: class name=interactive priority=10 floor=0.8
		// Example: class name=batch priority=1 deferrable
		e.declaring(t, td)
		checkArgs(t, td, "name", "priority", "deferrable", "floor")
		e.cfg.Classes = append(e.cfg.Classes, Class{
			Name:         str(t, td, "name", ""),
			Priority:     integer(t, td, "priority", 0),
			Deferrable:   td.HasArg("deferrable"),
			QualityFloor: float(t, td, "floor", 0),
		})

	case "model":
		// Example: model name=big quality=0.9 fallbacks=medium,small
		e.declaring(t, td)
		checkArgs(t, td, "name", "quality", "fallbacks")
		e.cfg.Models = append(e.cfg.Models, Model{
			Name:    str(t, td, "name", ""),
			Quality: float(t, td, "quality", 0),
		})
		e.fallbacks = append(e.fallbacks, list(td, "fallbacks"))

	case "pool":
		// Example: pool name=us jurisdiction=us serves=small,big price=4 kv=1000000 rpm=60 tpm=6000
		e.declaring(t, td)
		checkArgs(t, td, "name", "jurisdiction", "serves", "price", "kv", "rpm", "tpm")
		e.cfg.Pools = append(e.cfg.Pools, Pool{
			Name:              str(t, td, "name", ""),
			Jurisdiction:      str(t, td, "jurisdiction", ""),
			PricePerHour:      float(t, td, "price", 1),
			RequestsPerMinute: float(t, td, "rpm", 0),
			TokensPerMinute:   float(t, td, "tpm", 0),
		})
		e.serves = append(e.serves, list(td, "serves"))
		e.kv = append(e.kv, int64(integer(t, td, "kv", 1_000_000)))

	case "replicas":
		// Example: replicas pool=us model=small n=2 batch=4
		//
		// Prints the index of each replica added: later commands name
		// replicas by index, as the core does.
		e.declaring(t, td)
		checkArgs(t, td, "pool", "model", "n", "batch")
		p, m := e.pool(t, td), e.model(t, td, "model")
		for range integer(t, td, "n", 1) {
			e.cfg.Replicas = append(e.cfg.Replicas, Replica{Pool: p, Model: m, MaxBatch: integer(t, td, "batch", 1)})
			fmt.Fprintf(&b, "replica %d: pool %s, model %s, batch %d\n",
				len(e.cfg.Replicas)-1, e.cfg.Pools[p].Name, e.cfg.Models[m].Name, e.cfg.Replicas[len(e.cfg.Replicas)-1].MaxBatch)
		}

	case "config":
		// Example: config policy=fifo queue-limit=4 strategy=least-loaded fallback deadline-check threshold=3 open-for=10s
		// Example: config policy=priority aging=30s queue-limit=4 retry-after=2s defer-for=1m
		//
		// Builds the core from the fleet declared so far; the fleet is
		// fixed from here on. A configuration New refuses prints its error.
		e.declaring(t, td)
		checkArgs(t, td, "policy", "aging", "queue-limit", "strategy", "fallback", "deadline-check",
			"threshold", "open-for", "retry-after", "defer-for")
		e.cfg.Policy = str(t, td, "policy", "fifo")
		e.cfg.Aging = dur(t, td, "aging", 0)
		e.cfg.QueueLimit = integer(t, td, "queue-limit", 0)
		e.cfg.Strategy = Strategy(str(t, td, "strategy", "least-loaded"))
		e.cfg.Fallback = td.HasArg("fallback")
		e.cfg.DeadlineCheck = td.HasArg("deadline-check")
		e.cfg.RetryAfter = dur(t, td, "retry-after", 0)
		e.cfg.DeferFor = dur(t, td, "defer-for", 0)
		e.cfg.Health = Health{Threshold: integer(t, td, "threshold", 0), OpenFor: dur(t, td, "open-for", 0)}
		e.resolve(t)
		c, err := New(e.cfg)
		if err != nil {
			return "error: " + err.Error()
		}
		e.core = c

	case "arrive":
		// Example: arrive id=1 tenant=t1 class=interactive model=big in=100 out=10 deadline=30s at=5s
		//
		// deadline is relative to at. Prints the decision, then any
		// dispatch it made: "dispatched r1 -> replica 2 (eu/small)".
		c := e.running(t, td)
		checkArgs(t, td, "id", "tenant", "class", "model", "in", "out", "deadline", "at")
		now := at(t, td)
		id := uint64(integer(t, td, "id", 0))
		if _, dup := e.reqs[id]; dup {
			td.Fatalf(t, "request %d offered twice", id)
		}
		req := &Request{
			ID:      id,
			Tenant:  e.tenant(t, td),
			Class:   e.class(t, td),
			Model:   e.model(t, td, "model"),
			Input:   integer(t, td, "in", 100),
			Output:  integer(t, td, "out", 10),
			Arrived: now,
		}
		if d := dur(t, td, "deadline", 0); d > 0 {
			req.Deadline = now + d
		}
		e.reqs[id] = req
		e.printDecision(&b, req, c.Arrive(now, req))
		e.printDispatches(&b)

	case "finish":
		// Example: finish id=1 at=6s
		//
		// The request completed (dispatched) or left its queue (expired,
		// cancelled). Prints what the freed capacity dispatched.
		c := e.running(t, td)
		checkArgs(t, td, "id", "at")
		c.Finish(at(t, td), e.req(t, td))
		e.printDispatches(&b)

	case "fail", "ok":
		// Example: fail replica=2 at=7s
		// Example: ok replica=2 at=8s
		//
		// A request or probe on the replica failed (Observe false) or
		// succeeded (Observe true). Prints the breaker transition (from
		// Ready), or the state it stayed in, and what it dispatched.
		c := e.running(t, td)
		checkArgs(t, td, "replica", "at")
		r := e.replica(t, td)
		c.Observe(at(t, td), r, td.Cmd == "ok")
		trs := c.Ready().Transitions
		if len(trs) == 0 {
			br := c.replicas[r].br
			fmt.Fprintf(&b, "replica %d breaker stays %s (consecutive failures %d)\n", r, br.state, br.failures)
		}
		for _, tr := range trs {
			fmt.Fprintf(&b, "%s\n", tr)
		}
		e.printDispatches(&b)

	case "ready":
		// Example: ready replica=2 off at=3s
		// Example: ready replica=2 on at=9s
		c := e.running(t, td)
		checkArgs(t, td, "replica", "on", "off", "at")
		c.SetReady(at(t, td), e.replica(t, td), onOff(t, td))
		e.printDispatches(&b)

	case "blocked":
		// Example: blocked replica=2 on at=3s
		// Example: blocked replica=2 off at=4s
		c := e.running(t, td)
		checkArgs(t, td, "replica", "on", "off", "at")
		c.SetBlocked(at(t, td), e.replica(t, td), onOff(t, td))
		e.printDispatches(&b)

	case "serves":
		// Example: serves pool=us model=big off
		//
		// Prints the route table's version afterwards, and the queued
		// requests no pool serves any more (Ready's Unroutable), which
		// `unroutable` offers again.
		c := e.running(t, td)
		checkArgs(t, td, "pool", "model", "on", "off")
		c.SetServes(e.pool(t, td), e.model(t, td, "model"), onOff(t, td))
		fmt.Fprintf(&b, "route version %d\n", c.Ready().RouteVersion)
		for _, req := range c.Ready().Unroutable {
			fmt.Fprintf(&b, "r%d unroutable (queued for %s)\n", req.ID, e.cfg.Models[req.Served].Name)
		}
		e.printDispatches(&b)

	case "quota":
		// Example: quota pool=us rpm=60 tpm=0 at=10s
		//
		// 0 is unlimited, as in the pool declaration. A raised quota may
		// dispatch queued requests.
		c := e.running(t, td)
		checkArgs(t, td, "pool", "rpm", "tpm", "at")
		c.SetPoolQuota(at(t, td), e.pool(t, td), float(t, td, "rpm", 0), float(t, td, "tpm", 0))
		e.printDispatches(&b)

	case "retiring":
		// Example: retiring model=big on
		c := e.running(t, td)
		checkArgs(t, td, "model", "on", "off")
		c.SetRetiring(e.model(t, td, "model"), onOff(t, td))

	case "unroutable":
		// Example: unroutable at=20s
		//
		// Takes the queued requests no pool serves any more (Ready's
		// Unroutable, since the last `unroutable`) and, like the twin's
		// driver does, finishes each and offers it to admission again at
		// at, printing the new decision.
		c := e.running(t, td)
		checkArgs(t, td, "at")
		now := at(t, td)
		e.printDispatches(&b) // takes Ready, keeping its unroutable requests
		out := e.unroutable
		e.unroutable = nil
		if len(out) == 0 {
			b.WriteString("none\n")
		}
		for _, req := range out {
			fmt.Fprintf(&b, "r%d unroutable (queued for %s): offered again\n", req.ID, e.cfg.Models[req.Served].Name)
			c.Finish(now, req)
			e.printDispatches(&b) // the queue place it left dispatches nothing
			e.printDecision(&b, req, c.Arrive(now, req))
			e.printDispatches(&b)
		}

	case "hedge":
		// Example: hedge id=1 at=3s
		//
		// Sends a duplicate of dispatched request 1 to a second replica.
		c := e.running(t, td)
		checkArgs(t, td, "id", "at")
		req := e.req(t, td)
		if r := c.Hedge(at(t, td), req); r >= 0 {
			rc := e.cfg.Replicas[r]
			fmt.Fprintf(&b, "hedged r%d -> replica %d (%s/%s)\n", req.ID, r, e.cfg.Pools[rc.Pool].Name, e.cfg.Models[rc.Model].Name)
		} else {
			fmt.Fprintf(&b, "r%d: no hedge\n", req.ID)
		}

	case "end-hedge":
		// Example: end-hedge id=1 winner=hedge at=4s
		// Example: end-hedge id=1 winner=original at=4s
		//
		// One attempt produced the first token: the other is cancelled.
		// Prints what the freed slot dispatched.
		c := e.running(t, td)
		checkArgs(t, td, "id", "winner", "at")
		w := str(t, td, "winner", "")
		if w != "hedge" && w != "original" {
			td.Fatalf(t, "winner=%q: want hedge or original", w)
		}
		c.EndHedge(at(t, td), e.req(t, td), w == "hedge")
		e.printDispatches(&b)

	case "tick":
		// Example: tick at=1m
		c := e.running(t, td)
		checkArgs(t, td, "at")
		c.Tick(at(t, td))
		e.printDispatches(&b)

	case "queues":
		// Example: queues
		//
		// Prints each model's queue length and the requests in it, by ID
		// (not in dispatch order).
		c := e.running(t, td)
		checkArgs(t, td)
		for m, md := range e.cfg.Models {
			fmt.Fprintf(&b, "%s: %d%s\n", md.Name, c.QueueLen(m), e.ids(func(r *Request) bool {
				return r.queue >= 0 && r.Served == m
			}))
		}

	case "inflight":
		// Example: inflight
		//
		// Prints each replica's load, the requests on it (a hedged
		// duplicate as r1'), and why it takes
		// nothing (not ready, blocked, breaker not closed). NB: it reads the
		// core's own flags rather than asking Breaker, which would move an
		// open breaker on.
		c := e.running(t, td)
		checkArgs(t, td)
		for r := range e.cfg.Replicas {
			rs := &c.replicas[r]
			rc := e.cfg.Replicas[r]
			fmt.Fprintf(&b, "replica %d (%s/%s): %d/%d%s", r, e.cfg.Pools[rc.Pool].Name, e.cfg.Models[rc.Model].Name,
				c.Inflight(r), rc.MaxBatch, e.onReplica(r))
			if !rs.ready {
				b.WriteString(" not-ready")
			}
			if rs.blocked {
				b.WriteString(" blocked")
			}
			if rs.br.state != Closed {
				fmt.Fprintf(&b, " breaker-%s", rs.br.state)
			}
			b.WriteString("\n")
		}

	case "breakers":
		// Example: breakers at=12s
		//
		// NB: Breaker is the core's query, and it moves an open breaker
		// whose OpenFor has passed to half-open: asking changes routing.
		c := e.running(t, td)
		checkArgs(t, td, "at")
		now := at(t, td)
		for r := range e.cfg.Replicas {
			fmt.Fprintf(&b, "replica %d: %s\n", r, c.Breaker(now, r))
		}

	case "wake":
		// Example: wake
		c := e.running(t, td)
		checkArgs(t, td)
		if w := c.Ready().WakeAt; w > 0 {
			fmt.Fprintf(&b, "wake at %s\n", w)
		} else {
			b.WriteString("no wake\n")
		}

	case "skipped":
		// Example: skipped
		//
		// Prints the core's counts of why routing passed pools over.
		c := e.running(t, td)
		checkArgs(t, td)
		keys := make([]string, 0, len(c.Skipped))
		for k := range c.Skipped {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s: %d\n", k, c.Skipped[k])
		}
		if len(keys) == 0 {
			b.WriteString("none\n")
		}

	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	e.printWake(&b)
	return b.String()
}

// printDecision prints Arrive's answer for req.
func (e *scriptEnv) printDecision(b *strings.Builder, req *Request, d Decision) {
	fmt.Fprintf(b, "r%d: %s", req.ID, d.Outcome)
	switch d.Outcome {
	case Queued:
		fmt.Fprintf(b, " for %s", e.cfg.Models[req.Served].Name)
	case Rejected, Deferred:
		fmt.Fprintf(b, " (%s), retry after %s", d.Reason, d.RetryAfter)
	}
	if req.Fallback {
		fmt.Fprintf(b, " (fallback from %s)", e.cfg.Models[req.Model].Name)
	}
	b.WriteString("\n")
	if d.Detail != "" {
		fmt.Fprintf(b, "  %s\n", d.Detail)
	}
}

// printDispatches prints what the core dispatched since it last advanced,
// and advances it, keeping its unroutable requests for `unroutable`.
func (e *scriptEnv) printDispatches(b *strings.Builder) {
	rd := e.core.Ready()
	for _, x := range rd.Dispatches {
		r := e.cfg.Replicas[x.Replica]
		fmt.Fprintf(b, "dispatched r%d -> replica %d (%s/%s)\n", x.Req.ID, x.Replica,
			e.cfg.Pools[r.Pool].Name, e.cfg.Models[r.Model].Name)
	}
	e.unroutable = append(e.unroutable, rd.Unroutable...)
	e.core.Advance()
}

// printWake prints WakeAt whenever it changed since it was last printed, as
// a driver rearming its timer would see it.
func (e *scriptEnv) printWake(b *strings.Builder) {
	if e.core == nil {
		return
	}
	w := e.core.Ready().WakeAt
	if w == e.wake {
		return
	}
	e.wake = w
	if w == 0 {
		b.WriteString("wake cleared\n")
	} else {
		fmt.Fprintf(b, "wake at %s\n", w)
	}
}

// ids lists, sorted, the requests that match, as " [r1 r2]", or "".
func (e *scriptEnv) ids(match func(*Request) bool) string {
	var ids []uint64
	for id, r := range e.reqs {
		if match(r) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = "r" + strconv.FormatUint(id, 10)
	}
	return " [" + strings.Join(parts, " ") + "]"
}

// onReplica lists, sorted, the requests running on replica r, a hedged
// duplicate as r1', as " [r1 r2']", or "".
func (e *scriptEnv) onReplica(r int) string {
	var ids []uint64
	hedge := map[uint64]bool{}
	for id, q := range e.reqs {
		switch {
		case q.Replica == r:
			ids = append(ids, id)
		case q.Hedge == r:
			ids = append(ids, id)
			hedge[id] = true
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = "r" + strconv.FormatUint(id, 10)
		if hedge[id] {
			parts[i] += "'"
		}
	}
	return " [" + strings.Join(parts, " ") + "]"
}

// resolve turns the names declared with models and pools into indexes.
func (e *scriptEnv) resolve(t *testing.T) {
	byName := func(name string) int {
		i := slices.IndexFunc(e.cfg.Models, func(m Model) bool { return m.Name == name })
		if i < 0 {
			t.Fatalf("unknown model %q", name)
		}
		return i
	}
	for m, names := range e.fallbacks {
		e.cfg.Models[m].Fallbacks = nil
		for _, n := range names {
			e.cfg.Models[m].Fallbacks = append(e.cfg.Models[m].Fallbacks, byName(n))
		}
	}
	for p, names := range e.serves {
		pl := &e.cfg.Pools[p]
		pl.Serves = make([]bool, len(e.cfg.Models))
		pl.KVTokens = make([]int64, len(e.cfg.Models))
		for m := range e.cfg.Models {
			pl.KVTokens[m] = e.kv[p]
		}
		for _, n := range names {
			pl.Serves[byName(n)] = true
		}
	}
}

func (e *scriptEnv) declaring(t *testing.T, td *datadriven.TestData) {
	if e.core != nil {
		td.Fatalf(t, "%s: the fleet is fixed once config has built the core", td.Cmd)
	}
}

func (e *scriptEnv) running(t *testing.T, td *datadriven.TestData) *Core {
	if e.core == nil {
		td.Fatalf(t, "%s: no core yet (declare the fleet, then config)", td.Cmd)
	}
	return e.core
}

// index finds the entry of xs named by the command's key= argument.
func index[T any](t *testing.T, td *datadriven.TestData, key, what string, xs []T, name func(T) string) int {
	n := str(t, td, key, "")
	i := slices.IndexFunc(xs, func(x T) bool { return name(x) == n })
	if i < 0 {
		td.Fatalf(t, "unknown %s %q", what, n)
	}
	return i
}

func (e *scriptEnv) tenant(t *testing.T, td *datadriven.TestData) int {
	return index(t, td, "tenant", "tenant", e.cfg.Tenants, func(x Tenant) string { return x.Name })
}

func (e *scriptEnv) class(t *testing.T, td *datadriven.TestData) int {
	return index(t, td, "class", "class", e.cfg.Classes, func(x Class) string { return x.Name })
}

func (e *scriptEnv) model(t *testing.T, td *datadriven.TestData, key string) int {
	return index(t, td, key, "model", e.cfg.Models, func(x Model) string { return x.Name })
}

func (e *scriptEnv) pool(t *testing.T, td *datadriven.TestData) int {
	return index(t, td, "pool", "pool", e.cfg.Pools, func(x Pool) string { return x.Name })
}

func (e *scriptEnv) replica(t *testing.T, td *datadriven.TestData) int {
	r := integer(t, td, "replica", -1)
	if r < 0 || r >= len(e.cfg.Replicas) {
		td.Fatalf(t, "replica %d: want 0..%d", r, len(e.cfg.Replicas)-1)
	}
	return r
}

func (e *scriptEnv) req(t *testing.T, td *datadriven.TestData) *Request {
	id := uint64(integer(t, td, "id", 0))
	r, ok := e.reqs[id]
	if !ok {
		td.Fatalf(t, "request %d was never offered", id)
	}
	return r
}

// checkArgs fails the script on an argument the command does not take, so a
// typo is not silently ignored.
func checkArgs(t *testing.T, td *datadriven.TestData, keys ...string) {
	for _, a := range td.CmdArgs {
		if !slices.Contains(keys, a.Key) {
			td.Fatalf(t, "%s: unknown argument %q (want %s)", td.Cmd, a.Key, strings.Join(keys, ", "))
		}
	}
}

// arg reads key=V as a T (string, int, float64, bool), or def when absent.
func arg[T any](t *testing.T, td *datadriven.TestData, key string, def T) T {
	if !td.HasArg(key) {
		return def
	}
	var v T
	td.ScanArgs(t, key, &v)
	return v
}

func str(t *testing.T, td *datadriven.TestData, key, def string) string { return arg(t, td, key, def) }

func integer(t *testing.T, td *datadriven.TestData, key string, def int) int {
	return arg(t, td, key, def)
}

func float(t *testing.T, td *datadriven.TestData, key string, def float64) float64 {
	return arg(t, td, key, def)
}

func dur(t *testing.T, td *datadriven.TestData, key string, def time.Duration) time.Duration {
	if !td.HasArg(key) {
		return def
	}
	d, err := time.ParseDuration(str(t, td, key, ""))
	if err != nil {
		td.Fatalf(t, "%s: %v", key, err)
	}
	return d
}

// at is the command's time, which every input to the core must carry.
func at(t *testing.T, td *datadriven.TestData) time.Duration {
	if !td.HasArg("at") {
		td.Fatalf(t, "%s: at= is required: the core never reads a clock", td.Cmd)
	}
	return dur(t, td, "at", 0)
}

// list reads key=a,b or key=(a, b) as a list of names.
func list(td *datadriven.TestData, key string) []string {
	arg, ok := td.Arg(key)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range arg.Vals {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func onOff(t *testing.T, td *datadriven.TestData) bool {
	on, off := td.HasArg("on"), td.HasArg("off")
	if on == off {
		td.Fatalf(t, "%s: want exactly one of on, off", td.Cmd)
	}
	return on
}
