// Package sweep runs a sweep: a scenario evaluated at many points (sets of
// --set overrides) over many seeds, split into shards that can run on
// different machines (a Kubernetes Indexed Job, say) and be merged into the
// report a single local run gives. See docs/sweeps.md.
package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// MaxRuns bounds points × seeds, so that a grid typo fails at once.
const MaxRuns = 1_000_000

// Spec is a validated sweep spec, its scenario read and its grids expanded.
type Spec struct {
	// File is the spec's path, as given; Scenario the scenario's library
	// name or path as written in the spec (a path is relative to the spec).
	File     string
	Scenario string
	// ScenarioFile and ScenarioDir are what scenarios.ParseInDir is given;
	// ScenarioData the scenario's bytes, read once.
	ScenarioFile string
	ScenarioDir  string
	ScenarioData []byte
	// ScenarioName is the scenario's own name: field.
	ScenarioName string
	Sets         []string
	Points       []Point
	Seeds        []uint64
	// Hash identifies the sweep's content: the scenario's bytes, the sets,
	// the points and the seeds (not the file names). Shards of one sweep
	// share it.
	Hash string
	// Source is the spec file's bytes.
	Source []byte
}

// Point is one set of overrides, applied after the spec's base sets.
type Point struct {
	Name string     `json:"name"`
	Sets []string   `json:"sets"`
	node *yaml.Node // where it is written, for messages
	// skipCheck: a grid point with two or more parameters away from their
	// first values, not parsed when the spec loads (see Parse).
	skipCheck bool
}

// Runs is the number of runs: len(Points) × len(Seeds). Run i is point
// i / len(Seeds), seed i % len(Seeds).
func (s *Spec) Runs() int { return len(s.Points) * len(s.Seeds) }

// SpecError lists every problem of a spec, each "file:line: field: message".
type SpecError struct {
	Problems []string
}

func (e *SpecError) Error() string {
	return "invalid sweep spec:\n  " + strings.Join(e.Problems, "\n  ")
}

var yamlLine = regexp.MustCompile(`^yaml: line ([0-9]+): (.*)$`)

// Load reads and validates the spec at path.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	return Parse(path, data)
}

type checker struct {
	file     string
	problems []string
}

func (c *checker) add(n *yaml.Node, field, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	c.problems = append(c.problems, fmt.Sprintf("%s:%d: %s: %s", c.file, line, field, fmt.Sprintf(format, args...)))
}

// strings reads a list of strings.
func (c *checker) strings(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode {
		c.add(n, field, "want a list of strings")
		return nil
	}
	var out []string
	for i, v := range n.Content {
		if v.Kind != yaml.ScalarNode {
			c.add(v, fmt.Sprintf("%s[%d]", field, i), "want a string")
			continue
		}
		out = append(out, v.Value)
	}
	return out
}

// Parse validates a spec read from file (used for messages and to resolve a
// relative scenario path).
func Parse(file string, data []byte) (*Spec, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := err.Error()
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			msg = m[1] + ": " + m[2]
		}
		return nil, &SpecError{Problems: []string{fmt.Sprintf("%s:%s", file, msg)}}
	}
	c := &checker{file: file}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		c.add(&doc, "spec", "want a mapping with scenario, sets, points and seeds")
		return nil, &SpecError{Problems: c.problems}
	}
	root := doc.Content[0]
	s := &Spec{File: file, Source: data}
	var scenarioNode, seedsNode, pointsNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "scenario":
			scenarioNode = v
			if v.Kind != yaml.ScalarNode || v.Value == "" {
				c.add(v, "scenario", "want a library name or a file path")
			} else {
				s.Scenario = v.Value
			}
		case "sets":
			s.Sets = c.strings(v, "sets")
		case "points":
			pointsNode = v
			s.Points = c.points(v)
		case "seeds":
			seedsNode = v
			s.Seeds = c.seeds(v)
		default:
			c.add(k, k.Value, "unknown field; want scenario, sets, points or seeds")
		}
	}
	if scenarioNode == nil {
		c.add(root, "scenario", "missing; want a library name or a file path")
	}
	if pointsNode == nil {
		c.add(root, "points", "missing; want a list of {name, sets} or {grid} entries")
	}
	if seedsNode == nil {
		c.add(root, "seeds", "missing; want a count or a list of seeds")
	}
	for i, set := range s.Sets {
		if isSeedSet(set) {
			c.add(root, fmt.Sprintf("sets[%d]", i), "%q: the sweep sets the seed itself; use seeds:", set)
		}
	}
	seen := map[string]int{}
	for i, p := range s.Points {
		if j, ok := seen[p.Name]; ok {
			c.add(p.node, fmt.Sprintf("points[%d].name", i), "%q is also point %d's name; want unique names", p.Name, j)
		}
		seen[p.Name] = i
	}
	if pointsNode != nil && len(s.Points) == 0 && len(c.problems) == 0 {
		c.add(pointsNode, "points", "empty; want at least one point")
	}
	if n := len(s.Points) * max(len(s.Seeds), 1); n > MaxRuns {
		c.add(pointsNode, "points", "%d runs; want at most %d", n, MaxRuns)
	}
	if len(c.problems) > 0 {
		return nil, &SpecError{Problems: c.problems}
	}

	// The scenario: read once, parsed with each point's sets, so that a
	// typo in a point fails now and names the point. A grid is checked one
	// parameter at a time — its first point, and each value of each
	// parameter with the others at their first values — so that a grid of
	// a hundred thousand points loads in a moment (each pod of a sweep
	// loads the whole spec); a combination invalid only together fails
	// when it runs, naming the point.
	if scenarios.IsLibraryName(s.Scenario) {
		src, err := scenarios.Source(s.Scenario)
		if err != nil {
			c.add(scenarioNode, "scenario", "%v", err)
			return nil, &SpecError{Problems: c.problems}
		}
		s.ScenarioFile, s.ScenarioData = s.Scenario+".yaml", src
	} else {
		path := s.Scenario
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(file), path)
		}
		src, err := os.ReadFile(path)
		if err != nil {
			c.add(scenarioNode, "scenario", "not a library scenario, and %v", err)
			return nil, &SpecError{Problems: c.problems}
		}
		s.ScenarioFile, s.ScenarioDir, s.ScenarioData = path, filepath.Dir(path), src
	}
	base, err := scenarios.ParseInDir(s.ScenarioFile, s.ScenarioDir, s.ScenarioData, s.Sets)
	if err != nil {
		c.add(scenarioNode, "scenario", "with the base sets:\n%v", err)
		return nil, &SpecError{Problems: c.problems}
	}
	s.ScenarioName = base.Name
	if seedsNode.Kind == yaml.ScalarNode { // a count: the scenario's seed and the ones after it
		n := len(s.Seeds)
		s.Seeds = make([]uint64, n)
		for i := range s.Seeds {
			s.Seeds[i] = base.Seed + uint64(i)
		}
	}
	for i, p := range s.Points {
		if p.skipCheck {
			continue
		}
		if _, err := scenarios.ParseInDir(s.ScenarioFile, s.ScenarioDir, s.ScenarioData, s.sets(p, base.Seed)); err != nil {
			c.add(p.node, fmt.Sprintf("points[%d] (%s)", i, p.Name), "the scenario is invalid with its sets:\n%v", err)
		}
	}
	if len(c.problems) > 0 {
		return nil, &SpecError{Problems: c.problems}
	}
	s.Hash = s.hash()
	return s, nil
}

func isSeedSet(set string) bool {
	path, _, _ := strings.Cut(set, "=")
	return strings.TrimSpace(path) == "seed"
}

// sets is every override of one run: the base sets, the point's, the seed.
func (s *Spec) sets(p Point, seed uint64) []string {
	all := make([]string, 0, len(s.Sets)+len(p.Sets)+1)
	all = append(all, s.Sets...)
	all = append(all, p.Sets...)
	return append(all, "seed="+strconv.FormatUint(seed, 10))
}

// Load parses the scenario of run i.
func (s *Spec) load(i int) (*scenarios.Scenario, error) {
	p, seed := s.Points[i/len(s.Seeds)], s.Seeds[i%len(s.Seeds)]
	return scenarios.ParseInDir(s.ScenarioFile, s.ScenarioDir, s.ScenarioData, s.sets(p, seed))
}

func (s *Spec) hash() string {
	sum := sha256.Sum256(s.ScenarioData)
	b, _ := json.Marshal(struct {
		Scenario string   `json:"scenario"`
		Sets     []string `json:"sets"`
		Points   []Point  `json:"points"`
		Seeds    []uint64 `json:"seeds"`
	}{hex.EncodeToString(sum[:]), s.Sets, s.Points, s.Seeds})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (c *checker) seeds(n *yaml.Node) []uint64 {
	switch n.Kind {
	case yaml.ScalarNode:
		k, err := strconv.Atoi(n.Value)
		if err != nil || k < 1 {
			c.add(n, "seeds", "%q: want a count >= 1 or a list of seeds", n.Value)
			return nil
		}
		return make([]uint64, k) // filled from the scenario's seed
	case yaml.SequenceNode:
		var out []uint64
		seen := map[uint64]bool{}
		for i, v := range n.Content {
			u, err := strconv.ParseUint(v.Value, 10, 64)
			if v.Kind != yaml.ScalarNode || err != nil {
				c.add(v, fmt.Sprintf("seeds[%d]", i), "%q: want an unsigned integer", v.Value)
				continue
			}
			if seen[u] {
				c.add(v, fmt.Sprintf("seeds[%d]", i), "seed %d given twice", u)
			}
			seen[u] = true
			out = append(out, u)
		}
		if len(n.Content) == 0 {
			c.add(n, "seeds", "empty list; want at least one seed")
		}
		return out
	}
	c.add(n, "seeds", "want a count or a list of seeds")
	return nil
}

// points reads the points list: each entry {name, sets} or {grid, name?}.
func (c *checker) points(n *yaml.Node) []Point {
	if n.Kind != yaml.SequenceNode {
		c.add(n, "points", "want a list of {name, sets} or {grid} entries")
		return nil
	}
	var out []Point
	for i, e := range n.Content {
		field := fmt.Sprintf("points[%d]", i)
		if e.Kind != yaml.MappingNode {
			c.add(e, field, "want a mapping {name, sets} or {grid}")
			continue
		}
		var name string
		var sets []string
		var grid *yaml.Node
		hasName, hasSets := false, false
		for j := 0; j+1 < len(e.Content); j += 2 {
			k, v := e.Content[j], e.Content[j+1]
			switch k.Value {
			case "name":
				hasName = true
				if v.Kind != yaml.ScalarNode || v.Value == "" {
					c.add(v, field+".name", "want a non-empty string")
				}
				name = v.Value
			case "sets":
				hasSets = true
				sets = c.strings(v, field+".sets")
			case "grid":
				grid = v
			default:
				c.add(k, field+"."+k.Value, "unknown field; want name and sets, or grid (and an optional name prefix)")
			}
		}
		for j, set := range sets {
			if isSeedSet(set) {
				c.add(e, fmt.Sprintf("%s.sets[%d]", field, j), "%q: the sweep sets the seed itself; use seeds:", set)
			}
		}
		switch {
		case grid != nil && hasSets:
			c.add(e, field, "has both sets and grid; want one")
		case grid != nil:
			for _, p := range c.grid(grid, field, name) {
				p.node = e
				out = append(out, p)
			}
		case !hasName:
			c.add(e, field, "missing name")
		default:
			out = append(out, Point{Name: name, Sets: sets, node: e})
		}
	}
	return out
}

// grid expands parameter → values into the cartesian product, in the
// mapping's order, the last parameter varying fastest. A point's name is
// its sets joined with commas, after the prefix if one is given.
func (c *checker) grid(n *yaml.Node, field, prefix string) []Point {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		c.add(n, field+".grid", "want a non-empty mapping of parameter to a list of values")
		return nil
	}
	type param struct {
		path   string
		values []string
	}
	var params []param
	total := 1
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		f := field + ".grid." + k.Value
		if k.Value == "seed" {
			c.add(k, f, "the sweep sets the seed itself; use seeds:")
			continue
		}
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			c.add(v, f, "want a non-empty list of values")
			continue
		}
		var vals []string
		for x, val := range v.Content {
			if val.Kind != yaml.ScalarNode {
				c.add(val, fmt.Sprintf("%s[%d]", f, x), "want a scalar value")
				continue
			}
			vals = append(vals, val.Value)
		}
		params = append(params, param{k.Value, vals})
		total *= len(vals)
		if total > MaxRuns {
			c.add(n, field+".grid", "more than %d points", MaxRuns)
			return nil
		}
	}
	if len(c.problems) > 0 {
		return nil
	}
	out := make([]Point, 0, total)
	idx := make([]int, len(params))
	for {
		p := Point{Sets: make([]string, len(params))}
		moved := 0
		for j, pr := range params {
			p.Sets[j] = pr.path + "=" + pr.values[idx[j]]
			if idx[j] != 0 {
				moved++
			}
		}
		p.skipCheck = moved > 1
		p.Name = strings.Join(p.Sets, ",")
		if prefix != "" {
			p.Name = prefix + ":" + p.Name
		}
		out = append(out, p)
		j := len(idx) - 1
		for ; j >= 0; j-- {
			idx[j]++
			if idx[j] < len(params[j].values) {
				break
			}
			idx[j] = 0
		}
		if j < 0 {
			return out
		}
	}
}
