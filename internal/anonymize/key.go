package anonymize

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MinKeyBytes is the shortest key accepted: 256 bits, HMAC-SHA256's block
// of security. A shorter key (a password typed into a file) would let
// whoever guesses it recompute every pseudonym from a list of candidate ids.
const MinKeyBytes = 32

// maxKeyBytes bounds what LoadKey reads, so that pointing --key-file at a
// trace fails fast instead of reading gigabytes.
const maxKeyBytes = 1 << 16

// NewKeyBytes is the size of a key NewKeyFile writes.
const NewKeyBytes = 32

// Key is the secret of the keyed pseudonyms. Its formatting methods print
// a placeholder, never the bytes, so that a Key that reaches a log line or
// a %v by mistake leaks nothing.
type Key struct {
	b []byte
}

// KeyFromBytes returns a Key holding a copy of b; b must be at least
// MinKeyBytes long.
func KeyFromBytes(b []byte) (Key, error) {
	if len(b) < MinKeyBytes {
		return Key{}, fmt.Errorf("key is %d bytes, want at least %d (generate one with --new-key-file)", len(b), MinKeyBytes)
	}
	return Key{b: append([]byte(nil), b...)}, nil
}

// LoadKey reads a key file: raw bytes, all of them, at least MinKeyBytes.
// The bytes are used as they are (a hex or base64 text file is a valid key
// of its text's bytes). warn, if not nil, gets a line when the file can be
// read by its group or others.
func LoadKey(path string, warn func(string)) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Key{}, fmt.Errorf("key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Key{}, fmt.Errorf("key file %s: not a regular file", path)
	}
	if warn != nil && st.Mode().Perm()&0o077 != 0 {
		warn(fmt.Sprintf("key file %s is readable by others (mode %04o); chmod 600 it", path, st.Mode().Perm()))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyBytes+1))
	if err != nil {
		return Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	if len(b) > maxKeyBytes {
		return Key{}, fmt.Errorf("key file %s: longer than %d bytes; is it the right file?", path, maxKeyBytes)
	}
	k, err := KeyFromBytes(b)
	if err != nil {
		return Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// NewKeyFile writes NewKeyBytes bytes from crypto/rand to a new file at
// path, mode 0600, and returns the key. It refuses to overwrite a file:
// replacing a key unlinks every pseudonym made with the old one.
func NewKeyFile(path string) (Key, error) {
	b := make([]byte, NewKeyBytes)
	if _, err := rand.Read(b); err != nil {
		return Key{}, fmt.Errorf("new key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Key{}, fmt.Errorf("new key file %s: already exists; pass it as --key-file, or remove it first", path)
		}
		return Key{}, fmt.Errorf("new key file: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(path)
		return Key{}, fmt.Errorf("new key file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return Key{}, fmt.Errorf("new key file: %w", err)
	}
	return Key{b: b}, nil
}

// Len is the key's length in bytes.
func (k Key) Len() int { return len(k.b) }

const keyPlaceholder = "anonymize.Key(redacted)"

// String, GoString and Format print a placeholder.
func (k Key) String() string               { return keyPlaceholder }
func (k Key) GoString() string             { return keyPlaceholder }
func (k Key) Format(f fmt.State, _ rune)   { io.WriteString(f, keyPlaceholder) }
func (k Key) MarshalText() ([]byte, error) { return []byte(keyPlaceholder), nil }
