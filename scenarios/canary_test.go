package scenarios

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseCanaryTrigger(t *testing.T) {
	good := []struct {
		in   string
		want CanaryTrigger
	}{
		{"error_rate > 2%", CanaryTrigger{Figure: FigErrorRate, Value: 0.02}},
		{"error_rate>0.05", CanaryTrigger{Figure: FigErrorRate, Value: 0.05}},
		{"error_rate > 3x baseline", CanaryTrigger{Figure: FigErrorRate, Baseline: 3}},
		{"ttft_p99 > slo", CanaryTrigger{Figure: FigTTFT, Quantile: 0.99, SLO: true}},
		{"ttft_p99.9 > 1500ms", CanaryTrigger{Figure: FigTTFT, Quantile: 0.999, Value: 1.5}},
		{"e2e_p95 > 1.5x baseline", CanaryTrigger{Figure: FigE2E, Quantile: 0.95, Baseline: 1.5}},
		{"cost_per_success > 1.3x baseline", CanaryTrigger{Figure: FigCostPerSuccess, Baseline: 1.3}},
		{"cost_per_success > 0.002", CanaryTrigger{Figure: FigCostPerSuccess, Value: 0.002}},
		{"quality < 0.8", CanaryTrigger{Figure: FigQuality, Below: true, Value: 0.8}},
	}
	for _, tc := range good {
		got, err := ParseCanaryTrigger(tc.in)
		require.NoError(t, err, tc.in)
		tc.want.Text = tc.in
		require.InDelta(t, tc.want.Quantile, got.Quantile, 1e-12, tc.in)
		got.Quantile = tc.want.Quantile
		require.Equal(t, tc.want, got, tc.in)
	}
	bad := []struct{ in, msg string }{
		{"error_rate", "want \"<figure> > <threshold>\""},
		{"error_rate >= 2%", "want > or <"},
		{"latency > 2s", `figure "latency"`},
		{"ttft_p100 > 2s", "want a percentile"},
		{"ttft_p99 < 2s", "fires above its threshold"},
		{"quality > 0.8", "fires below its floor"},
		{"error_rate > slo", "only ttft_pNN and e2e_pNN"},
		{"error_rate > 150%", "want a threshold in (0, 1]"},
		{"error_rate > 2 baseline", "e.g. 1.5x baseline"},
		{"ttft_p99 > 2", "want a duration"},
		{"quality < 0.9x baseline", "absolute floor"},
		{"cost_per_success > -1", "want a number > 0"},
	}
	for _, tc := range bad {
		_, err := ParseCanaryTrigger(tc.in)
		require.ErrorContains(t, err, tc.msg, tc.in)
		require.Contains(t, err.Error(), tc.in, "the error quotes the line")
	}
}

func FuzzParseCanaryTrigger(f *testing.F) {
	for _, s := range []string{"error_rate > 2%", "ttft_p99 > slo", "e2e_p95 > 1.5x baseline", "quality < 0.8",
		"cost_per_success > 0.002", "ttft_p99.9 > 1500ms", "x > y", "<", ">", "ttft_p > 1s", "error_rate > 1e309"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseCanaryTrigger(s)
		if err != nil {
			return
		}
		set := 0
		if tr.Value > 0 {
			set++
		}
		if tr.SLO {
			set++
		}
		if tr.Baseline > 0 {
			set++
		}
		if set != 1 {
			t.Fatalf("%q: want exactly one of a value, slo or a multiple of the baseline: %+v", s, tr)
		}
		lat := tr.Figure == FigTTFT || tr.Figure == FigE2E
		if lat != (tr.Quantile > 0 && tr.Quantile < 1) {
			t.Fatalf("%q: quantile %v for figure %s", s, tr.Quantile, tr.Figure)
		}
		if (tr.Figure == FigErrorRate || tr.Figure == FigQuality) && tr.Value > 1 {
			t.Fatalf("%q: a share above 1: %v", s, tr.Value)
		}
		if tr.Below != (tr.Figure == FigQuality) {
			t.Fatalf("%q: direction %v for %s", s, tr.Below, tr.Figure)
		}
	})
}

// Every canary problem is reported, at its line, with what to do.
func TestCanaryValidation(t *testing.T) {
	good, err := os.ReadFile("gameday-canary-rollback.yaml")
	require.NoError(t, err)
	src := string(good)
	i := strings.Index(src, "canaries:")
	j := strings.Index(src, "faults:\n")
	bad := src[:i] + `canaries:
  - name: neocloud
    model: llama-3.1-8b
    candidate: [neo-h100, nowhere, use-h100-8b]
    tenants: [nobody]
    steps:
      - {share: 0.05}
      - {share: 0.01, for: 5m}
      - {share: 1.5}
    window: 10s
    on_breach: pause
    rollback_if:
      - error_rate >= 2%
      - e2e_p99 > slo
    shadow: {share: 0}
  - name: second
    model: llama-3.1-8b
    candidate: [neo-h100, euw-h100-8b]
    steps: [{share: 0.1}]
` + src[j:]
	_, err = Parse("bad.yaml", []byte(bad))
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`canaries[0].candidate[1]: got "nowhere"`,
		`canaries[0].tenants[0]: got "nobody"`,
		`canaries[0].steps[0].for: missing; want how long the step holds`,
		`canaries[0].steps[1].share: got 0.01, want >= the step before (0.05)`,
		`canaries[0].steps[2].share: got 1.5, want the share of eligible traffic in (0, 1]`,
		`canaries[0].window: got 10s, want >= evaluate_every (30s)`,
		`canaries[0].on_breach: got "pause"`,
		`canaries[0].rollback_if[0]: "error_rate >= 2%": want > or <`,
		`canaries[0].rollback_if[1]: got "e2e_p99 > slo", no eligible class has an SLO on e2e`,
		`canaries[0].shadow.share: got 0`,
		`canaries[1].candidate[0]: got "neo-h100", already a candidate of canary "neocloud"`,
		`canaries[1].rollback_if: missing`,
		`every pool with replicas serving llama-3.1-8b is a candidate`,
		`canaries[1].model: got "llama-3.1-8b", already moved by canaries[0]; one canary per model at a time`,
	} {
		require.Contains(t, msg, want)
	}
	// Lines are named.
	require.Regexp(t, `bad.yaml:\d+: canaries\[0\]\.on_breach`, msg)
}

// A candidate that also serves another model is refused, at its line: no
// route would reach the other model there.
func TestCanaryCandidateServesItsModelOnly(t *testing.T) {
	good, err := os.ReadFile("gameday-canary-rollback.yaml")
	require.NoError(t, err)
	src := string(good)
	// neo-h100 lists a second model, and the model exists.
	src = strings.Replace(src, "    models: [llama-3.1-8b]\n    max_batch: 256\n    price_per_gpu_hour: 2.2",
		"    models: [llama-3.1-8b, llama-b]\n    max_batch: 256\n    price_per_gpu_hour: 2.2", 1)
	i := strings.Index(src, "pools:")
	model := strings.Replace(src[strings.Index(src, "  - name: llama-3.1-8b"):i], "llama-3.1-8b #", "llama-b #", 1)
	src = strings.Replace(src, "pools:", strings.TrimRight(model, "\n")+"\n\npools:", 1)
	_, err = Parse("two.yaml", []byte(src))
	require.ErrorContains(t, err, `canaries[0].candidate[0]: got "neo-h100", the pool also serves llama-b, which no route would reach`)
	require.NotContains(t, err.Error(), "no such model", "llama-b is a model of the scenario")
}
