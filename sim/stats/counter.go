package stats

import (
	"maps"
	"slices"
)

// Counter counts events. The zero value is 0 and ready to use. It is a plain
// integer, not an atomic: the simulator updates statistics from one goroutine.
type Counter struct {
	n uint64
}

// Add adds n to the count.
func (c *Counter) Add(n uint64) { c.n += n }

// Inc adds 1 to the count.
func (c *Counter) Inc() { c.n++ }

// Value returns the count.
func (c *Counter) Value() uint64 { return c.n }

// Counters counts events by name, e.g. rejections by reason ("rejected:
// quota"). Iteration is by sorted name, never by map order, so anything built
// from it (reports, JSON) is deterministic. The zero value is empty and ready
// to use. Not safe for concurrent use.
type Counters struct {
	m map[string]uint64
}

// Add adds n to the count for name. Adding 0 still registers the name, so a
// reason can be listed with a zero count.
func (c *Counters) Add(name string, n uint64) {
	if c.m == nil {
		c.m = make(map[string]uint64)
	}
	c.m[name] += n
}

// Inc adds 1 to the count for name.
func (c *Counters) Inc(name string) { c.Add(name, 1) }

// Value returns the count for name; 0 for a name never added.
func (c *Counters) Value(name string) uint64 { return c.m[name] }

// Len returns the number of distinct names.
func (c *Counters) Len() int { return len(c.m) }

// Total returns the sum of all counts.
func (c *Counters) Total() uint64 {
	var t uint64
	for _, n := range c.m {
		t += n
	}
	return t
}

// Names returns the names in ascending byte order, as a new slice. It sorts
// the (few) names, not samples.
func (c *Counters) Names() []string {
	return slices.Sorted(maps.Keys(c.m))
}
