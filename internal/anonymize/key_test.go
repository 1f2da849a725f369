package anonymize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// testKey is a fixed 32-byte key; otherKey differs in one byte.
var (
	testKey  = mustKey([]byte("0123456789abcdef0123456789abcdef"))
	otherKey = mustKey([]byte("0123456789abcdef0123456789abcdeX"))
)

func mustKey(b []byte) Key {
	k, err := KeyFromBytes(b)
	if err != nil {
		panic(err)
	}
	return k
}

func TestShortKeyRefused(t *testing.T) {
	_, err := KeyFromBytes(make([]byte, MinKeyBytes-1))
	require.EqualError(t, err, "key is 31 bytes, want at least 32 (generate one with --new-key-file)")

	path := filepath.Join(t.TempDir(), "short.key")
	require.NoError(t, os.WriteFile(path, []byte("hunter2"), 0o600))
	_, err = LoadKey(path, nil)
	require.ErrorContains(t, err, "short.key: key is 7 bytes, want at least 32")

	empty := filepath.Join(t.TempDir(), "empty.key")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = LoadKey(empty, nil)
	require.ErrorContains(t, err, "key is 0 bytes")

	_, err = NewPseudonymizer(Key{}, DefaultIDHexChars)
	require.Error(t, err)
	_, err = New(Config{})
	require.Error(t, err, "the zero Config has no key")
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	raw := bytes.Repeat([]byte{0xA5}, 40)
	path := filepath.Join(dir, "k")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	require.NoError(t, os.Chmod(path, 0o644)) // not subject to the umask
	var warned []string
	k, err := LoadKey(path, func(s string) { warned = append(warned, s) })
	require.NoError(t, err)
	require.Equal(t, 40, k.Len())
	require.Len(t, warned, 1)
	require.Contains(t, warned[0], "readable by others (mode 0644)")

	require.NoError(t, os.Chmod(path, 0o600))
	warned = nil
	_, err = LoadKey(path, func(s string) { warned = append(warned, s) })
	require.NoError(t, err)
	require.Empty(t, warned)

	_, err = LoadKey(filepath.Join(dir, "missing"), nil)
	require.ErrorContains(t, err, "key file: open")
	_, err = LoadKey(dir, nil)
	require.ErrorContains(t, err, "not a regular file")
}

func TestNewKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.key")
	k, err := NewKeyFile(path)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	require.EqualValues(t, NewKeyBytes, st.Size())

	loaded, err := LoadKey(path, func(s string) { t.Errorf("unexpected warning %q", s) })
	require.NoError(t, err)
	require.Equal(t, k.b, loaded.b)

	_, err = NewKeyFile(path)
	require.ErrorContains(t, err, "already exists")
	again, err := LoadKey(path, nil)
	require.NoError(t, err)
	require.Equal(t, k.b, again.b, "a refused --new-key-file leaves the old key")

	k2, err := NewKeyFile(filepath.Join(t.TempDir(), "other.key"))
	require.NoError(t, err)
	require.NotEqual(t, k.b, k2.b)
}

// TestKeyNeverPrints: every way a Key can be formatted prints the
// placeholder.
func TestKeyNeverPrints(t *testing.T) {
	k := mustKey([]byte("SECRETKEYSECRETKEYSECRETKEYSECRETKEY"))
	type wrap struct{ K Key }
	for _, s := range []string{
		fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %q %x %X %d", k, k, k, k, k, k, k, k),
		fmt.Sprintf("%v %+v %#v", wrap{k}, wrap{k}, &wrap{k}), k.String(), k.GoString(),
	} {
		require.NotContains(t, s, "SECRET")
		require.NotContains(t, s, "534543524554") // hex of SECRET
		require.Contains(t, s, "redacted")
	}
	b, err := json.Marshal(wrap{k})
	require.NoError(t, err)
	require.Equal(t, `{"K":"anonymize.Key(redacted)"}`, string(b))
}
