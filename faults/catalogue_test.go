package faults

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKinds(t *testing.T) {
	want := []string{
		"regional-outage", "brownout", "quota-exhaustion", "model-retirement",
		"driver-upgrade", "node-loss", "latency", "error-burst", "cold-start-storm",
		"stockout", "quota-cap", "slow-provisioning", "link-degraded", "kv-transfer-failure",
	}
	require.Equal(t, want, Kinds())
	for _, k := range []Kind{RegionalOutage, Brownout, QuotaExhaustion, ModelRetirement,
		DriverUpgrade, NodeLoss, Latency, ErrorBurst, ColdStartStorm} {
		require.Contains(t, Kinds(), string(k), "Kinds() lacks the constant %s", k)
	}
}

func TestKeys(t *testing.T) {
	for _, tt := range []struct {
		kind Kind
		want []string
	}{
		{RegionalOutage, []string{"region", "at", "for"}},
		{Brownout, []string{"region", "pool", "at", "for", "count", "percent", "fail", "latency"}},
		{ModelRetirement, []string{"pool", "model", "at", "for", "notice"}},
		{"no-such-kind", nil},
	} {
		require.Equal(t, tt.want, Keys(tt.kind), "Keys(%s)", tt.kind)
	}
}

// TestCatalogueConsistent checks the table the parser, printer and validator
// share: every kind takes at=, takes its keys in printing order, and needs a
// target among the keys it takes.
func TestCatalogueConsistent(t *testing.T) {
	for _, e := range catalogue {
		t.Run(string(e.kind), func(t *testing.T) {
			require.Contains(t, e.takes, "at")
			for _, k := range e.takes {
				require.Contains(t, keyOrder, k)
			}
			require.True(t, slices.IsSortedFunc(e.takes, func(a, b string) int { return keyRank(a) - keyRank(b) }),
				"takes %v is not in printing order %v", e.takes, keyOrder)
			require.NotEmpty(t, e.target)
			for _, k := range e.target {
				require.Contains(t, e.takes, k, "target key %s is not taken", k)
			}
		})
	}
	for _, k := range keyOrder {
		if k != "tenant" { // reserved: see catalogue
			require.NotEmpty(t, usedBy(k), "no kind takes %s=", k)
		}
	}
}

func TestDescribe(t *testing.T) {
	keyRE := regexp.MustCompile(`([a-z]+)=`)
	for _, k := range Kinds() {
		t.Run(k, func(t *testing.T) {
			d := Describe(Kind(k))
			require.True(t, strings.HasPrefix(d, k+": "), "Describe(%s) = %q, want it to start with the kind", k, d)
			require.NotContains(t, d, "\n", "Describe(%s) is one line", k)
			e, _ := lookup(Kind(k))
			var keys []string
			for _, m := range keyRE.FindAllStringSubmatch(e.usage, -1) {
				if !slices.Contains(keys, m[1]) {
					keys = append(keys, m[1])
				}
			}
			slices.SortFunc(keys, func(a, b string) int { return keyRank(a) - keyRank(b) })
			require.Equal(t, e.takes, keys, "Describe(%s)'s synopsis %q names other keys than the kind takes", k, e.usage)
		})
	}
	require.Empty(t, Describe("no-such-kind"))
	require.Equal(t, "node-loss: replicas of a pool fail (one unless count= or percent= says otherwise); pool=NAME at=D [for=D] [count=N|percent=P]",
		Describe(NodeLoss))
}
