package report

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestTextGolden(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		path string // a scenario file, or a library scenario's name, instead of the default
	}{
		{"default-5m", []string{"duration=5m", "warmup=1m"}, ""},
		// One replica per pool, the 70B streams at 5× and a failing
		// expectation: queueing, rejections and a FAIL line show.
		{"overloaded", []string{"duration=5m", "warmup=1m", "pools.use-h100-8b.replicas=1",
			"pools.euw-a100-8b.replicas=1", "pools.use-h100-70b.replicas=1", "pools.euw-a100-70b.replicas=1",
			"workload.retail-assist.arrivals.rate=4", "workload.bank-eu-advisor.arrivals.rate=2.5",
			"workload.research-batch.arrivals.rate=2",
			"policy.admission.queue_limit=20", "expect[0]=interactive.ttft.p99 < 100ms"}, ""},
		// Two faults, the tenants they displaced and where their requests
		// went, a timeline; an expectation with no data, skipped.
		{"faults", []string{"duration=10m", "warmup=1m",
			`faults=["regional-outage region=eu-west at=2m for=3m", "brownout region=us-east at=4m for=2m fail=0.3"]`,
			`expect[0]="after recovery + 10m: interactive.ttft.p99 < 2s if any"`}, ""},
		// A canary rolled back from its browned-out candidate, with shadow
		// copies: the canaries section and its decisions on the timeline.
		{"canary", nil, "../../twin/testdata/canary.yaml"},
		// An autoscaled M/M/c pool scaling up under load, partly from its
		// reservation, then a stockout: the autoscaling section.
		{"autoscale", []string{"duration=30m", "expect=[]", "workload.poisson.arrivals.rate=3", "pools.mmc.price_per_gpu_hour=2",
			"pools.mmc.autoscale={metric: utilization, target: 0.7, min_replicas: 4, max_replicas: 8, sync_period: 30s}",
			"pools.mmc.acquisition={reserved: 5, delay: {distribution: constant, mean: 2m}}",
			`faults=["stockout pool=mmc at=2m for=10m grant=0.5"]`}, "mmc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "default"
			if tt.path != "" && !strings.Contains(tt.path, "/") {
				name, tt.path = tt.path, "" // a library scenario
			}
			sc, err := scenarios.LoadNamedWithSets(name, tt.sets)
			if tt.path != "" {
				sc, err = scenarios.Load(tt.path)
			}
			require.NoError(t, err)
			rep, err := twin.Run(context.Background(), sc, twin.Options{})
			require.NoError(t, err)
			var buf bytes.Buffer
			require.NoError(t, Text(&buf, rep))
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), buf.String())
			for i, line := range strings.Split(buf.String(), "\n") {
				require.LessOrEqual(t, utf8.RuneCountInString(line), width, "line %d is wider than the report: %q", i+1, line)
			}
		})
	}
}

func TestSecs(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {0.0000123, "12µs"}, {0.0123, "12.3ms"}, {1.5, "1.50s"}, {75, "1m15s"}, {3725, "1h02m"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, secs(tt.in), "secs(%v)", tt.in)
	}
}

// An autoscaled pool's shortfall line names only the tenants with requests
// that arrived while it was short.
func TestShortfallLine(t *testing.T) {
	tests := []struct {
		name string
		a    twin.AutoscaleReport
		want string
	}{
		{name: "never short", a: twin.AutoscaleReport{Tenants: map[string]twin.ShortfallTenant{"a": {Arrived: 10, FinishedNotShort: 10, SLOAttainmentShort: twin.NoRatio, SLOAttainmentNotShort: 1}}},
			want: "p: never short (serving what it asked for throughout)"},
		{name: "short", a: twin.AutoscaleReport{ShortS: 90, ShortReplicaS: 180, LongestShortS: 60, Tenants: map[string]twin.ShortfallTenant{
			"a": {Arrived: 30, ArrivedShort: 10, FinishedShort: 10, FinishedNotShort: 20, SLOAttainmentShort: 0.5, SLOAttainmentNotShort: 1},
			"b": {Arrived: 5, FinishedNotShort: 5, SLOAttainmentShort: twin.NoRatio, SLOAttainmentNotShort: 1}}},
			want: "p: short 1m30s of 10m00s (180 replica-s; longest 1m00s); SLO attainment of requests arriving while short vs not: a 50.0% of 10 vs 100.0% of 20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, shortfall("p", &tt.a, 600, 60))
		})
	}
}
