package twin

import (
	"fmt"
	"math"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// The demand forecast. As the run proceeds, the twin forecasts each class's
// demand for the next window of simulated time from what it has seen so
// far, and scores the forecast when the window has passed: the error a
// capacity planner (or an autoscaler) working from the same signals would
// have made.
//
// Demand is tokens (prompt plus requested output) arriving per window, not a
// request count: a request of 8,000 tokens is not one of 200. The forecaster
// is Holt's linear exponential smoothing (a level and a trend, each an
// exponentially weighted average; Hyndman and Athanasopoulos, Forecasting:
// Principles and Practice, 3rd ed., section 8.2) on tokens per window, one
// window ahead. The second signal is concurrency — requests in the system,
// arrival to end — forecast by Little's law, L = λW: the forecast request
// rate (forecast tokens over the tokens per request seen in the last window)
// times the mean time in system of the requests that ended in the last
// window. Both are scored by the absolute percentage error |actual -
// forecast| / actual of each window with demand, and their mean (MAPE).
//
// Windows tile [0, duration) from 0; a last partial window is not scored,
// nor are the drain's. The first window trains the forecaster and is not
// scored; a window without demand is not scored (its percentage error is
// undefined) but still trains. Arrivals of the warm-up count: the forecast
// is about the workload, not the measurement.

// ForecastWindow is the window of the demand forecast, in simulated time.
const ForecastWindow = 5 * time.Minute

// Holt's smoothing weights: the level follows half of each surprise (a step
// in demand is mostly absorbed within three windows) and the trend a tenth
// (it does not chase noise).
const (
	holtAlpha = 0.5
	holtBeta  = 0.1
)

// ForecastMethod describes the forecaster in reports.
var ForecastMethod = fmt.Sprintf("holt(alpha=%g, beta=%g) on tokens per window, one window ahead; concurrency by Little's law (forecast rate x mean time in system)", holtAlpha, holtBeta)

// ForecastReport scores the run's demand forecast.
type ForecastReport struct {
	Method  string                    `json:"method"`
	WindowS float64                   `json:"window_s"`
	Classes map[string]*ClassForecast `json:"classes"`
}

// ClassForecast is one class's forecast and its errors. Errors are
// fractions (0.1 is 10%); with Windows zero nothing was scored and they
// are zero.
type ClassForecast struct {
	// Windows is how many windows were scored: a forecast existed and the
	// class had demand.
	Windows int `json:"windows"`
	// TokensMAPE is the mean absolute percentage error of the token
	// forecast over the scored windows; TokensLastError the last scored
	// window's.
	TokensMAPE      float64 `json:"tokens_mape"`
	TokensLastError float64 `json:"tokens_last_error"`
	// TokensByWindow is each window's error from the second window on,
	// -1 where it was not scored.
	TokensByWindow []float64 `json:"tokens_error_by_window"`
	// LastTokens is the demand of the last full window; NextTokens the
	// forecast for the window after it.
	LastTokens float64 `json:"last_tokens"`
	NextTokens float64 `json:"next_tokens"`
	// The same for concurrency (mean requests in the system over a window).
	ConcurrencyWindows   int     `json:"concurrency_windows"`
	ConcurrencyMAPE      float64 `json:"concurrency_mape"`
	ConcurrencyLastError float64 `json:"concurrency_last_error"`
	LastConcurrency      float64 `json:"last_concurrency"`
	NextConcurrency      float64 `json:"next_concurrency"`
}

// demand tracks every class's demand window by window and forecasts it. It
// is fed at arrivals and ends and rolls windows over lazily, when it is
// next fed or read past a boundary: closing a window depends only on what
// happened before its end, so when that happens changes nothing.
type demand struct {
	window time.Duration
	end    time.Duration // arrivals end: windows ending later are not closed
	winEnd time.Duration // end of the current window
	closed int           // windows closed
	cls    []classDemand
}

type classDemand struct {
	// The current window.
	tokens   float64
	arrivals float64
	area     float64 // request-seconds in the system
	ended    float64
	sojourn  float64 // seconds in the system of the requests that ended
	inSys    int
	last     time.Duration // when area was last brought up to date

	// The forecaster.
	level, trend     float64
	trained          bool
	perReq, meanSoj  float64 // tokens per request, seconds in the system (last window seen with any)
	fcTokens, fcConc float64
	hasConc          bool

	// Scores.
	byWindow         []float64
	sumAPE           float64
	n                int
	lastAPE          float64 // -1: none yet
	sumCAPE          float64
	nc               int
	lastCAPE         float64
	lastTok, lastCon float64
}

func newDemand(classes int, window, end time.Duration) *demand {
	d := &demand{window: window, end: end, winEnd: window, cls: make([]classDemand, classes)}
	for i := range d.cls {
		d.cls[i].lastAPE, d.cls[i].lastCAPE = -1, -1
	}
	return d
}

// arrive records a new request of class c with tokens of demand.
func (d *demand) arrive(c int, now time.Duration, tokens int) {
	if d == nil {
		return
	}
	d.rollTo(now)
	cd := &d.cls[c]
	cd.integrate(now)
	cd.inSys++
	cd.tokens += float64(tokens)
	cd.arrivals++
}

// finish records a request of class c leaving the system after sojourn.
func (d *demand) finish(c int, now, sojourn time.Duration) {
	if d == nil {
		return
	}
	d.rollTo(now)
	cd := &d.cls[c]
	cd.integrate(now)
	cd.inSys--
	cd.ended++
	cd.sojourn += sojourn.Seconds()
}

func (cd *classDemand) integrate(now time.Duration) {
	if now > cd.last {
		cd.area += float64(cd.inSys) * (now - cd.last).Seconds()
		cd.last = now
	}
}

// rollTo closes every window that ended by now.
func (d *demand) rollTo(now time.Duration) {
	if d == nil {
		return
	}
	for d.winEnd <= now && d.winEnd <= d.end {
		for i := range d.cls {
			d.cls[i].close(d.winEnd, d.window.Seconds())
		}
		d.closed++
		d.winEnd += d.window
	}
}

// close scores the window ending at end against its forecast, trains the
// forecaster on it and forecasts the next.
func (cd *classDemand) close(end time.Duration, w float64) {
	cd.integrate(end)
	y := cd.tokens
	conc := cd.area / w
	if cd.trained {
		ape := -1.0
		if y > 0 {
			ape = math.Abs(y-cd.fcTokens) / y
			cd.sumAPE += ape
			cd.n++
			cd.lastAPE = ape
		}
		cd.byWindow = append(cd.byWindow, ape)
		if cd.hasConc && conc > 0 {
			e := math.Abs(conc-cd.fcConc) / conc
			cd.sumCAPE += e
			cd.nc++
			cd.lastCAPE = e
		}
	}
	// Holt: level and trend from this window.
	if !cd.trained {
		cd.level, cd.trend, cd.trained = y, 0, true
	} else {
		prev := cd.level
		cd.level = holtAlpha*y + (1-holtAlpha)*(cd.level+cd.trend)
		cd.trend = holtBeta*(cd.level-prev) + (1-holtBeta)*cd.trend
	}
	if cd.arrivals > 0 {
		cd.perReq = cd.tokens / cd.arrivals
	}
	if cd.ended > 0 {
		cd.meanSoj = cd.sojourn / cd.ended
	}
	cd.fcTokens = max(cd.level+cd.trend, 0)
	// Little's law: L = λW. Until requests have both arrived and ended,
	// the forecast is the concurrency seen (naive).
	cd.fcConc, cd.hasConc = conc, true
	if cd.perReq > 0 && cd.meanSoj > 0 {
		cd.fcConc = cd.fcTokens / cd.perReq / w * cd.meanSoj
	}
	cd.lastTok, cd.lastCon = y, conc
	cd.tokens, cd.arrivals, cd.area, cd.ended, cd.sojourn = 0, 0, 0, 0, 0
}

// lastErrors is each class's last scored token error, -1 for none yet.
func (d *demand) lastErrors() []float64 {
	if d == nil {
		return nil
	}
	out := make([]float64, len(d.cls))
	for i := range d.cls {
		out[i] = d.cls[i].lastAPE
	}
	return out
}

// report builds the report's forecast section; names are the classes'.
func (d *demand) report(names []string) *ForecastReport {
	if d == nil {
		return nil
	}
	rep := &ForecastReport{Method: ForecastMethod, WindowS: d.window.Seconds(), Classes: map[string]*ClassForecast{}}
	for i, name := range names {
		cd := &d.cls[i]
		cf := &ClassForecast{Windows: cd.n, ConcurrencyWindows: cd.nc, TokensByWindow: []float64{},
			LastTokens: round(cd.lastTok, 3), NextTokens: round(cd.fcTokens, 3),
			LastConcurrency: round(cd.lastCon, 6), NextConcurrency: round(cd.fcConc, 6)}
		for _, e := range cd.byWindow {
			cf.TokensByWindow = append(cf.TokensByWindow, round(e, 6))
		}
		if cd.n > 0 {
			cf.TokensMAPE, cf.TokensLastError = round(cd.sumAPE/float64(cd.n), 6), round(cd.lastAPE, 6)
		}
		if cd.nc > 0 {
			cf.ConcurrencyMAPE, cf.ConcurrencyLastError = round(cd.sumCAPE/float64(cd.nc), 6), round(cd.lastCAPE, 6)
		}
		rep.Classes[name] = cf
	}
	return rep
}

// final closes the windows passed at now and reports the forecast of
// classes.
func (d *demand) final(now time.Duration, classes []scenarios.Class) *ForecastReport {
	d.rollTo(now)
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = c.Name
	}
	return d.report(names)
}
