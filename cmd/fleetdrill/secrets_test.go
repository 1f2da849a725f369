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

// testAPIKey is long enough for a node's or a backend's API key.
const testAPIKey = "sk-node-0123456789abcdef0123456789abcdef"

// An API key comes from the environment or a file the owner alone may
// read, at least 32 characters; errors name the flag, the variable or the
// file and what to do, never the key.
func TestAPIKeySources(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	const short = "sk-short-1234"
	good := file("key", testAPIKey+"\n", 0o600)
	shortFile := file("short", short+"\n", 0o600)
	worldReadable := file("world", testAPIKey+"\n", 0o644)
	groupReadable := file("group", testAPIKey+"\n", 0o640)
	empty := file("empty", "\n", 0o600)
	missing := filepath.Join(dir, "missing")

	for _, src := range []*secretSource{&nodeAPIKeySecret, &backendKeySecret} {
		for _, tc := range []struct {
			name, env, file string
			flagSet         bool
			want            string
			wantErr         []string // each in the error
		}{
			{name: "neither: no key, the API open"},
			{name: "from the environment", env: testAPIKey, want: testAPIKey},
			{name: "from a file", file: good, want: testAPIKey},
			{name: "short, in the environment", env: short,
				wantErr: []string{"$" + src.env + ": API key shorter than 32 characters", "openssl rand -hex 24"}},
			{name: "short, in a file", file: shortFile,
				wantErr: []string{"--" + src.fileFlag + " " + shortFile + ": API key shorter than 32 characters"}},
			{name: "a file others may read", file: worldReadable,
				wantErr: []string{"--" + src.fileFlag + " " + worldReadable + ": mode 0644", "chmod 600 " + worldReadable}},
			{name: "a file its group may read", file: groupReadable,
				wantErr: []string{"--" + src.fileFlag + " " + groupReadable + ": mode 0640", "chmod 600 " + groupReadable}},
			{name: "an empty file", file: empty, wantErr: []string{"--" + src.fileFlag + " " + empty + ": empty"}},
			{name: "a missing file", file: missing, wantErr: []string{"--" + src.fileFlag + ": ", missing}},
			{name: "both", env: testAPIKey, file: good, wantErr: []string{"both $" + src.env + " and --" + src.fileFlag}},
			{name: "the refused flag", flagSet: true,
				wantErr: []string{"--" + src.flag + " is not taken: an API key on the command line shows in every process listing",
					"$" + src.env, "--" + src.fileFlag}},
		} {
			t.Run(src.flag+"/"+tc.name, func(t *testing.T) {
				t.Setenv(src.env, tc.env)
				got, err := src.read(tc.file, tc.flagSet)
				if tc.wantErr == nil {
					require.NoError(t, err)
					require.Equal(t, tc.want, got)
					return
				}
				require.Error(t, err)
				for _, w := range tc.wantErr {
					require.ErrorContains(t, err, w)
				}
				require.NotContains(t, err.Error(), "sk-", "an error never repeats the key")
				require.Empty(t, got)
			})
		}
	}
}

// fleetdrill node refuses a key it should not take with exit 2, naming
// the file.
func TestNodeCommandAPIKeyInvalid(t *testing.T) {
	t.Setenv(nodeAPIKeyEnv, "")
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	require.NoError(t, os.WriteFile(open, []byte(testAPIKey), 0o644))
	require.NoError(t, os.Chmod(open, 0o644))
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("sk-short"), 0o600))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-key-file", open}, "--api-key-file " + open + ": mode 0644 lets others than its owner read it: run chmod 600 " + open},
		{[]string{"--api-key-file", short}, "--api-key-file " + short + ": API key shorter than 32 characters"},
		{[]string{"--api-key", testAPIKey}, "--api-key is not taken"},
	} {
		code, _, stderr := runCommand(t, newNodeCmd(), tc.args...)
		require.Equal(t, exitInvalid, code, "node %v: stderr %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, "node %v", tc.args)
		require.NotContains(t, stderr, testAPIKey, "node %v", tc.args)
	}
}

// With $FLEETDRILL_NODE_API_KEY, fleetdrill node's /v1 paths need the key
// and its health check does not.
func TestNodeCommandAPIKey(t *testing.T) {
	t.Setenv(nodeAPIKeyEnv, testAPIKey)
	t.Setenv(adminTokenEnv, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"node", "--listen", "127.0.0.1:0", "--speed", "10"}, &out, &errb)
	}()
	var api string
	require.Eventually(t, func() bool {
		if m := nodeURLRE.FindStringSubmatch(out.String()); m != nil {
			api = m[1]
		}
		return api != ""
	}, 10*time.Second, 5*time.Millisecond, "node did not print its address; stderr %s", errb.String())
	require.Contains(t, out.String(), "(API key required on /v1)")

	status := func(path, key string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+api+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, status("/v1/models", ""))
	require.Equal(t, http.StatusUnauthorized, status("/v1/models", "sk-wrong"))
	require.Equal(t, http.StatusOK, status("/v1/models", testAPIKey))
	require.Equal(t, http.StatusOK, status("/healthz", ""))
	require.Equal(t, http.StatusOK, status("/metrics", ""))

	cancel()
	select {
	case c := <-code:
		require.Equal(t, exitOK, c, "stderr %s", errb.String())
	case <-time.After(15 * time.Second):
		t.Fatal("node did not exit after cancel")
	}
}

// fleetdrill gateway refuses a backend key it should not take with exit 2,
// naming the file, before it starts anything.
func TestGatewayCmdBackendKeyInvalid(t *testing.T) {
	t.Setenv(backendKeyEnv, "")
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	require.NoError(t, os.WriteFile(keys, []byte("global "+testGatewayKey+"\n"), 0o600))
	open := filepath.Join(dir, "open")
	require.NoError(t, os.WriteFile(open, []byte(testAPIKey), 0o644))
	require.NoError(t, os.Chmod(open, 0o644))
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("sk-short"), 0o600))
	base := []string{"eu-residency", "--keys", keys, "--backend", "use-h100-8b=http://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend-key-file", open}, "--backend-key-file " + open + ": mode 0644 lets others than its owner read it: run chmod 600 " + open},
		{[]string{"--backend-key-file", short}, "--backend-key-file " + short + ": API key shorter than 32 characters"},
		{[]string{"--backend-key", testAPIKey}, "--backend-key is not taken"},
	} {
		code, _, stderr := runCommand(t, newGatewayCmd(), append(base, tc.args...)...)
		require.Equal(t, exitInvalid, code, "gateway %v: stderr %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, "gateway %v", tc.args)
		require.NotContains(t, stderr, testAPIKey, "gateway %v", tc.args)
	}
}

// fleetdrill gateway sends $FLEETDRILL_BACKEND_API_KEY to its backends: a
// backend that wants it passes the start-up check with it, and fails it,
// named, with another.
func TestGatewayCmdBackendKey(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testAPIKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama-3.1-8b","object":"model"}]}`)
	}))
	defer backend.Close()
	keys := filepath.Join(t.TempDir(), "keys.txt")
	require.NoError(t, os.WriteFile(keys, []byte("global "+testGatewayKey+"\n"), 0o600))
	args := []string{"eu-residency", "--keys", keys, "--backend", "use-h100-8b=" + backend.URL, "--listen", "127.0.0.1:0"}

	t.Setenv(backendKeyEnv, strings.Replace(testAPIKey, "node", "nope", 1))
	code, _, stderr := runCommand(t, newGatewayCmd(), args...)
	require.Equal(t, exitInvalid, code, stderr)
	require.Contains(t, stderr, "GET /v1/models: status 401: the backend refused the gateway's backend key")
	require.NotContains(t, stderr, "sk-nope", "an error never repeats the key")

	t.Setenv(backendKeyEnv, testAPIKey)
	var out syncBuffer
	cmd := newGatewayCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "listening on") },
		5*time.Second, 10*time.Millisecond, "the gateway did not start: %s", out.String())
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not shut down")
	}
}
