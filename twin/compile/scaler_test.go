package compile

import (
	"testing"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// TestAcquisitionEffectsMatchTraits holds the acquisition effects to the
// fault catalogue: a row exactly for each kind whose traits say it acts on
// acquisition, and its console spec changes an offer with no fault.
func TestAcquisitionEffectsMatchTraits(t *testing.T) {
	sel := faults.Target{Region: "r", Pool: "p", Provider: "v", Model: "m"}
	for _, name := range faults.Kinds() {
		k := faults.Kind(name)
		want := k.Traits().OnAcquisition()
		if _, ok := acquisitionEffects[k]; ok != want {
			t.Errorf("%s: a row in twin/compile/scaler.go's acquisitionEffects %v, but its traits say it acts on acquisition %v", k, ok, want)
			continue
		}
		o := OfferUnder(sched.NoFaults, faults.ConsoleSpec(k, sel), func() int { return 0 })
		if changed := o != sched.NoFaults; changed != want {
			t.Errorf("%s: OfferUnder its console spec changes the offer %v (%+v), want %v", k, changed, o, want)
		}
	}
	for k := range acquisitionEffects {
		if !k.Traits().OnAcquisition() {
			t.Errorf("twin/compile/scaler.go's acquisitionEffects has %q, not an acquisition kind of the catalogue", k)
		}
	}
}
