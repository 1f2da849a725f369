package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
	"github.com/fleetdrill/fleetdrill/internal/promtest"
)

// Soak sizes. soakIdle + soakSlow + the clients' own connections must stay
// under the process's fd limit (ulimit -n): each loopback connection costs
// two fds here, its client's and the server's end.
const (
	soakIdle       = 2000        // idle keep-alive connections, after one request each
	soakSlow       = 200         // slow-body clients: headers and a few bytes, then nothing
	soakMaxBodies  = 100         // concurrent bodies of exactly MaxBodyBytes
	soakOverBodies = 20          // bodies over MaxBodyBytes (413)
	soakNormal     = 20000       // small requests
	soakConc       = 64          // their concurrency
	soakPause      = time.Second // the backend paused, mid-way
)

// BenchmarkSoak serves the gateway as fleetdrill gateway does (httpguard's
// server and listener, with short timeouts) on loopback in front of a fake
// backend, and runs hostile load against it at once: soakIdle idle
// keep-alive connections, soakSlow slow-body clients, soakMaxBodies
// maximum-size bodies and soakOverBodies bodies over the limit, and
// soakNormal small requests soakConc at a time, with the backend paused
// for a stretch mid-way. Then it waits (at most 10× the idle timeout) for
// the server to close every idle and slow connection, and reports the peak
// heap and RSS (the whole process: clients, gateway and backend share it),
// the goroutines and fds left over, the requests the gateway counted minus
// those sent (less slow-body requests the server dropped unanswered before
// the handler, reported apart), and the connections still open. It fails when a request
// went uncounted (or was counted twice) or a connection stayed open.
//
//	go test -run '^$' -bench BenchmarkSoak -benchtime 1x ./internal/gateway/
func BenchmarkSoak(b *testing.B) {
	for range b.N {
		soak(b)
	}
	b.ReportMetric(0, "ns/op")
}

func soak(b *testing.B) {
	lim := httpguard.Defaults()
	lim.ReadHeaderTimeout = time.Second
	lim.BodyTimeout = time.Second
	lim.IdleTimeout = 2 * time.Second
	const maxBody = DefaultMaxBodyBytes

	us := newFake(b)
	reg := prometheus.NewPedanticRegistry()
	gw, err := New(Config{Scenario: testScenario(b, "pools.use-h100-8b.max_batch=4096", "policy.admission.queue_limit=100000"),
		Backends: map[string][]string{"use-h100-8b": {us.srv.URL}}, Registry: reg, Seed: 1,
		Keys:   []Key{{"bank-eu", keyEU}, {"global", keyGlobal}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), QueueTimeout: 5 * time.Second,
		MaxBodyBytes: maxBody})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := lim.Server(gw.Handler())
	served := make(chan struct{})
	go func() { _ = srv.Serve(lim.Listener(ln)); close(served) }()
	defer func() {
		_ = srv.Close()
		<-served
		gw.Close()
	}()
	addr := ln.Addr().String()
	url := "http://" + addr + "/v1/chat/completions"

	var sent, unanswered atomic.Int64
	var statusMu sync.Mutex
	statuses := map[string]int{}
	count := func(what string) {
		statusMu.Lock()
		statuses[what]++
		statusMu.Unlock()
	}
	small := chatBody(false, strings.Repeat("lorem ipsum ", 40))
	normal := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: soakConc, MaxIdleConns: soakConc}}
	post := func(c *http.Client, body string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+keyGlobal)
		sent.Add(1)
		resp, err := c.Do(req)
		if err != nil {
			count(fmt.Sprintf("error(%d bytes): %v", len(body), err))
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		count(fmt.Sprintf("%d(%d bytes)", resp.StatusCode, len(body)))
	}
	post(normal, small) // warm up: the gateway's connections to the backend
	normal.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)

	runtime.GC()
	goBefore, fdsBefore := runtime.NumGoroutine(), countFDs()

	// Peak memory, sampled every 50ms.
	var peakHeap, peakSys uint64
	stopSample := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peakHeap, peakSys = max(peakHeap, m.HeapInuse), max(peakSys, m.Sys)
			select {
			case <-stopSample:
				return
			case <-t.C:
			}
		}
	}()

	// Raw connections the server must close: idle and slow ones.
	var open atomic.Int64
	var connMu sync.Mutex
	var conns []net.Conn
	var held sync.WaitGroup
	hold := func(r io.Reader) { // read until the server closes the connection
		defer held.Done()
		_, _ = io.Copy(io.Discard, r)
		open.Add(-1)
	}
	dial := func() (net.Conn, bool) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			count("dial-error")
			return nil, false
		}
		open.Add(1)
		connMu.Lock()
		conns = append(conns, c)
		connMu.Unlock()
		held.Add(1)
		return c, true
	}
	raw := func(body string, cl int) string {
		return fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, keyGlobal, cl, body)
	}

	var load sync.WaitGroup
	// Idle keep-alive connections, 32 dialing at once.
	idleNext := atomic.Int64{}
	for range 32 {
		load.Go(func() {
			for idleNext.Add(1) <= soakIdle {
				c, ok := dial()
				if !ok {
					continue
				}
				sent.Add(1)
				if _, err := io.WriteString(c, raw(small, len(small))); err != nil {
					count("idle-error")
					go hold(c)
					continue
				}
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					count("idle-error")
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					count("idle-" + strconv.Itoa(resp.StatusCode))
				}
				go hold(br)
			}
		})
	}
	// Slow-body clients.
	load.Go(func() {
		for range soakSlow {
			c, ok := dial()
			if !ok {
				continue
			}
			sent.Add(1)
			_, _ = io.WriteString(c, raw(`{"mo`, 1000))
			go func() {
				// Its answer: 400 once the body deadline cuts it, or none
				// when the server dropped it before the gateway saw it (its
				// header deadline passed while this process was starved).
				br := bufio.NewReader(c)
				if resp, err := http.ReadResponse(br, nil); err != nil {
					unanswered.Add(1)
					count("slow-unanswered")
				} else {
					resp.Body.Close()
					count("slow-" + strconv.Itoa(resp.StatusCode))
				}
				hold(br)
			}()
		}
	})
	// Maximum-size bodies at once, and some over the limit.
	full := chatBody(false, "")
	full = chatBody(false, strings.Repeat("a", maxBody-len(full)))
	if len(full) != maxBody {
		b.Fatalf("full body %d bytes, want %d", len(full), maxBody)
	}
	over := chatBody(false, strings.Repeat("a", maxBody))
	bulk := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: soakMaxBodies}}
	for i := range soakMaxBodies + soakOverBodies {
		load.Go(func() {
			if i < soakMaxBodies {
				post(bulk, full)
			} else {
				post(bulk, over)
			}
		})
	}
	// Normal requests, with the backend paused for soakPause from the 40%
	// mark: every worker is stuck then, so a timer resumes it.
	var next atomic.Int64
	for range soakConc {
		load.Go(func() {
			for {
				i := next.Add(1)
				if i > soakNormal {
					return
				}
				if i == soakNormal*4/10 {
					us.mode.Store(modeBlock)
					time.AfterFunc(soakPause, func() { us.Release(); us.mode.Store(modeOK) })
				}
				post(normal, small)
			}
		})
	}
	load.Wait()
	normal.CloseIdleConnections()
	bulk.CloseIdleConnections()

	// Every idle and slow connection must be closed by the server.
	bound := 10 * lim.IdleTimeout
	deadline := time.Now().Add(bound)
	for open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stillOpen := open.Load()
	connMu.Lock()
	for _, c := range conns {
		_ = c.Close()
	}
	connMu.Unlock()
	held.Wait()

	// The gateway counts a request after answering it: give it a moment.
	want := float64(sent.Load() - unanswered.Load())
	counted := func() float64 { return promtest.Value(b, reg, "fleetdrill_gateway_requests_total", nil, false) }
	for end := time.Now().Add(5 * time.Second); counted() != want && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	got := counted()
	// What is left includes the gateway's pool of idle connections to the
	// backend (grown while it was paused): 2 fds and 3 goroutines each, all
	// in this process. Count it, then close it, and count what is left.
	time.Sleep(200 * time.Millisecond) // let closed connections' goroutines end
	goPooled, fdsPooled := runtime.NumGoroutine(), countFDs()
	us.srv.CloseClientConnections()
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	goAfter, fdsAfter := runtime.NumGoroutine(), countFDs()
	close(stopSample)
	<-sampled

	rss := float64(vmHWM())
	if rss == 0 { // no /proc: the runtime's own peak
		rss = float64(peakSys)
	}
	if got != want {
		for _, reason := range []string{refuseBadBody, refuseTooLarge, refuseBodyBudget, refuseUnauthorized} {
			b.Logf("refused %s: %v", reason, promtest.Value(b, reg, "fleetdrill_gateway_refused_total", map[string]string{"reason": reason}, false))
		}
		b.Logf("backend hits %d", us.hits.Load())
	}
	b.Logf("sent %d, counted %v; answers %v; still open after %v: %d; goroutines %d -> %d (%d with the backend pool), fds %d -> %d (%d)",
		sent.Load(), got, statuses, bound, stillOpen, goBefore, goAfter, goPooled, fdsBefore, fdsAfter, fdsPooled)
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MB")
	b.ReportMetric(rss/(1<<20), "peak-rss-MB")
	b.ReportMetric(float64(goAfter-goBefore), "goroutines-after")
	b.ReportMetric(float64(fdsAfter-fdsBefore), "fds-after")
	b.ReportMetric(float64(fdsPooled-fdsBefore), "fds-after-pooled")
	b.ReportMetric(got-want, "counted-minus-sent")
	b.ReportMetric(float64(stillOpen), "conns-open-after")
	b.ReportMetric(float64(unanswered.Load()), "slow-unanswered")
	if got != want {
		b.Errorf("the gateway counted %v requests, %v sent (and answered)", got, want)
	}
	if stillOpen != 0 {
		b.Errorf("%d idle or slow connections still open %v after the load", stillOpen, bound)
	}
}

// countFDs is the number of open fds of the process (-1 without /proc).
func countFDs() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// vmHWM is the process's peak resident set in bytes (0 without /proc).
func vmHWM() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
