package latency

import "slices"

// builtin holds the profiles measured from public data; see docs/profiles.md
// for the derivation and builtin_test.go for the test that recomputes them.
var builtin = map[string]Profile{}

// Builtin returns the built-in profile named ref, such as
// "h100-sxm/llama-3.1-8b/tp1".
func Builtin(ref string) (Profile, bool) {
	p, ok := builtin[ref]
	return p, ok
}

// BuiltinRefs returns the names of the built-in profiles, sorted.
func BuiltinRefs() []string {
	refs := make([]string, 0, len(builtin))
	for r := range builtin {
		refs = append(refs, r)
	}
	slices.Sort(refs)
	return refs
}
