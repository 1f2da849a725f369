package node

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/inproc"
	"github.com/fleetdrill/fleetdrill/twin/kvlink"
)

// Llama 3.1 8B's KV per token in bf16: 2 × 32 layers × 8 KV heads × 128 ×
// 2 bytes.
const llama8BKVBytes = 131072

func pdPair(t *testing.T, policy string, speed float64) (p, d *harness) {
	t.Helper()
	// A lease of hours: at speed 50 the default 30 s is 0.6 s of wall time,
	// which a loaded machine may spend between two steps of a test
	// (TestPDLeaseAndTransferTime holds the lease on model time).
	p = start(t, Config{Speed: speed, KV: &KVConfig{Role: "prefill", BytesPerToken: llama8BKVBytes, Lease: 4 * time.Hour}})
	d = start(t, Config{Speed: speed, KV: &KVConfig{Role: "decode", BytesPerToken: llama8BKVBytes,
		Bandwidth: 50e9, Latency: 1310 * time.Microsecond, GPUs: 1, FailurePolicy: policy, Wire: true}})
	return p, d
}

// prefill sends the prefill leg as a P/D router does (max_tokens 1,
// do_remote_decode) and returns the kv_transfer_params its answer carries.
func prefill(t *testing.T, p *harness, prompt int) map[string]any {
	t.Helper()
	resp := p.post(t, "/v1/completions", map[string]any{"model": testModel, "prompt": "x", "max_tokens": 1,
		"x_fleetdrill": map[string]int{"input_tokens": prompt}, "kv_transfer_params": map[string]any{"do_remote_decode": true}})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("prefill: %d %s", resp.StatusCode, b)
	}
	var out struct {
		KV map[string]any `json:"kv_transfer_params"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.KV == nil {
		t.Fatalf("prefill answer: no kv_transfer_params (%v)", err)
	}
	return out.KV
}

func decode(t *testing.T, d *harness, prompt int, kv map[string]any) (int, string) {
	t.Helper()
	resp := d.post(t, "/v1/completions", map[string]any{"model": testModel, "prompt": "x", "max_tokens": 8,
		"x_fleetdrill": map[string]int{"input_tokens": prompt}, "kv_transfer_params": kv})
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A prefill node keeps the prompt's KV until the decode node has pulled
// it over the wire; the decode node answers with the prompt prefilled
// elsewhere, and its own engine never computed the prompt.
func TestPDPullMovesTheKV(t *testing.T) {
	p, d := pdPair(t, "fail", 50)
	kv := prefill(t, p, 2000)
	if kv["do_remote_prefill"] != true || kv["remote_request_id"] == "" || kv["remote_host"] == "" {
		t.Fatalf("kv_transfer_params %v: want do_remote_prefill and where to pull from", kv)
	}
	if got := p.node.Stats()[0].KVUsed; got < 2000 {
		t.Fatalf("prefill node holds %d KV tokens after the prefill, want the prompt's 2000", got)
	}
	code, body := decode(t, d, 2000, kv)
	if code != http.StatusOK {
		t.Fatalf("decode: %d %s", code, body)
	}
	// The decode side said it had it all before it answered
	// (serveKVDone): the prefill side holds nothing.
	if got := p.node.Stats()[0].KVUsed; got != 0 {
		t.Fatalf("prefill node holds %d KV tokens after the pull, want 0", got)
	}
	// Pulled once: a second pull of the same id finds nothing.
	code, body = decode(t, d, 2000, kv)
	if code != http.StatusInternalServerError || !strings.Contains(body, "kv_load_failed") {
		t.Fatalf("second pull of a released KV: %d %s, want 500 kv_load_failed", code, body)
	}
}

// Failures on the wire: a reset_peer toxic on every pull (fail: 1) fails
// the pull, which the decode node answers by its policy: fail → 500,
// recompute → it prefills the prompt itself and answers.
func TestPDWireFailureFollowsThePolicy(t *testing.T) {
	for _, tc := range []struct {
		policy string
		code   int
	}{{"fail", http.StatusInternalServerError}, {"recompute", http.StatusOK}} {
		t.Run(tc.policy, func(t *testing.T) {
			p, d := pdPair(t, tc.policy, 50)
			if resp, _ := d.adminDo(t, http.MethodPost, testToken, map[string]any{"link": map[string]any{"fail": 1}}); resp.StatusCode != http.StatusOK {
				t.Fatalf("link fault: %d", resp.StatusCode)
			}
			kv := prefill(t, p, 1000)
			code, body := decode(t, d, 1000, kv)
			if code != tc.code {
				t.Fatalf("decode with every pull reset: %d %s, want %d", code, body, tc.code)
			}
			if tc.code != http.StatusOK && !strings.Contains(body, "kv_load_failed") {
				t.Fatalf("failed pull's body %s: want kv_load_failed", body)
			}
			// The prefill side was not told: it keeps the KV for its lease.
			if got := p.node.Stats()[0].KVUsed; got < 1000 {
				t.Fatalf("prefill node holds %d KV tokens after a failed pull, want the prompt's until the lease ends", got)
			}
			// Cleared, the link moves KV again.
			if resp, _ := d.adminDo(t, http.MethodDelete, testToken, nil); resp.StatusCode != http.StatusOK {
				t.Fatalf("reset: %d", resp.StatusCode)
			}
			kv = prefill(t, p, 1000)
			if code, body := decode(t, d, 1000, kv); code != http.StatusOK {
				t.Fatalf("decode after the fault: %d %s", code, body)
			}
		})
	}
}

// A degraded link is a bandwidth toxic at the degraded rate scaled as the
// bytes are, in wall time, and a latency toxic; both leave when cleared.
func TestPDLinkDegradedToxics(t *testing.T) {
	p, d := pdPair(t, "fail", 4)
	kv := prefill(t, p, 100)
	if code, body := decode(t, d, 100, kv); code != http.StatusOK { // makes the proxy
		t.Fatalf("decode: %d %s", code, body)
	}
	if resp, _ := d.adminDo(t, http.MethodPost, testToken, map[string]any{"link": map[string]any{"bandwidth_gbs": 0.5, "add_latency": int64(40 * time.Millisecond)}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("link fault: %d", resp.StatusCode)
	}
	d.node.kv.mu.Lock()
	var rate, lat float64
	for _, px := range d.node.kv.proxies {
		for _, tx := range px.Toxics.GetToxicArray() {
			b, _ := json.Marshal(tx)
			var m struct {
				Attributes map[string]float64 `json:"attributes"`
			}
			json.Unmarshal(b, &m)
			if v, ok := m.Attributes["rate"]; ok {
				rate = v
			}
			if v, ok := m.Attributes["latency"]; ok {
				lat = v
			}
		}
	}
	d.node.kv.mu.Unlock()
	// 0.5 GB/s × 1 GPU × 1/65536 × speed 4 / 1000 = 30.5 KB/s; 40 ms / 4.
	if rate != 30 || lat != 10 {
		t.Fatalf("toxics: rate %g KB/s, latency %g ms; want 30 and 10", rate, lat)
	}
	bw, l := d.node.reps[0].link.Rate()
	if bw != 0.5e9 || l != 1310*time.Microsecond+40*time.Millisecond {
		t.Fatalf("link model: %g B/s, %v; want the degraded 0.5e9 and 41.31ms", bw, l)
	}
	d.adminDo(t, http.MethodDelete, testToken, nil)
	if bw, _ := d.node.reps[0].link.Rate(); bw != 50e9 {
		t.Fatalf("link model after the reset: %g B/s, want its own 50e9", bw)
	}
}

// What a node cannot take in kv_transfer_params is a 400 that says so;
// an unknown KV id is a 404; link faults on a node with no link are
// refused by name.
func TestPDBadInput(t *testing.T) {
	plain := start(t, Config{})
	p, d := pdPair(t, "fail", 50)
	for _, tc := range []struct {
		h    *harness
		kv   map[string]any
		want string
	}{
		{plain, map[string]any{"do_remote_decode": true}, "not a prefill node"},
		{p, map[string]any{"do_remote_prefill": true, "remote_host": "x", "remote_request_id": "kv-1-1"}, "not a decode node"},
		{d, map[string]any{"do_remote_prefill": true, "remote_request_id": "kv-1-1"}, "remote_host: required"},
		{d, map[string]any{"do_remote_prefill": true, "remote_host": "x", "remote_request_id": "../admin"}, "remote_request_id"},
		{d, map[string]any{"do_remote_prefill": true, "remote_host": "x", "remote_port": 70000, "remote_request_id": "kv-1-1"}, "remote_port"},
		{d, map[string]any{"do_remote_prefill": true, "remote_host": "evil@p-0", "remote_request_id": "kv-1-1"}, "remote_host"},
		{d, map[string]any{"do_remote_prefill": true, "do_remote_decode": true}, "both set"},
	} {
		code, body := decode(t, tc.h, 10, tc.kv)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("kv_transfer_params %v: %d %s, want 400 naming %q", tc.kv, code, body, tc.want)
		}
	}
	resp, err := http.Get(p.srv.URL + kvPath + "kv-0-99")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET an unknown KV: %d, want 404", resp.StatusCode)
	}
	if resp, _ := p.adminDo(t, http.MethodPost, testToken, map[string]any{"link": map[string]any{"fail": 0.5}}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("link fault on a prefill node: %d, want 400", resp.StatusCode)
	}
	if resp, _ := d.adminDo(t, http.MethodPost, testToken, map[string]any{"link": map[string]any{"fail": 2}}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("link fail 2: %d, want 400", resp.StatusCode)
	}
}

// On model time (an in-process pair, no wire): a prefill's KV is let go
// when its lease runs out if no pull reads it, and a pull's transfer
// takes the link model's time, latency + bytes / bandwidth.
func TestPDLeaseAndTransferTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &inproc.Transport{}
		client := &http.Client{Transport: tr}
		mk := func(host string, kv *KVConfig) *Node {
			n, err := New(Config{Models: []Model{{Name: testModel, Profile: testProfile(t)}}, KV: kv})
			if err != nil {
				t.Fatal(err)
			}
			go n.Run(t.Context())
			tr.Handle(host, n.Handler())
			return n
		}
		// In the bubble: time.Sleep and time.Since below are its fake
		// clock, model time at speed 1, not the machine's.
		pn := mk("p.inproc", &KVConfig{Role: "prefill", BytesPerToken: llama8BKVBytes, Lease: 10 * time.Second, Advertise: "p.inproc"})
		mk("d.inproc", &KVConfig{Role: "decode", BytesPerToken: llama8BKVBytes, Bandwidth: 1e9, Latency: 5 * time.Millisecond, Client: client})
		post := func(host string, body map[string]any) (*http.Response, []byte) {
			b, _ := json.Marshal(body)
			resp, err := client.Post("http://"+host+"/v1/completions", "application/json", strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			return resp, out
		}
		pre := map[string]any{"model": testModel, "prompt": "x", "max_tokens": 1,
			"x_fleetdrill": map[string]int{"input_tokens": 4000}, "kv_transfer_params": map[string]any{"do_remote_decode": true}}
		_, body := post("p.inproc", pre)
		var out struct {
			KV map[string]any `json:"kv_transfer_params"`
		}
		json.Unmarshal(body, &out)
		if pn.Stats()[0].KVUsed < 4000 {
			t.Fatalf("prefill holds %d tokens, want 4000", pn.Stats()[0].KVUsed)
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if got := pn.Stats()[0].KVUsed; got != 0 {
			t.Fatalf("prefill holds %d tokens 11 s after a 10 s lease, want 0", got)
		}
		if resp, _ := post("d.inproc", map[string]any{"model": testModel, "prompt": "x", "max_tokens": 1,
			"x_fleetdrill": map[string]int{"input_tokens": 4000}, "kv_transfer_params": out.KV}); resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("pull after the lease ran out: %d, want 500", resp.StatusCode)
		}

		// A pull's time on an idle link: 5 ms + 4000 × 131072 B / 1 GB/s.
		_, body = post("p.inproc", pre)
		json.Unmarshal(body, &out)
		t0 := time.Now()
		resp, body := post("d.inproc", map[string]any{"model": testModel, "prompt": "x", "max_tokens": 1,
			"x_fleetdrill": map[string]int{"input_tokens": 4000}, "kv_transfer_params": out.KV})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("decode: %d %s", resp.StatusCode, body)
		}
		took := time.Since(t0)
		want := kvlink.Duration(kvlink.Bytes(llama8BKVBytes, 4000), 1e9, 5*time.Millisecond)
		// The decode replica then computes the last prompt token: one
		// step, far below the transfer's 529 ms.
		if took < want || took > want+50*time.Millisecond {
			t.Fatalf("pull and one step took %v, want the transfer's %v and one step", took, want)
		}
	})
}
