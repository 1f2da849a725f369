package scenarios

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Holds: a value that does not exist (NaN: never came, no data) holds
// "== never" and nothing else; a number never equals never.
func TestHoldsNever(t *testing.T) {
	nan := math.NaN()
	for _, tt := range []struct {
		expr string
		v    float64
		want bool
	}{
		{"x.time_to_detect_s == never", nan, true},
		{"x.time_to_detect_s != never", nan, false},
		{"x.time_to_detect_s == never", 3, false},
		{"x.time_to_detect_s != never", 3, true},
		{"x < 30s", nan, false},
		{"x >= 0", nan, false},
		{"x != 1", nan, false},
		{"x < 30s", 3, true},
	} {
		e, err := ParseExpectation(tt.expr)
		require.NoError(t, err)
		require.Equal(t, tt.want, e.Holds(tt.v), "%s with %v", tt.expr, tt.v)
	}
}

func TestParseExpectation(t *testing.T) {
	tests := []struct {
		in      string
		want    Expectation
		wantErr string
	}{
		{in: "interactive.ttft.p99 < 2s", want: Expectation{LHS: "interactive.ttft.p99", Op: "<", Value: 2, IsDuration: true}},
		{in: "residency_violations == 0", want: Expectation{LHS: "residency_violations", Op: "==", Value: 0}},
		{in: "requests.rejected <= 10", want: Expectation{LHS: "requests.rejected", Op: "<=", Value: 10}},
		{in: "tenants.acme.e2e.p95 < 30s", want: Expectation{LHS: "tenants.acme.e2e.p95", Op: "<", Value: 30, IsDuration: true}},
		{in: "models.llama-3.1-8b.tpot.p50<=150ms", want: Expectation{LHS: "models.llama-3.1-8b.tpot.p50", Op: "<=", Value: 0.15, IsDuration: true}},
		{in: "  slo.attainment >= 0.95 ", want: Expectation{LHS: "slo.attainment", Op: ">=", Value: 0.95}},
		{in: "cost.total > 1e3", want: Expectation{LHS: "cost.total", Op: ">", Value: 1000}},
		{in: "x != -1.5", want: Expectation{LHS: "x", Op: "!=", Value: -1.5}},
		{in: "batch.e2e.p99 < 1h30m", want: Expectation{LHS: "batch.e2e.p99", Op: "<", Value: 5400, IsDuration: true}},
		{in: "x >= 0s", want: Expectation{LHS: "x", Op: ">=", Value: 0, IsDuration: true}},
		{in: "x", wantErr: `expectation "x" has no comparison`},
		{in: "", wantErr: "has no comparison"},
		{in: "< 2s", wantErr: "has nothing left of <"},
		{in: "x <", wantErr: "has nothing right of <"},
		{in: "x < < 2", wantErr: `"< 2" is neither a number nor a duration`},
		{in: "x = 2", wantErr: "has no comparison"},
		{in: "ttft p99 < 2s", wantErr: `left side "ttft p99" is not a dotted name`},
		{in: "a..b < 2", wantErr: "is not a dotted name"},
		{in: "x < 2 s", wantErr: "neither a number nor a duration"},
		{in: "x < NaN", wantErr: "neither a number nor a duration"},
		{in: "x < inf", wantErr: "neither a number nor a duration"},
		{in: "x < 1e999", wantErr: "neither a number nor a duration"},
		{in: "x < 0x10", wantErr: "neither a number nor a duration"},
		{in: "x < 2", want: Expectation{LHS: "x", Op: "<", Value: 2}},
		{in: "faults.regional-outage(us-east).time_to_detect_s < 30s", want: Expectation{LHS: "faults.regional-outage(us-east).time_to_detect_s", Op: "<", Value: 30, IsDuration: true}},
		{in: "faults.brownout(eu-west,pool.a).requests_lost == 0", want: Expectation{LHS: "faults.brownout(eu-west,pool.a).requests_lost", Op: "==", Value: 0}},
		{in: "faults.x(a b).y < 1", wantErr: "is not a dotted name"},
		{in: "faults.model-retirement(big).time_to_impact_s == never", want: Expectation{LHS: "faults.model-retirement(big).time_to_impact_s", Op: "==", Never: true}},
		{in: "faults.brownout(eu).time_to_detect_s != never", want: Expectation{LHS: "faults.brownout(eu).time_to_detect_s", Op: "!=", Never: true}},
		{in: "x < never", wantErr: "never compares with == or != only"},
		{in: "interactive.ttft.p99 == never", wantErr: "never compares with a time that may not come"},
		{in: "interactive.slo_attainment >= 0.99 if any", want: Expectation{LHS: "interactive.slo_attainment", Op: ">=", Value: 0.99, IfAny: true}},
		{in: "after recovery + 5m: interactive.ttft.p99 < 2s if any", want: Expectation{LHS: "interactive.ttft.p99", Op: "<", Value: 2, IsDuration: true, IfAny: true, Scope: "after", Fault: "recovery", Offset: 5 * time.Minute}},
		{in: "x < if any", wantErr: "has nothing right of <"},
		{in: "faults.(a).y < 1", wantErr: "is not a dotted name"},
		{in: "faults.x(a.y < 1", wantErr: "is not a dotted name"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseExpectation(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			again, err := ParseExpectation(got.String())
			require.NoError(t, err, "reparse %q", got.String())
			require.Equal(t, got, again, "ParseExpectation(%q)", got.String())
		})
	}
}

func TestExpectationHolds(t *testing.T) {
	tests := []struct {
		expr string
		v    float64
		want bool
	}{
		{"a < 2s", 1.999, true},
		{"a < 2s", 2, false},
		{"a <= 2s", 2, true},
		{"a > 0.5", 0.5, false},
		{"a >= 0.5", 0.5, true},
		{"a == 0", 0, true},
		{"a == 0", 1, false},
		{"a != 0", 1, true},
		{"a != 0", 0, false},
	}
	for _, tt := range tests {
		e, err := ParseExpectation(tt.expr)
		require.NoError(t, err)
		require.Equal(t, tt.want, e.Holds(tt.v), "ParseExpectation(%q).Holds(%v)", tt.expr, tt.v)
	}
	require.False(t, Expectation{Op: "~"}.Holds(0), "an unknown op never holds")
}

func TestScopedExpectations(t *testing.T) {
	tests := []struct {
		in     string
		scope  string
		fault  string
		offset time.Duration
		window string
	}{
		{"during regional-outage(us-east): interactive.ttft.p99 < 3s", "during", "regional-outage(us-east)", 0, "during regional-outage(us-east)"},
		{"after recovery + 5m: interactive.slo_attainment >= 0.99", "after", "recovery", 5 * time.Minute, "after recovery + 5m0s"},
		{"after node-loss(use-h100-8b): requests.failed == 0", "after", "node-loss(use-h100-8b)", 0, "after node-loss(use-h100-8b)"},
	}
	for _, tt := range tests {
		e, err := ParseExpectation(tt.in)
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.scope, e.Scope)
		require.Equal(t, tt.fault, e.Fault)
		require.Equal(t, tt.offset, e.Offset)
		require.Equal(t, tt.window, e.Window())
		again, err := ParseExpectation(e.String())
		require.NoError(t, err)
		require.Equal(t, e, again, "String() reparses")
	}
	for _, bad := range []string{"during x interactive.ttft.p99 < 3s", "after recovery + soon: a < 1", "during recovery: a < 1", "during : a < 1"} {
		_, err := ParseExpectation(bad)
		require.Error(t, err, bad)
	}
}
