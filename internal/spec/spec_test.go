package spec

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite docs/specs.md's generated step reference")

const (
	beginRef = "<!-- BEGIN GENERATED STEP REFERENCE: go test ./internal/spec -update -->"
	endRef   = "<!-- END GENERATED STEP REFERENCE -->"
)

// TestReferenceIsCurrent fails when docs/specs.md's step reference differs
// from the step table; -update rewrites it.
func TestReferenceIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "specs.md")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(data)
	i, j := strings.Index(doc, beginRef), strings.Index(doc, endRef)
	require.True(t, i >= 0 && j > i, "docs/specs.md: want the markers %q and %q", beginRef, endRef)
	want := doc[:i+len(beginRef)] + "\n\n" + Reference() + "\n\n" + doc[j:]
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	require.Equal(t, want, doc, "docs/specs.md's step reference is stale: run go test ./internal/spec -update")
}

// TestExamplesMatchTheirSteps checks that every documented example is
// matched by its own step, first (no earlier step shadows it).
func TestExamplesMatchTheirSteps(t *testing.T) {
	for _, s := range steps {
		got, _ := match(exampleText(s))
		require.Same(t, s, got, "example %q of %s is matched by %v", s.example, s.pattern, got)
		require.Contains(t, []string{"Given", "When", "Then"}, s.keyword)
		require.True(t, strings.HasPrefix(s.example, s.keyword+" "), s.example)
		require.NotEmpty(t, s.doc)
	}
	require.GreaterOrEqual(t, len(steps), 30)
}

func runSpec(t *testing.T, feature, tags string) (Result, string) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "x.feature")
	require.NoError(t, os.WriteFile(p, []byte(feature), 0o644))
	var out bytes.Buffer
	res := Run(Options{Paths: []string{p}, Tags: tags, Format: "pretty", Output: &out})
	return res, out.String()
}

func TestFailureSaysWhatWhyAndHowToReproduce(t *testing.T) {
	res, out := runSpec(t, `Feature: f
  Scenario: too strict
    Given the fleet "default"
    And pool use-h100-8b has 1 replica
    When region us-east goes down at 10m for 10m
    Then interactive p99 TTFT stays below 100ms during the outage
`, "")
	require.Equal(t, 1, res.Status, out)
	for _, want := range []string{
		"expected: during regional-outage(us-east): interactive.ttft.p99 < 100ms",
		"measured: ",
		"seed 42",
		"timeline around regional-outage(us-east)",
		"fault-start",
		`reproduce: fleetdrill run default --set pools.use-h100-8b.replicas=1 --set 'faults=["regional-outage region=us-east at=10m for=10m"]' --set 'expect=[`,
	} {
		require.Contains(t, out, want)
	}
}

func TestUndefinedStepSuggestsTheNearest(t *testing.T) {
	res, out := runSpec(t, `Feature: f
  Scenario: typo
    Given the fleet "default"
    When regoin eu-west goes down at 5m
`, "")
	require.Equal(t, 1, res.Status, out)
	require.Contains(t, out, `undefined step "regoin eu-west goes down at 5m"; did you mean:`)
	require.Contains(t, out, "When region eu-west goes down at 5m    (", "the suggestion has the user's values")
}

// @live scenarios are not selected by default; selected, they run on the
// live harness, which refuses (before starting anything) a fault it cannot
// emulate, and the failure reproduces with run --live.
func TestLiveRunsOnTheLiveHarness(t *testing.T) {
	feature := `Feature: f
  @live
  Scenario: on the real fleet
    Given the fleet "default"
    And the live fleet runs at speed 5 with 1 replica per pool
    When the fault "cold-start-storm pool=use-h100-8b at=1m" is injected
    Then every request is accounted for
`
	res, out := runSpec(t, feature, "")
	require.Equal(t, 0, res.Status, out)
	require.NotContains(t, out, "cold-start", "@live is not selected by default")
	res, out = runSpec(t, feature, LiveTag)
	require.Equal(t, 1, res.Status, out)
	require.Contains(t, out, "cold-start storms have no live emulation")
	require.Contains(t, out, "fleetdrill run default --live --speed 5 --replicas 1")
}

func TestLiveSpeedNeedsTheLiveTag(t *testing.T) {
	res, out := runSpec(t, `Feature: f
  Scenario: on the twin
    Given the fleet "default"
    And the live fleet runs at speed 5
    Then every request is accounted for
`, "")
	require.Equal(t, 1, res.Status, out)
	require.Contains(t, out, "tag this one @live")
}

func TestBadEditFailsAtItsStep(t *testing.T) {
	res, out := runSpec(t, `Feature: f
  Scenario: bad pool
    Given the fleet "default"
    And pool use-h100 has 2 replicas
`, "")
	require.Equal(t, 1, res.Status, out)
	require.Contains(t, out, `no entry named "use-h100"`)
}

func TestMissingLibraryScenarioSkips(t *testing.T) {
	res, out := runSpec(t, `Feature: f
  Scenario: absent
    Given the library scenario "no-such-scenario"
    Then every request is accounted for
`, "")
	require.Equal(t, 0, res.Status, out)
	require.Len(t, res.Tally.Skipped, 1)
	require.Contains(t, out, `this build's library has no scenario "no-such-scenario"`)
}

func TestDeterministic(t *testing.T) {
	feature := `Feature: f
  Scenario: outage
    Given the fleet "default"
    When region us-east goes down at 10m for 10m
    Then interactive p99 TTFT stays below 1ms during the outage
`
	_, a := runSpec(t, feature, "")
	_, b := runSpec(t, feature, "")
	strip := func(s string) string { // drop godog's wall-clock line and temp paths
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			// The wall-clock line is a bare duration: 812ms, or 1.418229681s
			// on a loaded machine.
			if _, err := time.ParseDuration(strings.TrimSpace(l)); err == nil || strings.Contains(l, ".feature") {
				continue
			}
			keep = append(keep, l)
		}
		return strings.Join(keep, "\n")
	}
	require.Equal(t, strip(a), strip(b))
}

// TestDocsExamplePasses runs the first example of docs/specs.md, so the
// page never shows a spec that fails.
func TestDocsExamplePasses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/specs.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "```gherkin\n")
	require.True(t, ok, "docs/specs.md has no gherkin example")
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	res, out := runSpec(t, example, "")
	require.Equal(t, 0, res.Status, out)
	require.Contains(t, out, "1 scenarios (1 passed)")
}
