package trace

import "bytes"

// csvRow splits CSV lines into fields without allocating in steady state.
// Quoted fields (RFC 4180: "a,b", "say ""hi""") are unquoted into scratch; a
// quoted field cannot span lines.
type csvRow struct {
	fields  [][]byte
	scratch []byte
}

// split splits line into r.fields; ok=false for a stray quote.
func (r *csvRow) split(line []byte) bool {
	r.fields = r.fields[:0]
	if bytes.IndexByte(line, '"') < 0 {
		for {
			i := bytes.IndexByte(line, ',')
			if i < 0 {
				r.fields = append(r.fields, line)
				return true
			}
			r.fields = append(r.fields, line[:i])
			line = line[i+1:]
		}
	}
	// Unquoted text never grows, so scratch never reallocates below and the
	// fields already cut from it stay valid.
	if cap(r.scratch) < len(line) {
		r.scratch = make([]byte, 0, len(line))
	}
	r.scratch = r.scratch[:0]
	for {
		if len(line) == 0 || line[0] != '"' {
			i := bytes.IndexByte(line, ',')
			f := line
			if i >= 0 {
				f = line[:i]
			}
			if bytes.IndexByte(f, '"') >= 0 {
				return false
			}
			r.fields = append(r.fields, f)
			if i < 0 {
				return true
			}
			line = line[i+1:]
			continue
		}
		start := len(r.scratch)
		j := 1
		for {
			k := bytes.IndexByte(line[j:], '"')
			if k < 0 {
				return false // unterminated
			}
			r.scratch = append(r.scratch, line[j:j+k]...)
			j += k + 1
			if j < len(line) && line[j] == '"' {
				r.scratch = append(r.scratch, '"')
				j++
				continue
			}
			break
		}
		r.fields = append(r.fields, r.scratch[start:len(r.scratch):len(r.scratch)])
		switch {
		case j == len(line):
			return true
		case line[j] == ',':
			line = line[j+1:]
		default:
			return false
		}
	}
}

// intern returns strings for repeated small vocabularies (model names, log
// types, QoS classes) without allocating once a value has been seen.
type intern struct {
	m map[string]string
}

// internMax bounds an intern table; values beyond it are allocated per row,
// so memory stays constant for high-cardinality columns.
const internMax = 4096

func (t *intern) get(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := t.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if t.m == nil {
		t.m = make(map[string]string)
	}
	if len(t.m) < internMax {
		t.m[s] = s
	}
	return s
}
