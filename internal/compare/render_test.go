package compare

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// fixedResult is a Result built from made-up values, so that the golden
// files pin the layout and not the twin's numbers.
func fixedResult() *Result {
	return &Result{
		Scenario: "fixed",
		Policies: []string{"fifo", "priority", "wfq"},
		Seeds:    []uint64{42, 43, 44, 45, 46},
		Groups: []Group{{
			Name: "interactive", Class: true,
			Metrics: []Metric{
				newMetric("queue_wait_s.p99", Lower, [][]float64{
					{45.1, 50.2, 38.9, 47.7, 44.0},
					{0.91, 1.20, 0.75, 0.88, 1.02}, // far below: significant
					{44.0, 51.0, 39.5, 46.1, 45.2}, // about the same: not
				}),
				newMetric("slo_attainment", Higher, [][]float64{
					{0, 0, 0, 0, 0},
					{1, 1, 1, 1, 1}, // zero variance on both sides, different means
					{0, 0, 0, 0, 0}, // zero variance, equal means
				}),
			},
		}, {
			Name: "fleet",
			Metrics: []Metric{
				newMetric("cost.per_successful_task", Lower, [][]float64{
					{0.000551, 0.000560, 0.000549, 0.000555, 0.000552},
					{0.000551, 0.000560, 0.000549, 0.000555, 0.000552},
					{0.000553, 0.000561, 0.000551, 0.000556, 0.000554}, // small but consistent: paired test sees it
				}),
			},
		}},
		Run: RunInfo{Wall: 1234 * time.Millisecond, Parallel: 2, Version: "test"},
	}
}

func TestWriteGolden(t *testing.T) {
	r := fixedResult()
	var text, js bytes.Buffer
	require.NoError(t, WriteText(&text, r))
	require.NoError(t, WriteJSON(&js, r))
	golden(t, "fixed.txt", text.Bytes())
	golden(t, "fixed.json", js.Bytes())

	var back map[string]any
	require.NoError(t, json.Unmarshal(js.Bytes(), &back), "WriteJSON must write valid JSON")
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create %s", path)
	require.Equal(t, string(want), string(got), "%s differs; if the change is intended, rerun with -update and read the diff", path)
}

// TestTieIsExplained: identical columns come with the reason, which
// depends on whether anything queued; different ones with none.
func TestTieIsExplained(t *testing.T) {
	same := func(queue float64) *Result {
		v := []float64{queue, queue, queue}
		return &Result{Scenario: "tie", Policies: []string{"fifo", "wfq"}, Seeds: []uint64{1, 2, 3},
			Groups: []Group{{Name: "interactive", Class: true, Metrics: []Metric{
				newMetric("queue_wait_s.p99", Lower, [][]float64{v, v}),
				newMetric("slo_attainment", Higher, [][]float64{{1, 1, 1}, {1, 1, 1}}),
			}}}}
	}
	for _, tc := range []struct {
		name string
		r    *Result
		want string
	}{
		{"nothing queued", same(0), "no request waited in the gateway's\nqueue"},
		{"queued, ordered alike", same(2.5), "requests queued, but every policy\nordered them alike"},
		{"policies differ", fixedResult(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, WriteText(&b, tc.r))
			if tc.want == "" {
				require.NotContains(t, b.String(), "The policies tie")
				return
			}
			require.Contains(t, b.String(), tc.want)
		})
	}
}
