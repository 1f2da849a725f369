//go:build !cgo

package main

// noNVML is what the commands say without cgo: go-nvml needs it.
const noNVML = "built without cgo: NVML unavailable"
