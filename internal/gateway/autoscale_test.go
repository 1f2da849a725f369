package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/signals"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// fakeProvisioner records the instances the gateway starts and stops.
type fakeProvisioner struct {
	mu      sync.Mutex
	started []string // pool/k, in order
	stopped []string
}

func (p *fakeProvisioner) Start(_ context.Context, pool string, k int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = append(p.started, fmt.Sprintf("%s/%d", pool, k))
	return nil
}

func (p *fakeProvisioner) Stop(_ context.Context, pool string, k int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = append(p.stopped, fmt.Sprintf("%s/%d", pool, k))
	return nil
}

func (p *fakeProvisioner) snapshot() (started, stopped []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.started), slices.Clone(p.stopped)
}

// autoscaleHarness serves the autoscale game day with only us-west's
// pool: one replica of one batch slot, room for four, and a queue scaler
// of one waiting request per replica. Four requests are held on it (one
// running, three queued) before the scalers start, so the first sync
// (10 s) asks for two more, granted after a 20 s delay and a 5 s load.
// Every backend is a fake that holds what it is sent; replicas are
// "started" by a fakeProvisioner.
type autoscaleHarness struct {
	*harness
	prov   *fakeProvisioner
	fakes  []*fake
	mu     sync.Mutex
	events []sched.ScalerEvent
}

func newAutoscaleHarness(t *testing.T, sets ...string) *autoscaleHarness {
	t.Helper()
	ah := &autoscaleHarness{prov: &fakeProvisioner{}}
	var usw []string
	for range 4 {
		f := newFake(t)
		f.mode.Store(modeBlock)
		ah.fakes = append(ah.fakes, f)
		usw = append(usw, f.srv.URL)
	}
	base := []string{"faults=[]", "pools.usw-h100-8b.replicas=1", "pools.usw-h100-8b.max_batch=1",
		"pools.usw-h100-8b.autoscale.min_replicas=1", "pools.usw-h100-8b.autoscale.target=1",
		"pools.usw-h100-8b.autoscale.max_replicas=4", "pools.usw-h100-8b.autoscale.sync_period=10s",
		"pools.usw-h100-8b.cold_start=5s", "pools.usw-h100-8b.acquisition.delay.mean=20s",
		"pools.usw-h100-8b.acquisition.retry_after=10s",
		// The held replica's attempts time out and open its breaker: with
		// the deadline check on, the core would refuse the requests bound
		// for the pool it has found dark at once (issue 36) rather than
		// queue them, and the scaler these tests drive would see no queue.
		"policy.admission.deadline_check=false"}
	ah.harness = newHarness(t, libraryScenario(t, "gameday-autoscale-stockout", append(base, sets...)...),
		map[string][]string{"usw-h100-8b": usw},
		func(c *Config) {
			c.Speed = 50
			c.Provisioner = ah.prov
			c.HoldAutoscale = true
			withQueueTimeout(time.Hour)(c)
			c.Keys = []Key{{"retail-us", keyRetail}}
			c.Observer = &Observer{Autoscale: func(_ time.Duration, ev sched.ScalerEvent) {
				ah.mu.Lock()
				defer ah.mu.Unlock()
				ah.events = append(ah.events, ev)
			}}
		})
	t.Cleanup(func() {
		for _, f := range ah.fakes {
			f.Release()
		}
	})
	for range 4 {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, ah.srv.URL+"/v1/chat/completions", strings.NewReader(streamBodyFor("llama-3.1-8b")))
			req.Header.Set("Authorization", "Bearer "+keyRetail)
			if resp, err := ah.srv.Client().Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	eventually(t, "three requests queued", func() bool { return ah.metric(signals.QueueDepth.Name, nil) == 3 })
	return ah
}

// start starts the scalers now.
func (ah *autoscaleHarness) start() { ah.gw.Autoscaling().Start(ah.gw.Now()) }

func (ah *autoscaleHarness) counts() sched.ReplicaCount {
	var c sched.ReplicaCount
	ah.gw.Autoscaling().Scalers(func(pool string, s *sched.Scaler, now time.Duration) {
		if pool == "usw-h100-8b" {
			c = s.Counts(now)
		}
	})
	return c
}

func (ah *autoscaleHarness) eventsOf(kind string) []sched.ScalerEvent {
	ah.mu.Lock()
	defer ah.mu.Unlock()
	var out []sched.ScalerEvent
	for _, ev := range ah.events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// A granted replica's instance is started once its provisioning delay has
// passed, and the core routes to it only once its model has loaded: no
// sooner, in model time, than the sync that asked for it plus the delay
// plus the load. The replicas beyond are never started, nor probed.
func TestAutoscaleStartsGrantedReplicas(t *testing.T) {
	ah := newAutoscaleHarness(t)
	ah.start()
	var granted uint64
	require.Eventually(t, func() bool {
		ah.gw.Autoscaling().Scalers(func(_ string, s *sched.Scaler, _ time.Duration) { granted = s.Tally().Granted })
		return granted > 0 && len(ah.eventsOf("replica-ready")) == int(granted)
	}, time.Minute, 10*time.Millisecond, "the replicas asked for at the first sync serve")
	assert.Equal(t, 1+int(granted), ah.counts().Serving)
	started, stopped := ah.prov.snapshot()
	var want []string
	for k := 1; k <= int(granted); k++ {
		want = append(want, fmt.Sprintf("usw-h100-8b/%d", k))
	}
	assert.Equal(t, want, started, "only the granted replicas are started")
	assert.Empty(t, stopped)
	for _, ev := range ah.eventsOf("replica-ready") {
		assert.GreaterOrEqual(t, ev.At, 10*time.Second+20*time.Second+5*time.Second, ev.Detail)
	}
	scale := ah.eventsOf("scale")
	require.NotEmpty(t, scale)
	assert.Contains(t, scale[0].Detail, fmt.Sprintf("scale up 1 → %d", 1+granted))
	assert.Equal(t, 10*time.Second, scale[0].At, "syncs fall on the scalers' clock")

	// The series: replicas by state, asks by outcome.
	assert.Equal(t, float64(1+granted), ah.metric(signals.AutoscaleReplicas.Name, map[string]string{"pool": "usw-h100-8b", "state": "serving"}))
	assert.Equal(t, float64(granted), ah.metric(signals.AutoscaleAsks.Name, map[string]string{"pool": "usw-h100-8b", "outcome": "granted"}))
	assert.Equal(t, 0.0, ah.metric(signals.AutoscaleAsks.Name, map[string]string{"pool": "usw-h100-8b", "outcome": "refused_stockout"}))
}

// Under a stockout the provider refuses the ask: no instance is started,
// the refusal is on the timeline and counted, and the pool asks again
// after its retry-after; once the stockout is removed the next ask is
// granted.
func TestAutoscaleStockoutStartsNothing(t *testing.T) {
	ah := newAutoscaleHarness(t)
	spec, err := faults.Parse("stockout pool=usw-h100-8b at=0s")
	require.NoError(t, err)
	remove, err := ah.gw.Autoscaling().InjectAcquisition([]string{"usw-h100-8b"}, spec)
	require.NoError(t, err)
	ah.start()
	require.Eventually(t, func() bool { return len(ah.eventsOf("refused")) >= 2 }, time.Minute, 10*time.Millisecond,
		"refused, and refused again at the retry")
	started, _ := ah.prov.snapshot()
	assert.Empty(t, started, "a refused replica is never started")
	refused := ah.eventsOf("refused")
	assert.Contains(t, refused[0].Detail, "replicas refused (stockout)")
	assert.GreaterOrEqual(t, refused[1].At-refused[0].At, 10*time.Second, "asked again after retry_after")
	assert.Equal(t, 1, ah.counts().Serving)
	assert.GreaterOrEqual(t, ah.metric(signals.AutoscaleAsks.Name, map[string]string{"pool": "usw-h100-8b", "outcome": "refused_stockout"}), 2.0)

	remove()
	require.Eventually(t, func() bool { return ah.counts().Serving >= 2 }, time.Minute, 10*time.Millisecond,
		"granted once the stockout is over")
	started, _ = ah.prov.snapshot()
	assert.NotEmpty(t, started)
}

// The asks' outcome label values are "granted" and "refused_" with each
// reason the scaler refuses for, in order.
func TestAutoscaleOutcomesNameTheReasons(t *testing.T) {
	want := []string{"granted"}
	for _, why := range sched.RefusalReasons {
		want = append(want, "refused_"+why)
	}
	assert.Equal(t, want, signals.AutoscaleOutcomes)
}
