package scorecard

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/fleetdrill/fleetdrill/internal/liverun"
	"github.com/fleetdrill/fleetdrill/internal/shell"
)

// Live settings of the latency stage's live replay: small, so that it runs
// in minutes on one machine.
const (
	LiveReplicas = 1
	LiveSpeed    = 5
)

// LiveLatency is the latency stage replayed on the live harness: the
// provider-only fleet, each pool cut to LiveReplicas containers, at
// LiveSpeed. It is evidence beside the twin's numbers, not a gate input:
// with fewer replicas than the scenario's, its latencies are not the
// budget's.
type LiveLatency struct {
	Speed    float64                  `json:"speed"`
	Replicas int                      `json:"replicas"`
	WallS    float64                  `json:"wall_s"`
	Classes  map[string]*ClassLatency `json:"classes"`
	// Twin is the twin's run of the same cut scenario, for comparison.
	Twin     map[string]*ClassLatency `json:"twin_classes,omitempty"`
	Breaches []string                 `json:"breaches,omitempty"`
	Command  string                   `json:"command"`
}

// live replays the provider-only fleet through liverun.
func (d *drills) live(ctx context.Context) (*LiveLatency, error) {
	sets := append(slices.Clone(d.sets), d.isolationSets(1)...)
	sets = append(sets, "faults=[]", "expect=[]")
	res, err := liverun.Run(ctx, liverun.Options{Scenario: d.scenario, Sets: sets, Speed: LiveSpeed,
		Replicas: LiveReplicas, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, &InvalidError{fmt.Errorf("scorecard --live: %w", err)}
	}
	l := &LiveLatency{Speed: res.Speed, Replicas: LiveReplicas, WallS: round(res.WallS, 1),
		Classes: d.classLatency(res.Live), Breaches: d.breaches(res.Live)}
	if res.Twin != nil {
		l.Twin = d.classLatency(res.Twin)
	}
	l.Command = fmt.Sprintf("fleetdrill run %s --live --speed %d --replicas %d", d.scenario, LiveSpeed, LiveReplicas)
	for _, s := range sets {
		l.Command += " --set " + shell.Quote(s)
	}
	return l, nil
}
