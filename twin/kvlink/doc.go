// Package kvlink models the link a disaggregated fleet moves KV cache over,
// from a prefill replica to a decode replica (issue 34): how many bytes a
// transfer carries, what a link of each kind (NVLink in a node, RDMA,
// TCP) can move, and how concurrent transfers share it.
//
// A transfer takes the link's base latency (connection setup, descriptor
// preparation and the completion notification, which move no payload),
// then its bytes at its share of the link's bandwidth: concurrent
// transfers share a link equally (processor sharing, as a congested NIC
// divides its line rate among its flows), so one alone takes latency +
// bytes / bandwidth and n equal ones started together all end at latency +
// n·bytes / bandwidth. A link's bandwidth and latency may change while
// transfers are under way (link-degraded: RDMA falling back to TCP); each
// then goes on at the new rate from that instant.
//
// The package is pure: no clock, no random numbers, no I/O, no import
// from fleetdrill. Its driver steps it with the time (Start, Cancel,
// SetRate, Advance) and asks when it next needs a call (Next), as the
// twin's engines are driven.
package kvlink
