package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

var nodeURLRE = regexp.MustCompile(`http://(127\.0\.0\.1:\d+)`)

// startNode runs `fleetdrill args...` (a node) until ctx ends and waits
// for it to print n listener addresses, returned in order. The wait is
// bounded by the run itself, not a wall-clock margin: a node that exits
// before printing them fails the test with its output (a hang is go
// test's -timeout to catch). code receives its exit status.
func startNode(ctx context.Context, t *testing.T, n int, args ...string) (addrs []string, out, errb *syncBuffer, code <-chan int) {
	t.Helper()
	out, errb = new(syncBuffer), new(syncBuffer)
	c := make(chan int, 1)
	go func() { c <- run(ctx, args, out, errb) }()
	for {
		addrs = addrs[:0]
		for _, m := range nodeURLRE.FindAllStringSubmatch(out.String(), -1) {
			addrs = append(addrs, m[1])
		}
		if len(addrs) >= n {
			return addrs[:n], out, errb, c
		}
		select {
		case status := <-c:
			t.Fatalf("node exited %d before printing %d address(es); stdout %q stderr %q", status, n, out.String(), errb.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestNodeCommandServesAndDrains(t *testing.T) {
	t.Setenv(adminTokenEnv, "tok")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs, _, errb, code := startNode(ctx, t, 2, "node", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--scenario", "gameday-driver-upgrade", "--pool", "use-h100-8b-a", "--speed", "10")
	api, admin := addrs[0], addrs[1]

	resp, err := http.Get("http://" + api + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	// A stream in flight when the signal comes finishes (drain).
	resp, err = http.Post("http://"+api+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"llama-3.1-8b","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %v %v", resp, err)
	}
	resp.Body.Read(make([]byte, 1))

	req, _ := http.NewRequest(http.MethodGet, "http://"+admin+"/admin/faults", nil)
	req.Header.Set("Authorization", "Bearer tok")
	aresp, err := http.DefaultClient.Do(req)
	if err != nil || aresp.StatusCode != http.StatusOK {
		t.Fatalf("admin with the env token: %v %v", aresp, err)
	}
	aresp.Body.Close()

	mresp, err := http.Get("http://" + api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{"fleetdrill_node_running_sequences", "go_goroutines", "process_"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	cancel() // as SIGTERM would
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("stream in flight at shutdown did not finish: ...%q", body[max(0, len(body)-80):])
	}
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit %d, want 0; stderr %s", c, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("node did not exit after cancel")
	}
}

func TestNodeCommandInvalid(t *testing.T) {
	t.Setenv(adminTokenEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "nope"}, "not a built-in profile"},
		{[]string{"--scenario", "gameday-driver-upgrade"}, "--scenario needs --pool"},
		{[]string{"--scenario", "gameday-driver-upgrade", "--pool", "nope"}, `no pool "nope"`},
		{[]string{"--admin-listen", "127.0.0.1:0"}, "--admin-listen needs $FLEETDRILL_ADMIN_TOKEN"},
		{[]string{"--admin-listen", "127.0.0.1:0", "--admin-token", "x"}, "--admin-token is no longer taken"},
		{[]string{"--min-driver", "x"}, "want MODEL=VERSION"},
		{[]string{"--max-batch", "-1"}, "max batch"},
		{[]string{"--max-model-len", "-1"}, "max model len -1"},
		{[]string{"--listen", "256.0.0.1:1"}, "--listen"},
		{[]string{"--flavor", "tgi"}, `--flavor "tgi": want one of fleetdrill, vllm, vllm-0.8`},
		{[]string{"--max-body", "0"}, "--max-body: got 0, want > 0 bytes"},
		{[]string{"--max-body", "1024", "--max-inflight-body", "1000"}, "--max-inflight-body: got 1000, want at least --max-body (1024)"},
	} {
		code, _, stderr := runCommand(t, newNodeCmd(), tc.args...)
		if code != exitInvalid || !strings.Contains(stderr, tc.want) {
			t.Errorf("node %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitInvalid, tc.want)
		}
	}
}

// --flavor vllm answers as vLLM: /health, no /healthz, vLLM's series.
func TestNodeCommandFlavorVLLM(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs, out, errb, code := startNode(ctx, t, 1, "node", "--listen", "127.0.0.1:0", "--flavor", "vllm", "--speed", "10", "--max-model-len", "2048")
	api := addrs[0]
	if !strings.Contains(out.String(), "serving llama-3.1-8b as vllm on") {
		t.Errorf("stdout %q, want the flavor named", out.String())
	}
	for path, want := range map[string]int{"/health": http.StatusOK, "/healthz": http.StatusNotFound} {
		resp, err := http.Get("http://" + api + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Get("http://" + api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `vllm:num_requests_running{engine="0",model_name="llama-3.1-8b"} 0`; !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %s", want)
	}
	// --max-model-len is published as vLLM publishes it.
	if resp, err = http.Get("http://" + api + "/v1/models"); err != nil {
		t.Fatal(err)
	}
	models, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `"max_model_len":2048`; !strings.Contains(string(models), want) {
		t.Errorf("/v1/models %s lacks %s", models, want)
	}
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit %d, want 0; stderr %s", c, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("node did not exit after cancel")
	}
}

// The node's listeners count the connections their per-address cap closes,
// by listener, and the node sets the soft memory limit of its body budget.
func TestNodeCommandCountsRefusedConnections(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs, _, errb, code := startNode(ctx, t, 1, "node", "--listen", "127.0.0.1:0", "--max-conns-per-ip", "1",
		"--max-inflight-body", "33554432", "--memory-limit", "0")
	api := addrs[0]
	if want := "soft memory limit 160 MiB"; !strings.Contains(errb.String(), want) { // 32 MiB + 128 MiB
		t.Errorf("stderr %q, want %q", errb.String(), want)
	}
	held, err := net.Dial("tcp", api)
	if err != nil {
		t.Fatal(err)
	}
	// The second connection from 127.0.0.1 is closed as soon as accepted.
	second, err := net.Dial("tcp", api)
	if err != nil {
		t.Fatal(err)
	}
	_ = second.SetReadDeadline(time.Now().Add(30 * time.Second)) // guards a hang only
	if _, err := second.Read(make([]byte, 1)); err == nil {
		t.Fatal("the second connection from one address was not closed")
	}
	second.Close()
	held.Close()
	// The held connection's place frees once the server sees it closed
	// (until then a scrape is refused as the second was; a node that never
	// frees it is go test's -timeout to catch).
	var metrics string
	for metrics == "" {
		if resp, err := http.Get("http://" + api + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			metrics = string(b)
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if want := `fleetdrill_node_connections_refused_total{listener="api"} `; !strings.Contains(metrics, want) ||
		strings.Contains(metrics, want+"0\n") {
		t.Errorf("/metrics: want %s at least 1:\n%s", want, grepLines(metrics, "connections_refused"))
	}
	cancel()
	<-code
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
