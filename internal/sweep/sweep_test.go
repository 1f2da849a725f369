package sweep

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

const specPath = "testdata/sweep.yaml"

func mergedJSON(t *testing.T, r *Report) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, r))
	return b.Bytes()
}

// TestShardedEqualsUnsharded: 3 shards, each written to a file and merged
// from the directory, give byte for byte the report of a single shard.
func TestShardedEqualsUnsharded(t *testing.T) {
	s, err := Load(specPath)
	require.NoError(t, err)
	require.Equal(t, 15, s.Runs(), "1 + 2×2 points × 3 seeds")
	require.Equal(t, []uint64{42, 43, 44}, s.Seeds, "a count starts at the scenario's seed")

	one := t.TempDir()
	sh, err := RunShard(t.Context(), s, Options{Parallel: 2, Version: "test"})
	require.NoError(t, err)
	_, err = WriteShard(one, sh)
	require.NoError(t, err)
	whole, err := ReadDir(one)
	require.NoError(t, err)

	three := t.TempDir()
	for i := range 3 {
		sh, err := RunShard(t.Context(), s, Options{Shard: i, Shards: 3, Parallel: 1 + i%2, Version: "test"})
		require.NoError(t, err)
		require.Len(t, sh.Results, 5)
		path, err := WriteShard(three, sh)
		require.NoError(t, err)
		require.Equal(t, filepath.Join(three, ShardFileName(i, 3)), path)
	}
	merged, err := ReadDir(three)
	require.NoError(t, err)
	require.Equal(t, string(mergedJSON(t, whole)), string(mergedJSON(t, merged)))

	// Point then seed, in the spec's order; aggregates per point.
	require.Len(t, whole.Results, 15)
	for i, r := range whole.Results {
		require.Equal(t, i, r.Index)
		require.Equal(t, s.Points[i/3].Name, r.Point)
		require.Equal(t, s.Seeds[i%3], r.Seed)
	}
	require.Len(t, whole.Aggregates, 5)
	agg := whole.Aggregates[0]
	require.Equal(t, "baseline", agg.Point)
	var names []string
	for _, f := range agg.Figures {
		names = append(names, f.Name)
		require.Equal(t, 3, f.N)
		require.NotNil(t, f.CI95)
	}
	for _, want := range []string{"requests.arrived", "classes.interactive.ttft_s.p50", "classes.batch.e2e_s.p99",
		"classes.interactive.slo_attainment", "cost.total", "cost.per_successful_task", "expectations.failed"} {
		require.Contains(t, names, want)
	}
}

func TestGridExpansion(t *testing.T) {
	s, err := Load(specPath)
	require.NoError(t, err)
	var names []string
	for _, p := range s.Points {
		names = append(names, p.Name)
	}
	require.Equal(t, []string{
		"baseline",
		"knobs:policy.scheduler=fifo,pools[0].replicas=2",
		"knobs:policy.scheduler=fifo,pools[0].replicas=3",
		"knobs:policy.scheduler=priority,pools[0].replicas=2",
		"knobs:policy.scheduler=priority,pools[0].replicas=3",
	}, names)
	require.Equal(t, []string{"policy.scheduler=priority", "pools[0].replicas=3"}, s.Points[4].Sets)
}

func shardsOf(t *testing.T, s *Spec, n int) []*Shard {
	t.Helper()
	var out []*Shard
	for i := range n {
		sh, err := RunShard(t.Context(), s, Options{Shard: i, Shards: n})
		require.NoError(t, err)
		out = append(out, sh)
	}
	return out
}

func TestMergeRefuses(t *testing.T) {
	s, err := Load(specPath)
	require.NoError(t, err)
	shards := shardsOf(t, s, 3)

	dir := t.TempDir()
	for _, i := range []int{0, 2} {
		_, err := WriteShard(dir, shards[i])
		require.NoError(t, err)
	}
	_, err = ReadDir(dir)
	require.ErrorContains(t, err, "missing shard(s) 1 of 0..2 (shard-1-of-3.json)")

	_, err = ReadDir(t.TempDir())
	require.ErrorContains(t, err, "no shard files")

	other := *shards[1]
	other.SpecHash = strings.Repeat("0", 64)
	_, err = Merge([]*Shard{shards[0], &other, shards[2]}, nil)
	require.ErrorContains(t, err, "different sweeps")

	_, err = Merge([]*Shard{shards[0], shards[1], shards[1], shards[2]}, nil)
	require.ErrorContains(t, err, "shard 1 also in")

	two := shardsOf(t, s, 2)
	_, err = Merge([]*Shard{shards[0], two[1]}, nil)
	require.ErrorContains(t, err, "split 2 ways, but shard 0 of 3 3 ways")
}

func TestSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"missing", "sets: []\n", []string{"spec.yaml:1: scenario: missing", "points: missing", "seeds: missing"}},
		{"unknown field", "scenario: small.yaml\npoints: [{name: a, sets: []}]\nseeds: 2\nseed: 3\n", []string{"spec.yaml:4: seed: unknown field"}},
		{"bad seeds", "scenario: small.yaml\npoints: [{name: a, sets: []}]\nseeds: [1, x, 1]\n", []string{`spec.yaml:3: seeds[1]: "x": want an unsigned integer`, "seeds[2]: seed 1 given twice"}},
		{"zero seeds", "scenario: small.yaml\npoints: [{name: a, sets: []}]\nseeds: 0\n", []string{`spec.yaml:3: seeds: "0": want a count >= 1`}},
		{"duplicate names", "scenario: small.yaml\npoints:\n  - {name: a, sets: []}\n  - {name: a, sets: []}\nseeds: 1\n", []string{`spec.yaml:4: points[1].name: "a" is also point 0's name`}},
		{"sets and grid", "scenario: small.yaml\npoints:\n  - name: a\n    sets: [x=1]\n    grid: {x: [1]}\nseeds: 1\n", []string{"spec.yaml:3: points[0]: has both sets and grid"}},
		{"empty grid values", "scenario: small.yaml\npoints:\n  - grid:\n      duration: []\nseeds: 1\n", []string{"spec.yaml:4: points[0].grid.duration: want a non-empty list of values"}},
		{"seed set", "scenario: small.yaml\nsets: [seed=4]\npoints: [{name: a, sets: []}]\nseeds: 1\n", []string{"the sweep sets the seed itself"}},
		{"no scenario file", "scenario: nope.yaml\npoints: [{name: a, sets: []}]\nseeds: 1\n", []string{"spec.yaml:1: scenario: not a library scenario"}},
		{"bad point set", "scenario: small.yaml\npoints:\n  - {name: ok, sets: []}\n  - name: bad\n    sets:\n      - pools[0].replicas=many\nseeds: 1\n", []string{"spec.yaml:4: points[1] (bad): the scenario is invalid with its sets", "replicas"}},
		{"syntax", "scenario: [\n", []string{"spec.yaml:1: did not find expected node content"}},
		{"bad grid value", "scenario: small.yaml\npoints:\n  - grid:\n      duration: [1m, 2m]\n      pools[0].replicas: [1, 2, many]\nseeds: 1\n",
			[]string{"spec.yaml:3: points[2] (duration=1m,pools[0].replicas=many): the scenario is invalid with its sets"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(filepath.Join("testdata", "spec.yaml"), []byte(tc.spec))
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestGridCheckedParameterByParameter: a grid is checked when the spec
// loads one parameter at a time (every value once); a combination that is
// invalid only together is found when it runs, and names its point.
func TestGridCheckedParameterByParameter(t *testing.T) {
	spec := "scenario: small.yaml\nsets: [duration=1m]\npoints:\n  - grid:\n" +
		"      classes.interactive.slo.ttft: [1s, 40s]\n      classes.interactive.slo.e2e: [60s, 30s]\nseeds: 1\n"
	s, err := Parse(filepath.Join("testdata", "spec.yaml"), []byte(spec))
	require.NoError(t, err, "each value alone is valid")
	require.Equal(t, 4, s.Runs())
	_, err = RunShard(t.Context(), s, Options{})
	require.ErrorContains(t, err, "classes.interactive.slo.ttft=40s,classes.interactive.slo.e2e=30s")
	require.ErrorContains(t, err, "want <= slo.e2e")
}

// TestK8sManifest: the manifest decodes back into the API types, and the
// spec in its ConfigMap is the same sweep (same hash).
func TestK8sManifest(t *testing.T) {
	s, err := Load(specPath)
	require.NoError(t, err)
	b, err := K8sManifest(s, K8sOptions{Image: "registry.example/fleetdrill:v9", Shards: 4, Parallelism: 2, VolumeClaim: "sweep-results"})
	require.NoError(t, err)

	var list corev1.List
	require.NoError(t, json.Unmarshal(b, &list))
	require.Equal(t, "List", list.Kind)
	require.Len(t, list.Items, 2)
	var cm corev1.ConfigMap
	require.NoError(t, json.Unmarshal(list.Items[0].Raw, &cm))
	require.Equal(t, "ConfigMap", cm.Kind)
	var job batchv1.Job
	require.NoError(t, json.Unmarshal(list.Items[1].Raw, &job))
	require.Equal(t, "Job", job.Kind)
	require.Equal(t, "batch/v1", job.APIVersion)

	js := job.Spec
	require.NotNil(t, js.CompletionMode)
	require.Equal(t, batchv1.IndexedCompletion, *js.CompletionMode)
	require.Equal(t, int32(4), *js.Completions)
	require.Equal(t, int32(2), *js.Parallelism)
	pod := js.Template.Spec
	require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, "registry.example/fleetdrill:v9", c.Image)
	require.Equal(t, []string{"fleetdrill", "sweep", "run", "/spec/sweep.yaml", "--shards", "4", "--out", "/results"}, c.Command)
	require.NotContains(t, c.Command, "--shard", "the shard comes from JOB_COMPLETION_INDEX")
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "JOB_COMPLETION_INDEX" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "metadata.annotations['batch.kubernetes.io/job-completion-index']", c.Env[i].ValueFrom.FieldRef.FieldPath)

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	require.Equal(t, "/results", mounts["results"].MountPath)
	require.Equal(t, "/spec", mounts["spec"].MountPath)
	require.True(t, mounts["spec"].ReadOnly)
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	require.NotNil(t, vols["results"].PersistentVolumeClaim)
	require.Equal(t, "sweep-results", vols["results"].PersistentVolumeClaim.ClaimName)
	require.NotNil(t, vols["spec"].ConfigMap)
	require.Equal(t, cm.Name, vols["spec"].ConfigMap.Name)

	// The ConfigMap's files, laid out as the pod sees them, are the same sweep.
	dir := t.TempDir()
	for k, v := range cm.Data {
		require.NoError(t, os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644))
	}
	require.Contains(t, cm.Data, ScenarioKey)
	in, err := Load(filepath.Join(dir, SpecKey))
	require.NoError(t, err)
	require.Equal(t, s.Hash, in.Hash)

	_, err = K8sManifest(s, K8sOptions{Image: "x", Shards: 16, VolumeClaim: "v"})
	require.ErrorContains(t, err, "only 15 runs")
	_, err = K8sManifest(s, K8sOptions{Image: "x", Shards: 2, VolumeClaim: ""})
	require.ErrorContains(t, err, "--volume-claim")
}
