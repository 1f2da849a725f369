package node

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/fleetdrill/fleetdrill/twin/kvlink"
)

// Disaggregated serving on an emulated node (issue 34's live part), as
// vLLM's NixlConnector does it:
//
//   - A prefill node runs a request whose kv_transfer_params say
//     do_remote_decode (the router sends it with max_tokens 1), keeps the
//     prompt's KV cache on its engine (engine.Hold) under a lease, and
//     answers with the kv_transfer_params a decode node pulls it with:
//     remote_host, remote_port, remote_request_id and the rest of vLLM's
//     keys. It serves the KV at GET /fleetdrill/kv/{id}, all but its last
//     byte at once, and lets it go (sending the last byte) on the decode
//     side's completion notice, DELETE on the same path; or when the
//     lease runs out (a decode side that gave up says nothing).
//   - A decode node given those params reserves the prompt's KV in order
//     (kvlink.Queue, the twin's own pull order), then pulls it: real
//     bytes over a real connection, the KV's size scaled by WireScale,
//     while the node's link model (kvlink.Link, the twin's) times the
//     transfer. When both are over it sends the notice; the last byte
//     ends the pull, so a prefill node lost meanwhile cuts it. Then the
//     request joins the engine with its prompt's KV in place
//     (engine.Seq.Transferred). A pull that fails is the pool's
//     kv_load_failure_policy's: recompute prefills the prompt here, fail
//     answers 500.
//
// With KVConfig.Wire, pulls go through the node's own toxiproxy proxy,
// one per prefill peer, where the admin API's link faults are toxics on
// the wire: a degraded link is a bandwidth and a latency toxic (and the
// link model's rate, so concurrent pulls share it as the twin's do: a
// per-connection toxic cannot), failed transfers a reset_peer toxic, hung
// ones a timeout toxic, each with the fault's share as its toxicity.

// KVConfig is a node's part in disaggregated serving.
type KVConfig struct {
	// Role is "prefill" or "decode".
	Role string
	// BytesPerToken is one prompt token's KV cache on a replica
	// (compile.Link.KVBytesPerToken).
	BytesPerToken float64
	// WireScale is the bytes a pull moves on the wire per byte of KV
	// cache; 0: DefaultWireScale. The transfer's time is the link
	// model's; the wire carries a scaled copy so that faults on it are
	// real and a game day does not move terabytes over loopback.
	WireScale float64
	// Lease is how long a prefill node keeps a prompt's KV for a pull;
	// 0: kvlink's DefaultLease.
	Lease time.Duration
	// Advertise is the host[:port] a decode node pulls a prefill node's
	// KV from: where its API is reachable from the decode nodes (its
	// container's alias in the region's network). "": the Host the
	// prefill request came to.
	Advertise string
	// A decode node's link: its bandwidth in bytes per second (the
	// replica's: per GPU × GPUs) and latency per transfer, and GPUs, for
	// a link-degraded fault's bandwidth per GPU.
	Bandwidth float64
	Latency   time.Duration
	GPUs      int
	// FailurePolicy is "fail" (the default) or "recompute".
	FailurePolicy string
	// Timeout bounds a pull (model time); 0: DefaultPullTimeout.
	Timeout time.Duration
	// Client pulls KV; nil: a client of the node's own, with no
	// keep-alive (each pull a connection of its own, as a link fault's
	// share is drawn per connection).
	Client *http.Client
	// Wire sends pulls through the node's own toxiproxy proxies (real
	// sockets); false: straight through Client (an in-process run has no
	// sockets), where a link fault's failures are drawn from the node's
	// seeded stream instead.
	Wire bool
}

// DefaultWireScale sends one byte per 64 KiB of KV cache: a 4,000-token
// prompt of Llama 3.1 8B (524 MB of KV) is 8 KB on the wire.
const DefaultWireScale = 1.0 / 65536

// DefaultPullTimeout is how long a decode node waits for a pull before
// giving it up: SGLang's decode side's 300 s (sgl-project/sglang#36033).
const DefaultPullTimeout = 300 * time.Second

// kvPath is where a prefill node serves a held prompt's KV.
const kvPath = "/fleetdrill/kv/"

// headerKVBytes repeats a KV answer's length.
const headerKVBytes = "X-Fleetdrill-Kv-Bytes"

// LinkFault is a decode node's inbound link's fault state (the admin
// API's "link"): a link-degraded fault's bandwidth per GPU and added
// latency, a kv-transfer-failure's share of failing pulls and, for hung
// ones, the time the decode side waits before it hears of it.
type LinkFault struct {
	BandwidthGBs float64       `json:"bandwidth_gbs,omitempty"`
	AddLatency   time.Duration `json:"add_latency,omitempty"`
	Fail         float64       `json:"fail,omitempty"`
	Timeout      time.Duration `json:"timeout,omitempty"`
}

func (f *LinkFault) check() error {
	var errs []error
	if f.BandwidthGBs < 0 || math.IsNaN(f.BandwidthGBs) || math.IsInf(f.BandwidthGBs, 0) {
		errs = append(errs, fmt.Errorf("link.bandwidth_gbs: got %g, want > 0 (or 0: the link's own)", f.BandwidthGBs))
	}
	if f.AddLatency < 0 {
		errs = append(errs, fmt.Errorf("link.add_latency: got %v, want >= 0", f.AddLatency))
	}
	if !(f.Fail >= 0 && f.Fail <= 1) {
		errs = append(errs, fmt.Errorf("link.fail: got %g, want in [0, 1]", f.Fail))
	}
	if f.Timeout < 0 {
		errs = append(errs, fmt.Errorf("link.timeout: got %v, want >= 0", f.Timeout))
	}
	return errors.Join(errs...)
}

// kvParams are vLLM's kv_transfer_params, as a P/D router passes them:
// do_remote_decode on the prefill request; the prefill's answer's, with
// do_remote_prefill, on the decode request.
type kvParams struct {
	DoRemoteDecode  bool   `json:"do_remote_decode"`
	DoRemotePrefill bool   `json:"do_remote_prefill"`
	RemoteEngineID  string `json:"remote_engine_id,omitempty"`
	RemoteBlockIDs  []int  `json:"remote_block_ids,omitempty"`
	RemoteHost      string `json:"remote_host,omitempty"`
	RemotePort      int    `json:"remote_port,omitempty"`
	RemoteRequestID string `json:"remote_request_id,omitempty"`
	TPSize          int    `json:"tp_size,omitempty"`
}

// hostnamePattern is a DNS name (letters, digits, dots and hyphens): a
// remote_host that is neither it nor an IP address could point a pull
// elsewhere than its host (a user part, a path).
var hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?$`)

// kvIDPattern is what a held KV's id looks like (kvState.add).
var kvIDPattern = regexp.MustCompile(`^kv-[0-9a-f]{1,16}-[0-9]{1,20}$`)

// pullURL checks a decode request's params and returns the URL its KV is
// pulled from.
func (p *kvParams) pullURL() (string, error) {
	switch {
	case p.RemoteHost == "":
		return "", errors.New("kv_transfer_params.remote_host: required with do_remote_prefill (the prefill answer's kv_transfer_params, passed on whole)")
	case net.ParseIP(p.RemoteHost) == nil && !hostnamePattern.MatchString(p.RemoteHost):
		return "", fmt.Errorf("kv_transfer_params.remote_host: got %q, want an IP address or a host name (the prefill answer's)", p.RemoteHost)
	case p.RemotePort < 0 || p.RemotePort > 65535:
		return "", fmt.Errorf("kv_transfer_params.remote_port: got %d, want in [0, 65535]", p.RemotePort)
	case !kvIDPattern.MatchString(p.RemoteRequestID):
		return "", fmt.Errorf("kv_transfer_params.remote_request_id: got %q, want the prefill answer's (kv-<engine>-<n>)", p.RemoteRequestID)
	}
	host := p.RemoteHost
	if p.RemotePort != 0 || strings.Contains(host, ":") {
		host = net.JoinHostPort(p.RemoteHost, strconv.Itoa(cmp.Or(p.RemotePort, 80))) // an IPv6 address in brackets
	}
	return "http://" + host + kvPath + p.RemoteRequestID, nil
}

// lease is a prompt's KV a prefill replica keeps for a pull.
type lease struct {
	rep     *replica
	tokens  int64
	expires time.Duration
	// over is closed when the lease ends: released (a pull's completion
	// notice) or not (run out, the node stopped). A pull's last byte
	// waits for it (serveKV).
	over     chan struct{}
	released bool
	// reading: a pull has it open; its lease does not run out meanwhile
	// (the decode side's heartbeats renew it in vLLM) and counts again
	// from the pull's end.
	reading bool
}

// pullState is a decode job's pull, loop-owned.
type pullState struct {
	id                 uint64
	url                string
	bytes              float64 // the KV's, for the link model
	reserved           int64   // KV the replica holds for it
	moving             bool    // on the link and the wire
	linkDone, wireDone bool
	confirming         bool // its completion notice sent
	ctx                context.Context
	cancel             context.CancelFunc
	hang               time.Duration // a hung pull (no wire): when the decode side gives up; 0: none
	fails              bool          // fails when it would end (no wire)
}

// wireResult is news of a pull on the wire: its bytes read bar the last
// (read), or its end (done; err when it failed).
type wireResult struct {
	j          *job
	err        error
	read, done bool
}

// kvState is the node's disaggregation state: loop-owned but for the
// wire's proxies (mu).
type kvState struct {
	cfg    KVConfig
	engine string // this node's engine id in kv_transfer_params
	leases map[string]*lease
	next   uint64
	pulls  uint64

	mu      sync.Mutex
	link    LinkFault
	server  *toxiproxy.ApiServer
	proxies map[string]*toxiproxy.Proxy // by upstream host:port
	client  *http.Client
}

func newKVState(cfg KVConfig, seed uint64) (*kvState, error) {
	switch cfg.Role {
	case "prefill", "decode":
	default:
		return nil, fmt.Errorf("node: kv role %q: want prefill or decode", cfg.Role)
	}
	if cfg.WireScale == 0 {
		cfg.WireScale = DefaultWireScale
	}
	if !(cfg.WireScale > 0 && cfg.WireScale <= 1) {
		return nil, fmt.Errorf("node: kv wire scale %g: want in (0, 1]", cfg.WireScale)
	}
	if cfg.Lease == 0 {
		cfg.Lease = kvlink.DefaultLease
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultPullTimeout
	}
	if cfg.FailurePolicy == "" {
		cfg.FailurePolicy = "fail"
	}
	if cfg.FailurePolicy != "fail" && cfg.FailurePolicy != "recompute" {
		return nil, fmt.Errorf("node: kv_load_failure_policy %q: want fail or recompute", cfg.FailurePolicy)
	}
	if cfg.Role == "decode" && !(cfg.Bandwidth > 0) {
		return nil, fmt.Errorf("node: a decode node's link bandwidth is %g B/s, want > 0 (the model's disaggregation.link)", cfg.Bandwidth)
	}
	k := &kvState{cfg: cfg, engine: strconv.FormatUint(seed&0xffffffffffff, 16), leases: map[string]*lease{},
		proxies: map[string]*toxiproxy.Proxy{}, client: cfg.Client}
	if k.client == nil {
		k.client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	}
	if cfg.Wire {
		k.server = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	}
	return k, nil
}

// wireBytes is what a pull of tokens moves on the wire: at least a byte.
func (k *kvState) wireBytes(tokens int64) int64 {
	return max(1, int64(math.Ceil(k.cfg.BytesPerToken*float64(tokens)*k.cfg.WireScale)))
}

// add keeps tokens of KV on replica r under a new lease, at now.
func (k *kvState) add(r *replica, tokens int64, now time.Duration) string {
	k.next++
	id := "kv-" + k.engine + "-" + strconv.FormatUint(k.next, 10)
	k.leases[id] = &lease{rep: r, tokens: tokens, expires: now + k.cfg.Lease, over: make(chan struct{})}
	r.eng.Hold(tokens)
	return id
}

// release lets go of lease id's KV at now; false when it is not held.
func (k *kvState) release(now time.Duration, id string) bool {
	return k.end(now, id, true)
}

// end ends lease id at now, released by a pull's notice or not.
func (k *kvState) end(now time.Duration, id string, released bool) bool {
	l := k.leases[id]
	if l == nil {
		return false
	}
	delete(k.leases, id)
	l.released = released
	close(l.over)
	idle := !l.rep.busy
	l.rep.eng.Release(now, l.tokens)
	if idle {
		l.rep.plan(now)
	}
	return true
}

// expire lets go of the leases run out by now.
func (k *kvState) expire(now time.Duration) {
	if k == nil {
		return
	}
	for id, l := range k.leases {
		if l.expires <= now && !l.reading {
			k.end(now, id, false)
		}
	}
}

// nextExpiry is when the next lease runs out.
func (k *kvState) nextExpiry() (time.Duration, bool) {
	if k == nil {
		return 0, false
	}
	next, have := time.Duration(0), false
	for _, l := range k.leases {
		if l.reading {
			continue
		}
		if !have || l.expires < next {
			next, have = l.expires, true
		}
	}
	return next, have
}

// do runs f on the loop, at the loop's now, and waits for it; false when
// the node stopped first.
func (n *Node) do(ctx context.Context, f func(now time.Duration)) bool {
	done := make(chan struct{})
	select {
	case n.opc <- func(now time.Duration) {
		f(now)
		for _, r := range n.reps {
			r.publish() // what it changed is in Stats when do returns
		}
		close(done)
	}:
	case <-n.stopped:
		return false
	case <-ctx.Done():
		return false
	}
	select {
	case <-done:
		return true
	case <-n.stopped:
		return false
	}
}

// serveKV serves a held prompt's KV to a decode node's pull: its bytes,
// scaled (wireBytes), all but the last at once, as the wire takes them;
// the last when the decode side says it has the KV (serveKVDone, at the
// end of its link model's time), which lets it go. So the pull's
// connection spans the transfer: a prefill node lost while the KV moves
// cuts it, and the decode side hears of it then, as NIXL does of a peer
// gone. A pull cut on the wire tells the prefill side nothing: it keeps
// the KV until the lease runs out.
func (n *Node) serveKV(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var l *lease
	if n.kv != nil && kvIDPattern.MatchString(id) {
		if !n.do(r.Context(), func(now time.Duration) {
			if l = n.kv.leases[id]; l != nil && l.reading {
				l = nil // one pull at a time
			}
			if l != nil {
				l.reading = true
			}
		}) {
			return
		}
	}
	if l != nil {
		defer n.do(context.WithoutCancel(r.Context()), func(now time.Duration) {
			if !l.released && n.kv.leases[id] == l {
				// Cut before its end: the lease counts from now.
				l.reading, l.expires = false, now+n.kv.cfg.Lease
			}
		})
	}
	if l == nil {
		apiError(w, http.StatusNotFound, "invalid_request_error", "kv_not_found",
			"no KV cache is held under this id on this node: its lease ran out, a pull read it, or the id is not this node's")
		return
	}
	size := n.kv.wireBytes(l.tokens)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size+1, 10))
	w.Header().Set(headerKVBytes, strconv.FormatInt(size+1, 10)) // for a transport that drops the length
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var chunk [4096]byte
	for left := size; left > 0; {
		m := min(left, int64(len(chunk)))
		if _, err := w.Write(chunk[:m]); err != nil {
			return
		}
		left -= m
	}
	if rc.Flush() != nil {
		return
	}
	select {
	case <-l.over:
	case <-n.stopped:
		return
	case <-r.Context().Done():
		return
	}
	if l.released {
		w.Write(chunk[:1])
	}
}

// serveKVDone is a decode node's notice that its pull read a prompt's KV
// whole: the prefill node lets it go (NIXL's completion notification, on
// which vLLM's prefill side frees the blocks).
func (n *Node) serveKVDone(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	released := false
	if n.kv != nil && kvIDPattern.MatchString(id) {
		if !n.do(r.Context(), func(now time.Duration) { released = n.kv.release(now, id) }) {
			return
		}
	}
	if !released {
		apiError(w, http.StatusNotFound, "invalid_request_error", "kv_not_found",
			"no KV cache is held under this id on this node: its lease ran out, or the id is not this node's")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// setLink applies a link fault: on the link models of the node's decode
// replicas (loop) and, with Wire, as toxics on its proxies.
func (n *Node) setLink(f LinkFault) error {
	k := n.kv
	if k == nil || k.cfg.Role != "decode" {
		return nil // no link: patch refused any fault but none
	}
	k.mu.Lock()
	k.link = f
	var errs []error
	for _, p := range k.proxies {
		errs = append(errs, n.toxics(p, f))
	}
	k.mu.Unlock()
	bw, lat := k.cfg.Bandwidth, k.cfg.Latency
	if f.BandwidthGBs > 0 {
		bw = f.BandwidthGBs * 1e9 * float64(max(k.cfg.GPUs, 1))
	}
	lat += f.AddLatency
	n.do(context.Background(), func(now time.Duration) {
		for _, r := range n.reps {
			if r.link != nil {
				if err := r.link.SetRate(now, bw, lat); err != nil {
					errs = append(errs, err)
				}
			}
		}
	})
	return errors.Join(errs...)
}

// Link toxics' names on a decode node's proxies.
var linkToxics = []string{"link_bandwidth", "link_latency", "link_reset", "link_hang"}

// toxics puts link fault f on proxy p as toxics (k.mu held): the wire's
// rate is the degraded bandwidth scaled as the bytes are, in wall time.
func (n *Node) toxics(p *toxiproxy.Proxy, f LinkFault) error {
	k := n.kv
	ctx := context.Background()
	for _, name := range linkToxics {
		if p.Toxics.GetToxic(name) != nil {
			if err := p.Toxics.RemoveToxic(ctx, name); err != nil {
				return err
			}
		}
	}
	speed := n.cfg.Speed
	add := func(name, typ string, toxicity float64, attrs map[string]any) error {
		b, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": "downstream", "toxicity": toxicity, "attributes": attrs})
		if err != nil {
			return err
		}
		_, err = p.Toxics.AddToxicJson(bytes.NewReader(b))
		return err
	}
	var errs []error
	if f.BandwidthGBs > 0 {
		rate := f.BandwidthGBs * 1e9 * float64(max(k.cfg.GPUs, 1)) * k.cfg.WireScale * speed / 1000
		errs = append(errs, add("link_bandwidth", "bandwidth", 1, map[string]any{"rate": max(1, int64(rate))}))
	}
	if f.AddLatency > 0 {
		ms := float64(f.AddLatency) / speed / float64(time.Millisecond)
		errs = append(errs, add("link_latency", "latency", 1, map[string]any{"latency": max(1, int64(math.Round(ms)))}))
	}
	if f.Fail > 0 {
		if f.Timeout > 0 {
			ms := float64(f.Timeout) / speed / float64(time.Millisecond)
			errs = append(errs, add("link_hang", "timeout", f.Fail, map[string]any{"timeout": max(1, int64(math.Round(ms)))}))
		} else {
			errs = append(errs, add("link_reset", "reset_peer", f.Fail, map[string]any{"timeout": 0}))
		}
	}
	return errors.Join(errs...)
}

// wireURL is the URL a pull from url goes to: through the node's proxy
// for url's host (made on first use, with the link's toxics) with Wire;
// url itself otherwise.
func (n *Node) wireURL(url string) (string, error) {
	k := n.kv
	if !k.cfg.Wire {
		return url, nil
	}
	rest := url[len("http://"):]
	i := bytes.IndexByte([]byte(rest), '/')
	host, path := rest[:i], rest[i:]
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "80")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.proxies[host]
	if p == nil {
		p = toxiproxy.NewProxy(k.server, "kv-"+host, "127.0.0.1:0", host)
		if err := k.server.Collection.Add(p, true); err != nil {
			return "", fmt.Errorf("kv link proxy to %s: %w", host, err)
		}
		if err := n.toxics(p, k.link); err != nil {
			return "", err
		}
		k.proxies[host] = p
	}
	return "http://" + p.Listen + path, nil
}

// closeWire stops the node's link proxies.
func (k *kvState) closeWire() {
	if k == nil || k.server == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	_ = k.server.Collection.Clear()
}

// fetch pulls j's KV over the wire and tells the loop how it ended.
func (n *Node) fetch(ctx context.Context, j *job, url string) {
	err := func() error {
		u, err := n.wireURL(url)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := n.kv.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("prefill node answered %d", resp.StatusCode)
		}
		size := resp.ContentLength
		if size < 0 {
			size, _ = strconv.ParseInt(resp.Header.Get(headerKVBytes), 10, 64)
		}
		if size < 1 {
			return errors.New("prefill node's KV answer has no length")
		}
		if _, err := io.CopyN(io.Discard, resp.Body, size-1); err != nil {
			return err
		}
		// The bytes are here; the last comes when the link model's time
		// is over and the prefill side has the notice (confirm).
		select {
		case n.wirec <- wireResult{j: j, read: true}:
		case <-n.stopped:
			return nil
		}
		last, err := io.Copy(io.Discard, resp.Body) // a cut short of Content-Length is an error
		if err == nil && last != 1 {
			err = errors.New("the prefill node ended the KV short of its length")
		}
		return err
	}()
	select {
	case n.wirec <- wireResult{j: j, err: err, done: true}:
	case <-n.stopped:
	}
}

// confirm tells the prefill node that j's pull has its KV, its time on
// the link being over (NIXL's completion notice): the prefill node lets
// it go and sends the pull's last byte. The notice goes straight to the
// prefill node, not over the link's faults: it is a few bytes, and the
// wire's share of failures is drawn on the pull's own connection. Its
// answer is not waited for: a prefill node that no longer holds the KV
// cuts the pull.
func (n *Node) confirm(ctx context.Context, url string) {
	del, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return
	}
	if resp, err := n.kv.client.Do(del); err == nil {
		resp.Body.Close()
	}
}

// kvLoadFailed is the answer of a pull that failed under policy fail.
var kvLoadFailed = failure{status: http.StatusInternalServerError, typ: "server_error", code: "kv_load_failed",
	msg:     "the prompt's KV cache could not be loaded from the prefill instance (kv_load_failure_policy: fail)",
	vllmMsg: "KV load failed (kv_load_failure_policy=fail)"}

// startPull queues decode job j's pull on its replica at now.
func (n *Node) startPull(now time.Duration, j *job) {
	r := j.rep
	n.kv.pulls++
	j.pull.id = n.kv.pulls
	r.pulling[j.pull.id] = j
	r.pulls.Push(j.pull.id)
	n.pump(now, r)
}

// pump starts the pulls into r that its free KV takes, in order.
func (n *Node) pump(now time.Duration, r *replica) {
	stale := func(id uint64) bool {
		j := r.pulling[id]
		return j == nil || j.pull == nil || j.pull.id != id
	}
	hold := func(id uint64) bool {
		j := r.pulling[id]
		kv := int64(j.seq.Prompt + 1)
		if !r.eng.TryHold(kv) {
			return false
		}
		j.pull.reserved = kv
		return true
	}
	for _, id := range r.pulls.Take(hold, stale) {
		j := r.pulling[id]
		p := j.pull
		p.moving = true
		if !n.kv.cfg.Wire {
			// No wire: a link fault's share is drawn from the node's
			// seeded stream; a hung pull is heard of at its timeout.
			n.kv.mu.Lock()
			lf := n.kv.link
			n.kv.mu.Unlock()
			if lf.Fail > 0 && n.draw() < lf.Fail {
				p.fails, p.wireDone = true, true
				if lf.Timeout > 0 {
					p.hang = now + lf.Timeout
					continue
				}
				r.link.Start(now, id, p.bytes)
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(float64(n.kv.cfg.Timeout)/n.cfg.Speed))
		p.ctx, p.cancel = ctx, cancel
		go n.fetch(ctx, j, p.url)
		r.link.Start(now, id, p.bytes)
	}
}

// pulled carries out a pull's end on the wire.
func (n *Node) pulled(now time.Duration, w wireResult) {
	j := w.j
	if j.pull == nil || !j.pull.moving {
		return // aborted
	}
	r := j.rep
	r.advance(now)
	if w.err != nil || (w.done && !j.pull.confirming) {
		// Cut (a fault on the wire, the prefill node lost), or ended
		// before its notice: the KV did not arrive whole.
		r.link.Cancel(now, j.pull.id)
		n.pullFailed(now, j)
		return
	}
	if w.done {
		n.arrive(now, j)
		return
	}
	j.pull.wireDone = true
	n.linkOver(j)
}

// linkOver sends j's completion notice once its bytes are read and its
// time on the link is over.
func (n *Node) linkOver(j *job) {
	p := j.pull
	if p.linkDone && p.wireDone && !p.confirming && p.ctx != nil {
		p.confirming = true
		go n.confirm(p.ctx, p.url)
	}
}

// linkEnded carries out the transfers r's link model ended by now.
func (n *Node) linkEnded(now time.Duration, r *replica) {
	if r.link == nil {
		return
	}
	for _, id := range append([]uint64(nil), r.link.Advance(now)...) {
		j := r.pulling[id]
		if j == nil || j.pull == nil || j.pull.id != id {
			continue
		}
		j.pull.linkDone = true
		if j.pull.fails && j.pull.hang == 0 {
			n.pullFailed(now, j)
			continue
		}
		n.linkOver(j)
	}
	for _, j := range r.pulling {
		if p := j.pull; p != nil && p.hang > 0 && p.hang <= now {
			n.pullFailed(now, j)
		}
	}
}

// linkNext is when r's pulls next need the loop.
func (r *replica) linkNext() (time.Duration, bool) {
	if r.link == nil {
		return 0, false
	}
	at, ok := r.link.Next()
	for _, j := range r.pulling {
		if p := j.pull; p != nil && p.hang > 0 && (!ok || p.hang < at) {
			at, ok = p.hang, true
		}
	}
	return at, ok
}

// unreserve gives back the KV j's replica reserved for its pull and ends
// the pull; a pull that waited may start.
func (n *Node) unreserve(now time.Duration, j *job) {
	r, p := j.rep, j.pull
	delete(r.pulling, p.id)
	j.pull = nil
	if p.cancel != nil {
		p.cancel()
	}
	if p.reserved > 0 {
		idle := !r.busy
		r.eng.Release(now, p.reserved)
		if idle {
			r.plan(now)
		}
	}
	if r.pulls.Len() > 0 {
		n.pump(now, r)
	}
}

// arrive joins j to its replica's engine with its prompt's KV in place.
func (n *Node) arrive(now time.Duration, j *job) {
	j.seq.Transferred = j.seq.Prompt
	n.join(now, j)
}

// join adds j to its replica's engine (joined first, then the reservation
// given back: an idle replica plans at the release, with the room it
// held).
func (n *Node) join(now time.Duration, j *job) {
	r := j.rep
	r.jobs = append(r.jobs, j)
	idle := !r.busy
	r.eng.Add(now, &j.seq)
	n.unreserve(now, j)
	if idle {
		r.plan(now)
	} else {
		r.recut()
	}
}

// pullFailed carries out a failed pull by the pool's policy.
func (n *Node) pullFailed(now time.Duration, j *job) {
	if n.kv.cfg.FailurePolicy == "recompute" {
		j.seq.Transferred = 0
		n.join(now, j)
		return
	}
	n.unreserve(now, j)
	j.fail = &kvLoadFailed
	j.rep.remove(j, jobFailed)
}

// abortPull stops j's pull wherever it is (its client went away, the node
// stops).
func (n *Node) abortPull(now time.Duration, j *job) {
	if j.pull.moving {
		j.rep.link.Cancel(now, j.pull.id)
	}
	n.unreserve(now, j)
}

// failure is how failed job j failed: its own failure, or the node's stop.
func (j *job) failure() *failure {
	if j.fail != nil {
		return j.fail
	}
	return &nodeStopped
}

// kvJob reads a request's kv_transfer_params into j: a prefill node keeps
// the KV of a do_remote_decode request; a decode node pulls that of a
// do_remote_prefill one. It returns what is wrong with them, for a 400.
func (n *Node) kvJob(j *job, p *kvParams) string {
	role := ""
	if n.kv != nil {
		role = n.kv.cfg.Role
	}
	switch {
	case p.DoRemoteDecode && p.DoRemotePrefill:
		return "kv_transfer_params: do_remote_decode and do_remote_prefill both set; a prefill request sets the first, its decode request the second"
	case p.DoRemoteDecode:
		if role != "prefill" {
			return "kv_transfer_params.do_remote_decode: this node is not a prefill node (its pool's role is " + cmpRole(role) + ")"
		}
		j.kvHold = true
	case p.DoRemotePrefill:
		if role != "decode" {
			return "kv_transfer_params.do_remote_prefill: this node is not a decode node (its pool's role is " + cmpRole(role) + ")"
		}
		url, err := p.pullURL()
		if err != nil {
			return err.Error()
		}
		j.pull = &pullState{url: url, bytes: kvlink.Bytes(n.kv.cfg.BytesPerToken, j.seq.Prompt)}
	}
	return ""
}

func cmpRole(role string) string {
	if role == "" {
		return "both"
	}
	return role
}

// withKV adds to a prefill's answer the kv_transfer_params its decode
// request pulls the KV with, as vLLM's NixlConnector answers.
func (n *Node) withKV(body []byte, j *job, r *http.Request) []byte {
	if j.kvID == "" {
		return body
	}
	host, port := n.kv.cfg.Advertise, 0
	if host == "" {
		host = r.Host
	}
	if h, p, err := net.SplitHostPort(host); err == nil {
		host = h
		port, _ = strconv.Atoi(p)
	}
	blocks := make([]int, (j.seq.Prompt+15)/16) // vLLM's 16-token blocks
	for i := range blocks {
		blocks[i] = i
	}
	kv, _ := json.Marshal(kvParams{DoRemotePrefill: true, RemoteEngineID: n.kv.engine, RemoteBlockIDs: blocks,
		RemoteHost: host, RemotePort: port, RemoteRequestID: j.kvID, TPSize: 1})
	i := bytes.LastIndexByte(body, '}')
	out := make([]byte, 0, len(body)+len(kv)+32)
	out = append(out, body[:i]...)
	out = append(out, `,"kv_transfer_params":`...)
	out = append(out, kv...)
	return append(out, body[i:]...)
}
