// Package tui is the game-day console of fleetdrill: a Bubble Tea program
// that shows a drill of the digital twin — the fleet as the router sees it,
// latency against the SLOs, queues and routes, the timeline — and lets an
// operator pause it, change its pace and inject faults as it runs.
//
// # Ownership
//
// The console never touches the scheduler core. A Driver (driver.go) owns
// the drill, through the Engine interface that *twin.Drill satisfies: it
// paces the simulation to the wall clock, runs the operator's commands and
// sends twin.Snapshot values to the model over a channel that holds one
// frame and replaces a stale one, so a slow terminal never slows or
// perturbs the simulation, and the drill runs the same with or without a
// screen. The Model (model.go) only reads snapshots and sends commands.
//
// It imports twin for the snapshot and report types and faults to build
// fault lines; it must not import twin/sched, sim or anything that reads
// the fault schedule behind the router's back.
//
// # Where to start
//
// Run (run.go) wires a Driver to a Model and a tea.Program. Then driver.go
// for pacing, model.go for keys and state (keys.go: the bindings, the one
// source of the help bar and the help; the inject keys are each fault
// kind's faults.Traits.ConsoleKey), palette.go for the ':' command
// line, view.go, panes.go and footer.go for the screen, summary.go for the
// screen after q, record.go for --record.
package tui
