//go:build !race

package liverun

const raceDetector = false
