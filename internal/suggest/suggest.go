// Package suggest finds the names closest to a mistyped one, for error
// messages that say "did you mean …?". It is used by the scenario loader
// (unknown keys, names, profile refs) and by report expectations.
package suggest

import (
	"slices"
	"strings"
)

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

type scored struct {
	c string
	d int
}

// rank sorts candidates by distance to s, then by name, keeping those keep
// accepts.
func rank(s string, candidates []string, keep func(c string, d int) bool) []scored {
	var all []scored
	for _, c := range candidates {
		if d := Distance(s, c); keep(c, d) {
			all = append(all, scored{c, d})
		}
	}
	slices.SortStableFunc(all, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.c, b.c)
	})
	return all
}

func first(all []scored, n int) []string {
	out := make([]string, 0, n)
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, all[i].c)
	}
	return out
}

// Nearest returns up to n plausible corrections of s, closest first: those
// within about a third of the word, or containing it or contained in it
// (gpus → gpus_per_replica). It may return none.
func Nearest(s string, candidates []string, n int) []string {
	return first(rank(s, candidates, func(c string, d int) bool {
		return d <= max(2, len(s)/3) || (len(s) >= 3 && (strings.Contains(c, s) || strings.Contains(s, c)))
	}), n)
}

// Closest returns the n candidates closest to s, however far.
func Closest(s string, candidates []string, n int) []string {
	return first(rank(s, candidates, func(string, int) bool { return true }), n)
}
