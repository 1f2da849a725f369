package sweep

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fleetdrill/fleetdrill/internal/compare"
)

// ShardFileName is the name `sweep run` gives shard i of n.
func ShardFileName(i, n int) string { return fmt.Sprintf("shard-%d-of-%d.json", i, n) }

var shardFile = regexp.MustCompile(`^shard-([0-9]+)-of-([0-9]+)\.json$`)

// WriteShard writes sh as indented JSON into dir, through a temporary file
// renamed into place, and returns the path.
func WriteShard(dir string, sh *Shard) (string, error) {
	b, err := json.MarshalIndent(sh, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, ShardFileName(sh.Shard, sh.Shards))
	tmp, err := os.CreateTemp(dir, ".shard-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}

// Report is a whole sweep: every run's figures, in run order (point, then
// seed, both in the spec's order), and per point the summary of each figure
// over the seeds. It is a pure function of the spec: however the runs were
// sharded, the JSON is the same.
type Report struct {
	Schema     int              `json:"schema"`
	SpecHash   string           `json:"spec_hash"`
	Scenario   string           `json:"scenario"`
	Points     []Point          `json:"points"`
	Seeds      []uint64         `json:"seeds"`
	Confidence float64          `json:"confidence"`
	Results    []Result         `json:"results"`
	Aggregates []PointAggregate `json:"aggregates"`
}

// PointAggregate summarises one point over its seeds.
type PointAggregate struct {
	Point   string       `json:"point"`
	Figures []FigureStat `json:"figures"`
}

// FigureStat is one figure over a point's seeds: Std and CI95 (the
// half-width of the Student-t 95% interval of the mean) are null with one
// seed.
type FigureStat struct {
	Name string   `json:"name"`
	N    int      `json:"n"`
	Mean float64  `json:"mean"`
	Std  *float64 `json:"std"`
	CI95 *float64 `json:"ci95"`
}

// ReadDir reads every shard file in dir and merges them.
func ReadDir(dir string) (*Report, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sweep merge: %w", err)
	}
	var shards []*Shard
	var names []string
	for _, e := range entries {
		if e.IsDir() || !shardFile.MatchString(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("sweep merge: %w", err)
		}
		var sh Shard
		if err := json.Unmarshal(b, &sh); err != nil {
			return nil, fmt.Errorf("sweep merge: %s: %w", e.Name(), err)
		}
		m := shardFile.FindStringSubmatch(e.Name())
		if m[1] != strconv.Itoa(sh.Shard) || m[2] != strconv.Itoa(sh.Shards) {
			return nil, fmt.Errorf("sweep merge: %s holds shard %d of %d; want the file named %s", e.Name(), sh.Shard, sh.Shards, ShardFileName(sh.Shard, sh.Shards))
		}
		shards = append(shards, &sh)
		names = append(names, e.Name())
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("sweep merge: no shard files (shard-I-of-N.json) in %s", dir)
	}
	return Merge(shards, names)
}

// Merge checks that shards are exactly the shards of one sweep, each once,
// and builds the report. names label the shards in messages (file names);
// nil for none.
func Merge(shards []*Shard, names []string) (*Report, error) {
	label := func(i int) string {
		if i < len(names) {
			return names[i]
		}
		return fmt.Sprintf("shard %d of %d", shards[i].Shard, shards[i].Shards)
	}
	first := shards[0]
	var problems []string
	for i, sh := range shards {
		switch {
		case sh.Schema != Schema:
			problems = append(problems, fmt.Sprintf("%s: schema %d; want %d", label(i), sh.Schema, Schema))
		case sh.SpecHash != first.SpecHash:
			problems = append(problems, fmt.Sprintf("%s: spec hash %.12s differs from %s's %.12s; the shards come from different sweeps (spec, scenario, points or seeds changed)", label(i), sh.SpecHash, label(0), first.SpecHash))
		case sh.Shards != first.Shards:
			problems = append(problems, fmt.Sprintf("%s: split %d ways, but %s %d ways; want every shard of one split", label(i), sh.Shards, label(0), first.Shards))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("sweep merge: inconsistent shards:\n  %s", strings.Join(problems, "\n  "))
	}
	n := first.Shards
	seen := make([]int, n)
	for i := range seen {
		seen[i] = -1
	}
	for i, sh := range shards {
		if sh.Shard < 0 || sh.Shard >= n {
			problems = append(problems, fmt.Sprintf("%s: shard index %d out of 0..%d", label(i), sh.Shard, n-1))
			continue
		}
		if seen[sh.Shard] >= 0 {
			problems = append(problems, fmt.Sprintf("%s: shard %d also in %s", label(i), sh.Shard, label(seen[sh.Shard])))
		}
		seen[sh.Shard] = i
	}
	var missing []string
	for i, s := range seen {
		if s < 0 {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("missing shard(s) %s of 0..%d (%s)", strings.Join(missing, ", "), n-1, ShardFileName(mustAtoi(missing[0]), n)))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("sweep merge: incomplete shard set:\n  %s", strings.Join(problems, "\n  "))
	}

	total := len(first.Points) * len(first.Seeds)
	results := make([]Result, total)
	have := make([]bool, total)
	for i, sh := range shards {
		want := Indexes(sh.Shard, n, total)
		got := make([]int, len(sh.Results))
		for k, r := range sh.Results {
			got[k] = r.Index
		}
		if !slices.Equal(got, want) {
			return nil, fmt.Errorf("sweep merge: %s: holds runs %v; want %v", label(i), got, want)
		}
		for _, r := range sh.Results {
			p, seed := first.Points[r.Index/len(first.Seeds)], first.Seeds[r.Index%len(first.Seeds)]
			if r.Point != p.Name || r.Seed != seed {
				return nil, fmt.Errorf("sweep merge: %s: run %d is point %s, seed %d; want point %s, seed %d", label(i), r.Index, r.Point, r.Seed, p.Name, seed)
			}
			results[r.Index], have[r.Index] = r, true
		}
	}
	rep := &Report{
		Schema: Schema, SpecHash: first.SpecHash, Scenario: first.Scenario,
		Points: first.Points, Seeds: first.Seeds, Confidence: compare.Confidence,
		Results: results,
	}
	ns := len(first.Seeds)
	for p, pt := range first.Points {
		runs := results[p*ns : (p+1)*ns]
		agg := PointAggregate{Point: pt.Name}
		for f, fig := range runs[0].Figures {
			vals := make([]float64, ns)
			for s, r := range runs {
				if len(r.Figures) != len(runs[0].Figures) || r.Figures[f].Name != fig.Name {
					return nil, fmt.Errorf("sweep merge: point %s: seed %d has other figures than seed %d", pt.Name, r.Seed, runs[0].Seed)
				}
				vals[s] = r.Figures[f].Value
			}
			sum := compare.Summarize(vals)
			agg.Figures = append(agg.Figures, FigureStat{Name: fig.Name, N: sum.N, Mean: sum.Mean, Std: finite(sum.Std), CI95: finite(sum.CI95)})
		}
		rep.Aggregates = append(rep.Aggregates, agg)
	}
	return rep, nil
}

func mustAtoi(s string) int { n, _ := strconv.Atoi(s); return n }

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// WriteJSON writes the report as indented JSON with a final newline.
func WriteJSON(w io.Writer, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteText writes each point's aggregates: mean ± CI95 per figure.
func WriteText(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "sweep %s: %d points × %d seeds = %d runs (spec %.12s)\n", r.Scenario, len(r.Points), len(r.Seeds), len(r.Results), r.SpecHash)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range r.Aggregates {
		fmt.Fprintf(tw, "\npoint %s\n", a.Point)
		for _, f := range a.Figures {
			ci := "n/a"
			if f.CI95 != nil {
				ci = strconv.FormatFloat(*f.CI95, 'g', 4, 64)
			}
			fmt.Fprintf(tw, "  %s\t%s\t± %s\n", f.Name, strconv.FormatFloat(f.Mean, 'g', 6, 64), ci)
		}
	}
	return tw.Flush()
}
