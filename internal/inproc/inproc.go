// Package inproc carries HTTP between fleetdrill's own parts in one
// process, with no socket: an http.RoundTripper that hands each request to
// the handler registered for its host and streams the answer back as the
// handler writes and flushes it. The live parts run over it unchanged —
// the gateway's upstream transport (gateway.Config.Transport), a replay's
// client — so that a whole live run (gateway, emulated nodes, replay) can
// run inside a testing/synctest bubble, on its fake clock: nothing blocks
// on the network, so the bubble's time moves only when every goroutine
// waits on a timer or a channel, and a ten-minute scenario takes as long
// as its computation.
//
// It is for the harness and tests, not for serving: no TLS, no limits, no
// connection reuse to speak of.
package inproc

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Transport routes requests by their URL's host to handlers.
type Transport struct {
	mu    sync.Mutex
	hosts map[string]http.Handler
}

// Handle serves host's requests with h (host as in a URL: "node-3.inproc",
// or with a port).
func (t *Transport) Handle(host string, h http.Handler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hosts == nil {
		t.hosts = map[string]http.Handler{}
	}
	t.hosts[host] = h
}

// RoundTrip implements http.RoundTripper: it returns once the handler has
// written its header (or returned); the body streams what it writes after.
// Cancelling the request's context ends the handler's (it is the same
// context) and the body's reads.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	h := t.hosts[req.URL.Host]
	t.mu.Unlock()
	if h == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("inproc: no handler for host %q (dial refused)", req.URL.Host)
	}
	// The server's view of the request: its own body, the request URI.
	sreq := req.Clone(req.Context())
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		sreq.Body = io.NopCloser(bytes.NewReader(b))
		sreq.ContentLength = int64(len(b))
	} else {
		sreq.Body = http.NoBody
	}
	sreq.RequestURI = req.URL.RequestURI()
	sreq.Host = req.URL.Host
	pr, pw := io.Pipe()
	w := &writer{header: http.Header{}, body: pw, ready: make(chan struct{})}
	body := &body{PipeReader: pr, closed: make(chan struct{})}
	go func() {
		// Until the client closes the body: a goroutine left waiting on a
		// context nobody cancels would outlive the run (and a synctest
		// bubble would call it a deadlock).
		select {
		case <-req.Context().Done():
			pr.CloseWithError(req.Context().Err())
		case <-body.closed:
		}
	}()
	go func() {
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				_ = pw.CloseWithError(fmt.Errorf("inproc: handler panicked: %v", v))
				w.start(http.StatusInternalServerError)
				return
			}
			w.start(http.StatusOK)
			// A cancelled request's body ends in its context's error,
			// not a clean end.
			_ = pw.CloseWithError(req.Context().Err())
		}()
		h.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		body.Close()
		return nil, req.Context().Err()
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.sent, Body: body, ContentLength: -1, Request: req}, nil
}

// writer is the handler's http.ResponseWriter: its header goes out at the
// first WriteHeader, Write or Flush, its body through the pipe.
type writer struct {
	header http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	code   int
	sent   http.Header
}

func (w *writer) Header() http.Header { return w.header }

// start sends the header with code, once.
func (w *writer) start(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *writer) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return // informational: not the answer
	}
	w.start(code)
}

func (w *writer) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.body.Write(p)
}

// Flush implements http.Flusher: what was written is already on its way
// (the pipe has no buffer), so the header is all there is to send.
func (w *writer) Flush() { w.start(http.StatusOK) }

// body is the response's body: closing it ends the handler's writes and
// the context's watch.
type body struct {
	*io.PipeReader
	once   sync.Once
	closed chan struct{}
}

func (b *body) Close() error {
	b.once.Do(func() {
		_ = b.PipeReader.CloseWithError(io.ErrClosedPipe)
		close(b.closed)
	})
	return nil
}
