package gpu

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsInStep keeps docs/inventory.md in step with the code: every
// series is documented, and its example is what the fake H100 node prints.
func TestDocsInStep(t *testing.T) {
	doc, err := os.ReadFile("../../docs/inventory.md")
	require.NoError(t, err)
	for _, name := range []string{MetricInfo, MetricUtilization, MetricMemoryUsed, MetricMemoryTotal, MetricPower,
		MetricTemperature, MetricXIDErrors, MetricXIDWatching} {
		require.Contains(t, string(doc), "| `"+name+"` |", "docs/inventory.md does not document %s", name)
	}
	example, err := os.ReadFile("testdata/fake-h100.yaml")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(doc), "```yaml\n"+string(example)+"```\n"),
		"docs/inventory.md's example is not testdata/fake-h100.yaml; copy it over")
}
