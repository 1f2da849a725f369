// Package livefleet starts a live fleet of emulated inference nodes for a
// scenario and injects faults into it: the live counterpart of the twin's
// fault injector.
//
// It numbers a pool's replicas as the core does (twin/compile's
// PoolReplicas) and must not import the twin (twin, the root package).
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
// Fleet.Inject applies the part of a faults.Spec that is the fleet's —
// toxiproxy's and the containers' — and returns its undo. Each kind with
// such a part has its injector type in injectors.go, picked from the
// spec's kind; which mechanisms a kind uses, and why one has no live
// emulation, are its faults.Traits (Live, NotLive, Spec.LiveGap):
//
//   - regional-outage: the region's proxies are disabled (OutageRefuse, the
//     default: listeners close, live connections drop, new ones are
//     refused), or get a timeout toxic (OutageHang: connections are accepted
//     and then hang with no data, as behind a black-holing route).
//   - latency, and brownout's added latency: a latency toxic on the
//     downstream (node to client) stream.
//   - node-loss: containers are stopped; undo starts them again and points
//     their proxies at the new published ports. (The gateway holds the
//     replicas out of routing while their model loads: internal/liverun.)
//
// RestartNodes stops and starts containers at once: a driver upgrade's
// restart, which internal/liverun carries out where the twin restarts.
//
// HTTP-level faults (faults.LiveGateway) are not the fleet's: the live
// gateway's fault layer answers them before an attempt leaves, whatever
// the backend (internal/gateway's Gateway.Faults().Inject, driven by
// internal/liverun): quota-exhaustion (429 + Retry-After), model-retirement
// (404), driver-upgrade (503 for the models the new driver cannot run,
// behind the gateway's route change),
// error-burst and brownout's fail rate (a share of 500s). Inject refuses
// them. The emulated node's admin API (Fleet.Admin) can still make a node
// answer them, for a node driven by hand.
//
// cold-start-storm and tenant targets have no live emulation. To emulate a
// new kind on the fleet: its injector type and its row in the injectors
// table, and its traits' Live in faults/catalogue.go
// (TestInjectorsMatchTraits checks the two agree).
package livefleet
