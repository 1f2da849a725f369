package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestGatewayCmdServesAndShutsDown(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/models" { // the start-up check, and the openai kind's probe
			// A server started with vLLM's --max-model-len 1024.
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama-3.1-8b","object":"model","max_model_len":1024}]}`)
			return
		}
		_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[]}`)
	}))
	defer backend.Close()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	// The key by its digest: the file need not hold it.
	digest := sha256.Sum256([]byte(testGatewayKey))
	require.NoError(t, os.WriteFile(keys, []byte("# tenant key\nglobal sha256:"+hex.EncodeToString(digest[:])+"\n"), 0o600))
	backends := filepath.Join(dir, "backends.txt")
	require.NoError(t, os.WriteFile(backends, []byte("use-h100-8b "+backend.URL+"\n"), 0o600))

	var out syncBuffer
	cmd := newGatewayCmd()
	cmd.SetArgs([]string{"eu-residency", "--keys", keys, "--backends", backends, "--listen", "127.0.0.1:0", "--speed", "10"})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	re := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	var base string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 5*time.Second, 10*time.Millisecond)

	// Start-up names the server's limit, below the scenario's.
	require.Contains(t, out.String(), "gateway: pool use-h100-8b backend "+strings.TrimPrefix(backend.URL, "http://")+
		": model llama-3.1-8b takes at most 1024 tokens (GET /v1/models max_model_len), below the scenario's")
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama-3.1-8b","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+testGatewayKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(base + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `fleetdrill_gateway_requests_total{class="interactive",outcome="completed",tenant="global"} 1`)
	require.Contains(t, string(body), "go_goroutines")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not shut down")
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestGatewayCmdErrors(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	require.NoError(t, os.WriteFile(keys, []byte("global "+testGatewayKey+"\n"), 0o600))
	short := filepath.Join(dir, "short.txt")
	require.NoError(t, os.WriteFile(short, []byte("global sk-1\n"), 0o600))
	open := filepath.Join(dir, "open.txt")
	require.NoError(t, os.WriteFile(open, []byte("global "+testGatewayKey+"\n"), 0o600))
	require.NoError(t, os.Chmod(open, 0o644))
	for name, args := range map[string][]string{
		"no keys":      {"eu-residency", "--backend", "use-h100-8b=http://127.0.0.1:1"},
		"no backends":  {"eu-residency", "--keys", keys},
		"short key":    {"eu-residency", "--keys", short, "--backend", "use-h100-8b=http://127.0.0.1:1"},
		"open keys":    {"eu-residency", "--keys", open, "--backend", "use-h100-8b=http://127.0.0.1:1"},
		"unknown pool": {"eu-residency", "--keys", keys, "--backend", "nope=http://127.0.0.1:1"},
		"bad url":      {"eu-residency", "--keys", keys, "--backend", "use-h100-8b=ftp://x"},
		"bad speed":    {"eu-residency", "--keys", keys, "--backend", "use-h100-8b=http://127.0.0.1:1", "--speed", "-2"},
		"too fast":     {"eu-residency", "--keys", keys, "--backend", "use-h100-8b=http://127.0.0.1:1", "--speed", "20000"},
		// The gateway has no answer cache to run this rung with.
		"cached answers": {"eu-residency", "--keys", keys, "--backend", "use-h100-8b=http://127.0.0.1:1", "--set",
			"policy.degradation=[{name: cache, action: cached-answers, class: interactive, hit_rate: 0.3, trigger: {queue_wait: 10s}}]"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := newGatewayCmd()
			cmd.SetArgs(args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.Execute()
			require.Error(t, err)
			var ec exitCoder
			require.True(t, asExitCoder(err, &ec))
			require.Equal(t, exitInvalid, ec.ExitCode())
		})
	}
}
