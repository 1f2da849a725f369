package compile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// TestLibraryCompiles: every library scenario compiles, and the core's
// replicas are the pools' in order, each pool's from its FirstReplica,
// PoolReplicas of them (its autoscaling maximum, those beyond `replicas`
// absent until its scaler provisions them).
func TestLibraryCompiles(t *testing.T) {
	for _, info := range scenarios.List() {
		t.Run(info.Name, func(t *testing.T) {
			sc, err := scenarios.LoadNamed(info.Name)
			require.NoError(t, err)
			p, err := Compile(sc)
			require.NoError(t, err)
			require.Len(t, p.Core.Replicas, len(p.Replicas))
			require.Len(t, p.Pools, len(sc.Pools))
			next := 0
			for pi, pp := range p.Pools {
				require.Equal(t, next, pp.FirstReplica, "pool %s", pp.Spec.Name)
				n := 0
				for next < len(p.Replicas) && p.Replicas[next].Pool == pi {
					r := p.Core.Replicas[next]
					require.Equal(t, p.Replicas[next].Model, r.Model)
					// A prefill pool's replicas run its model for the decode
					// pools and serve no client.
					require.Equal(t, !p.Core.Pools[pi].Prefill, p.Core.Pools[pi].Serves[r.Model], "pool %s replica %d", pp.Spec.Name, n)
					require.Equal(t, pp.Spec.Role == "prefill", p.Core.Pools[pi].Prefill, "pool %s", pp.Spec.Name)
					require.Equal(t, n >= pp.Spec.Replicas, r.Absent, "pool %s replica %d", pp.Spec.Name, n)
					n, next = n+1, next+1
				}
				if n > 0 {
					require.Equal(t, PoolReplicas(pp.Spec), n, "pool %s", pp.Spec.Name)
				}
			}
			require.Equal(t, len(p.Replicas), next)
		})
	}
}
