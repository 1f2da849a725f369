package httpguard

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BodyBudget: a body over MaxBody is ErrBodyTooLarge (announced or
// chunked), a body the budget has no room for ErrBodyBudget before it is
// read, one that breaks off ErrBodyUnreadable; a body read holds its
// Content-Length (MaxBody when chunked) until released.
func TestBodyBudget(t *testing.T) {
	if got := NewBodyBudget(100, 10).Budget(); got != 100 {
		t.Errorf("a budget below the body limit: %d, want it raised to 100", got)
	}
	b := NewBodyBudget(16, 40)
	held := make(chan func(), 1)
	hold := make(chan struct{})
	broken := make(chan error, 1)
	addr := serve(t, Limits{ReadHeaderTimeout: 10 * time.Second, BodyTimeout: 200 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, release, err := b.Read(w, r)
			if r.URL.Path == "/broken" {
				broken <- err
				return
			}
			switch {
			case errors.Is(err, ErrBodyTooLarge):
				w.WriteHeader(http.StatusRequestEntityTooLarge)
			case errors.Is(err, ErrBodyBudget):
				w.WriteHeader(http.StatusTooManyRequests)
			case errors.Is(err, ErrBodyUnreadable):
				w.WriteHeader(http.StatusBadRequest)
			case r.URL.Path == "/hold":
				held <- release
				<-hold
				_, _ = w.Write(body)
			default:
				release()
				_, _ = w.Write(body)
			}
		}))
	post := func(path, body string, chunked bool) int {
		t.Helper()
		var rd io.Reader = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // no length known: chunked
		}
		resp, err := http.Post("http://"+addr+path, "text/plain", rd)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("/", strings.Repeat("a", 17), false); got != http.StatusRequestEntityTooLarge {
		t.Errorf("17 bytes announced: %d, want 413", got)
	}
	if got := post("/", strings.Repeat("a", 17), true); got != http.StatusRequestEntityTooLarge {
		t.Errorf("17 bytes chunked: %d, want 413", got)
	}
	if got := post("/", "0123456789abcdef", false); got != http.StatusOK || b.InFlight() != 0 {
		t.Errorf("16 bytes: %d, in flight %d; want 200, 0", got, b.InFlight())
	}
	// A chunked body reserves MaxBody while held: 16 of 40.
	go func() {
		if resp, err := http.Post("http://"+addr+"/hold", "text/plain", io.MultiReader(strings.NewReader("x"))); err == nil {
			resp.Body.Close()
		}
	}()
	release := <-held
	if got := b.InFlight(); got != 16 {
		t.Errorf("a chunked body held: %d in flight, want 16", got)
	}
	if got := post("/", "0123456789abcdef", false); got != http.StatusOK {
		t.Errorf("16 more fit in 40: %d", got)
	}
	b.reserve(16) // as a second body held: 32 of 40
	if got := post("/", "0123456789", false); got != http.StatusTooManyRequests {
		t.Errorf("10 more with 32 of 40 held: %d, want 429", got)
	}
	b.inflight.Add(-16)
	release()
	close(hold)
	// A body that stops short of its Content-Length until the body
	// deadline: unreadable, and nothing held.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /broken HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
	if err := <-broken; !errors.Is(err, ErrBodyUnreadable) {
		t.Errorf("a body cut short: %v, want ErrBodyUnreadable", err)
	}
	if got := b.InFlight(); got != 0 {
		t.Errorf("all released: %d in flight, want 0", got)
	}
}
