package trace

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// The canonical JSONL format is fleetdrill's own: one object per line,
//
//	{"t":12.5,"tenant":"a","user":"u1","session":"s9","class":"chat","model":"llama-3.1-8b","input":812,"output":96,"blocks":[4,9],"deadline_s":30}
//
// t is seconds since the trace's origin (a decimal, exact to the
// nanosecond); input and output are token counts; blocks are prefix-block
// hashes of BlockTokens tokens each; deadline_s and service_s are seconds.
// t, input and output are required; the Writer omits the others when empty
// or zero, and the reader accepts null for them. Keys may come in any order;
// an unknown key is an error. Rows are sorted by t. docs/traces.md is the
// reference.

var canonicalKeys = [...]string{"t", "tenant", "user", "session", "class", "model", "input", "output", "blocks", "deadline_s", "service_s"}

func (r *Reader) parseCanonical(line []byte, rec *Record) *RowError {
	s := &r.js
	s.reset(line)
	var e *RowError
	var seen uint16
	ok := s.object(func(key []byte) bool {
		k := -1
		for i, name := range canonicalKeys {
			if string(key) == name {
				k = i
				break
			}
		}
		if k < 0 {
			e = r.src.rowError("key", key, "one of the canonical keys "+strings.Join(canonicalKeys[:], ", "))
			return false
		}
		name := canonicalKeys[k]
		if seen&(1<<k) != 0 {
			e = r.src.rowError(name, line, "each key once")
			return false
		}
		seen |= 1 << k
		switch name {
		case "t", "deadline_s", "service_s":
			if name != "t" && s.null() {
				return true
			}
			raw := s.number()
			d, ok := parseSeconds(raw)
			if !ok {
				e = r.src.rowError(name, raw, wantSeconds)
				return false
			}
			switch name {
			case "t":
				rec.Time, r.rawTime = d, raw
			case "deadline_s":
				rec.Deadline = d
			default:
				rec.Service = d
			}
		case "tenant", "user", "session", "class", "model":
			if s.null() {
				return true
			}
			v, ok := s.str(&s.valBuf)
			if !ok {
				e = r.src.rowError(name, s.rest(), "a JSON string or null")
				return false
			}
			switch name {
			case "tenant":
				rec.Tenant = r.strs[0].get(v)
			case "user":
				rec.User = r.strs[1].get(v)
			case "session":
				rec.Session = r.strs[2].get(v)
			case "class":
				rec.Class = r.strs[3].get(v)
			default:
				rec.Model = r.strs[4].get(v)
			}
		case "input", "output":
			n, raw, ok := s.uint()
			if !ok || n > maxCount {
				e = r.src.rowError(name, raw, wantCount)
				return false
			}
			if name == "input" {
				rec.Input = int(n)
			} else {
				rec.Output = int(n)
			}
		case "blocks":
			if s.null() {
				return true
			}
			var raw []byte
			var ok bool
			if rec.Blocks, raw, ok = s.uintArray(rec.Blocks[:0]); !ok {
				e = r.src.rowError("blocks", raw, "an array of non-negative integers")
				return false
			}
		}
		return true
	})
	if e != nil {
		return e
	}
	if !ok {
		return r.src.rowError("row", s.rest(), "one JSON object per line")
	}
	for _, k := range [...]int{0, 6, 7} { // t, input, output
		if seen&(1<<k) == 0 {
			return &RowError{File: r.src.name, Line: r.src.line, Field: canonicalKeys[k], Got: "no such key", Want: "every row to have t, input and output"}
		}
	}
	return nil
}

// Writer writes records as canonical JSONL. It writes Tenant, User and
// Session as given: they are raw identifiers, so callers other than the
// anonymizer must clear them first (trace convert does).
type Writer struct {
	bw      *bufio.Writer
	closers []io.Closer
	// tmp and final: Create's temporary file and the path Close renames it
	// to; empty for NewWriter.
	tmp, final string
	buf        []byte
	n          int
	prev       time.Duration
	err        error
}

// NewWriter writes canonical JSONL to w, buffered: Close (or Flush) before
// using what w holds. Close does not close w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, bufSize)}
}

// Create writes canonical JSONL to path, gzipped when the name ends in
// .gz. It writes a temporary file beside path and Close renames it into
// place, so a failed or abandoned write leaves no partial file and an old
// one untouched: call Abort (or defer it: after Close it does nothing)
// when giving up.
func Create(path string) (*Writer, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	w := &Writer{closers: []io.Closer{f}, tmp: f.Name(), final: path}
	if strings.HasSuffix(path, ".gz") {
		gz := gzip.NewWriter(f)
		w.closers = append([]io.Closer{gz}, w.closers...)
		w.bw = bufio.NewWriterSize(gz, bufSize)
	} else {
		w.bw = bufio.NewWriterSize(f, bufSize)
	}
	return w, nil
}

// Abort abandons a Writer from Create: its temporary file is removed and
// path is left as it was. After Close it does nothing.
func (w *Writer) Abort() {
	for _, c := range w.closers {
		c.Close()
	}
	w.closers = nil
	if w.tmp != "" {
		os.Remove(w.tmp)
		w.tmp = ""
	}
}

// Count is how many records have been written.
func (w *Writer) Count() int { return w.n }

// Write appends one record. It refuses what the reader would refuse (a
// negative time or duration, times out of order, counts beyond 2^31-1), so
// that whatever it writes reads back equal.
func (w *Writer) Write(rec *Record) error {
	if w.err != nil {
		return w.err
	}
	switch {
	case rec.Time < 0:
		return fmt.Errorf("record %d: t: got %v, want >= 0", w.n+1, rec.Time)
	case w.n > 0 && rec.Time < w.prev:
		return fmt.Errorf("record %d: t: got %v, want >= the previous record's %v (sorted by arrival)", w.n+1, rec.Time, w.prev)
	case rec.Input < 0 || rec.Input > maxCount:
		return fmt.Errorf("record %d: input: got %d, want 0..%d", w.n+1, rec.Input, maxCount)
	case rec.Output < 0 || rec.Output > maxCount:
		return fmt.Errorf("record %d: output: got %d, want 0..%d", w.n+1, rec.Output, maxCount)
	case rec.Deadline < 0:
		return fmt.Errorf("record %d: deadline_s: got %v, want >= 0", w.n+1, rec.Deadline)
	case rec.Service < 0:
		return fmt.Errorf("record %d: service_s: got %v, want >= 0", w.n+1, rec.Service)
	}
	b := append(w.buf[:0], `{"t":`...)
	b = appendSeconds(b, rec.Time)
	b = appendStringKey(b, "tenant", rec.Tenant)
	b = appendStringKey(b, "user", rec.User)
	b = appendStringKey(b, "session", rec.Session)
	b = appendStringKey(b, "class", rec.Class)
	b = appendStringKey(b, "model", rec.Model)
	b = append(b, `,"input":`...)
	b = appendUint(b, uint64(rec.Input))
	b = append(b, `,"output":`...)
	b = appendUint(b, uint64(rec.Output))
	if len(rec.Blocks) > 0 {
		b = append(b, `,"blocks":[`...)
		for i, h := range rec.Blocks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendUint(b, h)
		}
		b = append(b, ']')
	}
	if rec.Deadline > 0 {
		b = append(b, `,"deadline_s":`...)
		b = appendSeconds(b, rec.Deadline)
	}
	if rec.Service > 0 {
		b = append(b, `,"service_s":`...)
		b = appendSeconds(b, rec.Service)
	}
	b = append(b, "}\n"...)
	w.buf = b
	if _, err := w.bw.Write(b); err != nil {
		w.err = err
		return err
	}
	w.n++
	w.prev = rec.Time
	return nil
}

// Flush writes buffered records to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.err = w.bw.Flush()
	return w.err
}

// Close flushes and, for a Writer from Create, finishes the gzip stream and
// closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	for _, c := range w.closers {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	w.closers = nil
	if w.tmp != "" {
		if err == nil {
			err = os.Rename(w.tmp, w.final)
		}
		if err != nil {
			os.Remove(w.tmp)
		}
		w.tmp = ""
	}
	return err
}

func appendStringKey(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendJSONString(b, v)
}

// appendJSONString appends s as a JSON string; each byte of invalid UTF-8
// becomes U+FFFD, as the reader would read it.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
