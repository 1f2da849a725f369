package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/internal/promtest"
	"github.com/fleetdrill/fleetdrill/internal/signals"
)

// heldBackend is an in-process upstream (a Config.Transport): it answers
// GETs (health probes) 200 at once, and each completion with a streamed
// 200 whose body the test writes, so a request can be held before its
// first token for as long as the test likes, on synctest's clock.
type heldBackend struct {
	mu      sync.Mutex
	bodies  []*io.PipeWriter // per completion, in arrival order
	started chan struct{}    // one per completion
}

func (b *heldBackend) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	if r.Method == http.MethodGet {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
	}
	pr, pw := io.Pipe()
	go func() { <-r.Context().Done(); pr.CloseWithError(r.Context().Err()) }()
	b.mu.Lock()
	b.bodies = append(b.bodies, pw)
	b.mu.Unlock()
	b.started <- struct{}{}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: r}, nil
}

// write sends the ith completion's next event; end closes it.
func (b *heldBackend) write(i int, event string, end bool) {
	b.mu.Lock()
	pw := b.bodies[i]
	b.mu.Unlock()
	go func() {
		_, _ = io.WriteString(pw, event)
		if end {
			_ = pw.Close()
		}
	}()
}

// scrapeGauge reads gauge name{class} from the gateway's /metrics in the
// Prometheus text exposition, as a scraper does.
func scrapeGauge(t *testing.T, gw *Gateway, name, class string) float64 {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	rec := httptest.NewRecorder()
	MetricsHandler(gw.Registry()).ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(rec.Body)
	require.NoError(t, err)
	mf, ok := mfs[name]
	require.True(t, ok, "%s not exposed", name)
	require.Equal(t, dto.MetricType_GAUGE, mf.GetType(), name)
	for _, m := range mf.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "class" && lp.GetValue() == class {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("%s{class=%q} not exposed", name, class)
	return 0
}

// A request counts as waiting from its arrival until its answer's first
// bytes: while dispatched to a backend that has not answered, and while
// queued behind another; the oldest's age is model time (wall × speed).
// Its first token ends its wait though its answer goes on.
func TestWaitingForFirstToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const speed = 4
		be := &heldBackend{started: make(chan struct{}, 8)}
		gw, err := New(Config{Scenario: testScenario(t, "pools.use-h100-8b.max_batch=1",
			"policy.health.probe_interval=1h", "policy.health.timeout=1h", "policy.admission.queue_timeout=1h"),
			Backends: map[string][]string{"use-h100-8b": {"http://backend.test"}}, Registry: prometheus.NewPedanticRegistry(),
			Seed: 1, Keys: []Key{{"global", keyGlobal}}, Transport: be, Speed: speed})
		require.NoError(t, err)
		defer gw.Close()
		answers := make(chan *httptest.ResponseRecorder, 2)
		post := func() {
			req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody(true, "x")))
			req.Header.Set("Authorization", "Bearer "+keyGlobal)
			req.Header.Set("X-Fleetdrill-Class", "interactive")
			go func() {
				rec := httptest.NewRecorder()
				gw.Handler().ServeHTTP(rec, req)
				answers <- rec
			}()
		}
		gauges := func() (float64, float64) {
			t.Helper()
			return scrapeGauge(t, gw, signals.WaitingRequests.Name, "interactive"),
				scrapeGauge(t, gw, signals.OldestWaiting.Name, "interactive")
		}
		state := func(want float64, wantOldest time.Duration, what string) {
			t.Helper()
			synctest.Wait()
			n, oldest := gauges()
			assert.Equal(t, want, n, "%s: waiting", what)
			assert.Equal(t, wantOldest.Seconds(), oldest, "%s: oldest", what)
			ws := gw.Waiting()
			require.Len(t, ws, 1)
			assert.Equal(t, ClassWaiting{Class: "interactive", Count: int(want), Oldest: wantOldest, Ages: ws[0].Ages}, ws[0], what)
			// Every request here is one tenant's: it waits as the class does.
			var total int
			for _, tw := range gw.TenantsWaiting() {
				total += tw.Count
				if tw.Count > 0 {
					assert.Equal(t, wantOldest, tw.Oldest, "%s: tenant %s's oldest", what, tw.Tenant)
				}
			}
			assert.Equal(t, int(want), total, "%s: tenants' waiting", what)
		}
		state(0, 0, "idle")

		post() // A: dispatched, its backend silent
		<-be.started
		time.Sleep(2 * time.Second)
		state(1, 2*speed*time.Second, "A dispatched, no first token")
		post() // B: queued behind A (one replica, one slot)
		time.Sleep(time.Second)
		state(2, 3*speed*time.Second, "A dispatched, B queued")
		assert.Equal(t, []time.Duration{3 * speed * time.Second, speed * time.Second}, gw.Waiting()[0].Ages, "oldest first")

		be.write(0, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n", false)
		synctest.Wait()
		time.Sleep(time.Second)
		state(1, 2*speed*time.Second, "A streaming, B queued")

		be.write(0, "data: [DONE]\n\n", true) // A ends; B is dispatched
		<-be.started
		time.Sleep(time.Second)
		state(1, 3*speed*time.Second, "B dispatched, no first token")
		be.write(1, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\ndata: [DONE]\n\n", true)
		for range 2 {
			rec := <-answers
			assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		}
		state(0, 0, "both answered")
	})
}

// A stream's answer is whole at its [DONE]: the gateway ends the attempt
// there, completed, without waiting for the backend to close its side
// (a client that closes at [DONE] must not turn a whole answer into a
// cancelled one), even when the marker comes split across two writes.
func TestStreamEndsAtDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		be := &heldBackend{started: make(chan struct{}, 8)}
		reg := prometheus.NewPedanticRegistry()
		gw, err := New(Config{Scenario: testScenario(t, "policy.health.probe_interval=1h", "policy.health.timeout=1h"),
			Backends: map[string][]string{"use-h100-8b": {"http://backend.test"}}, Registry: reg,
			Seed: 1, Keys: []Key{{"global", keyGlobal}}, Transport: be, Speed: 1})
		require.NoError(t, err)
		defer gw.Close()
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody(true, "x")))
		req.Header.Set("Authorization", "Bearer "+keyGlobal)
		req.Header.Set("X-Fleetdrill-Class", "interactive")
		answered := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			rec := httptest.NewRecorder()
			gw.Handler().ServeHTTP(rec, req)
			answered <- rec
		}()
		<-be.started
		be.write(0, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DO", false)
		synctest.Wait()
		be.write(0, "NE]\n\n", false) // and the backend never closes
		rec := <-answered
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Contains(t, rec.Body.String(), "data: [DONE]")
		assert.Equal(t, "completed", rec.Header().Get("X-Fleetdrill-Outcome"))
		assert.Equal(t, 1.0, promtest.Value(t, reg, signals.Requests.Name, map[string]string{"outcome": "completed"}, false))
		be.write(0, "", true)
	})
}

// The marker is found wherever the stream's writes split it, and nowhere
// else: in one chunk, across two, across many one-byte chunks.
func TestDoneMarker(t *testing.T) {
	stream := "data: {\"x\":1}\n\ndata: [DONE]\n\n"
	at := strings.Index(stream, "[DONE]") + len("[DONE]") // where the marker ends
	for size := 1; size <= len(stream); size++ {
		var d doneMarker
		seen := -1
		for i := 0; i < len(stream) && seen < 0; i += size {
			if d.seen([]byte(stream[i:min(i+size, len(stream))])) {
				seen = min(i+size, len(stream))
			}
		}
		require.GreaterOrEqual(t, seen, at, "chunks of %d: not before the marker's end", size)
		require.Less(t, seen, at+size, "chunks of %d: in the chunk that ends it", size)
	}
	var d doneMarker
	for _, c := range []string{"data: [DON", "E", "data: [DONF]", "[DONE]"} {
		require.False(t, d.seen([]byte(c)), "no marker in %q", c)
	}
}
