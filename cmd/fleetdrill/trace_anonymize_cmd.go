package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/fleetdrill/fleetdrill/internal/anonymize"
	"github.com/fleetdrill/fleetdrill/internal/trace"
)

// newTraceAnonymizeCmd is `fleetdrill trace anonymize IN OUT`: a request
// log or trace in, canonical JSONL out with only allow-listed fields and
// keyed pseudonyms for ids. The work is internal/anonymize's; this parses
// flags, opens files and prints the report.
func newTraceAnonymizeCmd() *cobra.Command {
	var (
		keyFile, newKeyFile string
		format              string
		delimiter           string
		m                   = anonymize.DefaultMapping()
		timeFormat          = string(m.TimeFormat)
		cfg                 anonymize.Config
		rebase, skipBad     bool
		maxDisorder         time.Duration
		reportPath          string
	)
	cmd := &cobra.Command{
		Use:   "anonymize IN OUT (--key-file K | --new-key-file K)",
		Short: "Anonymize a request log or trace for sharing",
		Long: `anonymize writes IN as canonical JSONL to OUT keeping only an allow-list of
fields: arrival time, input and output token counts, model, class, deadline
and measured service time. Tenant, user and session ids become keyed
pseudonyms, HMAC-SHA256(key, field || 0x00 || id) as t-, u- or s- and the first
--id-hex hex characters: the same key gives the same pseudonyms (sessions stay
linked, also across files), another key unrelated ones. Prefix-block hashes are
keyed the same way. Every other column (prompt and response text, metadata,
headers) is dropped. It prints what it kept, hashed and dropped, by column
name and row count; no message ever quotes a cell.

IN is a trace internal/trace reads (detected, or --format), or an operator's
gateway log, CSV or JSONL, with its columns mapped by the --*-col flags
(defaults fit OpenAI-style logs; a dotted name is a path into nested JSON,
e.g. usage.prompt_tokens). .gz is read transparently; OUT ending in .gz is
gzipped.

Time: wall-clock times are made relative to the earliest request; --rebase
does the same for relative ones; --resolution floors them, against timing
side channels. Output is sorted by time: a log written when requests finish
is out of order by up to its longest request, which --max-disorder allows.
--bucket-tokens rounds token counts up, as exact lengths fingerprint prompts.

The key file is raw bytes, at least 32 of them; --new-key-file makes one
(mode 0600). Keep it secret and reuse it: the key is what keeps pseudonyms
linked and what stops anyone recomputing them from guessed ids.

Exit status: 0 on success, 2 for invalid input or usage.`,
		Example: `  fleetdrill trace anonymize gateway.jsonl out.jsonl --new-key-file anon.key
  fleetdrill trace anonymize logs.csv.gz out.jsonl.gz --key-file anon.key \
      --tenant-col org_id --session-col conversation_id --class-col tier \
      --time-format unix-ms --resolution 1s --bucket-tokens 16 --report report.json
  fleetdrill trace anonymize raw_canonical.jsonl out.jsonl --key-file anon.key --rebase`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, out := args[0], args[1]
			stderr := cmd.ErrOrStderr()
			invalid := func(err error) error {
				return &exitError{code: exitInvalid, err: fmt.Errorf("trace anonymize: %w", err)}
			}
			if (keyFile == "") == (newKeyFile == "") {
				return invalid(errors.New("give exactly one of --key-file K and --new-key-file K"))
			}
			if err := checkAnonymizePaths(in, out, keyFile+newKeyFile, reportPath); err != nil {
				return invalid(err)
			}
			tf, err := anonymize.ParseTimeFormat(timeFormat)
			if err != nil {
				return invalid(fmt.Errorf("--time-format: %w", err))
			}
			m.TimeFormat = tf
			for flag, field := range map[string]string{
				"tenant-col": anonymize.FieldTenant, "user-col": anonymize.FieldUser, "session-col": anonymize.FieldSession,
				"model-col": anonymize.FieldModel, "class-col": anonymize.FieldClass,
			} {
				if cmd.Flags().Changed(flag) {
					m.MustExist = append(m.MustExist, field)
				}
			}
			mapped := false
			for _, f := range []string{"time-col", "time-format", "input-col", "output-col", "tenant-col", "user-col", "session-col", "model-col", "class-col", "delimiter"} {
				mapped = mapped || cmd.Flags().Changed(f)
			}
			format, err := anonymize.ChooseFormat(in, format, mapped)
			if err != nil {
				return invalid(err)
			}
			generic := format == anonymize.FormatCSV || format == anonymize.FormatJSONL
			if mapped && !generic {
				return invalid(fmt.Errorf("the --*-col, --time-format and --delimiter flags map a gateway log's columns; %s %s trace's are fixed (use --format csv or jsonl)", article(format), format))
			}
			comma, err := parseDelimiter(delimiter, in, cmd.Flags().Changed("delimiter"))
			if err != nil {
				return invalid(err)
			}

			// The key last: a usage error should not leave a new key file.
			if newKeyFile != "" {
				cfg.Key, err = anonymize.NewKeyFile(newKeyFile)
				if err == nil {
					fmt.Fprintf(stderr, "trace anonymize: wrote a new %d-byte key to %s; keep it secret, and pass it as --key-file to keep pseudonyms linked across files\n", cfg.Key.Len(), newKeyFile)
				}
			} else {
				cfg.Key, err = anonymize.LoadKey(keyFile, func(w string) { fmt.Fprintf(stderr, "trace anonymize: warning: %s\n", w) })
			}
			if err != nil {
				return invalid(err)
			}

			job := anonymize.Job{
				Input: in, Format: format, Output: out,
				Open: func() (anonymize.Source, error) {
					if generic {
						return anonymize.OpenGeneric(in, format, m, comma)
					}
					return anonymize.TraceSource(in, format, skipBad)
				},
				Config: cfg, Rebase: rebase, MaxDisorder: maxDisorder, SkipBadRows: skipBad,
				Log: stderr,
			}
			rep, err := writeAnonymized(cmd, job, out)
			if err != nil {
				return invalid(err)
			}
			if reportPath != "" {
				if err := writeReportFile(reportPath, rep); err != nil {
					return invalid(fmt.Errorf("--report: %w", err))
				}
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "key-file", "", "the pseudonym key: a `file` of at least 32 raw bytes")
	f.StringVar(&newKeyFile, "new-key-file", "", "generate a 32-byte key into this new `file` (mode 0600) and use it")
	f.StringVar(&format, "format", anonymize.FormatAuto, "IN's `FORMAT`: auto, csv or jsonl (a gateway log), or a trace format: "+strings.Join(anonymize.TraceFormats(), ", "))
	f.StringVar(&m.Time, "time-col", m.Time, "gateway log: the arrival time `column`")
	f.StringVar(&timeFormat, "time-format", timeFormat, "gateway log: how times are written (`FORMAT`): "+timeFormats())
	f.StringVar(&m.Input, "input-col", m.Input, "gateway log: the prompt token count `column`")
	f.StringVar(&m.Output, "output-col", m.Output, "gateway log: the completion token count `column`")
	f.StringVar(&m.Tenant, "tenant-col", m.Tenant, "gateway log: the tenant id `column`, hashed (\"\" for none)")
	f.StringVar(&m.User, "user-col", m.User, "gateway log: the user id `column`, hashed (\"\" for none)")
	f.StringVar(&m.Session, "session-col", m.Session, "gateway log: the session or conversation id `column`, hashed (\"\" for none)")
	f.StringVar(&m.Model, "model-col", m.Model, "gateway log: the model `column`, kept (\"\" for none)")
	f.StringVar(&m.Class, "class-col", m.Class, "gateway log: the request class or tier `column`, kept (\"\" for none)")
	f.StringVar(&delimiter, "delimiter", ",", "gateway CSV: the field `delimiter`, one character or \"tab\" (tab for .tsv)")
	f.BoolVar(&rebase, "rebase", false, "shift times so that the earliest request is at t=0 (always done for wall-clock times)")
	f.DurationVar(&cfg.Resolution, "resolution", 0, "floor arrival times to a multiple of this (e.g. 1s; 0 keeps them exact)")
	f.IntVar(&cfg.BucketTokens, "bucket-tokens", 0, "round token counts up to a multiple of `N` (0 keeps them exact)")
	f.IntVar(&cfg.IDHexChars, "id-hex", anonymize.DefaultIDHexChars, fmt.Sprintf("pseudonym length in hex `chars`, %d to %d (16 = 64 bits: a million ids collide with probability 2.7e-8)", anonymize.MinIDHexChars, anonymize.MaxIDHexChars))
	f.BoolVar(&cfg.DropBlocks, "drop-blocks", false, "drop prefix-block hashes instead of keying them")
	f.DurationVar(&maxDisorder, "max-disorder", 10*time.Minute, "how far out of time order IN may be; rows further out are bad rows")
	f.BoolVar(&skipBad, "skip-bad-rows", false, "skip and count malformed rows instead of failing on the first")
	f.StringVar(&reportPath, "report", "", "also write the report as JSON to this `file`")
	return cmd
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func timeFormats() string {
	names := make([]string, len(anonymize.TimeFormats))
	for i, f := range anonymize.TimeFormats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// checkAnonymizePaths refuses an OUT or report that would overwrite IN or
// the key.
func checkAnonymizePaths(in, out, key, report string) error {
	same := func(a, b string) bool {
		if a == "" || b == "" {
			return false
		}
		if filepath.Clean(a) == filepath.Clean(b) {
			return true
		}
		sa, errA := os.Stat(a)
		sb, errB := os.Stat(b)
		return errA == nil && errB == nil && os.SameFile(sa, sb)
	}
	switch {
	case same(in, out):
		return errors.New("OUT is IN: write the anonymized trace to another file")
	case same(key, out), same(key, report):
		return errors.New("OUT or --report is the key file")
	case same(in, key):
		return errors.New("IN is the key file")
	case same(in, report) || same(out, report):
		return errors.New("--report is IN or OUT")
	}
	return nil
}

func parseDelimiter(s, in string, set bool) (rune, error) {
	if !set && strings.HasSuffix(strings.TrimSuffix(strings.ToLower(in), ".gz"), ".tsv") {
		return '\t', nil
	}
	switch s {
	case "tab", `\t`:
		return '\t', nil
	}
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || n != len(s) || r == utf8.RuneError || r == '"' || r == '\r' || r == '\n' {
		return 0, fmt.Errorf("--delimiter %q: want one character (not a quote or line end), or \"tab\"", s)
	}
	return r, nil
}

// writeAnonymized runs job into a temporary file beside out, renamed into
// place at the end: a failed run leaves no partial output and an old OUT
// untouched.
func writeAnonymized(cmd *cobra.Command, job anonymize.Job, out string) (*anonymize.Report, error) {
	tw, err := trace.Create(out)
	if err != nil {
		return nil, fmt.Errorf("OUT: %w", err)
	}
	defer tw.Abort() // after a successful Close it does nothing
	rep, err := anonymize.Run(cmd.Context(), job, tw)
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("OUT: %w", err)
	}
	return rep, nil
}

func writeReportFile(path string, rep *anonymize.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
