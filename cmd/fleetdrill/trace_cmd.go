package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/trace"
	"github.com/fleetdrill/fleetdrill/traces"
)

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Summarise and convert request traces",
		Long: `Read public LLM request traces (Azure, Mooncake, BurstGPT, Alibaba GenAI),
Alibaba GPU job and node lists, and fleetdrill's canonical JSONL. Formats are
detected from the header or first line; .gz files are read transparently.
Where a command takes a file, embedded:NAME reads a trace the binary carries
("fleetdrill trace list"). See docs/traces.md.`,
	}
	cmd.AddCommand(newTraceStatsCmd(), newTraceConvertCmd(), newTraceAnonymizeCmd(), // anonymize: trace_anonymize_cmd.go
		newTraceListCmd())
	return cmd
}

// newTraceListCmd lists the embedded traces with where they come from and
// their licence: what a binary redistributes, it says.
func newTraceListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the traces embedded in the binary, with their source and licence",
		Long: `List the public traces embedded in the binary, which the library's scenarios
replay: the name to give as embedded:NAME (in a scenario's trace.path, or to
"fleetdrill trace stats"), the rows, the upstream file it is a byte-for-byte
copy of, and its licence. See docs/traces.md.`,
		Example: `  fleetdrill trace list
  fleetdrill trace stats embedded:azure_llm_2023/AzureLLMInferenceTrace_conv.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			for _, t := range traces.List() {
				fmt.Fprintf(w, "%s%s\n  rows     %d\n  source   %s\n  sha256   %s\n  licence  %s\n",
					traces.Scheme, t.Name, t.Rows, t.Source, t.SHA256, t.License)
			}
			return nil
		},
	}
}

func formatFlagUsage() string {
	return "read as `FORMAT` instead of detecting it: " + strings.Join(trace.FormatNames(), ", ")
}

// printSkipped reports skipped rows on w: the first few with their reasons.
func printSkipped(w io.Writer, skipped int, rows []trace.RowError) {
	for _, r := range rows {
		fmt.Fprintf(w, "skipped %v\n", &r)
	}
	if more := skipped - len(rows); more > 0 {
		fmt.Fprintf(w, "skipped %d more bad rows\n", more)
	}
}

func newTraceStatsCmd() *cobra.Command {
	var (
		opts   trace.Options
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "stats FILE|embedded:NAME",
		Short: "Print a trace's statistics",
		Long: `Print a trace's statistics: request count, duration, mean rate, token means and
nearest-rank p50/p99, peak one-minute rates (fixed bins and sliding window),
and prefix-block reuse when the trace has block hashes. For GPU job lists
and node lists, print their counts by GPU, QoS, phase and model.

Exit status: 0 on success, 2 for an unreadable or malformed file.`,
		Example: `  fleetdrill trace stats AzureLLMInferenceTrace_code.csv
  fleetdrill trace stats conversation_trace.jsonl.gz --json
  fleetdrill trace stats embedded:mooncake_fast25/conversation_trace.jsonl
  fleetdrill trace stats messy.csv --format burstgpt --skip-bad-rows`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			format, err := trace.Detect(args[0], opts)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			opts.Format = format
			var stats any
			var skipped int
			var rows []trace.RowError
			switch {
			case trace.IsRequestFormat(format):
				r, err := trace.Open(args[0], opts)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				defer r.Close()
				s, err := trace.ComputeStats(r)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				stats, skipped, rows = s, r.Skipped(), r.SkippedRows()
			case format == trace.FormatPod:
				r, err := trace.OpenJobs(args[0], opts)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				defer r.Close()
				s, err := trace.ComputeJobStats(r)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				stats, skipped, rows = s, r.Skipped(), r.SkippedRows()
			default:
				r, err := trace.OpenNodes(args[0], opts)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				defer r.Close()
				s, err := trace.ComputeNodeStats(r)
				if err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
				stats, skipped, rows = s, r.Skipped(), r.SkippedRows()
			}
			printSkipped(cmd.ErrOrStderr(), skipped, rows)
			if asJSON {
				b, err := json.MarshalIndent(stats, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(out, "%s\n", b)
				return err
			}
			switch s := stats.(type) {
			case *trace.Stats:
				writeStats(out, s)
			case *trace.JobStats:
				writeJobStats(out, s)
			case *trace.NodeStats:
				writeNodeStats(out, s)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "", formatFlagUsage())
	cmd.Flags().BoolVar(&opts.SkipBadRows, "skip-bad-rows", false, "skip malformed rows (counted and reported on stderr) instead of failing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the statistics as JSON")
	return cmd
}

const wallLayout = "2006-01-02 15:04:05.0000000"

// at renders a position in the trace: wall-clock for absolute traces,
// seconds from t=0 for relative ones.
func at(s *trace.Stats, d time.Duration, layout string) string {
	if s.Start.IsZero() {
		return formatSeconds(d) + " s"
	}
	return s.Start.Add(d).Format(layout)
}

func distLine(d trace.Dist) string {
	return fmt.Sprintf("mean %.3f  p50 %d  p99 %d  min %d  max %d  sum %d", d.Mean, d.P50, d.P99, d.Min, d.Max, d.Sum)
}

func writeStats(w io.Writer, s *trace.Stats) {
	fmt.Fprintf(w, "file       %s\n", s.File)
	fmt.Fprintf(w, "format     %s\n", s.Format)
	fmt.Fprintf(w, "requests   %d\n", s.Requests)
	if s.Skipped > 0 {
		fmt.Fprintf(w, "skipped    %d bad rows\n", s.Skipped)
	}
	if s.Requests == 0 {
		return
	}
	if !s.Start.IsZero() {
		fmt.Fprintf(w, "span       %s → %s (UTC)\n", s.Start.Format(wallLayout), s.Start.Add(s.Duration).Format(wallLayout))
	}
	fmt.Fprintf(w, "duration   %s s\n", formatSeconds(s.Duration))
	fmt.Fprintf(w, "rate       %.6g req/s (requests / duration)\n", s.Rate)
	fmt.Fprintf(w, "input      %s\n", distLine(s.Input))
	fmt.Fprintf(w, "output     %s\n", distLine(s.Output))
	minute, instant := "15:04", "15:04:05.0000000"
	if !s.Start.IsZero() && s.Start.YearDay() != s.Start.Add(s.Duration).YearDay() || s.Duration >= 24*time.Hour {
		minute, instant = "2006-01-02 15:04", wallLayout // the trace spans days
	}
	fmt.Fprintf(w, "peak/min   fixed %d (bin from %s)  sliding %d (window from %s)\n",
		s.PeakFixed.Count, at(s, s.PeakFixed.Start, minute), s.PeakSliding.Count, at(s, s.PeakSliding.Start, instant))
	if b := s.Blocks; b != nil {
		fmt.Fprintf(w, "blocks     %d total, %d distinct, %.2f%% seen before, %.2f%% prefix hits\n",
			b.Total, b.Distinct, 100*b.SeenBefore, 100*b.PrefixHit)
		fmt.Fprintf(w, "blocks/req %s\n", distLine(b.PerRequest))
		if b.LengthMismatch > 0 {
			fmt.Fprintf(w, "warning    %d requests have len(blocks) != ceil(input/%d)\n", b.LengthMismatch, trace.BlockTokens)
		}
	}
}

// formatSeconds prints a duration in seconds exactly, without trailing
// zeros: 3435.948056.
func formatSeconds(d time.Duration) string {
	s := fmt.Sprintf("%d.%09d", d/time.Second, d%time.Second)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

func tallyLine[T int | string](ts []trace.Tally[T]) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%v: %d", t.Value, t.Count)
	}
	return strings.Join(parts, ", ")
}

func writeJobStats(w io.Writer, s *trace.JobStats) {
	fmt.Fprintf(w, "file       %s\n", s.File)
	fmt.Fprintf(w, "format     %s\n", s.Format)
	sorted := "sorted by creation_time"
	if !s.Sorted {
		sorted = "not sorted by creation_time"
	}
	fmt.Fprintf(w, "jobs       %d (%s)\n", s.Jobs, sorted)
	if s.Skipped > 0 {
		fmt.Fprintf(w, "skipped    %d bad rows\n", s.Skipped)
	}
	fmt.Fprintf(w, "creation   span %s s (%.2f days), %.2f arrivals/hour\n", formatSeconds(s.CreationSpan), s.CreationSpan.Hours()/24, s.ArrivalsPerHour)
	fmt.Fprintf(w, "num_gpu    %s\n", tallyLine(s.GPUs))
	fmt.Fprintf(w, "sharing    %d (num_gpu = 1, gpu_milli < 1000)\n", s.Sharing)
	fmt.Fprintf(w, "gpu_spec   %d constrained\n", s.Constrained)
	fmt.Fprintf(w, "qos        %s\n", tallyLine(s.QoS))
	fmt.Fprintf(w, "phase      %s\n", tallyLine(s.Phase))
	fmt.Fprintf(w, "scheduled  %d (%d with empty scheduled_time)\n", s.Wait.N, s.Unscheduled)
	fmt.Fprintf(w, "lifetime   %s (s)\n", jobDist(s.Lifetime))
	fmt.Fprintf(w, "wait       %s (s)\n", jobDist(s.Wait))
}

func jobDist(d trace.Dist) string {
	return fmt.Sprintf("mean %.1f  p50 %d  p99 %d  max %d", d.Mean, d.P50, d.P99, d.Max)
}

func writeNodeStats(w io.Writer, s *trace.NodeStats) {
	fmt.Fprintf(w, "file       %s\n", s.File)
	fmt.Fprintf(w, "format     %s\n", s.Format)
	fmt.Fprintf(w, "nodes      %d, %d GPUs\n", s.Nodes, s.GPUs)
	if s.Skipped > 0 {
		fmt.Fprintf(w, "skipped    %d bad rows\n", s.Skipped)
	}
	fmt.Fprintf(w, "%-16s %6s %6s\n", "model", "nodes", "GPUs")
	for _, m := range s.Models {
		name := m.Model
		if name == "" {
			name = "(CPU only)"
		}
		fmt.Fprintf(w, "%-16s %6d %6d\n", name, m.Nodes, m.GPUs)
	}
	fmt.Fprintf(w, "GPUs/node  %s\n", tallyLine(s.GPUsPerNode))
	fmt.Fprintf(w, "cores/node %s\n", tallyLine(s.CoresPerNode))
}

func newTraceConvertCmd() *cobra.Command {
	var opts trace.Options
	cmd := &cobra.Command{
		Use:   "convert IN OUT",
		Short: "Convert a request trace to canonical JSONL",
		Long: `Convert a request trace to fleetdrill's canonical JSONL (docs/traces.md),
gzipped when OUT ends in .gz. OUT appears only when the whole trace converted.

Raw tenant, user and session identifiers are sensitive: convert drops them
and says how many records had them ("fleetdrill trace anonymize" keeps them
as keyed pseudonyms).

Exit status: 0 on success, 2 for an unreadable or malformed input.`,
		Example: `  fleetdrill trace convert AzureLLMInferenceTrace_code.csv code.jsonl.gz
  fleetdrill trace convert BurstGPT_1.csv burst.jsonl --skip-bad-rows`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, out := args[0], args[1]
			if same(in, out) {
				return &exitError{code: exitInvalid, err: fmt.Errorf("convert: IN and OUT are the same file %s", in)}
			}
			r, err := trace.Open(in, opts)
			if err != nil {
				return &exitError{code: exitInvalid, err: err}
			}
			defer r.Close()
			n, dropped, err := convert(r, out)
			if err != nil {
				var re *trace.RowError
				if errors.As(err, &re) {
					return &exitError{code: exitInvalid, err: fmt.Errorf("%w (--skip-bad-rows skips such rows)", err)}
				}
				return &exitError{code: exitInvalid, err: err}
			}
			printSkipped(cmd.ErrOrStderr(), r.Skipped(), r.SkippedRows())
			if dropped > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "dropped raw tenant/user/session identifiers from %d records: they are sensitive (fleetdrill trace anonymize keeps them as pseudonyms)\n", dropped)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote %d records to %s (%s → canonical), skipped %d bad rows\n", n, out, r.Format(), r.Skipped())
			return err
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "", formatFlagUsage())
	cmd.Flags().BoolVar(&opts.SkipBadRows, "skip-bad-rows", false, "skip malformed rows (counted and reported on stderr) instead of failing")
	return cmd
}

// same reports whether two paths name one existing file.
func same(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// convert writes r's records to out as canonical JSONL through a temporary
// file renamed into place on success, clearing raw identifiers; it returns
// how many records it wrote and how many had identifiers.
func convert(r *trace.Reader, out string) (n, dropped int, err error) {
	w, err := trace.Create(out)
	if err != nil {
		return 0, 0, err
	}
	defer w.Abort() // after a successful Close it does nothing
	var rec trace.Record
	for {
		if err = r.Next(&rec); err != nil {
			break
		}
		if rec.Tenant != "" || rec.User != "" || rec.Session != "" {
			rec.Tenant, rec.User, rec.Session = "", "", ""
			dropped++
		}
		if err = w.Write(&rec); err != nil {
			return 0, 0, err
		}
	}
	if !errors.Is(err, io.EOF) {
		return 0, 0, err
	}
	if err = w.Close(); err != nil {
		return 0, 0, err
	}
	return w.Count(), dropped, nil
}
