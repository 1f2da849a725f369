package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testGatewayKey is long enough for a keys file.
const testGatewayKey = "sk-test-global-0123456789abcdef0123456789"

// --metrics-listen serves /metrics on its own address, and the API's
// address then has none.
func TestGatewayCmdMetricsListen(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama-3.1-8b","object":"model"}]}`)
	}))
	defer backend.Close()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	require.NoError(t, os.WriteFile(keys, []byte("global "+testGatewayKey+"\n"), 0o600))

	var out syncBuffer
	cmd := newGatewayCmd()
	cmd.SetArgs([]string{"eu-residency", "--keys", keys, "--backend", "use-h100-8b=" + backend.URL,
		"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	api := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	met := regexp.MustCompile(`metrics on (http://127\.0\.0\.1:\d+/metrics)`)
	var base, metrics string
	require.Eventually(t, func() bool {
		s := out.String()
		if m := api.FindStringSubmatch(s); m != nil {
			base = m[1]
		}
		if m := met.FindStringSubmatch(s); m != nil {
			metrics = m[1]
		}
		return base != "" && metrics != ""
	}, 5*time.Second, 10*time.Millisecond)

	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get(base + "/metrics")
	require.Equal(t, http.StatusNotFound, code, "not on the serving port")
	code, body := get(metrics)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "go_goroutines")
	code, _ = get(base + "/healthz")
	require.Equal(t, http.StatusOK, code)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not shut down")
	}
	http.DefaultClient.CloseIdleConnections()
}

// The admin token comes from the environment or a file the owner alone
// may read; never from a flag.
func TestNodeAdminToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	good := file("token", "s3cret-from-file\n", 0o600)
	open := file("open", "s3cret-from-file\n", 0o644)
	empty := file("empty", "\n", 0o600)

	t.Setenv(adminTokenEnv, "")
	f := nodeFlags{adminTokenFile: good}
	require.NoError(t, f.readAdminToken(false))
	require.Equal(t, "s3cret-from-file", f.adminToken)

	f = nodeFlags{}
	require.ErrorContains(t, f.readAdminToken(true), "process listing")

	f = nodeFlags{adminTokenFile: open}
	err := f.readAdminToken(false)
	require.ErrorContains(t, err, "chmod 600 "+open)
	require.NotContains(t, err.Error(), "s3cret")

	f = nodeFlags{adminTokenFile: empty}
	require.ErrorContains(t, f.readAdminToken(false), "empty")

	t.Setenv(adminTokenEnv, "s3cret-from-env")
	f = nodeFlags{}
	require.NoError(t, f.readAdminToken(false))
	require.Equal(t, "s3cret-from-env", f.adminToken)
	f = nodeFlags{adminTokenFile: good}
	require.ErrorContains(t, f.readAdminToken(false), "give the token once")

	// Through the command: the flag is refused with exit 2.
	code, _, stderr := runCommand(t, newNodeCmd(), "--admin-listen", "127.0.0.1:0", "--admin-token", "s3cret")
	require.Equal(t, exitInvalid, code)
	require.True(t, strings.Contains(stderr, "--admin-token is no longer taken"), stderr)
}
