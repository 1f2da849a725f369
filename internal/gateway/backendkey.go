package gateway

import (
	"errors"
	"net/http"
	"strings"
)

// keyedTransport sends the gateway's own key (Config.BackendKey) with every
// upstream request: completions, retries and hedges, health probes, load
// scrapes and the model check alike, so that no new call site can forget
// it. The client's Authorization is never among them: an upstream request
// is built afresh, with only the headers the gateway chooses (proxy.go).
type keyedTransport struct {
	auth string // "Bearer KEY"
	next http.RoundTripper
}

func (t *keyedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	r.Header.Set("Authorization", t.auth)
	return t.next.RoundTrip(r)
}

// CloseIdleConnections passes Gateway.Close's call on to the transport.
func (t *keyedTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// checkBackendKey refuses a key no Authorization header can carry: every
// upstream request would fail.
func checkBackendKey(k string) error {
	if strings.ContainsFunc(k, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errors.New("gateway: backend key holds a control character (a newline?): give the key alone")
	}
	return nil
}
