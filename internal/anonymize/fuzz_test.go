package anonymize

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetdrill/fleetdrill/internal/trace"
)

// fuzzOptions decodes FuzzAnonymizeCSV's option byte: bits 0-1 the time
// format, then rebase, 1 s resolution, 16-token buckets, skip bad rows,
// and an hour of disorder.
func fuzzOptions(o uint8) runOpts {
	m := DefaultMapping()
	m.TimeFormat = []TimeFormat{RFC3339, Unix, Seconds, UnixMS}[o&3]
	r := runOpts{mapping: m, rebase: o&4 != 0, skipBad: o&32 != 0}
	if o&8 != 0 {
		r.cfg.Resolution = time.Second
	}
	if o&16 != 0 {
		r.cfg.BucketTokens = 16
	}
	if o&64 != 0 {
		r.maxDisorder = time.Hour
	}
	return r
}

var pseudonymRE = map[string]*regexp.Regexp{
	"tenant": regexp.MustCompile(`^t-[0-9a-f]{16}$`), "user": regexp.MustCompile(`^u-[0-9a-f]{16}$`),
	"session": regexp.MustCompile(`^s-[0-9a-f]{16}$`),
}

// FuzzAnonymizeCSV: whatever the log, the anonymizer does not panic; what
// it writes reads back with the canonical reader, sorted and with only
// pseudonyms for ids; and no raw id of a mapped id column reaches the
// output, the log, the report or an error.
func FuzzAnonymizeCSV(f *testing.F) {
	f.Add([]byte("timestamp,tenant,user,session_id,model,class,prompt_tokens,completion_tokens,prompt\n"+
		"2024-05-01T12:00:00Z,AcmeCorp-Tenant,Alice@Example.COM,Conv#0001,m,gold,812,95,Hello World\n"), uint8(32))
	f.Add([]byte("timestamp,user,prompt_tokens,completion_tokens\n3.5,User-Ω-1,1,1\n1.25,User-Ω-2,2,2\n"), uint8(2|4|64))
	f.Fuzz(func(t *testing.T, data []byte, opts uint8) {
		o := fuzzOptions(opts)
		r := runBytes(t, string(data), o)

		ids, clear := fuzzCells(data)
		blobs := r.all()
		for _, id := range ids {
			if len(id) < 8 || !strings.ContainsFunc(id, unusual) || strings.Contains(clear, id) {
				continue // could be a number, a pseudonym, a name or a clear field
			}
			for i, b := range blobs {
				if bytes.Contains(b, []byte(id)) {
					t.Fatalf("blob %d holds raw id %q:\n%s", i, id, b)
				}
			}
		}
		if r.err != nil {
			return
		}

		// Print, then reparse.
		rd, err := trace.NewReader(bytes.NewReader(r.out), "out", trace.Options{Format: trace.FormatCanonical})
		if err != nil && r.rep.Rows.Written > 0 {
			t.Fatalf("output does not read back: %v\n%s", err, r.out)
		}
		if err != nil {
			return
		}
		n := 0
		for {
			var rec trace.Record
			err := rd.Next(&rec)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("output record %d does not read back: %v\n%s", n+1, err, r.out)
			}
			n++
			for field, v := range map[string]string{"tenant": rec.Tenant, "user": rec.User, "session": rec.Session} {
				if v != "" && !pseudonymRE[field].MatchString(v) {
					t.Fatalf("record %d: %s %q is not a pseudonym", n, field, v)
				}
			}
			if o.cfg.Resolution > 0 && rec.Time%o.cfg.Resolution != 0 {
				t.Fatalf("record %d: t %v not floored to %v", n, rec.Time, o.cfg.Resolution)
			}
			if o.cfg.BucketTokens > 1 && (rec.Input%16 != 0 || rec.Output%16 != 0) {
				t.Fatalf("record %d: tokens %d/%d not in buckets of 16", n, rec.Input, rec.Output)
			}
		}
		if n != r.rep.Rows.Written {
			t.Fatalf("read back %d records, the report says %d written", n, r.rep.Rows.Written)
		}
	})
}

// unusual is a rune that fixed text (JSON keys, hex, numbers, report
// words) does not have, so that an id holding one cannot appear by chance.
func unusual(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(" .,:;_()<>=|+*/'\"-\n\t[]{}\\", r))
}

// fuzzCells parses data as the anonymizer does and returns the cells of
// the default mapping's id columns, and the text that may be printed in
// clear: the header and the model and class cells.
func fuzzCells(data []byte) (ids []string, clear string) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, ""
	}
	var b strings.Builder
	b.WriteString("HMAC-SHA256(key, field || 0x00 || id)\x00")
	idCol, clearCol := map[int]bool{}, map[int]bool{}
	m := DefaultMapping()
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		h = strings.TrimSpace(h)
		b.WriteString(h + "\x00")
		switch h {
		case m.Tenant, m.User, m.Session:
			idCol[i] = true
		case m.Model, m.Class:
			clearCol[i] = true
		}
	}
	for {
		row, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			continue
		}
		for i, c := range row {
			if idCol[i] {
				ids = append(ids, c)
			}
			if clearCol[i] {
				b.WriteString(c + "\x00")
			}
		}
	}
	return ids, b.String()
}
