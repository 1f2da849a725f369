package scenarios

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzParse: Parse never panics, and whatever it accepts prints (yaml.Marshal)
// to text that parses back to the same scenario. The seed corpus is every
// fixture and library scenario plus testdata/fuzz/FuzzParse/, which holds
// the inputs earlier fuzzing found. Run it with
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 60s ./scenarios/
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	lib, _ := filepath.Glob("*.yaml")
	for _, name := range append(files, lib...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned a scenario and an error: %v", err)
			}
			if _, ok := err.(*ValidationError); !ok {
				t.Fatalf("Parse error %T, want *ValidationError: %v", err, err)
			}
			return
		}
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("yaml.Marshal of a parsed scenario: %v", err)
		}
		again, err := Parse("printed.yaml", out)
		if err != nil {
			t.Fatalf("reparse of the printed scenario: %v\nprinted:\n%s", err, out)
		}
		out2, err := yaml.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		// Compare the printed forms: the scenarios hold no NaN (validation
		// refuses it), so equal text is equal values, and the diff is
		// readable.
		if string(out) != string(out2) {
			t.Fatalf("print-reparse changed the scenario:\nfirst:\n%s\nsecond:\n%s", out, out2)
		}
	})
}

// FuzzParseExpectation: ParseExpectation never panics, and what it accepts
// prints back (String) to an equal expectation.
func FuzzParseExpectation(f *testing.F) {
	for _, s := range []string{
		"interactive.ttft.p99 < 2s", "residency_violations == 0", "requests.rejected <= 10",
		"tenants.acme.e2e.p95 < 30s", "x != -1.5e3", "a.b>=1h30m", "x<", "<=", "a <= 2562047h",
		"x.time_to_detect_s == never", "x < never", "x >= 0.99 if any", "after recovery + 5m: x < 2s if any", "x == never if any", "x < if any",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseExpectation(s)
		if err != nil {
			return
		}
		again, err := ParseExpectation(e.String())
		if err != nil {
			t.Fatalf("ParseExpectation(%q) = %+v, whose String %q does not parse: %v", s, e, e.String(), err)
		}
		if again.LHS != e.LHS || again.Op != e.Op || again.IsDuration != e.IsDuration || again.Never != e.Never || again.IfAny != e.IfAny {
			t.Fatalf("reparse of %q = %+v, want %+v", e.String(), again, e)
		}
		// Durations go through nanoseconds; allow their rounding.
		if d := math.Abs(again.Value - e.Value); d > 1e-9*math.Max(1, math.Abs(e.Value)) {
			t.Fatalf("reparse of %q = %v, want %v", e.String(), again.Value, e.Value)
		}
	})
}

// FuzzSet: an override on a valid scenario never panics, and what parses
// prints and reparses to the same scenario. Starting from a valid scenario
// reaches the print-reparse check far more often than FuzzParse does, with
// odd names, descriptions and numbers.
func FuzzSet(f *testing.F) {
	base, err := os.ReadFile("testdata/full.good.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"pools[0].replicas=8", "pools.us-small.replicas=1", "description=\"a\\tb\\u0085\"", "name=a.b-c_d",
		"seed=0x10", "workload[0].arrivals.rate=1e-300", "pools[0].profiles[small].kv_tokens=1",
		"regions[1]={name: x, jurisdiction: eu}", "expect=[\"a<1\"]", "policy.admission=", "models.big.quality=1",
		"pools[eu-big].quota.tokens_per_minute=5e300", "description=|\n  x\n  y\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, set string) {
		s, err := ParseWithSets("base.yaml", base, []string{set})
		if err != nil {
			return
		}
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("yaml.Marshal: %v", err)
		}
		again, err := Parse("printed.yaml", out)
		if err != nil {
			t.Fatalf("--set %q: reparse of the printed scenario: %v\nprinted:\n%s", set, err, out)
		}
		out2, err := yaml.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(out2) {
			t.Fatalf("--set %q: print-reparse changed the scenario:\nfirst:\n%s\nsecond:\n%s", set, out, out2)
		}
	})
}
