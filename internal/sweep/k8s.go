package sweep

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// In the Job's pods: the ConfigMap is mounted at SpecDir, the results
// volume at ResultsDir.
const (
	SpecDir      = "/spec"
	ResultsDir   = "/results"
	SpecKey      = "sweep.yaml"
	ScenarioKey  = "scenario.yaml"
	CompletionIx = "JOB_COMPLETION_INDEX"
	// completionIndexAnnotation is where the Job controller records a
	// pod's index; the env var is filled from it, so that the command
	// works on clusters that do not inject JOB_COMPLETION_INDEX themselves.
	completionIndexAnnotation = "batch.kubernetes.io/job-completion-index"
)

// K8sOptions configure the emitted Job.
type K8sOptions struct {
	Name        string // the Job's; the ConfigMap is Name-spec. Default fleetdrill-sweep-<hash[:8]>
	Namespace   string // empty: kubectl's current namespace
	Image       string // must have fleetdrill on its PATH
	Shards      int    // completions
	Parallelism int    // pods at a time; 0: Shards
	VolumeClaim string // the PersistentVolumeClaim the shard files go to
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// K8sManifest builds the ConfigMap holding the spec (and the scenario, when
// it is a file) and the Indexed Job that runs one shard per completion
// index, and returns them as a v1 List in JSON, which kubectl apply -f
// accepts.
func K8sManifest(s *Spec, o K8sOptions) ([]byte, error) {
	if o.Name == "" {
		o.Name = "fleetdrill-sweep-" + s.Hash[:8]
	}
	if o.Parallelism == 0 {
		o.Parallelism = o.Shards
	}
	switch {
	case len(o.Name) > 52 || !dnsLabel.MatchString(o.Name):
		return nil, fmt.Errorf("sweep: --name %q: want a DNS label of at most 52 characters (lower-case letters, digits, -)", o.Name)
	case o.Image == "":
		return nil, fmt.Errorf("sweep: --image: want an image with fleetdrill on its PATH")
	case o.Shards < 1:
		return nil, fmt.Errorf("sweep: --shards %d: want >= 1", o.Shards)
	case o.Shards > s.Runs():
		return nil, fmt.Errorf("sweep: --shards %d: the sweep has only %d runs; want at most that many shards", o.Shards, s.Runs())
	case o.Parallelism < 1 || o.Parallelism > o.Shards:
		return nil, fmt.Errorf("sweep: --parallelism %d: want 1..%d (the shards)", o.Parallelism, o.Shards)
	case o.VolumeClaim == "" || !dnsLabel.MatchString(o.VolumeClaim):
		return nil, fmt.Errorf("sweep: --volume-claim %q: want the name of a PersistentVolumeClaim", o.VolumeClaim)
	}

	data := map[string]string{}
	spec := s.Source
	if !scenarios.IsLibraryName(s.Scenario) {
		// The scenario file travels in the ConfigMap too; the spec in the
		// ConfigMap names it there. The hash does not change: it covers
		// the scenario's bytes, not its path.
		var err error
		spec, err = withScenario(s.Source, ScenarioKey)
		if err != nil {
			return nil, err
		}
		data[ScenarioKey] = string(s.ScenarioData)
	}
	data[SpecKey] = string(spec)

	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: o.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "fleetdrill-sweep", "fleetdrill.io/spec-hash": s.Hash[:12]},
		}
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(o.Name + "-spec"),
		Data:       data,
	}
	indexed := batchv1.IndexedCompletion
	completions, parallelism := int32(o.Shards), int32(o.Parallelism)
	backoff := int32(1)
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: meta(o.Name),
		Spec: batchv1.JobSpec{
			CompletionMode:       &indexed,
			Completions:          &completions,
			Parallelism:          &parallelism,
			BackoffLimitPerIndex: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "fleetdrill-sweep"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:  "sweep",
						Image: o.Image,
						// No --shard: sweep run reads it from JOB_COMPLETION_INDEX.
						Command: []string{"fleetdrill", "sweep", "run", SpecDir + "/" + SpecKey,
							"--shards", strconv.Itoa(o.Shards), "--out", ResultsDir},
						Env: []corev1.EnvVar{{
							Name: CompletionIx,
							ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
								FieldPath: "metadata.annotations['" + completionIndexAnnotation + "']",
							}},
						}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "spec", MountPath: SpecDir, ReadOnly: true},
							{Name: "results", MountPath: ResultsDir},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "spec", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
						}}},
						{Name: "results", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
							ClaimName: o.VolumeClaim,
						}}},
					},
				},
			},
		},
	}
	list := &corev1.List{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"},
		Items:    []runtime.RawExtension{{Object: cm}, {Object: job}},
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// withScenario returns the spec with its scenario: field set to name.
func withScenario(src []byte, name string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "scenario" {
			root.Content[i+1].Value = name
			root.Content[i+1].Style = 0
		}
	}
	return yaml.Marshal(&doc)
}
