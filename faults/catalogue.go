package faults

import "slices"

// Keys of the text form, in the order String prints them. The kind comes
// first and is not a key.
var keyOrder = []string{
	"region", "pool", "provider", "model", "tenant", // targets
	"at", "for", // when
	"count", "percent", // blast radius
	"fail", "latency", // brownout, latency, error-burst
	"rpm", "tpm", // quota-exhaustion
	"notice",            // model-retirement
	"driver", "runtime", // driver-upgrade
}

// entry is one kind of the catalogue: what it does and which keys it takes.
// The per-kind rules beyond "takes" (which keys are required, which go
// together) are in validate.go.
type entry struct {
	kind   Kind
	effect string // what the fault does, for help texts
	usage  string // its keys, as a synopsis; a test checks it against takes
	takes  []string
	// target is the group of target keys of which the kind needs exactly
	// one; target keys in takes but not here are optional narrowings.
	target []string
}

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
	{RegionalOutage, "every pool of a region stops serving",
		"region=NAME at=D [for=D]",
		[]string{"region", "at", "for"},
		[]string{"region"}},
	{Brownout, "a region or pool fails a fraction of requests and/or slows every request",
		"region=NAME|pool=NAME at=D [for=D] fail=F and/or latency=D",
		[]string{"region", "pool", "at", "for", "fail", "latency"},
		[]string{"region", "pool"}},
	{QuotaExhaustion, "a provider's or pool's rate limit drops to rpm/tpm (zero when left out)",
		"pool=NAME|provider=NAME at=D [for=D] [rpm=X tpm=X]",
		[]string{"pool", "provider", "at", "for", "rpm", "tpm"},
		[]string{"pool", "provider"}},
	{ModelRetirement, "a model is withdrawn from every pool (or from one), new sessions steered away notice= before",
		"model=NAME [pool=NAME] at=D [for=D] [notice=D]",
		[]string{"pool", "model", "at", "for", "notice"},
		[]string{"model"}},
	{DriverUpgrade, "a pool's replicas restart on a new driver (and runtime), rolled back after for=",
		"pool=NAME at=D [for=D] driver=VERSION [runtime=NAME]",
		[]string{"pool", "at", "for", "driver", "runtime"},
		[]string{"pool"}},
	{NodeLoss, "replicas of a pool fail (one unless count= or percent= says otherwise)",
		"pool=NAME at=D [for=D] [count=N|percent=P]",
		[]string{"pool", "at", "for", "count", "percent"},
		[]string{"pool"}},
	{Latency, "requests to a region, pool or model take longer",
		"region=NAME|pool=NAME|model=NAME at=D [for=D] latency=D",
		[]string{"region", "pool", "model", "at", "for", "latency"},
		[]string{"region", "pool", "model"}},
	{ErrorBurst, "a fraction of requests to a region, pool or model fail",
		"region=NAME|pool=NAME|model=NAME at=D [for=D] fail=F",
		[]string{"region", "pool", "model", "at", "for", "fail"},
		[]string{"region", "pool", "model"}},
	{ColdStartStorm, "replicas of a pool or region reload their model at once (all unless count= or percent= says otherwise)",
		"region=NAME|pool=NAME at=D [count=N|percent=P]",
		[]string{"region", "pool", "at", "count", "percent"},
		[]string{"region", "pool"}},
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
