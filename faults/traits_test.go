package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTraitsComplete holds every kind of the catalogue to a full set of
// traits, so that no backend has to switch on a kind: a live emulation or
// the reason it has none, and a console spec that validates on a full
// selection.
func TestTraitsComplete(t *testing.T) {
	sel := Target{Region: "r", Pool: "p", Provider: "v", Model: "m"}
	for _, e := range catalogue {
		t.Run(string(e.kind), func(t *testing.T) {
			tr := e.kind.Traits()
			if tr.Live == 0 {
				require.NotEmpty(t, tr.NotLive, "no live emulation and no reason why")
				require.Nil(t, tr.liveLimit, "limits of a live emulation there is not")
			} else {
				require.Empty(t, tr.NotLive, "live, and a reason it is not")
			}
			require.Contains(t, e.target, tr.ConsoleOn, "the console's target key")
			require.Zero(t, tr.Console.Kind, "Console holds values only")
			require.Zero(t, tr.Console.Target, "Console holds values only")
			sp := ConsoleSpec(e.kind, sel)
			require.NoError(t, sp.Validate(), "ConsoleSpec(%s) = %s", e.kind, sp)
			require.Zero(t, ConsoleSpec(e.kind, Target{}).Target, "ConsoleSpec on no selection")
			if tr.FromNotice {
				require.Contains(t, e.takes, "notice")
			}
			require.NotEmpty(t, tr.Words, "no words for a Gherkin step to name it by")
			if k := tr.ConsoleKey; k != (ConsoleKey{}) {
				require.Len(t, []rune(k.Key), 1, "the console key is one key")
				require.NotEmpty(t, k.Label, "the console key's word on the help bar")
				require.NotEmpty(t, k.Help, "the console key's line in the help overlay")
				require.Positive(t, k.Rank, "the console key's place on the help bar")
			}
			require.Equal(t, tr.Live&LiveAcquisition != 0, tr.OnAcquisition())
			if tr.OnAcquisition() {
				require.Equal(t, LiveAcquisition, tr.Live, "an acquisition fault has no part on replicas")
			}
		})
	}
	require.Zero(t, Kind("no-such-kind").Traits())
}

// TestWordsAndKeysUnique: a Gherkin word names one kind, a console key,
// its label and its rank belong to one kind, and the ranks run from 1
// with no gap.
func TestWordsAndKeysUnique(t *testing.T) {
	words := map[string]Kind{}
	keys := map[string]Kind{}
	labels := map[string]Kind{}
	ranks := map[int]Kind{}
	for _, e := range catalogue {
		for _, w := range e.traits.Words {
			require.Equal(t, strings.ToLower(strings.TrimSpace(w)), w, "%s: word %q", e.kind, w)
			require.False(t, strings.HasPrefix(w, "the "), "%s: word %q: steps add the", e.kind, w)
			if k, dup := words[w]; dup {
				t.Errorf("word %q names %s and %s", w, k, e.kind)
			}
			words[w] = e.kind
		}
		ck := e.traits.ConsoleKey
		if ck == (ConsoleKey{}) {
			continue
		}
		for m, v := range map[*map[string]Kind]string{&keys: ck.Key, &labels: ck.Label} {
			if k, dup := (*m)[v]; dup {
				t.Errorf("console %q is %s's and %s's", v, k, e.kind)
			}
			(*m)[v] = e.kind
		}
		if k, dup := ranks[ck.Rank]; dup {
			t.Errorf("console rank %d is %s's and %s's", ck.Rank, k, e.kind)
		}
		ranks[ck.Rank] = e.kind
	}
	for r := 1; r <= len(ranks); r++ {
		require.Contains(t, ranks, r, "console ranks %v have a gap", ranks)
	}
}

func TestConsoleSpec(t *testing.T) {
	sel := Target{Region: "us-east", Pool: "use-h100", Provider: "cloud-a", Model: "llama"}
	for _, c := range []struct {
		k    Kind
		want string
	}{
		{RegionalOutage, "regional-outage region=us-east at=0s"},
		{Brownout, "brownout region=us-east at=0s fail=0.2 latency=200ms"},
		{QuotaExhaustion, "quota-exhaustion provider=cloud-a at=0s"},
		{ModelRetirement, "model-retirement model=llama at=0s"},
		{DriverUpgrade, "driver-upgrade pool=use-h100 at=0s driver=535.104"},
		{NodeLoss, "node-loss pool=use-h100 at=0s count=1"},
		{Latency, "latency pool=use-h100 at=0s latency=2s"},
		{ErrorBurst, "error-burst pool=use-h100 at=0s fail=0.5"},
		{ColdStartStorm, "cold-start-storm pool=use-h100 at=0s"},
	} {
		if got := ConsoleSpec(c.k, sel).String(); got != c.want {
			t.Errorf("ConsoleSpec(%s) = %q, want %q", c.k, got, c.want)
		}
	}
}

func TestLiveGap(t *testing.T) {
	for _, c := range []struct {
		line, want string
	}{
		{"regional-outage region=r at=1m", ""},
		{"brownout pool=p at=1m fail=0.1 latency=1s", ""},
		{"quota-exhaustion pool=p at=1m", ""},
		{"quota-exhaustion pool=p at=1m rpm=60 tpm=9000", "the live gateway emulates a quota of zero only"},
		{"model-retirement model=m at=1m notice=30s", ""},
		{"driver-upgrade pool=p at=1m driver=535.104", ""},
		{"node-loss pool=p at=1m", ""},
		{"cold-start-storm pool=p at=1m", "cold-start storms have no live emulation (nodes cannot reload a model)"},
	} {
		sp, err := Parse(c.line)
		require.NoError(t, err)
		if got := sp.LiveGap(); got != c.want {
			t.Errorf("Parse(%q).LiveGap() = %q, want %q", c.line, got, c.want)
		}
	}
	// Not reachable through Parse: what the backends still refuse.
	require.Equal(t, "tenant targets have no live emulation", Spec{Kind: Latency, Target: Target{Tenant: "t"}}.LiveGap())
	require.Equal(t, "a runtime-only upgrade has no live emulation", Spec{Kind: DriverUpgrade, Runtime: "vllm"}.LiveGap())
	require.Equal(t, "x has no live emulation", Spec{Kind: "x"}.LiveGap())
}

func TestStart(t *testing.T) {
	for _, c := range []struct {
		line        string
		start, back time.Duration // Start, and At after StartingAt(10m)
	}{
		{"node-loss pool=p at=5m", 5 * time.Minute, 10 * time.Minute},
		{"model-retirement model=m at=5m notice=2m", 3 * time.Minute, 12 * time.Minute},
		{"model-retirement model=m at=1m notice=2m", 0, 12 * time.Minute},
		{"model-retirement model=m at=1m", time.Minute, 10 * time.Minute},
	} {
		sp, err := Parse(c.line)
		require.NoError(t, err)
		if got := sp.Start(); got != c.start {
			t.Errorf("Parse(%q).Start() = %v, want %v", c.line, got, c.start)
		}
		moved := sp.StartingAt(10 * time.Minute)
		if moved.At != c.back || moved.Start() != 10*time.Minute {
			t.Errorf("Parse(%q).StartingAt(10m) = %s, want at=%v, starting at 10m", c.line, moved, c.back)
		}
	}
}

func TestDetectedByStatus(t *testing.T) {
	for status, want := range map[int]bool{429: true, 404: true, 0: false, 200: false, 500: false, 503: false} {
		if got := DetectedByStatus(status); got != want {
			t.Errorf("DetectedByStatus(%d) = %v, want %v", status, got, want)
		}
	}
	require.Equal(t, 429, QuotaExhaustion.Traits().DetectStatus)
	require.Equal(t, 404, ModelRetirement.Traits().DetectStatus)
}

func TestLiveString(t *testing.T) {
	require.Equal(t, "none", Live(0).String())
	require.Equal(t, "proxy+gateway", Brownout.Traits().Live.String())
	require.Equal(t, "container", NodeLoss.Traits().Live.String())
	require.Equal(t, "gateway", QuotaExhaustion.Traits().Live.String())
	for k, want := range map[Kind]bool{Brownout: true, NodeLoss: true, RegionalOutage: true, Latency: true,
		QuotaExhaustion: false, ModelRetirement: false, DriverUpgrade: false, ErrorBurst: false, ColdStartStorm: false} {
		if got := k.Traits().Live.OnFleet(); got != want {
			t.Errorf("%s: Live.OnFleet() = %v, want %v", k, got, want)
		}
	}
}
