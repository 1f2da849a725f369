package stats

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCounter(t *testing.T) {
	var c Counter
	require.Zero(t, c.Value())
	c.Inc()
	c.Inc()
	c.Add(40)
	c.Add(0)
	require.Equal(t, uint64(42), c.Value())
}

func TestCountersSortedAndDeterministic(t *testing.T) {
	// Two insertion orders must give the same names in the same (sorted) order.
	orders := [][]string{
		{"rejected: quota", "admitted", "rejected: kv-full", "rejected: quota"},
		{"rejected: quota", "rejected: kv-full", "rejected: quota", "admitted"},
	}
	for _, order := range orders {
		var c Counters
		for _, name := range order {
			c.Inc(name)
		}
		require.Equal(t, []string{"admitted", "rejected: kv-full", "rejected: quota"}, c.Names())
		require.Equal(t, uint64(2), c.Value("rejected: quota"))
		require.Equal(t, uint64(1), c.Value("admitted"))
		require.Equal(t, 3, c.Len())
		require.Equal(t, uint64(4), c.Total())
	}
}

func TestCountersAddAndMissing(t *testing.T) {
	var c Counters
	require.Zero(t, c.Value("never"), "reading a zero Counters must not panic")
	require.Empty(t, c.Names())
	require.Zero(t, c.Total())

	c.Add("b", 5)
	c.Add("a", 0) // registers the name with a zero count
	c.Add("b", 2)
	require.Equal(t, []string{"a", "b"}, c.Names())
	require.Equal(t, uint64(7), c.Value("b"))
	require.Zero(t, c.Value("a"))
	require.Zero(t, c.Value("never"))
	require.Equal(t, 2, c.Len())

	// Names returns a fresh slice: changing it does not affect the counters.
	names := c.Names()
	names[0] = "zzz"
	require.Equal(t, []string{"a", "b"}, c.Names())
}
