// Package features will hold the Gherkin failover specs (*.feature) and their
// godog step definitions, run by go test ./features/...
//
// Nothing is here yet: the specs arrive with their own issue.
package features
