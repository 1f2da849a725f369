package twin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TimelineLen counts the timeline as it grows: stepping a drill until it
// grows stops on each entry in turn, and the fault scheduled at 3m starts
// on a step of its own.
func TestDrillTimelineLen(t *testing.T) {
	d, err := NewDrill(loadDefault(t, `faults=["regional-outage region=eu-west at=3m for=1m"]`), Options{})
	require.NoError(t, err)
	d.Advance(2*time.Minute + 30*time.Second)
	require.Equal(t, len(d.Snapshot().Events), d.TimelineLen())
	for n := d.TimelineLen(); d.Now() < 3*time.Minute; n = d.TimelineLen() {
		for d.TimelineLen() == n {
			_, more := d.Step()
			require.True(t, more, "the run ended before the fault started")
		}
		require.Equal(t, len(d.Snapshot().Events), d.TimelineLen())
	}
	last := d.Snapshot().Events[d.TimelineLen()-1]
	require.Equal(t, "fault-start", last.Kind, "the entry at 3m: %+v", last)
	require.Equal(t, 180.0, last.TS)
}
