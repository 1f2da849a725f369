// Package scenarios will hold the scenario schema, its strict loader and
// validator, and the embedded library of ready scenarios (*.yaml).
//
// Nothing is here yet: scenarios arrive with the twin.
package scenarios
