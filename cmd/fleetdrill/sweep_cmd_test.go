package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

const sweepSpec = "../../internal/sweep/testdata/sweep.yaml"

// TestSweepShardedMerge: through the CLI, 3 shards (the index from
// $JOB_COMPLETION_INDEX, as in an Indexed Job) merge into the JSON an
// unsharded run merges into, byte for byte; a missing shard is refused.
func TestSweepShardedMerge(t *testing.T) {
	one, three := t.TempDir(), t.TempDir()
	code, out, errs := runCLI(t, "sweep", "run", sweepSpec, "--out", one)
	require.Equal(t, exitOK, code, errs)
	require.Contains(t, out, "point baseline")
	require.FileExists(t, filepath.Join(one, "shard-0-of-1.json"))

	for i := range 3 {
		t.Setenv("JOB_COMPLETION_INDEX", strconv.Itoa(i))
		code, _, errs := runCLI(t, "sweep", "run", sweepSpec, "--shards", "3", "--out", three, "--parallel", "2")
		require.Equal(t, exitOK, code, errs)
		require.Contains(t, errs, "shard "+strconv.Itoa(i)+" of 3: 5 runs")
	}
	a, b := filepath.Join(t.TempDir(), "a.json"), filepath.Join(t.TempDir(), "b.json")
	code, _, errs = runCLI(t, "sweep", "merge", one, "--json", a)
	require.Equal(t, exitOK, code, errs)
	code, _, errs = runCLI(t, "sweep", "merge", three, "--json", b)
	require.Equal(t, exitOK, code, errs)
	ab, err := os.ReadFile(a)
	require.NoError(t, err)
	bb, err := os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, string(ab), string(bb))

	require.NoError(t, os.Remove(filepath.Join(three, "shard-2-of-3.json")))
	code, _, errs = runCLI(t, "sweep", "merge", three)
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "missing shard(s) 2 of 0..2")

	t.Setenv("JOB_COMPLETION_INDEX", "3")
	code, _, errs = runCLI(t, "sweep", "run", sweepSpec, "--shards", "3", "--out", three)
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "want 0 <= shard < shards")
}

func TestSweepEmitK8s(t *testing.T) {
	code, out, errs := runCLI(t, "sweep", sweepSpec, "--emit", "k8s", "--image", "img:1", "--shards", "5", "--volume-claim", "res")
	require.Equal(t, exitOK, code, errs)
	var list corev1.List
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list.Items, 2)
	var job batchv1.Job
	require.NoError(t, json.Unmarshal(list.Items[1].Raw, &job))
	require.Equal(t, batchv1.IndexedCompletion, *job.Spec.CompletionMode)
	require.Equal(t, int32(5), *job.Spec.Completions)
	require.Equal(t, "img:1", job.Spec.Template.Spec.Containers[0].Image)
	require.Equal(t, "res", job.Spec.Template.Spec.Volumes[1].PersistentVolumeClaim.ClaimName)

	code, _, errs = runCLI(t, "sweep", sweepSpec, "--emit", "helm")
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, `--emit "helm": want k8s`)
}

func TestSweepInvalidSpec(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(path, []byte("scenario: small\npoints: []\nseeds: -1\n"), 0o644))
	code, _, errs := runCLI(t, "sweep", "run", path)
	require.Equal(t, exitInvalid, code)
	require.Contains(t, errs, "bad.yaml:3: seeds")
}
