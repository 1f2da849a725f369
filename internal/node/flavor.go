package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Flavor is the server a node answers as: its health path, error bodies,
// /v1/models entries and extra /metrics series. Timing is the twin's
// engine in every flavor.
type Flavor string

// The flavors. The vLLM ones follow vLLM's OpenAI-compatible server
// (vllm/entrypoints/openai, vllm/v1/metrics/loggers.py). FlavorVLLM08
// stands for the releases before two changes a router sees: the KV gauge
// renamed from vllm:gpu_cache_usage_perc to vllm:kv_cache_usage_perc (0.9)
// and error bodies wrapped in OpenAI's {"error": ...} (vLLM PR #22099,
// released in 0.10.1).
const (
	// FlavorFleetdrill is the node's own: /healthz (and /health), OpenAI
	// error bodies with string codes, fleetdrill-owned models.
	FlavorFleetdrill Flavor = "fleetdrill"
	// FlavorVLLM answers as vLLM 0.10.1 and later: /health only,
	// {"error": {..., "code": 404}} bodies, vLLM's model cards, and the
	// vllm: series with vllm:kv_cache_usage_perc.
	FlavorVLLM Flavor = "vllm"
	// FlavorVLLM08 answers as vLLM 0.8: flat {"object": "error", ...}
	// bodies with the older context-length sentence, and
	// vllm:gpu_cache_usage_perc instead of vllm:kv_cache_usage_perc;
	// otherwise as FlavorVLLM.
	FlavorVLLM08 Flavor = "vllm-0.8"
)

// Flavors lists every flavor, the default first.
var Flavors = []Flavor{FlavorFleetdrill, FlavorVLLM, FlavorVLLM08}

// ParseFlavor returns the flavor named s ("" is the default).
func ParseFlavor(s string) (Flavor, error) {
	if s == "" {
		return FlavorFleetdrill, nil
	}
	if f := Flavor(s); slices.Contains(Flavors, f) {
		return f, nil
	}
	names := make([]string, len(Flavors))
	for i, f := range Flavors {
		names[i] = string(f)
	}
	return "", fmt.Errorf("flavor %q: want one of %s", s, strings.Join(names, ", "))
}

// vllm reports whether the flavor is one of vLLM's.
func (fl Flavor) vllm() bool { return fl == FlavorVLLM || fl == FlavorVLLM08 }

// failure is a refusal, in the words of every flavor.
type failure struct {
	status    int
	typ, code string // the OpenAI error type and code (the fleetdrill flavor)
	msg       string
	// vLLM's words where they differ: its message (else msg) and the
	// request parameter at fault ("" is null). Its error type follows
	// the status (vllmErrorType).
	vllmMsg, param string
}

// vllmErrorType is the error type vLLM sends with status: the name of the
// OpenAI Python SDK's exception class for it, as vLLM's
// create_error_response names them. vLLM itself never sends 429; a node's
// quota fault stands for a rate limiter in front of it.
func vllmErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		// vLLM sends no 413 of its own (its server reads a body of any
		// size); a client's error is its 400's type.
		return "BadRequestError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusTooManyRequests:
		return "RateLimitError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	return "InternalServerError"
}

// vllmError is vLLM's ErrorInfo (0.10.1 and later), in its field order.
type vllmError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// vllmLegacyError is vLLM's ErrorResponse before 0.10.1.
type vllmLegacyError struct {
	Object  string  `json:"object"` // "error"
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// body returns f's JSON body in the flavor's words.
func (fl Flavor) body(f *failure) any {
	if !fl.vllm() {
		return map[string]any{"error": map[string]any{"message": f.msg, "type": f.typ, "param": nil, "code": f.code}}
	}
	msg := f.vllmMsg
	if msg == "" {
		msg = f.msg
	}
	var param *string
	if f.param != "" {
		param = &f.param
	}
	if fl == FlavorVLLM08 {
		return vllmLegacyError{Object: "error", Message: msg, Type: vllmErrorType(f.status), Param: param, Code: f.status}
	}
	return map[string]vllmError{"error": {Message: msg, Type: vllmErrorType(f.status), Param: param, Code: f.status}}
}

// streamError is the server-sent event that ends a stream the node could
// not finish. vLLM wraps its error body in {"error": ...} (before 0.10.1
// that body was the flat one) and still sends [DONE]; the fleetdrill flavor
// sends the OpenAI error alone.
func (fl Flavor) streamError(buf []byte, f *failure) []byte {
	b := fl.body(f)
	if fl == FlavorVLLM08 {
		b = map[string]any{"error": b}
	}
	buf = append(buf, "data: "...)
	buf = appendJSON(buf, b)
	buf = append(buf, "\n\n"...)
	if fl.vllm() {
		buf = append(buf, "data: [DONE]\n\n"...)
	}
	return buf
}

// contextFailure is the refusal of a request of in input and out output
// tokens that exceeds maxLen (Node.maxLen: the replica's KV capacity or
// the node's MaxModelLen, its max_model_len in /v1/models), with vLLM's messages: since 0.10.1 naming
// the parameter at fault, before it the older sentence.
func (fl Flavor) contextFailure(in, out int, maxLen int64) failure {
	f := failure{status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded",
		msg: fmt.Sprintf("%d input + %d output tokens exceed the model's maximum context length of %d tokens", in, out, maxLen)}
	switch {
	case fl == FlavorVLLM08:
		f.vllmMsg = fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens "+
			"(%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			maxLen, in+out, in, out)
	case int64(in) >= maxLen:
		f.vllmMsg = fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. "+
			"Please reduce the length of the input messages.", maxLen, in)
		f.param = "input_tokens"
	default:
		f.vllmMsg = fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length "+
			"is %d tokens and your request has %d input tokens (%d > %d - %d).", out, maxLen, in, out, maxLen, in)
		f.param = "max_tokens"
	}
	return f
}

// vllmModelCard is an entry of vLLM's GET /v1/models (its ModelCard).
type vllmModelCard struct {
	ID          string           `json:"id"`
	Object      string           `json:"object"`
	Created     int64            `json:"created"`
	OwnedBy     string           `json:"owned_by"`
	Root        string           `json:"root"`
	Parent      *string          `json:"parent"`
	MaxModelLen int64            `json:"max_model_len"`
	Permission  []vllmPermission `json:"permission"`
}

// vllmPermission is vLLM's ModelPermission, with its defaults.
type vllmPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

type vllmModelList struct {
	Object string          `json:"object"`
	Data   []vllmModelCard `json:"data"`
}

// vllmModels lists the served models as vLLM does. A node has no model
// path, so root is the name; max_model_len is the longest request the
// node takes (Node.maxLen), past which it refuses one (contextFailure).
func (n *Node) vllmModels(names []string) vllmModelList {
	created := n.clk.start.Unix()
	out := vllmModelList{Object: "list", Data: make([]vllmModelCard, 0, len(names))}
	for i, name := range names {
		out.Data = append(out.Data, vllmModelCard{ID: name, Object: "model", Created: created, OwnedBy: "vllm",
			Root: name, MaxModelLen: n.maxLen(n.byName[name]),
			Permission: []vllmPermission{{
				ID:     fmt.Sprintf("modelperm-%016x%016x", uint64(n.clk.start.UnixNano()), uint64(i)),
				Object: "model_permission", Created: created, AllowSampling: true, AllowLogprobs: true,
				AllowView: true, Organization: "*",
			}}})
	}
	return out
}

func appendJSON(buf []byte, v any) []byte {
	b, _ := json.Marshal(v)
	return append(buf, b...)
}
