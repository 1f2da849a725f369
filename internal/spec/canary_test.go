package spec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// neocloud is the fleet of features/canary.feature: an incumbent H100
// pool, a neocloud candidate (neo-h100) and an EU pool, no canary, no
// fault.
const neocloud = "../../features/testdata/neocloud.yaml"

const brownout = "pool neo-h100 browns out at 12m for 5m with 30% of requests failing and 800ms added latency"

// TestCanaryStepsWriteOneOverride: the canary and shadow steps build one
// canaries=[...] override, with the step's pool, share and tenant and the
// documented triggers; a shadow of the same pool joins its canary.
func TestCanaryStepsWriteOneOverride(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []string
		want  string
	}{
		{"canary for a tenant", []string{`a canary of "neo-h100" at 5% for "retail"`},
			`canaries=[{name: neo-h100, model: llama-3.1-8b, candidate: [neo-h100], tenants: [retail], steps: [{share: 0.05}], rollback_if: ["error_rate > 2%", "ttft_p99 > slo"]}]`},
		{"canary for everyone, as a fraction", []string{`a canary of "neo-h100" at 0.25`},
			`canaries=[{name: neo-h100, model: llama-3.1-8b, candidate: [neo-h100], steps: [{share: 0.25}], rollback_if: ["error_rate > 2%", "ttft_p99 > slo"]}]`},
		{"shadow joins its canary", []string{`a canary of "neo-h100" at 5% for "retail"`, `shadow traffic of 10% to "neo-h100"`},
			`canaries=[{name: neo-h100, model: llama-3.1-8b, candidate: [neo-h100], tenants: [retail], steps: [{share: 0.05}], rollback_if: ["error_rate > 2%", "ttft_p99 > slo"], shadow: {share: 0.1}}]`},
		{"shadow only", []string{`shadow traffic of 20% to "neo-h100" for "research"`},
			`canaries=[{name: neo-h100, model: llama-3.1-8b, candidate: [neo-h100], tenants: [research], shadow: {share: 0.2}}]`},
		{"two candidates", []string{`a canary of "neo-h100,euw-h100-8b" at 1%`},
			`canaries=[{name: neo-h100_euw-h100-8b, model: llama-3.1-8b, candidate: [neo-h100, euw-h100-8b], steps: [{share: 0.01}], rollback_if: ["error_rate > 2%", "ttft_p99 > slo"]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fleet(t, neocloud)
			for _, s := range tc.steps {
				require.NoError(t, do(t, w, s))
			}
			sets := w.allSets()
			require.Equal(t, tc.want, sets[len(sets)-1])
			sc, err := w.load(nil)
			require.NoError(t, err)
			require.Len(t, sc.Canaries, 1)
			require.Equal(t, 20, sc.Canaries[0].MinRequests, "the schema's defaults apply")
		})
	}
}

// TestCanaryStepErrorsSayWhatToFix: a canary step with a bad value fails
// at itself, naming the fix.
func TestCanaryStepErrorsSayWhatToFix(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []string
		want  string
	}{
		{"share over all", []string{`a canary of "neo-h100" at 150%`},
			`canary share "150%": want a fraction (0.05) or a percentage (5%), above 0 and at most all of the traffic`},
		{"misspelt pool", []string{`a canary of "neo-h10" at 5%`}, `the fleet has no pool "neo-h10"; did you mean "neo-h100"?`},
		{"misspelt tenant", []string{`a canary of "neo-h100" at 5% for "retial"`}, `the fleet has no tenant "retial"; did you mean "retail"?`},
		{"no baseline left", []string{`a canary of "neo-h100,use-h100-8b,euw-h100-8b" at 5%`},
			"a canary needs a baseline to roll back to"},
		{"shadow for another tenant", []string{`a canary of "neo-h100" at 5% for "retail"`, `shadow traffic of 10% to "neo-h100" for "research"`},
			`a shadow mirrors its canary's eligible traffic, and the canary of "neo-h100" is for tenant retail`},
		{"no canary to judge", []string{"the canary is rolled back within 2m"},
			`the scenario has no canary: add one with a step like Given a canary of "neo-h100" at 5% for "retail"`},
		{"misnamed canary", []string{`a canary of "neo-h100" at 5%`, `the canary "neo" is not rolled back`},
			`the fleet has no canary "neo"; did you mean "neo-h100"?`},
		{"no shadow to judge", []string{`a canary of "neo-h100" at 5%`, "shadow traffic never reaches the tenant"},
			"the scenario has no shadow traffic"},
		{"no duration", []string{`a canary of "neo-h100" at 5%`, "the canary is rolled back within soon"},
			`"soon": want a duration such as 2m`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fleet(t, neocloud)
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

// TestCanaryOutcomes: the rollback outcomes pass and fail on what the
// canary did, and a failure says the time measured, or that there was no
// rollback, or that it came before any fault, with the decisions.
func TestCanaryOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		steps   []string
		outcome string
		want    []string // empty: passes
	}{
		{"rolled back in time", []string{brownout}, "the canary is rolled back within 2m30s", nil},
		{"rolled back too late for the bound", []string{brownout}, "the canary is rolled back within 10s", []string{
			"expected: canaries.neo-h100.time_to_rollback_s <= 10s",
			"measured: rolled back 30s after brownout(neo-h100) began (at 12m30s)",
			"what happened: canary neo-h100: 0s start 0% → 5%: the schedule begins; 12m30s rollback 5% → 0%: error_rate > 2%",
			"timeline around brownout(neo-h100)",
			`reproduce: fleetdrill run ../../features/testdata/neocloud.yaml --set 'faults=["brownout pool=neo-h100 at=12m for=5m fail=0.3 latency=800ms"]' --set 'canaries=[{name: neo-h100,`,
			`--set 'expect=["canaries.neo-h100.time_to_rollback_s <= 10s"]'`}},
		{"rolled back when it should not be", []string{brownout}, "the canary is not rolled back", []string{
			"expected: canaries.neo-h100.rolled_back_at_s == never (the canary neo-h100 is not rolled back)",
			// The reproduce command judges it: fleetdrill run fails too.
			`--set 'expect=["canaries.neo-h100.rolled_back_at_s == never"]'`,
			"measured: rolled back 30s after brownout(neo-h100) began (at 12m30s)"}},
		{"healthy", nil, "the canary is not rolled back", nil},
		// The steps' canary holds its one share: it reaches 5% at once
		// and never 100% (features/canary.feature promotes a stepped one).
		{"reaches its share", nil, "the canary is promoted to 5% within 1m", nil},
		{"never promoted", nil, "the canary is promoted to 100% within 17m", []string{
			"expected: the canary neo-h100 is promoted to 100% within 17m",
			"measured: never reached 100%: its highest share was 5% (state stepping at the end)",
			"(this outcome has no expectation of the scenario syntax"}},
		{"never rolled back", nil, `the canary "neo-h100" is rolled back within 2m`, []string{
			"measured: not rolled back (state stepping, share 5% at the end)",
			"what happened: canary neo-h100: 0s start 0% → 5%: the schedule begins\n"}},
		// All of retail's traffic, one sequence at a time: the candidate
		// misses the TTFT objective on its own and is rolled back with no
		// fault to time it from.
		{"rolled back before any fault", []string{`a canary of "neo-h100" at 100% for "retail"`, "the setting pools.neo-h100.max_batch is 1"}, "the canary is rolled back within 2m", []string{
			"measured: rolled back at ", ", before any fault on its candidate neo-h100",
			"ttft_p99 > slo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fleet(t, neocloud)
			require.NoError(t, do(t, w, `a canary of "neo-h100" at 5% for "retail"`))
			for _, s := range tc.steps {
				require.NoError(t, do(t, w, s))
			}
			err := do(t, w, tc.outcome)
			if len(tc.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, s := range tc.want {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

// TestShadowNeverReachesTheTenant: the outcome passes on a run with
// shadows, and fails, saying what it found, when copies are counted as
// clients' requests or served abroad.
func TestShadowNeverReachesTheTenant(t *testing.T) {
	setup := func(t *testing.T) *world {
		w := fleet(t, neocloud)
		for _, s := range []string{`a canary of "neo-h100" at 5% for "retail"`, `shadow traffic of 10% to "neo-h100"`, brownout} {
			require.NoError(t, do(t, w, s))
		}
		require.NoError(t, w.run(context.Background()))
		require.Positive(t, w.rep.Canaries["neo-h100"].Shadow.Sent)
		return w
	}
	const step = "shadow traffic never reaches the tenant"
	t.Run("passes", func(t *testing.T) {
		require.NoError(t, do(t, setup(t), step))
	})
	t.Run("copies counted as requests", func(t *testing.T) {
		w := setup(t)
		sent := w.rep.Canaries["neo-h100"].Shadow.Sent
		w.rep.Tenants["retail"].Arrived += sent
		w.rep.Tenants["retail"].Completed += sent
		err := do(t, w, step)
		require.ErrorContains(t, err, "measured: tenants.retail.arrived is ")
		require.ErrorContains(t, err, ", but the clients sent ")
	})
	t.Run("copies served abroad", func(t *testing.T) {
		w := setup(t)
		w.rep.Canaries["neo-h100"].Shadow.ResidencyViolations = 3
		require.ErrorContains(t, do(t, w, step), "canaries.neo-h100.shadow.residency_violations is 3: copies were served outside their tenant's jurisdiction")
	})
	t.Run("the comparison sees a difference", func(t *testing.T) {
		// The pair is compared at share 0; at 5% the copies share the
		// candidate's batches with canary requests, and the byte
		// comparison tells.
		w := setup(t)
		with, without := w.shadowPair()
		a, err := w.clientView(context.Background(), with)
		require.NoError(t, err)
		b, err := w.clientView(context.Background(), without)
		require.NoError(t, err)
		require.Equal(t, a, b, "at share 0 the shadows change nothing a client sees")
		with.Canaries, without.Canaries = w.sc.Canaries, nil
		without.Canaries = append(without.Canaries, w.sc.Canaries...)
		without.Canaries[0].Shadow = nil
		a, err = w.clientView(context.Background(), with)
		require.NoError(t, err)
		b, err = w.clientView(context.Background(), without)
		require.NoError(t, err)
		require.NotEqual(t, a["tenants.retail"], b["tenants.retail"])
	})
}
