package node

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fleetdrill/fleetdrill/internal/signals"
)

// scrape reads /metrics as a router does.
func scrape(t testing.TB, h *harness) map[string]*dto.MetricFamily {
	t.Helper()
	_, body := h.get(t, "/metrics")
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics: %v\n%s", err, body)
	}
	return mfs
}

// vllmValue is the value of a scraped vLLM series for testModel (a
// histogram's count), or -1 when it is absent.
func vllmValue(mfs map[string]*dto.MetricFamily, name string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
	for _, m := range mf.GetMetric() {
		found := false
		for _, lp := range m.GetLabel() {
			found = found || (lp.GetName() == "model_name" && lp.GetValue() == testModel)
		}
		if !found {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// The vLLM gauges follow the engine: a stream holding the only batch slot
// is running, a second request waits, the KV cache fills; when both are
// gone everything is back to 0.
func TestVLLMMetricsFollowLoad(t *testing.T) {
	for _, fl := range []Flavor{FlavorVLLM, FlavorVLLM08} {
		t.Run(string(fl), func(t *testing.T) {
			kvName := vllmKVUsage
			if fl == FlavorVLLM08 {
				kvName = vllmGPUKVUsage
			}
			h := start(t, Config{Flavor: fl, MaxBatch: 1})
			idle := scrape(t, h)
			for _, name := range []string{vllmRunning, vllmWaiting, kvName} {
				if v := vllmValue(idle, name); v != 0 {
					t.Errorf("idle: %s = %v, want 0 (served from the start)", name, v)
				}
			}

			// A holds the only batch slot for ~76 s of modelled decode:
			// the polls below are bounded by A's own stream.
			ctxA, cancelA := context.WithCancel(context.Background())
			defer cancelA()
			respA := h.postCtx(ctxA, t, "/v1/chat/completions", chatBody("a", 10000, true))
			if _, err := respA.Body.Read(make([]byte, 1)); err != nil { // A's first token: its prefill is done
				t.Fatal(err)
			}
			doneA := make(chan struct{})
			go func() {
				defer close(doneA)
				io.Copy(io.Discard, respA.Body)
				respA.Body.Close()
			}()
			doneB := make(chan int, 1)
			go func() {
				resp := h.post(t, "/v1/chat/completions", chatBody("b", 3, false))
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				doneB <- resp.StatusCode
			}()
			var last map[string]*dto.MetricFamily
			for {
				last = scrape(t, h)
				if vllmValue(last, vllmRunning) == 1 && vllmValue(last, vllmWaiting) == 1 && vllmValue(last, kvName) > 0 {
					break
				}
				select {
				case <-doneA:
					t.Fatalf("A's stream ended before /metrics showed A running and B waiting: running %v waiting %v %s %v",
						vllmValue(last, vllmRunning), vllmValue(last, vllmWaiting), kvName, vllmValue(last, kvName))
				case <-time.After(time.Millisecond): // the poll's pace, not a bound
				}
			}
			s := h.node.Stats()[0]
			if kv := vllmValue(last, kvName); kv > 1 || kv < 1/float64(s.KVCap) {
				t.Errorf("%s = %v, want in [1/%d, 1]", kvName, kv, s.KVCap)
			}

			// A's client leaves: B gets the slot and finishes.
			cancelA()
			<-doneA
			if code := <-doneB; code != http.StatusOK {
				t.Fatalf("B: status %d", code)
			}
			// Stopping the node after both left publishes the engine's
			// final state (the loop publishes after every wake-up).
			h.stop()
			for _, name := range []string{vllmRunning, vllmWaiting, kvName} {
				if v := series(t, h.reg, name, map[string]string{"model_name": testModel}, false); v != 0 {
					t.Errorf("after both left: %s = %v, want 0", name, v)
				}
			}
			if v := series(t, h.reg, vllmPrompt, nil, false); v != 2 {
				t.Errorf("%s = %v, want 2 (one token each for A and B)", vllmPrompt, v)
			}
		})
	}
}

// vLLM's token counters count what the engine processed: a client that
// has read its last token finds its tokens counted, with no wait.
func TestVLLMTokenCounters(t *testing.T) {
	h := start(t, Config{Flavor: FlavorVLLM, Speed: 4})
	resp := h.post(t, "/v1/chat/completions", map[string]any{"model": testModel, "stream": true, "max_tokens": 5,
		"x_fleetdrill": map[string]any{"input_tokens": 100}, "messages": []any{map[string]any{"content": "x"}}})
	if toks := tokensOf(t, readSSE(t, resp.Body)); len(toks) != 5 {
		t.Fatalf("stream: %d tokens, want 5", len(toks))
	}
	resp.Body.Close()
	resp = h.post(t, "/v1/completions", map[string]any{"model": testModel, "prompt": "x", "max_tokens": 7,
		"x_fleetdrill": map[string]any{"input_tokens": 50}})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	mfs := scrape(t, h)
	for name, want := range map[string]float64{vllmPrompt: 150, vllmGeneration: 12, vllmPreemptions: 0} {
		if got := vllmValue(mfs, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// A request's latencies are recorded when its handler returns, which
	// stop waits for.
	h.stop()
	if got := series(t, h.reg, vllmTTFT, map[string]string{"model_name": testModel, "engine": "0"}, false); got != 2 {
		t.Errorf("%s count = %v, want 2", vllmTTFT, got)
	}
	// In engine seconds, as the catalogue's time to first token.
	if got, want := series(t, h.reg, vllmTTFT, nil, true), series(t, h.reg, signals.TTFT.Name, nil, true); got != want {
		t.Errorf("%s sum = %v, want the catalogue's %v", vllmTTFT, got, want)
	}
}

// vllm:num_preemptions_total counts the engine's preemptions, as the
// catalogue's series does (see TestPreemptionsCounted for the overlap).
func TestVLLMPreemptions(t *testing.T) {
	h := start(t, Config{Flavor: FlavorVLLM, Speed: 2, KVTokens: 120, Pool: testPool, Region: testRegion})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp := h.post(t, "/v1/chat/completions", chatBody("0123456789012345678901234567890123456789", 40, false))
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	h.stop()
	got := series(t, h.reg, vllmPreemptions, map[string]string{"model_name": testModel}, false)
	if want := series(t, h.reg, signals.Preemptions.Name, nil, false); got != want || got == 0 {
		t.Errorf("%s = %v, want the catalogue's %v, > 0", vllmPreemptions, got, want)
	}
}

// The vLLM series carry vLLM's names, types and labels, the rest of the
// exposition passes promlint, and a flavor serves only its KV gauge.
func TestVLLMSeriesLint(t *testing.T) {
	for _, fl := range Flavors {
		t.Run(string(fl), func(t *testing.T) {
			h := start(t, Config{Flavor: fl, Speed: 4, Pool: testPool, Region: testRegion, Classes: []string{"interactive"}})
			classTraffic(t, h)
			mfs, err := h.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				// vLLM's names hold a colon; promlint reserves it for
				// recording rules. Anything else is ours to fix.
				if strings.HasPrefix(p.Metric, "vllm:") && p.Text == "metric names should not contain ':'" {
					continue
				}
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
			want := map[string]dto.MetricType{}
			if fl.vllm() {
				want = map[string]dto.MetricType{vllmRunning: dto.MetricType_GAUGE, vllmWaiting: dto.MetricType_GAUGE,
					vllmKVUsage: dto.MetricType_GAUGE, vllmPreemptions: dto.MetricType_COUNTER, vllmPrompt: dto.MetricType_COUNTER,
					vllmGeneration: dto.MetricType_COUNTER, vllmTTFT: dto.MetricType_HISTOGRAM}
				if fl == FlavorVLLM08 {
					delete(want, vllmKVUsage)
					want[vllmGPUKVUsage] = dto.MetricType_GAUGE
				}
			}
			for _, mf := range mfs {
				name := mf.GetName()
				if !strings.HasPrefix(name, "vllm:") {
					continue
				}
				typ, ok := want[name]
				if !ok {
					t.Errorf("%s served, want only %v", name, slices.Sorted(maps.Keys(want)))
					continue
				}
				delete(want, name)
				if mf.GetType() != typ {
					t.Errorf("%s: type %v, want %v", name, mf.GetType(), typ)
				}
				for _, m := range mf.GetMetric() {
					got := map[string]string{}
					for _, lp := range m.GetLabel() {
						got[lp.GetName()] = lp.GetValue()
					}
					if !reflect.DeepEqual(got, map[string]string{"model_name": testModel, "engine": "0"}) {
						t.Errorf("%s: labels %v, want model_name=%s engine=0", name, got, testModel)
					}
				}
			}
			for name := range want {
				t.Errorf("%s not served", name)
			}
		})
	}
}
