package node

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fleetdrill/fleetdrill/internal/httpguard"
)

// burstChildEnv holds the in-flight body budget of BenchmarkBodyBurst's node
// process, in bytes ("0": the default, with its soft memory limit; else
// that budget and no memory limit, the node without its bounds).
const burstChildEnv = "FLEETDRILL_BURST_BUDGET"

// TestBurstNodeProcess is BenchmarkBodyBurst's node, in a process of its
// own so that its resident set is the node's alone: served as fleetdrill
// node serves it (httpguard's defaults, the default body limits and the
// soft memory limit of the default budget), until its stdin closes. It
// prints its address. Run by itself it skips.
func TestBurstNodeProcess(t *testing.T) {
	env := os.Getenv(burstChildEnv)
	if env == "" {
		t.Skip("BenchmarkBodyBurst's node process: runs only as its child")
	}
	budget, err := strconv.ParseInt(env, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Models: []Model{{Name: testModel, Profile: testProfile(t)}}, Speed: 100, MaxInflightBodyBytes: budget}
	if budget == 0 {
		debug.SetMemoryLimit(httpguard.SoftMemoryLimit(DefaultMaxInflightBodyBytes))
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	lim := httpguard.Defaults()
	lim.MaxConnsPerIP = 0 // every client here is 127.0.0.1
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := lim.Server(n.Handler())
	go func() { _ = srv.Serve(lim.Listener(ln)) }()
	fmt.Printf("burst-node %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
}

// BenchmarkBodyBurst measures a node process's peak resident set (VmHWM)
// under the tester's burst: 60 clients at once, each posting a 15 MB chat
// body (one long message), with the node's default body limits and soft
// memory limit (budget=default), and without them (budget=1GiB: the
// in-flight budget too large to refuse any, no memory limit) for
// comparison. It reports the peak and the answers by status; a body over
// the budget is a 429 (or its connection closed before the client finished
// writing it).
//
//	go test -run '^$' -bench BodyBurst -benchtime 1x ./internal/node/
func BenchmarkBodyBurst(b *testing.B) {
	const clients, size = 60, 15 << 20
	// The length stated (x_fleetdrill) fits the model: a 15 MB prompt's
	// estimate would be refused as past its context.
	body := []byte(`{"model":"` + testModel + `","max_tokens":2,"x_fleetdrill":{"input_tokens":100},"messages":[{"role":"user","content":"` +
		strings.Repeat("lorem ipsum ", size/12) + `"}]}`)
	for _, bc := range []struct {
		name   string
		budget int64
	}{{"budget=default", 0}, {"budget=1GiB", 1 << 30}} {
		b.Run(bc.name, func(b *testing.B) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBurstNodeProcess$", "-test.v")
			cmd.Env = append(os.Environ(), burstChildEnv+"="+strconv.FormatInt(bc.budget, 10))
			cmd.Stderr = os.Stderr
			stdin, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
			addr := ""
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if a, ok := strings.CutPrefix(sc.Text(), "burst-node "); ok {
					addr = a
					break
				}
			}
			if addr == "" {
				b.Fatal("the node process printed no address")
			}
			go func() { _, _ = io.Copy(io.Discard, out) }()
			pid := strconv.Itoa(cmd.Process.Pid)
			before := procStatus(pid, "VmRSS")

			var mu sync.Mutex
			answers := map[string]int{}
			for range b.N {
				var wg sync.WaitGroup
				for range clients {
					wg.Go(func() {
						tr := &http.Transport{DisableKeepAlives: true}
						defer tr.CloseIdleConnections()
						resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+"/v1/chat/completions",
							"application/json", bytes.NewReader(body))
						key := "closed"
						if err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							key = strconv.Itoa(resp.StatusCode)
						}
						mu.Lock()
						answers[key]++
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			peak := procStatus(pid, "VmHWM")
			b.Logf("%d clients × %d MB, %d rounds: answers %v; RSS %d MB before, peak %d MB",
				clients, size>>20, b.N, answers, before>>20, peak>>20)
			if answers["200"] == 0 {
				b.Errorf("no body served: %v", answers)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MB")
			b.ReportMetric(float64(answers["200"])/float64(b.N), "served/round")
			b.ReportMetric(float64(answers["429"]+answers["closed"])/float64(b.N), "refused/round")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// procStatus is a field of process pid's /proc status in bytes (VmHWM: its
// peak resident set; VmRSS: its resident set now); 0 without /proc.
func procStatus(pid, field string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
