package node

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkStreamLoopback measures the streaming requests per second one
// node sustains on loopback, with clients in the same process: 16-token
// chat streams, at real time (speed 1, the engine's own pace bounds it)
// and at speed 1000 (the HTTP/SSE and loop overheads bound it).
//
//	go test -run '^$' -bench StreamLoopback -benchtime 3s ./internal/node/
func BenchmarkStreamLoopback(b *testing.B) {
	for _, speed := range []float64{1, 1000} {
		b.Run(fmt.Sprintf("speed=%g", speed), func(b *testing.B) {
			h := start(b, Config{Speed: speed, MaxBatch: 256})
			body := []byte(`{"model":"` + testModel + `","stream":true,"max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`)
			tr := &http.Transport{MaxIdleConnsPerHost: 512}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			b.SetParallelism(64) // 64 × GOMAXPROCS concurrent clients
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Post(h.srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || n == 0 {
						b.Errorf("status %d, %d bytes", resp.StatusCode, n)
						return
					}
				}
			})
			el := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/el, "req/s")
			b.ReportMetric(float64(b.N)*16/el, "tokens/s")
		})
	}
}

// BenchmarkInFlightMemory measures the memory one in-flight streaming
// request costs the process: N raw loopback connections each hold a stream
// open (a 1M-token request), and the heap and stack growth is divided by N.
// It includes the server's connection, handler goroutine, job and engine
// sequence, and the client side's socket and read buffer (raw net.Conn, no
// goroutine).
func BenchmarkInFlightMemory(b *testing.B) {
	const inflight = 500
	for b.Loop() {
		h := start(b, Config{Speed: 1, MaxBatch: 1024, KVTokens: 1 << 40})
		addr := strings.TrimPrefix(h.srv.URL, "http://")
		body := `{"model":"` + testModel + `","stream":true,"max_tokens":1000000,"messages":[{"role":"user","content":"hi"}]}`
		req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		before := memInUse()
		conns := make([]net.Conn, 0, inflight)
		for range inflight {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
			if _, err := io.WriteString(c, req); err != nil {
				b.Fatal(err)
			}
		}
		for _, c := range conns {
			line, err := bufio.NewReaderSize(c, 64).ReadString('\n')
			if err != nil || !strings.Contains(line, "200") {
				b.Fatalf("status line %q: %v", line, err)
			}
		}
		waitStats(b, h.node, inflight)
		after := memInUse()
		b.ReportMetric(float64(after-before)/inflight, "B/inflight")
		for _, c := range conns {
			c.Close()
		}
		h.stop()
	}
}

func waitStats(b *testing.B, n *Node, running int) {
	deadline := time.Now().Add(10 * time.Second)
	for n.Stats()[0].Running < running {
		if time.Now().After(deadline) {
			b.Fatalf("running %d, want %d", n.Stats()[0].Running, running)
		}
		time.Sleep(time.Millisecond)
	}
}

func memInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}
