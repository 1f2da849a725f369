package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fleetdrill/fleetdrill/traces"
)

// RowError is a malformed row: FILE:LINE: field: got X, want Y. With
// Options.SkipBadRows the row is skipped and counted instead, and the first
// MaxSkippedRows of them are kept for the report.
type RowError struct {
	File  string
	Line  int
	Field string // the column or key, or "row" for the row as a whole
	Got   string // the offending value, quoted
	Want  string
}

func (e *RowError) Error() string {
	return fmt.Sprintf("%s:%d: %s: got %s, want %s", e.File, e.Line, e.Field, e.Got, e.Want)
}

// MaxSkippedRows is how many skipped rows a reader keeps for its report; the
// count (Skipped) covers them all.
const MaxSkippedRows = 10

const (
	bufSize = 64 << 10
	// maxLineBytes bounds one line so that a file without newlines cannot
	// make a reader buffer it whole: the only state that grows with input.
	maxLineBytes = 16 << 20
)

// gzipMagic opens every gzip stream (RFC 1952); detection looks at these
// bytes, not at the file name.
var gzipMagic = []byte{0x1f, 0x8b}

// lineSource yields the non-blank lines of a (possibly gzipped) stream,
// without their line endings, counting line numbers, and keeps the skipped-
// row tally the readers share.
type lineSource struct {
	name    string
	br      *bufio.Reader
	closers []io.Closer
	line    int
	long    []byte // a line longer than the bufio buffer, assembled here

	// pushed back makes next return the last line again (format detection
	// reads the first data line of a JSONL file before the reader does).
	pushedBack bool
	last       []byte

	skipBad bool
	skipped int
	rows    []RowError
}

func newLineSource(r io.Reader, name string, skipBad bool) (*lineSource, error) {
	s := &lineSource{name: name, skipBad: skipBad}
	br := bufio.NewReaderSize(r, bufSize)
	if magic, _ := br.Peek(len(gzipMagic)); bytes.Equal(magic, gzipMagic) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", name, err)
		}
		s.closers = append(s.closers, gz)
		br = bufio.NewReaderSize(gz, bufSize)
	}
	s.br = br
	return s, nil
}

// openLineSource opens a trace file, or an embedded trace
// ("embedded:NAME", package traces): every reader takes either.
func openLineSource(path string, skipBad bool) (*lineSource, error) {
	var f io.ReadCloser
	var err error
	if name, ok := traces.Name(path); ok {
		f, err = traces.Open(name)
	} else {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	s, err := newLineSource(f, path, skipBad)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.closers = append(s.closers, f)
	return s, nil
}

// next returns the next non-blank line, without "\n" or "\r\n", valid until
// the following call; io.EOF at the end. Blank lines are not rows (JSONL
// files may end with one; CSV readers skip them as encoding/csv does).
func (s *lineSource) next() ([]byte, error) {
	if s.pushedBack {
		s.pushedBack = false
		return s.last, nil
	}
	for {
		b, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.long = append(s.long[:0], b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(s.long) > maxLineBytes {
					return nil, fmt.Errorf("%s:%d: line longer than %d bytes", s.name, s.line+1, maxLineBytes)
				}
				b, err = s.br.ReadSlice('\n')
				s.long = append(s.long, b...)
			}
			b = s.long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: read: %w", s.name, err)
		}
		if len(b) == 0 {
			return nil, io.EOF
		}
		s.line++
		if b[len(b)-1] == '\n' {
			b = b[:len(b)-1]
		}
		if len(b) > 0 && b[len(b)-1] == '\r' {
			b = b[:len(b)-1]
		}
		if s.line == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a UTF-8 BOM
		}
		if blank(b) {
			continue
		}
		s.last = b
		return b, nil
	}
}

func (s *lineSource) pushBack() { s.pushedBack = true }

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// bad handles a row error: with skipBad it is counted (and kept, for the
// first few) and nil returned, so the reader moves on; otherwise it comes
// back as the error.
func (s *lineSource) bad(e *RowError) error {
	if !s.skipBad {
		return e
	}
	s.skipped++
	if len(s.rows) < MaxSkippedRows {
		s.rows = append(s.rows, *e)
	}
	return nil
}

func (s *lineSource) rowError(field string, got []byte, want string) *RowError {
	return &RowError{File: s.name, Line: s.line, Field: field, Got: quote(got), Want: want}
}

func (s *lineSource) close() error {
	var first error
	for _, c := range s.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.closers = nil
	return first
}
