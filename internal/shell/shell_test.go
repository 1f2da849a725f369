package shell

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"duration=20m", "duration=20m"},
		{"pools[0].replicas=2", "'pools[0].replicas=2'"},
		{`expect=["a < 2s"]`, `'expect=["a < 2s"]'`},
		{"it's", `'it'\''s'`},
		{"", "''"},
		{"1.5@2027-03-01", "1.5@2027-03-01"},
	} {
		require.Equal(t, tc.want, Quote(tc.in), tc.in)
	}
}

// TestQuoteRoundTrip: a real shell reads each quoted word back as it was.
func TestQuoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	for _, s := range []string{"a b", `x'y"z`, "$HOME", "`id`", "*", "a\nb", "!#~;&|<>(){}[]", "\\"} {
		out, err := exec.Command(sh, "-c", "printf %s "+Quote(s)).Output()
		require.NoError(t, err, s)
		require.Equal(t, s, string(out))
	}
}

func TestLine(t *testing.T) {
	require.Equal(t, `fleetdrill run default --set 'faults=["a b"]'`, Line("fleetdrill", "run", "default", "--set", `faults=["a b"]`))
}
