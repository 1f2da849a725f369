package openmetrics

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/twin"
)

// DefaultStart is the instant simulated time 0 is written at unless the
// caller picks another: fixed, so that files are reproducible, and in the
// past, so that backfilling never collides with a live server's head block.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Write writes every series of m to w as OpenMetrics text, simulated time t
// at timestamp start + t (milliseconds), and the closing # EOF. Families
// come in the catalogue's order, series sorted by label values, each
// series' samples in time order; families without series are left out.
//
// Counters are written as client_golang's encoder writes them (# TYPE
// names the family without _total, samples carry it), so the stored series
// have the catalogue's names, as when Prometheus scrapes the gateway; a
// counter named without _total would be typed unknown, as client_golang
// serves it.
func Write(w io.Writer, m *twin.Metrics, start time.Time) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	ts := make([]int64, len(m.Times))
	base := start.UnixMilli()
	for i, t := range m.Times {
		ts[i] = base + t.Milliseconds()
		if i > 0 && ts[i] <= ts[i-1] {
			return fmt.Errorf("openmetrics: samples at %v and %v share a millisecond; sample less often", m.Times[i-1], t)
		}
	}
	var chunk bytes.Buffer
	for _, f := range m.Families {
		for si, s := range f.Series {
			mf := family(f, s, ts)
			if si == 0 {
				// The first series carries the family's HELP and TYPE.
				if _, err := expfmt.MetricFamilyToOpenMetrics(bw, mf); err != nil {
					return fmt.Errorf("openmetrics: %s: %w", f.Signal.Name, err)
				}
				continue
			}
			// Later series of the family are written one at a time, to
			// bound memory, without the metadata line the encoder
			// always writes (HELP is left out, TYPE is cut).
			mf.Help = nil
			chunk.Reset()
			if _, err := expfmt.MetricFamilyToOpenMetrics(&chunk, mf); err != nil {
				return fmt.Errorf("openmetrics: %s: %w", f.Signal.Name, err)
			}
			b := chunk.Bytes()
			if !bytes.HasPrefix(b, []byte("# TYPE ")) {
				return fmt.Errorf("openmetrics: %s: unexpected encoder output", f.Signal.Name)
			}
			if _, err := bw.Write(b[bytes.IndexByte(b, '\n')+1:]); err != nil {
				return err
			}
		}
	}
	if _, err := expfmt.FinalizeOpenMetrics(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// family builds the metric family of one series: a metric per sample.
func family(f *twin.Family, s *twin.Series, ts []int64) *dto.MetricFamily {
	sig := f.Signal
	mf := &dto.MetricFamily{Name: ptr(sig.Name), Help: ptr(sig.Help), Type: typeOf(sig.Type).Enum()}
	labels := make([]*dto.LabelPair, len(sig.Labels))
	for i, name := range sig.Labels {
		labels[i] = &dto.LabelPair{Name: ptr(name), Value: ptr(s.Labels[i])}
	}
	// client_golang sorts label pairs by name; so do we.
	slices.SortFunc(labels, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	mf.Metric = make([]*dto.Metric, 0, s.Points())
	for i := range s.Points() {
		met := &dto.Metric{Label: labels, TimestampMs: ptr(ts[s.First+i])}
		switch sig.Type {
		case signals.Counter:
			met.Counter = &dto.Counter{Value: ptr(s.Values[i])}
		case signals.Gauge:
			met.Gauge = &dto.Gauge{Value: ptr(s.Values[i])}
		case signals.Histogram:
			p := &s.Hist[i]
			h := &dto.Histogram{SampleCount: ptr(p.Count), SampleSum: ptr(p.Sum),
				Bucket: make([]*dto.Bucket, 0, len(f.Buckets)+1)}
			for b, ub := range f.Buckets {
				h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: ptr(ub), CumulativeCount: ptr(p.Buckets[b])})
			}
			h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: ptr(math.Inf(1)), CumulativeCount: ptr(p.Count)})
			met.Histogram = h
		}
		mf.Metric = append(mf.Metric, met)
	}
	return mf
}

func typeOf(t signals.Type) dto.MetricType {
	switch t {
	case signals.Counter:
		return dto.MetricType_COUNTER
	case signals.Histogram:
		return dto.MetricType_HISTOGRAM
	}
	return dto.MetricType_GAUGE
}

func ptr[T any](v T) *T { return &v }
