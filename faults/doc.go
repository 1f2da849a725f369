// Package faults will hold the fault catalogue (one spec type per fault kind,
// each with a parser and a printer that round-trip) and its two injectors:
// into the twin and into a live fleet.
//
// Nothing is here yet: faults arrive with their own issue.
package faults
