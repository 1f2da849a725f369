package calibrate

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// CoeffsFile is what `fleetdrill calibrate --benchmark` writes and
// `fleetdrill fidelity --benchmark --profile` reads: the physical step-time
// model's coefficients for one GPU family, the experiments they were fitted
// on, and how well.
type CoeffsFile struct {
	Family       string         `yaml:"family"`
	Engine       string         `yaml:"engine,omitempty"`
	Coefficients latency.Coeffs `yaml:"coefficients"`
	CalibratedOn []string       `yaml:"calibrated_on"`
	Fit          CoeffsFit      `yaml:"fit"`
}

// CoeffsFit is the fit's method and in-sample quality.
type CoeffsFit struct {
	Method      string   `yaml:"method"`
	Free        []string `yaml:"free,omitempty"`
	Evaluations int      `yaml:"evaluations"`
	Loss        float64  `yaml:"loss_rms_log_error"`
	// InSample is the median absolute error per metric over the
	// experiments it was fitted on (whole run): in-sample, not a
	// prediction.
	InSample map[string]float64 `yaml:"in_sample_median_abs_error"`
	BackedUp int                `yaml:"backed_up"`
	// CrossValidated is the median absolute error per metric when each
	// experiment is predicted by coefficients fitted without its group
	// (CVBy: model or experiment; calibrate --cv): out of sample.
	CrossValidated map[string]float64 `yaml:"cross_validated_median_abs_error,omitempty"`
	CVBy           string             `yaml:"cv_by,omitempty"`
}

// WriteCoeffsFile writes f as YAML with a header comment.
func WriteCoeffsFile(path string, f *CoeffsFile) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# fleetdrill calibrate --benchmark: step-time coefficients for the %s family, fitted jointly on %d experiments.\n",
		f.Family, len(f.CalibratedOn))
	b.WriteString("# fleetdrill fidelity --benchmark FILE... --profile THIS-FILE scores them on other experiments.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// ReadCoeffsFile reads a coefficients file, strictly, and checks every
// coefficient's range.
func ReadCoeffsFile(path string) (*CoeffsFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f CoeffsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("calibrate: %s: %w (want a file written by fleetdrill calibrate --benchmark --out)", path, err)
	}
	if err := f.Coefficients.Check(); err != nil {
		return nil, fmt.Errorf("calibrate: %s: coefficients: %w", path, err)
	}
	return &f, nil
}

// IsCoeffsFile reports whether path holds benchmark coefficients rather
// than a step-time profile (it has a top-level coefficients key).
func IsCoeffsFile(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "coefficients:") {
			return true
		}
	}
	return false
}
