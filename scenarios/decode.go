package scenarios

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/internal/suggest"
)

// The strict decoder walks the yaml.Node tree and the Go schema together by
// reflection, instead of calling yaml.Node.Decode with KnownFields(true),
// because it must (1) report every unknown key and type error with its field
// path, not only a line, (2) keep going after the first error, and (3) be
// stricter than yaml.v3 about scalars: v3 silently truncates 1.5 into an int
// field and reads "yes" as true; a scenario that says replicas: 1.5 is a
// mistake we want to hear about.

// maxNodes bounds the nodes one document may expand to through aliases, so a
// "billion laughs" document fails fast instead of eating memory. The largest
// realistic scenario is a few thousand nodes.
const maxNodes = 1 << 20

// index records where each field path was written: its line, and the --set
// override that supplied it, if any.
type index struct {
	lines map[string]int
	sets  map[string]string // canonical path → the override text
}

// locate returns the line of path, or of its nearest recorded ancestor when
// the field itself is absent (a missing required field is reported at the
// mapping that should hold it), and the --set override that covers it.
func (ix *index) locate(path string) (line int, set string) {
	for p := path; ; {
		if s, ok := ix.sets[p]; ok {
			return 0, s
		}
		if l, ok := ix.lines[p]; ok && line == 0 {
			line = l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return line, ""
}

type decoder struct {
	file     string
	ix       *index
	problems []Problem
	bad      map[string]bool // paths whose value could not be decoded
	nodes    int
}

func (d *decoder) problem(path string, n *yaml.Node, value, msg string) {
	line, set := d.ix.locate(path)
	if n != nil && n.Line > 0 && set == "" {
		line = n.Line
	}
	d.problems = append(d.problems, Problem{File: d.file, Line: line, Path: path, Value: value, Msg: msg, Set: set})
	d.bad[path] = true
}

var (
	durationType = reflect.TypeFor[Duration]()
	periodType   = reflect.TypeFor[Period]()
)

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decode fills v from n, recording lines and problems under path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.nodes++
	if d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.problem(path, n, "", fmt.Sprintf("the document expands to more than %d nodes through aliases; write it out or share less", maxNodes))
		}
		return
	}
	if _, ok := d.ix.lines[path]; !ok {
		d.ix.lines[path] = n.Line
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // an empty value is the zero value, as in yaml.v3
	}
	t := v.Type()
	if t == durationType {
		d.duration(n, v, path)
		return
	}
	if t == periodType {
		d.period(n, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		if !d.want(n, yaml.MappingNode, path, "a mapping of "+structKeysHint(t)) {
			return
		}
		fields := fieldsOf(t)
		for _, kv := range d.pairs(n, path) {
			key := kv.key.Value
			i, ok := fields.index[key]
			if !ok {
				d.problem(join(path, key), kv.key, "", unknownKeyMsg(key, fields.keys))
				continue
			}
			d.ix.lines[join(path, key)] = kv.key.Line
			d.decode(kv.val, v.Field(i), join(path, key))
		}
	case reflect.Slice:
		if !d.want(n, yaml.SequenceNode, path, "a list") {
			return
		}
		if len(n.Content) == 0 {
			return // an empty list is no list: keeps print-then-reparse exact
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if !d.want(n, yaml.MappingNode, path, "a mapping") {
			return
		}
		kvs := d.pairs(n, path)
		if len(kvs) == 0 {
			return
		}
		m := reflect.MakeMapWithSize(t, len(kvs))
		for _, kv := range kvs {
			p := join(path, kv.key.Value)
			d.ix.lines[p] = kv.key.Line
			e := reflect.New(t.Elem()).Elem()
			d.decode(kv.val, e, p)
			m.SetMapIndex(reflect.ValueOf(kv.key.Value).Convert(t.Key()), e)
		}
		v.Set(m)
	default:
		d.scalar(n, v, path)
	}
}

// want checks the node kind, reporting "got a list, want a mapping".
func (d *decoder) want(n *yaml.Node, k yaml.Kind, path, what string) bool {
	if n.Kind == k {
		return true
	}
	d.problem(path, n, describe(n), "want "+what)
	return false
}

// describe renders a node for the "got" part of a problem.
func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return "a " + kindName(n.Kind)
	}
	v := n.Value
	if len(v) > 60 {
		v = v[:57] + "..."
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(v)
	}
	return v
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) {
	const want = "want a duration with a unit, such as 2s, 150ms or 1h30m"
	if !d.want(n, yaml.ScalarNode, path, "a duration") {
		return
	}
	x, err := time.ParseDuration(n.Value)
	if err != nil {
		d.problem(path, n, describe(n), want)
		return
	}
	v.SetInt(int64(x))
}

func (d *decoder) period(n *yaml.Node, v reflect.Value, path string) {
	if !d.want(n, yaml.ScalarNode, path, "a period") {
		return
	}
	x, err := ParsePeriod(n.Value)
	if err != nil {
		d.problem(path, n, describe(n), "want days, weeks or years, such as 90d, 8w or 1y (or a duration such as 36h)")
		return
	}
	v.SetInt(int64(x))
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, path string) {
	var what string
	switch v.Kind() {
	case reflect.String:
		what = "text"
	case reflect.Bool:
		what = "true or false"
	case reflect.Int, reflect.Int64:
		what = "an integer"
	case reflect.Uint64:
		what = "an integer from 0 to 18446744073709551615"
	case reflect.Float64:
		what = "a number"
	default:
		// Only reachable if schema.go gains a field of a new kind.
		panic(fmt.Sprintf("scenarios: no decoder for %s at %s", v.Type(), path))
	}
	if !d.want(n, yaml.ScalarNode, path, what) {
		return
	}
	tag := n.ShortTag()
	ok := false
	switch v.Kind() {
	case reflect.String:
		// Any scalar is text: cuda: 12.4 and version: 0.10 keep their
		// spelling, which a float would not.
		v.SetString(n.Value)
		ok = true
	case reflect.Bool:
		// YAML 1.2 booleans only: yaml.v3 would read yes/on as true here.
		if tag == "!!bool" {
			var b bool
			ok = n.Decode(&b) == nil
			v.SetBool(b)
		}
	case reflect.Int, reflect.Int64:
		if tag == "!!int" {
			var i int64
			ok = n.Decode(&i) == nil && !v.OverflowInt(i)
			v.SetInt(i)
		}
	case reflect.Uint64:
		if tag == "!!int" {
			var u uint64
			ok = n.Decode(&u) == nil
			v.SetUint(u)
		}
	case reflect.Float64:
		if tag == "!!int" || tag == "!!float" {
			var f float64
			ok = n.Decode(&f) == nil
			v.SetFloat(f)
		}
	}
	if !ok {
		v.SetZero()
		d.problem(path, n, describe(n), "want "+what)
	}
}

type pair struct{ key, val *yaml.Node }

// pairs returns the key/value pairs of a mapping with YAML merge keys (<<)
// expanded, reporting duplicate and non-text keys. Explicit keys win over
// merged ones, as YAML specifies.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	seen := map[string]*yaml.Node{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge") {
			merges = append(merges, val)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.problem(path, k, describe(k), "want a plain key name")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.problem(join(path, k.Value), k, "", fmt.Sprintf("duplicate key; first set at line %d", first.Line))
			continue
		}
		seen[k.Value] = k
		out = append(out, pair{k, val})
	}
	for _, m := range merges {
		for m.Kind == yaml.AliasNode {
			m = m.Alias
		}
		srcs := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			srcs = m.Content
		}
		for _, s := range srcs {
			for s.Kind == yaml.AliasNode {
				s = s.Alias
			}
			d.nodes++
			if d.nodes > maxNodes {
				return out
			}
			if s.Kind != yaml.MappingNode {
				d.problem(join(path, "<<"), s, describe(s), "want a mapping (or list of mappings) to merge")
				continue
			}
			for _, kv := range d.pairs(s, path) {
				if _, dup := seen[kv.key.Value]; !dup {
					seen[kv.key.Value] = kv.key
					out = append(out, kv)
				}
			}
		}
	}
	return out
}

// fields is the YAML view of a struct type: key → field index, and the keys
// in declaration order for suggestions and documentation.
type fields struct {
	index map[string]int
	keys  []string
}

var fieldCache sync.Map // reflect.Type → *fields

func fieldsOf(t reflect.Type) *fields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*fields)
	}
	f := &fields{index: map[string]int{}}
	for i := range t.NumField() {
		key := yamlKey(t.Field(i))
		if key == "" {
			continue
		}
		f.index[key] = i
		f.keys = append(f.keys, key)
	}
	fieldCache.Store(t, f)
	return f
}

// yamlKey is the YAML key of a struct field, or "" when it has none.
func yamlKey(sf reflect.StructField) string {
	if !sf.IsExported() {
		return ""
	}
	key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	if key == "-" {
		return ""
	}
	if key == "" {
		key = strings.ToLower(sf.Name)
	}
	return key
}

func structKeysHint(t reflect.Type) string {
	keys := fieldsOf(t).keys
	if len(keys) > 4 {
		keys = append(keys[:4:4], "...")
	}
	return strings.Join(keys, ", ")
}

// unknownKeyMsg says a key is unknown and names the nearest known keys.
func unknownKeyMsg(key string, known []string) string {
	near := suggest.Nearest(key, known, 3)
	if len(near) == 0 {
		return fmt.Sprintf("unknown key %q; known keys: %s", key, strings.Join(known, ", "))
	}
	return fmt.Sprintf("unknown key %q; did you mean %s?", key, strings.Join(near, " or "))
}

// finite reports whether f is an ordinary number (not NaN or ±Inf).
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
