package anonymize

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
	"github.com/fleetdrill/fleetdrill/internal/trace"
)

// Output field names: the canonical JSONL keys an input column can feed.
const (
	FieldT       = "t"
	FieldInput   = "input"
	FieldOutput  = "output"
	FieldModel   = "model"
	FieldClass   = "class"
	FieldTenant  = "tenant"
	FieldUser    = "user"
	FieldSession = "session"
)

// Mapping says which column of a generic log feeds which field. An empty
// name maps nothing. Every column it does not name is dropped.
type Mapping struct {
	Time       string
	TimeFormat TimeFormat
	Input      string
	Output     string
	Tenant     string
	User       string
	Session    string
	Model      string
	Class      string

	// MustExist lists fields (FieldTenant, FieldModel, ...) whose column a
	// CSV header must have, rather than being unmapped when it lacks it:
	// the ones a user named explicitly. The time, input and output columns
	// must always exist.
	MustExist []string
}

// DefaultMapping matches common OpenAI-style gateway logs.
func DefaultMapping() Mapping {
	return Mapping{
		Time:       "timestamp",
		TimeFormat: RFC3339,
		Input:      "prompt_tokens",
		Output:     "completion_tokens",
		Tenant:     "tenant",
		User:       "user",
		Session:    "session_id",
		Model:      "model",
		Class:      "class",
	}
}

// role is what happens to a mapped column's value.
type role uint8

const (
	kept role = iota
	hashed
)

type binding struct {
	field    string
	column   string
	role     role
	required bool     // a row without it is bad
	must     bool     // a CSV header must have it
	path     []string // column split at dots, for JSONL objects
	idx      int      // CSV field index; -1 when the header lacks it
	rows     int      // rows with a value
}

func (m Mapping) bindings() ([]*binding, error) {
	if _, err := ParseTimeFormat(string(m.TimeFormat)); err != nil {
		return nil, err
	}
	all := []*binding{
		{field: FieldT, column: m.Time, required: true},
		{field: FieldInput, column: m.Input, required: true},
		{field: FieldOutput, column: m.Output, required: true},
		{field: FieldModel, column: m.Model},
		{field: FieldClass, column: m.Class},
		{field: FieldTenant, column: m.Tenant, role: hashed},
		{field: FieldUser, column: m.User, role: hashed},
		{field: FieldSession, column: m.Session, role: hashed},
	}
	for _, f := range m.MustExist {
		if !slices.ContainsFunc(all, func(b *binding) bool { return b.field == f }) {
			return nil, fmt.Errorf("mapping: unknown field %q", f)
		}
	}
	var out []*binding
	by := map[string]string{}
	for _, b := range all {
		if b.column == "" {
			if b.required {
				return nil, fmt.Errorf("mapping: no column for %s", b.field)
			}
			continue
		}
		// NB: one column feeding two fields could put a raw id into a
		// clear field (--class-col user); refuse all doubles.
		if other, ok := by[b.column]; ok {
			return nil, fmt.Errorf("mapping: column %s feeds both %s and %s", quoteName(b.column), other, b.field)
		}
		by[b.column] = b.field
		b.must = b.required || slices.Contains(m.MustExist, b.field)
		b.path = strings.Split(b.column, ".")
		b.idx = -1
		out = append(out, b)
	}
	return out, nil
}

// RowError is a malformed row. It names the line and the column, never a
// cell's value: a prompt must not leak through an error message. Reading
// can go on after one.
type RowError struct {
	Line   int
	Column string // empty when the row as a whole is bad
	Reason string
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("line %d: column %s: %s", e.Line, quoteName(e.Column), e.Reason)
}

// Limits on what a generic reader holds.
const (
	maxDroppedNames  = 200     // distinct dropped column names listed
	maxUnlistedNames = 1 << 16 // distinct names past those, counted
)

// maxLineBytes bounds one JSONL line (a var for tests).
var maxLineBytes = 64 << 20

// Generic reads a generic CSV or JSONL log with a Mapping into
// trace.Records, and counts what it keeps, hashes and drops.
type Generic struct {
	format   string
	tf       TimeFormat
	bind     []*binding
	csv      *csv.Reader
	header   []string
	br       *bufio.Reader
	line     int
	origin   time.Duration
	haveOrig bool

	dropped  map[string]int      // rows with a value, by column name
	unlisted map[string]struct{} // dropped names past maxDroppedNames
}

// NewCSV reads the header of a CSV log (comma is the delimiter, ',' when
// 0) and returns its reader. A header that lacks a column the mapping must
// have is an error that suggests near names (only near ones: a headerless
// file's first row is data).
func NewCSV(r io.Reader, m Mapping, comma rune) (*Generic, error) {
	bind, err := m.bindings()
	if err != nil {
		return nil, err
	}
	cr := csv.NewReader(r)
	if comma != 0 {
		cr.Comma = comma
	}
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("empty file: no header line")
	}
	if err != nil {
		return nil, fmt.Errorf("header: %w", csvReason(err))
	}
	header = slices.Clone(header)
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		header[i] = strings.TrimSpace(h)
	}
	g := &Generic{format: "csv", tf: m.TimeFormat, bind: bind, csv: cr, header: header, line: 1, dropped: map[string]int{}, unlisted: map[string]struct{}{}}
	var problems []error
	for _, b := range bind {
		var at []int
		for i, h := range header {
			if h == b.column {
				at = append(at, i)
			}
		}
		switch {
		case len(at) > 1:
			problems = append(problems, fmt.Errorf("header: column %s (%s) appears %d times", quoteName(b.column), b.field, len(at)))
		case len(at) == 1:
			b.idx = at[0]
		case b.must:
			problems = append(problems, fmt.Errorf("header: no column %s for %s%s", quoteName(b.column), b.field, nearNames(b.column, header)))
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	// Every unmapped header name is listed as dropped, with or without
	// values.
	for i, h := range header {
		if _, ok := g.dropped[h]; !ok && !g.mapped(i) && len(g.dropped) < maxDroppedNames {
			g.dropped[h] = 0
		}
	}
	return g, nil
}

// nearNames suggests header names within a small edit distance of want,
// ignoring case. Only near ones: a name that merely contains want could
// be a row of data.
func nearNames(want string, header []string) string {
	var near []string
	lw := strings.ToLower(want)
	for _, h := range header {
		if d := suggest.Distance(lw, strings.ToLower(h)); d <= max(2, len(want)/3) && !slices.Contains(near, h) {
			near = append(near, h)
		}
	}
	if len(near) == 0 {
		return fmt.Sprintf(" (the header has %d columns; is the first line a header?)", len(header))
	}
	q := make([]string, len(near))
	for i, n := range near {
		q[i] = quoteName(n)
	}
	return "; did you mean " + strings.Join(q, " or ") + "?"
}

// NewJSONL returns a reader of a JSONL log: one JSON object per line. A
// column name with dots is a path into nested objects (usage.prompt_tokens)
// unless the object has a key with that exact name.
func NewJSONL(r io.Reader, m Mapping) (*Generic, error) {
	bind, err := m.bindings()
	if err != nil {
		return nil, err
	}
	return &Generic{format: "jsonl", tf: m.TimeFormat, bind: bind, br: bufio.NewReaderSize(r, 64<<10), dropped: map[string]int{}, unlisted: map[string]struct{}{}}, nil
}

// Format is "csv" or "jsonl".
func (g *Generic) Format() string { return g.format }

// AbsoluteTimes says whether the time format is a wall clock: the rows'
// times are then relative to the first row, which need not be the
// earliest, and Run rebases.
func (g *Generic) AbsoluteTimes() bool { return g.tf.absolute() }

// Mapped says which column feeds each output field: those a CSV header
// has, and in JSONL those seen or named explicitly (a default column that
// no row has is not news).
func (g *Generic) Mapped() map[string]string {
	m := make(map[string]string, len(g.bind))
	for _, b := range g.bind {
		if (g.csv != nil && b.idx >= 0) || (g.csv == nil && (b.rows > 0 || b.must)) {
			m[b.field] = b.column
		}
	}
	return m
}

// Dropped lists the dropped columns, by name, with the rows that had a
// value in each, and how many more names were not listed.
func (g *Generic) Dropped() ([]ColumnCount, int) {
	_, _, d, n := g.Columns()
	return d, n
}

// Close does nothing: the caller owns the io.Reader (OpenGeneric's Source
// closes its file).
func (g *Generic) Close() error { return nil }

// Next reads the next row into rec. It returns io.EOF at the end, a
// *RowError for a malformed row (reading can go on), or another error.
func (g *Generic) Next(rec *trace.Record) error {
	if g.csv != nil {
		return g.nextCSV(rec)
	}
	return g.nextJSONL(rec)
}

func csvReason(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		// csv's reasons are fixed strings; its ParseError prints no cell.
		return errors.New(pe.Err.Error())
	}
	return err
}

func (g *Generic) nextCSV(rec *trace.Record) error {
	row, err := g.csv.Read()
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return &RowError{Line: pe.StartLine, Reason: pe.Err.Error()}
		}
		return err
	}
	line, _ := g.csv.FieldPos(0)
	if len(row) != len(g.header) {
		return &RowError{Line: line, Reason: fmt.Sprintf("%d fields, the header has %d", len(row), len(g.header))}
	}
	var vals [8]string
	var have [8]bool
	for i, b := range g.bind {
		if b.idx >= 0 {
			vals[i] = row[b.idx]
			have[i] = strings.TrimSpace(vals[i]) != ""
		}
	}
	if err := g.fill(rec, line, &vals, &have); err != nil {
		return err
	}
	for i, cell := range row {
		if strings.TrimSpace(cell) == "" || g.mapped(i) {
			continue
		}
		g.drop(g.header[i])
	}
	return nil
}

func (g *Generic) mapped(i int) bool {
	for _, b := range g.bind {
		if b.idx == i {
			return true
		}
	}
	return false
}

// drop counts a row's value in a dropped column. Past maxDroppedNames
// distinct names (a log keyed by data, not by a schema) the names are
// only counted, and not listed.
func (g *Generic) drop(name string) {
	if _, ok := g.dropped[name]; ok || len(g.dropped) < maxDroppedNames {
		g.dropped[name]++
		return
	}
	if len(g.unlisted) < maxUnlistedNames {
		g.unlisted[name] = struct{}{}
	}
}

// fill parses the mapped values into rec. vals and have are indexed like
// g.bind. On error rec is left as it was, so no partial row reaches a
// caller that skips bad rows.
func (g *Generic) fill(rec *trace.Record, line int, vals *[8]string, have *[8]bool) error {
	out := trace.Record{Line: line, Blocks: rec.Blocks[:0]}
	for i, b := range g.bind {
		if !have[i] {
			if b.required {
				return &RowError{Line: line, Column: b.column, Reason: "missing"}
			}
			continue
		}
		v := vals[i]
		switch b.field {
		case FieldT:
			t, err := parseTime(g.tf, v)
			if err != nil {
				return &RowError{Line: line, Column: b.column, Reason: fmt.Sprintf("%v in format %s", err, g.tf)}
			}
			if g.tf.absolute() {
				if !g.haveOrig {
					g.origin, g.haveOrig = t, true
				}
				t -= g.origin
			}
			out.Time = t
		case FieldInput, FieldOutput:
			n, err := parseTokens(v)
			if err != nil {
				return &RowError{Line: line, Column: b.column, Reason: err.Error()}
			}
			if b.field == FieldInput {
				out.Input = n
			} else {
				out.Output = n
			}
		case FieldModel:
			out.Model = v
		case FieldClass:
			out.Class = v
		case FieldTenant:
			out.Tenant = v
		case FieldUser:
			out.User = v
		case FieldSession:
			out.Session = v
		}
	}
	for i, b := range g.bind {
		if have[i] {
			b.rows++
		}
	}
	*rec = out
	return nil
}

func (g *Generic) nextJSONL(rec *trace.Record) error {
	for {
		raw, err := g.readLine()
		if err == io.EOF {
			return io.EOF
		}
		if err != nil {
			return err
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		return g.parseJSONL(rec, raw)
	}
}

// readLine reads one line (without its end), at most maxLineBytes; a
// longer one is skipped and reported.
func (g *Generic) readLine() ([]byte, error) {
	var buf []byte
	too := false
	for {
		chunk, err := g.br.ReadSlice('\n')
		if !too {
			if len(buf)+len(chunk) > maxLineBytes {
				too, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && (len(chunk) > 0 || len(buf) > 0 || too) {
			err = nil
		}
		if err != nil {
			return nil, err
		}
		g.line++
		if too {
			return nil, &RowError{Line: g.line, Reason: fmt.Sprintf("line longer than %d bytes", maxLineBytes)}
		}
		return buf, nil
	}
}

func (g *Generic) parseJSONL(rec *trace.Record, raw []byte) error {
	line := g.line
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	// NB: json's syntax errors quote a character of the input; say where
	// instead.
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return &RowError{Line: line, Reason: "not a JSON object"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &RowError{Line: line, Reason: "more than one JSON value on the line"}
	}
	var vals [8]string
	var have [8]bool
	used := map[string]bool{}   // full paths of mapped values
	parent := map[string]bool{} // paths of objects that hold one
	for i, b := range g.bind {
		v, nested, ok := lookup(obj, b)
		if !ok {
			continue
		}
		used[b.column] = true
		for j := 1; nested && j < len(b.path); j++ {
			parent[strings.Join(b.path[:j], ".")] = true
		}
		s, err := scalar(v, b, g.tf)
		if err != nil {
			return &RowError{Line: line, Column: b.column, Reason: err.Error()}
		}
		vals[i], have[i] = s, strings.TrimSpace(s) != ""
	}
	if err := g.fill(rec, line, &vals, &have); err != nil {
		return err
	}
	g.dropJSON(obj, "", used, parent)
	return nil
}

// lookup finds b's value in obj: the key named b.column, else the path
// through nested objects. It says whether it took the path, and whether
// there was a non-null value.
func lookup(obj map[string]any, b *binding) (v any, nested, ok bool) {
	if v, ok := obj[b.column]; ok {
		return v, false, v != nil
	}
	if len(b.path) < 2 {
		return nil, false, false
	}
	cur := obj
	for i, k := range b.path {
		v, ok := cur[k]
		if !ok || v == nil {
			return nil, false, false
		}
		if i == len(b.path)-1 {
			return v, true, true
		}
		if cur, ok = v.(map[string]any); !ok {
			return nil, false, false
		}
	}
	return nil, false, false
}

// scalar turns a JSON value into the text the CSV reader would have seen.
func scalar(v any, b *binding, tf TimeFormat) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		if b.field == FieldT && !tf.numeric() {
			return "", fmt.Errorf("a number, but the time format is %s; use --time-format unix, unix-ms, seconds or ms", tf)
		}
		return v.String(), nil
	case bool:
		return "", errors.New("a boolean, want a string or a number")
	case map[string]any:
		return "", errors.New("an object, want a string or a number")
	case []any:
		return "", errors.New("an array, want a string or a number")
	}
	return "", errors.New("not a string or a number")
}

func (g *Generic) dropJSON(obj map[string]any, prefix string, used, parent map[string]bool) {
	for k, v := range obj {
		full := prefix + k
		if used[full] {
			continue
		}
		if sub, ok := v.(map[string]any); ok && parent[full] {
			g.dropJSON(sub, full+".", used, parent)
			continue
		}
		if v != nil {
			g.drop(full)
		}
	}
}

// ColumnCount is one input column and what became of it.
type ColumnCount struct {
	Field  string `json:"field,omitempty"`  // the output field it feeds; empty when dropped
	Column string `json:"column,omitempty"` // the input column; empty when a trace reader maps it
	Rows   int    `json:"rows"`             // rows that had a value in it
}

// Columns says what the reader kept, hashed and dropped so far: kept and
// hashed in output-field order, dropped by name; unlisted counts dropped
// names past the listing limit.
func (g *Generic) Columns() (keptCols, hashedCols, droppedCols []ColumnCount, unlisted int) {
	for _, b := range g.bind {
		c := ColumnCount{Field: b.field, Column: b.column, Rows: b.rows}
		if b.role == hashed {
			hashedCols = append(hashedCols, c)
		} else {
			keptCols = append(keptCols, c)
		}
	}
	for name, n := range g.dropped {
		droppedCols = append(droppedCols, ColumnCount{Column: name, Rows: n})
	}
	slices.SortFunc(droppedCols, func(a, b ColumnCount) int { return strings.Compare(a.Column, b.Column) })
	return keptCols, hashedCols, droppedCols, len(g.unlisted)
}

// quoteName prints a column name plainly when it is tame, quoted when it
// has spaces, quotes or unprintable runes (a terminal escape in a header
// must not reach a terminal).
func quoteName(s string) string {
	if s != "" && utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' || r == '\\'
	}) {
		return s
	}
	return strconv.Quote(s)
}
