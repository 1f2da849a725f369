package compare

import (
	"fmt"
	"regexp"
	"strings"
)

// variantName is what a variant may be called: it names a column, a JSON
// key and a sweep point.
var variantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ParseVariant reads NAME=PATH=VALUE[,PATH=VALUE...], or NAME alone for
// the scenario as it is. Overrides are split at commas outside brackets,
// braces and quotes, so that a list or mapping value
// (expect=["a","b"]) stays whole; a value holding a bare comma must be
// quoted. A variant may not set the seed: every variant runs at the same
// seeds, which is what pairs the runs.
func ParseVariant(s string) (Variant, error) {
	name, rest, _ := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !variantName.MatchString(name) {
		return Variant{}, fmt.Errorf("name %q: want letters, digits, '_', '.' or '-', starting with a letter or digit, then =PATH=VALUE,... (e.g. hpa70=pools.web.autoscale.target=0.7)", name)
	}
	v := Variant{Name: name}
	if strings.TrimSpace(rest) == "" {
		return v, nil
	}
	for _, set := range splitSets(rest) {
		set = strings.TrimSpace(set)
		path, _, ok := strings.Cut(set, "=")
		path = strings.TrimSpace(path)
		switch {
		case !ok || path == "" || strings.ContainsAny(path, " \t\"'"):
			return Variant{}, fmt.Errorf("%s: override %q: want PATH=VALUE, e.g. pools.web.autoscale.target=0.7 (quote a value that holds a comma)", name, set)
		case path == "seed":
			return Variant{}, fmt.Errorf("%s: override %q: a variant may not set the seed; every variant runs at the same seeds (--set seed=N moves them all), which pairs the runs", name, set)
		}
		v.Sets = append(v.Sets, set)
	}
	return v, nil
}

// splitSets splits at commas outside [], {} and quotes.
func splitSets(s string) []string {
	var out []string
	depth, quote, start := 0, rune(0), 0
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '[' || r == '{':
			depth++
		case r == ']' || r == '}':
			depth--
		case r == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
