//go:build race

package liverun

// raceDetector: the race detector slows an in-process live run several
// fold; TestGameDayCountsBothDrivers runs without it (make test runs it in
// the group after the others, with no race detector).
const raceDetector = true
