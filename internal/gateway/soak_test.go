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
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
)

// Soak sizes. soakIdle + soakSlow + the clients' own connections must stay
// under the process's fd limit (ulimit -n): each loopback connection costs
// two fds here, its client's and the server's end.
const (
	soakIdle       = 5000        // idle keep-alive connections, after one request each
	soakSlow       = 200         // slow-body clients: headers and a few bytes, then nothing
	soakMaxBodies  = 200         // concurrent bodies of exactly MaxBodyBytes
	soakOverBodies = 20          // bodies over MaxBodyBytes (413)
	soakNormal     = 20000       // small requests
	soakConc       = 64          // their concurrency
	soakPause      = time.Second // the backend paused, mid-way
)

// BenchmarkSoak serves the gateway as fleetdrill gateway does (httpguard's
// server and listener, with short timeouts, and the soft memory limit), in
// a process of its own (TestSoakGatewayProcess), in front of a fake backend
// in this one, and runs hostile load against it at once: soakIdle idle
// keep-alive connections, soakSlow slow-body clients, soakMaxBodies
// maximum-size bodies and soakOverBodies bodies over the limit, and
// soakNormal small requests soakConc at a time, with the backend paused
// for a stretch mid-way. Then it waits (at most 10× the idle timeout) for
// the server to close every idle and slow connection, and reports the
// gateway process's resident set before, at its peak and after, the
// goroutines and fds it has left over, the requests it counted minus
// those sent (less slow-body requests the server dropped unanswered before
// the handler, reported apart), and the connections still open. It fails
// when a request went uncounted (or was counted twice) or a connection
// stayed open.
//
//	go test -run '^$' -bench BenchmarkSoak -benchtime 1x ./internal/gateway/
func BenchmarkSoak(b *testing.B) {
	for range b.N {
		soak(b)
	}
	b.ReportMetric(0, "ns/op")
}

// soakLimits are the gateway's listener limits in the soak: the defaults
// with short timeouts, so the idle and slow connections close within the
// run.
func soakLimits() httpguard.Limits {
	lim := httpguard.Defaults()
	lim.ReadHeaderTimeout = time.Second
	lim.BodyTimeout = time.Second
	lim.IdleTimeout = 2 * time.Second
	lim.MaxConnsPerIP = 0 // every client here is 127.0.0.1
	return lim
}

// soakChildEnv names the backend URL of BenchmarkSoak's gateway process.
const soakChildEnv = "FLEETDRILL_SOAK_BACKEND"

// TestSoakGatewayProcess is BenchmarkSoak's gateway, in a process of its
// own so that its resident set, fds and goroutines are the gateway's
// alone: served as fleetdrill gateway serves it (httpguard, the soft memory
// limit of the default body budget), in front of the backend at
// $FLEETDRILL_SOAK_BACKEND, until its stdin closes. It prints its address.
// Run by itself it skips.
func TestSoakGatewayProcess(t *testing.T) {
	backend := os.Getenv(soakChildEnv)
	if backend == "" {
		t.Skip("BenchmarkSoak's gateway process: runs only as its child")
	}
	debug.SetMemoryLimit(SoftMemoryLimit(DefaultMaxInflightBodyBytes))
	lim := soakLimits()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	gw, err := New(Config{Scenario: testScenario(t, "pools.use-h100-8b.max_batch=4096", "policy.admission.queue_limit=100000", "policy.admission.queue_timeout=5s"),
		Backends: map[string][]string{"use-h100-8b": {backend}}, Registry: reg, Seed: 1,
		Keys:   []Key{{"bank-eu", keyEU}, {"global", keyGlobal}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := lim.Server(gw.Handler())
	go func() { _ = srv.Serve(lim.Listener(ln)) }()
	fmt.Printf("soak-gateway %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

// gatewayProcess is BenchmarkSoak's gateway process, seen from outside.
type gatewayProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	addr  string
}

// startGatewayProcess starts TestSoakGatewayProcess in front of backend.
func startGatewayProcess(b *testing.B, backend string) *gatewayProcess {
	cmd := exec.Command(os.Args[0], "-test.run=^TestSoakGatewayProcess$", "-test.v")
	cmd.Env = append(os.Environ(), soakChildEnv+"="+backend)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &gatewayProcess{cmd: cmd, stdin: stdin}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "soak-gateway "); ok {
			p.addr = addr
			break
		}
	}
	if p.addr == "" {
		p.stop()
		b.Fatal("the gateway process printed no address")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return p
}

func (p *gatewayProcess) stop() {
	_ = p.stdin.Close()
	_ = p.cmd.Wait()
}

// status is a field of the process's /proc status in bytes (VmHWM: its
// peak resident set; VmRSS: its resident set now); 0 without /proc.
func (p *gatewayProcess) status(field string) int64 {
	return procStatus(strconv.Itoa(p.cmd.Process.Pid), field)
}

// fds is the number of fds the process has open (-1 without /proc).
func (p *gatewayProcess) fds() int {
	return countFDs(strconv.Itoa(p.cmd.Process.Pid))
}

// metric sums the samples of a series in the process's /metrics (-1 when
// it cannot be read).
func (p *gatewayProcess) metric(name string) float64 {
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func soak(b *testing.B) {
	lim := soakLimits()
	const maxBody = DefaultMaxBodyBytes

	us := newFake(b)
	gp := startGatewayProcess(b, us.srv.URL)
	defer gp.stop()
	addr := gp.addr
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

	goBefore, fdsBefore, rssBefore := gp.metric("go_goroutines"), gp.fds(), gp.status("VmRSS")

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
	counted := func() float64 { return gp.metric("fleetdrill_gateway_requests_total") }
	for end := time.Now().Add(5 * time.Second); counted() != want && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	got := counted()
	// What is left includes the gateway's pool of idle connections to the
	// backend (grown while it was paused): an fd and 2 goroutines each.
	// Count it, then close it, and count what is left.
	time.Sleep(200 * time.Millisecond) // let closed connections' goroutines end
	goPooled, fdsPooled := gp.metric("go_goroutines"), gp.fds()
	us.srv.CloseClientConnections()
	time.Sleep(200 * time.Millisecond)
	goAfter, fdsAfter := gp.metric("go_goroutines"), gp.fds()
	// The resident set back within 20% of where it started: how long it
	// takes from the end of the load, up to 10s.
	rssPeak := gp.status("VmHWM")
	settle := time.Now()
	for end := settle.Add(10 * time.Second); gp.status("VmRSS") > rssBefore*12/10 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
	}
	settled, rssAfter := time.Since(settle), gp.status("VmRSS")
	if got != want {
		b.Logf("backend hits %d", us.hits.Load())
	}
	b.Logf("sent %d, counted %v; answers %v; still open after %v: %d; goroutines %v -> %v (%v with the backend pool), fds %d -> %d (%d); RSS %d MB -> peak %d MB -> %d MB",
		sent.Load(), got, statuses, bound, stillOpen, goBefore, goAfter, goPooled, fdsBefore, fdsAfter, fdsPooled,
		rssBefore>>20, rssPeak>>20, rssAfter>>20)
	b.ReportMetric(float64(rssBefore)/(1<<20), "rss-before-MB")
	b.ReportMetric(float64(rssPeak)/(1<<20), "peak-rss-MB")
	b.ReportMetric(float64(rssAfter)/(1<<20), "rss-after-MB")
	b.ReportMetric(settled.Seconds(), "rss-settle-s")
	b.ReportMetric(goAfter-goBefore, "goroutines-after")
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

// countFDs is the number of open fds of process pid ("self": this one);
// -1 without /proc.
func countFDs(pid string) int {
	es, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// procStatus is a field of process pid's /proc status, in bytes (0
// without /proc).
func procStatus(pid, field string) int64 {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(string(rest)), " kB"), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
