package scenarios

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The autoscale and acquisition keys: defaults as the HPA's, and errors
// that name the key and what to give.
func TestAutoscaleKeys(t *testing.T) {
	data, err := Source("mmc")
	require.NoError(t, err)
	const base = `pools[0].autoscale={metric: utilization, target: 0.7, min_replicas: 2, max_replicas: 8}`
	tests := []struct {
		name string
		sets []string
		want string // substring of the error; "" for valid
	}{
		{"valid", []string{base}, ""},
		{"with acquisition", []string{base, `pools[0].acquisition={reserved: 4, burst: 2, delay: {distribution: lognormal, mean: 3m}}`}, ""},
		{"unknown metric", []string{`pools[0].autoscale={metric: cpu, target: 0.7, min_replicas: 2, max_replicas: 8}`}, `metric "cpu"`},
		{"utilization over 1", []string{`pools[0].autoscale={metric: utilization, target: 70, min_replicas: 2, max_replicas: 8}`}, "share in (0,1]"},
		{"wait without target_wait", []string{`pools[0].autoscale={metric: wait, min_replicas: 2, max_replicas: 8}`}, "pools[0].autoscale.target_wait"},
		{"replicas outside the bounds", []string{base, "pools[0].replicas=12"}, "pools[0].replicas: got 12"},
		{"max under min", []string{`pools[0].autoscale={metric: queue, target: 10, min_replicas: 4, max_replicas: 2}`}, "max_replicas 2"},
		{"acquisition alone", []string{`pools[0].acquisition={reserved: 4}`}, "acquisition without autoscale"},
		{"unknown delay", []string{base, `pools[0].acquisition={delay: {distribution: gamma, mean: 1m}}`}, "pools[0].acquisition.delay.distribution"},
		{"negative burst", []string{base, `pools[0].acquisition={burst: -1}`}, "pools[0].acquisition.burst"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseWithSets("mmc.yaml", data, tt.sets)
			if tt.want != "" {
				require.ErrorContains(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			a := s.Pools[0].Autoscale
			require.Equal(t, 15*time.Second, a.SyncPeriod.D())
			require.Equal(t, 5*time.Minute, a.ScaleDownStabilization.D())
			require.Equal(t, 0.1, *a.Tolerance)
			require.Equal(t, 4, a.ScaleUpMax)
			if q := s.Pools[0].Acquisition; q != nil {
				require.Equal(t, 1.0, q.BurstPrice)
				require.Equal(t, 0.5, q.Delay.Sigma)
			}
		})
	}
}
