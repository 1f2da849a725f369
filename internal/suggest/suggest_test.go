package suggest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ttft", "tpot", 2}, {"same", "same", 0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Distance(tt.a, tt.b), "Distance(%q, %q)", tt.a, tt.b)
	}
}

func TestNearestAndClosest(t *testing.T) {
	keys := []string{"name", "replicas", "gpus_per_replica", "max_batch", "region"}
	require.Equal(t, []string{"replicas"}, Nearest("replica", keys, 1))
	require.Equal(t, []string{"gpus_per_replica"}, Nearest("gpus", keys, 3))
	require.Empty(t, Nearest("zzzzzzzz", keys, 3))
	require.Equal(t, []string{"name", "region"}, Closest("nam", keys, 2))
	require.Len(t, Closest("zzzzzzzz", keys, 3), 3, "Closest always answers")
}
