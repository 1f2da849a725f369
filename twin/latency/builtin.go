package latency

import "slices"

// builtin holds the profiles derived from public measurements. The table is
// generated (builtin_table.go) by derive.go; see docs/profiles.md for the
// derivation and derive_test.go for the tests that recompute it.
var builtin = builtinTable

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
