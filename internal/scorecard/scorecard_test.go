package scorecard

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func card(t *testing.T, provider string, sets ...string) *Card {
	t.Helper()
	c, err := Run(t.Context(), Options{Scenario: "default", Provider: provider, Sets: append([]string{"duration=5m"}, sets...)})
	require.NoError(t, err)
	return c
}

func gateItem(t *testing.T, c *Card, prefix string) GateItem {
	t.Helper()
	for _, g := range c.Gate {
		if strings.HasPrefix(g.Name, prefix) {
			return g
		}
	}
	t.Fatalf("no gate item %q in %+v", prefix, c.Gate)
	return GateItem{}
}

// TestPurchasableProviderTrial: a provider only on the purchasable list is
// scored on a trial purchase, made with --set so that the card's commands
// replay it; the provider's limit caps the trial.
func TestPurchasableProviderTrial(t *testing.T) {
	c := card(t, "gpu-cloud-c")
	require.Equal(t, []string{"usw-h100-8b", "usw-h100-70b"}, c.Pools)
	require.Equal(t, []string{"us-west"}, c.Regions)
	require.Equal(t, "gpu-cloud-c is not in the fleet: the drills buy a trial of its purchasable types (1 × usw-h100-8b, 1 × usw-h100-70b)", c.Trial)
	require.Contains(t, c.Command, "--set 'purchasable[0].replicas=1' --set 'purchasable[1].replicas=1'")
	for _, g := range c.Gate {
		if strings.HasPrefix(g.Command, "fleetdrill run") {
			require.Contains(t, g.Command, "--set 'purchasable[1].replicas=1'", g.Name)
		}
	}
	require.Contains(t, c.GateText(), "  trial: gpu-cloud-c is not in the fleet")
	require.Contains(t, c.Markdown(), "Trial: gpu-cloud-c is not in the fleet")

	big, err := Run(t.Context(), Options{Scenario: "default", Provider: "gpu-cloud-c", Sets: []string{"duration=5m"}, TrialReplicas: 12})
	require.NoError(t, err)
	require.Contains(t, big.Trial, "12 × usw-h100-8b, 8 × usw-h100-70b", "usw-h100-70b sells at most 8")

	// A provider with pools in the fleet is scored as it is.
	require.Empty(t, card(t, "gpu-cloud-b").Trial)
}

func TestDefaultGPUCloudB(t *testing.T) {
	c := card(t, "gpu-cloud-b")
	require.Equal(t, []string{"euw-a100-8b", "euw-a100-70b"}, c.Pools)
	require.Equal(t, []string{"eu-west"}, c.Regions)

	// Inventory: retail (us) is never routed to the EU; bank-eu and research are.
	require.Equal(t, []string{"bank-eu", "research"}, c.Inventory.Tenants)
	require.Positive(t, c.Inventory.RateRPS)
	require.LessOrEqual(t, c.Inventory.Input.P50, c.Inventory.Input.P99)

	require.True(t, c.Parity.Pass)
	require.Len(t, c.Parity.Checks, 2)
	require.NotEmpty(t, c.Parity.Notes) // vllm-0.8.5 would need driver 570.26

	// Data boundary: eu-west down leaves bank-eu nowhere to go in the EU;
	// residency holds and the lost capacity is reported.
	require.True(t, c.Boundary.Pass)
	var eu *Outage
	for i := range c.Boundary.Outages {
		if c.Boundary.Outages[i].Region == "eu-west" {
			eu = &c.Boundary.Outages[i]
		}
	}
	require.NotNil(t, eu)
	require.True(t, eu.ProviderRegion)
	require.Zero(t, eu.ResidencyViolations)
	require.True(t, eu.BoundaryKept)
	var bank *Failover
	for i := range eu.Tenants {
		if eu.Tenants[i].Tenant == "bank-eu" {
			bank = &eu.Tenants[i]
		}
	}
	require.NotNil(t, bank)
	require.True(t, bank.Stranded)
	require.Empty(t, bank.FailoverTo)
	require.Positive(t, bank.LostVsBaseline)
	require.Contains(t, gateItem(t, c, "data boundary").Evidence, "bank-eu (eu) cannot fail over outside eu")

	require.True(t, c.Fallback.Pass)
	require.Len(t, c.Fallback.Drills, 1)
	require.Equal(t, "llama-3.1-70b", c.Fallback.Drills[0].Model)
	require.Positive(t, c.Fallback.Drills[0].FallbackRequests)

	// The canary drills: research (unbound) is eligible, bank-eu has no
	// incumbent in the EU; each brownout is rolled back within the window
	// plus one evaluation, research losing nothing.
	require.Len(t, c.Fallback.Canaries, 2)
	for _, cd := range c.Fallback.Canaries {
		require.Equal(t, []string{"research"}, cd.Tenants, cd.Model)
		require.True(t, cd.Pass, cd.Reason)
		require.GreaterOrEqual(t, cd.TimeToRollbackS, 0.0)
		require.LessOrEqual(t, cd.TimeToRollbackS, 150.0)
		require.Zero(t, cd.RequestsLost)
		require.Contains(t, cd.Why, "error_rate > 2%")
	}
	rb := gateItem(t, c, "rollback")
	require.Contains(t, rb.Evidence, "canary of llama-3.1-8b at 50% on euw-a100-8b for research, brownout pool=euw-a100-8b at=165s for=90s fail=0.2 latency=800ms: time_to_rollback_s=15 (bound 150s), requests lost 0")
	require.Contains(t, rb.Command, `--set 'expect=["canaries.scorecard.time_to_rollback_s <= 150s", "faults.brownout(euw-a100-8b).tenants.research.lost == 0"]'`)

	require.True(t, c.Latency.Pass)
	require.GreaterOrEqual(t, c.Latency.LastPassing, 1.0)
	require.Equal(t, 120.0, c.Latency.ColdStarts["euw-a100-8b"])
	require.True(t, gateItem(t, c, "observability").Pass)
	require.True(t, gateItem(t, c, "rollback").Pass, gateItem(t, c, "rollback").Evidence)
	require.True(t, c.Passed, c.GateText())

	md := c.Markdown()
	for _, s := range []string{"## Production gate: PASS", "## 4. Data boundary: PASS", "cannot fail over outside eu"} {
		require.Contains(t, md, s)
	}
	b, err := c.JSON()
	require.NoError(t, err)
	require.Contains(t, string(b), `"residency_violations": 0`)
}

func TestIgnoreResidencyFailsBoundary(t *testing.T) {
	c := card(t, "gpu-cloud-b", "policy.routing.ignore_residency=true")
	require.False(t, c.Boundary.Pass)
	require.False(t, gateItem(t, c, "data boundary").Pass)
	require.False(t, c.Passed)
}

func TestParityMismatch(t *testing.T) {
	c := card(t, "gpu-cloud-b", "pools.euw-a100-8b.driver=535.104")
	require.False(t, c.Parity.Pass)
	require.Equal(t, 1, c.Parity.Mismatches)
	g := gateItem(t, c, "runtime parity")
	require.False(t, g.Pass)
	require.Contains(t, g.Evidence, "min_driver of runtime vllm-0.6.3")
	require.NotEmpty(t, c.NotRun)
	require.False(t, c.Passed)
}

func TestInvalid(t *testing.T) {
	for _, o := range []Options{
		{Scenario: "default", Provider: "nope"},
		{Scenario: "default"},
		{Scenario: "no-such-scenario", Provider: "gpu-cloud-b"},
		// a problem outside the provider's pools is invalid input, not parity
		{Scenario: "default", Provider: "gpu-cloud-b", Sets: []string{"pools.use-h100-8b.driver=535.104"}},
	} {
		_, err := Run(t.Context(), o)
		var ie *InvalidError
		require.True(t, errors.As(err, &ie), "%+v: %v", o, err)
	}
}

// TestCanaryRollbackDrill: fallback readiness needs traffic on the
// provider to go back to the incumbent by itself, in time, with nothing
// lost; the card says which of these failed.
func TestCanaryRollbackDrill(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sets   []string
		pass   bool
		reason string
	}{
		{"retried on the incumbent", nil, true, ""},
		// Without retries a failed canary attempt is the client's answer.
		{"no retries", []string{"policy.retries.max_attempts=1"}, false, "requests of research lost during the brownout"},
		// Against a 10 ms TTFT objective the provider fails the canary's
		// checks before any brownout.
		{"slow on its own", []string{"classes.interactive.slo.ttft=10ms"}, false, "before the brownout: the provider failed the checks on its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := card(t, "gpu-cloud-b", tc.sets...)
			cd := c.Fallback.Canaries[0]
			require.Equal(t, "llama-3.1-8b", cd.Model)
			require.Equal(t, tc.pass, cd.Pass, cd.Reason)
			require.Equal(t, tc.pass, gateItem(t, c, "rollback").Pass)
			require.False(t, !tc.pass && c.Fallback.Pass, "a failed canary drill fails stage 5")
			if tc.reason != "" {
				require.Contains(t, cd.Reason, tc.reason)
				require.Contains(t, gateItem(t, c, "rollback").Evidence, tc.reason)
			}
		})
	}
}

// TestCanaryDrillNeedsAnIncumbent: a trial provider (purchasable types)
// cannot be a canary's candidate, and the card says so rather than
// inventing a pass or a failure.
func TestCanaryDrillNeedsAnIncumbent(t *testing.T) {
	c := card(t, "gpu-cloud-c")
	require.Empty(t, c.Fallback.Canaries)
	require.Contains(t, c.Fallback.CanaryNote, "purchasable types bought for the trial")
	require.Contains(t, gateItem(t, c, "rollback").Evidence, "no canary drill: not drilled for llama-3.1-8b, llama-3.1-70b")
}
