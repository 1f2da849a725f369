package node

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/internal/httpguard/hostiletest"
)

// The gateway's hostile-input corpus (hostiletest) against the node, served
// as `fleetdrill node` serves it (httpguard, an API key, a 64 KiB body
// limit) on a real loopback listener, plus what only the node reads: the
// token-count headers and x_fleetdrill at the edge of int64. Each gets a
// 4xx or its connection closed, never a 5xx or a hang; afterwards the node
// still serves, /healthz is truthful, and its KV gauge is back at 0.
func TestHostileInputs(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	n, err := New(Config{Models: []Model{{Name: testModel, Profile: testProfile(t)}}, Speed: 50, APIKey: testAPIKey,
		MaxBodyBytes: 64 << 10, Registerer: reg, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go n.Run(ctx)
	lim := httpguard.Defaults()
	lim.ReadHeaderTimeout, lim.BodyTimeout, lim.MaxHeaderBytes = 300*time.Millisecond, 300*time.Millisecond, 8<<10
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := lim.Server(n.Handler())
	go func() { _ = srv.Serve(lim.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close(); cancel(); <-n.Stopped() })
	addr := ln.Addr().String()

	// The node answers a body that names no model (null) 400 missing_model,
	// and checks the key before the route, as vLLM's middleware does.
	tg := hostiletest.Target{Addr: addr, Key: testAPIKey, Model: testModel,
		Want: map[string]int{"null body": 400, "wrong method": 401}}
	chat := `{"model":"` + testModel + `","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	cases := append(hostiletest.Cases(tg),
		hostiletest.Case{Name: "input header max int64", Req: hostiletest.Post(testAPIKey, chat, HeaderInputTokens+": 9223372036854775807"), Want: 400},
		hostiletest.Case{Name: "input header min int64", Req: hostiletest.Post(testAPIKey, chat, HeaderInputTokens+": -9223372036854775808"), Want: 400},
		hostiletest.Case{Name: "output header max int64", Req: hostiletest.Post(testAPIKey, chat, HeaderOutputTokens+": 9223372036854775807"), Want: 400},
		hostiletest.Case{Name: "both headers near overflow", Req: hostiletest.Post(testAPIKey, chat,
			HeaderInputTokens+": 9223372036854775000", HeaderOutputTokens+": 1000"), Want: 400},
		hostiletest.Case{Name: "x_fleetdrill near 2^63", Req: hostiletest.Post(testAPIKey,
			`{"model":"`+testModel+`","messages":[{"content":"hi"}],"x_fleetdrill":{"input_tokens":9223372036854775000,"output_tokens":1000}}`), Want: 400},
		hostiletest.Case{Name: "x_fleetdrill past int64", Req: hostiletest.Post(testAPIKey,
			`{"model":"`+testModel+`","messages":[{"content":"hi"}],"x_fleetdrill":{"input_tokens":1e19}}`), Want: 400},
	)
	hostiletest.Run(t, tg, cases)

	// One hostile request never stalls another: a normal request completes,
	// /healthz says 200, and the KV gauge is back at 0.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(chat))
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after the corpus: %d, want 200", resp.StatusCode)
	}
	hz, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	hz.Body.Close()
	if hz.StatusCode != http.StatusOK {
		t.Errorf("/healthz %d, want 200", hz.StatusCode)
	}
	waitFor(t, "the KV freed", func() bool {
		return series(t, reg, "fleetdrill_node_kv_used_tokens", map[string]string{"model": testModel}, false) == 0
	})
	if got := n.body.InFlight(); got != 0 {
		t.Errorf("in-flight body bytes %d after the corpus, want 0", got)
	}
}
