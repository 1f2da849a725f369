package trace

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseSeconds(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"12", 12 * time.Second, true},
		{"3435.948056", 3435948056 * time.Microsecond, true},
		{"0.000000001", 1, true},
		{"0.0000000005", 1, true}, // half a nanosecond rounds up
		{"0.0000000004", 0, true},
		{"1.9999999999", 2 * time.Second, true},
		{"1.5e3", 1500 * time.Second, true},
		{"15E-1", 1500 * time.Millisecond, true},
		{"1e-9", 1, true},
		{"0.0e5", 0, true},
		{"9223372036.854775807", 1<<63 - 1, true},
		{"9223372036.854775808", 0, false}, // overflows a Duration
		{"1e20", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{".5", 0, false},
		{"5.", 0, false},
		{"05", 0, false},
		{"1e", 0, false},
		{"1x", 0, false},
		{"NaN", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseSeconds([]byte(tt.in))
			require.Equal(t, tt.ok, ok, "parseSeconds(%q) ok", tt.in)
			require.Equal(t, tt.want, got, "parseSeconds(%q)", tt.in)
		})
	}
}

func TestAppendSecondsRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 999, time.Second, 3435948056 * time.Microsecond, 1500 * time.Millisecond, 1<<63 - 1} {
		b := appendSeconds(nil, d)
		got, ok := parseSeconds(b)
		require.True(t, ok, "%s", b)
		require.Equal(t, d, got, "%s", b)
	}
	require.Equal(t, "3435.948056", string(appendSeconds(nil, 3435948056*time.Microsecond)))
	require.Equal(t, "0.000000001", string(appendSeconds(nil, 1)))
	require.Equal(t, "60", string(appendSeconds(nil, time.Minute)))
}

func TestParseWallTime(t *testing.T) {
	tests := []struct {
		in   string
		want string // RFC 3339 with nanoseconds, "" when invalid
	}{
		{"2023-11-16 18:17:03.9799600", "2023-11-16T18:17:03.97996Z"},
		{"2023-11-16 18:17:03.0000001", "2023-11-16T18:17:03.0000001Z"},
		{"2024-05-10 00:00:00.0000000+00:00", "2024-05-10T00:00:00Z"},
		{"2024-05-10 00:00:00.0000000-07:00", "2024-05-10T07:00:00Z"},
		{"2024-05-10T00:00:00Z", "2024-05-10T00:00:00Z"},
		{"2024-11-15 16:57:50", "2024-11-15T16:57:50Z"},
		{"2024-02-29 23:59:59.9", "2024-02-29T23:59:59.9Z"},
		{"1969-12-31 23:59:59.9999999", "1969-12-31T23:59:59.9999999Z"},
		{"0001-01-01 00:00:00", "0001-01-01T00:00:00Z"},
		{"2023-02-29 00:00:00", ""},
		{"2023-13-01 00:00:00", ""},
		{"2023-11-16 18:60:00", ""},
		{"2023-11-16 18:17:03.", ""},
		{"2023-11-16 18:17:03.12345678", ""},
		{"2023-11-16 18:17:03+0000", ""},
		{"2023-11-16 18:17:03 ", ""},
		{"2023-11-16", ""},
		{"0000-01-01 00:00:00", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ticks, ok := parseWallTime([]byte(tt.in))
			require.Equal(t, tt.want != "", ok, "parseWallTime(%q) ok", tt.in)
			if ok {
				require.Equal(t, tt.want, ticksToTime(ticks).Format(time.RFC3339Nano))
			}
		})
	}
}

// TestParseWallTimeAgreesWithTime cross-checks the calendar arithmetic
// against package time over a range of dates.
func TestParseWallTimeAgreesWithTime(t *testing.T) {
	start := time.Date(1899, 12, 25, 13, 7, 11, 0, time.UTC)
	for d := start; d.Year() < 2110; d = d.Add(97*time.Hour + 13*time.Minute + 7*time.Second + 1234500) {
		s := d.Format("2006-01-02 15:04:05.0000000")
		ticks, ok := parseWallTime([]byte(s))
		require.True(t, ok, s)
		require.Equal(t, d.UnixNano()/100, ticks, s)
	}
}

func TestCSVSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"a,b,c", []string{"a", "b", "c"}, true},
		{",,", []string{"", "", ""}, true},
		{"", []string{""}, true},
		{`"a,b",c`, []string{"a,b", "c"}, true},
		{`"say ""hi""",""`, []string{`say "hi"`, ""}, true},
		{`x,"y"`, []string{"x", "y"}, true},
		{`"a"b,c`, nil, false},
		{`a"b,c`, nil, false},
		{`"abc`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var r csvRow
			ok := r.split([]byte(tt.in))
			require.Equal(t, tt.ok, ok)
			if !ok {
				return
			}
			got := make([]string, len(r.fields))
			for i, f := range r.fields {
				got[i] = string(f)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestJSONStringEscapes(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{`"\u00e9\u20AC"`, "é€"},
		{`"\ud83d\ude00"`, "😀"},
		{`"\ud83d"`, "\uFFFD"},               // a lone high surrogate
		{`"\ude00x"`, "\uFFFDx"},             // a lone low surrogate
		{`"\ud83d\u0041"`, "\uFFFDA"},        // a high surrogate, then not its pair
		{"\"\xff\xfeok\"", "\uFFFD\uFFFDok"}, // invalid UTF-8, byte by byte
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var s jsonScanner
			s.reset([]byte(tt.in))
			got, ok := s.str(&s.valBuf)
			require.True(t, ok)
			require.Equal(t, tt.want, string(got))
			require.Equal(t, len(tt.in), s.i, "consumed the whole string")
		})
	}
	for _, bad := range []string{`"abc`, `"\x"`, `"\u12"`, "\"a\nb\"", `abc`} {
		var s jsonScanner
		s.reset([]byte(bad))
		_, ok := s.str(&s.valBuf)
		require.False(t, ok, "%q", bad)
	}
}

func ExampleRowError() {
	e := &RowError{File: "code.csv", Line: 12, Field: "ContextTokens", Got: `"12a"`, Want: wantCount}
	fmt.Println(e)
	// Output: code.csv:12: ContextTokens: got "12a", want a non-negative integer
}
