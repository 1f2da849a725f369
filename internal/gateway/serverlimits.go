package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// ServerLimit is the largest request (input plus output tokens) a backend
// takes for its pool's model, as its server publishes it, beside what the
// scenario gives the pool. The smaller wins (Backends.Check tells the core,
// sched.Core.LimitContext): a server refuses what is longer than its own
// limit whatever the scenario believes, and a request routed there
// anyway would come back as the server's 400.
type ServerLimit struct {
	Pool    string // the scenario's pool
	Backend string // host:port, never userinfo or path
	Model   string // the scenario's model name, as the server lists it
	// Tokens is the server's limit; Scenario the pool's largest request
	// as the scenario configures it (its replicas' KV capacity for the
	// model).
	Tokens, Scenario int64
	// Source says where the limit was read, in the server's words: "GET
	// /v1/models max_model_len" (vLLM, SGLang, fleetdrill node), "GET
	// /info max_total_tokens" (TGI).
	Source string
	pool   int // the core's index of Pool
	model  int // the core's index of Model
}

// Lower reports whether the server's limit is below the scenario's: the
// one the gateway routes by.
func (l ServerLimit) Lower() bool { return l.Tokens < l.Scenario }

// String says what the limit means, for start-up output.
func (l ServerLimit) String() string {
	if l.Lower() {
		return fmt.Sprintf("pool %s backend %s: model %s takes at most %d tokens (%s), below the scenario's %d: "+
			"the gateway routes by the server's %d", l.Pool, l.Backend, l.Model, l.Tokens, l.Source, l.Scenario, l.Tokens)
	}
	return fmt.Sprintf("pool %s backend %s: model %s takes at most %d tokens (%s), the scenario's %d is used",
		l.Pool, l.Backend, l.Model, l.Tokens, l.Source, l.Scenario)
}

// modelCard is what the gateway reads of an entry of GET /v1/models:
// vLLM's ModelCard and SGLang's carry max_model_len (the server's
// --max-model-len / --context-length); OpenAI's and most others do not.
type modelCard struct {
	ID          string `json:"id"`
	MaxModelLen int64  `json:"max_model_len"`
}

// tgiInfo is what the gateway reads of TGI's GET /info: max_total_tokens
// bounds input plus output (the launcher's --max-total-tokens).
type tgiInfo struct {
	MaxTotalTokens int64 `json:"max_total_tokens"`
}

// serverLimit returns the limit replica i's server publishes for its
// model, with where it was read: 0 when it publishes none. cards is its
// GET /v1/models.
func (b *Backends) serverLimit(ctx context.Context, i int, cards []modelCard) (int64, string, error) {
	rep := &b.replicas[i]
	if rep.kind == KindTGI {
		info, err := b.tgiInfo(ctx, rep.url)
		if err != nil {
			return 0, "", fmt.Errorf("GET /info: %w", err)
		}
		return info.MaxTotalTokens, "GET /info max_total_tokens", nil
	}
	want := b.sc.Models[rep.model].Name
	for _, c := range cards {
		if c.ID == want && c.MaxModelLen > 0 {
			return c.MaxModelLen, "GET /v1/models max_model_len", nil
		}
	}
	return 0, "", nil
}

func (b *Backends) tgiInfo(ctx context.Context, base string) (tgiInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, b.clk.wall(b.sc.Policy.Health.Timeout.D()))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/info", nil)
	if err != nil {
		return tgiInfo{}, err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return tgiInfo{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return tgiInfo{}, b.statusError(resp.StatusCode)
	}
	var info tgiInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return tgiInfo{}, fmt.Errorf("not TGI's info: %w", err)
	}
	return info, nil
}

// applyLimits tells the core the smallest limit each pool's servers
// published for each model (a pool's replicas are one routing unit: the
// core checks a request's size once per pool), and keeps what was read
// for Limits. It logs each server limit below the scenario's.
func (b *Backends) applyLimits(read []ServerLimit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range read {
		l := &read[k]
		if b.limitCore != nil {
			b.limitCore(l.pool, l.model, l.Tokens)
		}
		if l.Lower() {
			b.log.Warn("backend's context limit below the scenario's: routing by the server's", "pool", l.Pool,
				"backend", l.Backend, "model", l.Model, "server_limit", l.Tokens, "scenario_limit", l.Scenario,
				"source", l.Source)
		}
	}
	b.limits = read // the last Check's: the core's limits are only ever lowered
}

// Limits returns the limits the backends published at Check, in replica
// order: those a server did not publish are left out.
func (b *Backends) Limits() []ServerLimit {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]ServerLimit(nil), b.limits...)
}

// ContextLimits returns the limits the gateway routes by where a server's
// is below the scenario's, for a twin run of the same fleet
// (twin.Options.ContextLimits): the twin then refuses what the gateway
// refuses.
func (b *Backends) ContextLimits() []sched.ContextLimit {
	var out []sched.ContextLimit
	for _, l := range b.Limits() {
		if l.Lower() {
			out = append(out, sched.ContextLimit{Pool: l.pool, Model: l.model, Tokens: l.Tokens})
		}
	}
	return out
}

// fromServer reports whether limit, the largest request a pool serving
// model m takes, is a server's, below the scenario's: a
// context_length_exceeded then says so.
func (b *Backends) fromServer(m int, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.limits {
		if l.model == m && l.Lower() && l.Tokens == limit {
			return true
		}
	}
	return false
}
