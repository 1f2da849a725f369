package trace

import (
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner is a small allocation-free JSON scanner for the one-object-per-
// line traces: it walks an object's keys and parses the scalar values and
// integer arrays that Mooncake and canonical records hold. It follows RFC
// 8259; invalid UTF-8 in strings becomes U+FFFD, as with encoding/json.
type jsonScanner struct {
	b      []byte
	i      int
	keyBuf []byte // keys with escapes, decoded
	valBuf []byte // string values with escapes, decoded
}

const maxJSONDepth = 64

func (s *jsonScanner) reset(b []byte) { s.b, s.i = b, 0 }

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// rest is the unparsed remainder from the current position, for messages.
func (s *jsonScanner) rest() []byte { return s.b[min(s.i, len(s.b)):] }

// object parses a whole line holding one object, calling fn with each key
// while positioned at its value; fn must consume the value. It returns false
// on a syntax error or when fn does.
func (s *jsonScanner) object(fn func(key []byte) bool) bool {
	s.ws()
	if !s.consume('{') {
		return false
	}
	s.ws()
	if s.consume('}') {
		return s.end()
	}
	for {
		s.ws()
		key, ok := s.str(&s.keyBuf)
		if !ok {
			return false
		}
		s.ws()
		if !s.consume(':') {
			return false
		}
		s.ws()
		if !fn(key) {
			return false
		}
		s.ws()
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			return s.end()
		}
		return false
	}
}

func (s *jsonScanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// null consumes a literal null.
func (s *jsonScanner) null() bool { return s.literal("null") }

func (s *jsonScanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// number returns the raw token of a number (or of whatever stands where one
// should, up to the next delimiter, for the message); callers validate it.
func (s *jsonScanner) number() []byte {
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n':
			return s.b[start:s.i]
		default:
			s.i++
		}
	}
	return s.b[start:s.i]
}

// uint parses a non-negative integer; raw is the token, for messages.
func (s *jsonScanner) uint() (n uint64, raw []byte, ok bool) {
	raw = s.number()
	n, ok = parseUint(raw)
	if ok && len(raw) > 1 && raw[0] == '0' {
		ok = false // JSON forbids leading zeros
	}
	return n, raw, ok
}

// uintArray appends the elements of an array of non-negative integers to dst.
func (s *jsonScanner) uintArray(dst []uint64) ([]uint64, []byte, bool) {
	start := s.i
	if !s.consume('[') {
		return dst, s.number(), false
	}
	s.ws()
	if s.consume(']') {
		return dst, nil, true
	}
	for {
		s.ws()
		n, raw, ok := s.uint()
		if !ok {
			return dst, raw, false
		}
		dst = append(dst, n)
		s.ws()
		if s.consume(',') {
			continue
		}
		if s.consume(']') {
			return dst, nil, true
		}
		return dst, s.b[start:min(s.i+1, len(s.b))], false
	}
}

// str parses a string, returning its contents: a slice of the line when it
// has no escapes and is valid UTF-8, else decoded into *buf.
func (s *jsonScanner) str(buf *[]byte) ([]byte, bool) {
	if !s.consume('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			raw := s.b[start:s.i]
			s.i++
			if utf8.Valid(raw) {
				return raw, true
			}
			*buf = appendValid((*buf)[:0], raw)
			return *buf, true
		}
		if c == '\\' || c < 0x20 {
			break
		}
		s.i++
	}
	out := append((*buf)[:0], s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(out) {
				out = appendValid(nil, out)
			}
			*buf = out
			return out, true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return nil, false
			}
			e := s.b[s.i+1]
			s.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := s.hex4()
				if !ok {
					return nil, false
				}
				if utf16.IsSurrogate(r) {
					// A valid pair makes one rune; anything else is U+FFFD,
					// and a following escape that is not the pair's second
					// half is read again on its own.
					save, pair := s.i, utf8.RuneError
					if s.literal(`\u`) {
						if r2, ok := s.hex4(); ok {
							pair = utf16.DecodeRune(r, r2)
						}
					}
					if pair == utf8.RuneError {
						s.i = save
					}
					r = pair
				}
				out = utf8.AppendRune(out, r)
			default:
				return nil, false
			}
		default:
			out = append(out, c)
			s.i++
		}
	}
	return nil, false
}

func (s *jsonScanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// appendValid appends b with each byte of an invalid UTF-8 sequence
// replaced by U+FFFD, as encoding/json does.
func appendValid(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, b[:n]...)
		}
		b = b[n:]
	}
	return dst
}

// skipValue consumes any JSON value.
func (s *jsonScanner) skipValue() bool { return s.skip(0) }

func (s *jsonScanner) skip(depth int) bool {
	if depth > maxJSONDepth || s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.str(&s.valBuf)
		return ok
	case c == '{':
		s.i++
		s.ws()
		if s.consume('}') {
			return true
		}
		for {
			s.ws()
			if _, ok := s.str(&s.keyBuf); !ok {
				return false
			}
			s.ws()
			if !s.consume(':') {
				return false
			}
			s.ws()
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			if s.consume(',') {
				continue
			}
			return s.consume('}')
		}
	case c == '[':
		s.i++
		s.ws()
		if s.consume(']') {
			return true
		}
		for {
			s.ws()
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			if s.consume(',') {
				continue
			}
			return s.consume(']')
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.null()
	default:
		return validNumber(s.number())
	}
}

// validNumber checks RFC 8259 number syntax.
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i == len(b)
}
