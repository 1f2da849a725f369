package faults

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestValidate: every rule has a failing case, on a spec built in Go (as an
// injector's test or the scenario loader might), with its exact message.
func TestValidate(t *testing.T) {
	const name = "want a name: letters, digits, '.', '-' and '_', starting with a letter or digit, at most 64 characters"
	outage := Spec{Kind: RegionalOutage, Target: Target{Region: "r"}, At: time.Minute}
	storm := Spec{Kind: ColdStartStorm, Target: Target{Pool: "p"}, At: time.Minute}
	burst := Spec{Kind: ErrorBurst, Target: Target{Pool: "p"}, At: time.Minute, FailRate: 0.5}
	quota := Spec{Kind: QuotaExhaustion, Target: Target{Provider: "x"}, At: time.Minute}
	with := func(s Spec, f func(*Spec)) Spec { f(&s); return s }

	tests := []struct {
		name string
		spec Spec
		want []string
	}{
		// The kind.
		{"unknown kind", with(outage, func(s *Spec) { s.Kind = "regional-outge" }),
			[]string{`kind: got "regional-outge", no such kind; did you mean regional-outage? (kinds: regional-outage, brownout, quota-exhaustion, model-retirement, driver-upgrade, node-loss, latency, error-burst, cold-start-storm, stockout, quota-cap, slow-provisioning, link-degraded, kv-transfer-failure)`}},
		{"no kind", with(outage, func(s *Spec) { s.Kind = "" }),
			[]string{`kind: got "", no such kind (kinds: regional-outage, brownout, quota-exhaustion, model-retirement, driver-upgrade, node-loss, latency, error-burst, cold-start-storm, stockout, quota-cap, slow-provisioning, link-degraded, kv-transfer-failure)`}},
		// Values, whatever the kind.
		{"bad region", with(outage, func(s *Spec) { s.Target.Region = "us east" }), []string{`region: got "us east", ` + name}},
		{"name starting with a dot", with(outage, func(s *Spec) { s.Target.Region = ".r" }), []string{`region: got ".r", ` + name}},
		{"long name", with(outage, func(s *Spec) { s.Target.Region = strings.Repeat("r", 65) }),
			[]string{`region: got "` + strings.Repeat("r", 65) + `", ` + name}},
		{"bad pool", with(storm, func(s *Spec) { s.Target.Pool = "p/1" }), []string{`pool: got "p/1", ` + name}},
		{"bad provider", with(quota, func(s *Spec) { s.Target.Provider = "x!" }), []string{`provider: got "x!", ` + name}},
		{"bad model", Spec{Kind: ModelRetirement, Target: Target{Model: "m:8b"}}, []string{`model: got "m:8b", ` + name}},
		{"bad tenant", with(burst, func(s *Spec) { s.Target.Tenant = "a b" }), []string{`tenant: got "a b", ` + name,
			`tenant: got "a b", but error-burst does not take tenant=; no kind takes it yet`}},
		{"bad runtime", Spec{Kind: DriverUpgrade, Target: Target{Pool: "p"}, Driver: "550", Runtime: "vllm 0.6"},
			[]string{`runtime: got "vllm 0.6", ` + name}},
		{"bad driver", Spec{Kind: DriverUpgrade, Target: Target{Pool: "p"}, Driver: "v535"},
			[]string{`driver: got "v535", want a dotted numeric version like 535.104.05`}},
		{"driver with an empty part", Spec{Kind: DriverUpgrade, Target: Target{Pool: "p"}, Driver: "535..05"},
			[]string{`driver: got "535..05", want a dotted numeric version like 535.104.05`}},
		{"at < 0", with(outage, func(s *Spec) { s.At = -time.Second }), []string{"at: got -1s, want >= 0"}},
		{"for < 0", with(outage, func(s *Spec) { s.For = -time.Minute }),
			[]string{"for: got -1m, want > 0, or leave for= out for a fault that lasts to the end of the run"}},
		{"at+for overflows", with(outage, func(s *Spec) { s.For = math.MaxInt64 }),
			[]string{"for: got 2562047h47m16.854775807s, want at+for <= 2562047h47m16.854775807s"}},
		{"count < 0", with(storm, func(s *Spec) { s.Radius.Count = -1 }), []string{"count: got -1, want >= 1"}},
		{"percent > 100", with(storm, func(s *Spec) { s.Radius.Percent = 150 }), []string{"percent: got 150, want 0 < percent <= 100"}},
		{"percent < 0", with(storm, func(s *Spec) { s.Radius.Percent = -5 }), []string{"percent: got -5, want 0 < percent <= 100"}},
		{"percent NaN", with(storm, func(s *Spec) { s.Radius.Percent = math.NaN() }), []string{"percent: got NaN, want 0 < percent <= 100"}},
		{"count and percent", with(storm, func(s *Spec) { s.Radius = Radius{Count: 2, Percent: 50} }),
			[]string{"percent: got 50, as well as count=2; give count= or percent=, not both"}},
		{"fail > 1", with(burst, func(s *Spec) { s.FailRate = 1.5 }), []string{"fail: got 1.5, want 0 < fail <= 1"}},
		{"fail < 0", with(burst, func(s *Spec) { s.FailRate = -0.1 }), []string{"fail: got -0.1, want 0 < fail <= 1"}},
		{"latency < 0", Spec{Kind: Latency, Target: Target{Pool: "p"}, AddLatency: -time.Millisecond},
			[]string{"latency: got -1ms, want > 0"}},
		{"rpm < 0", with(quota, func(s *Spec) { s.QuotaRPM, s.QuotaTPM = -1, 10 }), []string{"rpm: got -1, want a finite number >= 0"}},
		{"tpm infinite", with(quota, func(s *Spec) { s.QuotaRPM, s.QuotaTPM = 10, math.Inf(1) }), []string{"tpm: got +Inf, want a finite number >= 0"}},
		{"tpm NaN", with(quota, func(s *Spec) { s.QuotaRPM, s.QuotaTPM = 10, math.NaN() }), []string{"tpm: got NaN, want a finite number >= 0"}},
		{"notice < 0", Spec{Kind: ModelRetirement, Target: Target{Model: "m"}, Notice: -time.Hour}, []string{"notice: got -1h, want >= 0"}},
		// Keys a kind does not take.
		{"not taken: rpm", with(outage, func(s *Spec) { s.QuotaRPM = 5 }),
			[]string{"rpm: got 5, but regional-outage does not take rpm=; quota-exhaustion does"}},
		{"not taken: count", with(outage, func(s *Spec) { s.Radius.Count = 3 }),
			[]string{"count: got 3, but regional-outage does not take count=; brownout, node-loss, cold-start-storm, link-degraded, kv-transfer-failure do"}},
		{"not taken: for", with(storm, func(s *Spec) { s.For = time.Hour }),
			[]string{"for: got 1h, but cold-start-storm does not take for=; regional-outage, brownout, quota-exhaustion, model-retirement, driver-upgrade, node-loss, latency, error-burst, stockout, quota-cap, slow-provisioning, link-degraded, kv-transfer-failure do"}},
		{"not taken: provider", with(burst, func(s *Spec) { s.Target.Provider = "x" }),
			[]string{`provider: got "x", but error-burst does not take provider=; quota-exhaustion, stockout, quota-cap, slow-provisioning do`}},
		// Targets.
		{"regional-outage needs region", Spec{Kind: RegionalOutage}, []string{"region: regional-outage needs region="}},
		{"regional-outage takes region only", with(outage, func(s *Spec) { s.Target.Pool = "p" }),
			[]string{`pool: got "p", but regional-outage does not take pool=; brownout, quota-exhaustion, model-retirement, driver-upgrade, node-loss, latency, error-burst, cold-start-storm, stockout, slow-provisioning, link-degraded, kv-transfer-failure do`}},
		{"brownout needs a target", Spec{Kind: Brownout, FailRate: 0.1}, []string{"region: brownout needs one of region= or pool="}},
		{"brownout takes one target", Spec{Kind: Brownout, Target: Target{Region: "r", Pool: "p"}, FailRate: 0.1},
			[]string{`pool: got "p", as well as region="r"; brownout takes one target: region= or pool=`}},
		{"quota-exhaustion needs a target", Spec{Kind: QuotaExhaustion}, []string{"pool: quota-exhaustion needs one of pool= or provider="}},
		{"quota-exhaustion takes one target", with(quota, func(s *Spec) { s.Target.Pool = "p" }),
			[]string{`provider: got "x", as well as pool="p"; quota-exhaustion takes one target: pool= or provider=`}},
		{"model-retirement needs model", Spec{Kind: ModelRetirement, Target: Target{Pool: "p"}}, []string{"model: model-retirement needs model="}},
		{"driver-upgrade needs pool", Spec{Kind: DriverUpgrade, Driver: "550"}, []string{"pool: driver-upgrade needs pool="}},
		{"node-loss needs pool", Spec{Kind: NodeLoss, Radius: Radius{Count: 1}}, []string{"pool: node-loss needs pool="}},
		{"latency needs a target", Spec{Kind: Latency, AddLatency: time.Second},
			[]string{"region: latency needs one of region=, pool= or model="}},
		{"error-burst takes one target", with(burst, func(s *Spec) { s.Target = Target{Region: "r", Pool: "p", Model: "m"} }),
			[]string{`pool: got "p", as well as region="r"; error-burst takes one target: region=, pool= or model=`,
				`model: got "m", as well as region="r"; error-burst takes one target: region=, pool= or model=`}},
		{"cold-start-storm needs a target", Spec{Kind: ColdStartStorm}, []string{"region: cold-start-storm needs one of region= or pool="}},
		// What each kind needs.
		{"brownout needs fail or latency", Spec{Kind: Brownout, Target: Target{Region: "r"}},
			[]string{"fail: brownout needs fail=, latency= or both"}},
		{"latency needs latency", Spec{Kind: Latency, Target: Target{Model: "m"}},
			[]string{"latency: latency needs latency= (the added latency, > 0)"}},
		{"error-burst needs fail", with(burst, func(s *Spec) { s.FailRate = 0 }),
			[]string{"fail: error-burst needs fail= (the fraction of requests that fail, 0 < fail <= 1)"}},
		{"driver-upgrade needs driver", Spec{Kind: DriverUpgrade, Target: Target{Pool: "p"}},
			[]string{"driver: driver-upgrade needs driver= (the new version, like 535.104.05)"}},
		{"node-loss needs a radius", Spec{Kind: NodeLoss, Target: Target{Pool: "p"}},
			[]string{"count: node-loss needs count= or percent= (Parse sets count=1 when both are left out)"}},
		{"quota: rpm without tpm", with(quota, func(s *Spec) { s.QuotaRPM = 100 }),
			[]string{"tpm: zero (or left out) while rpm=100, and a zero quota lets no request through; give both rpm= and tpm=, or neither for a quota of zero"}},
		{"quota: tpm without rpm", with(quota, func(s *Spec) { s.QuotaTPM = 5000 }),
			[]string{"rpm: zero (or left out) while tpm=5000, and a zero quota lets no request through; give both rpm= and tpm=, or neither for a quota of zero"}},
		// All at once, in printing order.
		{"every problem at once", Spec{Kind: Brownout, Target: Target{Region: "r", Pool: "p q"}, At: -time.Minute,
			FailRate: 2, QuotaTPM: 7, Radius: Radius{Count: 1}},
			[]string{
				`pool: got "p q", ` + name,
				`pool: got "p q", as well as region="r"; brownout takes one target: region= or pool=`,
				"at: got -1m, want >= 0",
				"fail: got 2, want 0 < fail <= 1",
				"tpm: got 7, but brownout does not take tpm=; quota-exhaustion does",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			require.Error(t, err, "%v.Validate()", tt.spec)
			require.Equal(t, tt.want, messages(err), "%v.Validate()", tt.spec)
		})
	}
}

func TestValidateValid(t *testing.T) {
	for _, s := range []Spec{
		{Kind: RegionalOutage, Target: Target{Region: "r"}},
		{Kind: Brownout, Target: Target{Pool: "p"}, FailRate: 1},
		{Kind: QuotaExhaustion, Target: Target{Pool: "p"}, QuotaRPM: 1, QuotaTPM: 1},
		{Kind: ModelRetirement, Target: Target{Model: "m", Pool: "p"}},
		{Kind: DriverUpgrade, Target: Target{Pool: "p"}, Driver: "1"},
		{Kind: NodeLoss, Target: Target{Pool: "p"}, Radius: Radius{Percent: 100}, For: time.Nanosecond},
		{Kind: Latency, Target: Target{Region: "r"}, AddLatency: time.Nanosecond},
		{Kind: ErrorBurst, Target: Target{Model: strings.Repeat("m", 64)}, FailRate: math.SmallestNonzeroFloat64},
		{Kind: ColdStartStorm, Target: Target{Region: "r"}, Radius: Radius{Count: math.MaxInt}},
		{Kind: RegionalOutage, Target: Target{Region: "r"}, At: math.MaxInt64 - time.Hour, For: time.Hour},
	} {
		require.NoError(t, s.Validate(), "%v.Validate()", s)
		back, err := Parse(s.String())
		require.NoError(t, err, "Parse(%q)", s.String())
		require.Equal(t, s, back, "Parse(%q)", s.String())
	}
}
