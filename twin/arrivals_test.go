package twin

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// A replay outside the twin must send exactly the requests the twin
// simulated: same arrival times, tenants, classes, models and token counts.
func TestArrivalsAreTheRequestsRunSimulates(t *testing.T) {
	for _, name := range []string{"default", "mooncake-prefix"} {
		t.Run(name, func(t *testing.T) {
			sc, err := scenarios.LoadNamedWithSets(name, []string{"duration=3m", "warmup=0s"})
			if err != nil {
				t.Skipf("%s: %v (its trace lives in ../shared)", name, err)
			}
			type key struct {
				at      time.Duration
				in, out int
			}
			var logs []key
			rep, err := Run(context.Background(), sc, Options{OnComplete: func(l RequestLog) {
				logs = append(logs, key{l.Arrived, l.Input, l.Output})
			}})
			require.NoError(t, err)
			require.Equal(t, rep.Requests.Arrived, rep.Requests.Completed, "the comparison needs every request completed")

			sc2, err := scenarios.LoadNamedWithSets(name, []string{"duration=3m", "warmup=0s"})
			require.NoError(t, err)
			var got []key
			var last time.Duration
			perTenant := map[int]uint64{}
			streams, err := Arrivals(sc2, func(a Arrival) error {
				require.GreaterOrEqual(t, a.At, last, "arrivals in time order")
				last = a.At
				got = append(got, key{a.At, a.Input, a.Output})
				perTenant[a.Tenant]++
				return nil
			})
			require.NoError(t, err)
			require.Len(t, got, len(logs))
			cmp := func(a, b key) int {
				if a.at != b.at {
					return int(a.at - b.at)
				}
				if a.in != b.in {
					return a.in - b.in
				}
				return a.out - b.out
			}
			slices.SortFunc(logs, cmp)
			slices.SortFunc(got, cmp)
			require.Equal(t, logs, got)
			require.Equal(t, rep.Workload, streams)
			for i, tn := range sc.Tenants {
				require.Equal(t, rep.Tenants[tn.Name].Arrived, perTenant[i], "tenant %s", tn.Name)
			}
		})
	}
}
