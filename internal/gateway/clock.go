package gateway

import "time"

// MaxSpeed is the highest time compression the gateway accepts, as the
// emulated node's.
const MaxSpeed = 10_000

// clock converts between the core's model time and the wall clock: model
// time runs speed times as fast as the wall clock, from the gateway's start.
// Every duration the gateway takes from the scenario or its config is model
// time; it becomes wall time only where a timer is armed (wall).
type clock struct {
	start time.Time
	speed float64
}

// now is the core's clock: model time since the start, never zero.
func (c clock) now() time.Duration { return c.at(time.Now()) }

// at is the model time of the wall-clock instant t, never zero.
func (c clock) at(t time.Time) time.Duration {
	return time.Duration(float64(t.Sub(c.start))*c.speed) + time.Nanosecond
}

// wall converts a model duration to the wall time it takes.
func (c clock) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.speed)
}

// model converts a wall duration to model time.
func (c clock) model(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.speed)
}
