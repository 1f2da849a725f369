package features

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/cucumber/godog"

	"github.com/fleetdrill/fleetdrill/internal/spec"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

var opts = godog.Options{Format: "progress", Tags: spec.DefaultTags, Strict: false, Output: os.Stdout}

func init() { godog.BindFlags("godog.", flag.CommandLine, &opts) }

// TestFeatures runs every spec of this directory on the twin; scenarios
// tagged @live are left to the live harness.
func TestFeatures(t *testing.T) {
	o := opts
	o.TestingT = t
	o.Paths = []string{"."}
	suite := godog.TestSuite{Name: "features", ScenarioInitializer: spec.Initializer(os.Stdout, nil), Options: &o}
	if suite.Run() != 0 {
		t.Fatal("failing specs; the output above says what was expected, what was measured and how to reproduce it")
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
