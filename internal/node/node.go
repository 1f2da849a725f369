package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/twin/engine"
	"github.com/fleetdrill/fleetdrill/twin/kvlink"
)

// Node is one emulated inference node. Create it with New, start its loop
// with Run, and serve Handler (and AdminHandler on a separate listener).
type Node struct {
	cfg     Config
	clk     clock
	reps    []*replica
	byName  map[string]*replica
	classes map[string]bool // Config.Classes
	metrics *metrics

	addc    chan *job
	cancelc chan *job
	stopped chan struct{} // closed when Run returns

	ids atomic.Uint64 // response ids

	body *httpguard.BodyBudget // Config.MaxBodyBytes, MaxInflightBodyBytes

	// Disaggregated serving (kv.go): nil unless Config.KV. opc runs a
	// handler's operation on the loop; wirec brings pulls' ends.
	kv    *kvState
	opc   chan func(now time.Duration)
	wirec chan wireResult

	mu     sync.Mutex // guards faults and rng
	faults Faults
	rng    *rand.Rand
}

// Faults is the node's application-level fault state, switched by the
// admin API: what TCP-level chaos (toxiproxy) cannot express.
type Faults struct {
	// QuotaExhausted answers every inference request 429 with a
	// Retry-After of RetryAfterSeconds.
	QuotaExhausted    bool `json:"quota_exhausted"`
	RetryAfterSeconds int  `json:"retry_after_s"`
	// Retired models answer 404 model_not_found and leave /v1/models.
	Retired []string `json:"retired"`
	// Driver is the driver version the node reports; a model the
	// compatibility check refuses on it answers 503.
	Driver string `json:"driver"`
	// Link is a decode node's inbound KV link's faults (link-degraded,
	// kv-transfer-failure); zero: none.
	Link LinkFault `json:"link"`
	// ErrorRate is the fraction of otherwise good requests answered 500,
	// drawn from a stream seeded by Config.Seed.
	ErrorRate float64 `json:"error_rate"`
}

// FaultsPatch changes the fields it sets (the admin API's POST body).
type FaultsPatch struct {
	QuotaExhausted    *bool      `json:"quota_exhausted,omitempty"`
	RetryAfterSeconds *int       `json:"retry_after_s,omitempty"`
	Retired           *[]string  `json:"retired,omitempty"`
	Retire            []string   `json:"retire,omitempty"`   // added to Retired
	Unretire          []string   `json:"unretire,omitempty"` // removed from Retired
	Driver            *string    `json:"driver,omitempty"`
	ErrorRate         *float64   `json:"error_rate,omitempty"`
	Link              *LinkFault `json:"link,omitempty"`
}

// DefaultRetryAfter is the Retry-After, in seconds, of quota exhaustion
// switched on without one.
const DefaultRetryAfter = 30

// New returns a node ready to Run.
func New(cfg Config) (*Node, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:     cfg,
		clk:     clock{start: time.Now(), speed: cfg.Speed},
		byName:  map[string]*replica{},
		metrics: newMetrics(&cfg),
		addc:    make(chan *job),
		cancelc: make(chan *job),
		stopped: make(chan struct{}),
		opc:     make(chan func(time.Duration)),
		wirec:   make(chan wireResult),
		faults:  Faults{Driver: cfg.Driver, RetryAfterSeconds: DefaultRetryAfter},
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x6e6f6465)), // "node"
		body:    httpguard.NewBodyBudget(cfg.MaxBodyBytes, cfg.MaxInflightBodyBytes),
	}
	if reg := cfg.Registerer; reg != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetdrill_node_inflight_body_bytes",
			Help: "Request body bytes reserved now, of the in-flight budget (--max-inflight-body)."},
			func() float64 { return float64(n.body.InFlight()) }))
	}
	if cfg.KV != nil {
		k, err := newKVState(*cfg.KV, cfg.Seed)
		if err != nil {
			return nil, err
		}
		n.kv = k
	}
	for i := range n.cfg.Models {
		m := &n.cfg.Models[i]
		kv := m.kvTokens(cfg.KVTokens)
		eng, err := engine.New(engine.Config{Profile: m.Profile, MaxSeqs: cfg.MaxBatch, KVTokens: kv})
		if err != nil {
			return nil, fmt.Errorf("node: model %s: %w", m.Name, err)
		}
		r := &replica{model: m, eng: eng, kvCap: kv, gauges: n.metrics.queueGauges(m.Name), kv: n.kv}
		if n.kv != nil && n.kv.cfg.Role == "decode" {
			if r.link, err = kvlink.New(n.kv.cfg.Bandwidth, n.kv.cfg.Latency); err != nil {
				return nil, fmt.Errorf("node: model %s's KV link: %w", m.Name, err)
			}
			r.pulling = map[uint64]*job{}
		}
		n.reps = append(n.reps, r)
		n.byName[m.Name] = r
	}
	n.classes = map[string]bool{}
	for _, c := range cfg.Classes {
		n.classes[c] = true
	}
	if reg := n.cfg.Registerer; reg != nil {
		reg.MustRegister(newEngineCollector(n))
		if n.cfg.Flavor.vllm() {
			reg.MustRegister(newVLLMCollector(n))
		}
	}
	return n, nil
}

// Faults returns the current fault state.
func (n *Node) Faults() Faults {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.faults
	f.Retired = slices.Clone(f.Retired)
	return f
}

// Patch applies p to the fault state and returns the new state. It changes
// nothing when p is invalid.
func (n *Node) Patch(p FaultsPatch) (Faults, error) {
	f, err := n.patch(p)
	if err == nil && p.Link != nil {
		// Outside the lock: the loop draws from the node's stream.
		err = n.setLink(*p.Link)
	}
	return f, err
}

func (n *Node) patch(p FaultsPatch) (Faults, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.faults
	f.Retired = slices.Clone(f.Retired)
	var errs []error
	if p.QuotaExhausted != nil {
		f.QuotaExhausted = *p.QuotaExhausted
	}
	if p.RetryAfterSeconds != nil {
		if *p.RetryAfterSeconds < 0 {
			errs = append(errs, fmt.Errorf("retry_after_s: got %d, want >= 0", *p.RetryAfterSeconds))
		}
		f.RetryAfterSeconds = *p.RetryAfterSeconds
	}
	if p.Retired != nil {
		f.Retired = slices.Clone(*p.Retired)
	}
	f.Retired = append(f.Retired, p.Retire...)
	f.Retired = slices.DeleteFunc(f.Retired, func(m string) bool { return slices.Contains(p.Unretire, m) })
	slices.Sort(f.Retired)
	f.Retired = slices.Compact(f.Retired)
	for _, m := range f.Retired {
		if n.byName[m] == nil {
			errs = append(errs, fmt.Errorf("retired: %q is not a model this node serves (have %v)", m, n.modelNames()))
		}
	}
	if p.Driver != nil {
		if *p.Driver == "" {
			errs = append(errs, errors.New("driver: empty, want a version such as 550.54"))
		}
		f.Driver = *p.Driver
	}
	if p.ErrorRate != nil {
		if r := *p.ErrorRate; !(r >= 0 && r <= 1) {
			errs = append(errs, fmt.Errorf("error_rate: got %g, want in [0, 1]", r))
		}
		f.ErrorRate = *p.ErrorRate
	}
	if p.Link != nil {
		if err := p.Link.check(); err != nil {
			errs = append(errs, err)
		}
		if *p.Link != (LinkFault{}) && (n.kv == nil || n.kv.cfg.Role != "decode") {
			errs = append(errs, errors.New("link: only a decode node has an inbound KV link (this node serves no disaggregated model's decode pool)"))
		}
		f.Link = *p.Link
	}
	if err := errors.Join(errs...); err != nil {
		return n.faults, err
	}
	n.faults = f
	return f, nil
}

// Reset clears every fault and restores the configured driver.
func (n *Node) Reset() Faults {
	n.mu.Lock()
	link := n.faults.Link != (LinkFault{})
	n.faults = Faults{Driver: n.cfg.Driver, RetryAfterSeconds: DefaultRetryAfter}
	f := n.faults
	n.mu.Unlock()
	if link {
		_ = n.setLink(LinkFault{}) // clears what it set; cannot fail
	}
	return f
}

func (n *Node) modelNames() []string {
	names := make([]string, len(n.cfg.Models))
	for i, m := range n.cfg.Models {
		names[i] = m.Name
	}
	return names
}

// ModelStats is a snapshot of one model's engine.
type ModelStats struct {
	Model            string
	Running, Waiting int
	KVUsed, KVCap    int64
}

// Stats returns a snapshot per served model, as of the loop's last wake-up.
func (n *Node) Stats() []ModelStats {
	out := make([]ModelStats, len(n.reps))
	for i, r := range n.reps {
		out[i] = ModelStats{Model: r.model.Name, Running: int(r.running.Load()), Waiting: int(r.waiting.Load()),
			KVUsed: r.kvUsed.Load(), KVCap: r.kvCap}
	}
	return out
}

// Stopped is closed when Run has returned.
func (n *Node) Stopped() <-chan struct{} { return n.stopped }
