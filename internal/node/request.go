package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/internal/openai"
)

// MaxTokenCount bounds every token count a client states (the
// X-Fleetdrill-*-Tokens headers, x_fleetdrill's fields): no model's context
// is longer, and two such counts add up far from overflowing. A count
// within it but past the model's context is refused as vLLM refuses a
// prompt that long (context_length_exceeded), since a replay states the
// lengths of real prompts.
const MaxTokenCount = 1<<31 - 1

// maxOutputTokens bounds the requested output length.
const maxOutputTokens = 1 << 20

// request is the part of an OpenAI request the node reads. Message and
// prompt content are counted as they are decoded, never held.
type request struct {
	Model               string       `json:"model"`
	Messages            []message    `json:"messages"`
	Prompt              *tokenCount  `json:"prompt"`
	MaxTokens           *int         `json:"max_tokens"`
	MaxCompletionTokens *int         `json:"max_completion_tokens"`
	N                   *int         `json:"n"`
	BestOf              *int         `json:"best_of"`
	Stream              bool         `json:"stream"`
	X                   *fleetdrillX `json:"x_fleetdrill"`
	// vLLM's sampling extensions. The node never stops at an end of
	// sequence, so ignore_eos changes nothing; min_tokens raises a
	// default output length and must not exceed a requested one.
	MinTokens     *int `json:"min_tokens"`
	IgnoreEOS     bool `json:"ignore_eos"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// KV is vLLM's kv_transfer_params (kv.go).
	KV *kvParams `json:"kv_transfer_params"`
}

// fleetdrillX is the x_fleetdrill field: exact lengths (nil: absent).
type fleetdrillX struct {
	InputTokens  *int `json:"input_tokens"`
	OutputTokens *int `json:"output_tokens"`
}

type message struct {
	Content tokenCount `json:"content"`
}

// tokenCount is a prompt's or a message content's token estimate
// (countRaw), counted as the JSON is decoded: the text itself is never
// copied out of the body.
type tokenCount int

func (c *tokenCount) UnmarshalJSON(b []byte) error {
	*c = tokenCount(countRaw(b))
	return nil
}

// EstimateTokens is the node's token estimate for text: ceil(characters/4),
// at least 1 for non-empty text.
func EstimateTokens(text string) int {
	return estimateRunes(utf8.RuneCountInString(text))
}

func estimateRunes(n int) int { return (n + 3) / 4 }

// countRaw estimates the tokens of a prompt or message content: a string;
// a list of strings; a list of token ids (counted exactly) or of such lists;
// a list of content parts (their text fields); anything else by its JSON
// length. raw is valid JSON (the body was checked whole before decoding).
// Nothing is copied out of it: a string is counted in place, and a list is
// counted element by element (eachElement; token ids into a list of
// zero-size values), so a hostile body costs its own size, not a multiple.
func countRaw(raw json.RawMessage) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0
	}
	if n, ok := stringRunes(raw); ok {
		return estimateRunes(n)
	}
	if raw[0] == '[' {
		if t, ok := countList(raw); ok {
			return t
		}
	}
	return (len(raw) + 3) / 4
}

// countList counts a list by the first form that reads all of it: strings,
// token ids, lists of token ids, content parts. Its first element rules out
// the forms it cannot start (a null or an empty list rules out none), so
// that a long list is not decoded once per form.
func countList(raw []byte) (int, bool) {
	first := byte(']')
	if rest := bytes.TrimLeft(raw[1:], " \t\r\n"); len(rest) > 0 {
		first = rest[0]
	}
	anyForm := first == 'n' || first == ']'
	if first == '"' || anyForm {
		t := 0
		if eachElement(raw, func(c *runeCount) { t += estimateRunes(int(*c)) }) {
			return t, true
		}
	}
	if first == '-' || (first >= '0' && first <= '9') || anyForm {
		var ids []tokenID // zero-size: a list of a million ids takes no memory
		if json.Unmarshal(raw, &ids) == nil {
			return len(ids), true
		}
	}
	if first == '[' || anyForm {
		t := 0
		if eachElement(raw, func(l *idList) { t += int(*l) }) {
			return t, true
		}
	}
	if first == '{' || anyForm {
		t := 0
		if eachElement(raw, func(p *contentPart) { t += estimateRunes(int(p.Text)) }) {
			return t, true
		}
	}
	return 0, false
}

// contentPart is a content part: its text's length.
type contentPart struct {
	Text runeCount `json:"text"`
}

// eachElement decodes each element of the JSON list raw into a fresh T and
// hands it to f; false when raw is not a list or an element does not
// decode. One element is held at a time.
func eachElement[T any](raw []byte, f func(*T)) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return false
	}
	for dec.More() {
		var v T
		if dec.Decode(&v) != nil {
			return false
		}
		f(&v)
	}
	tok, err := dec.Token()
	return err == nil && tok == json.Delim(']')
}

var errNotCounted = errors.New("not this form")

// runeCount is a JSON string's length in characters, counted in place.
type runeCount int

func (c *runeCount) UnmarshalJSON(b []byte) error {
	if string(b) == "null" { // as json leaves a string: empty
		*c = 0
		return nil
	}
	n, ok := stringRunes(b)
	if !ok {
		return errNotCounted
	}
	*c = runeCount(n)
	return nil
}

// tokenID is a token id: an integer, checked and dropped (a list of them
// takes no memory).
type tokenID struct{}

func (*tokenID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" { // as json leaves an int64: 0, an id
		return nil
	}
	if _, err := strconv.ParseInt(string(b), 10, 64); err != nil {
		return errNotCounted
	}
	return nil
}

// idList is the length of a list of token ids.
type idList int

func (l *idList) UnmarshalJSON(b []byte) error {
	var ids []tokenID
	if err := json.Unmarshal(b, &ids); err != nil {
		return err
	}
	*l = idList(len(ids))
	return nil
}

// stringRunes is the number of characters of the JSON string literal b
// (its quotes included) once decoded, as encoding/json decodes it (an
// escape is one character, a valid surrogate pair one, an invalid
// surrogate or byte one replacement character); ok is false when b is not
// a string literal. b is valid JSON: the escapes are not checked again.
func stringRunes(b []byte) (n int, ok bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return 0, false
	}
	s := b[1 : len(b)-1]
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == 'u':
			r, ok := hex4(s[i+2:])
			if !ok {
				return 0, false
			}
			i += 6
			if utf16.IsSurrogate(r) && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if r2, ok := hex4(s[i+2:]); ok && utf16.DecodeRune(r, r2) != unicode.ReplacementChar {
					i += 6
				}
			}
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			_, size := utf8.DecodeRune(s[i:])
			i += size
		}
		n++
	}
	return n, true
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v), err == nil
}

// parsed is what the node takes from a request: the decoded fields and the
// token counts, each within its bounds.
type parsed struct {
	req     request
	in, out int
}

// badRequest is a request the node refuses before its model is looked up:
// a 400 whose code says why, its param the field at fault ("" none).
type badRequest struct {
	code, param, msg string
	reason           string // refused_total's
}

// parseRequest reads body (a chat request when chat) with headers h: the
// gateway's decoding rules (openai.DecodeRequest), one choice, and the
// input and output token counts, each bounded before any arithmetic.
func parseRequest(body []byte, h http.Header, chat bool, defaultMax int, vllm bool, defaultModel string) (parsed, *badRequest) {
	var p parsed
	if err := openai.DecodeRequest(body, &p.req); err != nil {
		return p, &badRequest{code: "invalid_body", msg: err.Error(), reason: refuseBadBody}
	}
	req := &p.req
	if req.Model == "" && vllm {
		// vLLM serves a request that names no model with its own.
		req.Model = defaultModel
	}
	if req.Model == "" {
		return p, &badRequest{code: "missing_model", param: "model", msg: "model: required", reason: refuseBadValue}
	}
	if chat && len(req.Messages) == 0 {
		return p, &badRequest{code: "missing_messages", param: "messages", msg: "messages: required, want at least one", reason: refuseBadValue}
	}
	// The node generates one choice; n = 4 answered with one would drop
	// three the client asked for.
	if _, err := openai.Choices(req.N, req.BestOf, 1); err != nil {
		fe, _ := errors.AsType[openai.FieldError](err)
		return p, &badRequest{code: "invalid_value", param: fe.Param, msg: err.Error(), reason: refuseBadValue}
	}
	var err error
	if p.in, err = req.inputTokens(h, chat); err != nil {
		return p, invalidValue(err)
	}
	if p.out, err = req.outputTokens(h, defaultMax); err != nil {
		return p, invalidValue(err)
	}
	return p, nil
}

// countError is a token count out of its bounds, naming where it came from.
type countError struct{ param, msg string }

func (e countError) Error() string { return e.msg }

func invalidValue(err error) *badRequest {
	ce, _ := errors.AsType[countError](err)
	return &badRequest{code: "invalid_value", param: ce.param, msg: err.Error(), reason: refuseBadValue}
}

// statedCount checks a count a client stated, from where (a header or a
// field): an integer in [1, MaxTokenCount].
func statedCount(where string, v int) (int, error) {
	if v < 1 || v > MaxTokenCount {
		return 0, countError{where, fmt.Sprintf("%s: got %d, want an integer in [1, %d]", where, v, MaxTokenCount)}
	}
	return v, nil
}

// headerCount parses a count header.
func headerCount(h http.Header, name string) (v int, set bool, err error) {
	s := h.Get(name)
	if s == "" {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		if len(s) > 24 {
			s = s[:24] + "..."
		}
		return 0, true, countError{name, fmt.Sprintf("%s: got %q, want an integer in [1, %d]", name, s, MaxTokenCount)}
	}
	if n < 1 || n > MaxTokenCount {
		return 0, true, countError{name, fmt.Sprintf("%s: got %d, want an integer in [1, %d]", name, n, MaxTokenCount)}
	}
	return int(n), true, nil
}

func (req *request) inputTokens(h http.Header, chat bool) (int, error) {
	if req.X != nil && req.X.InputTokens != nil {
		return statedCount("x_fleetdrill.input_tokens", *req.X.InputTokens)
	}
	if t, set, err := headerCount(h, HeaderInputTokens); set {
		return t, err
	}
	t := 0
	if chat {
		for _, m := range req.Messages {
			t += int(m.Content)
		}
	} else if req.Prompt != nil {
		t = int(*req.Prompt)
	}
	return max(t, 1), nil
}

func (req *request) outputTokens(h http.Header, def int) (int, error) {
	t, named, param := def, true, "max_tokens"
	switch {
	case req.X != nil && req.X.OutputTokens != nil:
		t, param = *req.X.OutputTokens, "x_fleetdrill.output_tokens"
	default:
		v, set, err := headerCount(h, HeaderOutputTokens)
		switch {
		case err != nil:
			return 0, err
		case set:
			t, param = v, HeaderOutputTokens
		case req.MaxCompletionTokens != nil:
			t, param = *req.MaxCompletionTokens, "max_completion_tokens"
		case req.MaxTokens != nil:
			t = *req.MaxTokens
		default:
			named = false
		}
	}
	if m := req.MinTokens; m != nil {
		// vLLM's checks (SamplingParams), in its words; its ValueError
		// names no param.
		switch {
		case *m < 0:
			return 0, countError{"", fmt.Sprintf("min_tokens must be greater than or equal to 0, got %d", *m)}
		case !named:
			t = max(t, *m)
		case *m > t:
			return 0, countError{"", fmt.Sprintf("min_tokens must be less than or equal to max_tokens=%d, got %d", t, *m)}
		}
	}
	if t < 1 || t > maxOutputTokens {
		return 0, countError{param, fmt.Sprintf("%s: got %d, want an integer in [1, %d]", param, t, maxOutputTokens)}
	}
	return t, nil
}

// Reasons of a refusal of the node's own, before its engine saw the
// request (fleetdrill_node_refused_total{reason}); each is also counted in
// fleetdrill_node_requests_total by its status.
const (
	refuseUnauthorized = "unauthorized"     // no or a wrong API key (401)
	refuseTooLarge     = "body-too-large"   // over --max-body (413)
	refuseBodyBudget   = "body-budget"      // --max-inflight-body full (429)
	refuseBadBody      = "invalid-body"     // unreadable, not UTF-8, not one JSON value (400)
	refuseBadValue     = "invalid-value"    // a field or count header out of bounds (400)
	refuseModel        = "unknown-model"    // a model the node does not serve (404)
	refuseContext      = "context-exceeded" // input + output over the model's context (400)
)

var refuseReasons = []string{refuseUnauthorized, refuseTooLarge, refuseBodyBudget, refuseBadBody,
	refuseBadValue, refuseModel, refuseContext}

// refuseBody answers a body BodyBudget.Read did not read, through fail.
func (n *Node) refuseBody(w http.ResponseWriter, err error, fail func(failure)) {
	f := failure{status: http.StatusBadRequest, typ: "invalid_request_error", code: "invalid_body",
		msg: "request body unreadable"}
	reason := refuseBadBody
	switch {
	case errors.Is(err, httpguard.ErrBodyTooLarge):
		reason = refuseTooLarge
		f = failure{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "request_too_large",
			msg: fmt.Sprintf("request body larger than %d bytes", n.body.MaxBody())}
	case errors.Is(err, httpguard.ErrBodyBudget):
		// Room frees up as the bodies being counted are: a second is long.
		reason = refuseBodyBudget
		w.Header().Set("Retry-After", "1")
		f = failure{status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded",
			msg: "the node holds too many request bodies; retry later"}
	}
	n.metrics.refused.WithLabelValues(reason).Inc()
	fail(f)
}
