package faults

import (
	"testing"
)

// FuzzParse: Parse never panics; a spec it accepts is valid, prints to text
// that parses back to the same spec, and printing is idempotent. The seed
// corpus is in testdata/fuzz/FuzzParse (one file per seed, with crashers
// the fuzzer found kept as regression cases); run the fuzzer with
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 30s ./faults/
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"regional-outage region=us-east at=10m for=15m",
		"brownout latency=300ms fail=0.2 region=us-east at=10m0s",
		"node-loss pool=p at=1m",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text)
		if err != nil {
			if s != (Spec{}) {
				t.Fatalf("Parse(%q) = %v with error %v, want the zero Spec", text, s, err)
			}
			for _, msg := range messages(err) {
				if msg == "" {
					t.Fatalf("Parse(%q): an empty problem in %q", text, err)
				}
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Parse(%q) = %v, whose Validate() = %v", text, s, err)
		}
		printed := s.String()
		back, err := Parse(printed)
		if err != nil {
			t.Fatalf("Parse(%q) = %v, printed %q, which does not parse: %v", text, s, printed, err)
		}
		if back != s {
			t.Fatalf("Parse(%q) = %#v, printed %q, which parses to %#v", text, s, printed, back)
		}
		if again := back.String(); again != printed {
			t.Fatalf("printing is not idempotent: %q, then %q", printed, again)
		}
	})
}
