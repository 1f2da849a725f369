package spec

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/faults"
)

// TestTenantOutcomesOnAnEUOutage runs testdata/steps/tenants.feature:
// eu-residency with eu-west dark from 5m to 15m, where the EU-bound
// bank-eu has nowhere to go and global is served in the US. Each
// scenario's name says whether it passes; a failing one must fail for
// the reason given here, with what happened.
func TestTenantOutcomesOnAnEUOutage(t *testing.T) {
	fails := map[string][]string{
		"fails: bank-eu is never mitigated": {
			// The whole step: that it happened and its bound, in the
			// message and in the reproduce command, which judges them
			// alone (not the fleet's own expectations).
			"expected: faults.regional-outage(eu-west).tenants.bank-eu.time_to_mitigate_s >= 0 and faults.regional-outage(eu-west).tenants.bank-eu.time_to_mitigate_s <= 1m\n",
			"measured: no data: not mitigated\n",
			"what happened: tenant bank-eu had ", "mitigated never",
			`reproduce: fleetdrill run eu-residency --set 'faults=["regional-outage region=eu-west at=5m for=10m"]' --set 'expect=["faults.regional-outage(eu-west).tenants.bank-eu.time_to_mitigate_s >= 0", "faults.regional-outage(eu-west).tenants.bank-eu.time_to_mitigate_s <= 1m"]'` + "\n"},
		"fails: bank-eu is not served elsewhere": {
			"tenants.bank-eu.served_elsewhere > 0", "measured: 0", "0 served elsewhere"},
		"fails: bank-eu is not served in the US": {
			"tenants.bank-eu.served_by_pool.use-h100-8b > 0", "measured: 0",
			// Not a report value, so the command reproduces the run alone,
			// judging nothing.
			`reproduce: fleetdrill run eu-residency --set 'faults=["regional-outage region=eu-west at=5m for=10m"]' --set 'expect=[]'` + "\n"},
		"fails: bank-eu loses requests":               {"tenants.bank-eu.lost <= 5"},
		"fails: bank-eu misses its SLO":               {"tenants.bank-eu.slo_attainment_during >= 0.99"},
		"fails: breakers open in the EU":              {"expected: no breaker opens during regional-outage(eu-west)", "measured: 2 opened during regional-outage(eu-west): pool euw-a100-8b replica 4 at 305.0s"},
		"fails: no breaker opens in the US":           {"expected: a breaker opens on pool use-h100-8b", "measured: none opened on pool use-h100-8b; over the run 2 opened: pool euw-a100-8b replica"},
		"fails: global's attainment is not below 90%": {"expected: faults.regional-outage(eu-west).tenants.global.slo_attainment_during < 0.9\n", "measured: 100.00%"},
		"fails: global is served, not refused":        {"tenant global: requests refused at arrival with a retry hint during regional-outage(eu-west)", "measured: none refused"},
		"fails: residency broken for bank-eu": {"expected: residency_violations_by_tenant.bank-eu.violations == 0", "served outside jurisdiction eu: by pool use-h100-8b ", "by region us-east ",
			`--set 'expect=["residency_violations_by_tenant.bank-eu.violations == 0"]'`},
		"fails: no EU replica is ejected by the outage":      {"expected: a replica of pool euw-a100-8b is ejected within 30s of the start of regional-outage(eu-west)", "measured: no replica of pool euw-a100-8b was ejected after regional-outage(eu-west) began"},
		"fails: the EU serves the traffic during the outage": {"during regional-outage(eu-west): pools.euw-a100-8b.share >= 0.1", "measured: 0"},
	}
	report := runJUnit(t, "testdata/steps/tenants.feature")
	require.Len(t, report.Suites, 1)
	cases := report.Suites[0].Cases
	failing := 0
	for _, c := range cases {
		if strings.HasPrefix(c.Name, "fails: ") {
			failing++
		}
	}
	require.Equal(t, len(fails), failing, "every failing scenario has its reasons here")
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			want, fail := fails[c.Name]
			if !fail {
				require.True(t, strings.HasPrefix(c.Name, "passes: "), c.Name)
				require.Empty(t, c.Failures)
				require.Empty(t, c.Errors)
				return
			}
			require.Len(t, c.Failures, 1, "%s must fail", c.Name)
			body := c.Failures[0].Body
			for _, w := range want {
				require.Contains(t, body, w)
			}
		})
	}
}

// runJUnit runs feature files and returns their JUnit report.
func runJUnit(t *testing.T, paths ...string) ciReport {
	t.Helper()
	file := filepath.Join(t.TempDir(), "spec.xml")
	var out bytes.Buffer
	Run(Options{Paths: paths, Format: "junit:" + file, Output: &out})
	data, err := os.ReadFile(file)
	require.NoError(t, err, out.String())
	var r ciReport
	require.NoError(t, xml.Unmarshal(data, &r))
	return r
}

// TestFaultSteps checks that each fault step adds the fault line it says
// and that the words for it name it in outcomes.
func TestFaultSteps(t *testing.T) {
	for _, tc := range []struct {
		step, line, words, label string
	}{
		{"region eu-west browns out at 10m for 5m with 2s added latency",
			"brownout region=eu-west at=10m for=5m latency=2s", "the brownout", "brownout(eu-west)"},
		{"pool use-h100-8b browns out at 1m with 20% of requests failing and 200ms added latency",
			"brownout pool=use-h100-8b at=1m fail=0.2 latency=200ms", "brownout", "brownout(use-h100-8b)"},
		{"region eu-west browns out at 1m for 2m with 0.5 of requests failing",
			"brownout region=eu-west at=1m for=2m fail=0.5", "the fault", "brownout(eu-west)"},
		{"pool use-h100-8b adds 500ms latency at 5m for 5m",
			"latency pool=use-h100-8b at=5m for=5m latency=500ms", "the latency fault", "latency(use-h100-8b)"},
		{"model llama-3.1-8b adds 1s of latency at 5m",
			"latency model=llama-3.1-8b at=5m latency=1s", "the latency injection", "latency(llama-3.1-8b)"},
		{"pool euw-a100-8b fails 40% of requests at 5m for 2m",
			"error-burst pool=euw-a100-8b at=5m for=2m fail=0.4", "the error burst", "error-burst(euw-a100-8b)"},
		{"1 replica of pool euw-a100-8b browns out at 5m for 2m with 2s added latency",
			"brownout pool=euw-a100-8b at=5m for=2m count=1 latency=2s", "the brownout", "brownout(euw-a100-8b)"},
		{"2 replicas of pool use-h100-8b brown out at 1m with 30% of requests failing",
			"brownout pool=use-h100-8b at=1m count=2 fail=0.3", "the fault", "brownout(use-h100-8b)"},
		{"region us-east fails 0.05 of requests at 5m",
			"error-burst region=us-east at=5m fail=0.05", "the error burst", "error-burst(us-east)"},
	} {
		t.Run(tc.step, func(t *testing.T) {
			w := fleet(t, "eu-residency")
			require.NoError(t, do(t, w, tc.step))
			require.Equal(t, tc.line, w.faults[len(w.faults)-1])
			l, err := w.labelFor(tc.words)
			require.NoError(t, err)
			require.Equal(t, tc.label, l)
		})
	}
}

// TestStepErrorsSayWhatToFix: a step with a bad value fails at itself,
// naming the fix (and the nearest name, never the one it rejects).
func TestStepErrorsSayWhatToFix(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []string
		want  string
	}{
		{"brownout without an effect", []string{"region eu-west browns out at 10m for 5m"},
			`a brownout needs what it does: end the step with "with 20% of requests failing", "with 2s added latency" or both`},
		{"replica brownout without an effect", []string{"1 replica of pool use-h100-8b browns out at 10m for 5m"},
			`a brownout needs what it does: end the step with "with 20% of requests failing", "with 2s added latency" or both`},
		{"share over all", []string{"pool use-h100-8b fails 140% of requests at 5m"},
			`failing share "140%": want a fraction (0.2) or a percentage (20%), above 0 and at most all of them`},
		{"misspelt tenant", []string{"region eu-west goes down at 5m", "tenant bank-ue loses no requests during the outage"},
			`the fleet has no tenant "bank-ue"; did you mean "bank-eu"? (tenants: bank-eu, health-eu, global)`},
		{"unknown class", []string{"region eu-west goes down at 5m", "class chat is served by model llama-3.1-8b during the outage"},
			`the fleet has no class "chat" (classes: interactive)`},
		{"misspelt pool", []string{"region eu-west goes down at 5m", "tenant global is served in pool use-h100 during the outage"},
			`the fleet has no pool "use-h100"; did you mean "use-h100-8b"?`},
		{"misspelt model", []string{"region eu-west goes down at 5m", "tenant global is served by model llama-3.1-8 during the outage"},
			`the fleet has no model "llama-3.1-8"; did you mean "llama-3.1-8b"?`},
		{"breaker on no pool", []string{"no breaker opens on pool euw-a100"},
			`the fleet has no pool "euw-a100"; did you mean "euw-a100-8b"?`},
		{"offset on a tenant's after", []string{"region eu-west goes down at 5m for 5m", "tenant global SLO attainment is at least 99% after the outage + 5m"},
			"with no offset; write after the outage"},
		{"no such fault", []string{"tenant global loses no requests during the brownout"},
			"the scenario has no brownout fault"},
		{"fleet misspelt", []string{`the fleet "eu-residnecy"`},
			`no library scenario named "eu-residnecy"; did you mean "eu-residency"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fleet(t, "eu-residency")
			var err error
			for _, s := range tc.steps {
				if err = do(t, w, s); err != nil {
					break
				}
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// fleet is a world started from a library scenario.
func fleet(t *testing.T, name string) *world {
	t.Helper()
	w := &world{}
	require.NoError(t, w.setFleet(name, false))
	return w
}

// do runs one step as godog would: its action, or its outcome's
// expectations (checked against the run).
func do(t *testing.T, w *world, text string) error {
	t.Helper()
	s, a := match(text)
	require.NotNil(t, s, "no step matches %q", text)
	if s.do != nil {
		return s.do(context.Background(), w, a)
	}
	exprs, err := s.exprs(w, a)
	if err != nil {
		return err
	}
	return w.check(context.Background(), exprs, "", nil)
}

// TestDroppingTheFleetsExpectations: the scenario's own expectations
// leave the reproduce command, and every expectation of the scenario
// holds trivially.
func TestDroppingTheFleetsExpectations(t *testing.T) {
	w := fleet(t, "eu-residency")
	require.NotEmpty(t, w.baseExpect())
	require.NoError(t, do(t, w, "the fleet's own expectations are dropped"))
	require.Empty(t, w.baseExpect())
	require.Contains(t, w.repro([]string{"requests.timed_out == 0"}), `--set 'expect=["requests.timed_out == 0"]'`)
}

// TestUndefinedStepSuggestionsUseTheUsersValues: a mistyped step is
// suggested back with what the user wrote, typos in the step's own words
// corrected, its optional parts left out unless needed.
func TestUndefinedStepSuggestionsUseTheUsersValues(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"regoin eu-west goes down at 5m", "When region eu-west goes down at 5m    ("},
		{"regoin eu-west goes down at 5m for 3m", "When region eu-west goes down at 5m for 3m    ("},
		{"the gatway detects the error burst within 1m", "Then the gateway detects the error burst within 1m    ("},
		{"the gateway mitigate the outage for tenant bank-eu within 1m", "Then the gateway mitigates the outage for tenant bank-eu within 1m    ("},
		{"tenant bank-eu looses at most 3 requests during the outage", "Then tenant bank-eu loses at most 3 requests during the outage    ("},
		{`the flet "eu-residency"`, `Given the fleet "eu-residency"    (`},
		{"interactive p99 TTFT stay below 3s during the outage", "Then interactive p99 TTFT stays below 3s during the outage    ("},
		{"pool use-h100-8b adds 300ms latncy at 3m", "When pool use-h100-8b adds 300ms latency at 3m    ("},
		{"no breakers open on pool euw-a100-8b", "Then no breaker opens on pool euw-a100-8b    ("},
	} {
		t.Run(tc.text, func(t *testing.T) {
			msg := undefined(tc.text).Error()
			_, first, _ := strings.Cut(msg, "did you mean:\n    ")
			require.True(t, strings.HasPrefix(first, tc.want), "first suggestion of\n%s", msg)
		})
	}
}

// TestFaultWordsMatchTraits: every word of every kind's faults.Traits.Words
// names that kind in a step's window ("during the outage"), none is
// shadowed by the words for any kind, and docs/specs.md lists each kind's
// first word.
func TestFaultWordsMatchTraits(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "specs.md"))
	require.NoError(t, err)
	flat := strings.Join(strings.Fields(string(doc)), " ")
	for _, name := range faults.Kinds() {
		k := faults.Kind(name)
		for _, word := range k.Traits().Words {
			if got, ok := faultWord(word); !ok || got != k {
				t.Errorf("%s: step word %q names %q (%v)", k, word, got, ok)
			}
		}
		if first := "the " + k.Traits().Words[0]; !strings.Contains(flat, first) {
			t.Errorf("%s: docs/specs.md does not list its word %q among the kinds' words", k, first)
		}
	}
	for _, word := range []string{"fault", "last fault"} {
		if got, ok := faultWord(word); !ok || got != "" {
			t.Errorf("%q names %q (%v), want any kind", word, got, ok)
		}
	}
}
