package anonymize

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func newP(t *testing.T, k Key, n int) *Pseudonymizer {
	t.Helper()
	p, err := NewPseudonymizer(k, n)
	require.NoError(t, err)
	return p
}

// TestPseudonymScheme pins the scheme to its definition, computed here
// independently: a change of scheme unlinks every published trace, so it
// must be deliberate.
func TestPseudonymScheme(t *testing.T) {
	p := newP(t, testKey, DefaultIDHexChars)
	for _, f := range []Field{Tenant, User, Session} {
		m := hmac.New(sha256.New, []byte("0123456789abcdef0123456789abcdef"))
		m.Write([]byte(f.String() + "\x00alice"))
		want := f.Prefix() + hex.EncodeToString(m.Sum(nil))[:16]
		require.Equal(t, want, p.ID(f, "alice"), "ID(%v, alice)", f)
	}
	require.Equal(t, "u-", User.Prefix())
	require.Equal(t, "t-", Tenant.Prefix())
	require.Equal(t, "s-", Session.Prefix())
	require.Regexp(t, `^u-[0-9a-f]{16}$`, p.ID(User, "alice"))
}

func TestPseudonymStability(t *testing.T) {
	p := newP(t, testKey, DefaultIDHexChars)
	again := newP(t, testKey, DefaultIDHexChars) // a second run, same key
	other := newP(t, otherKey, DefaultIDHexChars)

	t.Run("same key, same pseudonym", func(t *testing.T) {
		for _, id := range []string{"alice", "bob", "org-1", "a\x00b", "ünï"} {
			for _, f := range []Field{Tenant, User, Session} {
				require.Equal(t, p.ID(f, id), again.ID(f, id))
				require.Equal(t, p.ID(f, id), p.ID(f, id))
			}
		}
	})
	t.Run("different key, different pseudonym", func(t *testing.T) {
		for _, f := range []Field{Tenant, User, Session} {
			require.NotEqual(t, p.ID(f, "alice"), other.ID(f, "alice"))
		}
	})
	t.Run("same id in two fields, unrelated pseudonyms", func(t *testing.T) {
		hexOf := func(s string) string { return s[2:] }
		u, s, tn := p.ID(User, "alice"), p.ID(Session, "alice"), p.ID(Tenant, "alice")
		require.NotEqual(t, hexOf(u), hexOf(s))
		require.NotEqual(t, hexOf(u), hexOf(tn))
		require.NotEqual(t, hexOf(s), hexOf(tn))
	})
	t.Run("ids are exact bytes", func(t *testing.T) {
		require.NotEqual(t, p.ID(User, "alice"), p.ID(User, "Alice"))
		require.NotEqual(t, p.ID(User, "alice"), p.ID(User, " alice"))
	})
	t.Run("no id stays no id", func(t *testing.T) {
		require.Equal(t, "", p.ID(User, ""))
	})
	t.Run("domain separator", func(t *testing.T) {
		// "user" || 0 || "x" must not equal "use" || 0 || "rx" and the
		// like; a domain never contains 0x00, so the split is unique.
		require.NotEqual(t, p.ID(User, "x"), p.ID(User, "\x00x"))
	})
}

func TestPseudonymLength(t *testing.T) {
	for _, n := range []int{MinIDHexChars, 12, DefaultIDHexChars, 32, MaxIDHexChars} {
		p := newP(t, testKey, n)
		id := p.ID(Session, "conv-1")
		require.Regexp(t, regexp.MustCompile(`^s-[0-9a-f]+$`), id)
		require.Len(t, id, 2+n)
		// A shorter pseudonym is a prefix of a longer one with the key.
		require.Equal(t, newP(t, testKey, MaxIDHexChars).ID(Session, "conv-1")[:2+n], id)
	}
	for _, n := range []int{0, MinIDHexChars - 1, MaxIDHexChars + 1} {
		_, err := NewPseudonymizer(testKey, n)
		require.ErrorContains(t, err, "want 8 to 64", "n=%d", n)
	}
}

func TestBlockPseudonyms(t *testing.T) {
	p := newP(t, testKey, DefaultIDHexChars)
	require.Equal(t, p.Block(7), p.Block(7))
	require.NotEqual(t, p.Block(7), p.Block(8))
	require.NotEqual(t, uint64(7), p.Block(7))
	require.NotEqual(t, p.Block(7), newP(t, otherKey, DefaultIDHexChars).Block(7))
}

func TestCollisionBound(t *testing.T) {
	tests := []struct {
		n, hex int
		want   float64
	}{
		{0, 16, 0},
		{1, 16, 0},
		{1_000_000, 16, 2.71e-8},
		{100_000_000, 16, 2.71e-4},
		{10_000, 8, 0.0116},
		{100_000, 8, 0.688},
	}
	for _, tt := range tests {
		got := CollisionBound(tt.n, tt.hex)
		require.InDelta(t, tt.want, got, tt.want*0.01+1e-12, "CollisionBound(%d, %d)", tt.n, tt.hex)
	}
}
