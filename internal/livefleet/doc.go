// Package livefleet starts a live fleet of emulated inference nodes for a
// scenario and injects faults into it: the live counterpart of the twin's
// fault injector.
//
// # Topology
//
// Build builds the node image once per process (a static fleetdrill binary
// in internal/node's FROM scratch Dockerfile; nothing is pulled), then
// starts, for each emulated pool replica, one container running
// "fleetdrill node --scenario /scenario.yaml --pool POOL" with its admin API
// on port 9000 (bearer token in $FLEETDRILL_ADMIN_TOKEN). Each region gets a
// Docker bridge network of its own; a node joins its region's network with
// its node name as alias. Every container and network carries the labels
// dev.fleetdrill.managed=true and dev.fleetdrill.run=<run id>, so a crashed
// run can be swept (Sweep).
//
// Harness traffic reaches a node through an in-process toxiproxy proxy
// listening on 127.0.0.1 whose upstream is the container's published API
// port; the gateway's backends are the proxies (Fleet.Backends). The admin
// API is reached directly on its published port, so faults can be undone
// while a node's proxy is down.
//
// # Environment
//
// No registry is reachable and Ryuk cannot start, so Build sets
// TESTCONTAINERS_RYUK_DISABLED=true and TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
// when they are unset (testcontainers reads them once per process); cleanup is
// Fleet.Close, plus Sweep for leftovers of killed runs.
//
// # Faults
//
// Fleet.Inject applies a faults.Spec and returns its undo. Each kind a live
// fleet emulates has its injector type in injectors.go, picked from the
// spec's kind; which mechanisms a kind uses, and why one has no live
// emulation, are its faults.Traits (Live, NotLive, Spec.LiveGap):
//
//   - regional-outage: the region's proxies are disabled (OutageRefuse, the
//     default: listeners close, live connections drop, new ones are
//     refused), or get a timeout toxic (OutageHang: connections are accepted
//     and then hang with no data, as behind a black-holing route).
//   - latency, and brownout's added latency: a latency toxic on the
//     downstream (node to client) stream.
//   - brownout's fail rate and error-burst: the node's error_rate.
//   - quota-exhaustion: the node's quota_exhausted (429 + Retry-After); only
//     a quota of zero can be emulated.
//   - model-retirement: the model is retired on the nodes serving it (404).
//   - driver-upgrade: the node's driver is changed (models it cannot run
//     answer 503); the node is not restarted.
//   - node-loss: containers are stopped; undo starts them again and points
//     their proxies at the new published ports.
//
// cold-start-storm and tenant targets have no live emulation. To emulate a
// new kind: its injector type and its row in the injectors table, and its
// traits' Live in faults/catalogue.go (TestInjectorsMatchTraits checks the
// two agree).
package livefleet
