package spec

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// What a CI test reporter reads from a JUnit file, declared apart from the
// writer's types so the test checks the XML rather than the structs.
type ciReport struct {
	XMLName xml.Name `xml:"testsuites"`
	ciCounts
	Suites []struct {
		Name string `xml:"name,attr"`
		ciCounts
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Time      string `xml:"time,attr"`
			Failures  []struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Errors []struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
			} `xml:"error"`
			Skipped []struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

type ciCounts struct {
	Tests    int    `xml:"tests,attr"`
	Failures int    `xml:"failures,attr"`
	Errors   int    `xml:"errors,attr"`
	Skipped  int    `xml:"skipped,attr"`
	Time     string `xml:"time,attr"`
}

// TestJUnitIsWhatCIReportersExpect runs two consecutive failing scenarios
// (godog's own formatter wrote the first status="passed" beside its
// <failure> and counted one failure short; see the fixture), a passing
// one, one with an undefined step and a skipped one, and reads the report
// as a CI reporter would.
func TestJUnitIsWhatCIReportersExpect(t *testing.T) {
	report := filepath.Join(t.TempDir(), "spec.xml")
	var out bytes.Buffer
	res := Run(Options{
		Paths:  []string{"testdata/junit/1-failures.feature", "testdata/junit/2-basics.feature", "testdata/junit/3-library.feature"},
		Format: "junit:" + report, Output: &out,
	})
	require.Equal(t, 1, res.Status, out.String())
	data, err := os.ReadFile(report)
	require.NoError(t, err)
	var got ciReport
	require.NoError(t, xml.Unmarshal(data, &got), string(data))

	wants := map[string]struct {
		suite, status, message string // status: passed, failure, error, skipped
	}{
		"an impossible target":          {"Failing targets", "failure", `step "interactive p99 TTFT stays below 1ms": outcome failed; expected: interactive.ttft.p99 < 1ms`},
		"a pool that does not exist":    {"Failing targets", "failure", `step "pool use-h100 has 2 replicas": `},
		"the fleet keeps every request": {"Fleet basics", "passed", ""},
		"a typo in a step":              {"Fleet basics", "error", `undefined step "regoin us-east goes down at 10m"`},
		"a scenario this build lacks":   {"Library scenarios", "skipped", `this build's library has no scenario "no-such-scenario"`},
	}
	seen := map[string]bool{}
	for _, s := range got.Suites {
		for _, c := range s.Cases {
			w, ok := wants[c.Name]
			require.True(t, ok && !seen[c.Name], "unexpected or repeated test case %q", c.Name)
			seen[c.Name] = true
			require.Equal(t, w.suite, s.Name, c.Name)
			require.Equal(t, w.suite, c.Classname, "classname is the feature's name")
			_, err := strconv.ParseFloat(c.Time, 64)
			require.NoError(t, err, "time of %q", c.Name)
			status, message := "passed", ""
			switch {
			case len(c.Failures) > 0:
				require.Len(t, c.Failures, 1, "%q: exactly one <failure>", c.Name)
				require.Empty(t, c.Errors, c.Name)
				require.Equal(t, "failed", c.Failures[0].Type)
				require.Contains(t, c.Failures[0].Body, "\n", "the body has the whole error")
				status, message = "failure", c.Failures[0].Message
			case len(c.Errors) > 0:
				require.Len(t, c.Errors, 1, c.Name)
				require.Equal(t, "undefined", c.Errors[0].Type)
				status, message = "error", c.Errors[0].Message
			case len(c.Skipped) > 0:
				status, message = "skipped", c.Skipped[0].Message
			}
			require.Equal(t, w.status, status, "test case %q", c.Name)
			require.Contains(t, message, w.message, "test case %q", c.Name)
		}
	}
	require.Len(t, seen, len(wants))

	// tests, failures, errors, skipped
	counts := func(c ciCounts) [4]int { return [4]int{c.Tests, c.Failures, c.Errors, c.Skipped} }
	suites := map[string][4]int{}
	var names []string
	for _, s := range got.Suites {
		suites[s.Name] = counts(s.ciCounts)
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"Failing targets", "Fleet basics", "Library scenarios"}, names, "one suite per feature, in the order they ran")
	require.Equal(t, [4]int{2, 2, 0, 0}, suites["Failing targets"], "tests, failures, errors, skipped")
	require.Equal(t, [4]int{2, 0, 1, 0}, suites["Fleet basics"], "tests, failures, errors, skipped")
	require.Equal(t, [4]int{1, 0, 0, 1}, suites["Library scenarios"], "tests, failures, errors, skipped")
	require.Equal(t, [4]int{5, 2, 1, 1}, counts(got.ciCounts), "all: tests, failures, errors, skipped")
}

func TestParseFormats(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Format
		err  string
	}{
		{in: "pretty", want: []Format{{"pretty", ""}}},
		{in: "pretty,junit:r.xml", want: []Format{{"pretty", ""}, {"junit", "r.xml"}}},
		{in: "junit:C:\\r.xml", want: []Format{{"junit", "C:\\r.xml"}}},
		{in: "prety", err: `unknown format "prety"`},
		{in: "junit:", err: "empty file name"},
	} {
		got, err := ParseFormats(tc.in)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

// Outline examples share their scenario's name; reporters would merge
// test cases with the same classname and name.
func TestJUnitNumbersOutlineExamples(t *testing.T) {
	dir := t.TempDir()
	feature, report := filepath.Join(dir, "x.feature"), filepath.Join(dir, "x.xml")
	require.NoError(t, os.WriteFile(feature, []byte(`Feature: f
  Scenario Outline: resized
    Given the fleet "default"
    And pool use-h100-8b has <n> replicas
    Then every request is accounted for

    Examples:
      | n |
      | 1 |
      | 2 |
`), 0o644))
	var out bytes.Buffer
	res := Run(Options{Paths: []string{feature}, Format: "junit:" + report, Output: &out})
	require.Equal(t, 0, res.Status, out.String())
	data, err := os.ReadFile(report)
	require.NoError(t, err)
	var got ciReport
	require.NoError(t, xml.Unmarshal(data, &got))
	require.Len(t, got.Suites, 1)
	var names []string
	for _, c := range got.Suites[0].Cases {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"resized #1", "resized #2"}, names)
}
