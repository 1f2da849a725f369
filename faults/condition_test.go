package faults

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A stack of faults on one replica combines the same whatever its order.
func TestConditionStacks(t *testing.T) {
	outage := Condition{Down: true}
	loss := Condition{Down: true, Refuse: true}
	brown := Condition{FailRate: 0.2, Latency: 300 * time.Millisecond}
	burst := Condition{FailRate: 0.5}
	slow := Condition{Latency: 100 * time.Millisecond}
	for _, tc := range []struct {
		name string
		fs   []Condition
		want Condition
	}{
		{"none", nil, Condition{}},
		{"latencies add, the higher rate counts", []Condition{brown, burst, slow}, Condition{FailRate: 0.5, Latency: 400 * time.Millisecond}},
		{"down hangs", []Condition{slow, outage}, Condition{Down: true, Latency: 100 * time.Millisecond}},
		{"a refusal wins over a hang", []Condition{outage, loss}, Condition{Down: true, Refuse: true}},
	} {
		for _, order := range [][]Condition{tc.fs, reversed(tc.fs)} {
			var c Condition
			for _, f := range order {
				c = c.With(f)
			}
			require.Equal(t, tc.want, c, tc.name)
		}
	}
}

func reversed(cs []Condition) []Condition {
	out := make([]Condition, len(cs))
	for i, c := range cs {
		out[len(cs)-1-i] = c
	}
	return out
}

// Fails draws only where the fail rate decides.
func TestConditionFailsDrawsOnlyWhenItDecides(t *testing.T) {
	draws := 0
	draw := func(v float64) func() float64 { return func() float64 { draws++; return v } }
	require.True(t, Condition{Down: true, FailRate: 0.5}.Fails(draw(0.9)))
	require.False(t, Condition{}.Fails(draw(0)))
	require.Zero(t, draws, "down, or no fail rate: no draw")
	require.True(t, Condition{FailRate: 0.5}.Fails(draw(0.49)))
	require.False(t, Condition{FailRate: 0.5}.Fails(draw(0.5)))
	require.Equal(t, 2, draws)
}

// TestAnswerDelay: a fault's answer takes a round trip of AnswerRTT give
// or take half of it, spread over the draw, so that attempts taken at one
// instant are answered at distinct ones.
func TestAnswerDelay(t *testing.T) {
	require.Equal(t, AnswerRTT/2, AnswerDelay(0))
	require.Equal(t, AnswerRTT, AnswerDelay(0.5))
	require.Less(t, AnswerDelay(0.999999), 3*AnswerRTT/2)
	require.Less(t, AnswerDelay(0.25), AnswerDelay(0.26), "a different draw, a different instant")
}
