package latency

import (
	"bytes"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Regenerate builtin_table.go (and, when ../shared is checked out, the
// testdata fixture) with
//
//	go test ./twin/latency -run TestBuiltinTable -update
var update = flag.Bool("update", false, "rewrite builtin_table.go from the derivation (and testdata/ from ../shared when present)")

const (
	// sharedDir is the team's staged public data, relative to this package.
	sharedDir  = "../../../shared/profiles"
	fixtureDir = "testdata"
	vidurFile  = "vidur_mlp_op_medians.csv"
	mlperfFile = "mlperf_llm_per_accelerator_summary.csv"
	tableFile  = "builtin_table.go"
	// tolerance is how far the committed table may drift from a recomputation.
	tolerance = 0.005
)

// csvTable is a CSV file kept line by line, so that the fixture can be a
// verbatim subset of the shared file.
type csvTable struct {
	header string
	lines  []string            // data lines, as in the file
	rows   []map[string]string // the same lines, parsed by column name
}

func readCSV(path string) (csvTable, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return csvTable{}, err
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) < 1 {
		return csvTable{}, fmt.Errorf("%s: empty", path)
	}
	t := csvTable{header: all[0]}
	cols, err := csv.NewReader(strings.NewReader(all[0])).Read()
	if err != nil {
		return t, fmt.Errorf("%s header: %w", path, err)
	}
	for i, line := range all[1:] {
		// No field in these files spans lines, so each line parses alone.
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil {
			return t, fmt.Errorf("%s line %d: %w", path, i+2, err)
		}
		if len(rec) != len(cols) {
			return t, fmt.Errorf("%s line %d: %d fields, want %d", path, i+2, len(rec), len(cols))
		}
		row := make(map[string]string, len(cols))
		for j, c := range cols {
			row[c] = rec[j]
		}
		t.lines = append(t.lines, line)
		t.rows = append(t.rows, row)
	}
	return t, nil
}

// fields reads typed fields from a row, keeping the first error.
type fields struct {
	row map[string]string
	err error
}

func (f *fields) str(col string) string {
	v, ok := f.row[col]
	if !ok && f.err == nil {
		f.err = fmt.Errorf("no column %q", col)
	}
	return v
}

func (f *fields) int(col string) int {
	s := f.str(col)
	if s == "" {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s: %w", col, err)
	}
	return v
}

func (f *fields) float(col string) float64 {
	s := f.str(col)
	if s == "" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%s: %w", col, err)
	}
	return v
}

func parseVidur(t csvTable) ([]vidurRow, error) {
	out := make([]vidurRow, 0, len(t.rows))
	for i, row := range t.rows {
		f := fields{row: row}
		r := vidurRow{
			Device: f.str("device"), Model: f.str("model"), TP: f.int("tensor_parallel"), NumTokens: f.int("num_tokens"),
			Hidden: f.int("n_embd"), Intermediate: f.int("n_expanded_embd"), Heads: f.int("n_head"), KVHeads: f.int("n_kv_head"),
			LayerMS: f.float("layer_non_attention_kernel_ms"),
		}
		if f.err != nil {
			return nil, fmt.Errorf("%s row %d: %w", vidurFile, i+1, f.err)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseMLPerf(t csvTable) ([]mlperfGroup, error) {
	out := make([]mlperfGroup, 0, len(t.rows))
	for i, row := range t.rows {
		f := fields{row: row}
		g := mlperfGroup{
			Version: f.str("mlperf_version"), Accelerator: f.str("accelerator"), Model: f.str("model"),
			Scenario: f.str("scenario"), Units: f.str("units_per_accelerator"), TPOTLimitMS: f.float("tpot_p99_limit_ms"),
			N: f.int("n_results"), Max: f.float("max_per_accelerator"),
		}
		if f.err != nil {
			return nil, fmt.Errorf("%s row %d: %w", mlperfFile, i+1, f.err)
		}
		out = append(out, g)
	}
	return out, nil
}

// inputs are the two tables read from one directory.
type inputs struct {
	vidurCSV, mlperfCSV csvTable
	vidur               []vidurRow
	mlperf              []mlperfGroup
}

func load(dir string) (inputs, error) {
	var in inputs
	var err error
	if in.vidurCSV, err = readCSV(filepath.Join(dir, vidurFile)); err != nil {
		return in, err
	}
	if in.mlperfCSV, err = readCSV(filepath.Join(dir, mlperfFile)); err != nil {
		return in, err
	}
	if in.vidur, err = parseVidur(in.vidurCSV); err != nil {
		return in, err
	}
	in.mlperf, err = parseMLPerf(in.mlperfCSV)
	return in, err
}

// vidurNeeded says whether the derivation may read a Vidur row: a proxy
// model on its SKU, at a candidate TP and one of the three grid points.
func vidurNeeded(r map[string]string) bool {
	if !slices.Contains([]string{"1", "128", "4096"}, r["num_tokens"]) {
		return false
	}
	if !slices.ContainsFunc(tpCandidates, func(tp int) bool { return strconv.Itoa(tp) == r["tensor_parallel"] }) {
		return false
	}
	for _, m := range targetModels {
		if m.Proxy[r["device"]] == r["model"] {
			return true
		}
	}
	return false
}

// mlperfNeeded says whether the derivation may read an MLPerf group: one of
// our accelerators on one of our MLPerf models, Server or Offline.
func mlperfNeeded(r map[string]string) bool {
	if r["scenario"] != "Server" && r["scenario"] != "Offline" {
		return false
	}
	if !slices.ContainsFunc(targetModels, func(m targetModel) bool { return m.MLPerf == r["model"] }) {
		return false
	}
	return slices.ContainsFunc(accelerators, func(a accelSpec) bool { return slices.Contains(a.MLPerf, r["accelerator"]) })
}

func subset(t csvTable, keep func(map[string]string) bool) []string {
	var out []string
	for i, row := range t.rows {
		if keep(row) {
			out = append(out, t.lines[i])
		}
	}
	return out
}

func sharedPresent(t *testing.T) bool {
	_, err := os.Stat(sharedDir)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// writeFixture refreshes testdata/ from the shared tables.
func writeFixture(t *testing.T, shared inputs) {
	for _, f := range []struct {
		name string
		t    csvTable
		keep func(map[string]string) bool
	}{{vidurFile, shared.vidurCSV, vidurNeeded}, {mlperfFile, shared.mlperfCSV, mlperfNeeded}} {
		body := f.t.header + "\n" + strings.Join(subset(f.t, f.keep), "\n") + "\n"
		if err := os.WriteFile(filepath.Join(fixtureDir, f.name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// renderTable writes builtin_table.go for the derivations.
func renderTable(ds []derivation) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by go test ./twin/latency -run TestBuiltinTable -update; DO NOT EDIT.\n\n")
	b.WriteString("package latency\n\n")
	b.WriteString("// builtinTable is derived by derive.go from shared/profiles (Vidur and MLPerf);\n")
	b.WriteString("// docs/profiles.md explains every number. Costs in µs.\n")
	b.WriteString("var builtinTable = map[string]Profile{\n")
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 7, 64) }
	for _, d := range ds {
		p := d.Profile
		fmt.Fprintf(&b, "\t%q: {\n", d.Ref)
		fmt.Fprintf(&b, "\t\tStepBase: %s, PerSeq: %s, PerPrefillToken: %s, PerKVToken: %s, MinStep: %s,\n",
			g(p.StepBase), g(p.PerSeq), g(p.PerPrefillToken), g(p.PerKVToken), g(p.MinStep))
		fmt.Fprintf(&b, "\t\tMaxBatchedTokens: %d,\n", p.MaxBatchedTokens)
		fmt.Fprintf(&b, "\t\tSource: %q,\n", p.Source)
		b.WriteString("\t},\n")
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

func near(got, want float64) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(got-want) <= tolerance*math.Abs(want)
}

// compareTable requires the committed table to be the derivation's, within
// tolerance.
func compareTable(t *testing.T, ds []derivation, table map[string]Profile) {
	t.Helper()
	var refs []string
	for _, d := range ds {
		refs = append(refs, d.Ref)
		got, ok := table[d.Ref]
		if !ok {
			t.Errorf("%s: derived but not in builtin_table.go", d.Ref)
			continue
		}
		w := d.Profile
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"StepBase", got.StepBase, w.StepBase}, {"PerSeq", got.PerSeq, w.PerSeq},
			{"PerPrefillToken", got.PerPrefillToken, w.PerPrefillToken}, {"PerKVToken", got.PerKVToken, w.PerKVToken},
			{"MinStep", got.MinStep, w.MinStep},
		} {
			if !near(c.got, c.want) {
				t.Errorf("%s %s = %g in the table, %g derived (more than %.1f %% apart)", d.Ref, c.name, c.got, c.want, tolerance*100)
			}
		}
		if got.MaxBatchedTokens != w.MaxBatchedTokens || got.KVTokens != w.KVTokens || got.Source != w.Source {
			t.Errorf("%s: table %+v, derived %+v", d.Ref, got, w)
		}
	}
	for ref := range table {
		if !slices.Contains(refs, ref) {
			t.Errorf("%s: in builtin_table.go but no longer derived", ref)
		}
	}
	if t.Failed() {
		t.Log("regenerate with: go test ./twin/latency -run TestBuiltinTable -update")
	}
}

func deriveFrom(t *testing.T, dir string) ([]derivation, inputs) {
	t.Helper()
	in, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := deriveAll(in.vidur, in.mlperf)
	if err != nil {
		t.Fatal(err)
	}
	return ds, in
}

// TestBuiltinTable recomputes every built-in profile from the small fixture
// in testdata/, so it runs everywhere. With -update it first refreshes the
// fixture from ../shared (when present), then rewrites builtin_table.go.
func TestBuiltinTable(t *testing.T) {
	if *update {
		if sharedPresent(t) {
			shared, err := load(sharedDir)
			if err != nil {
				t.Fatal(err)
			}
			writeFixture(t, shared)
		}
		ds, _ := deriveFrom(t, fixtureDir)
		src, err := renderTable(ds)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tableFile, src, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d profiles)", tableFile, len(ds))
		return
	}
	ds, _ := deriveFrom(t, fixtureDir)
	compareTable(t, ds, builtin)
}

// TestBuiltinTableFromShared recomputes the table from the full shared
// tables, and checks that the fixture is exactly the rows the derivation can
// read, copied verbatim.
func TestBuiltinTableFromShared(t *testing.T) {
	if !sharedPresent(t) {
		t.Skipf("%s is absent (the team's staged data is not checked out here); TestBuiltinTable covers the fixture", sharedDir)
	}
	if *update {
		t.Skip("-update rewrites the table; rerun without it to compare")
	}
	ds, shared := deriveFrom(t, sharedDir)
	compareTable(t, ds, builtin)

	_, fixture := deriveFrom(t, fixtureDir)
	for _, f := range []struct {
		name            string
		shared, fixture csvTable
		keep            func(map[string]string) bool
	}{
		{vidurFile, shared.vidurCSV, fixture.vidurCSV, vidurNeeded},
		{mlperfFile, shared.mlperfCSV, fixture.mlperfCSV, mlperfNeeded},
	} {
		if f.fixture.header != f.shared.header {
			t.Errorf("%s: fixture header differs from the shared file's", f.name)
		}
		if want := subset(f.shared, f.keep); !slices.Equal(f.fixture.lines, want) {
			t.Errorf("%s: the fixture is not the shared file's needed rows (%d lines, want %d); refresh with -update",
				f.name, len(f.fixture.lines), len(want))
		}
	}
}

// TestMLPerfServerSanity checks each profile against the MLPerf Server
// result of its accelerator: the output tokens/s per accelerator the profile
// implies at the p99 TPOT limit should be within a factor 1.5 of MLPerf's at
// the precision-neutral scale, and MLPerf should lie between the bf16
// estimate and the fp8-roofline one (each with the same factor).
func TestMLPerfServerSanity(t *testing.T) {
	ds, in := deriveFrom(t, fixtureDir)
	checks := serverChecks(ds, in.mlperf)
	const factor = 1.5
	var refs []string
	for _, c := range checks {
		refs = append(refs, c.Ref)
		t.Logf("%-32s %-13s %s TPOT %3.0f ms  MLPerf %7.1f tok/s/acc  implied/MLPerf: bf16 %.2f  mid %.2f  fp8 %.2f",
			c.Ref, c.Model, c.Version, c.TPOTLimitMS, c.MLPerf, c.BF16, c.Mid, c.FP8)
		if c.Mid < 1/factor || c.Mid > factor {
			t.Errorf("%s: implied Server throughput is %.2f× MLPerf %s %s (%.1f tok/s), want within %.1f×",
				c.Ref, c.Mid, c.Model, c.Version, c.MLPerf, factor)
		}
		if c.BF16 > factor {
			t.Errorf("%s: the bf16 profile implies %.2f× MLPerf's throughput; a bf16 deployment should not beat it", c.Ref, c.BF16)
		}
		if c.FP8 < 1/factor {
			t.Errorf("%s: even at fp8's roofline the profile implies only %.2f× MLPerf's throughput", c.Ref, c.FP8)
		}
	}
	// Every accelerator with an MLPerf result on a model is checked on it.
	for _, want := range []string{
		"h100-sxm/llama-3.1-8b/tp1", "h100-sxm/llama-3.1-70b/tp4",
		"h200-sxm/llama-3.1-8b/tp1", "h200-sxm/llama-3.1-70b/tp2",
		"l40s/llama-3.1-8b/tp1", "l40s/llama-3.1-70b/tp8",
		"mi300x/llama-3.1-70b/tp2",
	} {
		if !slices.Contains(refs, want) {
			t.Errorf("%s: no MLPerf Server check", want)
		}
	}
}

// TestServerThroughputMonotone: a tighter TPOT limit or longer prompts can
// only lower the implied throughput, and narrower precision only raise it.
func TestServerThroughputMonotone(t *testing.T) {
	ds, _ := deriveFrom(t, fixtureDir)
	for _, d := range ds {
		w := mlperfWorkloads[d.Model.MLPerf]
		base, _ := serverThroughput(d, 200, w, 1)
		tight, _ := serverThroughput(d, 100, w, 1)
		long, _ := serverThroughput(d, 200, mlperfWorkload{ISL: 2 * w.ISL, OSL: w.OSL}, 1)
		fp8, _ := serverThroughput(d, 200, w, 0.5)
		if !(base > 0) || tight > base || long > base || fp8 < base {
			t.Errorf("%s: throughput %g at 200 ms, %g at 100 ms, %g with 2× prompts, %g at fp8", d.Ref, base, tight, long, fp8)
		}
	}
}

// TestDerivationReport logs the intermediate numbers docs/profiles.md
// quotes (go test -run TestDerivationReport -v ./twin/latency).
func TestDerivationReport(t *testing.T) {
	ds, _ := deriveFrom(t, fixtureDir)
	var b strings.Builder
	b.WriteString("\n| ref | Vidur rows (tp, t@1 / t@128 / t@4096 µs per layer, scaled) | proxy scale | eff. BW GB/s | weight read µs | decode GEMM µs/seq |\n|---|---|---|---|---|---|\n")
	for _, d := range ds {
		fmt.Fprintf(&b, "| %s | %s %s tp%d: %.1f / %.1f / %.1f | %.4f | %.0f | %.0f | %.2f |\n", d.Ref, d.VidurDevice,
			strings.TrimPrefix(d.Proxy, "meta-llama/"), d.TP, d.T1, d.TBatch, d.TPrefill, d.ProxyScale, d.BandwidthGBs, d.WeightReadUS, d.DecodeGEMMUS)
	}
	b.WriteString("\n| ref | scenario | MLPerf model | version | target | H100-SXM | n | measured | spec | used |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, d := range ds {
		for _, r := range []*ratio{d.Decode, d.Prefill} {
			if r != nil {
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f | %.1f | %d / %d | %.3f | %.3f | %.3f |\n", d.Ref, r.Scenario, r.Model,
					r.Version, r.Target, r.Base, r.NTarget, r.NBase, r.Measured, r.Spec, r.Used)
			}
		}
	}
	b.WriteString("\n| ref | StepBase | PerSeq | PerPrefillToken | PerKVToken | MinStep | MaxBatchedTokens |\n|---|---|---|---|---|---|---|\n")
	for _, d := range ds {
		p := d.Profile
		fmt.Fprintf(&b, "| `%s` | %.0f | %.2f | %.2f | %.4f | %.0f | %d |\n", d.Ref, p.StepBase, p.PerSeq, p.PerPrefillToken, p.PerKVToken, p.MinStep, p.MaxBatchedTokens)
	}
	t.Log(b.String())
}

// TestMLPerfRatioRule exercises the ratio rule on made-up groups: the
// version with the most paired results wins (ties to the newer), the best
// result per accelerator is used, several accelerator strings pool, the
// spec ratio caps, and a model without results falls back to the other.
func TestMLPerfRatioRule(t *testing.T) {
	base := accelSpec{Name: "base", MLPerf: []string{"B"}}
	target := accelSpec{Name: "target", MLPerf: []string{"T", "T2"}}
	m70 := targetModels[1]
	grp := func(version, accel, model string, n int, best float64) mlperfGroup {
		return mlperfGroup{Version: version, Accelerator: accel, Model: model, Scenario: "Server", Units: "Tokens/s", N: n, Max: best}
	}
	groups := []mlperfGroup{
		grp("v4.1", "B", "llama2-70b-99", 10, 1000), grp("v4.1", "T", "llama2-70b-99", 2, 500), grp("v4.1", "T2", "llama2-70b-99", 1, 600),
		grp("v5.1", "B", "llama2-70b-99", 2, 2000), grp("v5.1", "T", "llama2-70b-99", 9, 3000),
		{Version: "v5.1", Accelerator: "T", Model: "llama2-70b-99", Scenario: "Offline", Units: "Tokens/s", N: 1, Max: 9e9},
	}
	r, err := mlperfRatio(target, base, m70, "Server", 10, groups)
	if err != nil {
		t.Fatal(err)
	}
	// v4.1 pairs min(10, 3) = 3 results, v5.1 min(2, 9) = 2: v4.1, with T2's 600.
	if r.Version != "v4.1" || r.Target != 600 || r.NTarget != 3 || r.Used != 0.6 {
		t.Errorf("got %+v, want v4.1, 600/1000 over 3 results", r)
	}
	groups = append(groups, grp("v5.1", "B", "llama2-70b-99", 1, 2000))
	if r, _ := mlperfRatio(target, base, m70, "Server", 10, groups); r.Version != "v5.1" || r.Measured != 1.5 {
		t.Errorf("a tie (3 and 3) should go to the newer version: got %+v", r)
	}
	if r, _ := mlperfRatio(target, base, m70, "Server", 1.2, groups); r.Used != 1.2 || r.Measured != 1.5 {
		t.Errorf("the spec ratio should cap: got %+v", r)
	}
	// 8B has no results here: the 70B model's ratio stands in.
	if r, err := mlperfRatio(target, base, targetModels[0], "Server", 10, groups); err != nil || r.Model != "llama2-70b-99" {
		t.Errorf("want a fallback to llama2-70b-99, got %+v, %v", r, err)
	}
	// Offline has no base result at all.
	if _, err := mlperfRatio(target, base, m70, "Offline", 10, groups); err == nil {
		t.Error("want an error without a base result")
	}
}

// TestDeriveMissingRow: a fixture without a needed Vidur row fails with the
// row named, rather than silently deriving something else.
func TestDeriveMissingRow(t *testing.T) {
	in, err := load(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	rows := slices.DeleteFunc(slices.Clone(in.vidur), func(r vidurRow) bool {
		return r.Device == "a100" && r.NumTokens == vidurPrefillTokens
	})
	if _, err := deriveAll(rows, in.mlperf); err == nil || !strings.Contains(err.Error(), "num_tokens 4096") {
		t.Errorf("want an error naming the missing row, got %v", err)
	}
}
