// Package scenarios owns the scenario: the YAML schema (version 1), its
// strict loader and validator, the --set override syntax, the expectation
// grammar, and the library of ready scenarios embedded in the binary.
//
// # Usage
//
//	s, err := scenarios.LoadNamedWithSets("default", []string{"pools[0].replicas=8"})
//	var ve *scenarios.ValidationError
//	if errors.As(err, &ve) {
//		for _, p := range ve.Problems { // every problem, in file order
//			fmt.Println(p) // default.yaml:42: pools[2].gpus_per_replica: got 0, want >= 1
//		}
//	}
//
// A Scenario returned without error is complete: defaults are filled in
// (Drain 10m, tenant weight 1, queue limit 1000, defer 1m, least-loaded
// routing, diurnal period 24h, max_batch 1 for service-time pools), every
// reference resolves, every number is in range, and every pool can run the
// models it lists. The twin may rely on that and need not check again.
//
// # How loading works
//
// The document is parsed into a yaml.Node; --set overrides edit that tree
// (set.go); a reflective decoder walks tree and schema together, reporting
// unknown keys and ill-typed values with their field paths and recording
// each path's line (decode.go); defaults are applied (defaults.go); then the
// validator checks the whole scenario and adds every problem it finds
// (validate.go). Problems are one list, sorted by line: the author fixes
// everything in one pass.
//
// # Imports
//
// Nothing from twin/ except twin/latency, whose built-in profile table is
// what a pool's profiles.<model>.ref names. The twin imports this package,
// not the other way round; sim/ is not needed to read a scenario.
//
// # Where to start reading
//
// schema.go (the types, which are the YAML keys), then load.go
// (ParseWithSets), then validate.go. docs/scenarios.md is the reference for
// scenario authors; a test keeps it in step with schema.go.
package scenarios
