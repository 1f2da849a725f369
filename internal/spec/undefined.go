package spec

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
)

// undefined explains a step no definition matches, with the nearest known
// ones. Each is written with the user's own values where the step's words
// line up with its example ("regoin eu-west goes down at 5m" suggests
// "region eu-west goes down at 5m", not the example's us-east at 10m for
// 15m), so that the fix is to copy it back.
func undefined(text string) error {
	type cand struct {
		s     *step
		text  string
		score int
	}
	var cands []cand
	seen := map[string]bool{}
	for _, s := range steps {
		c, penalty := fillIn(text, s)
		if !seen[c] {
			seen[c] = true
			cands = append(cands, cand{s, c, suggest.Distance(text, c) + penalty})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return a.score - b.score })
	var b strings.Builder
	fmt.Fprintf(&b, "undefined step %q; did you mean:", text)
	for i, c := range cands[:min(3, len(cands))] {
		if i > 0 && c.score > 2*cands[0].score+4 {
			break // far worse than the best: noise, not a suggestion
		}
		fmt.Fprintf(&b, "\n    %s %s    (%s)", c.s.keyword, c.text, c.s.pattern)
	}
	b.WriteString("\n  (fleetdrill spec --list prints every step; docs/specs.md has the reference)")
	return &undefinedStepError{b.String()}
}

// undefinedStepError is the catch-all step's error. godog sees a failed
// step (so the run fails, strict or not); the JUnit report tells it apart
// as an <error type="undefined">, a spec to fix rather than a fleet that
// missed its target.
type undefinedStepError struct{ msg string }

func (e *undefinedStepError) Error() string { return e.msg }

// fillIn writes step s with text's values: it aligns text's words with the
// words of s's example (a word of the example that is one of its
// arguments lines up with any word; a literal word with itself or a typo
// of it), then puts text's words in the argument places and keeps the
// example's literal words, so typos are corrected (a word of text's left
// over after an argument's belongs to it). Example words text has no
// counterpart for are left out (an optional part: "for 15m") or, if the
// step then does not match, kept. It returns the example when neither
// matches s.
//
// penalty ranks the suggestion beyond its distance from text: a step whose
// argument swallows words it has no place for ("the report shows (.+)"
// takes anything), or that needs words text does not have, is a worse
// guess than its distance says.
func fillIn(text string, s *step) (filled string, penalty int) {
	ex := exampleText(s)
	u := strings.Fields(text)
	e, isArg := exampleWords(ex, s.re)
	pairs := align(u, e, isArg)
	for _, keepUnpaired := range []bool{false, true} {
		var out []string
		penalty = 0
		inArg := false // the last word was an argument's: a word of text's that follows belongs to it
		for _, p := range pairs {
			switch {
			case p.u >= 0 && p.e >= 0 && isArg[p.e]:
				out = append(out, u[p.u])
				inArg = true
			case p.e >= 0 && (p.u >= 0 || keepUnpaired):
				out = append(out, e[p.e])
				inArg = false
				if p.u < 0 {
					penalty += 3
				}
			case p.e < 0 && inArg:
				out = append(out, u[p.u])
				penalty += 2
			}
		}
		c := strings.Join(out, " ")
		if got, _ := match(c); got == s {
			return c, penalty
		}
	}
	return ex, 0
}

// exampleWords splits an example into words and says which are (part of)
// one of the step's arguments.
func exampleWords(ex string, re *regexp.Regexp) ([]string, []bool) {
	m := re.FindStringSubmatchIndex(ex)
	var words []string
	var isArg []bool
	for i := 0; i < len(ex); {
		if ex[i] == ' ' {
			i++
			continue
		}
		j := strings.IndexByte(ex[i:], ' ')
		if j < 0 {
			j = len(ex)
		} else {
			j += i
		}
		arg := false
		for g := 2; m != nil && g+1 < len(m); g += 2 {
			if m[g] >= 0 && m[g] < j && m[g+1] > i {
				arg = true
			}
		}
		words = append(words, ex[i:j])
		isArg = append(isArg, arg)
		i = j
	}
	return words, isArg
}

// pair is one step of an alignment: a word of the user's text, of the
// example, or both (-1: none).
type pair struct{ u, e int }

// align is the cheapest alignment of u with e (edit distance on words):
// an argument word pairs with any word, a literal with itself or a typo
// of it (within a third of its letters); anything else is a word left
// over on one side.
func align(u, e []string, isArg []bool) []pair {
	const gap = 1.0
	sub := func(i, j int) float64 {
		switch {
		case u[i] == e[j]:
			return 0
		case isArg[j]:
			return 0.5
		case suggest.Distance(strings.ToLower(u[i]), strings.ToLower(e[j])) <= max(1, len(e[j])/3):
			return 1
		}
		return math.Inf(1)
	}
	n, m := len(u), len(e)
	cost := make([][]float64, n+1)
	for i := range cost {
		cost[i] = make([]float64, m+1)
		for j := range cost[i] {
			switch {
			case i == 0:
				cost[i][j] = float64(j) * gap
			case j == 0:
				cost[i][j] = float64(i) * gap
			default:
				cost[i][j] = min(cost[i-1][j-1]+sub(i-1, j-1), cost[i-1][j]+gap, cost[i][j-1]+gap)
			}
		}
	}
	var out []pair
	for i, j := n, m; i > 0 || j > 0; {
		switch {
		case i > 0 && j > 0 && cost[i][j] == cost[i-1][j-1]+sub(i-1, j-1):
			out = append(out, pair{i - 1, j - 1})
			i, j = i-1, j-1
		case i > 0 && cost[i][j] == cost[i-1][j]+gap:
			out = append(out, pair{i - 1, -1})
			i--
		default:
			out = append(out, pair{-1, j - 1})
			j--
		}
	}
	slices.Reverse(out)
	return out
}
