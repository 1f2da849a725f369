// Package gpumock completes go-nvml's mock servers (pkg/nvml/mock/dgx*,
// pkg/nvml/mock/server) for tests of the gpu package and the commands
// built on it: the servers leave out what the adapter reads besides
// identity (ECC, NVLink, memory bus and clocks, utilisation, power,
// temperature, XID events), and a mock panics when an unset function is
// called. Complete sets them all.
//
// Only tests import it. Like go-nvml, it needs cgo; without cgo the
// package is empty.
package gpumock
