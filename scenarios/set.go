package scenarios

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
)

// SetError is a --set override that names no field of the schema, or whose
// path does not fit the document (an index past the end, a name no entry
// has). Overrides that name a field but give it a bad value are not
// SetErrors: they are validated with the rest of the scenario.
type SetError struct {
	Set  string // the override as given, e.g. pools[0].replica=8
	Path string // the path as far as it was understood, canonical (indices, not names)
	Msg  string
}

func (e *SetError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("--set %s: %s", e.Set, e.Msg)
	}
	return fmt.Sprintf("--set %s: %s: %s", e.Set, e.Path, e.Msg)
}

// ApplySet applies one override, "path=value", to a scenario document as
// parsed into a yaml.Node (the document node or its root mapping), before
// it is decoded. The path addresses fields by their YAML keys, list entries
// by index or by name, and map entries by key:
//
//	seed=7
//	policy.scheduler=wfq
//	pools[0].replicas=8
//	pools.use-h100.replicas=8          (the entry whose name is use-h100)
//	pools[use-h100].quota.tokens_per_minute=2e6
//	pools[0].profiles[llama-3.1-8b].ref=h100-sxm/llama-3.1-8b/tp1
//
// The value is YAML: 8, wfq, 30s, [a, b] and {dist: constant, mean: 100} all
// work; an empty value sets the field to its zero value (its default).
// Missing mappings on the way are created; list entries are not. A name
// containing dots (llama-3.1-8b) is matched whole against existing entries;
// to add a new map key that contains dots, use brackets.
func ApplySet(doc *yaml.Node, set string) error {
	_, err := applySet(doc, set)
	return err
}

// applySet is ApplySet that also returns the canonical path it set, such as
// pools[0].replicas for pools.use-h100.replicas, so that problems found later
// at that path are blamed on the override and not on a line of the file.
func applySet(doc *yaml.Node, set string) (string, error) {
	path, text, ok := strings.Cut(set, "=")
	path = strings.TrimSpace(path)
	fail := func(canon, format string, args ...any) (string, error) {
		return canon, &SetError{Set: set, Path: canon, Msg: fmt.Sprintf(format, args...)}
	}
	if !ok || path == "" {
		return fail("", "want path=value, e.g. pools[0].replicas=8 or policy.scheduler=wfq")
	}
	var val yaml.Node
	if err := yaml.Unmarshal([]byte(text), &val); err != nil {
		return fail("", "the value %q is not YAML: %v", text, err)
	}
	newVal := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	if val.Kind == yaml.DocumentNode && len(val.Content) > 0 {
		newVal = val.Content[0]
	}
	forgetLines(newVal)

	cur := doc
	if cur.Kind == 0 { // a zero Node: what yaml.Unmarshal leaves for empty input
		*cur = yaml.Node{Kind: yaml.DocumentNode}
	}
	if cur.Kind == yaml.DocumentNode {
		if len(cur.Content) == 0 {
			cur.Content = []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}
		}
		cur = cur.Content[0]
	}
	t := reflect.TypeFor[Scenario]()
	canon, rest := "", path
	for rest != "" {
		unalias(cur)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		here := canon
		if here == "" {
			here = "the scenario"
		}
		var seg string
		var bracket bool
		switch {
		case strings.HasPrefix(rest, "["):
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return fail(canon, "unclosed [ in the path")
			}
			seg, rest, bracket = rest[1:end], rest[end+1:], true
		case canon == "" || strings.HasPrefix(rest, "."):
			if canon != "" {
				rest = rest[1:]
			}
			// The segment is matched against names later (which may hold
			// dots); here, take it up to the next separator.
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			seg = rest[:end]
		default:
			return fail(canon, "want . or [ after %s, got %q", here, rest)
		}
		if seg == "" {
			return fail(canon, "empty name in the path; want e.g. pools[0].replicas")
		}

		switch t.Kind() {
		case reflect.Struct:
			if bracket {
				return fail(canon, "%s is a mapping; want .%s, not [%s]", here, seg, seg)
			}
			rest = rest[len(seg):]
			f := fieldsOf(t)
			i, ok := f.index[seg]
			if !ok {
				return fail(join(canon, seg), "%s", unknownKeyMsg(seg, f.keys))
			}
			if !toMapping(cur) {
				return fail(canon, "%s is a %s in the document; want a mapping to set %s in", here, kindName(cur.Kind), seg)
			}
			cur = entry(cur, seg)
			t = t.Field(i).Type
			canon = join(canon, seg)

		case reflect.Slice:
			if cur.Kind == yaml.ScalarNode && cur.ShortTag() == "!!null" {
				return fail(canon, "%s is empty; set the whole list, e.g. %s=[...]", here, canon)
			}
			if cur.Kind != yaml.SequenceNode {
				return fail(canon, "%s is a %s in the document; want a list", here, kindName(cur.Kind))
			}
			i := -1
			if n, err := strconv.Atoi(seg); err == nil && seg == strconv.Itoa(n) {
				if n < 0 || n >= len(cur.Content) {
					return fail(canon, "index %d is out of range; want 0 to %d", n, len(cur.Content)-1)
				}
				i = n
				if !bracket {
					rest = rest[len(seg):]
				}
			} else {
				var names []string
				best := ""
				target := seg
				if !bracket {
					target = rest // a name may run across dots
				}
				for j, e := range cur.Content {
					nm := entryName(e)
					if nm == "" {
						continue
					}
					names = append(names, nm)
					if matchesName(target, nm, bracket) && len(nm) > len(best) {
						i, best = j, nm
					}
				}
				if i < 0 {
					msg := fmt.Sprintf("no entry named %q; want an index or one of %s", seg, oneOf(names))
					if near := suggest.Nearest(seg, names, 1); len(near) > 0 {
						msg = fmt.Sprintf("no entry named %q; did you mean %q? (names: %s)", seg, near[0], oneOf(names))
					}
					return fail(canon, "%s", msg)
				}
				if !bracket {
					rest = rest[len(best):]
				}
			}
			cur = cur.Content[i]
			t = t.Elem()
			canon = at(canon, i)

		case reflect.Map:
			if !toMapping(cur) {
				return fail(canon, "%s is a %s in the document; want a mapping", here, kindName(cur.Kind))
			}
			key := seg
			if !bracket {
				// Prefer an existing key that matches more of the path.
				for i := 0; i+1 < len(cur.Content); i += 2 {
					k := cur.Content[i].Value
					if matchesName(rest, k, false) && len(k) > len(key) {
						key = k
					}
				}
				rest = rest[len(key):]
			}
			cur = entry(cur, key)
			t = t.Elem()
			canon = join(canon, key)

		default:
			return fail(canon, "%s is a single value; it has no field %q", here, seg)
		}
	}
	*cur = *newVal
	return canon, nil
}

// matchesName reports whether path starts with the name nm followed by the
// end or a separator; with exact, the whole of path must be nm.
func matchesName(path, nm string, exact bool) bool {
	if exact {
		return path == nm
	}
	return strings.HasPrefix(path, nm) && (len(path) == len(nm) || strings.ContainsRune(".[", rune(path[len(nm)])))
}

// entryName is the value of a list entry's name key, if it has one.
func entryName(n *yaml.Node) string {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
			return n.Content[i+1].Value
		}
	}
	return ""
}

// toMapping makes an empty (null) node a mapping and reports whether n is
// one.
func toMapping(n *yaml.Node) bool {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		*n = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	}
	return n.Kind == yaml.MappingNode
}

// entry returns the value node of key in mapping m, adding an empty one if
// the key is absent. The last occurrence wins, as it would in yaml.v3; the
// decoder reports the duplicate anyway.
func entry(m *yaml.Node, key string) *yaml.Node {
	for i := len(m.Content) - 2; i >= 0; i -= 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	m.Content = append(m.Content, k, v)
	return v
}

// unalias replaces an alias node in place with a copy of what it points to,
// so that an override through it changes this place only, not every place
// that shares the anchor.
func unalias(n *yaml.Node) {
	if n.Kind != yaml.AliasNode {
		return
	}
	target := n.Alias
	for target.Kind == yaml.AliasNode {
		target = target.Alias
	}
	c := deepCopy(target, 0)
	c.Anchor = ""
	*n = *c
}

func deepCopy(n *yaml.Node, depth int) *yaml.Node {
	c := *n
	if depth > 64 {
		return &c // deeper than any schema path; shared below is harmless
	}
	c.Content = slices.Clone(n.Content)
	for i, k := range c.Content {
		if k.Kind != yaml.AliasNode {
			c.Content[i] = deepCopy(k, depth+1)
		}
	}
	return &c
}

// forgetLines zeroes the positions of a value parsed from --set text: its
// line 1 is not line 1 of the scenario file.
func forgetLines(n *yaml.Node) {
	n.Line, n.Column = 0, 0
	for _, c := range n.Content {
		forgetLines(c)
	}
}

// ScaleWorkloadSets returns the --set overrides that multiply every
// workload stream's rate by k: a synthetic stream's arrivals.rate, a trace
// stream's rate_scale. Specs ("the workload is scaled by") and the planner
// (demand levels) scale demand this one way.
func ScaleWorkloadSets(sc *Scenario, k float64) []string {
	var sets []string
	for _, s := range sc.Workload {
		if s.Trace != nil {
			rs := s.Trace.RateScale
			if rs == 0 {
				rs = 1
			}
			sets = append(sets, fmt.Sprintf("workload.%s.trace.rate_scale=%s", s.Name, rateText(rs*k)))
			continue
		}
		sets = append(sets, fmt.Sprintf("workload.%s.arrivals.rate=%s", s.Name, rateText(s.Arrivals.Rate*k)))
	}
	return sets
}

// rateText prints a scaled rate to 12 significant digits, so that 0.4 × 3
// reads 1.2 rather than 1.2000000000000002 in the command lines that carry
// it; the difference is far below any rate's meaning.
func rateText(v float64) string { return strconv.FormatFloat(v, 'g', 12, 64) }
