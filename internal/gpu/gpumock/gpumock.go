//go:build cgo

package gpumock

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// HW is what a real GPU reports and the mock servers leave out.
type HW struct {
	BusBits     uint32 // memory bus width; 0: ERROR_NOT_SUPPORTED
	MemClockMHz uint32 // maximum memory clock; 0: ERROR_NOT_SUPPORTED
	NVLinks     int    // links per GPU, all active; 0: no NVLink (ERROR_NOT_SUPPORTED)
	ECC         bool
	// NoReadings makes utilisation, power and temperature
	// ERROR_NOT_SUPPORTED; otherwise GPU i reads 10·i % utilisation,
	// 100 + 50·i W and 40 + i °C.
	NoReadings bool
}

// Datasheet-like values: bus width and NVML's maximum memory clock; NVLink
// 3 has 12 links per A100, NVLink 4 and 5 have 18 per H100, H200 and B200.
var (
	A100 = HW{BusBits: 5120, MemClockMHz: 1215, NVLinks: 12, ECC: true}
	H100 = HW{BusBits: 5120, MemClockMHz: 2619, NVLinks: 18, ECC: true}
	H200 = HW{BusBits: 6144, MemClockMHz: 3201, NVLinks: 18, ECC: true}
	B200 = HW{BusBits: 8192, MemClockMHz: 3996, NVLinks: 18, ECC: true}
)

// Complete sets, on every device of s, the functions the gpu adapter calls
// that the mock server does not implement, and makes the server's event
// sets deliver the events sent on xids (nil: event sets unsupported).
func Complete(s *server.Server, h HW, xids <-chan nvml.EventData) {
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
			if h.ECC {
				return nvml.FEATURE_ENABLED, nvml.FEATURE_ENABLED, nvml.SUCCESS
			}
			return nvml.FEATURE_DISABLED, nvml.FEATURE_DISABLED, nvml.SUCCESS
		}
		dev.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
			switch {
			case h.NVLinks == 0:
				return 0, nvml.ERROR_NOT_SUPPORTED
			case link >= h.NVLinks:
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		dev.GetMemoryBusWidthFunc = func() (uint32, nvml.Return) {
			if h.BusBits == 0 {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return h.BusBits, nvml.SUCCESS
		}
		dev.GetMaxClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
			if c != nvml.CLOCK_MEM || h.MemClockMHz == 0 {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return h.MemClockMHz, nvml.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			if h.NoReadings {
				return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: 5}, nvml.SUCCESS
		}
		dev.GetPowerUsageFunc = func() (uint32, nvml.Return) {
			if h.NoReadings {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return uint32(100_000 + 50_000*i), nvml.SUCCESS // milliwatts
		}
		dev.GetTemperatureFunc = func(sensor nvml.TemperatureSensors) (uint32, nvml.Return) {
			if h.NoReadings || sensor != nvml.TEMPERATURE_GPU {
				return 0, nvml.ERROR_NOT_SUPPORTED
			}
			return uint32(40 + i), nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(mask uint64, _ nvml.EventSet) nvml.Return {
			if xids == nil || mask != nvml.EventTypeXidCriticalError {
				return nvml.ERROR_NOT_SUPPORTED
			}
			return nvml.SUCCESS
		}
	}
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		if xids == nil {
			return nil, nvml.ERROR_NOT_SUPPORTED
		}
		return &mock.EventSet{
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				select {
				case e := <-xids:
					return e, nvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
		}, nvml.SUCCESS
	}
}
