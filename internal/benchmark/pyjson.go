package benchmark

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// The result files of vllm bench serve and inference-perf are written by
// Python's json module, which writes NaN, Infinity and -Infinity for special
// floats (vLLM writes "burstiness": Infinity for a constant-rate run).
// encoding/json refuses those tokens, so the readers first rewrite them as
// strings, then read the document loosely: these formats have many fields,
// vary between versions, and only a few matter here.

// pythonJSON returns data with the bare tokens NaN, Infinity and -Infinity
// outside strings replaced by the strings "NaN", "Infinity", "-Infinity".
func pythonJSON(data []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(data))
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		b := data[i]
		if inString {
			out.WriteByte(b)
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		if b == '"' {
			inString = true
			out.WriteByte(b)
			continue
		}
		replaced := false
		for _, tok := range []string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(data[i:], []byte(tok)) {
				out.WriteString(strconv.Quote(tok))
				i += len(tok) - 1
				replaced = true
				break
			}
		}
		if !replaced {
			out.WriteByte(b)
		}
	}
	return out.Bytes()
}

// decodeResult reads a result file that holds one JSON object. what names
// the format in errors ("vllm bench serve result").
func decodeResult(data []byte, what string) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(pythonJSON(data)))
	dec.UseNumber()
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not valid JSON: %w", what, err)
		}
		docs = append(docs, v)
	}
	switch {
	case len(docs) == 0:
		return nil, fmt.Errorf("%s: empty file", what)
	case len(docs) > 1:
		return nil, fmt.Errorf("%s: holds %d results one after another (written with --append-result?); "+
			"split it into one file per run", what, len(docs))
	}
	obj, ok := docs[0].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a JSON object {…} at the top", what)
	}
	return obj, nil
}

// doc reads fields of a loosely decoded document, naming the format and the
// field path in every error.
type doc struct {
	what string // the format, e.g. "inference-perf report"
}

func (d doc) errorf(path, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %s", d.what, path, fmt.Sprintf(format, args...))
}

// number reads obj[key] as a number; absent and null give ok false. NaN and
// the infinities come back as such; callers decide whether they are allowed.
func (d doc) number(obj map[string]any, path, key string) (v float64, ok bool, err error) {
	raw, present := obj[key]
	if !present || raw == nil {
		return 0, false, nil
	}
	p := joinKey(path, key)
	switch x := raw.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, false, d.errorf(p, "got %s, want a finite number", shorten(string(x)))
		}
		return f, true, nil
	case string:
		switch x {
		case "NaN":
			return math.NaN(), true, nil
		case "Infinity", "inf":
			return math.Inf(1), true, nil
		case "-Infinity":
			return math.Inf(-1), true, nil
		}
		return 0, false, d.errorf(p, "got %s, want a number", shorten(strconv.Quote(x)))
	}
	return 0, false, d.errorf(p, "got %s, want a number", shorten(fmt.Sprint(raw)))
}

// count reads obj[key] as a whole number >= 0.
func (d doc) count(obj map[string]any, path, key string) (n int, ok bool, err error) {
	v, ok, err := d.number(obj, path, key)
	if err != nil || !ok {
		return 0, ok, err
	}
	if v < 0 || v > maxCount || v != math.Trunc(v) {
		return 0, false, d.errorf(joinKey(path, key), "got %s, want a whole number >= 0", formatFloat(v))
	}
	return int(v), true, nil
}

// object reads obj[key] as an object; absent and null give ok false.
func (d doc) object(obj map[string]any, path, key string) (map[string]any, bool, error) {
	raw, present := obj[key]
	if !present || raw == nil {
		return nil, false, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, false, d.errorf(joinKey(path, key), "want an object {…}")
	}
	return m, true, nil
}

// latency reads obj[key] as a latency in scale × the file's unit, refusing
// what cannot be a measured latency.
func (d doc) latency(obj map[string]any, path, key string, scale float64) (float64, bool, error) {
	v, ok, err := d.number(obj, path, key)
	if err != nil || !ok {
		return 0, ok, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, false, d.errorf(joinKey(path, key), "got %s, want a finite latency >= 0", formatFloat(v))
	}
	return v * scale, true, nil
}
