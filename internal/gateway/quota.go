package gateway

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/fleetdrill/fleetdrill/internal/openai"
)

// hdrReplay carries Config.ReplaySecret: a request that has it may set the
// emulated node's exact lengths (x_fleetdrill), as the live harness's
// replay does. The gateway never forwards it.
const hdrReplay = "X-Fleetdrill-Replay"

// maxChoices bounds n and best_of: each choice is another generation of up
// to max_tokens, charged as such.
const maxChoices = 8

// fieldError is a request field's invalid value: a 400 invalid_value whose
// param is the field.
type fieldError = openai.FieldError

// paramOf is the param of a 400 invalid_value for err: the field a
// fieldError names, else def.
func paramOf(err error, def string) string {
	if fe, ok := errors.AsType[fieldError](err); ok {
		return fe.Param
	}
	return def
}

// choices is how many generations a request asks for: max(n, best_of), at
// least 1, at most maxChoices (openai.Choices, the node's check too).
func choices(cr *completionRequest) (int, error) {
	return openai.Choices(cr.N, cr.BestOf, maxChoices)
}

// usageMax bounds what a usageScanner holds: a non-streamed answer, or one
// event's line. Beyond it the usage is not read (the estimate stands).
const usageMax = 1 << 20

// usageScanner reads OpenAI's usage (prompt_tokens, completion_tokens) from
// an answer's bytes as they pass through: a non-streamed JSON body's, or
// the last server-sent event that has one (the chunk a client asking
// stream_options.include_usage gets).
type usageScanner struct {
	events   bool
	buf      []byte
	overflow bool // the body, or the current line, went past usageMax
	in, out  int
	ok       bool
}

type usageBody struct {
	Usage *struct {
		PromptTokens     *int `json:"prompt_tokens"`
		CompletionTokens *int `json:"completion_tokens"`
	} `json:"usage"`
}

func (s *usageScanner) feed(b []byte) {
	if !s.events {
		if !s.overflow && len(s.buf)+len(b) <= usageMax {
			s.buf = append(s.buf, b...)
		} else {
			s.overflow, s.buf = true, nil
		}
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if !s.overflow && len(s.buf)+len(part) <= usageMax {
			s.buf = append(s.buf, part...)
		} else {
			s.overflow, s.buf = true, s.buf[:0]
		}
		if i < 0 {
			return
		}
		if !s.overflow {
			s.line(s.buf)
		}
		s.buf, s.overflow = s.buf[:0], false
		b = b[i+1:]
	}
}

// line reads one event line: data: {...} with a usage.
func (s *usageScanner) line(l []byte) {
	l = bytes.TrimSuffix(l, []byte("\r"))
	data, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	s.parse(bytes.TrimSpace(data))
}

func (s *usageScanner) parse(b []byte) {
	var u usageBody
	if json.Unmarshal(b, &u) != nil || u.Usage == nil || u.Usage.PromptTokens == nil || u.Usage.CompletionTokens == nil {
		return
	}
	s.in, s.out, s.ok = *u.Usage.PromptTokens, *u.Usage.CompletionTokens, true
}

// result is the usage the answer reported; ok false when it reported none.
func (s *usageScanner) result() (in, out int, ok bool) {
	if !s.events && !s.overflow && len(s.buf) > 0 {
		s.parse(s.buf)
		s.buf = nil
	}
	return s.in, s.out, s.ok
}

// reconcile tells the core what c's successful attempt used, as its
// upstream reported (sched.Core.Reconcile), so that its tenant's token
// bucket is charged that rather than the estimate.
func (g *Gateway) reconcile(c *call, s *usageScanner) {
	in, out, ok := s.result()
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.core.Reconcile(g.clk.now(), &c.Core, in, out)
}
