//go:build race

package scenarios_test

// raceDetector: the race detector slows the twin several-fold; the
// 20-seed sweep of the library (TestLibraryHoldsAcrossSeeds) runs without
// it (make test runs this package without it; make seeds runs the sweep
// alone).
const raceDetector = true
