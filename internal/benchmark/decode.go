package benchmark

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
)

// walker decodes an experiment document by hand rather than with
// json.Unmarshal: encoding/json names Go struct fields, stops at the first
// problem, and silently keeps the last of two repeated keys. Walking the
// document member by member lets every problem carry its JSON path, and all
// of them be reported at once.
type walker struct {
	file     string
	problems []Problem
	// bad holds the paths already reported, so that validation does not
	// report the zero value left behind as a second problem.
	bad map[string]bool
}

func newWalker(file string) *walker {
	return &walker{file: file, bad: map[string]bool{}}
}

func (w *walker) add(path, value, msg string) {
	w.problems = append(w.problems, Problem{File: w.file, Path: path, Value: value, Msg: msg})
	w.bad[path] = true
}

// reported says whether path, or an object or array holding it, already has
// a problem.
func (w *walker) reported(path string) bool {
	for p := path; ; {
		if w.bad[p] {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// member is one key and value of a JSON object, in document order.
type member struct {
	key string
	raw json.RawMessage
}

// members lists the members of the object raw in document order, reporting
// a key given twice. ok is false when raw is not an object.
func (w *walker) members(path string, raw json.RawMessage) (ms []member, ok bool) {
	if kind(raw) != '{' {
		w.add(path, quoteRaw(raw), "want an object {…}")
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the '{'
		w.add(path, "", fmt.Sprintf("unreadable object: %v", err))
		return nil, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			w.add(path, "", fmt.Sprintf("unreadable object: %v", err))
			return nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			w.add(path, "", fmt.Sprintf("unreadable object: %v", err))
			return nil, false
		}
		if seen[key] {
			w.add(joinKey(path, key), "", "given twice; keep one")
			continue
		}
		seen[key] = true
		ms = append(ms, member{key, v})
	}
	return ms, true
}

// fields is members for an object with a fixed set of keys: a key outside
// known is reported, with the nearest known keys as suggestions.
func (w *walker) fields(path string, raw json.RawMessage, known []string) (map[string]json.RawMessage, bool) {
	ms, ok := w.members(path, raw)
	if !ok {
		return nil, false
	}
	out := make(map[string]json.RawMessage, len(ms))
	for _, m := range ms {
		if !contains(known, m.key) {
			w.add(joinKey(path, m.key), "", unknownMsg(m.key, known))
			continue
		}
		out[m.key] = m.raw
	}
	return out, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func unknownMsg(key string, known []string) string {
	msg := "unknown field"
	if home, ok := homeOf(key); ok && !contains(known, key) {
		return msg + "; it belongs in " + home
	}
	if near := suggest.Nearest(key, known, 3); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, ", ") + "?"
	}
	return msg + " (fields here: " + strings.Join(known, ", ") + ")"
}

// homeOf says where a field of the format goes, for a field written in the
// wrong object (num_users_per_system_prompt directly under workload).
func homeOf(key string) (string, bool) {
	for _, h := range []struct {
		where string
		keys  []string
	}{
		{"the top level", experimentKeys},
		{"engine", engineKeys},
		{"workload", workloadKeys},
		{"each of workload.stages", stageKeys},
		{"workload.shared_prefix", sharedPrefixKeys},
		{`a stage's figures, measured_ms["<stage>"]`, metricNames},
	} {
		if contains(h.keys, key) {
			return h.where, true
		}
	}
	return "", false
}

// required reports a missing field and returns its raw value otherwise.
func (w *walker) required(obj map[string]json.RawMessage, path, key, want string) (json.RawMessage, bool) {
	raw, ok := obj[key]
	if !ok {
		w.add(joinKey(path, key), "", "missing; "+want)
	}
	return raw, ok
}

func (w *walker) str(path string, raw json.RawMessage) (string, bool) {
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		w.add(path, quoteRaw(raw), "want a string")
		return "", false
	}
	return s, true
}

func (w *walker) boolean(path string, raw json.RawMessage) (bool, bool) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	w.add(path, quoteRaw(raw), "want true or false")
	return false, false
}

// integer reads a whole number. 128.0 and 1e2 are refused: the fields that
// take integers are counts, and a fraction there is a mistake to point out.
func (w *walker) integer(path string, raw json.RawMessage) (int64, bool) {
	text := string(bytes.TrimSpace(raw))
	n, err := strconv.ParseInt(text, 10, 64)
	if err == nil {
		return n, true
	}
	switch {
	case !isNumber(raw):
		w.add(path, quoteRaw(raw), "want a whole number")
	case errors.Is(err, strconv.ErrRange):
		w.add(path, quoteRaw(raw), "want a whole number of at most 19 digits")
	default:
		w.add(path, quoteRaw(raw), "want a whole number, written without a fraction or exponent")
	}
	return 0, false
}

// count is integer for fields held in an int, which are at most maxCount.
func (w *walker) count(path string, raw json.RawMessage) (int, bool) {
	n, ok := w.integer(path, raw)
	if !ok {
		return 0, false
	}
	if n < -maxCount || n > maxCount {
		w.add(path, quoteRaw(raw), fmt.Sprintf("out of range; want at most %d", maxCount))
		return 0, false
	}
	return int(n), true
}

func (w *walker) number(path string, raw json.RawMessage) (float64, bool) {
	if !isNumber(raw) {
		w.add(path, quoteRaw(raw), "want a number")
		return 0, false
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil { // only out of range is possible: the text is a JSON number
		w.add(path, quoteRaw(raw), "want a finite number")
		return 0, false
	}
	return f, true
}

// kind is the first byte of a JSON value: '{', '[', '"', 't', 'f', 'n', a
// digit or '-'; 0 for an empty value.
func kind(raw json.RawMessage) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

func isNumber(raw json.RawMessage) bool {
	k := kind(raw)
	return k == '-' || (k >= '0' && k <= '9')
}

func quoteRaw(raw json.RawMessage) string {
	return shorten(string(bytes.TrimSpace(raw)))
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// joinKey extends a field path by an object key: engine.block_size, or
// measured_ms["-1"] for keys that are not identifiers.
func joinKey(path, key string) string {
	if !identifier.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

// syntaxProblem turns a JSON syntax error into a problem that says where in
// the file it is, by line and column.
func syntaxProblem(file string, data []byte, err error) Problem {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the bytes read, the offending one included; at the
		// end of the input there is no offending byte.
		off := se.Offset
		if off < int64(len(data)) || !strings.Contains(se.Error(), "unexpected end") {
			off = max(off-1, 0)
		}
		line, col := position(data, off)
		return Problem{File: file, Msg: fmt.Sprintf("line %d, column %d: not valid JSON: %v", line, col, se)}
	}
	return Problem{File: file, Msg: "not valid JSON: " + err.Error()}
}

// position converts a byte offset into the 1-based line and column of the
// byte there.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}
