package scenarios

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBoughtJoinsTheFleet: a purchasable type given replicas (by --set,
// "as if bought") joins the fleet after today's pools, as a copy.
func TestBoughtJoinsTheFleet(t *testing.T) {
	s := mustLoad(t, "testdata/full.good.yaml")
	n := len(s.Pools)
	require.Len(t, s.Purchasable, 1)
	for i := range s.Pools {
		require.False(t, s.Bought(i))
	}

	b, err := LoadWithSets("testdata/full.good.yaml", []string{"purchasable[0].replicas=3"})
	require.NoError(t, err)
	require.Len(t, b.Pools, n+1)
	require.Len(t, b.Purchasable, 1, "the list stays as written")
	require.Equal(t, "us-reserved", b.Pools[n].Name)
	require.Equal(t, 3, b.Pools[n].Replicas)
	require.True(t, b.Bought(n))
	require.False(t, b.Bought(0))

	_, err = LoadWithSets("testdata/full.good.yaml", []string{"purchasable[0].replicas=17"})
	require.ErrorContains(t, err, "purchasable[0].purchase.max_replicas: got 16, want >= replicas (17)")
}
