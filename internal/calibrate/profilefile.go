package calibrate

import (
	"bytes"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// ProfileFile is what `fleetdrill calibrate` writes and `fleetdrill
// fidelity --profile` reads: the profile, ready to paste under a pool's
// profiles.<model> in a scenario, with where it was measured (so fidelity
// can transfer it to another GPU or model) and how well it fits.
type ProfileFile struct {
	Profile      scenarios.Profile `yaml:"profile"`
	CalibratedOn Calibration       `yaml:"calibrated_on"`
	Fit          FitSummary        `yaml:"fit"`
}

// Calibration records the measured run a profile came from.
type Calibration struct {
	Run     string `yaml:"run"`
	GPU     string `yaml:"gpu"`
	Model   string `yaml:"model"`
	TP      int    `yaml:"tp"`
	DP      int    `yaml:"dp"`
	MaxSeqs int    `yaml:"max_seqs"` // the engine's max_num_seqs: a pool's max_batch
	Vllm    string `yaml:"vllm"`
	// KVSource says whether profile.kv_tokens was measured or derived.
	KVSource string `yaml:"kv_source,omitempty"`
}

// FitSummary is the fit's quality, relative to measured durations.
type FitSummary struct {
	Method            string   `yaml:"method"`
	DecodeIntervals   int      `yaml:"decode_intervals"`
	PrefillIntervals  int      `yaml:"prefill_intervals"`
	LinearDecodeRMS   float64  `yaml:"linear_decode_rms_rel"`
	LinearPrefillRMS  float64  `yaml:"linear_prefill_rms_rel"`
	PinnedAtZero      []string `yaml:"pinned_at_zero,omitempty"`
	ReplayLoss        float64  `yaml:"replay_loss,omitempty"`
	InSampleE2EMaxErr float64  `yaml:"in_sample_e2e_p50_p95_max_rel_err"`
}

// Engine is the run's engine as the calibration recorded it.
func (c Calibration) Engine() Engine {
	return Engine{GPU: c.GPU, Model: c.Model, TP: c.TP, DP: c.DP, MaxSeqs: c.MaxSeqs, Version: c.Vllm}
}

// WriteProfileFile writes pf as YAML with a header comment.
func WriteProfileFile(path string, pf *ProfileFile) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# fleetdrill calibrate %s: the step-time profile of %s on %s (vLLM %s).\n", pf.CalibratedOn.Run,
		pf.CalibratedOn.Model, pf.CalibratedOn.GPU, pf.CalibratedOn.Vllm)
	b.WriteString("# Paste `profile` under a pool's profiles.<model> in a scenario (with max_batch: max_seqs);\n")
	b.WriteString("# fleetdrill fidelity RUN --profile THIS-FILE checks it, transferring it to another GPU or model.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(pf); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// ReadProfileFile reads a profile file, strictly.
func ReadProfileFile(path string) (*ProfileFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var pf ProfileFile
	if err := dec.Decode(&pf); err != nil {
		return nil, fmt.Errorf("calibrate: %s: %w", path, err)
	}
	p := pf.Profile
	if p.StepBaseUS <= 0 || p.PerSeqUS < 0 || p.PerPrefillTokenUS < 0 || p.PerKVTokenUS < 0 {
		return nil, fmt.Errorf("calibrate: %s: profile.step_base_us must be > 0 and the other costs >= 0", path)
	}
	return &pf, nil
}

// Latency returns the file's profile in the form the twin uses.
func (pf *ProfileFile) Latency() latency.Profile { return FromYAML(pf.Profile) }

// LatencyProfile is the twin's profile type, for callers that do not import
// twin/latency themselves.
type LatencyProfile = latency.Profile
