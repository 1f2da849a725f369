package benchmark

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: Parse never panics, fails only with a *ValidationError, and
// what it accepts writes (Marshal) to text that parses back to the same
// experiment. The seed corpus is the example experiments, the sim-to-real
// goldens, and testdata/fuzz/FuzzParse/, which holds inputs earlier fuzzing
// found. Run it with
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 30s ./internal/benchmark/
func FuzzParse(f *testing.F) {
	f.Add([]byte(briefExample))
	for _, pattern := range []string{"testdata/experiment/*.json", "testdata/simtoreal/*.json"} {
		files, _ := filepath.Glob(pattern)
		for _, name := range files {
			data, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Parse("fuzz.json", data)
		if err != nil {
			if e != nil {
				t.Fatalf("Parse returned an experiment and an error: %v", err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Parse error %T with no problems, want *ValidationError: %v", err, err)
			}
			return
		}
		out, err := e.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed experiment: %v", err)
		}
		again, err := Parse("printed.json", out)
		if err != nil {
			t.Fatalf("reparse of the written experiment: %v\nwritten:\n%s", err, out)
		}
		out2, err := again.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		// Equal text is equal experiments: Validate refuses NaN, and floats
		// are written in their shortest exact form.
		if string(out) != string(out2) {
			t.Fatalf("write-reparse changed the experiment:\nfirst:\n%s\nsecond:\n%s", out, out2)
		}
	})
}

// FuzzReaders: the readers of vLLM's and inference-perf's result files never
// panic, and what they accept passes the checks an experiment's figures get.
//
//	go test -run '^$' -fuzz FuzzReaders -fuzztime 30s ./internal/benchmark/
func FuzzReaders(f *testing.F) {
	for _, pattern := range []string{"testdata/vllm/*.json", "testdata/inference-perf/*.json"} {
		files, _ := filepath.Glob(pattern)
		for _, name := range files {
			data, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(`{"completed": 1, "burstiness": Infinity, "mean_ttft_ms": NaN, "request_rate": "inf"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, read := range map[string]func([]byte) (Metrics, StageInfo, error){
			"FromVLLMBenchServe": FromVLLMBenchServe,
			"FromInferencePerf":  FromInferencePerf,
		} {
			m, _, err := read(data)
			if err != nil {
				continue
			}
			var c checker
			c.metrics("", m)
			if len(m) == 0 || len(c.ps) > 0 {
				t.Fatalf("%s accepted figures that fail the experiment's checks: %v %v", name, m, c.ps)
			}
		}
	})
}
