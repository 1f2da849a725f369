package anonymize

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/trace"
)

// TestRecordFieldsClassified fails when trace.Record gains a field: decide
// whether the anonymizer keeps, hashes or drops it (Anonymize drops it
// until then), and add it here.
func TestRecordFieldsClassified(t *testing.T) {
	classified := map[string]string{
		"Time": "kept", "Input": "kept", "Output": "kept", "Class": "kept", "Model": "kept", "Deadline": "kept", "Service": "kept",
		"Tenant": "hashed", "User": "hashed", "Session": "hashed", "Blocks": "hashed",
		"Line": "dropped",
	}
	rt := reflect.TypeFor[trace.Record]()
	var fields []string
	for f := range rt.Fields() {
		fields = append(fields, f.Name)
		require.Contains(t, classified, f.Name, "trace.Record.%s is new: classify it in Anonymize", f.Name)
	}
	require.Len(t, fields, len(classified))
}

func newA(t *testing.T, cfg Config) *Anonymizer {
	t.Helper()
	if cfg.Key.Len() == 0 {
		cfg.Key = testKey
	}
	a, err := New(cfg)
	require.NoError(t, err)
	return a
}

func TestAnonymize(t *testing.T) {
	src := trace.Record{
		Time: 1500 * time.Millisecond, Tenant: "acme", User: "alice", Session: "conv-1",
		Class: "gold", Model: "llama-70b", Input: 812, Output: 95,
		Blocks: []uint64{1, 2, 3}, Deadline: 2 * time.Second, Service: 1234 * time.Millisecond, Line: 17,
	}
	a := newA(t, Config{})
	p := newP(t, testKey, DefaultIDHexChars)
	var got trace.Record
	a.Anonymize(&got, &src)
	require.Equal(t, trace.Record{
		Time: 1500 * time.Millisecond, Tenant: p.ID(Tenant, "acme"), User: p.ID(User, "alice"), Session: p.ID(Session, "conv-1"),
		Class: "gold", Model: "llama-70b", Input: 812, Output: 95,
		Blocks: []uint64{p.Block(1), p.Block(2), p.Block(3)}, Deadline: 2 * time.Second, Service: 1234 * time.Millisecond,
	}, got)
	require.Equal(t, []uint64{1, 2, 3}, src.Blocks, "src is not touched")

	t.Run("in place", func(t *testing.T) {
		r := src
		r.Blocks = []uint64{1, 2, 3}
		a.Anonymize(&r, &r)
		require.Equal(t, got, r)
	})
	t.Run("drop blocks", func(t *testing.T) {
		var r trace.Record
		newA(t, Config{DropBlocks: true}).Anonymize(&r, &src)
		require.Empty(t, r.Blocks)
	})
}

func TestTimeAndTokens(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		in, want   time.Duration
		tok, wantN int
	}{
		{"as is", Config{}, 1234567 * time.Microsecond, 1234567 * time.Microsecond, 812, 812},
		{"shift", Config{Shift: time.Second}, 1500 * time.Millisecond, 500 * time.Millisecond, 0, 0},
		{"floor to 1s", Config{Resolution: time.Second}, 2999 * time.Millisecond, 2 * time.Second, 1, 1},
		{"floor exact", Config{Resolution: time.Second}, 3 * time.Second, 3 * time.Second, 1, 1},
		{"floor below zero", Config{Resolution: time.Second, Shift: 2 * time.Second}, 1500 * time.Millisecond, -time.Second, 1, 1},
		{"shift then floor", Config{Shift: 250 * time.Millisecond, Resolution: 100 * time.Millisecond}, 1 * time.Second, 700 * time.Millisecond, 1, 1},
		{"bucket up", Config{BucketTokens: 64}, 0, 0, 65, 128},
		{"bucket exact", Config{BucketTokens: 64}, 0, 0, 128, 128},
		{"bucket zero", Config{BucketTokens: 64}, 0, 0, 0, 0},
		{"bucket one", Config{BucketTokens: 1}, 0, 0, 7, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got trace.Record
			newA(t, tt.cfg).Anonymize(&got, &trace.Record{Time: tt.in, Input: tt.tok, Output: tt.tok})
			require.Equal(t, tt.want, got.Time, "time")
			require.Equal(t, tt.wantN, got.Input, "input")
			require.Equal(t, tt.wantN, got.Output, "output")
		})
	}
	_, err := New(Config{Key: testKey, Resolution: -time.Second})
	require.Error(t, err)
	_, err = New(Config{Key: testKey, BucketTokens: -1})
	require.Error(t, err)
}

// TestRebaseAndResolution runs whole jobs: wall-clock times are always
// rebased to the earliest request (not the first row); relative ones only
// with --rebase; --resolution floors after the shift; the output is sorted.
func TestRebaseAndResolution(t *testing.T) {
	const log = "timestamp,prompt_tokens,completion_tokens\n" +
		"2024-05-01T12:00:05.700Z,10,1\n" +
		"2024-05-01T12:00:03.200Z,10,1\n" + // earlier than the first row
		"2024-05-01T12:00:09.999Z,10,1\n"
	times := func(r result) []string {
		t.Helper()
		require.NoError(t, r.err)
		var ts []string
		for _, l := range strings.Split(strings.TrimSpace(string(r.out)), "\n") {
			ts = append(ts, strings.TrimPrefix(strings.SplitN(l, ",", 2)[0], `{"t":`))
		}
		return ts
	}

	t.Run("wall clock: earliest at 0, sorted", func(t *testing.T) {
		r := runBytes(t, log, runOpts{maxDisorder: time.Minute})
		require.Equal(t, []string{"0", "2.5", "6.799"}, times(r))
		require.True(t, r.rep.Time.Rebased)
	})
	t.Run("and 1s", func(t *testing.T) {
		r := runBytes(t, log, runOpts{maxDisorder: time.Minute, cfg: Config{Resolution: time.Second}})
		require.Equal(t, []string{"0", "2", "6"}, times(r))
		require.Contains(t, string(r.text), "rebased: the first request at 0; floored to 1s")
		require.Contains(t, string(r.json), `"resolution_s": 1`)
	})
	t.Run("out of order beyond max disorder", func(t *testing.T) {
		r := runBytes(t, log, runOpts{})
		require.EqualError(t, r.err, "line 3: column timestamp: arrives more than --max-disorder (0s) before a later row")
		r = runBytes(t, log, runOpts{skipBad: true})
		require.Equal(t, []string{"2.5", "6.799"}, times(r))
		require.Equal(t, 1, r.rep.Rows.Skipped)
		require.Equal(t, 3, r.rep.Rows.Read)
		require.Contains(t, string(r.log), "skipped line 3: column timestamp: arrives more than --max-disorder")
	})
	t.Run("relative times are kept unless rebased", func(t *testing.T) {
		const rel = "timestamp,prompt_tokens,completion_tokens\n7.5,1,1\n9,1,1\n"
		m := DefaultMapping()
		m.TimeFormat = Seconds
		require.Equal(t, []string{"7.5", "9"}, times(runBytes(t, rel, runOpts{mapping: m})))
		require.Equal(t, []string{"0", "1.5"}, times(runBytes(t, rel, runOpts{mapping: m, rebase: true})))
		require.Equal(t, []string{"0", "1"}, times(runBytes(t, rel, runOpts{mapping: m, rebase: true, cfg: Config{Resolution: time.Second}})))
	})
	t.Run("ties keep file order", func(t *testing.T) {
		const ties = "timestamp,prompt_tokens,completion_tokens,model\n5,1,1,a\n4,1,1,b\n5,1,1,c\n4,1,1,d\n"
		m := DefaultMapping()
		m.TimeFormat = Seconds
		r := runBytes(t, ties, runOpts{mapping: m, maxDisorder: time.Hour})
		require.NoError(t, r.err)
		require.Equal(t, `{"t":4,"model":"b","input":1,"output":1}
{"t":4,"model":"d","input":1,"output":1}
{"t":5,"model":"a","input":1,"output":1}
{"t":5,"model":"c","input":1,"output":1}
`, string(r.out))
	})
}
