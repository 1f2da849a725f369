package faults

import (
	"fmt"
	"slices"
	"time"
)

// Keys of the text form, in the order String prints them. The kind comes
// first and is not a key.
var keyOrder = []string{
	"region", "pool", "provider", "model", "tenant", "accelerator", // targets
	"at", "for", // when
	"count", "percent", // blast radius
	"fail", "latency", // brownout, latency, error-burst
	"rpm", "tpm", // quota-exhaustion
	"notice",            // model-retirement
	"driver", "runtime", // driver-upgrade
	"grant",     // stockout
	"gpus",      // quota-cap
	"factor",    // slow-provisioning
	"bandwidth", // link-degraded
	"timeout",   // kv-transfer-failure
}

// entry is one kind of the catalogue: what it does, which keys it takes and
// the rules its values follow, and what the backends need to know of it.
type entry struct {
	kind   Kind
	effect string // what the fault does, for help texts
	usage  string // its keys, as a synopsis; a test checks it against takes
	takes  []string
	// target is the group of target keys of which the kind needs exactly
	// one; target keys in takes but not here are optional narrowings.
	target []string
	// rules adds the kind's problems beyond the keys it takes and its
	// target (kindProblems): the keys it needs, those that go together;
	// nil when it has none.
	rules func(s Spec, add func(key, value, msg string, also ...string))
	// radius is the blast radius Parse gives a spec of the kind that
	// leaves out count= and percent=; zero (all replicas) for most.
	radius Radius
	traits Traits // what the backends need to know of it (traits.go)
}

// consoleDriver is the driver the console's driver-upgrade key upgrades
// to (its Console spec, and its help line says so).
const consoleDriver = "535.104"

// catalogue lists every kind in the order Kinds returns them and the docs
// table lists them.
//
// NB: for= on model-retirement and driver-upgrade undoes them when it runs
// out (the model is served again; the old driver and runtime come back, with
// another restart). cold-start-storm takes no for=: a storm lasts as long as
// the replicas take to reload, which is the pool's cold_start, not something
// the fault chooses. No kind takes tenant= yet: it is reserved for faults on
// one tenant's requests, and is refused until an injector implements it
// rather than silently ignored.
var catalogue = []entry{
	{kind: RegionalOutage, effect: "every pool of a region stops serving",
		usage:  "region=NAME at=D [for=D]",
		takes:  []string{"region", "at", "for"},
		target: []string{"region"},
		traits: Traits{Live: LiveProxy, ConsoleOn: "region",
			ConsoleKey: ConsoleKey{Key: "o", Label: "outage", Help: "regional outage (pool's region)", Rank: 1},
			Words:      []string{"outage", "regional outage"}}},
	{kind: Brownout, effect: "a region or pool fails a fraction of requests and/or slows every request",
		usage:  "region=NAME|pool=NAME at=D [for=D] [count=N|percent=P] fail=F and/or latency=D",
		takes:  []string{"region", "pool", "at", "for", "count", "percent", "fail", "latency"},
		target: []string{"region", "pool"},
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.FailRate == 0 && s.AddLatency == 0 {
				add("fail", "", "brownout needs fail=, latency= or both", "latency")
			}
		},
		// The console's brownout is a sick region, not a dead one: a fifth
		// of requests fail and every one takes 200 ms longer.
		traits: Traits{Live: LiveProxy | LiveGateway, ConsoleOn: "region",
			Console:    Spec{FailRate: 0.2, AddLatency: 200 * time.Millisecond},
			ConsoleKey: ConsoleKey{Key: "b", Label: "brownout", Help: "brownout (pool's region)", Rank: 2},
			Words:      []string{"brownout"}}},
	{kind: QuotaExhaustion, effect: "a provider's or pool's rate limit drops to rpm/tpm (zero when left out)",
		usage:  "pool=NAME|provider=NAME at=D [for=D] [rpm=X tpm=X]",
		takes:  []string{"pool", "provider", "at", "for", "rpm", "tpm"},
		target: []string{"pool", "provider"},
		// NB: a zero quota lets nothing through, so one of rpm/tpm left at
		// zero would make the other meaningless; "rpm=100" alone reads as if
		// tokens were unaffected, so it is refused rather than silently
		// blocking everything.
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			for _, pair := range [][2]string{{"rpm", "tpm"}, {"tpm", "rpm"}} {
				zero, other := pair[0], pair[1]
				if _, set := s.value(zero); !set {
					if _, set := s.value(other); set {
						add(zero, "", fmt.Sprintf("zero (or left out) while %s=%s, and a zero quota lets no request through; give both rpm= and tpm=, or neither for a quota of zero",
							other, s.shown(other)), other)
					}
				}
			}
		},
		traits: Traits{Live: LiveGateway, DetectStatus: 429, ConsoleOn: "provider",
			ConsoleKey: ConsoleKey{Key: "x", Label: "quota", Help: "quota exhaustion (pool's provider)", Rank: 3},
			Words:      []string{"quota exhaustion"},
			liveLimit: func(s Spec) string {
				if s.QuotaRPM != 0 || s.QuotaTPM != 0 {
					return "the live gateway emulates a quota of zero only"
				}
				return ""
			}}},
	{kind: ModelRetirement, effect: "a model is withdrawn from every pool (or from one), new sessions steered away notice= before",
		usage:  "model=NAME [pool=NAME] at=D [for=D] [notice=D]",
		takes:  []string{"pool", "model", "at", "for", "notice"},
		target: []string{"model"},
		traits: Traits{Live: LiveGateway, DetectStatus: 404, FromNotice: true, ConsoleOn: "model",
			ConsoleKey: ConsoleKey{Key: "r", Label: "retire", Help: "model retirement (route's model)", Rank: 6},
			Words:      []string{"retirement", "model retirement"}}},
	{kind: DriverUpgrade, effect: "a pool's replicas restart on a new driver (and runtime), rolled back after for=",
		usage:  "pool=NAME at=D [for=D] driver=VERSION [runtime=NAME]",
		takes:  []string{"pool", "at", "for", "driver", "runtime"},
		target: []string{"pool"},
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.Driver == "" {
				add("driver", "", "driver-upgrade needs driver= (the new version, like 535.104.05)")
			}
		},
		// The console upgrades to 535.104, below the 550.54 that CUDA 12.4
		// needs (vllm-0.6.3, the runtime of the library's scenarios), so the
		// upgraded pool can serve nothing: the botched rollout an operator
		// rehearses. A pool whose runtime accepts it just restarts.
		traits: Traits{Live: LiveGateway, ConsoleOn: "pool", Console: Spec{Driver: consoleDriver}, Restarts: Restarts{AtStart: true, AtEnd: true},
			ConsoleKey: ConsoleKey{Key: "d", Label: "driver", Help: "driver upgrade to " + consoleDriver + " (pool)", Rank: 5},
			Words:      []string{"driver upgrade", "upgrade"},
			liveLimit: func(s Spec) string {
				if s.Driver == "" {
					return "a runtime-only upgrade has no live emulation"
				}
				return ""
			}}},
	{kind: NodeLoss, effect: "replicas of a pool fail (one unless count= or percent= says otherwise)",
		usage:  "pool=NAME at=D [for=D] [count=N|percent=P]",
		takes:  []string{"pool", "at", "for", "count", "percent"},
		target: []string{"pool"},
		// NB: Parse gives count=1 when both are left out (radius), so that
		// the zero Radius means "all replicas" for every kind, injectors
		// included.
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.Radius == (Radius{}) {
				add("count", "", "node-loss needs count= or percent= (Parse sets count=1 when both are left out)", "percent")
			}
		},
		radius: Radius{Count: 1},
		traits: Traits{Live: LiveContainer, ConsoleOn: "pool", Console: Spec{Radius: Radius{Count: 1}}, Restarts: Restarts{AtEnd: true},
			ConsoleKey: ConsoleKey{Key: "n", Label: "node", Help: "node loss (1 replica of the pool)", Rank: 4},
			Words:      []string{"node loss"}}},
	{kind: Latency, effect: "requests to a region, pool or model take longer",
		usage:  "region=NAME|pool=NAME|model=NAME at=D [for=D] latency=D",
		takes:  []string{"region", "pool", "model", "at", "for", "latency"},
		target: []string{"region", "pool", "model"},
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.AddLatency == 0 {
				add("latency", "", "latency needs latency= (the added latency, > 0)")
			}
		},
		// Two seconds: as much as the interactive TTFT SLO of the library,
		// so that it shows.
		traits: Traits{Live: LiveProxy, ConsoleOn: "pool", Console: Spec{AddLatency: 2 * time.Second},
			ConsoleKey: ConsoleKey{Key: "l", Label: "latency", Help: "latency +2s (pool)", Rank: 7},
			Words:      []string{"latency fault", "latency injection"}}},
	{kind: ErrorBurst, effect: "a fraction of requests to a region, pool or model fail",
		usage:  "region=NAME|pool=NAME|model=NAME at=D [for=D] fail=F",
		takes:  []string{"region", "pool", "model", "at", "for", "fail"},
		target: []string{"region", "pool", "model"},
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.FailRate == 0 {
				add("fail", "", "error-burst needs fail= (the fraction of requests that fail, 0 < fail <= 1)")
			}
		},
		traits: Traits{Live: LiveGateway, ConsoleOn: "pool", Console: Spec{FailRate: 0.5},
			ConsoleKey: ConsoleKey{Key: "f", Label: "errors", Help: "error burst 50% (pool)", Rank: 8},
			Words:      []string{"error burst"}}},
	{kind: ColdStartStorm, effect: "replicas of a pool or region reload their model at once (all unless count= or percent= says otherwise)",
		usage:  "region=NAME|pool=NAME at=D [count=N|percent=P]",
		takes:  []string{"region", "pool", "at", "count", "percent"},
		target: []string{"region", "pool"},
		traits: Traits{NotLive: "cold-start storms have no live emulation (nodes cannot reload a model)", ConsoleOn: "pool", Restarts: Restarts{AtStart: true},
			ConsoleKey: ConsoleKey{Key: "c", Label: "cold", Help: "cold-start storm (pool)", Rank: 9},
			Words:      []string{"cold-start storm"}}},
	{kind: Stockout, effect: "an autoscaled pool's provider grants no new replicas (or only grant= of them)",
		usage:  "region=NAME|pool=NAME|provider=NAME [accelerator=NAME] at=D [for=D] [grant=F]",
		takes:  []string{"region", "pool", "provider", "accelerator", "at", "for", "grant"},
		target: []string{"region", "pool", "provider"},
		traits: Traits{Live: LiveAcquisition, ConsoleOn: "provider",
			Words: []string{"stockout"}}},
	{kind: QuotaCap, effect: "the account's GPUs at a provider are capped at gpus=: scale-ups beyond it are refused",
		usage:  "provider=NAME at=D [for=D] gpus=N",
		takes:  []string{"provider", "at", "for", "gpus"},
		target: []string{"provider"},
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.GPUs == 0 {
				add("gpus", "", "quota-cap needs gpus= (the account's GPUs at the provider, >= 1; a stockout refuses everything)")
			}
		},
		traits: Traits{Live: LiveAcquisition, ConsoleOn: "provider",
			Console: Spec{GPUs: 8},
			Words:   []string{"quota cap"}}},
	{kind: SlowProvisioning, effect: "an autoscaled pool's provisioning delay is multiplied by factor=",
		usage:  "pool=NAME|provider=NAME at=D [for=D] factor=F",
		takes:  []string{"pool", "provider", "at", "for", "factor"},
		target: []string{"pool", "provider"},
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.Factor == 0 {
				add("factor", "", "slow-provisioning needs factor= (the delay's multiplier, > 0, like 4)")
			}
		},
		traits: Traits{Live: LiveAcquisition, ConsoleOn: "pool",
			Console: Spec{Factor: 4},
			Words:   []string{"slow provisioning"}}},
	// The P/D link (twin/kvlink, twin/disagg.go): on a decode pool, or the
	// decode pools of a region, whose inbound links they hit.
	{kind: LinkDegraded, effect: "the KV link into a decode pool's replicas slows to bandwidth= GB/s per GPU and/or takes latency= more per transfer (RDMA falling back to TCP)",
		usage:  "region=NAME|pool=NAME at=D [for=D] [count=N|percent=P] bandwidth=GBS and/or latency=D",
		takes:  []string{"region", "pool", "at", "for", "count", "percent", "latency", "bandwidth"},
		target: []string{"region", "pool"},
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.Bandwidth == 0 && s.AddLatency == 0 {
				add("bandwidth", "", "link-degraded needs bandwidth=, latency= or both (a fallback from RDMA to TCP measured 0.5 GB/s: bandwidth=0.5)", "latency")
			}
		},
		traits: Traits{Live: LiveLink, ConsoleOn: "pool",
			Console: Spec{Bandwidth: 0.5},
			Words:   []string{"link degradation", "degraded link"}}},
	{kind: KVTransferFailure, effect: "a share (fail=) of the KV transfers into a decode pool's replicas fail, heard of at once or after timeout= (a hang)",
		usage:  "region=NAME|pool=NAME at=D [for=D] [count=N|percent=P] fail=F [timeout=D]",
		takes:  []string{"region", "pool", "at", "for", "count", "percent", "fail", "timeout"},
		target: []string{"region", "pool"},
		rules: func(s Spec, add func(key, value, msg string, also ...string)) {
			if s.FailRate == 0 {
				add("fail", "", "kv-transfer-failure needs fail= (the share of transfers that fail, 0 < fail <= 1; 1 for all)")
			}
		},
		traits: Traits{Live: LiveLink, ConsoleOn: "pool",
			Console: Spec{FailRate: 1},
			Words:   []string{"transfer failure", "kv transfer failure"}}},
}

func lookup(k Kind) (entry, bool) {
	for _, e := range catalogue {
		if e.kind == k {
			return e, true
		}
	}
	return entry{}, false
}

// Kinds returns the kinds of the catalogue, in catalogue order.
func Kinds() []string {
	out := make([]string, len(catalogue))
	for i, e := range catalogue {
		out[i] = string(e.kind)
	}
	return out
}

// Describe returns one line about a kind for help texts: its effect and its
// keys, e.g.
//
//	node-loss: replicas of a pool fail (one unless count= or percent= says otherwise); pool=NAME at=D [for=D] [count=N|percent=P]
//
// It returns "" for a kind not in the catalogue.
func Describe(k Kind) string {
	e, ok := lookup(k)
	if !ok {
		return ""
	}
	return string(e.kind) + ": " + e.effect + "; " + e.usage
}

// uses reports whether the kind takes key.
func (e entry) uses(key string) bool { return slices.Contains(e.takes, key) }

// usedBy lists the kinds that take key, in catalogue order.
func usedBy(key string) []string {
	var out []string
	for _, e := range catalogue {
		if e.uses(key) {
			out = append(out, string(e.kind))
		}
	}
	return out
}

// Keys returns the keys kind k takes, in the order String prints them;
// nil for a kind not in the catalogue. The console's command line
// completes them.
func Keys(k Kind) []string {
	e, ok := lookup(k)
	if !ok {
		return nil
	}
	var out []string
	for _, key := range keyOrder {
		if e.uses(key) {
			out = append(out, key)
		}
	}
	return out
}
