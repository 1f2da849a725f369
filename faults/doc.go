// Package faults owns the fault catalogue and its text form: the kinds of
// fault fleetdrill can inject, the Spec that describes one, and the one-line
// syntax a scenario's faults: list and the CLI use,
//
//	regional-outage region=us-east at=10m for=15m
//	brownout pool=use-h100 at=5m fail=0.2 latency=300ms
//	node-loss pool=use-h100 at=12m count=2
//
// A fault is data first (pebble's errorfs): Parse reads a line, Validate
// checks a spec against the catalogue, and String prints it back in a
// canonical form that parses to the same spec. docs/faults.md is the
// reference for authors; Kinds and Describe feed help texts.
//
// # Usage
//
//	specs, err := faults.ParseAll(sc.Faults) // every problem of every line at once
//	if err != nil {
//		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
//			p := e.(*faults.Problem) // p.Index, p.Key, p.Value, p.Msg
//			fmt.Println(p)           // faults[2]: count: got 0, want >= 1
//		}
//	}
//
// A Spec returned by Parse or ParseAll is valid: its kind is in the
// catalogue, it has the target its kind needs and no key its kind does not
// take, and every value is in range. Injectors may rely on that. A zero
// field means the key was left out: For 0 lasts to the end of the run, the
// zero Radius is every replica of the target (Parse gives node-loss count=1
// instead), a zero quota lets nothing through.
//
// # Traits
//
// Each kind's catalogue entry also carries its Traits: what the backends and
// tools need to know about it without a switch on the kind. How a live
// run emulates it (Live: toxiproxy, the live gateway's fault layer,
// container stop/start, or none and why), the HTTP status whose first answer detects
// it (DetectStatus: 429, 404), whether it starts at a notice (FromNotice,
// which Spec.Start and Spec.StartingAt honour), whether it acts on
// acquisition (OnAcquisition), the spec the game-day console injects for
// it (ConsoleSpec) and the console's key for it (ConsoleKey: key, help-bar
// word, help line, place), and the words a Gherkin step names it by
// (Words). Spec.LiveGap says why a live fleet cannot emulate a spec. The
// entry is the kind's one description: no other package keeps a copy of
// any of this.
//
// # What is not here
//
// The injectors live with their backends: the twin's, which turns a Spec
// into sim events, in twin/effects.go (one effect type per kind); the live
// fleet's, for toxiproxy and containers, in internal/livefleet/injectors.go
// (one injector type per kind with a part on the fleet); the live
// gateway's, for HTTP-level faults, in internal/liverun/inject.go (a row
// per LiveGateway kind, turning a spec into the gateway fault layer's
// faults). Whether a target names a region, pool or model the
// scenario defines is checked where the scenario is known: the scenario
// loader and the injectors, not here.
//
// # Adding a kind
//
//  1. Here, its descriptor: its Kind constant (spec.go) and its catalogue
//     entry (catalogue.go): effect, usage, the keys it takes and its
//     target, its own rules and default radius if any, and its Traits
//     (how a live run emulates it or why not, detection, notice, console
//     spec and key, Gherkin words); a row in docs/faults.md's catalogue
//     and "in the twin" tables and an example there (docs_test.go checks
//     the catalogue row and the example), and the kind in
//     catalogue_test.go's TestKinds. A new key also needs its place in
//     keyOrder, a Spec field, its cases in parse.go's set and print.go's
//     value, and a row in the docs' keys table.
//  2. Then each implementation table the descriptor asks for, below; a
//     test in the table's package fails, naming the kind and the file,
//     until the kind has its row there.
//
// The implementation tables, keyed by Kind:
//
//   - every kind: its effect type and row in twin/effects.go
//     (TestEffectsCoverCatalogue);
//   - OnAcquisition: its row in twin/compile/scaler.go's
//     acquisitionEffects (TestAcquisitionEffectsMatchTraits);
//   - LiveProxy or LiveContainer: its injector type and row in
//     internal/livefleet/injectors.go (TestInjectorsMatchTraits);
//   - LiveGateway: its row in internal/liverun/inject.go's gatewayFaults
//     (TestGatewayFaultsMatchTraits);
//   - LiveProxy: its row in internal/liverun/hybrid.go's externalFaults,
//     for external endpoints, which have no proxy
//     (TestExternalFaultsMatchTraits).
//
// Nothing else switches on the kind: internal/tui builds its keys from
// ConsoleKey (TestInjectKeysMatchTraits), internal/spec its fault words
// from Words, and the rest of internal/liverun and internal/scorecard read
// the Traits.
//
// # Imports
//
// Only the standard library and internal/suggest (for "did you mean"). Nothing
// from twin/, sim/ or scenarios/: both backends and the scenario loader
// import this package, so it must stay below them.
//
// # Where to start reading
//
// spec.go (the Spec, which is the catalogue's data), catalogue.go (the kinds,
// the keys each takes, their traits), traits.go (what Traits say), parse.go
// (Parse, ParseAll), validate.go (the rules and the Problem type), then
// print.go (String and the canonical forms of durations and numbers).
package faults
