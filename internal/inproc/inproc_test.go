package inproc

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// A streamed answer arrives as the handler flushes it, on the bubble's
// clock: its header at once, each event when written.
func TestStreamsAsTheHandlerFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr Transport
		tr.Handle("node.inproc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Echo", string(b))
			w.WriteHeader(http.StatusAccepted)
			w.(http.Flusher).Flush()
			for i := range 3 {
				time.Sleep(time.Second)
				_, _ = io.WriteString(w, strings.Repeat("x", i+1)+"\n")
			}
		}))
		c := &http.Client{Transport: &tr}
		start := time.Now()
		resp, err := c.Post("http://node.inproc/v1/x", "text/plain", strings.NewReader("hello"))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		require.Equal(t, "hello", resp.Header.Get("X-Echo"))
		require.Zero(t, time.Since(start), "the header before the body")
		sc := bufio.NewScanner(resp.Body)
		for i := range 3 {
			require.True(t, sc.Scan())
			require.Equal(t, strings.Repeat("x", i+1), sc.Text())
			require.Equal(t, time.Duration(i+1)*time.Second, time.Since(start), "each line when written")
		}
		require.False(t, sc.Scan())
	})
}

// An unknown host is refused as a dial is; a cancelled request ends the
// handler's context.
func TestRefusedAndCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr Transport
		ended := make(chan error, 1)
		tr.Handle("slow.inproc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			<-r.Context().Done()
			ended <- r.Context().Err()
		}))
		c := &http.Client{Transport: &tr}
		_, err := c.Get("http://nobody.inproc/")
		require.ErrorContains(t, err, `no handler for host "nobody.inproc"`)

		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://slow.inproc/", nil)
		resp, err := c.Do(req)
		require.NoError(t, err)
		time.Sleep(time.Minute)
		cancel()
		require.ErrorIs(t, <-ended, context.Canceled)
		_, err = io.ReadAll(resp.Body)
		require.Error(t, err)
		resp.Body.Close()
	})
}
