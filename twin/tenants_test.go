package twin

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tenantByName is the snapshot's state of the named tenant.
func tenantByName(t *testing.T, s Snapshot, name string) TenantState {
	t.Helper()
	for _, ts := range s.Tenants {
		if ts.Name == name {
			return ts
		}
	}
	t.Fatalf("no tenant %s in the snapshot at %v", name, s.Now)
	return TenantState{}
}

// checkTenantAccounting checks what holds of every snapshot's tenants: in
// the scenario's order; each finished request completed or was lost (the
// twin cancels none); the places served add up to the completions, most
// first, each in the region of its pool and within the tenant's
// jurisdiction; and the tenants' finished requests are the classes'.
func checkTenantAccounting(t *testing.T, d *Drill, s Snapshot) {
	t.Helper()
	require.Len(t, s.Tenants, len(d.sc.Tenants))
	regionOf, jurisdictionOf := map[string]string{}, map[string]string{}
	for _, rs := range s.Regions {
		jurisdictionOf[rs.Name] = rs.Jurisdiction
		for _, p := range rs.Pools {
			regionOf[p.Name] = rs.Name
		}
	}
	var tenantsFinished, classesFinished uint64
	for i, ts := range s.Tenants {
		tn := d.sc.Tenants[i]
		require.Equal(t, tn.Name, ts.Name)
		require.Equal(t, tn.Jurisdiction, ts.Jurisdiction)
		require.Equal(t, ts.Finished, ts.Completed+ts.Lost(), "%v: %+v", s.Now, ts)
		require.LessOrEqual(t, ts.Attainment, 1.0)
		if ts.Finished == 0 {
			require.Equal(t, 1.0, ts.Attainment)
		}
		require.Equal(t, ts.Waiting > 0, ts.OldestWaiting > 0, "%v: %+v", s.Now, ts)
		var served uint64
		for j, sv := range ts.Served {
			served += sv.Count
			require.Positive(t, sv.Count)
			if j > 0 {
				require.LessOrEqual(t, sv.Count, ts.Served[j-1].Count, "most served first: %+v", ts.Served)
			}
			require.Equal(t, regionOf[sv.Pool], sv.Region, "%+v", sv)
			if ts.Jurisdiction != "" {
				require.Equal(t, ts.Jurisdiction, jurisdictionOf[sv.Region], "%s served outside its jurisdiction: %+v", ts.Name, sv)
			}
			if sv.Model == "llama-3.1-70b" {
				require.False(t, sv.Fallback, "nothing falls back to the 70B: %+v", sv)
			}
		}
		require.Equal(t, ts.Completed, served, "%v: %+v", s.Now, ts)
		tenantsFinished += ts.Finished
	}
	for _, cs := range s.Classes {
		classesFinished += cs.Finished
	}
	require.Equal(t, classesFinished, tenantsFinished, "at %v", s.Now)
}

// The tenant pane's figures through a regional outage of eu-west, with the
// 70B retired at the same moment: bank-eu, bound to the EU, which has no
// other region, loses requests and holds waiting ones, and its attainment
// falls; research, bound nowhere, is served in us-east, by the 8B in place
// of the 70B (a fallback); retail, in the US, is untouched. The deadline
// check is off, so that the dark region holds bank-eu's requests rather
// than refusing them at once.
func TestSnapshotTenants(t *testing.T) {
	d, err := NewDrill(loadDefault(t, "policy.admission.deadline_check=false"), Options{})
	require.NoError(t, err)
	d.Advance(2 * time.Minute)
	before := d.Snapshot()
	checkTenantAccounting(t, d, before)
	for _, ts := range before.Tenants {
		require.Positive(t, ts.Completed, "%+v", ts)
		require.Zero(t, ts.Lost(), "%+v", ts)
	}
	research := tenantByName(t, before, "research")
	require.True(t, servedIn(research, "eu-west"), "before: research is served in both regions: %+v", research.Served)
	require.True(t, servedIn(research, "us-east"), "before: research is served in both regions: %+v", research.Served)

	_, err = d.Inject("regional-outage region=eu-west at=0s")
	require.NoError(t, err)
	_, err = d.Inject("model-retirement model=llama-3.1-70b at=0s")
	require.NoError(t, err)
	d.Advance(d.Now() + 45*time.Second)
	during := d.Snapshot()
	checkTenantAccounting(t, d, during)
	bank := tenantByName(t, during, "bank-eu")
	require.Equal(t, "eu", bank.Jurisdiction)
	require.Positive(t, bank.Lost()+uint64(bank.Waiting), "%+v", bank)
	require.Less(t, bank.Attainment, 1.0, "%+v", bank)
	require.Greater(t, bank.OldestWaiting, 30*time.Second, "%+v", bank)
	research = tenantByName(t, during, "research")
	require.Contains(t, research.Served, TenantServed{Pool: "use-h100-8b", Region: "us-east", Model: "llama-3.1-8b", Fallback: true,
		Count: countServed(research, "use-h100-8b", "llama-3.1-8b", true)})
	require.Positive(t, countServed(research, "use-h100-8b", "llama-3.1-8b", true), "%+v", research.Served)
	retail := tenantByName(t, during, "retail")
	require.Zero(t, retail.Lost(), "%+v", retail)
	require.Equal(t, 1.0, retail.Attainment, "%+v", retail)

	// Once the window holds only the outage: research only in us-east,
	// bank-eu served nowhere.
	d.Advance(d.Now() + 30*time.Second)
	later := d.Snapshot()
	checkTenantAccounting(t, d, later)
	research = tenantByName(t, later, "research")
	require.NotEmpty(t, research.Served)
	require.False(t, servedIn(research, "eu-west"), "%+v", research.Served)
	require.Empty(t, tenantByName(t, later, "bank-eu").Served)

	for !d.Done() {
		d.Advance(d.Now() + 20*time.Second)
		checkTenantAccounting(t, d, d.Snapshot())
	}
}

func servedIn(ts TenantState, region string) bool {
	for _, sv := range ts.Served {
		if sv.Region == region {
			return true
		}
	}
	return false
}

func countServed(ts TenantState, pool, model string, fallback bool) uint64 {
	for _, sv := range ts.Served {
		if sv.Pool == pool && sv.Model == model && sv.Fallback == fallback {
			return sv.Count
		}
	}
	return 0
}

// residency_violations_by_tenant breaks residency_violations down: every
// tenant bound to a jurisdiction is listed (zero included), and its
// violations add up, by pool and by region, to the run's.
func TestResidencyByTenant(t *testing.T) {
	healthy := run(t, loadDefault(t))
	require.Zero(t, healthy.ResidencyViolations)
	require.Contains(t, healthy.ResidencyByTenant, "bank-eu", "a bound tenant is listed with no violation")
	require.Zero(t, healthy.ResidencyByTenant["bank-eu"].Violations)

	broken := run(t, loadDefault(t, `faults=["regional-outage region=eu-west at=1m for=3m"]`, "policy.routing.ignore_residency=true"))
	require.Positive(t, broken.ResidencyViolations)
	var sum uint64
	for name, tr := range broken.ResidencyByTenant {
		var pools, regions uint64
		for _, n := range tr.Pools {
			pools += n
		}
		for _, n := range tr.Regions {
			regions += n
		}
		require.Equal(t, tr.Violations, pools, "%s", name)
		require.Equal(t, tr.Violations, regions, "%s", name)
		sum += tr.Violations
	}
	require.Equal(t, broken.ResidencyViolations, sum)
	require.Positive(t, broken.ResidencyByTenant["bank-eu"].Regions["us-east"], "bank-eu served in the US: %+v", broken.ResidencyByTenant["bank-eu"])
}

// An attainment of nothing is null in the JSON, not a 1 that reads as a
// result (issue 36): a fault that lasts to the end has no "after", and an
// expectation on it fails saying there is no data.
func TestAttainmentOfNothingIsNull(t *testing.T) {
	rep := run(t, loadDefault(t, `faults=["regional-outage region=eu-west at=3m"]`))
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var tree struct {
		Faults map[string]map[string]any `json:"faults"`
	}
	require.NoError(t, json.Unmarshal(b, &tree))
	f := tree.Faults["regional-outage(eu-west)"]
	require.NotNil(t, f, "%v", tree.Faults)
	require.Equal(t, 0.0, f["finished_after"])
	require.Contains(t, f, "slo_attainment_after")
	require.Nil(t, f["slo_attainment_after"], "nothing finished after: null")
	require.NotNil(t, f["slo_attainment_during"], "requests finished during it: a figure")
	got, err := rep.Check("faults.regional-outage(eu-west).slo_attainment_after >= 0.99")
	require.NoError(t, err)
	require.False(t, got[0].Pass)
	require.Equal(t, "no request finished in the ten minutes after the fault", got[0].NoData)

	// And it reads back as nothing.
	var back Report
	require.NoError(t, json.Unmarshal(b, &back))
	require.False(t, back.Faults["regional-outage(eu-west)"].SLOAttainmentAfter.Measured())
}
