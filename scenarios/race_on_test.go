//go:build race

package scenarios_test

// raceDetector: the race detector slows the twin several-fold; the
// 20-seed sweep of the library (TestLibraryHoldsAcrossSeeds) runs without
// it (make seeds, and .ci/run).
const raceDetector = true
