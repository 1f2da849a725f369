package openmetrics

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// render runs a library scenario with sets, sampling every step, and
// writes its series.
func render(t testing.TB, name string, step time.Duration, sets ...string) ([]byte, *twin.Report) {
	t.Helper()
	sc, err := scenarios.LoadNamedWithSets(name, sets)
	require.NoError(t, err)
	m := &twin.Metrics{Step: step}
	rep, err := twin.Run(context.Background(), sc, twin.Options{Metrics: m})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, m, DefaultStart))
	return buf.Bytes(), rep
}

// A parsed file: the families in order, each with its type and samples.
type parsed struct {
	families []*pfamily
	byName   map[string]*pfamily
}

type pfamily struct {
	name, typ, help string
	samples         []psample
}

type psample struct {
	name   string // with its suffix
	labels map[string]string
	value  float64
	ts     float64 // seconds
}

// key is the sample's series: name and labels, sorted.
func (s psample) key(skip string) string {
	var b strings.Builder
	b.WriteString(s.name)
	for _, k := range slices.Sorted(mapsKeys(s.labels)) {
		if k != skip {
			fmt.Fprintf(&b, ",%s=%q", k, s.labels[k])
		}
	}
	return b.String()
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// parse reads OpenMetrics text strictly enough for the checks below: # HELP
// and # TYPE before a family's samples, samples `name{labels} value ts`,
// and # EOF last. (prometheus/common has no OpenMetrics parser; promtool,
// when present, is the real one: TestPromtoolBackfills.)
func parse(t *testing.T, data []byte) *parsed {
	t.Helper()
	p := &parsed{byName: map[string]*pfamily{}}
	require.True(t, bytes.HasSuffix(data, []byte("\n# EOF\n")), "the file ends with # EOF")
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	var cur *pfamily
	eof := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		require.False(t, eof, "line %d after # EOF", n)
		switch {
		case line == "# EOF":
			eof = true
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			require.Nil(t, p.byName[name], "line %d: family %s described twice", n, name)
			cur = &pfamily{name: name, help: help}
			p.byName[name] = cur
			p.families = append(p.families, cur)
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			require.NotNil(t, cur, "line %d: TYPE without HELP", n)
			require.Equal(t, cur.name, name, "line %d", n)
			require.Empty(t, cur.typ, "line %d: family %s typed twice", n, name)
			cur.typ = typ
		case strings.HasPrefix(line, "#"):
			t.Fatalf("line %d: unexpected comment %q", n, line)
		default:
			require.NotNil(t, cur, "line %d: sample before any family", n)
			require.NotEmpty(t, cur.typ, "line %d: sample before its family's TYPE", n)
			s := parseSample(t, n, line)
			suffixes := map[string][]string{"counter": {"_total"}, "gauge": {""}, "unknown": {""},
				"histogram": {"_bucket", "_sum", "_count"}}[cur.typ]
			require.Contains(t, suffixes, strings.TrimPrefix(s.name, cur.name), "line %d: sample %s in family %s (%s)", n, s.name, cur.name, cur.typ)
			cur.samples = append(cur.samples, s)
		}
	}
	require.NoError(t, sc.Err())
	require.True(t, eof)
	return p
}

func parseSample(t *testing.T, n int, line string) psample {
	s := psample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	require.Positive(t, i, "line %d", n)
	s.name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for rest[0] != '}' {
			eq := strings.IndexByte(rest, '=')
			require.Positive(t, eq, "line %d", n)
			name := rest[:eq]
			require.Equal(t, byte('"'), rest[eq+1], "line %d", n)
			var v strings.Builder
			j := eq + 2
			for ; rest[j] != '"'; j++ {
				if rest[j] == '\\' {
					j++
				}
				v.WriteByte(rest[j])
			}
			s.labels[name] = v.String()
			rest = rest[j+1:]
			if rest[0] == ',' {
				rest = rest[1:]
			}
		}
		rest = rest[1:]
	}
	f := strings.Fields(rest)
	require.Len(t, f, 2, "line %d: value and timestamp", n)
	var err error
	s.value, err = strconv.ParseFloat(f[0], 64)
	require.NoError(t, err, "line %d", n)
	s.ts, err = strconv.ParseFloat(f[1], 64)
	require.NoError(t, err, "line %d", n)
	return s
}

// checkStructure checks what Prometheus relies on: known families and
// labels, each series contiguous with strictly increasing timestamps,
// counters that never go down, cumulative histogram buckets whose +Inf is
// the count.
func checkStructure(t *testing.T, p *parsed, first, last float64) {
	t.Helper()
	sigs := map[string]signals.Signal{}
	for _, s := range signals.All {
		sigs[s.Name] = s
	}
	for _, f := range p.families {
		full := f.name
		if f.typ == "counter" {
			full += "_total"
		}
		sig, ok := sigs[full]
		require.True(t, ok, "family %s is in the catalogue", full)
		want := map[signals.Type]string{signals.Counter: "counter", signals.Gauge: "gauge", signals.Histogram: "histogram"}[sig.Type]
		if sig.Type == signals.Counter && !strings.HasSuffix(sig.Name, "_total") {
			want = "unknown" // as client_golang writes a counter without _total
		}
		require.Equal(t, want, f.typ, "family %s", f.name)
		require.NotEmpty(t, f.samples, "family %s", f.name)

		done := map[string]bool{}
		prev := ""
		lastTS := map[string]float64{}
		lastV := map[string]float64{}
		type point struct {
			buckets map[string]float64
			count   float64
		}
		points := map[string]*point{} // histogram series@ts
		for _, s := range f.samples {
			names := slices.Sorted(mapsKeys(s.labels))
			wantNames := slices.Clone(sig.Labels)
			if strings.HasSuffix(s.name, "_bucket") {
				wantNames = append(wantNames, "le")
			}
			slices.Sort(wantNames)
			require.Equal(t, wantNames, names, "%s label names", s.name)
			// A series' points are contiguous; a histogram's point is
			// its buckets, sum and count together.
			mk := psample{name: f.name, labels: s.labels}.key("le")
			if mk != prev {
				require.False(t, done[mk], "series %s interleaved with another", mk)
				done[prev] = true
				prev = mk
			}
			k := s.key("")
			if ts, ok := lastTS[k]; ok {
				require.Greater(t, s.ts, ts, "%s: timestamps increase", k)
			}
			require.GreaterOrEqual(t, s.ts, first, "%s", k)
			require.LessOrEqual(t, s.ts, last, "%s", k)
			if f.typ != "gauge" {
				require.GreaterOrEqual(t, s.value, lastV[k], "%s at %v: cumulative", k, s.ts)
			}
			lastTS[k], lastV[k] = s.ts, s.value
			if f.typ == "histogram" {
				pk := fmt.Sprintf("%s@%v", psample{name: f.name, labels: s.labels}.key("le"), s.ts)
				pt := points[pk]
				if pt == nil {
					pt = &point{buckets: map[string]float64{}, count: -1}
					points[pk] = pt
				}
				switch {
				case strings.HasSuffix(s.name, "_bucket"):
					pt.buckets[s.labels["le"]] = s.value
				case strings.HasSuffix(s.name, "_count"):
					pt.count = s.value
				}
			}
		}
		for pk, pt := range points {
			bounds := sig.Name == signals.TPOT.Name
			want := signals.LatencyBuckets
			if bounds {
				want = signals.TokenBuckets
			}
			require.Len(t, pt.buckets, len(want)+1, "%s: every bucket", pk)
			prevN := 0.0
			for _, ub := range want {
				n, ok := pt.buckets[formatLE(ub)]
				require.True(t, ok, "%s: bucket le=%v", pk, ub)
				require.GreaterOrEqual(t, n, prevN, "%s: buckets are cumulative", pk)
				prevN = n
			}
			inf := pt.buckets["+Inf"]
			require.GreaterOrEqual(t, inf, prevN, "%s", pk)
			require.Equal(t, pt.count, inf, "%s: _count is the +Inf bucket", pk)
		}
	}
}

// formatLE is how the encoder writes a bucket bound (OpenMetrics wants a
// float: 1.0, not 1).
func formatLE(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// names are a counter's family name (without _total, as # TYPE writes it)
// and sample name; both are the signal's name for other types.
func names(sig signals.Signal) (family, sample string) {
	if sig.Type == signals.Counter {
		return strings.TrimSuffix(sig.Name, "_total"), sig.Name
	}
	return sig.Name, sig.Name
}

// lastSum adds up, at the last timestamp, the samples of name whose labels
// match.
func lastSum(p *parsed, family, name string, match map[string]string) float64 {
	f := p.byName[family]
	if f == nil {
		return 0
	}
	last := map[string]psample{}
	for _, s := range f.samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && s.labels[k] == v
		}
		if ok {
			last[s.key("")] = s
		}
	}
	var v float64
	for _, s := range last {
		v += s.value
	}
	return v
}

func TestWriteParsesBackAndAddsUpToTheReport(t *testing.T) {
	for _, tt := range []struct {
		name string
		sets []string
	}{
		{"default", []string{"warmup=0s", "duration=10m"}},
		// Rejections, deferrals, time-outs and fallbacks to a CPU pool.
		{"gameday-cpu-fallback", []string{"warmup=0s"}},
		// A canary rolled back, with shadow copies: the canary series.
		{"gameday-canary-rollback", []string{"warmup=0s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, rep := render(t, tt.name, 15*time.Second, tt.sets...)
			p := parse(t, data)
			start := float64(DefaultStart.Unix())
			end := start + rep.SimDurationS
			checkStructure(t, p, start, end)

			// Families in the catalogue's order.
			var order []string
			for _, f := range p.families {
				order = append(order, f.name)
			}
			var want []string
			for _, s := range signals.All {
				if p.byName[strings.TrimSuffix(s.Name, "_total")] != nil {
					want = append(want, strings.TrimSuffix(s.Name, "_total"))
				}
			}
			require.Equal(t, want, order)

			// Every series ends at the end of the run.
			for _, f := range p.families {
				for _, s := range f.samples[len(f.samples)-1:] {
					require.Equal(t, end, s.ts, "%s", s.name)
				}
			}

			c := rep.Requests
			for outcome, n := range map[string]uint64{"completed": c.Completed, "rejected": c.Rejected,
				"failed": c.Failed, "timed_out": c.TimedOut} {
				require.Equal(t, float64(n), lastSum(p, "fleetdrill_requests", "fleetdrill_requests_total", map[string]string{"outcome": outcome}), outcome)
			}
			require.Equal(t, float64(c.Completed), lastSum(p, signals.E2E.Name, signals.E2E.Name+"_count", nil))
			require.Equal(t, float64(c.Completed), lastSum(p, signals.TTFT.Name, signals.TTFT.Name+"_count", nil))
			fam, name := names(signals.FallbacksOK)
			require.Equal(t, float64(c.Fallbacks), lastSum(p, fam, name, nil))
			for reason, n := range rep.Rejections {
				require.Equal(t, float64(n), lastSum(p, "fleetdrill_rejected_requests", "fleetdrill_rejected_requests_total", map[string]string{"reason": reason}), reason)
			}
			for name, pool := range rep.Pools {
				require.Equal(t, float64(pool.ColdStarts), lastSum(p, "fleetdrill_cold_starts", "fleetdrill_cold_starts_total", map[string]string{"pool": name}), name)
			}
			if tt.name == "gameday-canary-rollback" {
				require.NotEmpty(t, rep.Canaries)
			}
			for name, c := range rep.Canaries {
				require.NotNil(t, p.byName[signals.CanaryShare.Name], "the canary share is written")
				fam, sample := names(signals.CanaryDecisions)
				require.Equal(t, float64(len(c.Decisions)), lastSum(p, fam, sample, map[string]string{"canary": name}), name)
				fam, sample = names(signals.ShadowRequests)
				require.Equal(t, float64(c.Shadow.Sent-c.Shadow.InFlightAtEnd), lastSum(p, fam, sample, map[string]string{"canary": name}), name)
			}
		})
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	a, _ := render(t, "gameday-regional-outage", 15*time.Second)
	b, _ := render(t, "gameday-regional-outage", 15*time.Second)
	require.True(t, bytes.Equal(a, b), "the same scenario and seed give the same file")
	c, _ := render(t, "gameday-regional-outage", 15*time.Second, "seed=7")
	require.False(t, bytes.Equal(a, c), "another seed gives another file")
}

func TestWriteRefusesSamplesInOneMillisecond(t *testing.T) {
	m := &twin.Metrics{Times: []time.Duration{0, 100 * time.Microsecond}}
	err := Write(&bytes.Buffer{}, m, DefaultStart)
	require.ErrorContains(t, err, "share a millisecond")
}

func TestWriteTimestampsFromStart(t *testing.T) {
	data, _ := render(t, "default", time.Minute, "duration=2m", "warmup=0s", "drain=1m")
	start := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=2m", "warmup=0s", "drain=1m"})
	require.NoError(t, err)
	m := &twin.Metrics{Step: time.Minute}
	_, err = twin.Run(context.Background(), sc, twin.Options{Metrics: m})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, m, start))
	shift := start.Sub(DefaultStart).Seconds()
	pa, pb := parse(t, data), parse(t, buf.Bytes())
	sa, sb := pa.byName["fleetdrill_saturation_ratio"].samples, pb.byName["fleetdrill_saturation_ratio"].samples
	require.Len(t, sb, len(sa))
	for i := range sa {
		require.Equal(t, sa[i].value, sb[i].value)
		require.InDelta(t, sa[i].ts+shift, sb[i].ts, 1e-3)
	}
	require.Equal(t, float64(start.Unix()), sb[0].ts)
}

// promtool is the reference parser: Debian's prometheus package (2.42)
// ships it. CI does not install it; the test runs where it is on PATH.
func TestPromtoolBackfills(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not on PATH (Debian: apt-get install prometheus); skipping the backfill check")
	}
	data, _ := render(t, "gameday-quota-exhaustion", 15*time.Second)
	dir := t.TempDir()
	file := filepath.Join(dir, "run.om")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", file, filepath.Join(dir, "data")).CombinedOutput()
	require.NoError(t, err, "promtool: %s", out)
	list, err := exec.Command(promtool, "tsdb", "list", filepath.Join(dir, "data")).CombinedOutput()
	require.NoError(t, err, "promtool tsdb list: %s", list)
	// One line of header, then a line per block; the samples column adds
	// up to every sample line of the file.
	lines := strings.Split(strings.TrimSpace(string(list)), "\n")
	require.Greater(t, len(lines), 1, "%s", list)
	var samples int
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		n, err := strconv.Atoi(f[4])
		require.NoError(t, err, "%s", l)
		samples += n
	}
	want := 0
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			want++
		}
	}
	require.Equal(t, want, samples, "every sample backfilled")
}
