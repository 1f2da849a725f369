package trace

import (
	"fmt"
	"io"
	"math"
	"time"
)

// Options control how a file is read.
type Options struct {
	// Format names the layout (see FormatNames); "" detects it from the
	// header (CSV) or the first object's keys (JSONL).
	Format string
	// SkipBadRows skips malformed rows instead of failing on the first one.
	// Skipped rows are counted (Skipped) and the first few kept with their
	// line numbers and reasons (SkippedRows): never silently dropped.
	SkipBadRows bool
}

// Reader streams the requests of a trace with constant memory. Next reuses
// the Record it is given, Blocks' backing array included, so steady-state
// reading allocates nothing per row (string fields are interned up to a
// bound).
type Reader struct {
	base
	rawTime   []byte // the current row's time field, for order errors
	timeField string
	started   bool
	origin    int64 // absolute formats: the first row's 100 ns ticks
	prev      time.Duration
	prevLine  int
	strs      [5]intern
	js        jsonScanner
}

// base is what request, job and node readers share: the line source, the
// bound format and the CSV splitter.
type base struct {
	src *lineSource
	lay layout
	row csvRow
	err error // sticky: io.EOF or the error that stopped reading
}

// Format is the format being read, detected or as given.
func (b *base) Format() string { return b.lay.f.name }

// Name is the file name messages use.
func (b *base) Name() string { return b.src.name }

// Skipped is how many malformed rows SkipBadRows has skipped so far.
func (b *base) Skipped() int { return b.src.skipped }

// SkippedRows returns the first MaxSkippedRows skipped rows, with their line
// numbers and reasons.
func (b *base) SkippedRows() []RowError { return append([]RowError(nil), b.src.rows...) }

// Close releases the file (and gzip stream) behind the reader.
func (b *base) Close() error { return b.src.close() }

// split splits a CSV line and checks its field count against the header.
func (b *base) split(line []byte) *RowError {
	if !b.row.split(line) {
		return b.src.rowError("row", line, "valid CSV (a stray or unterminated quote)")
	}
	if n := len(b.row.fields); n != b.lay.fields {
		return &RowError{File: b.src.name, Line: b.src.line, Field: "row",
			Got: fmt.Sprintf("%d fields in %s", n, quote(line)), Want: fmt.Sprintf("%d, as in the header", b.lay.fields)}
	}
	return nil
}

// field is the value of the format's column c in the current row; nil when
// an optional column is absent.
func (b *base) field(c int) []byte {
	if i := b.lay.col[c]; i >= 0 {
		return b.row.fields[i]
	}
	return nil
}

func newBase(src *lineSource, opts Options, k kind) (base, error) {
	lay, err := detect(src, opts.Format)
	if err != nil {
		return base{}, err
	}
	if lay.f.kind != k {
		return base{}, fmt.Errorf("%s: %s is %s, not %s: read it with trace.%s", src.name, lay.f.name, lay.f.kind, k, lay.f.kind.opener())
	}
	return base{src: src, lay: lay}, nil
}

// Open opens a request trace, gzipped or not (detected by its magic bytes,
// whatever the name); a path "embedded:NAME" reads the embedded trace NAME
// (package traces).
func Open(path string, opts Options) (*Reader, error) {
	src, err := openLineSource(path, opts.SkipBadRows)
	if err != nil {
		return nil, err
	}
	r, err := newReader(src, opts)
	if err != nil {
		src.close()
		return nil, err
	}
	return r, nil
}

// NewReader reads a request trace from r; name is used in messages. Close
// does not close r.
func NewReader(r io.Reader, name string, opts Options) (*Reader, error) {
	src, err := newLineSource(r, name, opts.SkipBadRows)
	if err != nil {
		return nil, err
	}
	return newReader(src, opts)
}

func newReader(src *lineSource, opts Options) (*Reader, error) {
	b, err := newBase(src, opts, kindRequests)
	if err != nil {
		return nil, err
	}
	r := &Reader{base: b}
	switch b.lay.f.name {
	case FormatAzure:
		r.timeField = "TIMESTAMP"
	case FormatBurstGPT:
		r.timeField = "Timestamp"
	case FormatGenAI:
		r.timeField = "gmt_create"
	case FormatMooncake:
		r.timeField = "timestamp"
	case FormatCanonical:
		r.timeField = "t"
	}
	return r, nil
}

// Start is the wall-clock time of Record.Time 0 for formats with absolute
// timestamps (azure, alibaba-genai): the first request's arrival, in UTC.
// ok is false for relative formats, and before the first record.
func (r *Reader) Start() (t time.Time, ok bool) {
	if !r.started || !r.absolute() {
		return time.Time{}, false
	}
	return ticksToTime(r.origin), true
}

func (r *Reader) absolute() bool {
	return r.lay.f.name == FormatAzure || r.lay.f.name == FormatGenAI
}

// Next reads the next request into rec, returning io.EOF after the last.
// A malformed row is a *RowError unless Options.SkipBadRows is set. Request
// traces must be sorted by arrival (ties keep file order): a row earlier
// than the one before it is a malformed row.
func (r *Reader) Next(rec *Record) error {
	return r.nextRow(func(line []byte) *RowError {
		*rec = Record{Blocks: rec.Blocks[:0], Line: r.src.line}
		var e *RowError
		switch r.lay.f.name {
		case FormatAzure:
			e = r.parseAzure(line, rec)
		case FormatBurstGPT:
			e = r.parseBurstGPT(line, rec)
		case FormatGenAI:
			e = r.parseGenAI(line, rec)
		case FormatMooncake:
			e = r.parseMooncake(line, rec)
		case FormatCanonical:
			e = r.parseCanonical(line, rec)
		}
		if e == nil {
			e = r.inOrder(rec)
		}
		return e
	})
}

// nextRow reads lines until parse accepts one (nil), skipping or failing
// on malformed rows as the options say. Its error is sticky: io.EOF, or
// what stopped reading, again on every later call. (parse does not escape,
// so the closures the readers pass cost no allocation per row.)
func (b *base) nextRow(parse func(line []byte) *RowError) error {
	if b.err != nil {
		return b.err
	}
	for {
		line, err := b.src.next()
		if err != nil {
			b.err = err
			return err
		}
		e := parse(line)
		if e == nil {
			return nil
		}
		if err := b.src.bad(e); err != nil {
			b.err = err
			return err
		}
	}
}

// inOrder checks that rec does not arrive before the previous row and
// commits it as the new previous.
func (r *Reader) inOrder(rec *Record) *RowError {
	if r.prevLine > 0 && rec.Time < r.prev {
		return &RowError{File: r.src.name, Line: rec.Line, Field: r.timeField, Got: quote(r.rawTime),
			Want: fmt.Sprintf("a time no earlier than line %d's (request traces must be sorted by arrival)", r.prevLine)}
	}
	r.prev, r.prevLine = rec.Time, rec.Line
	return nil
}

const (
	wantCount    = "a non-negative integer"
	wantWallTime = "a time like 2023-11-16 18:17:03.9799600 or 2024-05-10 00:00:00.0000000+00:00"
	wantSeconds  = "non-negative seconds, a decimal number"
)

// wallTime sets rec.Time from absolute ticks, relative to the first row.
func (r *Reader) wallTime(rec *Record, field string, raw []byte) *RowError {
	ticks, ok := parseWallTime(raw)
	if !ok {
		return r.src.rowError(field, raw, wantWallTime)
	}
	r.rawTime = raw
	if !r.started {
		// The first good row is the origin. It is committed here, the time
		// field being parsed last, so a bad first row cannot set it.
		r.origin, r.started = ticks, true
	}
	d := ticks - r.origin
	if d > math.MaxInt64/100 || d < math.MinInt64/100 {
		return r.src.rowError(field, raw, "a time within 292 years of the first row's")
	}
	rec.Time = time.Duration(d * 100)
	return nil
}

func (r *Reader) parseAzure(line []byte, rec *Record) *RowError {
	if e := r.split(line); e != nil {
		return e
	}
	var ok bool
	if rec.Input, ok = parseCount(r.field(azInput)); !ok {
		return r.src.rowError("ContextTokens", r.field(azInput), wantCount)
	}
	if rec.Output, ok = parseCount(r.field(azOutput)); !ok {
		return r.src.rowError("GeneratedTokens", r.field(azOutput), wantCount)
	}
	return r.wallTime(rec, "TIMESTAMP", r.field(azTime))
}

func (r *Reader) parseBurstGPT(line []byte, rec *Record) *RowError {
	if e := r.split(line); e != nil {
		return e
	}
	var ok bool
	ts := r.field(bgTime)
	if rec.Time, ok = parseSeconds(ts); !ok {
		return r.src.rowError("Timestamp", ts, wantSeconds)
	}
	r.rawTime = ts
	if rec.Input, ok = parseCount(r.field(bgInput)); !ok {
		return r.src.rowError("Request tokens", r.field(bgInput), wantCount)
	}
	if rec.Output, ok = parseCount(r.field(bgOutput)); !ok {
		return r.src.rowError("Response tokens", r.field(bgOutput), wantCount)
	}
	rec.Model = r.strs[0].get(r.field(bgModel))
	rec.Class = r.strs[1].get(r.field(bgLogType))
	rec.Session = r.strs[2].get(r.field(bgSession))
	return nil
}

// parseGenAI maps Alibaba's diffusion-serving trace: gmt_create is the
// arrival, predict_type the class, groupId the tenant, the checkpoint the
// model, prompt_length the input, exec_time_seconds the service time. There
// are no generated tokens. An empty prompt_length (25 rows of the published
// trace) reads as 0.
func (r *Reader) parseGenAI(line []byte, rec *Record) *RowError {
	if e := r.split(line); e != nil {
		return e
	}
	var ok bool
	if p := r.field(gaPrompt); len(p) > 0 {
		if rec.Input, ok = parseIntegral(p); !ok {
			return r.src.rowError("prompt_length", p, "a non-negative whole number (63 or 63.0) or empty")
		}
	}
	if rec.Service, ok = parseSeconds(r.field(gaExec)); !ok {
		return r.src.rowError("exec_time_seconds", r.field(gaExec), wantSeconds)
	}
	rec.Class = r.strs[0].get(r.field(gaType))
	rec.Tenant = r.strs[1].get(r.field(gaGroup))
	rec.Model = r.strs[2].get(r.field(gaModel))
	return r.wallTime(rec, "gmt_create", r.field(gaTime))
}

// maxMillis keeps millisecond timestamps within a time.Duration.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

func (r *Reader) parseMooncake(line []byte, rec *Record) *RowError {
	s := &r.js
	s.reset(line)
	var e *RowError
	var seen uint8
	dup := func(bit uint8, key string) bool {
		if seen&bit != 0 {
			e = r.src.rowError(key, line, "each key once")
			return true
		}
		seen |= bit
		return false
	}
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "timestamp":
			if dup(1, "timestamp") {
				return false
			}
			n, raw, ok := s.uint()
			if !ok || n > uint64(maxMillis) {
				e = r.src.rowError("timestamp", raw, "non-negative integer milliseconds")
				return false
			}
			rec.Time, r.rawTime = time.Duration(n)*time.Millisecond, raw
		case "input_length":
			if dup(2, "input_length") {
				return false
			}
			n, raw, ok := s.uint()
			if !ok || n > maxCount {
				e = r.src.rowError("input_length", raw, wantCount)
				return false
			}
			rec.Input = int(n)
		case "output_length":
			if dup(4, "output_length") {
				return false
			}
			n, raw, ok := s.uint()
			if !ok || n > maxCount {
				e = r.src.rowError("output_length", raw, wantCount)
				return false
			}
			rec.Output = int(n)
		case "hash_ids":
			if dup(8, "hash_ids") {
				return false
			}
			var raw []byte
			var ok bool
			if rec.Blocks, raw, ok = s.uintArray(rec.Blocks[:0]); !ok {
				e = r.src.rowError("hash_ids", raw, "an array of non-negative integers")
				return false
			}
		default:
			return s.skipValue() // other keys are not ours to judge
		}
		return true
	})
	if e != nil {
		return e
	}
	if !ok {
		return r.src.rowError("row", s.rest(), "one JSON object per line")
	}
	for _, k := range [...]struct {
		bit  uint8
		name string
	}{{1, "timestamp"}, {2, "input_length"}, {4, "output_length"}} {
		if seen&k.bit == 0 {
			return &RowError{File: r.src.name, Line: r.src.line, Field: k.name, Got: "no such key", Want: "every row to have timestamp, input_length and output_length"}
		}
	}
	return nil
}
