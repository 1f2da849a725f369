package trace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/traces"
)

// sharedTraces is where the staged public traces live, relative to this
// package; the figures below are the ones shared/traces/README.md publishes.
const sharedTraces = "../../../shared/traces"

// sharedFile returns the path of a staged trace: the file in the shared
// folder beside the repository, else the binary's embedded copy of the same
// bytes (embedded:REL, package traces), else the test skips (a checkout
// without the shared folder, for a trace the binary does not carry).
func sharedFile(t *testing.T, rel string) string {
	t.Helper()
	path := filepath.Join(sharedTraces, rel)
	if _, err := os.Stat(path); err != nil {
		if traces.Has(rel) {
			return traces.Scheme + rel
		}
		t.Skipf("staged trace %s not found (%v) and not embedded: these tests need the shared/traces folder next to the repository", path, err)
	}
	return path
}

// requireRounded checks got against a figure as the README prints it
// ("2,047.848", "36.64"): rounded to the same number of decimals.
func requireRounded(t *testing.T, want string, got float64, what string) {
	t.Helper()
	want = strings.ReplaceAll(want, ",", "")
	decimals := 0
	if i := strings.IndexByte(want, '.'); i >= 0 {
		decimals = len(want) - i - 1
	}
	require.Equal(t, want, strconv.FormatFloat(got, 'f', decimals, 64), "%s: got %v", what, got)
}

type readmeDist struct {
	mean          string
	sum, min, max int64
	p50, p99      int64
}

func requireDist(t *testing.T, want readmeDist, got Dist, what string) {
	t.Helper()
	requireRounded(t, want.mean, got.Mean, what+" mean")
	require.Equal(t, want.sum, got.Sum, what+" sum")
	if want.min >= 0 { // -1: the README does not give it
		require.Equal(t, want.min, got.Min, what+" min")
	}
	require.Equal(t, want.max, got.Max, what+" max")
	require.Equal(t, want.p50, got.P50, what+" p50 (nearest rank)")
	require.Equal(t, want.p99, got.P99, what+" p99 (nearest rank)")
}

func perMinute(s string) []int {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			panic(err)
		}
		out = append(out, n)
	}
	return out
}

// TestStatsMatchREADME checks every figure shared/traces/README.md lists for
// T1–T4 (and the request figures of T11).
func TestStatsMatchREADME(t *testing.T) {
	type blocks struct {
		total, distinct int64
		seenBefore      string // percent
		prefixHit       string // percent
		perRequest      readmeDist
	}
	tests := []struct {
		name, file, format string
		requests           int
		start, end         string // wall clock, absolute formats only
		duration           string // seconds
		rate               string
		input, output      readmeDist
		fixed              int
		fixedAt            string // wall clock "15:04", or seconds from t=0
		sliding            int
		slidingAt          string // wall clock, or seconds from t=0
		perMinute          string
		blocks             *blocks
	}{
		{
			name: "T1 azure code", file: "azure_llm_2023/AzureLLMInferenceTrace_code.csv", format: FormatAzure,
			requests: 8819, start: "2023-11-16 18:17:03.9799600", end: "2023-11-16 19:14:19.9280160",
			duration: "3435.948056", rate: "2.56669",
			input:  readmeDist{mean: "2,047.848", sum: 18059974, min: 3, max: 7437, p50: 1469, p99: 7436},
			output: readmeDist{mean: "27.883", sum: 245896, min: 6, max: 1899, p50: 13, p99: 252},
			fixed:  585, fixedAt: "18:31", sliding: 723, slidingAt: "18:26:32.9976100",
			perMinute: "63,0,0,531,166,151,15,42,38,476,403,81,0,0,585,346,0,8,336,348,155,78,274,462,264,39,128,111,315,325,118,169,91,345,158,0,322,57,300,191,0,1,225,252,99,0,0,32,0,0,0,97,212,22,0,137,14,237",
		},
		{
			name: "T2 azure conv", file: "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", format: FormatAzure,
			requests: 19366, start: "2023-11-16 18:15:46.6805900", end: "2023-11-16 19:14:08.4025270",
			duration: "3501.721937", rate: "5.53042",
			input:  readmeDist{mean: "1,154.697", sum: 22361870, min: 2, max: 14050, p50: 1020, p99: 4142},
			output: readmeDist{mean: "211.126", sum: 4088665, min: 7, max: 1000, p50: 129, p99: 601},
			fixed:  502, fixedAt: "18:43", sliding: 522, slidingAt: "18:46:29.5587160",
			perMinute: "21,236,265,347,328,321,256,267,289,308,294,305,304,337,326,277,274,290,315,355,339,352,360,406,406,394,380,433,502,467,435,478,489,462,379,409,455,432,320,314,321,344,353,328,333,348,375,299,246,236,248,273,268,272,244,242,258,243,201,7",
		},
		{
			name: "T3 mooncake conversation", file: "mooncake_fast25/conversation_trace.jsonl", format: FormatMooncake,
			requests: 12031, duration: "3536.999", rate: "3.40147",
			input:  readmeDist{mean: "12,035.061", sum: 144793823, min: 891, max: 126195, p50: 6909, p99: 85401},
			output: readmeDist{mean: "342.619", sum: 4122048, min: 1, max: 2000, p50: 350, p99: 1120},
			fixed:  247, fixedAt: "2160", sliding: 260, slidingAt: "2472",
			perMinute: "162,177,217,175,187,164,144,183,162,179,218,186,186,204,184,162,189,169,190,220,203,206,218,208,172,240,179,210,216,209,235,197,194,188,225,208,247,176,228,234,207,234,206,224,218,215,196,230,227,235,219,247,222,216,200,238,218,225,203",
			blocks: &blocks{total: 288500, distinct: 182790, seenBefore: "36.64", prefixHit: "36.64",
				perRequest: readmeDist{mean: "23.98", sum: 288500, min: -1, max: 247, p50: 14, p99: 167}},
		},
		{
			name: "T4 mooncake synthetic", file: "mooncake_fast25/synthetic_trace.jsonl", format: FormatMooncake,
			requests: 3993, duration: "1022.025", rate: "3.90695",
			input:  readmeDist{mean: "15,325.477", sum: 61194628, min: 13, max: 191378, p50: 11587, p99: 66458},
			output: readmeDist{mean: "149.119", sum: 595432, min: 1, max: 893, p50: 69, p99: 769},
			fixed:  273, fixedAt: "900", sliding: 280, slidingAt: "904.425",
			perMinute: "208,219,218,232,214,235,222,247,244,215,259,239,239,247,231,273,240,11",
			blocks: &blocks{total: 121877, distinct: 43924, seenBefore: "63.96", prefixHit: "",
				perRequest: readmeDist{mean: "30.52", sum: 121877, min: -1, max: 374, p50: 23, p99: 130}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Open(sharedFile(t, tt.file), Options{})
			require.NoError(t, err)
			defer r.Close()
			s, err := ComputeStats(r)
			require.NoError(t, err)

			require.Equal(t, tt.format, s.Format)
			require.Equal(t, tt.requests, s.Requests)
			require.Zero(t, s.Skipped)
			require.Equal(t, tt.duration, strconv.FormatFloat(s.Duration.Seconds(), 'f', -1, 64), "duration (s)")
			requireRounded(t, tt.rate, s.Rate, "mean arrival rate")
			requireDist(t, tt.input, s.Input, "input")
			requireDist(t, tt.output, s.Output, "output")
			require.Equal(t, tt.fixed, s.PeakFixed.Count, "fixed-bin peak")
			require.Equal(t, tt.sliding, s.PeakSliding.Count, "sliding peak")
			require.Equal(t, perMinute(tt.perMinute), s.PerMinute, "requests per minute")

			const wall = "2006-01-02 15:04:05.0000000"
			if tt.start != "" {
				require.Equal(t, tt.start, s.Start.Format(wall))
				require.Equal(t, tt.end, s.Start.Add(s.Duration).Format(wall))
				require.Equal(t, tt.fixedAt, s.Start.Add(s.PeakFixed.Start).Format("15:04"))
				require.Zero(t, s.Start.Add(s.PeakFixed.Start).Second(), "a fixed bin starts on a wall-clock minute")
				require.Equal(t, tt.slidingAt, s.Start.Add(s.PeakSliding.Start).Format("15:04:05.0000000"))
			} else {
				require.True(t, s.Start.IsZero(), "a relative trace has no wall-clock start")
				require.Equal(t, tt.fixedAt, strconv.FormatFloat(s.PeakFixed.Start.Seconds(), 'f', -1, 64))
				require.Equal(t, tt.slidingAt, strconv.FormatFloat(s.PeakSliding.Start.Seconds(), 'f', -1, 64))
			}

			if tt.blocks == nil {
				require.Nil(t, s.Blocks)
				return
			}
			b := s.Blocks
			require.NotNil(t, b)
			require.Equal(t, tt.blocks.total, b.Total)
			require.Equal(t, tt.blocks.distinct, b.Distinct)
			requireRounded(t, tt.blocks.seenBefore, 100*b.SeenBefore, "blocks seen before (%)")
			if tt.blocks.prefixHit != "" {
				requireRounded(t, tt.blocks.prefixHit, 100*b.PrefixHit, "prefix-hit fraction (%)")
			}
			requireDist(t, tt.blocks.perRequest, b.PerRequest, "blocks per request")
			require.Zero(t, b.LengthMismatch, "len(hash_ids) = ceil(input_length/512) holds for every row")
		})
	}
}

// TestGenAIMatchesREADME checks the request figures of T11, the Alibaba
// GenAI diffusion trace, and its service times.
func TestGenAIMatchesREADME(t *testing.T) {
	path := sharedFile(t, "alibaba_genai_v2026/lora_request_trace.csv")
	r, err := Open(path, Options{})
	require.NoError(t, err)
	defer r.Close()
	s, err := ComputeStats(r)
	require.NoError(t, err)
	require.Equal(t, FormatGenAI, s.Format)
	require.Equal(t, 26823, s.Requests)
	require.Equal(t, 1989367*time.Second, s.Duration)
	require.Equal(t, "2024-11-15 16:57:50", s.Start.Format(time.DateTime))
	requireRounded(t, "0.013483", s.Rate, "rate")
	require.Equal(t, 64, s.PeakFixed.Count)
	require.Equal(t, "2024-12-06 00:39", s.Start.Add(s.PeakFixed.Start).Format("2006-01-02 15:04"))
	require.Equal(t, 65, s.PeakSliding.Count)
	total := 0
	for _, c := range s.PerMinute {
		total += c
	}
	require.Equal(t, s.Requests, total, "every request falls in a per-minute bin")

	// Service times: exec_time_seconds mean 28.666, max 567, 30 zeros.
	r2, err := Open(path, Options{})
	require.NoError(t, err)
	defer r2.Close()
	var rec Record
	var sum, maxv time.Duration
	zeros, n := 0, 0
	classes := map[string]int{}
	for r2.Next(&rec) == nil {
		n++
		sum += rec.Service
		maxv = max(maxv, rec.Service)
		if rec.Service == 0 {
			zeros++
		}
		classes[rec.Class]++
	}
	require.Equal(t, 26823, n)
	requireRounded(t, "28.666", sum.Seconds()/float64(n), "exec_time mean")
	require.Equal(t, 567*time.Second, maxv)
	require.Equal(t, 30, zeros)
	require.Equal(t, map[string]int{"TXT_2_IMG": 24438, "IMG_2_IMG": 2199, "INPAINTING": 186}, classes)
}

// TestJobStatsMatchREADME checks the T7/T8 figures: both pod lists hold the
// same 8,152 tasks; gpuspec33 adds GPU-type constraints.
func TestJobStatsMatchREADME(t *testing.T) {
	tests := []struct {
		file        string
		constrained int
		t4Only      int
	}{
		{"alibaba_gpu_v2023/openb_pod_list_default.csv", 0, 0},
		{"alibaba_gpu_v2023/openb_pod_list_gpuspec33.csv", 2388, 1291},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			r, err := OpenJobs(sharedFile(t, tt.file), Options{})
			require.NoError(t, err)
			defer r.Close()
			s, err := ComputeJobStats(r)
			require.NoError(t, err)
			require.Equal(t, FormatPod, s.Format)
			require.Equal(t, 8152, s.Jobs)
			require.True(t, s.Sorted)
			require.Equal(t, 12901761*time.Second, s.CreationSpan)
			requireRounded(t, "149.33", s.CreationSpan.Hours()/24, "days")
			requireRounded(t, "2.27", s.ArrivalsPerHour, "arrivals per hour")
			require.ElementsMatch(t, []Tally[int]{{1, 6989}, {0, 1088}, {8, 44}, {2, 16}, {4, 15}}, s.GPUs)
			require.Equal(t, 3078, s.Sharing)
			require.Equal(t, tt.constrained, s.Constrained)
			require.Equal(t, []Tally[string]{{"LS", 4647}, {"BE", 3398}, {"Burstable", 100}, {"Guaranteed", 7}}, s.QoS)
			require.Equal(t, []Tally[string]{{"Running", 5193}, {"Failed", 1870}, {"Pending", 897}, {"Succeeded", 192}}, s.Phase)
			require.Equal(t, 897, s.Unscheduled)
			requireDist(t, readmeDist{mean: "25839.4", min: -1, max: 12537496, p50: 540, p99: 99719, sum: s.Lifetime.Sum}, s.Lifetime, "lifetime")
			require.EqualValues(t, 7255, s.Wait.N)
			requireDist(t, readmeDist{mean: "61.3", min: -1, max: s.Wait.Max, p50: 2, p99: 908, sum: s.Wait.Sum}, s.Wait, "wait")

			if tt.t4Only > 0 {
				r, err := OpenJobs(sharedFile(t, tt.file), Options{})
				require.NoError(t, err)
				defer r.Close()
				var j Job
				t4 := 0
				for r.Next(&j) == nil {
					if len(j.GPUSpec) == 1 && j.GPUSpec[0] == "T4" {
						t4++
					}
				}
				require.Equal(t, tt.t4Only, t4)
			}
		})
	}
}

// TestNodeStatsMatchREADME checks the T5, T6 and T9 inventories, T9 with
// its different column order.
func TestNodeStatsMatchREADME(t *testing.T) {
	tests := []struct {
		file, format string
		nodes, gpus  int
		models       []ModelCount
		perNode      []Tally[int]
		cores        []Tally[int]
	}{
		{"alibaba_gpu_v2023/openb_node_list_all_node.csv", FormatNode, 1523, 6212,
			[]ModelCount{{"G2", 549, 4392}, {"T4", 404, 842}, {"", 310, 0}, {"P100", 134, 265}, {"V100M16", 55, 195}, {"G3", 39, 312}, {"V100M32", 30, 204}, {"A10", 2, 2}},
			[]Tally[int]{{8, 617}, {2, 518}, {0, 310}, {4, 54}, {1, 24}}, nil},
		{"alibaba_gpu_v2023/openb_node_list_gpu_node.csv", FormatNode, 1213, 6212,
			[]ModelCount{{"G2", 549, 4392}, {"T4", 404, 842}, {"P100", 134, 265}, {"V100M16", 55, 195}, {"G3", 39, 312}, {"V100M32", 30, 204}, {"A10", 2, 2}},
			nil, nil},
		{"alibaba_spot_gpu_v2026/node_info_df.csv", FormatSpotNode, 4278, 10412,
			[]ModelCount{{"A10", 2494, 2494}, {"GPU-series-1", 989, 1558}, {"A100-SXM4-80GB", 432, 3456}, {"H800", 219, 1752}, {"GPU-series-2", 122, 976}, {"A800-SXM4-80GB", 22, 176}},
			[]Tally[int]{{1, 3396}, {8, 872}, {4, 10}},
			[]Tally[int]{{128, 2947}, {192, 1329}, {126, 2}}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			r, err := OpenNodes(sharedFile(t, tt.file), Options{})
			require.NoError(t, err)
			defer r.Close()
			s, err := ComputeNodeStats(r)
			require.NoError(t, err)
			require.Equal(t, tt.format, s.Format)
			require.Equal(t, tt.nodes, s.Nodes)
			require.Equal(t, tt.gpus, s.GPUs)
			require.Equal(t, tt.models, s.Models)
			if tt.perNode != nil {
				require.Equal(t, tt.perNode, s.GPUsPerNode)
			}
			if tt.cores != nil {
				require.Equal(t, tt.cores, s.CoresPerNode)
			}
		})
	}
}
