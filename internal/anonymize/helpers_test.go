package anonymize

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/trace"
)

// result is everything a run shows the world: the output, the log (the
// command's stderr), the text report (its stdout) and the JSON report.
type result struct {
	out, log, text, json []byte
	rep                  *Report
	err                  error
}

// all is every byte a run shows, for leak checks.
func (r result) all() [][]byte {
	b := [][]byte{r.out, r.log, r.text, r.json}
	if r.err != nil {
		b = append(b, []byte(r.err.Error()))
	}
	return b
}

type runOpts struct {
	jsonl   bool
	mapping Mapping
	cfg     Config
	rebase  bool
	skipBad bool

	maxDisorder time.Duration
}

// runBytes anonymizes data as the command would.
func runBytes(t testing.TB, data string, o runOpts) result {
	t.Helper()
	if o.cfg.Key.Len() == 0 {
		o.cfg.Key = testKey
	}
	if o.mapping.Time == "" {
		o.mapping = DefaultMapping()
	}
	format := "csv"
	if o.jsonl {
		format = "jsonl"
	}
	var out, log, text, js bytes.Buffer
	job := Job{
		Input: "in." + format, Format: format, Output: "out.jsonl",
		Open: func() (Source, error) {
			if o.jsonl {
				return NewJSONL(bytes.NewReader([]byte(data)), o.mapping)
			}
			return NewCSV(bytes.NewReader([]byte(data)), o.mapping, 0)
		},
		Config: o.cfg, Rebase: o.rebase, SkipBadRows: o.skipBad, Log: &log, MaxDisorder: o.maxDisorder,
	}
	w := trace.NewWriter(&out)
	rep, err := Run(context.Background(), job, w)
	require.NoError(t, w.Flush())
	r := result{out: out.Bytes(), log: log.Bytes(), rep: rep, err: err}
	if rep != nil {
		require.NoError(t, rep.WriteText(&text))
		require.NoError(t, rep.WriteJSON(&js))
		r.text, r.json = text.Bytes(), js.Bytes()
	}
	return r
}

// requireNoLeak fails if any of the blobs holds a canary, any substring of
// one at least 8 bytes long, or a raw id.
func requireNoLeak(t testing.TB, blobs [][]byte, canaries, ids []string) {
	t.Helper()
	for i, b := range blobs {
		if what := leak(b, canaries, ids); what != "" {
			t.Fatalf("blob %d leaks %s:\n%s", i, what, b)
		}
	}
}

// leak says what of the canaries and ids b holds; "" when nothing.
func leak(b []byte, canaries, ids []string) string {
	for _, c := range canaries {
		for n := 8; n <= len(c); n++ {
			for j := 0; j+n <= len(c); j++ {
				if sub := c[j : j+n]; bytes.Contains(b, []byte(sub)) {
					return fmt.Sprintf("%q of canary %q", sub, c)
				}
			}
		}
	}
	for _, id := range ids {
		if bytes.Contains(b, []byte(id)) {
			return fmt.Sprintf("raw id %q", id)
		}
	}
	return ""
}

func newTraceWriter(w io.Writer) *trace.Writer { return trace.NewWriter(w) }
