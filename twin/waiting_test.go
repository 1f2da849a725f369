package twin

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
)

// A live console's classes count the gateway's waiting requests as a
// drill's count its own: the recorder's TTFT p99 with the waiting at
// their age is the drill's for the same completions and ages, and a
// class with nothing waiting keeps its completed requests' p99.
func TestRecorderAddWaitingAsTheDrill(t *testing.T) {
	sc, err := scenarios.LoadNamedWithSets("default", []string{"duration=10m", "warmup=0s", "faults=[]", "expect=[]"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(sc.Classes), 2)
	rec, err := NewRecorder(sc)
	require.NoError(t, err)
	const now = 5 * time.Minute
	rc := newRecent(len(sc.Classes), len(sc.Tenants), DrillWindow)
	for i := range 200 {
		class := i % 2
		// Within the last 50 s: in both windows (the drill's is in
		// buckets of 10 s, the recorder's exact).
		ended := now - 50*time.Second + time.Duration(i)*50*time.Second/200
		ttft := time.Duration(50+i) * time.Millisecond
		rec.Add(Outcome{Arrival: Arrival{At: ended - time.Second, Class: class}, Result: Completed, Ended: ended, TTFT: ttft,
			Replica: -1, Attempts: 1})
		rc.complete(class, ended, ttft, time.Second, true)
	}
	// Out of the window: neither counts it.
	rec.Add(Outcome{Arrival: Arrival{At: time.Minute, Class: 0}, Result: Completed, Ended: time.Minute + time.Second,
		TTFT: time.Hour, Replica: -1, Attempts: 1})
	rc.complete(0, time.Minute+time.Second, time.Hour, time.Second, true)

	ages := [][]time.Duration{{30 * time.Second, 12 * time.Second, 9 * time.Second}}
	classes := rec.Recent(now, DrillWindow)
	rec.AddWaiting(classes, now, DrillWindow, ages)
	waiting := classes[0]
	require.Equal(t, 3, waiting.Waiting)
	require.Equal(t, 30*time.Second, waiting.OldestWaiting)
	require.Less(t, waiting.TTFTP99, time.Second, "completed requests alone")
	require.Greater(t, waiting.TTFTP99Waiting, 5*time.Second, "the waiting at their age: %+v", waiting)
	drill := rc.class(0, now, ages[0])
	require.Equal(t, drill.TTFTP99, waiting.TTFTP99)
	require.Equal(t, drill.TTFTP99Waiting, waiting.TTFTP99Waiting, "as the drill counts them")

	idle := classes[1]
	require.Zero(t, idle.Waiting)
	require.Zero(t, idle.OldestWaiting)
	require.Equal(t, idle.TTFTP99, idle.TTFTP99Waiting)
	require.Equal(t, rc.class(1, now, nil).TTFTP99Waiting, idle.TTFTP99Waiting)
}
