package node

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/twin/fleet"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

// Defaults for a Config field left zero.
const (
	DefaultMaxBatch = 256 // vLLM's default max_num_seqs
	// DefaultKVTokens is the KV capacity when neither the config, the model
	// nor its profile gives one: about what an 80 GB GPU holds for an 8B
	// model in bf16 after its weights.
	DefaultKVTokens  = 131072
	DefaultMaxTokens = 128 // output tokens when a request names none
	// DefaultMaxBodyBytes is the largest request body: prompts are only
	// counted, but a client may send long ones (a 128k-token prompt is
	// about 512 KB; a list of token ids several bytes a token).
	DefaultMaxBodyBytes = 16 << 20
	// DefaultMaxInflightBodyBytes bounds the request bodies held at once,
	// all requests together: four maximum-size bodies, or some 16,000 of
	// a typical 4 KB. A body is held only while it is counted, so the
	// budget bounds a burst, not the requests running.
	DefaultMaxInflightBodyBytes = 64 << 20
)

// Model is one model the node serves.
type Model struct {
	Name    string
	Profile latency.Profile
	// KVTokens is the replica's KV capacity for this model; 0 falls back
	// to Config.KVTokens, then Profile.KVTokens, then DefaultKVTokens.
	KVTokens int64
	// MinDriver is the lowest driver version the model runs with, used by
	// the default compatibility check; empty means any.
	MinDriver string
}

// CompatFunc answers whether the node, running driver, can serve model; a
// non-nil error says why not, in operator language.
type CompatFunc func(model, driver string) error

// Config configures a Node.
type Config struct {
	Models []Model
	// Flavor is the server the node answers as (FlavorFleetdrill when
	// empty): its health path, error bodies, /v1/models and extra
	// series. Timing is the engine's in every flavor.
	Flavor Flavor
	// MaxBatch is the number of sequences a replica runs at once.
	MaxBatch int
	// KVTokens, when > 0, overrides every model's KV capacity.
	KVTokens int64
	// MaxModelLen, when > 0, is the longest request (input plus output
	// tokens) every model takes, as vLLM's --max-model-len: published as
	// max_model_len on /v1/models, a longer request refused with vLLM's
	// 400. 0, or a value above a model's KV capacity: that capacity.
	MaxModelLen int64
	// Driver is the driver version the node starts with (the admin API
	// can change it).
	Driver string
	// Compat checks a model against the current driver. Nil means the
	// simple rule: driver >= Model.MinDriver (fleet.CompareVersions).
	Compat CompatFunc
	// Pool and Region name the scenario pool the node emulates and its
	// region: the pool and region labels of its catalogue series
	// (docs/metrics.md). FromScenario sets them; "" (no scenario) leaves
	// the labels empty.
	Pool, Region string
	// Classes are the scenario's request classes: a request's
	// X-Fleetdrill-Class header (the gateway forwards it) labels its
	// latencies when it names one of them, else the class is "unknown".
	// FromScenario sets them.
	Classes []string
	// APIKey, when set, is the key every /v1 request needs, as
	// "Authorization: Bearer APIKey" (vLLM's --api-key): a 401 without it.
	// /health, /healthz and /metrics stay open for probes and scrapes.
	// "": the API is open.
	APIKey string
	// Seed seeds the error-rate fault's random stream.
	Seed uint64
	// Speed is engine seconds per wall second; 0 means 1 (real time).
	// Tests and benchmarks run faster than real time with it.
	Speed float64
	// DefaultMaxTokens is the output length of a request that names none.
	DefaultMaxTokens int
	// Logger receives one line per request (never its content); nil
	// discards.
	Logger *slog.Logger
	// Registerer receives the node's metrics; nil registers nowhere.
	// Never the global registry: the binary passes its own.
	Registerer prometheus.Registerer
	// Gatherer, when set, is served on /metrics.
	Gatherer prometheus.Gatherer
	// KV is the node's part in disaggregated serving (kv.go); nil:
	// none, kv_transfer_params are refused.
	KV *KVConfig
	// MaxBodyBytes bounds a request body (413 beyond it), and
	// MaxInflightBodyBytes the bodies held at once (429 with Retry-After
	// beyond it): the gateway's limits (httpguard.BodyBudget). Zero: the
	// defaults.
	MaxBodyBytes, MaxInflightBodyBytes int64
}

func (c *Config) normalize() error {
	var errs []error
	if len(c.Models) == 0 {
		errs = append(errs, errors.New("node: no models, want at least one"))
	}
	fl, err := ParseFlavor(string(c.Flavor))
	if err != nil {
		errs = append(errs, fmt.Errorf("node: %w", err))
	}
	c.Flavor = fl
	seen := map[string]bool{}
	for i := range c.Models {
		m := &c.Models[i]
		if m.Name == "" {
			errs = append(errs, fmt.Errorf("node: models[%d]: empty name", i))
		}
		if seen[m.Name] {
			errs = append(errs, fmt.Errorf("node: models[%d]: %s listed twice", i, m.Name))
		}
		seen[m.Name] = true
		if m.Profile.MaxBatchedTokens == 0 {
			m.Profile.MaxBatchedTokens = 8192
		}
		if m.Profile.StepBase <= 0 && m.Profile.MinStep <= 0 {
			errs = append(errs, fmt.Errorf("node: models[%d] (%s): profile has no step time", i, m.Name))
		}
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxBatch < 0 {
		errs = append(errs, fmt.Errorf("node: max batch %d, want >= 1", c.MaxBatch))
	}
	if c.KVTokens < 0 {
		errs = append(errs, fmt.Errorf("node: KV tokens %d, want >= 1", c.KVTokens))
	}
	if c.MaxModelLen < 0 {
		errs = append(errs, fmt.Errorf("node: max model len %d, want >= 1 (or 0: the KV capacity)", c.MaxModelLen))
	}
	if c.Speed == 0 {
		c.Speed = 1
	}
	if c.Speed < 0 || c.Speed > 10_000 {
		errs = append(errs, fmt.Errorf("node: speed %g, want in (0, 10000]", c.Speed))
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxInflightBodyBytes <= 0 {
		c.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	if c.DefaultMaxTokens <= 0 {
		c.DefaultMaxTokens = DefaultMaxTokens
	}
	if c.Compat == nil {
		mins := map[string]string{}
		for _, m := range c.Models {
			mins[m.Name] = m.MinDriver
		}
		c.Compat = MinDriverCompat(mins)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return errors.Join(errs...)
}

func (m *Model) kvTokens(override int64) int64 {
	switch {
	case override > 0:
		return override
	case m.KVTokens > 0:
		return m.KVTokens
	case m.Profile.KVTokens > 0:
		return int64(m.Profile.KVTokens)
	}
	return DefaultKVTokens
}

// MinDriverCompat is the simple compatibility rule: a model runs when the
// driver is at least its minimum (dotted numeric comparison, the
// fleet registry's rule). A model absent from mins, or with an empty minimum, runs
// on any driver.
func MinDriverCompat(mins map[string]string) CompatFunc {
	return func(model, driver string) error {
		if min := mins[model]; min != "" && fleet.CompareVersions(driver, min) < 0 {
			return fmt.Errorf("driver %s < %s required by %s", driver, min, model)
		}
		return nil
	}
}

// ParseMinDrivers parses "model=version" pairs (the --min-driver flag).
func ParseMinDrivers(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		name, ver, ok := strings.Cut(p, "=")
		if !ok || name == "" || ver == "" {
			return nil, fmt.Errorf("min driver %q: want MODEL=VERSION", p)
		}
		out[name] = ver
	}
	return out, nil
}
