package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client that sends a 20 MB body without Expect: 100-continue (Python's
// urllib, httpx, the OpenAI SDKs) reads the 413, not a connection reset:
// the gateway answers, then reads and discards the body (linger.go) while
// the client is still writing, and closes once it has it all.
func TestTooLargeReachesClientWithoutExpect(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
	const size = 20 << 20 // 20 × DefaultMaxBodyBytes
	body := padded(size)

	t.Run("raw", func(t *testing.T) {
		// A raw HTTP/1.1 writer: it sends its headers and all of its body
		// before it reads anything, as a blocking client does.
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		wrote := make(chan error, 1)
		go func() {
			_, err := fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", keyGlobal, len(body))
			if err == nil {
				_, err = io.Copy(conn, strings.NewReader(body))
			}
			wrote <- err
		}()
		// The whole body went: nothing reset the connection under it.
		require.NoError(t, <-wrote)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		wantErrorCode(t, string(b), "request_too_large")
		assert.True(t, resp.Close, "the connection closes after the answer")
	})
	t.Run("http.Client", func(t *testing.T) {
		// Go's client sends no Expect either, and writes while it reads.
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/chat/completions", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+keyGlobal)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
		wantErrorCode(t, string(b), "request_too_large")
	})
	t.Run("expect 100-continue", func(t *testing.T) {
		// A client that waits for 100 Continue sends no body: the 413
		// comes at once and nothing is read.
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"+
			"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n", keyGlobal, len(body))
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})
	if got := h.metric("fleetdrill_gateway_refused_total", map[string]string{"reason": refuseTooLarge}); got != 3 {
		t.Errorf("refused_total{body-too-large} = %v, want 3", got)
	}
	if got := us.hits.Load(); got != 0 {
		t.Errorf("backend hits = %d, want 0", got)
	}
}
