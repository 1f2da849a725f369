package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Parse decodes and validates one scenario. name is what problems are
// reported against, usually the file name. On failure the error is a
// *ValidationError listing every problem found.
func Parse(name string, data []byte) (*Scenario, error) {
	return ParseWithSets(name, data, nil)
}

// ParseWithSets is Parse with overrides (see ApplySet) applied to the
// document before it is decoded, so that an overridden value is checked
// exactly like a written one. Problems caused by an override name it.
func ParseWithSets(name string, data []byte, sets []string) (*Scenario, error) {
	return ParseInDir(name, "", data, sets)
}

// ParseInDir is ParseWithSets for a scenario that was read from a file in
// dir: its relative trace paths resolve there (see Scenario.TracePath).
// LoadWithSets uses it; callers that read a file's bytes themselves (to
// parse the same text many times) should too.
func ParseInDir(name, dir string, data []byte, sets []string) (*Scenario, error) {
	doc, p := parseNode(name, data)
	if p != nil {
		return nil, &ValidationError{Problems: []Problem{*p}}
	}
	d := &decoder{
		file: name,
		ix:   &index{lines: map[string]int{}, sets: map[string]string{}},
		bad:  map[string]bool{},
	}
	for _, set := range sets {
		canon, err := applySet(doc, set)
		if err != nil {
			var se *SetError
			if errors.As(err, &se) {
				d.problems = append(d.problems, Problem{File: name, Path: se.Path, Msg: se.Msg, Set: set})
			}
			continue
		}
		d.ix.sets[canon] = set
	}
	root := doc.Content[0]
	var s Scenario
	d.decode(root, reflect.ValueOf(&s).Elem(), "")
	s.Dir = dir
	applyDefaults(&s)
	(&validator{d: d, s: &s}).validate()
	s.joinBought()
	if len(d.problems) > 0 {
		ve := &ValidationError{Problems: d.problems}
		order := make(map[string]int, len(sets))
		for i, set := range sets {
			if _, ok := order[set]; !ok {
				order[set] = i
			}
		}
		ve.sort(order)
		return nil, ve
	}
	return &s, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line ([0-9]+): (.*)$`)

// parseNode reads the YAML document, or says why it cannot, as a problem.
func parseNode(name string, data []byte) (doc *yaml.Node, p *Problem) {
	defer func() {
		// yaml.v3 is a port of libyaml and has had index panics on hostile
		// input; a scenario loader must answer, not crash.
		if r := recover(); r != nil {
			doc, p = nil, &Problem{File: name, Msg: fmt.Sprintf("the YAML parser failed on this input (%v); please report it", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	doc = new(yaml.Node)
	err := dec.Decode(doc)
	if errors.Is(err, io.EOF) {
		return nil, &Problem{File: name, Msg: fmt.Sprintf("empty document; want a scenario, starting with schema: %d", SchemaVersion)}
	}
	if err != nil {
		return nil, syntaxProblem(name, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		line := next.Line
		if err != nil {
			return nil, syntaxProblem(name, err)
		}
		return nil, &Problem{File: name, Line: line, Msg: "a second YAML document (after ---); want one scenario per file"}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		got := "nothing"
		if len(doc.Content) > 0 {
			got = describe(doc.Content[0])
		}
		return nil, &Problem{File: name, Line: doc.Line, Value: got, Msg: fmt.Sprintf("want a mapping of scenario keys, starting with schema: %d", SchemaVersion)}
	}
	return doc, nil
}

// syntaxProblem turns a yaml.v3 error ("yaml: line 3: did not find
// expected key") into a located problem.
func syntaxProblem(name string, err error) *Problem {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Problem{File: name, Line: line, Msg: "invalid YAML: " + m[2]}
	}
	return &Problem{File: name, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// Load reads and parses the scenario file at path.
func Load(path string) (*Scenario, error) {
	return LoadWithSets(path, nil)
}

// LoadWithSets is Load with overrides; see ParseWithSets.
func LoadWithSets(path string, sets []string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	return ParseInDir(path, filepath.Dir(path), data, sets)
}

// DefaultName is the library scenario used when none is named.
const DefaultName = "default"

// LoadNamed loads a library scenario by name ("default", "mmc") or a file by
// path. A plain word without a slash or an extension is a library name; to
// load a file called default in the current directory, write ./default. An
// empty nameOrPath is DefaultName.
func LoadNamed(nameOrPath string) (*Scenario, error) {
	return LoadNamedWithSets(nameOrPath, nil)
}

// LoadNamedWithSets is LoadNamed with overrides; see ParseWithSets.
func LoadNamedWithSets(nameOrPath string, sets []string) (*Scenario, error) {
	if nameOrPath == "" {
		nameOrPath = DefaultName
	}
	if !IsLibraryName(nameOrPath) {
		return LoadWithSets(nameOrPath, sets)
	}
	data, err := Source(nameOrPath)
	if err != nil {
		return nil, err
	}
	return ParseWithSets(nameOrPath+".yaml", data, sets)
}

// IsLibraryName reports whether LoadNamed reads s from the library rather
// than from a file: a plain word without a path separator or extension.
func IsLibraryName(s string) bool {
	return s != "" && !strings.ContainsAny(s, `/\`) && filepath.Ext(s) == "" && s != "." && s != ".."
}
