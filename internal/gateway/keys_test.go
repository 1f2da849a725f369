package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

const longKey = "sk-global-0123456789abcdef0123456789abcdef"

// TestReadKeysFileRules: a keys file others may read is refused with the
// chmod to run; a short key is refused naming its line, never the key; a
// sha256: digest is a key.
func TestReadKeysFileRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), mode))
		require.NoError(t, os.Chmod(p, mode)) // whatever the umask
		return p
	}
	p := write("open.txt", "global "+longKey+"\n", 0o644)
	_, err := ReadKeysFile(p)
	require.ErrorContains(t, err, "chmod 600 "+p)
	require.NotContains(t, err.Error(), longKey)
	_, err = ReadKeysFile(write("group.txt", "global "+longKey+"\n", 0o640))
	require.ErrorContains(t, err, "chmod 600")

	p = write("short.txt", "# keys\nbank-eu "+longKey+"\nglobal sk-short-secret\n", 0o600)
	_, err = ReadKeysFile(p)
	require.ErrorContains(t, err, "line 3: key shorter than 32 characters")
	require.NotContains(t, err.Error(), "sk-short-secret")

	d := sha256.Sum256([]byte(longKey))
	p = write("hashed.txt", "global sha256:"+hex.EncodeToString(d[:])+"\n", 0o600)
	keys, err := ReadKeysFile(p)
	require.NoError(t, err)
	require.Equal(t, []Key{{"global", "sha256:" + hex.EncodeToString(d[:])}}, keys)

	_, err = ReadKeysFile(write("badhash.txt", "global sha256:abcd\n", 0o600))
	require.ErrorContains(t, err, "line 1: want sha256:")
	_, err = ReadKeysFile(write("dup.txt", "global "+longKey+"\nbank-eu sha256:"+hex.EncodeToString(d[:])+"\n", 0o600))
	require.ErrorContains(t, err, "line 2: key repeated")

	// The digest authenticates the key it is of, and only that.
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.Keys = keys })
	resp, _ := h.mustPost(longKey, chatBody(false, "hi"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = h.mustPost("sha256:"+hex.EncodeToString(d[:]), chatBody(false, "hi"))
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the digest is not the key")
	_, err = New(Config{Scenario: testScenario(t), Keys: []Key{{"global", "sha256:zz"}}})
	require.Error(t, err)
}

// TestMetricsApart: with Config.MetricsApart, the API handler has no
// /metrics; MetricsHandler serves it.
func TestMetricsApart(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.MetricsApart = true })
	resp, err := http.Get(h.srv.URL + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	rec := httptest.NewRecorder()
	MetricsHandler(h.gw.Registry()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Contains(t, rec.Body.String(), "fleetdrill_gateway_")
}
