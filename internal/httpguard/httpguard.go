// Package httpguard bounds what an HTTP listener lets a client hold: how
// long it may take to send a request's headers and body, how long an idle
// keep-alive connection stays open, how large the headers may be, and how
// many connections are open at once. The gateway, the node's API and its
// admin API are served through it (fleetdrill gateway, fleetdrill node).
//
// There is no global write timeout: it would cut a healthy long stream.
// A writer bounds each write instead (the gateway: Config.StreamWriteTimeout).
// Nor is http.Server.ReadTimeout set: once a body is read, the server
// watches the connection for the client going away, and a read deadline
// left on it would cancel a long answer's context. The body's deadline is
// set per request instead, after the headers, and cleared when the body
// has been read.
//
// httpguard imports nothing from fleetdrill.
package httpguard

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits are what a listener lets a client hold. Zero fields are off.
type Limits struct {
	// ReadHeaderTimeout bounds the wait for a request's headers.
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the wait for a request's body, from the end of
	// its headers to its last byte.
	BodyTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (request line included).
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once: beyond it, new ones
	// wait in the kernel's accept queue until one closes.
	MaxConns int
}

// Defaults are the limits fleetdrill's listeners use unless told
// otherwise.
func Defaults() Limits {
	return Limits{
		ReadHeaderTimeout: 10 * time.Second,
		BodyTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		MaxConns:          4096,
	}
}

// Server returns a server of h within l. Serve it on l.Listener(ln).
func (l Limits) Server(h http.Handler) *http.Server {
	if l.BodyTimeout > 0 {
		h = bodyDeadline(h, l.BodyTimeout)
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, IdleTimeout: l.IdleTimeout,
		MaxHeaderBytes: l.MaxHeaderBytes}
}

// Listener returns ln with at most l.MaxConns connections open at once
// (ln itself when MaxConns is 0).
func (l Limits) Listener(ln net.Listener) net.Listener {
	if l.MaxConns <= 0 {
		return ln
	}
	return &capped{Listener: ln, sem: make(chan struct{}, l.MaxConns), done: make(chan struct{})}
}

// bodyDeadline sets a read deadline of d on a request with a body, and
// clears it once the body has been read to its end.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(d)); err != nil {
			h.ServeHTTP(w, r) // not a net.Conn underneath (a test recorder)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		h.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	cleared bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.cleared {
		// Done with the body: the connection is the server's again,
		// which watches it for the client going away. (After any other
		// error the deadline stays: the server closes the connection.)
		b.cleared = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// capped is a listener with a semaphore of connections.
type capped struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{} // closed by Close: an Accept waiting for room returns
	closeOnce sync.Once
}

func (c *capped) Accept() (net.Conn, error) {
	select {
	case c.sem <- struct{}{}:
	case <-c.done:
		return nil, net.ErrClosed
	}
	conn, err := c.Listener.Accept()
	if err != nil {
		<-c.sem
		return nil, err
	}
	return &cappedConn{Conn: conn, release: func() { <-c.sem }}, nil
}

func (c *capped) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	return c.Listener.Close()
}

type cappedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
