package benchmark

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ (the sim-to-real ones from ../../../shared when present)")

// briefExample is the format's example as first specified: zeros measured in
// the whole run, nothing in the stages.
const briefExample = `{"name": "64-qwen2.5-7b-tp1", "gpu": "H100", "tensor_parallel": 1,
 "model_config": "model_configs/qwen2.5-7b-instruct.json", "precision": "fp16",
 "engine": {"max_num_seqs": 128, "max_num_batched_tokens": 2048, "max_model_len": 4096,
            "total_kv_blocks": 36000, "block_size": 16, "prefix_caching": true},
 "workload": {"arrivals": "poisson", "stages": [{"rate": 8, "duration_s": 600}],
              "shared_prefix": {"system_prompt_len": 100, "question_len": 447,
                                "output_len": 248, "num_unique_system_prompts": 9}},
 "measured_ms": {"-1": {"ttft_mean": 0, "ttft_p90": 0, "ttft_p99": 0, "itl_mean": 0,
                        "e2e_mean": 0, "e2e_p90": 0, "e2e_p99": 0}, "0": {}}}`

func TestParseBriefExample(t *testing.T) {
	e, err := Parse("bench/64.json", []byte(briefExample))
	require.NoError(t, err)
	require.Equal(t, "64-qwen2.5-7b-tp1", e.Name)
	require.Equal(t, 1, e.DP, "dp defaults to 1")
	require.Equal(t, DefaultBlockSize, e.Engine.BlockSize)
	require.Equal(t, []Stage{{Rate: 8, DurationS: 600}}, e.Workload.Stages)
	require.Nil(t, e.Workload.Seed)
	require.Equal(t, []int{WholeRun, 0}, e.Measured.Stages())

	// A measured 0 is there; an unmeasured figure is not.
	v, ok := e.Measured[WholeRun]["ttft_mean"]
	require.True(t, ok)
	require.Zero(t, v)
	_, ok = e.Measured[WholeRun]["ttft_p50"]
	require.False(t, ok)
	require.Empty(t, e.Measured[0])

	require.Equal(t, filepath.Join("bench", "model_configs", "qwen2.5-7b-instruct.json"), e.ModelConfigPath())
}

func TestParseDefaults(t *testing.T) {
	text := strings.Replace(briefExample, `"total_kv_blocks": 36000, "block_size": 16, `, "", 1)
	e, err := Parse("x.json", []byte(text))
	require.NoError(t, err)
	require.Zero(t, e.Engine.TotalKVBlocks, "absent total_kv_blocks is 0: derive it later")
	require.Equal(t, 16, e.Engine.BlockSize)
}

// TestMarshalCanonical: the canonical form of the full example is the golden
// file, and it parses back to itself.
func TestMarshalCanonical(t *testing.T) {
	for _, name := range []string{"qwen2.5-7b-general", "brief"} {
		t.Run(name, func(t *testing.T) {
			var e *Experiment
			var err error
			if name == "brief" {
				e, err = Parse("brief.json", []byte(briefExample))
			} else {
				e, err = Load(filepath.Join("testdata", "experiment", name+".json"))
			}
			require.NoError(t, err)
			out, err := e.Marshal()
			require.NoError(t, err)
			golden := filepath.Join("testdata", "experiment", name+".canonical")
			if *update {
				require.NoError(t, os.WriteFile(golden, out, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run go test -update to create it")
			require.Equal(t, string(want), string(out))

			again, err := Parse("again.json", out)
			require.NoError(t, err)
			out2, err := again.Marshal()
			require.NoError(t, err)
			require.Equal(t, string(out), string(out2))
		})
	}
}

func TestMarshalOrder(t *testing.T) {
	e, err := Parse("x.json", []byte(briefExample))
	require.NoError(t, err)
	e.Measured = Measured{
		WholeRun: {"e2e_mean": 2, "ttft_mean": 1},
		0:        {"tpot_mean": 1, "itl_mean": 1},
	}
	e.Workload.Stages = make([]Stage, 11)
	for i := range e.Workload.Stages {
		e.Workload.Stages[i] = Stage{Rate: 1, DurationS: 10}
	}
	e.Measured[10] = Metrics{"itl_mean": 3}
	e.Measured[2] = Metrics{"itl_mean": 2}
	out, err := e.Marshal()
	require.NoError(t, err)
	s := string(out)
	// Stages by number, not as text ("10" before "2"); metrics in MetricNames order.
	require.Less(t, strings.Index(s, `"-1"`), strings.Index(s, `"0"`))
	require.Less(t, strings.Index(s, `"2"`), strings.Index(s, `"10"`))
	require.Less(t, strings.Index(s, `"ttft_mean"`), strings.Index(s, `"e2e_mean"`))
	require.Less(t, strings.Index(s, `"itl_mean": 1`), strings.Index(s, `"tpot_mean"`))
}

func TestMarshalRefusesInvalid(t *testing.T) {
	e, err := Parse("x.json", []byte(briefExample))
	require.NoError(t, err)
	e.Measured[0] = Metrics{"ttft_p95": 3}
	_, err = e.Marshal()
	require.ErrorContains(t, err, `measured_ms["0"].ttft_p95: unknown metric`)
}

func TestModelConfigPath(t *testing.T) {
	abs, err := filepath.Abs(filepath.Join("testdata", "cfg.json"))
	require.NoError(t, err)
	for _, tt := range []struct {
		dir, config, want string
	}{
		{"bench", "model_configs/a.json", filepath.Join("bench", "model_configs", "a.json")},
		{"bench", abs, abs},
		{"", "model_configs/a.json", "model_configs/a.json"},
		{".", "a.json", "a.json"},
	} {
		e := &Experiment{Dir: tt.dir, ModelConfig: tt.config}
		if got := e.ModelConfigPath(); got != tt.want {
			t.Errorf("ModelConfigPath() with Dir %q, ModelConfig %q = %q, want %q", tt.dir, tt.config, got, tt.want)
		}
	}
}

func TestWriteAndLoad(t *testing.T) {
	e, err := Load(filepath.Join("testdata", "experiment", "qwen2.5-7b-general.json"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "out.json")
	require.NoError(t, e.Write(path))
	back, err := Load(path)
	require.NoError(t, err)
	back.Dir = e.Dir
	require.Equal(t, e, back)

	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")
}

func TestLoadAll(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	named := func(name string) string {
		return strings.Replace(briefExample, `"64-qwen2.5-7b-tp1"`, `"`+name+`"`, 1)
	}
	write("b.json", named("b"))
	write("a.json", named("a"))
	write("notes.txt", "not an experiment")
	write("model_configs/x.json", `{"hidden_size": 1}`) // a subdirectory is not searched
	single := write("single/c.json", named("c"))

	exps, err := LoadAll(dir, single)
	require.NoError(t, err)
	var names []string
	for _, e := range exps {
		names = append(names, e.Name)
	}
	require.Equal(t, []string{"a", "b", "c"}, names, "a directory's files sorted, then the file given")

	exps, err = LoadDir(dir)
	require.NoError(t, err)
	require.Len(t, exps, 2)

	t.Run("duplicate name", func(t *testing.T) {
		dup := write("dup/d.json", named("a"))
		_, err := LoadAll(dir, dup)
		require.ErrorContains(t, err, `d.json: name: "a" is also the name of`)
	})
	t.Run("every bad file reported", func(t *testing.T) {
		bad := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(bad, "x.json"), []byte(`{"name": 1}`), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(bad, "y.json"), []byte(`[`), 0o644))
		_, err := LoadAll(bad)
		require.ErrorContains(t, err, "x.json: name: got 1, want a string")
		require.ErrorContains(t, err, "y.json: line 1, column 2: not valid JSON")
	})
	t.Run("empty directory", func(t *testing.T) {
		empty := t.TempDir()
		_, err := LoadAll(empty)
		require.ErrorContains(t, err, "no *.json experiment files")
	})
	t.Run("missing path", func(t *testing.T) {
		_, err := LoadAll(filepath.Join(dir, "nope.json"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

// TestParseEngineOptions: vLLM's --kv-cache-dtype and
// --enable-expert-parallel are read when given, written back, and a KV
// dtype vLLM does not have is refused with the field named.
func TestParseEngineOptions(t *testing.T) {
	text := strings.Replace(briefExample, `"prefix_caching": true}`, `"prefix_caching": true, "kv_cache_dtype": "fp8", "enable_expert_parallel": true}`, 1)
	e, err := Parse("x.json", []byte(text))
	require.NoError(t, err)
	require.Equal(t, "fp8", e.Engine.KVCacheDtype)
	require.True(t, e.Engine.EnableExpertParallel)
	b, err := e.Marshal()
	require.NoError(t, err)
	back, err := Parse("x.json", b)
	require.NoError(t, err)
	require.Equal(t, e.Engine, back.Engine)

	bad := strings.Replace(briefExample, `"prefix_caching": true}`, `"prefix_caching": true, "kv_cache_dtype": "int4"}`, 1)
	_, err = Parse("x.json", []byte(bad))
	require.ErrorContains(t, err, "engine.kv_cache_dtype")
}

// TestWorkloadBounds: a stage so long, slow or busy that its replay's clock
// or memory would overflow is refused, naming the field.
func TestWorkloadBounds(t *testing.T) {
	for _, tc := range []struct{ stage, want string }{
		{`{"rate": 8, "duration_s": 1e12}`, "workload.stages[0].duration_s: got 1e+12, want at most"},
		{`{"rate": 1e-12, "duration_s": 600}`, "workload.stages[0].rate: got 1e-12, want at least"},
		{`{"rate": 1e6, "duration_s": 600}`, "sends 6e+08 requests; want at most 10000000"},
	} {
		text := strings.Replace(briefExample, `{"rate": 8, "duration_s": 600}`, tc.stage, 1)
		_, err := Parse("x.json", []byte(text))
		require.ErrorContains(t, err, tc.want)
	}
}
