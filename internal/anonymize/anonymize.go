package anonymize

import (
	"fmt"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/trace"
)

// Config says how to anonymize. Only Key is required.
type Config struct {
	Key Key

	// IDHexChars is the pseudonym length after its prefix
	// (DefaultIDHexChars when 0); see CollisionBound.
	IDHexChars int

	// Shift is subtracted from every arrival time. Rebasing sets it to the
	// earliest arrival of the input (see Earliest), so that the first
	// request is at t=0.
	Shift time.Duration

	// Resolution, when positive, floors every arrival time (after the
	// shift) to a multiple of it. Exact arrival times are a side channel:
	// at microsecond precision they can be joined with a client's own logs
	// or a packet capture to say which request was whose, pseudonyms or not.
	Resolution time.Duration

	// BucketTokens, when above 1, rounds input and output token counts up
	// to a multiple of it. An exact prompt length fingerprints a known
	// prompt or document, and a session's sequence of exact lengths
	// fingerprints a conversation; buckets blur both. Rounding up keeps
	// a replay's load an upper bound of the real one.
	BucketTokens int

	// DropBlocks drops prefix-block hashes instead of pseudonymizing them.
	DropBlocks bool
}

// Anonymizer turns records into anonymized records. It is not safe for
// concurrent use.
type Anonymizer struct {
	cfg Config
	p   *Pseudonymizer
}

// New checks cfg and returns an Anonymizer.
func New(cfg Config) (*Anonymizer, error) {
	if cfg.IDHexChars == 0 {
		cfg.IDHexChars = DefaultIDHexChars
	}
	p, err := NewPseudonymizer(cfg.Key, cfg.IDHexChars)
	if err != nil {
		return nil, err
	}
	if cfg.Resolution < 0 {
		return nil, fmt.Errorf("resolution %v, want >= 0", cfg.Resolution)
	}
	if cfg.BucketTokens < 0 || cfg.BucketTokens > MaxTokens {
		return nil, fmt.Errorf("token bucket %d, want 0 to %d", cfg.BucketTokens, MaxTokens)
	}
	return &Anonymizer{cfg: cfg, p: p}, nil
}

// Config is the configuration in use, defaults filled in.
func (a *Anonymizer) Config() Config { return a.cfg }

// Anonymize overwrites dst with the anonymized src; dst may be src. dst is
// built field by field from an allow-list, so a field trace.Record gains
// later is dropped until someone decides otherwise here (and
// TestRecordFieldsClassified fails until they do). Deadline and Service
// (a measured execution time) are kept as they are: Resolution is about
// arrival times. Line is dropped: it says where in the raw file the row
// was.
func (a *Anonymizer) Anonymize(dst, src *trace.Record) {
	blocks := dst.Blocks[:0] // NB: when dst is src, each is read before it is overwritten
	if !a.cfg.DropBlocks {
		for _, h := range src.Blocks {
			blocks = append(blocks, a.p.Block(h))
		}
	}
	*dst = trace.Record{
		Time:     a.time(src.Time),
		Tenant:   a.p.ID(Tenant, src.Tenant),
		User:     a.p.ID(User, src.User),
		Session:  a.p.ID(Session, src.Session),
		Class:    src.Class,
		Model:    src.Model,
		Input:    a.tokens(src.Input),
		Output:   a.tokens(src.Output),
		Blocks:   blocks,
		Deadline: src.Deadline,
		Service:  src.Service,
	}
}

func (a *Anonymizer) time(t time.Duration) time.Duration {
	t -= a.cfg.Shift
	if r := a.cfg.Resolution; r > 0 {
		q := t / r
		if t%r < 0 {
			q-- // floor, not truncation, below zero
		}
		t = q * r
	}
	return t
}

func (a *Anonymizer) tokens(n int) int {
	if b := a.cfg.BucketTokens; b > 1 && n > 0 {
		if up := (int64(n) + int64(b) - 1) / int64(b) * int64(b); up <= MaxTokens {
			return int(up)
		}
	}
	return n
}
