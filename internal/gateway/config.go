package gateway

import (
	"bufio"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// Config configures a gateway.
type Config struct {
	// Scenario gives tenants, classes, models, pools and policy. The
	// gateway works on a copy.
	Scenario *scenarios.Scenario
	// Backends maps a pool name to its replicas, one per replica, each
	// "KIND+BASE-URL" or "BASE-URL" (kind openai): see Kind and
	// ParseBackend.
	Backends map[string][]string
	// Keys are the API keys and their tenants.
	Keys []Key
	// DefaultClass is the class of requests that name none (header
	// X-Fleetdrill-Class); "" is the scenario's first class.
	DefaultClass string
	// DefaultMaxTokens is the output estimate of a request without
	// max_tokens; default 256.
	DefaultMaxTokens int
	// Speed is the time compression: model seconds per wall second, as the
	// emulated nodes' --speed. Every duration the gateway reads from the
	// scenario or this config is model time, and so are the core's clock,
	// the Retry-After it sends and the latencies it reports (see the
	// package documentation). 0 means 1 (real time); at most 10000.
	Speed float64
	// Observer, when set, is told the gateway's breaker transitions and
	// failed upstream attempts as they happen.
	Observer *Observer
	// Registry receives the gateway's metrics and is served at /metrics;
	// nil: a new registry.
	Registry *prometheus.Registry
	// Logger logs one line per request (never its prompt or key); nil:
	// nothing is logged.
	Logger *slog.Logger
	// Transport carries upstream requests; nil: a transport tuned for many
	// connections to few hosts, which ignores proxy environment variables.
	Transport http.RoundTripper
	// BackendCA, when set, is the pool of CAs the default transport
	// trusts for https backends instead of the system's (unused with
	// Transport).
	BackendCA *x509.CertPool
	// BackendKey, when set, is sent as "Authorization: Bearer BackendKey"
	// with every upstream request (completions, hedges, probes, load
	// scrapes, Backends.Check): the key of nodes started with an API key
	// (fleetdrill node, vLLM --api-key). A client's own Authorization is
	// never forwarded. "": none is sent.
	BackendKey string
	// Seed seeds the retry jitter.
	Seed uint64
	// HoldCanaries holds the canaries' schedule (scenario canaries:) until
	// StartCanaries gives its origin; false: it starts with the gateway. A
	// replay starts it with its first request, so that a canary's start,
	// its steps and its time to rollback count from the replay's time 0.
	HoldCanaries bool
	// HoldAutoscale holds the autoscaled pools' scalers (pools[].autoscale)
	// until Autoscaling.Start gives their origin; false: they start with the
	// gateway. A replay starts them with its first request, its time 0.
	HoldAutoscale bool
	// Provisioner starts and stops an autoscaled pool's replicas: a
	// replica's instance is started when the scaler has it provisioned
	// (its grant's delay past) and stopped once it is handed back. nil:
	// the pool's backends are already running, and the gateway only
	// routes to those its scaler holds.
	Provisioner Provisioner
	// MaxBodyBytes bounds a request body: 413 request_too_large beyond
	// it; default DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// MaxInflightBodyBytes bounds the request bodies held at once (each
	// reserved from its Content-Length, or MaxBodyBytes when unknown,
	// before it is read): 429 with Retry-After when full; default
	// DefaultMaxInflightBodyBytes (128 MiB).
	MaxInflightBodyBytes int64
	// StreamWriteTimeout bounds each write to a client (a chunk of an
	// answer and its flush); default DefaultStreamWriteTimeout (30s),
	// wall time.
	StreamWriteTimeout time.Duration
	// ReplaySecret, when set, lets a request carrying it in the
	// X-Fleetdrill-Replay header set the emulated node's exact lengths
	// (x_fleetdrill): the live harness's replay sets a random one per run.
	// "": nobody may, and x_fleetdrill is removed from every body.
	ReplaySecret string
	// MetricsApart leaves /metrics (tenant names, backend addresses) out of
	// Handler: it is served by MetricsHandler on a listener of its own.
	MetricsApart bool
}

// Key is an API key and the scenario tenant it identifies. Key is the key,
// or "sha256:" and the hex SHA-256 digest of the key (see ParseKeys).
type Key struct {
	Tenant string
	Key    string
}

// ParseKeys reads a keys file: one "TENANT KEY" per line; blank lines and
// lines starting with '#' are skipped. KEY is the key itself, at least
// MinKeyLength characters, or "sha256:" and the 64 hex digits of its
// SHA-256 digest, so that the file need not hold the keys. An error names
// the line, never the key.
func ParseKeys(r io.Reader) ([]Key, error) {
	var keys []Key
	seen := map[[sha256.Size]byte]bool{}
	err := eachLine(r, func(n int, f []string) error {
		if len(f) != 2 {
			return fmt.Errorf("line %d: want \"TENANT KEY\", got %d fields", n, len(f))
		}
		d, hashed, err := keyDigest(f[1])
		switch {
		case err != nil:
			return fmt.Errorf("line %d: %w", n, err)
		case !hashed && len(f[1]) < MinKeyLength:
			return fmt.Errorf("line %d: key shorter than %d characters: use a random one, e.g. openssl rand -hex 24", n, MinKeyLength)
		case seen[d]:
			return fmt.Errorf("line %d: key repeated (a key identifies one tenant)", n)
		}
		seen[d] = true
		keys = append(keys, Key{Tenant: f[0], Key: f[1]})
		return nil
	})
	return keys, err
}

// MinKeyLength is the shortest key a keys file may hold.
const MinKeyLength = 32

// digestPrefix marks a key given by its SHA-256 digest, in hex.
const digestPrefix = "sha256:"

// keyDigest is the SHA-256 digest a key is compared by: of the key, or
// the one a "sha256:HEX" key gives (hashed true).
func keyDigest(k string) (d [sha256.Size]byte, hashed bool, err error) {
	h, ok := strings.CutPrefix(k, digestPrefix)
	if !ok {
		return sha256.Sum256([]byte(k)), false, nil
	}
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != sha256.Size {
		return d, true, fmt.Errorf("want %s and the %d hex digits of the key's SHA-256 digest, e.g. printf %%s \"$KEY\" | sha256sum", digestPrefix, 2*sha256.Size)
	}
	copy(d[:], b)
	return d, true, nil
}

// ParseBackends reads a backends file: one "POOL [KIND+]BASE-URL" per line
// (KIND one of Kinds, openai when left out), one line per replica; blank
// lines and lines starting with '#' are skipped.
func ParseBackends(r io.Reader) (map[string][]string, error) {
	out := map[string][]string{}
	err := eachLine(r, func(n int, f []string) error {
		if len(f) != 2 {
			return fmt.Errorf("line %d: want \"POOL [KIND+]BASE-URL\", got %d fields", n, len(f))
		}
		kind, u, err := ParseBackend(f[1])
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		out[f[0]] = append(out[f[0]], string(kind)+"+"+u)
		return nil
	})
	return out, err
}

// AddBackend adds a "POOL=[KIND+]URL" flag value to backends.
func AddBackend(backends map[string][]string, flag string) error {
	pool, b, ok := strings.Cut(flag, "=")
	if !ok || pool == "" {
		return fmt.Errorf("backend %q: want POOL=[KIND+]URL, e.g. use-h100-8b=vllm+http://10.0.0.5:8000", flag)
	}
	kind, u, err := ParseBackend(b)
	if err != nil {
		return fmt.Errorf("backend %q: %w", flag, err)
	}
	backends[pool] = append(backends[pool], string(kind)+"+"+u)
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL must be http(s)://host[:port][/path]")
	}
	return nil
}

func eachLine(r io.Reader, fn func(n int, fields []string) error) error {
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(n, strings.Fields(line)); err != nil {
			return err
		}
	}
	return sc.Err()
}

// ReadKeysFile reads the keys file at path (see ParseKeys). It refuses a
// file that its group or others may read, write or run: it holds secrets.
func ReadKeysFile(path string) ([]Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %04o lets others than its owner read it, and it holds API keys: run chmod 600 %s", path, m, path)
	}
	k, err := ParseKeys(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ReadBackendsFile reads a backends file (see ParseBackends).
func ReadBackendsFile(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := ParseBackends(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
