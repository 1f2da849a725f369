package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrNotUTF8 is the refusal of a body that is not UTF-8.
var ErrNotUTF8 = errors.New("request body is not valid UTF-8")

// DecodeRequest decodes a request body into v, as strictly as the gateway
// and the node both read one: UTF-8 only (RFC 8259; Go's decoder would
// replace invalid bytes in a string and pass them through a raw value),
// one JSON value and nothing after it. Its error is a sentence for the
// client (400 invalid_request_error): ErrNotUTF8, or what is wrong with
// the JSON, and where, never any of the body's text.
func DecodeRequest(body []byte, v any) error {
	if !utf8.Valid(body) {
		return ErrNotUTF8
	}
	// json.Unmarshal, not a Decoder: it refuses bytes after the value.
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("request body is not valid JSON: %s", jsonProblem(err))
	}
	return nil
}

// jsonProblem says what is wrong with a body by its decoding error: where,
// and the field whose value has the wrong type. The decoder's own text
// may quote the body (an invalid character), which a log must not carry.
func jsonProblem(err error) string {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		// Value is "string", "number", or "number 1e400": the kind only.
		kind, _, _ := strings.Cut(te.Value, " ")
		if te.Field != "" {
			return fmt.Sprintf("field %s has the wrong type (a JSON %s)", te.Field, kind)
		}
		return fmt.Sprintf("the wrong type (a JSON %s)", kind)
	}
	return "not one JSON value"
}

// FieldError is a request field's invalid value: a 400 invalid_value whose
// param is the field.
type FieldError struct{ Param, Msg string }

func (e FieldError) Error() string { return e.Msg }

// Choices is how many generations a request of n and best_of (nil:
// absent) asks for: max(n, best_of), at least 1. Each must be in [1,
// limit]; beyond, a FieldError naming it.
func Choices(n, bestOf *int, limit int) (int, error) {
	k := 1
	for _, f := range []struct {
		name string
		v    *int
	}{{"n", n}, {"best_of", bestOf}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 || *f.v > limit {
			if limit == 1 {
				return 0, FieldError{f.name, fmt.Sprintf("%s must be 1: this server generates one choice a request, got %d", f.name, *f.v)}
			}
			return 0, FieldError{f.name, fmt.Sprintf("%s must be between 1 and %d, got %d", f.name, limit, *f.v)}
		}
		k = max(k, *f.v)
	}
	return k, nil
}
