package faults

import (
	"strings"
	"time"
)

// Live is how a live run emulates a kind of fault: the mechanisms its
// injectors may use, as a set. The zero Live is none: the kind has no live
// emulation, and Traits.NotLive says why.
type Live uint8

const (
	// LiveProxy: the nodes' toxiproxy proxies are disabled or given a
	// toxic (TCP: refused or held connections, added latency); the
	// injector is the live fleet's (internal/livefleet).
	LiveProxy Live = 1 << iota
	// LiveGateway: the live gateway's fault layer answers the attempts
	// the fault hits itself, before they leave, with an HTTP status (429,
	// 404 or 503 for some models, a share of 500s): HTTP-level, the same
	// whatever the backend, which needs no admin API
	// (internal/gateway's Gateway.Faults().Inject; internal/liverun turns a
	// spec into its faults).
	LiveGateway
	// LiveContainer: the nodes' containers are stopped, and started again
	// when the fault ends (internal/livefleet).
	LiveContainer
	// LiveAcquisition: the live gateway's scalers ask their provider
	// under the fault (stockout, quota-cap, slow-provisioning): replicas
	// it refuses are never started (internal/gateway's
	// Autoscaling.InjectAcquisition).
	LiveAcquisition
	// LiveLink: the emulated decode nodes' inbound KV link (their admin
	// API's link faults, internal/node/kv.go): toxics on the wire their
	// pulls cross in a container fleet; in process, which has no sockets,
	// the node's own seeded draws.
	LiveLink
)

// OnFleet reports whether the kind has a part the live fleet injects
// (toxiproxy, containers or the nodes' KV links: LiveProxy,
// LiveContainer, LiveLink).
func (l Live) OnFleet() bool { return l&(LiveProxy|LiveContainer|LiveLink) != 0 }

// String names the mechanisms, e.g. "proxy+gateway"; "none" for none.
func (l Live) String() string {
	var out []string
	for _, m := range []struct {
		bit  Live
		name string
	}{{LiveProxy, "proxy"}, {LiveGateway, "gateway"}, {LiveContainer, "container"}, {LiveAcquisition, "acquisition"}, {LiveLink, "link"}} {
		if l&m.bit != 0 {
			out = append(out, m.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "+")
}

// Traits is what the backends and tools need to know about a kind without
// switching on it: how a live fleet emulates it, how a gateway detects it,
// when it starts, and what the game-day console injects for it. Each kind's
// traits are in its catalogue entry (catalogue.go).
type Traits struct {
	// Live is how a live fleet emulates the kind; zero when it cannot, and
	// NotLive says why, as a sentence naming the kind.
	Live    Live
	NotLive string
	// liveLimit says why a live fleet cannot emulate this spec of a live
	// kind (a value the emulation lacks), or ""; nil when it emulates them
	// all.
	liveLimit func(Spec) string

	// DetectStatus is the HTTP status an upstream the fault hits answers,
	// whose first answer detects the fault: a refusal the gateway's
	// breakers do not count (429 for a quota, 404 for a retired model). 0
	// when the fault is detected otherwise: by the breakers, as errors and
	// timeouts pile up, or by the control plane (a driver upgrade's
	// compatibility check).
	DetectStatus int

	// FromNotice: the fault starts notice= before at=, when the control
	// plane announces it to the gateway (new requests for the model are
	// steered to its fallbacks); the ground truth changes at at=.
	FromNotice bool

	// ConsoleOn is the target key the game-day console's key for the kind
	// fills from the operator's selection ("region", "pool", "provider" or
	// "model"); Console is the rest of the spec it injects: its values and
	// radius (ConsoleSpec). The operator's fault lines typed at the
	// console's command line start from it too.
	ConsoleOn string
	Console   Spec
	// ConsoleKey is the console's key that injects Console on the
	// selection; the zero ConsoleKey when the kind has none (it is typed
	// at the command line). internal/tui builds its bindings from it.
	ConsoleKey ConsoleKey

	// Restarts says when the fault restarts the replicas it hits: they
	// drop their work, leave routing and load their model for their
	// pool's cold start (reqengine.Restarts). The twin restarts them
	// there, and a live run restarts the gateway's replicas and the
	// instances behind them at the same instants.
	Restarts Restarts

	// Words are how a Gherkin step names the last fault of the kind, after
	// "the" ("during the outage", "after the quota exhaustion + 5m"): the
	// first is the one help texts and errors show. No word names two
	// kinds; internal/spec reads them. Shared: do not modify.
	Words []string
}

// Restarts is when a fault restarts its replicas: as it starts (a driver
// upgrade landing, a cold-start storm), as it ends (a lost node coming
// back, a driver upgrade rolled back), or both.
type Restarts struct{ AtStart, AtEnd bool }

// ConsoleKey is the game-day console's key for a kind of fault.
type ConsoleKey struct {
	Key   string // the key pressed, e.g. "o"
	Label string // its word on the help bar, e.g. "outage"
	Help  string // its line in the help overlay: what it injects, on what of the selection
	// Rank is its place among the inject keys, most used first, from 1:
	// the help bar shows as many as fit its width, in this order.
	Rank int
}

// OnAcquisition reports whether the kind acts on what an autoscaled
// pool's provider answers a scale-up (stockout, quota-cap,
// slow-provisioning) rather than on replicas: the twin's and the live
// gateway's scalers carry it out (twin/compile's OfferUnder), so its Live
// is LiveAcquisition.
func (t Traits) OnAcquisition() bool { return t.Live&LiveAcquisition != 0 }

// Traits returns the kind's traits; the zero Traits for a kind not in the
// catalogue.
func (k Kind) Traits() Traits {
	e, _ := lookup(k)
	return e.traits
}

// Start returns when the fault begins: at=, or for a kind that starts at its
// notice, notice= before (not before the start of the run).
func (s Spec) Start() time.Duration {
	if s.Kind.Traits().FromNotice {
		return max(s.At-s.Notice, 0)
	}
	return s.At
}

// StartingAt returns the spec moved so that it begins at t: at=t, or for a
// kind that starts at its notice, at=t+notice. An operator's fault that
// starts "now" is moved so.
func (s Spec) StartingAt(t time.Duration) Spec {
	s.At = t
	if s.Kind.Traits().FromNotice {
		s.At = t + s.Notice
	}
	return s
}

// LiveGap says why a live fleet cannot emulate the spec, or "" when it can:
// a tenant target, a kind with no live emulation, or a value the kind's
// emulation lacks (a non-zero quota, a runtime-only driver upgrade).
func (s Spec) LiveGap() string {
	t := s.Kind.Traits()
	switch {
	case s.Target.Tenant != "":
		return "tenant targets have no live emulation"
	case t.Live == 0 && t.NotLive != "":
		return t.NotLive
	case t.Live == 0:
		return string(s.Kind) + " has no live emulation"
	case t.liveLimit != nil:
		return t.liveLimit(s)
	}
	return ""
}

// DetectedByStatus reports whether an upstream answering status detects a
// fault of some kind (a Traits.DetectStatus): the answers a live gateway's
// observer records for the live report.
func DetectedByStatus(status int) bool {
	for _, e := range catalogue {
		if status != 0 && e.traits.DetectStatus == status {
			return true
		}
	}
	return false
}

// ConsoleSpec returns the fault the game-day console's key for kind k
// injects on the operator's selection sel: the kind's Console spec, its
// ConsoleOn target taken from sel, at=0s. Its target is empty when sel
// lacks that field; it is not validated.
func ConsoleSpec(k Kind, sel Target) Spec {
	t := k.Traits()
	sp := t.Console
	sp.Kind, sp.At, sp.Target = k, 0, Target{}
	switch t.ConsoleOn {
	case "region":
		sp.Target.Region = sel.Region
	case "pool":
		sp.Target.Pool = sel.Pool
	case "provider":
		sp.Target.Provider = sel.Provider
	case "model":
		sp.Target.Model = sel.Model
	}
	return sp
}
