// Package internal is the root of fleetdrill's private packages: trace
// readers, the live gateway and emulated node, the TUI, metrics, GPU
// inventory and report rendering, each in its own sub-package named for what
// it holds. This file only reserves the directory.
package internal
