package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"github.com/fleetdrill/fleetdrill/internal/httpguard/certtest"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The gateway serves https with --tls-cert and --tls-key, and reaches an
// https backend whose CA --backend-ca names.
func TestGatewayCmdServesTLS(t *testing.T) {
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/models" {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llama-3.1-8b","object":"model"}]}`)
			return
		}
		_, _ = io.WriteString(w, `{"object":"chat.completion","choices":[]}`)
	}))
	defer backend.Close()
	dir := t.TempDir()
	backendCA := filepath.Join(dir, "backend-ca.pem")
	require.NoError(t, os.WriteFile(backendCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: backend.Certificate().Raw}), 0o600))
	keys := filepath.Join(dir, "keys.txt")
	digest := sha256.Sum256([]byte(testGatewayKey))
	require.NoError(t, os.WriteFile(keys, []byte("global sha256:"+hex.EncodeToString(digest[:])+"\n"), 0o600))
	certFile, keyFile, cert := certtest.WriteSelfSigned(t, dir, "gateway")

	// Without --backend-ca the start-up check cannot trust the backend.
	cmd := newGatewayCmd()
	cmd.SetArgs([]string{"eu-residency", "--keys", keys, "--backend", "use-h100-8b=" + backend.URL, "--listen", "127.0.0.1:0"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	require.ErrorContains(t, cmd.Execute(), "certificate")

	var out syncBuffer
	cmd = newGatewayCmd()
	cmd.SetArgs([]string{"eu-residency", "--keys", keys, "--backend", "use-h100-8b=" + backend.URL, "--listen", "127.0.0.1:0",
		"--speed", "10", "--tls-cert", certFile, "--tls-key", keyFile, "--backend-ca", backendCA})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	re := regexp.MustCompile(`listening on (https://127\.0\.0\.1:\d+)`)
	var base string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 5*time.Second, 10*time.Millisecond, out.String())

	pool := x509.NewCertPool()
	pool.AddCert(cert)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"llama-3.1-8b","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+testGatewayKey)
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS)

	// Plain http on the https listener gets nowhere.
	plain, err := http.Get(strings.Replace(base, "https://", "http://", 1) + "/healthz")
	if err == nil {
		plain.Body.Close()
		require.NotEqual(t, http.StatusOK, plain.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("gateway did not shut down")
	}
}

func TestGatewayCmdTLSFlagErrors(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.txt")
	require.NoError(t, os.WriteFile(keys, []byte("global "+testGatewayKey+"\n"), 0o600))
	certFile, keyFile, _ := certtest.WriteSelfSigned(t, dir, "a")
	_, otherKey, _ := certtest.WriteSelfSigned(t, dir, "b")
	base := []string{"eu-residency", "--keys", keys, "--backend", "use-h100-8b=http://127.0.0.1:1", "--check-backends=false", "--listen", "127.0.0.1:0"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"cert without key": {[]string{"--tls-cert", certFile}, "--tls-cert needs --tls-key"},
		"key without cert": {[]string{"--tls-key", keyFile}, "--tls-key needs --tls-cert"},
		"client ca alone":  {[]string{"--tls-client-ca", certFile}, "--tls-client-ca needs --tls-cert and --tls-key"},
		"mismatched pair":  {[]string{"--tls-cert", certFile, "--tls-key", otherKey}, "private key does not match public key"},
		"bad backend ca":   {[]string{"--backend-ca", keys}, "--backend-ca"},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := newGatewayCmd()
			cmd.SetArgs(append(append([]string{}, base...), tc.args...))
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			cmd.SilenceUsage, cmd.SilenceErrors = true, true
			err := cmd.Execute()
			require.ErrorContains(t, err, tc.want)
			var ec exitCoder
			require.True(t, asExitCoder(err, &ec))
			require.Equal(t, exitInvalid, ec.ExitCode())
		})
	}
}

// The node serves https, requires a client certificate with
// --tls-client-ca, and reloads its certificate on SIGHUP.
func TestNodeCmdServesTLSAndReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, first := certtest.WriteSelfSigned(t, dir, "node")
	clientCert, clientKey, _ := certtest.WriteSelfSigned(t, dir, "client")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"node", "--listen", "127.0.0.1:0", "--speed", "10",
			"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", clientCert}, &out, &errb)
	}()
	re := regexp.MustCompile(`on https://(127\.0\.0\.1:\d+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 10*time.Second, 5*time.Millisecond, errb.String())

	pool := x509.NewCertPool()
	pool.AddCert(first)
	pair, err := tls.LoadX509KeyPair(clientCert, clientKey)
	require.NoError(t, err)
	get := func(conf *tls.Config) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: conf}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	_, err = get(&tls.Config{RootCAs: pool})
	require.Error(t, err, "no client certificate")
	resp, err := get(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, first.Raw, resp.TLS.PeerCertificates[0].Raw)

	// A new pair in the same files, then SIGHUP: the next handshake sees it.
	c2, k2, second := certtest.WriteSelfSigned(t, dir, "node2")
	require.NoError(t, os.Rename(c2, certFile))
	require.NoError(t, os.Rename(k2, keyFile))
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	pool.AddCert(second)
	require.Eventually(t, func() bool {
		resp, err := get(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}})
		return err == nil && string(resp.TLS.PeerCertificates[0].Raw) == string(second.Raw)
	}, 5*time.Second, 10*time.Millisecond, errb.String())
	require.Contains(t, errb.String(), "tls certificate reloaded")

	cancel()
	select {
	case c := <-code:
		require.Equal(t, 0, c, errb.String())
	case <-time.After(15 * time.Second):
		t.Fatal("node did not shut down")
	}
}
