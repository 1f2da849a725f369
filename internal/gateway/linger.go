package gateway

import (
	"net/http"
	"strings"
	"time"
)

// A body over Config.MaxBodyBytes is answered 413 before the client has
// sent it all. A client that sent no Expect: 100-continue (Python's urllib
// and httpx, the OpenAI SDKs) is still writing; were the gateway to close
// the connection at once, the kernel would answer the bytes still coming
// with a reset, which destroys the 413 unread in the client's buffer: the
// client sees "connection reset", not the answer. So, as nginx's
// lingering_close, the gateway keeps reading and discarding the body for a
// while after the answer is out, then closes.
//
// The bounds are nginx's: at most lingerTime in all (lingering_time), and
// lingerIdle without a byte (lingering_timeout); in bytes, what the
// request declared (its Content-Length) and never more than the gateway's
// in-flight body budget (Config.MaxInflightBodyBytes), whose memory this
// does not use: the bytes are discarded as they come, through one small
// buffer.
const (
	lingerTime = 30 * time.Second
	lingerIdle = 5 * time.Second
)

// refuseTooLarge answers a body over the limit with the 413 and, where
// the client is still sending it, lingers (see above) so that it reads
// the answer. Called before the handler reads more of r.Body.
func (l *Limits) refuseTooLarge(w http.ResponseWriter, r *http.Request, tenant int, limit int64) {
	linger := l.canLinger(w, r)
	l.refuse(w, tenant, "", refuseTooLarge, errTooLarge(limit))
	if linger {
		l.linger(w, r)
	}
}

// canLinger prepares w for reading r's body after the answer: the
// connection closes after it (what is left of the body is not read to
// its end), and the server lets the handler read while it writes
// (EnableFullDuplex: by default, an HTTP/1 server stops reading a request
// once its answer starts). Not for a client that waits for 100 Continue
// before sending its body (it will send none), nor for HTTP/2 (a stream
// is reset on its own, the connection stays), nor a ResponseWriter that
// is not net/http's (the in-process transport).
func (l *Limits) canLinger(w http.ResponseWriter, r *http.Request) bool {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody ||
		strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return false
	}
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		return false
	}
	w.Header().Set("Connection", "close")
	return true
}

// linger sends the answer written to w and reads r's body on to its end,
// discarding it, within the bounds above.
func (l *Limits) linger(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return // the client is gone
	}
	budget := l.body.Budget()
	if r.ContentLength >= 0 {
		budget = min(budget, r.ContentLength)
	}
	end := time.Now().Add(lingerTime)
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 32<<10)
	for budget > 0 {
		now := time.Now()
		if !now.Before(end) {
			return
		}
		dl := now.Add(lingerIdle)
		if end.Before(dl) {
			dl = end
		}
		if rc.SetReadDeadline(dl) != nil {
			return
		}
		n, err := r.Body.Read(buf[:min(int64(len(buf)), budget)])
		budget -= int64(n)
		if err != nil {
			return // io.EOF: the client sent it all; else gone, or silent too long
		}
	}
}
