package sched

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// hpa is the HPA's default policy on utilization, target 0.7, 1–20
// replicas, no scale-up stabilization, a 5 m scale-down window, 4 up per
// sync.
func hpa(mod func(*AutoscalePolicy)) AutoscalePolicy {
	p := AutoscalePolicy{
		Metric: MetricUtilization, Target: 0.7, Min: 1, Max: 20,
		SyncPeriod: 15 * time.Second, DownStabilization: 5 * time.Minute,
		Tolerance: 0.1, UpMax: 4,
	}
	if mod != nil {
		mod(&p)
	}
	return p
}

func TestAutoscalerRecommend(t *testing.T) {
	tests := []struct {
		name    string
		current int
		metric  float64
		want    int
	}{
		{"on target", 10, 0.7, 10},
		{"inside the tolerance above", 10, 0.76, 10},
		{"inside the tolerance below", 10, 0.64, 10},
		{"just past the tolerance: ceil", 10, 0.78, 12},
		{"load step 0.5 to 0.9", 7, 0.9, 9},
		{"exact product does not round up", 7, 0.9 * 7 / 7, 9},
		{"idle: down to min", 10, 0, 1},
		{"clamped to max", 18, 1, 20},
		{"no replica to measure: min", 0, 0.9, 1},
	}
	a, err := NewAutoscaler(hpa(nil))
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, a.Recommend(tt.current, tt.metric))
		})
	}
}

// eval is one evaluation: the count asked for so far, the metric, and the
// count wanted back.
type eval struct {
	at      time.Duration
	current int
	metric  float64
	want    int
}

func TestAutoscalerEvaluate(t *testing.T) {
	s := func(n int) time.Duration { return time.Duration(n) * 15 * time.Second }
	tests := []struct {
		name   string
		policy AutoscalePolicy
		evals  []eval
	}{
		{name: "scale-up limited to 4 a sync",
			policy: hpa(nil),
			evals: []eval{
				{s(1), 4, 1.4, 8},   // ceil(4 × 2) = 8: +4
				{s(2), 8, 1.4, 12},  // wants 16, limited to +4
				{s(3), 12, 1.0, 16}, // wants 18, limited
				{s(4), 16, 0.75, 16},
			}},
		{name: "no up limit",
			policy: hpa(func(p *AutoscalePolicy) { p.UpMax = 0 }),
			evals:  []eval{{s(1), 8, 1.4, 16}}},
		{name: "scale-down waits for the window's highest recommendation",
			policy: hpa(nil),
			evals: []eval{
				{s(1), 10, 0.7, 10},
				{s(2), 10, 0.35, 10}, // wants 5, but 10 was recommended 15 s ago
				{s(10), 10, 0.35, 10},
				{s(21), 10, 0.35, 10},                // 10 still inside the 5 m window (s(1)..s(21))
				{s(22), 10, 0.35, 5},                 // s(1) has left the window
				{s(23), 5, 0.7, 5},                   // settled
				{s(24), 5, 0.14, 5},                  // wants 1; 5 recommended 15 s ago
				{s(24) + 5*time.Minute + 1, 5, 0, 1}, // window passed
			}},
		{name: "a dip inside the window does not release capacity",
			policy: hpa(nil),
			evals: []eval{
				{s(1), 10, 0.7, 10},
				{s(2), 10, 0.2, 10},
				{s(3), 10, 0.7, 10},
				{s(20), 10, 0.2, 10},
			}},
		{name: "scale-down limited",
			policy: hpa(func(p *AutoscalePolicy) { p.DownStabilization, p.DownMax = 0, 2 }),
			evals: []eval{
				{s(1), 10, 0.07, 8},
				{s(2), 8, 0.07, 6},
			}},
		{name: "scale-up stabilization takes the window's lowest",
			policy: hpa(func(p *AutoscalePolicy) { p.UpStabilization = 30 * time.Second; p.UpMax = 0 }),
			evals: []eval{
				{s(1), 10, 0.7, 10},
				{s(2), 10, 1.4, 10}, // 10 recommended 15 s ago
				{s(3), 10, 1.4, 10}, // and 30 s ago
				{s(4), 10, 1.4, 20}, // the window holds only 20s now
			}},
		{name: "queue depth per replica (KEDA)",
			policy: hpa(func(p *AutoscalePolicy) { p.Metric, p.Target, p.UpMax = MetricQueue, 10, 0 }),
			evals:  []eval{{s(1), 4, 25, 10}},
		},
		{name: "bounds changed: brought inside",
			policy: hpa(func(p *AutoscalePolicy) { p.Min, p.Max = 3, 6 }),
			evals:  []eval{{s(1), 10, 0.7, 6}, {s(2), 1, 0.7, 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAutoscaler(tt.policy)
			require.NoError(t, err)
			for _, e := range tt.evals {
				got, changed := a.Evaluate(e.at, e.current, e.metric)
				require.Equal(t, e.want, got, "at %v (current %d, metric %v)", e.at, e.current, e.metric)
				require.Equal(t, e.want != e.current, changed, "at %v", e.at)
			}
		})
	}
}

// Seeded with the count it starts at, the autoscaler waits a full
// scale-down window before acting on a first low measurement.
func TestAutoscalerSeed(t *testing.T) {
	a, err := NewAutoscaler(hpa(nil))
	require.NoError(t, err)
	a.Seed(0, 10)
	n, changed := a.Evaluate(15*time.Second, 10, 0.1)
	require.False(t, changed)
	require.Equal(t, 10, n)
	n, _ = a.Evaluate(5*time.Minute+time.Second, 10, 0.1)
	require.Equal(t, 2, n, "the seed has left the window: ceil(10 × 0.1/0.7)")

	b, err := NewAutoscaler(hpa(nil))
	require.NoError(t, err)
	n, _ = b.Evaluate(15*time.Second, 10, 0.1)
	require.Equal(t, 2, n, "unseeded, the first measurement acts")
}

func TestAutoscalePolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*AutoscalePolicy)
		want string // substring of the error; "" for none
	}{
		{"default", nil, ""},
		{"unknown metric", func(p *AutoscalePolicy) { p.Metric = "cpu" }, `metric "cpu"`},
		{"zero target", func(p *AutoscalePolicy) { p.Target = 0 }, "target 0"},
		{"utilization over 1", func(p *AutoscalePolicy) { p.Target = 1.5 }, "share in (0,1]"},
		{"queue over 1 is fine", func(p *AutoscalePolicy) { p.Metric, p.Target = MetricQueue, 10 }, ""},
		{"min 0", func(p *AutoscalePolicy) { p.Min = 0 }, "min_replicas 0"},
		{"max under min", func(p *AutoscalePolicy) { p.Min, p.Max = 5, 4 }, "max_replicas 4"},
		{"no sync period", func(p *AutoscalePolicy) { p.SyncPeriod = 0 }, "sync_period"},
		{"negative window", func(p *AutoscalePolicy) { p.DownStabilization = -1 }, "stabilization"},
		{"tolerance 1", func(p *AutoscalePolicy) { p.Tolerance = 1 }, "tolerance 1"},
		{"negative limit", func(p *AutoscalePolicy) { p.UpMax = -1 }, "scale_up_max -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewAutoscaler(hpa(tt.mod))
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}
