package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// padded is a chat body of about n bytes.
func padded(n int) string {
	return chatBody(false, strings.Repeat("a", max(n-100, 1)))
}

func wantErrorCode(t *testing.T, body, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != code {
		t.Errorf("error body %q: want code %q", body, code)
	}
}

// A body over the limit is refused with 413, whether its Content-Length
// says so before it is read or a chunked body runs over while it is; the
// backend never sees it.
func TestBodyTooLarge(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.MaxBodyBytes = 4 << 10 })
	big := padded(8 << 10)
	t.Run("content-length", func(t *testing.T) {
		resp, body := h.mustPost(keyGlobal, big)
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
		wantErrorCode(t, body, "request_too_large")
	})
	t.Run("chunked", func(t *testing.T) {
		// An io.Reader of unknown length goes chunked.
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/chat/completions", io.MultiReader(strings.NewReader(big)))
		req.Header.Set("Authorization", "Bearer "+keyGlobal)
		resp, err := h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if req.ContentLength != 0 && req.ContentLength != -1 {
			t.Fatalf("request not chunked: Content-Length %d", req.ContentLength)
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
		wantErrorCode(t, string(b), "request_too_large")
	})
	if resp, _ := h.mustPost(keyGlobal, padded(3<<10)); resp.StatusCode != http.StatusOK {
		t.Errorf("a body under the limit: %d, want 200", resp.StatusCode)
	}
	if got := us.hits.Load(); got != 1 {
		t.Errorf("backend hits = %d, want 1 (only the body under the limit)", got)
	}
	if got := h.metric("fleetdrill_gateway_refused_total", map[string]string{"reason": refuseTooLarge}); got != 2 {
		t.Errorf("refused_total{body-too-large} = %v, want 2", got)
	}
	if h.gw.lim.body.InFlight() != 0 {
		t.Errorf("in-flight body bytes %d after every request ended, want 0", h.gw.lim.body.InFlight())
	}
}

// When the bodies in flight fill the budget, the next request is refused
// with 429 and Retry-After before its body is read; when they end, there is
// room again.
func TestBodyBudget(t *testing.T) {
	us := newFake(t)
	us.mode.Store(modeBlock)
	body := padded(2 << 10)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}},
		func(c *Config) { c.MaxBodyBytes, c.MaxInflightBodyBytes = 4<<10, int64(2*len(body)) })
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { h.mustPost(keyGlobal, body) })
	}
	for range 2 {
		select {
		case <-us.started:
		case <-time.After(5 * time.Second):
			t.Fatal("requests never reached the backend")
		}
	}
	resp, b := h.mustPost(keyGlobal, chatBody(false, "x"))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("budget full: %d Retry-After %q, want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	wantErrorCode(t, b, "rate_limit_exceeded")
	us.Release()
	wg.Wait()
	if resp, _ := h.mustPost(keyGlobal, body); resp.StatusCode != http.StatusOK {
		t.Errorf("after the budget emptied: %d, want 200", resp.StatusCode)
	}
	if got := h.metric("fleetdrill_gateway_refused_total", map[string]string{"reason": refuseBodyBudget}); got != 1 {
		t.Errorf("refused_total{body-budget} = %v, want 1", got)
	}
}

// Every refusal of the gateway's own is counted once in requests_total
// (outcome refused, tenant "-" when no key matched) and refused_total, and
// logged once without the key or the prompt.
func TestRefusalsCounted(t *testing.T) {
	us := newFake(t)
	h := newHarness(t, testScenario(t), map[string][]string{"use-h100-8b": {us.srv.URL}})
	const canary = "canary-prompt-7f3a"
	neg := `{"model":"llama-3.1-8b","max_tokens":-1,"messages":[{"role":"user","content":"` + canary + `"}]}`
	cases := []struct {
		key, class, body string
		status           int
		reason, tenant   string
	}{
		{"sk-wrong", "", chatBody(false, canary), 401, refuseUnauthorized, "-"},
		{keyGlobal, "", "{not json " + canary, 400, refuseBadBody, "global"},
		{keyGlobal, "", chatBodyFor("no-such-model", canary), 404, refuseModel, "global"},
		{keyGlobal, "no-such-class", chatBody(false, canary), 400, refuseClass, "global"},
		{keyGlobal, "", neg, 400, refuseBadValue, "global"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			resp, _ := h.postAs(tc.key, tc.class, tc.body)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := h.metric("fleetdrill_gateway_refused_total", map[string]string{"reason": tc.reason}); got != 1 {
				t.Errorf("refused_total{%s} = %v, want 1", tc.reason, got)
			}
		})
	}
	if got := h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": outRefused, "tenant": "global"}); got != 4 {
		t.Errorf("requests_total{global, refused} = %v, want 4", got)
	}
	if got := h.metric("fleetdrill_gateway_requests_total", map[string]string{"outcome": outRefused, "tenant": "-"}); got != 1 {
		t.Errorf("requests_total{-, refused} = %v, want 1", got)
	}
	log := h.log.String()
	if n := strings.Count(log, `"msg":"refused"`); n != len(cases) {
		t.Errorf("%d refusal log lines, want %d:\n%s", n, len(cases), log)
	}
	for _, secret := range []string{canary, "sk-wrong", keyGlobal} {
		if strings.Contains(log, secret) {
			t.Errorf("log holds %q:\n%s", secret, log)
		}
	}
	if us.hits.Load() != 0 {
		t.Errorf("a refused request reached the backend")
	}
}

// A tenant at its concurrency limit is refused before its body is read:
// the client sends only headers announcing a maximum-size body and gets
// the core's 429 (reason tenant-concurrency, Retry-After), counted as the
// core's refusal under model "-"; the body budget is never touched.
func TestTenantFullRefusedBeforeTheBody(t *testing.T) {
	us, eu := newFake(t), newFake(t)
	eu.mode.Store(modeBlock)
	h := newHarness(t, testScenario(t, "tenants.bank-eu.max_concurrency=1"),
		map[string][]string{"use-h100-8b": {us.srv.URL}, "euw-a100-8b": {eu.srv.URL}})
	var wg sync.WaitGroup
	wg.Go(func() { h.mustPost(keyEU, chatBody(false, "x")) })
	select {
	case <-eu.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request never reached the backend")
	}
	held := h.gw.lim.body.InFlight()

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", keyEU, DefaultMaxBodyBytes)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // against a hang only: no body is coming
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer without the body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get(hdrOutcome) != outRejected || resp.Header.Get(hdrReason) != "tenant-concurrency" {
		t.Fatalf("status %d, Retry-After %q, outcome %q, reason %q: want 429 rejected tenant-concurrency with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(hdrOutcome), resp.Header.Get(hdrReason))
	}
	wantErrorCode(t, string(b), "rate_limit_exceeded")
	if got := h.gw.lim.body.InFlight(); got != held {
		t.Errorf("in-flight body bytes %d, want %d: the refused body was reserved", got, held)
	}
	if got := h.metric("fleetdrill_rejected_requests_total", map[string]string{"reason": "tenant-concurrency"}); got != 1 {
		t.Errorf("rejected_requests_total{tenant-concurrency} = %v, want 1", got)
	}
	if got := h.metric("fleetdrill_requests_total", map[string]string{"model": modelUnread, "outcome": outRejected}); got != 1 {
		t.Errorf(`requests_total{model="-",outcome="rejected"} = %v, want 1`, got)
	}
	eu.Release()
	wg.Wait()
	if resp, _ := h.mustPost(keyEU, chatBody(false, "x")); resp.StatusCode != http.StatusOK {
		t.Errorf("after the first ended: %d, want 200", resp.StatusCode)
	}
}
