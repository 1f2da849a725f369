// Package compile turns a scenario into the configuration its drivers run:
// the scheduler core's sched.Config (CoreConfig, Compile), the
// compatibility registry (Registry), the retry policy (RetryPolicy), each
// pool's latency profiles, given or derived from the physical model
// (PoolProfiles, ResolveProfile, DerivedPlacement, DerivedProfile), the
// canaries' routes, and an autoscaled pool's scaler (PoolReplicas,
// ScalerConfig, AcquisitionStream, OfferUnder, FreeGPUs).
//
// The twin (package twin) runs a Plan in virtual time; the live gateway,
// the emulated node and the live fleet (internal/gateway, internal/node,
// internal/livefleet) configure themselves from the same code, so a policy
// proven in the twin is the one that runs live.
//
// Import rule: compile must not import the twin (twin, the root package),
// sim, or any live package (internal/gateway, internal/node,
// internal/livefleet, internal/liverun). It does no I/O but reading a
// pool's model_config (internal/modelfile, for a derived profile).
package compile
