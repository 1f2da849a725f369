package openai

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	type req struct {
		Model string `json:"model"`
		N     *int   `json:"n"`
	}
	for _, tc := range []struct {
		name, body, want string // want: "" decodes, else a part of the error
	}{
		{"good", `{"model":"m","n":1}`, ""},
		{"good with spaces after", "{\"model\":\"m\"}\n\t ", ""},
		{"invalid UTF-8 in a string", "{\"model\":\"\xff\xfe\"}", "not valid UTF-8"},
		{"invalid UTF-8 outside strings", "{\"model\":\"m\"}\xc3\x28", "not valid UTF-8"},
		{"trailing bytes", `{"model":"m"}}`, "syntax error at byte 14"},
		{"a second value", `{"model":"m"} {"model":"n"}`, "syntax error"},
		{"wrong type", `{"model":5}`, "field model has the wrong type (a JSON number)"},
		{"overflowing number", `{"n":1e400}`, "field n has the wrong type (a JSON number)"},
		{"empty", ``, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r req
			err := DecodeRequest([]byte(tc.body), &r)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The error never quotes the body.
	err := DecodeRequest([]byte(`{"model":"m", secret}`), new(req))
	if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "'s'") {
		t.Errorf("error %v quotes the body", err)
	}
}

func TestChoices(t *testing.T) {
	p := func(v int) *int { return &v }
	for _, tc := range []struct {
		n, bestOf *int
		limit     int
		want      int
		param     string // of the FieldError; "" none
	}{
		{nil, nil, 8, 1, ""},
		{p(4), nil, 8, 4, ""},
		{p(2), p(5), 8, 5, ""},
		{p(9), nil, 8, 0, "n"},
		{p(0), nil, 8, 0, "n"},
		{nil, p(-1), 8, 0, "best_of"},
		{p(1), nil, 1, 1, ""},
		{p(1000), nil, 1, 0, "n"},
		{p(1), p(2), 1, 0, "best_of"},
	} {
		k, err := Choices(tc.n, tc.bestOf, tc.limit)
		fe, isField := errors.AsType[FieldError](err)
		switch {
		case tc.param == "" && (err != nil || k != tc.want):
			t.Errorf("Choices(%v, %v, %d) = %d, %v; want %d", tc.n, tc.bestOf, tc.limit, k, err, tc.want)
		case tc.param != "" && (!isField || fe.Param != tc.param):
			t.Errorf("Choices(%v, %v, %d): error %v, want a FieldError on %s", tc.n, tc.bestOf, tc.limit, err, tc.param)
		}
	}
}
