//go:build cgo

package gpu

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML is a Source backed by an nvml.Interface: the driver's library
// (Open) or one of go-nvml's mock servers (NewNVML, in tests).
//
// NB: go-nvml's mocks panic when a method they do not implement is called
// (utilisation, power, temperature, ECC, NVLink, clocks, events). The
// adapter does not recover: a real library answers ERROR_NOT_SUPPORTED or
// ERROR_FUNCTION_NOT_FOUND instead, which it treats as "not available",
// and tests set every function the adapter calls.
type NVML struct {
	lib     nvml.Interface
	devices []nvml.Device // by index
	uuids   []string      // by index, read once at open
	closed  atomic.Bool
	once    sync.Once
}

var (
	_ Source     = (*NVML)(nil)
	_ XIDWatcher = (*NVML)(nil)
)

// xidPollMillis bounds how long WatchXIDs waits in the driver before it
// looks at its context again.
const xidPollMillis = 500

// Open opens the driver's NVML library (libnvidia-ml.so.1). Without a
// driver it fails with an error that is ErrUnavailable and says so in one
// line.
func Open() (Source, error) {
	s, err := NewNVML(nvml.New())
	if err != nil {
		return nil, err
	}
	return s, nil
}

// NewNVML initialises lib and takes a handle on each of its GPUs.
func NewNVML(lib nvml.Interface) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, initError(ret)
	}
	s := &NVML{lib: lib}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("NVML: counting GPUs: %w", ret)
	}
	for i := range n {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			lib.Shutdown()
			return nil, fmt.Errorf("NVML: gpu %d: %w", i, ret)
		}
		uuid, _ := d.GetUUID() // empty if it fails; Inventory says why
		s.devices = append(s.devices, d)
		s.uuids = append(s.uuids, uuid)
	}
	return s, nil
}

// initError says why nvml.Init failed, in one line.
func initError(ret nvml.Return) error {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return &unavailableError{"no NVIDIA driver: libnvidia-ml.so.1 not found (NVML ERROR_LIBRARY_NOT_FOUND)"}
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return &unavailableError{"the NVIDIA driver is not loaded (NVML ERROR_DRIVER_NOT_LOADED)"}
	case nvml.ERROR_NO_PERMISSION:
		return &unavailableError{"no permission to use the NVIDIA driver (NVML ERROR_NO_PERMISSION)"}
	}
	return &unavailableError{fmt.Sprintf("NVML init failed: %s (return code %d)", oneLine(ret.Error()), int32(ret))}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Inventory implements Source.
func (s *NVML) Inventory() (Inventory, error) {
	var inv Inventory
	if s.closed.Load() {
		return inv, ErrClosed
	}
	var ret nvml.Return
	if inv.Driver, ret = s.lib.SystemGetDriverVersion(); ret != nvml.SUCCESS {
		return inv, fmt.Errorf("NVML: driver version: %w", ret)
	}
	if v, ret := s.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		inv.CUDA = CUDAVersion(v)
	}
	if v, ret := s.lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		inv.NVML = v
	}
	var errs oneLineErrors
	for i, d := range s.devices {
		g, err := describeDevice(i, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		inv.GPUs = append(inv.GPUs, g)
	}
	if len(errs) > 0 {
		return inv, fmt.Errorf("NVML: %w", errs)
	}
	return inv, nil
}

// describeDevice reads what a GPU is: name, UUID, memory and compute
// capability or an error; the rest when the GPU reports it.
func describeDevice(i int, d nvml.Device) (GPU, error) {
	g := GPU{Index: i}
	var ret nvml.Return
	if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("gpu %d: name: %w", i, ret)
	}
	if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("gpu %d: uuid: %w", i, ret)
	}
	mem, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("gpu %d: memory: %w", i, ret)
	}
	g.MemoryBytes = mem.Total
	major, minor, ret := d.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("gpu %d: compute capability: %w", i, ret)
	}
	g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)

	if a, ret := d.GetArchitecture(); ret == nvml.SUCCESS {
		g.Architecture = archNames[a]
	}
	if p, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBusID = cString(p.BusId[:])
	}
	if cur, _, ret := d.GetMigMode(); ret == nvml.SUCCESS {
		g.MIG = enabled(cur == nvml.DEVICE_MIG_ENABLE)
	}
	if cur, _, ret := d.GetEccMode(); ret == nvml.SUCCESS {
		g.ECC = enabled(cur == nvml.FEATURE_ENABLED)
	}
	var links NVLink
	for l := range nvml.NVLINK_MAX_LINKS {
		st, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS {
			break // past the last link (ERROR_INVALID_ARGUMENT), or no NVLink
		}
		links.Links++
		if st == nvml.FEATURE_ENABLED {
			links.Active++
		}
	}
	if links.Links > 0 {
		g.NVLink = &links
	}
	bus, ret1 := d.GetMemoryBusWidth()
	clock, ret2 := d.GetMaxClockInfo(nvml.CLOCK_MEM)
	if ret1 == nvml.SUCCESS && ret2 == nvml.SUCCESS {
		g.BusWidthBits, g.MaxMemClockMHz = int(bus), int(clock)
		g.BandwidthGBs = Bandwidth(g.BusWidthBits, g.MaxMemClockMHz)
	}
	return g, nil
}

var archNames = map[nvml.DeviceArchitecture]string{
	nvml.DEVICE_ARCH_KEPLER:    "kepler",
	nvml.DEVICE_ARCH_MAXWELL:   "maxwell",
	nvml.DEVICE_ARCH_PASCAL:    "pascal",
	nvml.DEVICE_ARCH_VOLTA:     "volta",
	nvml.DEVICE_ARCH_TURING:    "turing",
	nvml.DEVICE_ARCH_AMPERE:    "ampere",
	nvml.DEVICE_ARCH_ADA:       "ada",
	nvml.DEVICE_ARCH_HOPPER:    "hopper",
	nvml.DEVICE_ARCH_BLACKWELL: "blackwell",
}

func enabled(on bool) string {
	if on {
		return "enabled"
	}
	return "disabled"
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// Readings implements Source.
func (s *NVML) Readings() ([]Reading, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]Reading, len(s.devices))
	for i, d := range s.devices {
		r := Reading{Index: i, UUID: s.uuids[i]}
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			r.Utilization = ptr(float64(u.Gpu) / 100)
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			r.MemoryUsedBytes, r.MemoryTotalBytes = ptr(float64(m.Used)), ptr(float64(m.Total))
		}
		if mw, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
			r.PowerWatts = ptr(float64(mw) / 1000)
		}
		if c, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
			r.TemperatureCelsius = ptr(float64(c))
		}
		out[i] = r
	}
	return out, nil
}

func ptr(f float64) *float64 { return &f }

// WatchXIDs implements XIDWatcher with an NVML event set registered for
// critical XID errors on every GPU that supports it.
func (s *NVML) WatchXIDs(ctx context.Context, started func(), fn func(XID)) error {
	if s.closed.Load() {
		return ErrClosed
	}
	set, ret := s.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("%w: creating an event set: %w", ErrNoXIDEvents, ret)
	}
	defer set.Free()
	registered := 0
	for _, d := range s.devices {
		if d.RegisterEvents(nvml.EventTypeXidCriticalError, set) == nvml.SUCCESS {
			registered++
		}
	}
	if registered == 0 {
		return ErrNoXIDEvents
	}
	started()
	for ctx.Err() == nil {
		e, ret := set.Wait(xidPollMillis)
		switch ret {
		case nvml.SUCCESS:
			if e.EventType&nvml.EventTypeXidCriticalError != 0 {
				fn(s.xid(e))
			}
		case nvml.ERROR_TIMEOUT:
		default:
			return fmt.Errorf("NVML: waiting for XID events: %w", ret)
		}
	}
	return nil
}

// xid names the GPU an event came from by its UUID.
func (s *NVML) xid(e nvml.EventData) XID {
	x := XID{GPU: -1, Code: e.EventData}
	if e.Device == nil {
		return x
	}
	if uuid, ret := e.Device.GetUUID(); ret == nvml.SUCCESS {
		x.UUID = uuid
		for i, u := range s.uuids {
			if u == uuid {
				x.GPU = i
			}
		}
	}
	return x
}

// Close implements Source: NVML's Shutdown, once.
func (s *NVML) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true)
		if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
			err = fmt.Errorf("NVML shutdown: %w", ret)
		}
	})
	return err
}

// oneLineErrors joins errors on one line (errors.Join uses newlines, and
// the commands report in one line).
type oneLineErrors []error

func (e oneLineErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e oneLineErrors) Unwrap() []error { return e }
