//go:build !cgo

package gpu

// Open would open the driver's NVML library, but go-nvml needs cgo and
// this binary was built without it (the static node image is).
func Open() (Source, error) {
	return nil, &unavailableError{"built without cgo: NVML unavailable"}
}
