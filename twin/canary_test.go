package twin

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

func loadCanary(t *testing.T, mod func(*scenarios.Scenario)) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Load("testdata/canary.yaml")
	require.NoError(t, err)
	if mod != nil {
		mod(sc)
	}
	return sc
}

func runCanary(t *testing.T, sc *scenarios.Scenario) *Report {
	t.Helper()
	rep, err := Run(context.Background(), sc, Options{})
	require.NoError(t, err)
	require.NoError(t, rep.CheckAccounting())
	return rep
}

// The goal in the twin: a canary browned out at 5 % is rolled back
// within one evaluation interval plus the trigger's window, nothing is
// lost, and the baseline's SLO holds.
func TestBrownedOutCanaryIsRolledBack(t *testing.T) {
	sc := loadCanary(t, nil)
	rep := runCanary(t, sc)
	for _, e := range rep.Expectations {
		require.True(t, e.Pass, "%s: %v %s", e.Expr, e.Value, e.NoData)
	}
	c := rep.Canaries["neocloud"]
	require.NotNil(t, c)
	cn := sc.Canaries[0]
	require.Equal(t, "rolled-back", c.State)
	require.True(t, c.TimeToRollbackS.Happened())
	require.LessOrEqual(t, float64(c.TimeToRollbackS), (cn.EvaluateEvery.D() + cn.Window.D()).Seconds())
	require.Positive(t, c.Canary.Failed, "the brownout reached the canary")
	require.Zero(t, rep.Requests.Failed, "its failed attempts were retried on the baseline")
	var acts []string
	for _, d := range c.Decisions {
		acts = append(acts, d.Action)
	}
	require.Equal(t, []string{"start", "step-up", "rollback"}, acts)
	require.Equal(t, 0.05, c.Decisions[2].From)
	require.Contains(t, c.Decisions[2].Why, "error_rate > 2%")
	// The measured share follows the decisions: about 5 % of the eligible
	// attempts in the minutes at 5 %, none after the rollback.
	back := int(float64(c.RolledBackAtS) / 60)
	for m := back + 1; m < len(c.ShareByMinute); m++ {
		if s := c.ShareByMinute[m]; s != nil {
			require.Zero(t, *s, "minute %d", m)
		}
	}
	var on, all float64
	for m := 5; m < 12; m++ {
		on += *c.ShareByMinute[m]
		all++
	}
	require.InDelta(t, 0.05, on/all, 0.02)
}

// Shadow copies are invisible to clients: with the canary never started,
// the run with a shadow and the run without give the same client-visible
// report, while the copies ran on the candidate. Brownouts on the
// baseline and the candidate, and a retry budget, make sure no copy moves
// a client's draw or the budget's base.
func TestShadowIsInvisibleToClients(t *testing.T) {
	base := func(sc *scenarios.Scenario) {
		sc.Faults = []string{"brownout pool=use-h100-8b at=5m for=5m fail=0.3",
			"brownout pool=neo-h100 at=4m for=8m fail=0.5 latency=200ms"}
		sc.Policy.Retries.Budget = 0.4
		sc.Expect = nil
		sc.Canaries[0].Start = scenarios.Duration(2 * time.Hour) // never starts
		sc.Canaries[0].Shadow = nil
	}
	without := runCanary(t, loadCanary(t, base))
	with := runCanary(t, loadCanary(t, func(sc *scenarios.Scenario) {
		base(sc)
		sc.Canaries[0].Shadow = &scenarios.Shadow{Share: 0.5, MaxSlots: 0.5}
	}))
	sh := with.Canaries["neocloud"].Shadow
	require.Positive(t, sh.Sent)
	require.Positive(t, sh.Completed)
	require.Positive(t, sh.Failed, "the candidate's brownout failed copies")
	require.Zero(t, sh.ResidencyViolations)
	require.Zero(t, without.Canaries["neocloud"].Shadow.Sent)
	require.Positive(t, with.Requests.Retries, "clients retried the baseline's brownout")

	visible := func(r *Report) string {
		b, err := json.Marshal(struct {
			Requests        Counts
			Classes         map[string]*Group
			Tenants         map[string]*Group
			Baseline, Euw   *PoolReport
			Rejections      map[string]uint64
			Residency       uint64
			CanaryAttempts  uint64
			BaselineAttempt uint64
			Faults          map[string]*FaultReport
		}{r.Requests, r.Classes, r.Tenants, r.Pools["use-h100-8b"], r.Pools["euw-h100-8b"], r.Rejections,
			r.ResidencyViolations, r.Canaries["neocloud"].Canary.Attempts, r.Canaries["neocloud"].Baseline.Attempts,
			map[string]*FaultReport{"baseline": r.Faults["brownout(use-h100-8b)"]}})
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, visible(without), visible(with))
	require.Greater(t, with.Pools["neo-h100"].BusyGPUHours, without.Pools["neo-h100"].BusyGPUHours, "the copies kept the candidate busy")
}

// Every copy is accounted for once: sent = completed + failed + shed +
// cancelled + in flight at the end, with copies failing (a brownout),
// cancelled with their originals and shed for want of slots.
func TestShadowAccountsForEveryCopy(t *testing.T) {
	rep := runCanary(t, loadCanary(t, func(sc *scenarios.Scenario) {
		sc.Expect = nil
		sc.Canaries[0].Shadow = &scenarios.Shadow{Share: 1, MaxSlots: 0.02, CancelWithPrimary: true}
	}))
	sh := rep.Canaries["neocloud"].Shadow
	require.Equal(t, sh.Sent, sh.Completed+sh.Failed+sh.Shed+sh.Cancelled+sh.InFlightAtEnd)
	require.Positive(t, sh.Failed, "the brownout failed copies")
	require.Positive(t, sh.Cancelled, "copies cancelled with their originals")
	require.Positive(t, sh.Shed, "copies shed for want of slots")
	require.Positive(t, sh.Completed)
}

// A canary that is never rolled back has no time to rollback: == never
// passes, a bound fails saying so.
func TestCanaryNotRolledBackIsNever(t *testing.T) {
	rep := runCanary(t, loadCanary(t, func(sc *scenarios.Scenario) {
		sc.Faults = nil
		sc.Expect = []string{"canaries.neocloud.time_to_rollback_s == never", "canaries.neocloud.time_to_rollback_s < 2m",
			"canaries.neocloud.rolled_back_at_s == never"}
	}))
	require.True(t, rep.Expectations[0].Pass)
	require.False(t, rep.Expectations[1].Pass)
	require.Equal(t, "not rolled back", rep.Expectations[1].NoData)
	require.True(t, rep.Expectations[2].Pass)
	require.Equal(t, "stepping", rep.Canaries["neocloud"].State)
}

// A held canary keeps its share while its triggers fire, and resumes its
// schedule once the brownout ends and its figures clear.
func TestHeldCanaryResumesAfterTheBrownout(t *testing.T) {
	rep := runCanary(t, loadCanary(t, func(sc *scenarios.Scenario) {
		sc.Expect = nil
		sc.Duration = scenarios.Duration(30 * time.Minute)
		sc.Canaries[0].OnBreach = scenarios.OnBreachHold
		sc.Canaries[0].Steps[1].For = scenarios.Duration(9 * time.Minute) // the brownout (12m) comes before 13m
	}))
	c := rep.Canaries["neocloud"]
	var acts []string
	for _, d := range c.Decisions {
		acts = append(acts, d.Action)
	}
	require.Equal(t, []string{"start", "step-up", "hold", "resume", "promote"}, acts)
	require.Zero(t, rep.Requests.Failed)
	hold, resume := c.Decisions[2], c.Decisions[3]
	require.Equal(t, 0.05, hold.To)
	require.Greater(t, resume.AtS, 17*60.0, "resumed only after the brownout ended (17m)")
	require.Equal(t, 1.0, c.Share)
}
