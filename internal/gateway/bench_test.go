package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"

	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// BenchmarkOverhead measures the latency the gateway adds: b.N requests at
// a fixed rate of 1,000 per second (open loop) straight to a fake backend on
// loopback, then b.N through the standard library's reverse proxy (the
// least any proxy adds: one more HTTP hop on loopback, on the same cores),
// then b.N through the gateway to the same backend. It reports the median
// and p99 of each and the gateway's differences from the direct path and
// from the bare proxy, in microseconds (DDSketch, 1% relative accuracy).
// Run it on two cores:
//
//	go test ./internal/gateway -run '^$' -bench Overhead -cpu 2 -benchtime 5000x
func BenchmarkOverhead(b *testing.B) {
	us := newFake(b)
	h := newHarness(b, testScenario(b, "pools.use-h100-8b.max_batch=4096", "policy.admission.queue_limit=100000"),
		map[string][]string{"use-h100-8b": {us.srv.URL}})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxIdleConns: 2048}}
	defer client.CloseIdleConnections()
	body := chatBody(false, strings.Repeat("lorem ipsum ", 40))

	phase := func(url, key string) *ddsketch.DDSketch {
		sk, err := ddsketch.NewDefaultDDSketch(0.01)
		if err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		send := func() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if key != "" { // a key must never reach a backend: the fake refuses one
				req.Header.Set("Authorization", "Bearer "+key)
			}
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			d := time.Since(t0)
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
			mu.Lock()
			_ = sk.Add(float64(d.Microseconds()) + float64(d.Nanoseconds()%1000)/1000)
			mu.Unlock()
		}
		for range 50 { // warm the connections
			send()
		}
		sk.Clear()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for range b.N {
			<-tick.C
			wg.Go(send)
		}
		wg.Wait()
		return sk
	}
	q := func(sk *ddsketch.DDSketch, p float64) float64 {
		v, err := sk.GetValueAtQuantile(p)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	target, err := url.Parse(us.srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256}
	bare := httptest.NewServer(rp)
	defer bare.Close()
	b.ResetTimer()
	direct := phase(us.srv.URL+"/v1/chat/completions", "")
	proxied := phase(bare.URL+"/v1/chat/completions", "")
	via := phase(h.srv.URL+"/v1/chat/completions", keyGlobal)
	b.StopTimer()
	b.ReportMetric(q(direct, 0.5), "direct-p50-µs")
	b.ReportMetric(q(direct, 0.99), "direct-p99-µs")
	b.ReportMetric(q(proxied, 0.5), "proxy-p50-µs")
	b.ReportMetric(q(proxied, 0.99), "proxy-p99-µs")
	b.ReportMetric(q(via, 0.5), "gateway-p50-µs")
	b.ReportMetric(q(via, 0.99), "gateway-p99-µs")
	b.ReportMetric(q(via, 0.5)-q(direct, 0.5), "added-p50-µs")
	b.ReportMetric(q(via, 0.99)-q(direct, 0.99), "added-p99-µs")
	b.ReportMetric(q(via, 0.99)-q(proxied, 0.99), "over-proxy-p99-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkInflightMemory measures the memory (heap + stacks in use) a
// request held in flight costs in the gateway: n requests parked in a
// blocking backend through the gateway, minus the same n parked directly
// (the client's and the fake backend's share).
//
//	go test ./internal/gateway -run '^$' -bench InflightMemory -cpu 2 -benchtime 1x
func BenchmarkInflightMemory(b *testing.B) {
	const n = 1000
	measure := func(through bool) float64 {
		us := newFake(b)
		us.mode.Store(modeBlock)
		url, key := us.srv.URL+"/v1/chat/completions", ""
		var h *harness
		if through {
			h = newHarness(b, testScenario(b, "pools.use-h100-8b.max_batch=4096", "policy.admission.queue_limit=100000"),
				map[string][]string{"use-h100-8b": {us.srv.URL}})
			url, key = h.srv.URL+"/v1/chat/completions", keyGlobal
		}
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * n, MaxConnsPerHost: 0}}
		defer client.CloseIdleConnections()
		body := chatBody(false, strings.Repeat("lorem ipsum ", 40))
		before := inUse()
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				if key != "" {
					req.Header.Set("Authorization", "Bearer "+key)
				}
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		for range n {
			<-us.started
		}
		during := inUse()
		us.Release()
		wg.Wait()
		if h != nil {
			h.close()
		}
		return float64(during-before) / n
	}
	var direct, via float64
	for range b.N {
		direct = measure(false)
		via = measure(true)
	}
	b.ReportMetric(direct, "direct-B/inflight")
	b.ReportMetric(via, "gateway+direct-B/inflight")
	b.ReportMetric(via-direct, "gateway-B/inflight")
	b.ReportMetric(0, "ns/op")
}

func inUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
