package sim

import (
	"context"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests run inside synctest bubbles: time.Now and timers use a fake clock
// that advances only when every goroutine in the bubble is blocked, so wall
// and virtual times can be asserted exactly.

// pacerRun is a Pacer running on its own goroutine inside a bubble.
type pacerRun struct {
	p      *Pacer
	cancel context.CancelFunc
	errc   chan error
	start  time.Time // fake wall time at which Run was started
}

func startPacer(t *testing.T, s *Sim, cfg PacerConfig) *pacerRun {
	t.Helper()
	p, err := NewPacer(s, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	r := &pacerRun{p: p, cancel: cancel, errc: make(chan error, 1), start: time.Now()}
	go func() { r.errc <- p.Run(ctx) }()
	return r
}

// stop cancels the run and returns what Run returned.
func (r *pacerRun) stop() error {
	r.cancel()
	return <-r.errc
}

// returned reports whether Run has returned, after letting the bubble settle.
func (r *pacerRun) returned() bool {
	synctest.Wait()
	select {
	case err := <-r.errc:
		r.errc <- err // put it back for stop or a later read
		return true
	default:
		return false
	}
}

// firing records when each event fired, in virtual and fake wall time. It is
// written on the run goroutine only and read after Run returns (or inside
// Do), so it needs no lock.
type firing struct {
	virtual time.Duration
	wall    time.Duration // since the run started
}

// scheduleAll schedules an event at each of at, recording its firing in log.
// start is the wall time Run starts at: fake time does not move until the test
// goroutine blocks, so time.Now() just before startPacer is that time.
func scheduleAll(s *Sim, start time.Time, log *[]firing, at ...time.Duration) {
	for _, v := range at {
		s.At(v, func() { *log = append(*log, firing{s.Now(), time.Since(start)}) })
	}
}

// wallOf is the wall time at which virtual time v is reached from zero at
// speed, rounded to the nanosecond the Pacer wakes at.
func wallOf(v time.Duration, speed float64) time.Duration {
	return time.Duration(math.Round(float64(v) / speed))
}

func status(t *testing.T, p *Pacer) PacerStatus {
	t.Helper()
	st, err := p.Status()
	require.NoError(t, err)
	return st
}

func TestPacerPacesEventsToWallClock(t *testing.T) {
	// Events off the tick grid, so firing on time proves the loop sleeps
	// until each event's own deadline, not just to the next tick.
	events := []time.Duration{1230 * time.Millisecond, 2 * time.Second, 3070 * time.Millisecond}
	tests := []struct {
		speed      float64
		sleep      time.Duration // wall time before the Status check
		wantNow    time.Duration
		wantEvents uint64
	}{
		{speed: 1, sleep: 1500 * time.Millisecond, wantNow: 1500 * time.Millisecond, wantEvents: 1},
		{speed: 10, sleep: 250 * time.Millisecond, wantNow: 2500 * time.Millisecond, wantEvents: 2},
		{speed: 0.5, sleep: 5 * time.Second, wantNow: 2500 * time.Millisecond, wantEvents: 2},
		{speed: MinSpeed, sleep: 15 * time.Second, wantNow: 1500 * time.Millisecond, wantEvents: 1},
		{speed: MaxSpeed, sleep: 250 * time.Microsecond, wantNow: 2500 * time.Millisecond, wantEvents: 2},
	}
	for _, tt := range tests {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Seed: 1})
				var log []firing
				scheduleAll(s, time.Now(), &log, events...)
				r := startPacer(t, s, PacerConfig{Speed: tt.speed})

				time.Sleep(tt.sleep)
				st := status(t, r.p)
				require.Equal(t, tt.wantNow, st.Now, "virtual time after %v wall at %v×", tt.sleep, tt.speed)
				require.Equal(t, tt.wantEvents, st.Events)
				require.Equal(t, len(events)-int(tt.wantEvents), st.Pending)
				require.Equal(t, tt.speed, st.Speed)
				require.False(t, st.Paused)

				// Run ends by itself once the last event has fired, exactly
				// when its wall deadline comes.
				require.NoError(t, <-r.errc)
				require.Equal(t, wallOf(events[len(events)-1], tt.speed), time.Since(r.start))
				require.Len(t, log, len(events))
				for i, f := range log {
					require.Equal(t, events[i], f.virtual)
					require.Equal(t, wallOf(events[i], tt.speed), f.wall, "wall time of event %d", i)
				}
				require.Equal(t, events[len(events)-1], s.Now())
			})
		})
	}
}

func TestPacerWakesExactlyWhenDue(t *testing.T) {
	// At 0.7× the wall deadline computed as ceil(virtual / speed) is off by
	// a nanosecond either way for these events: 21ms / 0.7 rounds up past
	// 30ms, though the target reaches 21ms at 30ms exactly, while at 90ms the
	// target is still 62.999999ms and 63ms is only reached 1ns later. The
	// loop must wake at those instants, no earlier and no later.
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		start := time.Now() // fake time stands still until this goroutine blocks
		var log []firing
		scheduleAll(s, start, &log, 21*time.Millisecond, 63*time.Millisecond)
		var wakes []time.Duration
		r := startPacer(t, s, PacerConfig{
			Speed:     0.7,
			OnAdvance: func(*Sim) { wakes = append(wakes, time.Since(start)) },
		})
		require.NoError(t, <-r.errc)
		require.Equal(t, []firing{
			{21 * time.Millisecond, 30 * time.Millisecond},
			{63 * time.Millisecond, 90*time.Millisecond + 1},
		}, log)
		// One wake per deadline plus the tick between them: none wasted.
		require.Equal(t, []time.Duration{0, 30 * time.Millisecond, 80 * time.Millisecond, 90*time.Millisecond + 1}, wakes)
	})
}

func TestPacerTickMovesClockBetweenEvents(t *testing.T) {
	tests := []struct {
		name string
		tick time.Duration
		want time.Duration // spacing of the clock advances
	}{
		{name: "default", tick: 0, want: DefaultTick},
		{name: "20ms", tick: 20 * time.Millisecond, want: 20 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{})
				s.At(time.Hour, nil) // keeps the drill going
				var seen []time.Duration
				r := startPacer(t, s, PacerConfig{
					Speed: 1,
					Tick:  tt.tick,
					OnAdvance: func(s *Sim) {
						// Commands advance too, possibly at the same instant
						// as a tick: record distinct times only.
						if n := len(seen); n == 0 || seen[n-1] != s.Now() {
							seen = append(seen, s.Now())
						}
					},
				})
				time.Sleep(4 * tt.want)
				synctest.Wait()
				var got []time.Duration
				require.NoError(t, r.p.Do(func(*Sim) { got = append(got, seen...) }))
				require.Equal(t, []time.Duration{0, tt.want, 2 * tt.want, 3 * tt.want, 4 * tt.want}, got)
				require.ErrorIs(t, r.stop(), context.Canceled)
			})
		})
	}
}

func TestPacerPauseFreezesClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		var log []firing
		scheduleAll(s, time.Now(), &log, time.Second, 2*time.Second, 3*time.Second)
		r := startPacer(t, s, PacerConfig{Speed: 10})

		time.Sleep(150 * time.Millisecond)
		require.NoError(t, r.p.Pause())
		require.NoError(t, r.p.Pause(), "pausing twice is harmless")
		time.Sleep(10 * time.Second)
		st := status(t, r.p)
		require.True(t, st.Paused)
		require.Equal(t, 1500*time.Millisecond, st.Now, "paused clock must not move")
		require.Equal(t, uint64(1), st.Events)
		require.False(t, r.returned(), "a paused run waits, it does not end")

		// Resuming re-anchors: the clock carries on from 1.5s, it does not
		// jump by the 10s spent paused.
		require.NoError(t, r.p.Resume())
		require.NoError(t, r.p.Resume(), "resuming twice is harmless")
		time.Sleep(100 * time.Millisecond)
		st = status(t, r.p)
		require.False(t, st.Paused)
		require.Equal(t, 2500*time.Millisecond, st.Now)
		require.Equal(t, uint64(2), st.Events)

		require.NoError(t, <-r.errc)
		require.Equal(t, 10*time.Second+300*time.Millisecond, time.Since(r.start))
		require.Equal(t, firing{3 * time.Second, 10*time.Second + 300*time.Millisecond}, log[2])
	})
}

func TestPacerStartPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		s.At(time.Second, nil)
		r := startPacer(t, s, PacerConfig{Speed: 1, Paused: true})
		time.Sleep(time.Hour)
		require.Equal(t, PacerStatus{Speed: 1, Paused: true, Pending: 1}, status(t, r.p))
		require.NoError(t, r.p.Resume())
		time.Sleep(999 * time.Millisecond)
		require.Equal(t, uint64(0), status(t, r.p).Events)
		require.NoError(t, <-r.errc)
		require.Equal(t, time.Hour+time.Second, time.Since(r.start))
	})
}

func TestPacerStep(t *testing.T) {
	tests := []struct {
		name      string
		paused    bool
		sleep     time.Duration // wall time before the first Step
		wantFirst PacerStatus   // after the first Step
	}{
		{
			name:      "from paused",
			paused:    true,
			sleep:     time.Hour,
			wantFirst: PacerStatus{Now: time.Second, Speed: 10, Paused: true, Events: 1, Pending: 2},
		},
		{
			// At 150ms the clock is at 1.5s with the 1s event fired; Step
			// pauses there and fires the 2s event.
			name:      "from running",
			sleep:     150 * time.Millisecond,
			wantFirst: PacerStatus{Now: 2 * time.Second, Speed: 10, Paused: true, Events: 2, Pending: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{})
				for _, at := range []time.Duration{time.Second, 2 * time.Second, 50 * time.Second} {
					s.At(at, nil)
				}
				r := startPacer(t, s, PacerConfig{Speed: 10, Paused: tt.paused})
				time.Sleep(tt.sleep)

				fired, err := r.p.Step()
				require.NoError(t, err)
				require.True(t, fired)
				require.Equal(t, tt.wantFirst, status(t, r.p))

				// Stepping leaves the Pacer paused.
				time.Sleep(time.Hour)
				require.Equal(t, tt.wantFirst, status(t, r.p))

				// Step fires one event however far ahead it is.
				for n := tt.wantFirst.Events; n < 3; n++ {
					fired, err = r.p.Step()
					require.NoError(t, err)
					require.True(t, fired)
				}
				require.Equal(t, PacerStatus{Now: 50 * time.Second, Speed: 10, Paused: true, Events: 3}, status(t, r.p))

				fired, err = r.p.Step()
				require.NoError(t, err)
				require.False(t, fired, "nothing left to step")
				require.Equal(t, 50*time.Second, status(t, r.p).Now, "an empty step must not move the clock")
				require.False(t, r.returned(), "paused with an empty queue: a Do may still add events")

				require.NoError(t, r.p.Resume())
				require.NoError(t, <-r.errc)
			})
		})
	}
}

func TestPacerSetSpeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		var log []firing
		scheduleAll(s, time.Now(), &log, time.Second, 5*time.Second)
		r := startPacer(t, s, PacerConfig{Speed: 1})

		time.Sleep(500 * time.Millisecond)
		require.NoError(t, r.p.SetSpeed(100))
		// Re-anchored at 0.5s: 10ms wall at 100× is 1s virtual.
		time.Sleep(10 * time.Millisecond)
		st := status(t, r.p)
		require.Equal(t, 1500*time.Millisecond, st.Now)
		require.Equal(t, 100.0, st.Speed)
		require.Equal(t, uint64(1), st.Events)

		err := r.p.SetSpeed(0)
		require.ErrorContains(t, err, "out of range")
		require.Equal(t, 100.0, status(t, r.p).Speed, "a rejected speed changes nothing")

		// While paused the new speed waits for Resume, which anchors.
		require.NoError(t, r.p.Pause())
		require.NoError(t, r.p.SetSpeed(2))
		time.Sleep(time.Second)
		require.Equal(t, 1500*time.Millisecond, status(t, r.p).Now)
		require.NoError(t, r.p.Resume())

		require.NoError(t, <-r.errc)
		// 0.5s + 10ms + 1s paused + (5s − 1.5s) / 2.
		require.Equal(t, 3260*time.Millisecond, time.Since(r.start))
		require.Equal(t, []firing{{time.Second, 505 * time.Millisecond}, {5 * time.Second, 3260 * time.Millisecond}}, log)
	})
}

func TestPacerSetSpeedUnboundedAndBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		fired := 0
		// A self-rescheduling event every second, for 100s.
		var tick func()
		tick = func() {
			fired++
			if fired < 100 {
				s.After(time.Second, tick)
			}
		}
		s.At(time.Second, tick)
		r := startPacer(t, s, PacerConfig{Speed: 1, Paused: true})

		require.NoError(t, r.p.SetSpeed(Unbounded))
		require.NoError(t, r.p.Resume())
		require.NoError(t, <-r.errc)
		require.Equal(t, 100, fired)
		require.Equal(t, 100*time.Second, s.Now(), "unbounded leaves the clock at the last event")
		require.Equal(t, time.Duration(0), time.Since(r.start), "unbounded takes no wall time")
	})
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		s.At(time.Hour, nil)
		r := startPacer(t, s, PacerConfig{Speed: Unbounded, Paused: true})
		s2 := time.Duration(0)
		require.NoError(t, r.p.Do(func(s *Sim) { s.At(10*time.Second, func() { s2 = s.Now() }) }))
		fired, err := r.p.Step()
		require.NoError(t, err)
		require.True(t, fired)
		// Back to a finite speed, anchored at the stepped-to time.
		require.NoError(t, r.p.SetSpeed(10))
		require.NoError(t, r.p.Resume())
		time.Sleep(time.Second)
		require.Equal(t, 20*time.Second, status(t, r.p).Now)
		require.Equal(t, 10*time.Second, s2)
		require.ErrorIs(t, r.stop(), context.Canceled)
	})
}

func TestPacerUnboundedRunsToCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3*pacerChunk + 7
		s := New(Config{})
		var chain func()
		count := 0
		chain = func() {
			count++
			if count < n {
				s.After(time.Millisecond, chain)
			}
		}
		s.After(time.Millisecond, chain)
		advances := 0
		r := startPacer(t, s, PacerConfig{Speed: Unbounded, OnAdvance: func(*Sim) { advances++ }})
		require.NoError(t, <-r.errc)
		require.Equal(t, n, count)
		require.Equal(t, uint64(n), s.Events())
		require.Equal(t, n*time.Millisecond, s.Now())
		require.Equal(t, time.Duration(0), time.Since(r.start))
		// Chunked: one advance per full chunk plus the one that caught up.
		require.Equal(t, 4, advances)
	})
}

func TestPacerUnboundedStaysResponsive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		// An endless drill: Run at Unbounded never blocks, so only the
		// chunked polling lets these control calls through.
		var forever func()
		forever = func() { s.After(time.Second, forever) }
		s.After(time.Second, forever)
		r := startPacer(t, s, PacerConfig{Speed: Unbounded})

		require.NoError(t, r.p.Pause())
		st := status(t, r.p)
		require.True(t, st.Paused)
		require.Positive(t, st.Events)
		require.Equal(t, time.Duration(st.Events)*time.Second, st.Now)
		require.Equal(t, st, status(t, r.p), "paused: nothing fires between two snapshots")

		require.NoError(t, r.p.Resume())
		// Every command first advances by up to a chunk, so this snapshot
		// must show progress.
		require.Greater(t, status(t, r.p).Events, st.Events, "resumed run fires again")
		require.ErrorIs(t, r.stop(), context.Canceled)
	})
}

func TestPacerDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		s.At(time.Hour, nil) // keeps the drill going
		r := startPacer(t, s, PacerConfig{Speed: 10})

		time.Sleep(100 * time.Millisecond)
		var sawNow time.Duration
		var fired []firing
		require.NoError(t, r.p.Do(func(s *Sim) {
			sawNow = s.Now()
			s.After(2*time.Second, func() { fired = append(fired, firing{s.Now(), time.Since(r.start)}) })
		}))
		require.Equal(t, time.Second, sawNow, "Do runs with the clock at the current target")
		require.Equal(t, 2, status(t, r.p).Pending)

		time.Sleep(199 * time.Millisecond)
		require.Equal(t, uint64(0), status(t, r.p).Events, "not due before 300ms wall")
		time.Sleep(time.Millisecond)
		require.Equal(t, uint64(1), status(t, r.p).Events)
		require.ErrorIs(t, r.stop(), context.Canceled)
		require.Equal(t, []firing{{3 * time.Second, 300 * time.Millisecond}}, fired)
	})
}

func TestPacerDoMovingClockReanchors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		s.At(time.Hour, nil)
		r := startPacer(t, s, PacerConfig{Speed: 1})
		time.Sleep(time.Second)
		// A Do that jumps the clock: pacing continues from there rather than
		// holding the clock until the wall catches up.
		require.NoError(t, r.p.Do(func(s *Sim) { s.RunUntil(time.Minute) }))
		time.Sleep(time.Second)
		require.Equal(t, time.Minute+time.Second, status(t, r.p).Now)
		require.ErrorIs(t, r.stop(), context.Canceled)
	})
}

func TestPacerContextEnds(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(context.Context) (context.Context, context.CancelFunc)
		want error
	}{
		{
			name: "cancel",
			ctx: func(parent context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(parent)
				time.AfterFunc(1500*time.Millisecond, cancel)
				return ctx, cancel
			},
			want: context.Canceled,
		},
		{
			name: "deadline",
			ctx: func(parent context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(parent, 1500*time.Millisecond)
			},
			want: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		for _, paused := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/paused=%v", tt.name, paused), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := New(Config{})
					s.At(time.Hour, nil)
					p, err := NewPacer(s, PacerConfig{Speed: 1, Paused: paused})
					require.NoError(t, err)
					ctx, cancel := tt.ctx(t.Context())
					defer cancel()
					start := time.Now()
					err = p.Run(ctx)
					require.ErrorIs(t, err, tt.want)
					require.Equal(t, 1500*time.Millisecond, time.Since(start), "Run returns as soon as ctx ends")
					require.Equal(t, 1, s.Pending())
				})
			})
		}
	}
}

func TestPacerStopped(t *testing.T) {
	calls := []struct {
		name string
		call func(p *Pacer) error
	}{
		{"Pause", (*Pacer).Pause},
		{"Resume", (*Pacer).Resume},
		{"Step", func(p *Pacer) error { _, err := p.Step(); return err }},
		{"SetSpeed", func(p *Pacer) error { return p.SetSpeed(2) }},
		{"Do", func(p *Pacer) error { return p.Do(func(*Sim) { panic("must not run") }) }},
		{"Status", func(p *Pacer) error { _, err := p.Status(); return err }},
		{"Run", func(p *Pacer) error { return p.Run(context.Background()) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{})
				s.At(time.Second, nil)
				p, err := NewPacer(s, PacerConfig{Speed: 1})
				require.NoError(t, err)
				require.NoError(t, p.Run(t.Context()))
				require.ErrorIs(t, c.call(p), ErrPacerStopped)
			})
		})
	}
}

func TestPacerRunTwiceConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		s.At(time.Second, nil)
		r := startPacer(t, s, PacerConfig{Speed: 1})
		synctest.Wait()
		require.ErrorContains(t, r.p.Run(t.Context()), "sim: pacer already running")
		require.NoError(t, <-r.errc, "the first Run is unaffected")
	})
}

func TestPacerCallsBeforeRunWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{})
		s.At(time.Second, nil)
		p, err := NewPacer(s, PacerConfig{Speed: 1, Paused: true})
		require.NoError(t, err)

		type result struct {
			st  PacerStatus
			err error
		}
		got := make(chan result, 1)
		go func() {
			st, err := p.Status()
			got <- result{st, err}
		}()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Status returned before Run started")
		default:
		}

		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- p.Run(ctx) }()
		res := <-got
		require.NoError(t, res.err)
		require.Equal(t, PacerStatus{Speed: 1, Paused: true, Pending: 1}, res.st)
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
	})
}

func TestPacerRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name    string
		speed   float64
		wantErr string // "" for a valid speed
	}{
		{"NaN", math.NaN(), "sim: pacer speed NaN out of range"},
		{"zero", 0, "sim: pacer speed 0 out of range"},
		{"negative", -1, "sim: pacer speed -1 out of range"},
		{"minus infinity", math.Inf(-1), "sim: pacer speed -Inf out of range"},
		{"below min", 0.09, "sim: pacer speed 0.09 out of range: want 0.1 to 10000"},
		{"above max", 10000.5, "sim: pacer speed 10000.5 out of range: want 0.1 to 10000"},
		{"min", MinSpeed, ""},
		{"max", MaxSpeed, ""},
		{"real time", 1, ""},
		{"unbounded", Unbounded, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPacer(New(Config{}), PacerConfig{Speed: tt.speed})
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NotNil(t, p)
			} else {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, p)
			}

			// SetSpeed checks the same way, before it needs the loop: on a
			// finished Pacer a valid speed gets ErrPacerStopped instead.
			p, err = NewPacer(New(Config{}), PacerConfig{Speed: 1})
			require.NoError(t, err)
			require.NoError(t, p.Run(t.Context()), "empty queue: the drill is over at once")
			err = p.SetSpeed(tt.speed)
			if tt.wantErr == "" {
				require.ErrorIs(t, err, ErrPacerStopped)
			} else {
				require.ErrorContains(t, err, tt.wantErr)
			}
		})
	}

	_, err := NewPacer(nil, PacerConfig{Speed: 1})
	require.ErrorContains(t, err, "sim: pacer needs a non-nil *Sim")
	_, err = NewPacer(New(Config{}), PacerConfig{Speed: 1, Tick: -time.Millisecond})
	require.ErrorContains(t, err, "sim: pacer tick -1ms is negative")
}
