// Package httpguard bounds what an HTTP listener lets a client hold: how
// long it may take to send a request's headers and body, how long an idle
// keep-alive connection stays open, how large the headers may be, and how
// many connections are open at once, in all and from one client address.
// The gateway, the node's API and its admin API are served through it
// (fleetdrill gateway, fleetdrill node).
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
	// MaxConnsPerIP bounds the connections open at once from one client
	// address: beyond it, a new one is closed as soon as it is accepted
	// (it does not wait: it would hold a place in the global cap).
	MaxConnsPerIP int
	// OnRefused, when set, is called for each connection closed by
	// MaxConnsPerIP (a metric; never the address).
	OnRefused func()
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
		MaxConnsPerIP:     1024,
	}
}

// Server returns a server of h within l. Serve it on l.Listener(ln). It
// closes the connection after answering a request that came with a
// Transfer-Encoding (closeAfterCoded).
func (l Limits) Server(h http.Handler) *http.Server {
	if l.BodyTimeout > 0 {
		h = bodyDeadline(h, l.BodyTimeout)
	}
	h = closeAfterCoded(h)
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, IdleTimeout: l.IdleTimeout,
		MaxHeaderBytes: l.MaxHeaderBytes}
}

// Listener returns ln with at most l.MaxConns connections open at once
// and at most l.MaxConnsPerIP from one address (ln itself when both are
// 0).
func (l Limits) Listener(ln net.Listener) net.Listener {
	if l.MaxConns <= 0 && l.MaxConnsPerIP <= 0 {
		return ln
	}
	c := &capped{Listener: ln, done: make(chan struct{}), perIP: l.MaxConnsPerIP, onRefused: l.OnRefused}
	if l.MaxConns > 0 {
		c.sem = make(chan struct{}, l.MaxConns)
	}
	if l.MaxConnsPerIP > 0 {
		c.open = make(map[string]int)
	}
	return c
}

// closeAfterCoded closes the connection after answering a request that came
// with a Transfer-Encoding. RFC 9112 §6.1: a server that gets both
// Content-Length and Transfer-Encoding MUST close the connection after
// answering, since a front proxy may have framed the request by the other
// header (request smuggling). Go's server frames such a request by its
// chunked coding and deletes the Content-Length before any handler runs,
// so a handler cannot tell it from a request that was chunked alone: both
// close. A chunked request is rare from an OpenAI client (the SDKs send a
// Content-Length), and the cost is one reconnection.
func closeAfterCoded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close") // the server closes after the answer
		}
		h.ServeHTTP(w, r)
	})
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

// capped is a listener with a semaphore of connections (nil: no global
// cap) and a count of open connections by client address (nil: no cap per
// address).
type capped struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{} // closed by Close: an Accept waiting for room returns
	closeOnce sync.Once

	perIP     int
	onRefused func()
	mu        sync.Mutex
	open      map[string]int
}

func (c *capped) Accept() (net.Conn, error) {
	for {
		if c.sem != nil {
			select {
			case c.sem <- struct{}{}:
			case <-c.done:
				return nil, net.ErrClosed
			}
		}
		conn, err := c.Listener.Accept()
		if err != nil {
			c.release()
			return nil, err
		}
		ip := hostOf(conn.RemoteAddr())
		if !c.admit(ip) {
			_ = conn.Close()
			c.release()
			if c.onRefused != nil {
				c.onRefused()
			}
			continue
		}
		cc := &cappedConn{Conn: conn}
		cc.release = func() { c.leave(ip); c.release() }
		return cc, nil
	}
}

// release frees a place in the global cap.
func (c *capped) release() {
	if c.sem != nil {
		<-c.sem
	}
}

// admit counts a connection from ip; false when ip has its cap open.
func (c *capped) admit(ip string) bool {
	if c.open == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[ip] >= c.perIP {
		return false
	}
	c.open[ip]++
	return true
}

func (c *capped) leave(ip string) {
	if c.open == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[ip]--; c.open[ip] <= 0 {
		delete(c.open, ip) // the map holds addresses with connections open only
	}
}

// hostOf is addr's IP (its whole string when it has no port: a unix
// socket's connections share one count).
func hostOf(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(addr.String()); err == nil {
		return h
	}
	return addr.String()
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
