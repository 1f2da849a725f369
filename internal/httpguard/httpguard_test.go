package httpguard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serve serves h within l on a local port and returns its address.
func serve(t *testing.T, l Limits, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.Server(h)
	done := make(chan struct{})
	go func() { _ = srv.Serve(l.Listener(ln)); close(done) }()
	t.Cleanup(func() {
		_ = srv.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return ln.Addr().String()
}

// waitClosed reads conn until the server closes it, within bound; it
// fails the test when the connection is still open then.
func waitClosed(t *testing.T, conn net.Conn, bound time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v", bound)
	}
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, _ = w.Write(b)
}

// A client that sends its headers and then not its body is cut off by the
// body deadline.
func TestSlowBodyIsCut(t *testing.T) {
	const d = 100 * time.Millisecond
	addr := serve(t, Limits{ReadHeaderTimeout: time.Second, BodyTimeout: d}, http.HandlerFunc(echo))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, conn, 20*d)
}

// A client that sends its body in time gets its answer, and a long answer
// after it is not cut by the body deadline.
func TestBodyInTimeAndLongAnswer(t *testing.T) {
	const d = 50 * time.Millisecond
	addr := serve(t, Limits{ReadHeaderTimeout: time.Second, BodyTimeout: d}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case <-time.After(4 * d): // longer than the body deadline
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(b)
	}))
	resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "hello" {
		t.Errorf("answer %q, want hello", b)
	}
}

// An idle keep-alive connection is closed after IdleTimeout.
func TestIdleConnectionClosed(t *testing.T) {
	const d = 100 * time.Millisecond
	addr := serve(t, Limits{ReadHeaderTimeout: time.Second, IdleTimeout: d}, http.HandlerFunc(echo))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("server closed the connection after the answer: not a keep-alive test")
	}
	waitClosed(t, conn, 20*d)
}

// Headers over MaxHeaderBytes are refused.
func TestHeadersTooLarge(t *testing.T) {
	addr := serve(t, Limits{ReadHeaderTimeout: time.Second, MaxHeaderBytes: 1 << 10}, http.HandlerFunc(echo))
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}

// With MaxConns open, the next connection is not served until one closes.
func TestMaxConns(t *testing.T) {
	addr := serve(t, Limits{ReadHeaderTimeout: 10 * time.Second, MaxConns: 2}, http.HandlerFunc(echo))
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// The third connects (the kernel's queue) but is not served.
	client := &http.Client{Timeout: 300 * time.Millisecond}
	if _, err := client.Get("http://" + addr + "/"); err == nil {
		t.Fatal("a third connection was served with two held open")
	}
	held[0].Close()
	client.Timeout = 10 * time.Second
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	resp.Body.Close()
}

// A client address with MaxConnsPerIP open has its next connection closed
// at once; another address is served, and so is the first once one of its
// connections closes.
func TestMaxConnsPerIP(t *testing.T) {
	refused := make(chan struct{}, 8)
	addr := serve(t, Limits{ReadHeaderTimeout: 10 * time.Second, MaxConnsPerIP: 2,
		OnRefused: func() { refused <- struct{}{} }}, http.HandlerFunc(echo))
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Both are counted once accepted: a request on each is answered.
	for _, c := range held {
		get(t, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	waitClosed(t, third, 10*time.Second)
	<-refused

	// Another loopback address has its own count (Linux routes 127/8 to lo).
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	other, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("no second loopback address here: %v", err)
	}
	defer other.Close()
	get(t, other)

	held[0].Close()
	client := &http.Client{Timeout: 10 * time.Second}
	var resp *http.Response
	// The server sees the close on its own time: retry until it does (the
	// bound is only against a hang).
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		if resp, err = client.Get("http://" + addr + "/"); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	resp.Body.Close()
}

// get sends one GET on conn and reads its answer.
func get(t *testing.T, conn net.Conn) {
	t.Helper()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// rawExchange writes req on a fresh connection to addr and reads one
// answer; it returns the answer, its body and the connection, still open
// on the client's side.
func rawExchange(t *testing.T, addr, req string) (*http.Response, string, net.Conn) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // guards a hang only
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), conn
}

// A request with both Content-Length and Transfer-Encoding (RFC 9112 §6.1:
// the server MUST close the connection after answering it) is framed by
// its chunked body, answered with Connection: close, and its connection
// closed; so is one chunked alone (Go's server deletes the Content-Length
// before the handler sees it). One with a Content-Length alone stays open.
func TestCodedRequestClosesConnection(t *testing.T) {
	addr := serve(t, Limits{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Hour}, http.HandlerFunc(echo))
	for _, tc := range []struct {
		name, head string
		close      bool
	}{
		{"Content-Length and chunked", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", true},
		{"chunked and Content-Length", "Transfer-Encoding: chunked\r\nContent-Length: 400\r\n", true},
		{"chunked alone", "Transfer-Encoding: chunked\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A non-empty chunked body, then a smuggled request: were the
			// body framed by its Content-Length, "11\r\n" would be the body
			// and the rest a second request.
			resp, body, conn := rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\n"+tc.head+"\r\n"+
				"11\r\nhello, chunked!!!\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp.StatusCode != http.StatusOK || body != "hello, chunked!!!" {
				t.Fatalf("answer %d %q, want 200 with the chunked body", resp.StatusCode, body)
			}
			if !resp.Close { // ReadResponse sets Close from "Connection: close", and drops the header
				t.Error("answer without Connection: close")
			}
			waitClosed(t, conn, 30*time.Second) // guards a hang only: the server closes at once
		})
	}
	t.Run("Content-Length alone", func(t *testing.T) {
		resp, body, conn := rawExchange(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
		if resp.StatusCode != http.StatusOK || body != "hello" || resp.Close {
			t.Fatalf("answer %d %q close=%v, want 200 hello kept open", resp.StatusCode, body, resp.Close)
		}
		// Still open: a second request on it is answered.
		if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"); err != nil {
			t.Fatal(err)
		}
		resp2, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("second request on the kept connection: %v", err)
		}
		resp2.Body.Close()
	})
}
