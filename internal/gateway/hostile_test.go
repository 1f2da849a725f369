package gateway

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/internal/httpguard/hostiletest"
)

// The hostile-input corpus (hostiletest, the node's too): each gets a 4xx
// or has its connection closed, never a 5xx or a hang, and the backend
// sees none of them. The gateway is served as `fleetdrill gateway` serves
// it (httpguard), with short timeouts.
func TestHostileInputs(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.MaxBodyBytes = 64 << 10 })
	lim := httpguard.Defaults()
	lim.ReadHeaderTimeout, lim.BodyTimeout, lim.MaxHeaderBytes = 300*time.Millisecond, 300*time.Millisecond, 8<<10
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := lim.Server(h.gw.Handler())
	go func() { _ = srv.Serve(lim.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })

	tg := hostiletest.Target{Addr: ln.Addr().String(), Key: keyGlobal, Model: "llama-3.1-8b"}
	hostiletest.Run(t, tg, hostiletest.Cases(tg))
	if n := us.hits.Load(); n != 0 {
		t.Errorf("the backend saw %d hostile requests, want 0", n)
	}
	// The gateway still serves.
	if resp, _ := h.mustPost(keyGlobal, chatBody(false, "x")); resp.StatusCode != http.StatusOK {
		t.Errorf("after the corpus: %d, want 200", resp.StatusCode)
	}
}
