// Package features holds fleetdrill's Gherkin failover specs (*.feature),
// run on the digital twin by go test ./features/... with the step library
// of internal/spec, the same steps fleetdrill spec gives users.
//
//	go test ./features/ -godog.tags='@quota-exhaustion' -godog.format=pretty
package features
