package scenarios

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutlierValidation: each bad outlier field is named, with what is
// allowed; disabled turns the checks (and the defaults) off.
func TestOutlierValidation(t *testing.T) {
	for _, tc := range []struct {
		set, want string
	}{
		{"policy.health.outlier.factor=0.5", "policy.health.outlier.factor: got 0.5, want > 1"},
		{"policy.health.outlier.max_ejection_share=1.5", "policy.health.outlier.max_ejection_share: got 1.5, want a fraction in (0, 1]"},
		{"policy.health.outlier.min_samples=-1", "policy.health.outlier.min_samples: got -1"},
		{"policy.health.outlier.base_ejection=-1s", "policy.health.outlier.base_ejection: got -1s, want > 0"},
		{"policy.routing.latency_half_life=-1s", "policy.routing.latency_half_life: got -1s, want a duration >= 0"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := LoadNamedWithSets("default", []string{tc.set})
			require.ErrorContains(t, err, tc.want)
		})
	}
	sc, err := LoadNamedWithSets("default", []string{"policy.health.outlier.disabled=true", "policy.health.outlier.factor=0.5"})
	require.NoError(t, err, "disabled: the other fields are not checked")
	require.True(t, sc.Policy.Health.Outlier.Disabled)
	sc, err = LoadNamedWithSets("default", nil)
	require.NoError(t, err)
	require.Equal(t, 3.0, sc.Policy.Health.Outlier.Factor, "on by default")
}
