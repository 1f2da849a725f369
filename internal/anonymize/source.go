package anonymize

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/trace"
)

// Generic log formats, as --format spells them.
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

// FormatAuto chooses the format from the file (ChooseFormat).
const FormatAuto = "auto"

// ChooseFormat resolves a --format value. FormatAuto becomes the trace
// format internal/trace detects from the header or first object, unless
// mapped (the user mapped columns: it is a gateway log); otherwise, and
// when nothing is detected, a generic format by extension: jsonl for
// .jsonl, .ndjson and .json, csv for anything else (.gz ignored). A named
// trace format must be a request trace.
func ChooseFormat(path, format string, mapped bool) (string, error) {
	switch format {
	case FormatCSV, FormatJSONL:
		return format, nil
	case FormatAuto, "":
		if !mapped {
			// NB: Detect's error quotes the first line; it is not shown.
			if f, err := trace.Detect(path, trace.Options{}); err == nil {
				if !trace.IsRequestFormat(f) {
					return "", fmt.Errorf("%s: format %s is not a request trace: nothing to anonymize", path, f)
				}
				return f, nil
			} else if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return "", err
			}
		}
		name := strings.ToLower(strings.TrimSuffix(path, ".gz"))
		for _, ext := range []string{".jsonl", ".ndjson", ".json"} {
			if strings.HasSuffix(name, ext) {
				return FormatJSONL, nil
			}
		}
		return FormatCSV, nil
	}
	if !slices.Contains(TraceFormats(), format) {
		return "", fmt.Errorf("format %q, want %s, %s, %s or a request trace format: %s", format, FormatAuto, FormatCSV, FormatJSONL, formatList())
	}
	return format, nil
}

// genericFile is a Generic that owns its file.
type genericFile struct {
	*Generic
	closers []io.Closer
}

func (g *genericFile) Close() error {
	var first error
	for _, c := range g.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	g.closers = nil
	return first
}

// OpenGeneric opens a generic log (FormatCSV or FormatJSONL), gunzipping it
// when it starts with gzip's magic bytes. comma is the CSV delimiter (','
// when 0).
func OpenGeneric(path, format string, m Mapping, comma rune) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	closers := []io.Closer{f}
	fail := func(err error) (Source, error) {
		for _, c := range closers {
			c.Close()
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fail(fmt.Errorf("gzip: %w", err))
		}
		closers = append([]io.Closer{gz}, closers...)
		r = gz
	}
	var g *Generic
	switch format {
	case FormatCSV:
		g, err = NewCSV(r, m, comma)
	case FormatJSONL:
		g, err = NewJSONL(r, m)
	default:
		err = fmt.Errorf("generic format %q, want %s or %s", format, FormatCSV, FormatJSONL)
	}
	if err != nil {
		return fail(err)
	}
	return &genericFile{Generic: g, closers: closers}, nil
}

// TraceSource reads a trace in a format internal/trace knows (format ""
// detects it). The trace readers' errors quote the offending cell, and a
// canonical trace's cells are raw ids: TraceSource passes on the line, the
// column and what was wanted, never the cell.
func TraceSource(path, format string, skipBad bool) (Source, error) {
	r, err := trace.Open(path, trace.Options{Format: format, SkipBadRows: skipBad})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, err // names the path only
		}
		what := "a request trace of a known format (" + formatList() + ")"
		if format != "" {
			what = "a " + format + " trace"
		}
		// NB: the reader's message quotes the first line, which is data
		// when the file has no header.
		return nil, fmt.Errorf("%s: not %s; for a gateway log pass --format csv or jsonl and map its columns (the reader's message is withheld: it may quote the file)", path, what)
	}
	return &traceSource{r: r}, nil
}

// TraceFormats lists the trace formats that hold requests, the ones the
// anonymizer reads.
func TraceFormats() []string {
	var names []string
	for _, n := range trace.FormatNames() {
		if trace.IsRequestFormat(n) {
			names = append(names, n)
		}
	}
	return names
}

func formatList() string { return strings.Join(TraceFormats(), ", ") }

type traceSource struct{ r *trace.Reader }

func (s *traceSource) Next(rec *trace.Record) error {
	err := s.r.Next(rec)
	var te *trace.RowError
	if errors.As(err, &te) {
		return redact(te)
	}
	// Other errors (a line too long, a read or gzip error) name the
	// file and the line, not a cell.
	return err
}

func (s *traceSource) Close() error { return s.r.Close() }

// Format is the format being read, detected or as given.
func (s *traceSource) Format() string { return s.r.Format() }

func (s *traceSource) SkippedRows() (int, []RowError) {
	rows := s.r.SkippedRows()
	out := make([]RowError, len(rows))
	for i := range rows {
		out[i] = *redact(&rows[i])
	}
	return s.r.Skipped(), out
}

// redact keeps a trace.RowError's line, column and want, and drops the
// cell it got.
func redact(e *trace.RowError) *RowError {
	return &RowError{Line: e.Line, Column: e.Field, Reason: "want " + e.Want}
}
