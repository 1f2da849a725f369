package twin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// policy.admission.queue_timeout bounds each wait in the core's queue: a
// request still queued that long times out, as the live gateway times it
// out (503 queue_timeout). Every request is still accounted for once.
func TestQueueTimeoutBoundsTheWait(t *testing.T) {
	// Half the fleet lost for two minutes: requests queue behind it (the
	// deadline check off, which would refuse them at once).
	const fault = `faults=["regional-outage region=us-east at=1m for=2m"]`
	const noCheck = "policy.admission.deadline_check=false"
	without := run(t, loadDefault(t, fault, "policy.retries.max_attempts=1", noCheck))
	with := run(t, loadDefault(t, fault, "policy.retries.max_attempts=1", "policy.admission.queue_timeout=2s", noCheck))
	require.True(t, without.Requests.Balanced())
	require.True(t, with.Requests.Balanced())
	require.Equal(t, without.Requests.Arrived, with.Requests.Arrived, "the same arrivals")
	maxWait := func(rep *Report) float64 {
		m := 0.0
		for _, g := range rep.Classes {
			require.True(t, g.Balanced())
			m = max(m, g.QueueWait.Max)
		}
		return m
	}
	require.Greater(t, maxWait(without), 2.0, "the fault makes requests wait longer than the timeout")
	require.Greater(t, with.Requests.TimedOut, without.Requests.TimedOut, "waits past 2s time out")
	require.LessOrEqual(t, maxWait(with), 2.0*1.01, "no completed request waited longer (the sketch's 1 %)")
}
