package faults

import "time"

// AnswerRTT is how long an answer a fault gives in place of the backend (a
// 429, a 5xx) takes to come back on average: one network round trip.
const AnswerRTT = 20 * time.Millisecond

// AnswerDelay is how long one such answer takes, for a uniform draw u in
// [0, 1) of the attempt's own (sched.AnswerDraw): AnswerRTT, give or take
// half of it. The twin's failed attempts end after it, and the gateway's
// fault layer, whose answers never cross a network, waits it out, so both
// time each answer alike. The spread is the point: the attempts a pool
// takes at one instant (its queue, when a throttle lifts) would otherwise
// all be answered at one instant, and which of them wins a retry budget's
// last places would be the order the twin's events or the gateway's
// goroutines happen to run in (the twin's was arrival order, which kept
// the oldest requests retrying and made the tail of their waits the
// longest possible).
func AnswerDelay(u float64) time.Duration {
	return AnswerRTT/2 + time.Duration(u*float64(AnswerRTT))
}

// Condition is what the faults on one replica do to an attempt there. The
// twin (its ground truth) and the live gateway's fault layer both combine a
// replica's faults with With and decide an attempt with Fails, so that a
// stack of faults means the same in both.
type Condition struct {
	Down     bool          // attempts fail: the replica is down
	Refuse   bool          // down and refusing: they fail at once (else they hang until the health timeout)
	FailRate float64       // share of the attempts that fail
	Latency  time.Duration // added before each attempt

	// The KV link into a decode replica (link-degraded,
	// kv-transfer-failure): its bandwidth per GPU, GB/s (0: its own), the
	// latency added to each transfer, the share of transfers that fail,
	// and how long the decode side waits before it hears of a failure (0:
	// at once).
	LinkBandwidth   float64
	LinkLatency     time.Duration
	TransferFail    float64
	TransferTimeout time.Duration
}

// With is c with one more fault's share d on the replica: down if either
// is (refusing if either refuses, else hanging), the latencies added, the
// higher fail rate; on the KV link, the lower bandwidth, the latencies
// added, the higher fail rate and the longer wait.
func (c Condition) With(d Condition) Condition {
	bw := c.LinkBandwidth
	if d.LinkBandwidth > 0 && (bw == 0 || d.LinkBandwidth < bw) {
		bw = d.LinkBandwidth
	}
	return Condition{Down: c.Down || d.Down, Refuse: c.Refuse || d.Refuse,
		FailRate: max(c.FailRate, d.FailRate), Latency: c.Latency + d.Latency,
		LinkBandwidth: bw, LinkLatency: c.LinkLatency + d.LinkLatency,
		TransferFail: max(c.TransferFail, d.TransferFail), TransferTimeout: max(c.TransferTimeout, d.TransferTimeout)}
}

// Fails reports whether an attempt fails under c: always when down, else
// by the fail rate. draw (uniform in [0, 1), from the driver's seeded
// stream) is called only for a replica that is up with a fail rate, so the
// draws never depend on faults that decide without one.
func (c Condition) Fails(draw func() float64) bool {
	if c.Down {
		return true
	}
	return c.FailRate > 0 && draw() < c.FailRate
}
