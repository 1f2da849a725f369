package faults

import "time"

// Kind is a fault kind.
type Kind string

// The fault catalogue.
const (
	RegionalOutage  Kind = "regional-outage"  // every pool of a region stops
	Brownout        Kind = "brownout"         // a region (or pool) fails a fraction of requests and adds latency
	QuotaExhaustion Kind = "quota-exhaustion" // a provider's or pool's quota drops (to zero or a value)
	ModelRetirement Kind = "model-retirement" // a model disappears from the pools that served it
	DriverUpgrade   Kind = "driver-upgrade"   // a pool's driver/runtime changes; replicas restart
	NodeLoss        Kind = "node-loss"        // replicas of a pool fail
	Latency         Kind = "latency"          // added latency on a target
	ErrorBurst      Kind = "error-burst"      // an error rate on a target
	ColdStartStorm  Kind = "cold-start-storm" // many replicas reload at once
	// Capacity that arrives late or not at all: what an autoscaled pool's
	// provider answers a scale-up (twin/autoscale.go).
	Stockout         Kind = "stockout"          // the provider has no capacity to grant (or grants a share)
	QuotaCap         Kind = "quota-cap"         // the account's GPUs at a provider are capped
	SlowProvisioning Kind = "slow-provisioning" // provisioning takes factor times longer
	// The link a disaggregated fleet moves KV cache over (twin/kvlink).
	LinkDegraded      Kind = "link-degraded"       // the link into a decode pool's replicas slows (RDMA falling back to TCP)
	KVTransferFailure Kind = "kv-transfer-failure" // a share of KV transfers into a decode pool fail
)

// Target names what a fault hits. Which fields a kind accepts is checked by
// Spec.Validate.
type Target struct {
	Region   string
	Pool     string
	Provider string
	Model    string
	Tenant   string
	// Accelerator narrows an acquisition fault to pools of one device
	// type.
	Accelerator string
}

// Radius is the blast radius within the target's replicas: all of them
// (the zero value), a count, or a percentage.
type Radius struct {
	Count   int
	Percent float64 // (0, 100]
}

// Spec is one fault: data first, so that the twin injector and the live
// injector read the same thing, and a spec prints back to the text it was
// parsed from.
type Spec struct {
	Kind   Kind
	Target Target
	At     time.Duration // start, from the beginning of the run
	// For is how long the fault lasts; 0 means it is not undone during the
	// run (a retirement, an upgrade, lost nodes that never return).
	For    time.Duration
	Radius Radius

	FailRate   float64       // brownout, error-burst: fraction of requests that fail, [0, 1]
	AddLatency time.Duration // brownout, latency: added to every affected request
	// Quota is the quota during the fault (quota-exhaustion): requests and
	// tokens per minute; zero means none at all.
	QuotaRPM, QuotaTPM float64
	Notice             time.Duration // model-retirement: steer new sessions away this long before
	Driver             string        // driver-upgrade: the new driver version
	Runtime            string        // driver-upgrade: the new runtime, if it changes
	Grant              float64       // stockout: the share of a request still granted, [0, 1)
	GPUs               int           // quota-cap: the account's GPUs at the provider
	Factor             float64       // slow-provisioning: multiplies the provisioning delay, > 0
	// Bandwidth is link-degraded's bandwidth per GPU of the decode
	// replica, GB/s (latency= is added to each transfer).
	Bandwidth float64
	// Timeout is how long kv-transfer-failure's decode side waits before
	// it hears that a transfer failed (SGLang's 300 s); 0: at once.
	Timeout time.Duration
}

// End returns when the fault ends, and false when it lasts to the end of
// the run.
func (s Spec) End() (time.Duration, bool) {
	if s.For == 0 {
		return 0, false
	}
	return s.At + s.For, true
}
