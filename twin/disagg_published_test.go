package twin

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// publishedPD is one row of testdata/pd-published/published.csv.
type publishedPD struct {
	config      string
	input       int
	ttft, itlMs float64
}

func readPublishedPD(t *testing.T) []publishedPD {
	t.Helper()
	f, err := os.Open("testdata/pd-published/published.csv")
	require.NoError(t, err)
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	rows, err := r.ReadAll()
	require.NoError(t, err)
	var out []publishedPD
	for _, row := range rows[1:] {
		in, err1 := strconv.Atoi(row[1])
		ttft, err2 := strconv.ParseFloat(row[2], 64)
		itl, err3 := strconv.ParseFloat(row[3], 64)
		require.NoError(t, errors.Join(err1, err2, err3), "published.csv row %v", row)
		out = append(out, publishedPD{row[0], in, ttft, itl})
	}
	return out
}

// runPublishedPD runs the published cluster split as config says on a
// burst of 1,024 prompts of input tokens, 256 out, and returns the mean
// TTFT and time per output token in ms.
func runPublishedPD(t *testing.T, config string, input int) (ttft, itl float64) {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/pd-published/scenario.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "scenario.yaml"), src, 0o644))
	line := fmt.Sprintf(`{"t":0,"input":%d,"output":256}`+"\n", input)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "burst.jsonl"), []byte(strings.Repeat(line, 1024)), 0o644))
	sc, err := scenarios.Load(filepath.Join(dir, "scenario.yaml"))
	require.NoError(t, err)
	switch config {
	case "route4": // the four nodes aggregated, one replica each
		sc.Models[0].Disaggregation = nil
		sc.Pools = sc.Pools[1:]
		sc.Pools[0].Role, sc.Pools[0].Replicas = "", 4
	case "pd1p3d":
		sc.Pools[0].Replicas, sc.Pools[1].Replicas = 1, 3
	case "pd2p2d":
		sc.Pools[0].Replicas, sc.Pools[1].Replicas = 2, 2
	}
	rep, err := Run(context.Background(), sc, Options{})
	require.NoError(t, err)
	require.EqualValues(t, 1024, rep.Requests.Completed, "%s at %d: every prompt completes", config, input)
	g := rep.Classes["bench"]
	return g.TTFT.Mean * 1000, g.TPOT.Mean * 1000
}

// TestDisaggPublishedRun holds the twin to a published P/D measurement it
// was never fitted on (testdata/pd-published, docs/disaggregation.md):
// a vLLM run of DeepSeek-V2-Lite on four 8-GPU H100 nodes, split 1P3D and
// 2P2D, against the same nodes aggregated. It requires the direction of
// every comparison the measurement makes clearly (the two figures more
// than 20 % apart, beyond the plots' reading error): which of split and
// aggregated has the higher TTFT and the lower ITL at each prompt length.
// The magnitudes are logged, not held: the twin is 3 to 8 times faster
// than this run in absolute terms (docs/disaggregation.md says why), so
// the 25 % is not met, and the test says so by the figures.
func TestDisaggPublishedRun(t *testing.T) {
	pub := readPublishedPD(t)
	type key struct {
		config string
		input  int
	}
	twinTTFT, twinITL := map[key]float64{}, map[key]float64{}
	for _, p := range pub {
		k := key{p.config, p.input}
		twinTTFT[k], twinITL[k] = runPublishedPD(t, p.config, p.input)
		t.Logf("%s in=%d: TTFT twin %.0f ms, published %.0f (%.2fx); ITL twin %.1f ms, published %.0f (%.2fx)",
			p.config, p.input, twinTTFT[k], p.ttft, twinTTFT[k]/p.ttft, twinITL[k], p.itlMs, twinITL[k]/p.itlMs)
	}
	pubOf := map[key]publishedPD{}
	for _, p := range pub {
		pubOf[key{p.config, p.input}] = p
	}
	checked := 0
	for _, split := range []string{"pd1p3d", "pd2p2d"} {
		for _, in := range []int{512, 1024, 2048, 4096} {
			s, a := pubOf[key{split, in}], pubOf[key{"route4", in}]
			ks, ka := key{split, in}, key{"route4", in}
			if clearly(s.ttft, a.ttft) {
				checked++
				require.Equal(t, s.ttft > a.ttft, twinTTFT[ks] > twinTTFT[ka],
					"%s at %d: published TTFT %.0f against aggregated %.0f; twin %.0f against %.0f", split, in, s.ttft, a.ttft, twinTTFT[ks], twinTTFT[ka])
			}
			if clearly(s.itlMs, a.itlMs) {
				checked++
				require.Equal(t, s.itlMs < a.itlMs, twinITL[ks] < twinITL[ka],
					"%s at %d: published ITL %.0f against aggregated %.0f; twin %.1f against %.1f", split, in, s.itlMs, a.itlMs, twinITL[ks], twinITL[ka])
			}
		}
	}
	require.GreaterOrEqual(t, checked, 14, "the comparisons the measurement makes clearly")
}

// clearly reports whether two published figures are more than 20 % apart.
func clearly(a, b float64) bool { return math.Abs(a-b) > 0.2*math.Min(a, b) }
