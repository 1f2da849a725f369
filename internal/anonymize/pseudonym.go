package anonymize

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
)

// Field is an identifier field that gets a pseudonym.
type Field uint8

const (
	Tenant Field = iota
	User
	Session
	numFields
)

var fieldNames = [numFields]string{"tenant", "user", "session"}

// String is the field's name, which is also its HMAC domain and its key in
// the canonical JSONL.
func (f Field) String() string {
	if f < numFields {
		return fieldNames[f]
	}
	return fmt.Sprintf("Field(%d)", uint8(f))
}

// Prefix is what the field's pseudonyms start with: "t-", "u-" or "s-".
func (f Field) Prefix() string { return f.String()[:1] + "-" }

// blockDomain is the HMAC domain of prefix-block hashes.
const blockDomain = "block"

// Pseudonym lengths, in hex characters of the HMAC (4 bits each).
const (
	DefaultIDHexChars = 16 // 64 bits
	MinIDHexChars     = 8  // 32 bits: collisions likely past ~10^4 ids
	MaxIDHexChars     = 64 // the whole HMAC-SHA256
)

// Pseudonymizer turns raw identifiers into keyed pseudonyms:
//
//	prefix || hex(HMAC-SHA256(key, domain || 0x00 || raw))[:hexChars]
//
// The domain is the field's name, so one string in two fields gets two
// unrelated pseudonyms; the 0x00 separates the domain from the raw id (no
// domain contains one). The raw id is used byte for byte: " alice" and
// "Alice" are not "alice".
//
// A Pseudonymizer reuses its HMAC state: it is not safe for concurrent use.
type Pseudonymizer struct {
	hexChars int
	mac      hash.Hash
	sum      []byte
	hex      []byte
}

// NewPseudonymizer returns a Pseudonymizer with the key; hexChars is the
// pseudonym's length after the prefix, MinIDHexChars to MaxIDHexChars.
func NewPseudonymizer(k Key, hexChars int) (*Pseudonymizer, error) {
	if len(k.b) < MinKeyBytes {
		return nil, fmt.Errorf("key is %d bytes, want at least %d", len(k.b), MinKeyBytes)
	}
	if hexChars < MinIDHexChars || hexChars > MaxIDHexChars {
		return nil, fmt.Errorf("pseudonym length %d hex characters, want %d to %d", hexChars, MinIDHexChars, MaxIDHexChars)
	}
	return &Pseudonymizer{
		hexChars: hexChars,
		mac:      hmac.New(sha256.New, k.b),
		sum:      make([]byte, 0, sha256.Size),
		hex:      make([]byte, 0, 2*sha256.Size),
	}, nil
}

func (p *Pseudonymizer) mac1(domain string, raw []byte) []byte {
	p.mac.Reset()
	p.mac.Write([]byte(domain))
	p.mac.Write([]byte{0})
	p.mac.Write(raw)
	p.sum = p.mac.Sum(p.sum[:0])
	return p.sum
}

// ID is the pseudonym of raw in field f. The empty string (no id) stays
// empty: absence is not hidden.
func (p *Pseudonymizer) ID(f Field, raw string) string {
	if raw == "" {
		return ""
	}
	sum := p.mac1(f.String(), []byte(raw))
	p.hex = hex.AppendEncode(p.hex[:0], sum)
	return f.Prefix() + string(p.hex[:p.hexChars])
}

// Block is the pseudonym of a prefix-block hash: the first 8 bytes of the
// HMAC of its 8 big-endian bytes in the "block" domain. Equal blocks stay
// equal, so prefix-cache reuse survives, but a block hash computed from a
// guessed prompt cannot be matched against the output.
func (p *Pseudonymizer) Block(h uint64) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h)
	return binary.BigEndian.Uint64(p.mac1(blockDomain, b[:]))
}

// HexChars is the pseudonym length after the prefix.
func (p *Pseudonymizer) HexChars() int { return p.hexChars }

// CollisionBound is the birthday-bound probability that n distinct raw ids
// of one field get at least two equal pseudonyms of hexChars hex characters
// (b = 4·hexChars bits): 1 − exp(−n(n−1)/2^(b+1)), about n²/2^(b+1) when
// small. For the default 64 bits: 10^6 ids ≈ 2.7·10^-8, 10^8 ≈ 2.7·10^-4,
// 4.3·10^9 ≈ 0.39. For 32 bits: 10^4 ids ≈ 0.012, 10^5 ≈ 0.69. A
// collision merges two tenants, users or sessions in the output; it never
// reveals an id.
func CollisionBound(n int, hexChars int) float64 {
	if n < 2 {
		return 0
	}
	x := float64(n) * float64(n-1) / math.Exp2(float64(4*hexChars+1))
	return -math.Expm1(-x)
}
