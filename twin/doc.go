// Package twin will hold fleetdrill's digital twin: the pure scheduler core
// (admission, queues, dispatch policies, routing, fallback, degradation) and
// the simulated fleet it runs on (capability profiles, compatibility
// registry, continuous-batching latency model). It is driven by package sim
// in virtual time and by the live gateway on the wall clock.
//
// Nothing is here yet: the twin arrives with its own issue. The package
// exists so that the layout fixed in the design is in place from the start.
package twin
