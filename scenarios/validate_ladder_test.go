package scenarios

import (
	"strings"
	"testing"
)

// Two degradation steps may not share a name: reports and the gateway's
// series are keyed by it.
func TestDegradationStepNamesAreUnique(t *testing.T) {
	data, err := Source("default")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseWithSets("default.yaml", data, []string{`policy.degradation=[` +
		`{name: shed, action: shed-batch, class: batch, trigger: {queue_wait: 5s}},` +
		`{name: shed, action: cap-output, max_output_tokens: 64, trigger: {queue_wait: 10s}}]`})
	if err == nil {
		t.Fatal("two steps named shed were accepted")
	}
	want := `policy.degradation[1].name: got "shed", used twice; first at policy.degradation[0]: give each step its own name`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q\nlacks %q", err, want)
	}
}
