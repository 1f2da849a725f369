// Package gpu discovers a node's NVIDIA GPUs through NVML and says what
// they are in the scenario's terms: an accelerator (memory, precisions,
// bandwidth) and a pool (GPUs per replica, replicas, driver) that a
// scenario can include as it is. It also reads them live (utilisation,
// memory used, power, temperature, XID errors) for the agent's /metrics.
//
// The commands and tests see only Source, a small pure-Go interface. The
// NVML adapter (nvml.go) is the one file that imports go-nvml, and it is
// built only with cgo: go-nvml needs cgo to compile, and the node image is
// a static CGO_ENABLED=0 build, so there Open says "built without cgo:
// NVML unavailable" (nocgo.go) instead.
//
// It must not import twin/, sim/ or the live gateway and node; it imports
// scenarios only for the fragment's types. Start reading at Source,
// Inventory.Fragment and Agent.
package gpu
