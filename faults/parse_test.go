package faults

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRoundTrip: a valid spec of every kind parses from its canonical text
// to the spec shown, and prints back to the same text.
func TestRoundTrip(t *testing.T) {
	tests := []struct {
		text string
		want Spec
	}{
		{"regional-outage region=us-east at=10m for=15m",
			Spec{Kind: RegionalOutage, Target: Target{Region: "us-east"}, At: 10 * time.Minute, For: 15 * time.Minute}},
		{"regional-outage region=eu-west at=0s",
			Spec{Kind: RegionalOutage, Target: Target{Region: "eu-west"}}},
		{"brownout region=us-east at=10m for=15m fail=0.2 latency=300ms",
			Spec{Kind: Brownout, Target: Target{Region: "us-east"}, At: 10 * time.Minute, For: 15 * time.Minute,
				FailRate: 0.2, AddLatency: 300 * time.Millisecond}},
		{"brownout pool=use-h100 at=5m latency=2s",
			Spec{Kind: Brownout, Target: Target{Pool: "use-h100"}, At: 5 * time.Minute, AddLatency: 2 * time.Second}},
		{"brownout pool=use-h100 at=5m fail=0.05",
			Spec{Kind: Brownout, Target: Target{Pool: "use-h100"}, At: 5 * time.Minute, FailRate: 0.05}},
		{"quota-exhaustion provider=openai at=30m for=10m",
			Spec{Kind: QuotaExhaustion, Target: Target{Provider: "openai"}, At: 30 * time.Minute, For: 10 * time.Minute}},
		{"quota-exhaustion pool=azure-gpt4o at=1h rpm=60 tpm=90000",
			Spec{Kind: QuotaExhaustion, Target: Target{Pool: "azure-gpt4o"}, At: time.Hour, QuotaRPM: 60, QuotaTPM: 90000}},
		{"model-retirement model=llama-3.1-70b at=2h notice=30m",
			Spec{Kind: ModelRetirement, Target: Target{Model: "llama-3.1-70b"}, At: 2 * time.Hour, Notice: 30 * time.Minute}},
		{"model-retirement pool=use-h100 model=llama-3.1-8b at=1h",
			Spec{Kind: ModelRetirement, Target: Target{Pool: "use-h100", Model: "llama-3.1-8b"}, At: time.Hour}},
		{"model-retirement model=gpt-4 at=1h for=2h notice=10m",
			Spec{Kind: ModelRetirement, Target: Target{Model: "gpt-4"}, At: time.Hour, For: 2 * time.Hour, Notice: 10 * time.Minute}},
		{"driver-upgrade pool=use-h100 at=45m driver=535.104.05",
			Spec{Kind: DriverUpgrade, Target: Target{Pool: "use-h100"}, At: 45 * time.Minute, Driver: "535.104.05"}},
		{"driver-upgrade pool=use-h100 at=45m driver=550.54 runtime=vllm-0.6",
			Spec{Kind: DriverUpgrade, Target: Target{Pool: "use-h100"}, At: 45 * time.Minute, Driver: "550.54", Runtime: "vllm-0.6"}},
		{"driver-upgrade pool=use-h100 at=45m for=30m driver=570.124.06",
			Spec{Kind: DriverUpgrade, Target: Target{Pool: "use-h100"}, At: 45 * time.Minute, For: 30 * time.Minute, Driver: "570.124.06"}},
		{"node-loss pool=use-h100 at=12m count=1",
			Spec{Kind: NodeLoss, Target: Target{Pool: "use-h100"}, At: 12 * time.Minute, Radius: Radius{Count: 1}}},
		{"node-loss pool=use-h100 at=12m for=20m count=2",
			Spec{Kind: NodeLoss, Target: Target{Pool: "use-h100"}, At: 12 * time.Minute, For: 20 * time.Minute, Radius: Radius{Count: 2}}},
		{"node-loss pool=use-h100 at=12m percent=12.5",
			Spec{Kind: NodeLoss, Target: Target{Pool: "use-h100"}, At: 12 * time.Minute, Radius: Radius{Percent: 12.5}}},
		{"latency model=gpt-4o at=5m for=1m latency=1.5s",
			Spec{Kind: Latency, Target: Target{Model: "gpt-4o"}, At: 5 * time.Minute, For: time.Minute,
				AddLatency: 1500 * time.Millisecond}},
		{"latency region=us-east at=5m latency=250ms",
			Spec{Kind: Latency, Target: Target{Region: "us-east"}, At: 5 * time.Minute, AddLatency: 250 * time.Millisecond}},
		{"error-burst pool=use-h100 at=1m30s for=30s fail=1",
			Spec{Kind: ErrorBurst, Target: Target{Pool: "use-h100"}, At: 90 * time.Second, For: 30 * time.Second, FailRate: 1}},
		{"error-burst model=m_1 at=1h5s fail=0.001",
			Spec{Kind: ErrorBurst, Target: Target{Model: "m_1"}, At: time.Hour + 5*time.Second, FailRate: 0.001}},
		{"cold-start-storm pool=use-h100 at=20m",
			Spec{Kind: ColdStartStorm, Target: Target{Pool: "use-h100"}, At: 20 * time.Minute}},
		{"cold-start-storm region=us-east at=20m percent=50",
			Spec{Kind: ColdStartStorm, Target: Target{Region: "us-east"}, At: 20 * time.Minute, Radius: Radius{Percent: 50}}},
		{"cold-start-storm pool=p at=20m count=4",
			Spec{Kind: ColdStartStorm, Target: Target{Pool: "p"}, At: 20 * time.Minute, Radius: Radius{Count: 4}}},
		{"stockout provider=gpu-cloud-a at=10m for=30m",
			Spec{Kind: Stockout, Target: Target{Provider: "gpu-cloud-a"}, At: 10 * time.Minute, For: 30 * time.Minute}},
		{"stockout region=us-east accelerator=h100 at=10m grant=0.25",
			Spec{Kind: Stockout, Target: Target{Region: "us-east", Accelerator: "h100"}, At: 10 * time.Minute, Grant: 0.25}},
		{"quota-cap provider=gpu-cloud-a at=0s gpus=16",
			Spec{Kind: QuotaCap, Target: Target{Provider: "gpu-cloud-a"}, GPUs: 16}},
		{"slow-provisioning pool=use-h100 at=5m for=1h factor=4",
			Spec{Kind: SlowProvisioning, Target: Target{Pool: "use-h100"}, At: 5 * time.Minute, For: time.Hour, Factor: 4}},
		{"link-degraded pool=decode at=20m for=10m latency=5ms bandwidth=0.5",
			Spec{Kind: LinkDegraded, Target: Target{Pool: "decode"}, At: 20 * time.Minute, For: 10 * time.Minute, AddLatency: 5 * time.Millisecond, Bandwidth: 0.5}},
		{"kv-transfer-failure region=us-east at=1h count=2 fail=0.1 timeout=5m",
			Spec{Kind: KVTransferFailure, Target: Target{Region: "us-east"}, At: time.Hour, Radius: Radius{Count: 2}, FailRate: 0.1, Timeout: 5 * time.Minute}},
	}
	seen := map[Kind]bool{}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := Parse(tt.text)
			require.NoError(t, err)
			require.Equal(t, tt.want, got, "Parse(%q)", tt.text)
			require.Equal(t, tt.text, got.String(), "Parse(%q).String()", tt.text)
			require.NoError(t, tt.want.Validate())
			again, err := Parse(tt.want.String())
			require.NoError(t, err)
			require.Equal(t, tt.want, again, "Parse(%v.String())", tt.want)
		})
		seen[tt.want.Kind] = true
	}
	for _, k := range Kinds() {
		require.True(t, seen[Kind(k)], "no round-trip case for %s", k)
	}
}

// TestCanonical: keys in any order, any duration or number text Go reads,
// and defaults print in one canonical form.
func TestCanonical(t *testing.T) {
	tests := []struct{ in, want string }{
		{"brownout latency=300ms fail=0.2 for=15m region=us-east at=10m", "brownout region=us-east at=10m for=15m fail=0.2 latency=300ms"},
		{"  latency\tat=10m   region=r  latency=1s ", "latency region=r at=10m latency=1s"},
		{"latency at=1m latency=1s model=m", "latency model=m at=1m latency=1s"},
		// Durations: time.Duration.String, less its zero units, and us for µs.
		{"regional-outage region=r at=10m0s", "regional-outage region=r at=10m"},
		{"regional-outage region=r at=1h30m0s", "regional-outage region=r at=1h30m"},
		{"regional-outage region=r at=1h0m5s", "regional-outage region=r at=1h5s"},
		{"regional-outage region=r at=1h0m0s", "regional-outage region=r at=1h"},
		{"regional-outage region=r at=90s", "regional-outage region=r at=1m30s"},
		{"regional-outage region=r at=0.5h", "regional-outage region=r at=30m"},
		{"regional-outage region=r at=1500ms", "regional-outage region=r at=1.5s"},
		{"regional-outage region=r at=1.5µs", "regional-outage region=r at=1.5us"},
		{"regional-outage region=r at=1500ns", "regional-outage region=r at=1.5us"},
		{"regional-outage region=r at=0", "regional-outage region=r at=0s"},
		{"regional-outage region=r at=-0s", "regional-outage region=r at=0s"},
		{"regional-outage region=r at=+5m for=36h", "regional-outage region=r at=5m for=36h"},
		// Numbers: the shortest decimal that reads back exactly.
		{"error-burst pool=p at=1m fail=.5", "error-burst pool=p at=1m fail=0.5"},
		{"error-burst pool=p at=1m fail=5e-1", "error-burst pool=p at=1m fail=0.5"},
		{"error-burst pool=p at=1m fail=1.000", "error-burst pool=p at=1m fail=1"},
		{"error-burst pool=p at=1m fail=0.00001", "error-burst pool=p at=1m fail=1e-05"},
		{"quota-exhaustion pool=p at=1m rpm=1e6 tpm=2.50e7", "quota-exhaustion pool=p at=1m rpm=1000000 tpm=25000000"},
		{"node-loss pool=p at=1m percent=050", "node-loss pool=p at=1m percent=50"},
		{"node-loss pool=p at=1m count=+02", "node-loss pool=p at=1m count=2"},
		// What leaving a key out means is not printed, and node-loss's
		// default radius is.
		{"quota-exhaustion provider=x at=1m rpm=0 tpm=0", "quota-exhaustion provider=x at=1m"},
		{"model-retirement model=m at=1m notice=0s", "model-retirement model=m at=1m"},
		{"node-loss pool=p at=1m", "node-loss pool=p at=1m count=1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := Parse(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, s.String(), "Parse(%q).String()", tt.in)
			again, err := Parse(s.String())
			require.NoError(t, err)
			require.Equal(t, s, again)
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{1, "1ns"},
		{1500, "1.5us"},
		{250 * time.Millisecond, "250ms"},
		{time.Second, "1s"},
		{59*time.Second + 500*time.Millisecond, "59.5s"},
		{time.Minute, "1m"},
		{time.Minute + 500*time.Millisecond, "1m0.5s"},
		{10 * time.Minute, "10m"},
		{time.Hour, "1h"},
		{time.Hour + time.Second, "1h1s"},
		{time.Hour + time.Minute, "1h1m"},
		{90 * time.Minute, "1h30m"},
		{100*time.Hour + 10*time.Minute + 10*time.Second, "100h10m10s"},
		{-time.Hour, "-1h"},
		{math.MaxInt64, "2562047h47m16.854775807s"},
	}
	for _, tt := range tests {
		got := formatDuration(tt.d)
		require.Equal(t, tt.want, got, "formatDuration(%d)", int64(tt.d))
		back, err := time.ParseDuration(got)
		require.NoError(t, err)
		require.Equal(t, tt.d, back, "time.ParseDuration(formatDuration(%d))", int64(tt.d))
	}
}

func TestFormatFloat(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"}, {0.25, "0.25"}, {1, "1"}, {100, "100"}, {1e6, "1000000"}, {123.456, "123.456"},
		{1e-4, "0.0001"}, {1e-5, "1e-05"}, {1e15, "1e+15"}, {math.Nextafter(0.3, 1), "0.30000000000000004"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, formatFloat(tt.f), "formatFloat(%v)", tt.f)
	}
}

// TestParseErrors: every problem Parse finds in the text itself, and that
// validation problems come with them, each with its exact message.
func TestParseErrors(t *testing.T) {
	const kinds = "(kinds: regional-outage, brownout, quota-exhaustion, model-retirement, driver-upgrade, node-loss, latency, error-burst, cold-start-storm, stockout, quota-cap, slow-provisioning, link-degraded, kv-transfer-failure)"
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "  ", []string{"the line is empty; want KIND key=value ... " + kinds}},
		{"no kind", "region=r at=1m", []string{"kind: missing; want KIND key=value ..., the kind first " + kinds}},
		{"unknown kind", "brownot region=r at=1m fail=0.1",
			[]string{`kind: got "brownot", no such kind; did you mean brownout? ` + kinds}},
		{"unknown kind, none near", "meteor region=r at=1m",
			[]string{`kind: got "meteor", no such kind ` + kinds}},
		{"not key=value", "regional-outage region=r at=1m forever",
			[]string{`got "forever", want key=value`}},
		{"empty key", "regional-outage region=r at=1m =5m",
			[]string{`got "=5m", want key=value`}},
		{"unknown key", "regional-outage regoin=r at=1m",
			[]string{"regoin: unknown key; did you mean region?", "region: regional-outage needs region="}},
		{"unknown key, none near", "regional-outage region=r at=1m zzzzzz=1",
			[]string{"zzzzzz: unknown key; regional-outage takes region, at, for"}},
		{"unknown key and kind", "meteor zzzzzz=1 at=1m",
			[]string{`kind: got "meteor", no such kind ` + kinds,
				"zzzzzz: unknown key; keys are region, pool, provider, model, tenant, accelerator, at, for, count, percent, fail, latency, rpm, tpm, notice, driver, runtime, grant, gpus, factor, bandwidth, timeout"}},
		{"duplicate key", "regional-outage region=a at=1m region=b",
			[]string{`region: got "b", but region= is already given ("a"); give each key once`}},
		{"key the kind does not take", "brownout region=r at=1m fail=0.1 rpm=100",
			[]string{"rpm: got 100, but brownout does not take rpm=; quota-exhaustion does"}},
		{"key two kinds take", "regional-outage region=r at=1m count=2",
			[]string{"count: got 2, but regional-outage does not take count=; brownout, node-loss, cold-start-storm, link-degraded, kv-transfer-failure do"}},
		{"key no kind takes yet", "error-burst pool=p at=1m fail=0.1 tenant=acme",
			[]string{`tenant: got "acme", but error-burst does not take tenant=; no kind takes it yet`}},
		{"at missing", "regional-outage region=r",
			[]string{"at: required: when the fault starts, from the beginning of the run (at=0s is the start)"}},
		{"not a duration", "regional-outage region=r at=10",
			[]string{`at: got "10", want a duration with a unit, like 250ms, 10m or 1h30m`}},
		{"not a number", "error-burst pool=p at=1m fail=half",
			[]string{`fail: got "half", want a finite number`}},
		{"NaN", "error-burst pool=p at=1m fail=NaN", []string{`fail: got "NaN", want a finite number`}},
		{"infinite", "quota-exhaustion pool=p at=1m rpm=inf tpm=1", []string{`rpm: got "inf", want a finite number`}},
		{"out of float range", "quota-exhaustion pool=p at=1m rpm=1e400 tpm=1", []string{`rpm: got "1e400", want a finite number`}},
		{"not a whole number", "node-loss pool=p at=1m count=1.5", []string{`count: got "1.5", want a whole number >= 1`}},
		{"for=0", "regional-outage region=r at=1m for=0s",
			[]string{"for: got 0s, want > 0, or leave for= out for a fault that lasts to the end of the run"}},
		{"count=0", "node-loss pool=p at=1m count=0", []string{"count: got 0, want >= 1"}},
		{"percent=0", "node-loss pool=p at=1m percent=0", []string{"percent: got 0, want 0 < percent <= 100"}},
		{"fail=0", "error-burst pool=p at=1m fail=0", []string{"fail: got 0, want 0 < fail <= 1"}},
		{"latency=0", "latency pool=p at=1m latency=0s", []string{"latency: got 0s, want > 0"}},
		{"empty name", "regional-outage region= at=1m",
			[]string{`region: got "", want a name: letters, digits, '.', '-' and '_', starting with a letter or digit, at most 64 characters`}},
		{"empty driver", "driver-upgrade pool=p at=1m driver=",
			[]string{`driver: got "", want a dotted numeric version like 535.104.05`}},
		{"value with =", "regional-outage region=a=b at=1m",
			[]string{`region: got "a=b", want a name: letters, digits, '.', '-' and '_', starting with a letter or digit, at most 64 characters`}},
		// A value Parse could not read is reported once: the rules that
		// would trip over the empty field it left are not.
		{"no follow-on problems", "brownout region=r at=1m fail=lots",
			[]string{`fail: got "lots", want a finite number`}},
		{"no follow-on problems, node-loss", "node-loss pool=p at=1m percent=most",
			[]string{`percent: got "most", want a finite number`}},
		{"no follow-on problems, quota", "quota-exhaustion pool=p at=1m rpm=x tpm=100",
			[]string{`rpm: got "x", want a finite number`}},
		{"every problem at once", "brownout pool=b regoin=c at=x fail=abc count=0 foo region=a",
			[]string{
				"regoin: unknown key; did you mean region?",
				`at: got "x", want a duration with a unit, like 250ms, 10m or 1h30m`,
				`fail: got "abc", want a finite number`,
				"count: got 0, want >= 1",
				`got "foo", want key=value`,
				`pool: got "b", as well as region="a"; brownout takes one target: region= or pool=`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.in)
			require.Error(t, err, "Parse(%q) = %v", tt.in, s)
			require.Equal(t, Spec{}, s, "Parse returns the zero Spec with an error")
			require.Equal(t, tt.want, messages(err), "Parse(%q)", tt.in)
			var p *Problem
			require.ErrorAs(t, err, &p)
			require.Equal(t, -1, p.Index)
		})
	}
}

// messages splits a joined error into its problems' texts.
func messages(err error) []string {
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	if err != nil {
		out = append(out, err.Error())
	}
	return out
}

func TestParseAll(t *testing.T) {
	specs, err := ParseAll([]string{
		"regional-outage region=us-east at=10m for=15m",
		"node-loss pool=p at=1m",
	})
	require.NoError(t, err)
	require.Equal(t, []Spec{
		{Kind: RegionalOutage, Target: Target{Region: "us-east"}, At: 10 * time.Minute, For: 15 * time.Minute},
		{Kind: NodeLoss, Target: Target{Pool: "p"}, At: time.Minute, Radius: Radius{Count: 1}},
	}, specs)

	specs, err = ParseAll(nil)
	require.NoError(t, err)
	require.Empty(t, specs)

	specs, err = ParseAll([]string{
		"regional-outage region=us-east at=10m",
		"node-loss pool=p at=1m count=0",
		"regional-outage region=us-east at=10m",
		"brownout at=1m regoin=x",
	})
	require.Nil(t, specs, "no specs unless every line parses")
	require.Equal(t, []string{
		"faults[1]: count: got 0, want >= 1",
		"faults[3]: regoin: unknown key; did you mean region?",
		"faults[3]: region: brownout needs one of region= or pool=",
		"faults[3]: fail: brownout needs fail=, latency= or both",
	}, messages(err))
	var p *Problem
	require.True(t, errors.As(err, &p))
	require.Equal(t, Problem{Index: 1, Key: "count", Value: "0", Msg: "want >= 1"}, *p)
}

func TestParseNotTakenShowsValueAsWritten(t *testing.T) {
	_, err := Parse("error-burst region=r at=1m fail=0.1 count=lots rpm=5")
	require.Equal(t, []string{
		`count: got "lots", but error-burst does not take count=; brownout, node-loss, cold-start-storm, link-degraded, kv-transfer-failure do`,
		"rpm: got 5, but error-burst does not take rpm=; quota-exhaustion does",
	}, messages(err))
}
