package liverun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin"
)

// Headers the gateway answers with (internal/gateway).
const (
	hOutcome   = "X-Fleetdrill-Outcome"
	hReason    = "X-Fleetdrill-Reason"
	hReplica   = "X-Fleetdrill-Replica"
	hPool      = "X-Fleetdrill-Pool"
	hModel     = "X-Fleetdrill-Model"
	hAttempts  = "X-Fleetdrill-Attempts"
	hDeferrals = "X-Fleetdrill-Deferrals"
	hQueueWait = "X-Fleetdrill-Queue-Wait"
	hAdmitted  = "X-Fleetdrill-Admitted"
)

// body is a chat completion request of the arrival's shape.
func (r *replay) body(a twin.Arrival) []byte {
	// The gateway estimates a prompt as ceil(bytes/4) + 4 tokens per
	// message: 4·(in−4) bytes make it estimate exactly in. " the" is one
	// token for common BPE tokenizers, so a real server sees about in too.
	words := max(a.Input-4, 1)
	req := map[string]any{
		"model":      r.sc.Models[a.Model].Name,
		"stream":     true,
		"max_tokens": a.Output,
		"messages":   []map[string]string{{"role": "user", "content": strings.Repeat(" the", words)}},
		// vLLM: generate exactly max_tokens.
		"ignore_eos": true,
		"min_tokens": a.Output,
		// Emulated nodes: the exact lengths.
		"x_fleetdrill": map[string]int{"input_tokens": a.Input, "output_tokens": a.Output},
	}
	b, _ := json.Marshal(req)
	return b
}

// send makes one request and records its outcome.
func (r *replay) send(ctx context.Context, a twin.Arrival) {
	o := twin.Outcome{Arrival: a, Replica: -1, ServedModel: a.Model, Attempts: 1}
	r.exchange(ctx, a, &o)
	r.mu.Lock()
	r.rec.Add(o)
	r.mu.Unlock()
}

func (r *replay) exchange(ctx context.Context, a twin.Arrival, o *twin.Outcome) {
	if ctx.Err() != nil {
		o.Result, o.Ended = twin.InFlight, r.now()
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/v1/chat/completions", bytes.NewReader(r.body(a)))
	if err != nil {
		o.Result, o.Ended = twin.Failed, r.now()
		return
	}
	req.Header.Set("Authorization", "Bearer "+r.keys[a.Tenant])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Fleetdrill-Class", r.sc.Classes[a.Class].Name)
	if r.secret != "" {
		req.Header.Set("X-Fleetdrill-Replay", r.secret) // lets x_fleetdrill through
	}
	resp, err := r.client.Do(req)
	if err != nil {
		o.Ended = r.now()
		o.Result = twin.Failed
		if ctx.Err() != nil {
			o.Result = twin.InFlight // the replay stopped waiting
		}
		return
	}
	defer resp.Body.Close()
	h := resp.Header
	o.Attempts = max(atoi(h.Get(hAttempts)), 1)
	o.Deferrals = atoi(h.Get(hDeferrals))
	o.Admitted = h.Get(hAdmitted) == "1"
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		o.Ended = r.now()
		switch h.Get(hOutcome) {
		case "rejected":
			o.Result, o.Reason = twin.Rejected, h.Get(hReason)
			if o.Reason == "" {
				o.Reason = "http-" + strconv.Itoa(resp.StatusCode)
			}
		case "timed_out":
			o.Result = twin.TimedOut
		default:
			o.Result = twin.Failed
		}
		return
	}
	if v, err := strconv.Atoi(h.Get(hReplica)); err == nil {
		o.Replica = v
	}
	o.Pool = h.Get(hPool)
	if m := slices.IndexFunc(r.sc.Models, func(m scenarios.Model) bool { return m.Name == h.Get(hModel) }); m >= 0 {
		o.ServedModel = m
	}
	if v, err := strconv.ParseFloat(h.Get(hQueueWait), 64); err == nil {
		o.Wait = time.Duration(v * float64(time.Second))
	}
	// Read the stream: the first data event is the first token; [DONE] is
	// the end. A stream cut before [DONE] failed; one the replay stopped
	// waiting for is in flight.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		data := bytes.TrimSpace(line[5:])
		if bytes.Equal(data, []byte("[DONE]")) {
			o.Ended = r.now()
			o.Result = twin.Completed
			if first { // no token at all: the first token is the end
				o.TTFT = o.Ended - a.At
			}
			return
		}
		if first && hasToken(data) {
			first = false
			o.TTFT = r.now() - a.At
		}
	}
	o.Ended = r.now()
	switch {
	case ctx.Err() != nil:
		o.Result = twin.InFlight
	case r.deadline(a) > 0 && o.Ended-a.At >= r.deadline(a)-time.Duration(50*float64(time.Millisecond)*r.speed):
		// The gateway cut the stream at the request's deadline (its
		// headers said completed: they went before the end was known);
		// 50 ms of wall time is the slack for the cut to arrive.
		o.Result = twin.TimedOut
	default:
		o.Result = twin.Failed
	}
}

// deadline is the arrival's deadline (model time after At); 0: none.
func (r *replay) deadline(a twin.Arrival) time.Duration {
	if a.Deadline > 0 {
		return a.Deadline
	}
	return r.sc.Classes[a.Class].Deadline.D()
}

// hasToken reports whether an SSE data payload carries generated text (an
// OpenAI server may open with an empty role-only delta).
func hasToken(data []byte) bool {
	for _, key := range [][]byte{[]byte(`"content":"`), []byte(`"text":"`)} {
		if i := bytes.Index(data, key); i >= 0 && i+len(key) < len(data) && data[i+len(key)] != '"' {
			return true
		}
	}
	return false
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
