package features

import (
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cucumber/godog"

	"github.com/fleetdrill/fleetdrill/internal/spec"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

var opts = godog.Options{Format: "progress", Tags: spec.DefaultTags, Strict: false, Output: os.Stdout}

func init() { godog.BindFlags("godog.", flag.CommandLine, &opts) }

// TestFeatures runs every spec of this directory on the twin; scenarios
// tagged @live are left to TestLiveFeatures.
func TestFeatures(t *testing.T) {
	o := opts
	o.TestingT = t
	o.Paths = []string{"."}
	suite := godog.TestSuite{Name: "features", ScenarioInitializer: spec.Initializer(os.Stdout, nil), Options: &o}
	if suite.Run() != 0 {
		t.Fatal("failing specs; the output above says what was expected, what was measured and how to reproduce it")
	}
}

// TestLiveFeatures runs the @live specs on the live harness: Docker
// containers, toxiproxy and the live gateway. It skips, loudly, where no
// Docker engine answers.
func TestLiveFeatures(t *testing.T) {
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("SKIPPING LIVE SPECS: `docker info` failed (%v): no Docker engine, so no live fleet.\n%.300s", err, out)
	}
	if testing.Short() {
		t.Skip("SKIPPING LIVE SPECS in -short mode")
	}
	o := opts
	o.TestingT = t
	o.Paths = []string{"."}
	o.Tags = spec.LiveTag
	suite := godog.TestSuite{Name: "live", ScenarioInitializer: spec.Initializer(os.Stdout, nil), Options: &o}
	if suite.Run() != 0 {
		t.Fatal("failing live specs; the output above says what was expected, what was measured and how to reproduce it")
	}
}

// TestLibraryHasSpecs checks that library.feature names every scenario of
// the library, so a new scenario comes with its spec.
func TestLibraryHasSpecs(t *testing.T) {
	data, err := os.ReadFile("library.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range scenarios.List() {
		if !strings.Contains(string(data), "| "+info.Name+" ") {
			t.Errorf("library.feature: no Examples row for library scenario %s", info.Name)
		}
	}
}
