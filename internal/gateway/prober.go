package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// prober probes every backend's health path (its kind's: /health,
// /healthz, /v1/models) every probe interval, with the health timeout
// (both model time), and feeds the results to the breakers; for kinds
// that export load series it reads them too. It holds no state of its
// own between rounds: the breakers are the core's, the loads the
// backends'.
type prober struct {
	be      *Backends
	down    func(rep int) Down // the fault layer's: an injected down is met by probes too
	clk     clock
	every   time.Duration // policy.health.probe_interval (model time)
	timeout time.Duration // policy.health.timeout (model time)

	probes       *prometheus.CounterVec // pool, result
	scrapeErrors *prometheus.CounterVec // pool

	// Called with the gateway's lock (be.mu) held: what a probe's result
	// does to the core. observe feeds the breaker (Gateway.observe);
	// loaded records a scraped load and pushes back on the router.
	observe func(now time.Duration, i int, ok bool)
	loaded  func(now time.Duration, i int, l Load)
}

// loop probes until ctx ends.
func (p *prober) loop(ctx context.Context) {
	// Probe rounds at most every millisecond of wall time, whatever the
	// speed.
	t := time.NewTicker(max(p.clk.wall(p.every), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		probed := p.be.running()
		for i := range p.be.replicas {
			if probed[i] {
				wg.Go(func() { p.probe(ctx, i) })
			}
		}
		wg.Wait()
	}
}

// probe probes replica i once (a round's, or a half-open breaker's
// trial) and reports the result to the core.
func (p *prober) probe(ctx context.Context, i int) {
	rep := &p.be.replicas[i]
	pctx, cancel := context.WithTimeout(ctx, p.clk.wall(p.timeout))
	defer cancel()
	ok := false
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, rep.health, nil)
	switch p.down(i) {
	case DownRefuse: // injected down (faultlayer.go): refused at once
		err = errors.New("connection refused (injected fault)")
	case DownHang: // or swallowed: no answer within the health timeout
		<-pctx.Done()
		err = pctx.Err()
	}
	if err == nil {
		resp, err := p.be.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			ok = resp.StatusCode >= 200 && resp.StatusCode < 300
		}
	}
	if ctx.Err() != nil {
		return // shutting down: not the backend's fault
	}
	p.probes.WithLabelValues(rep.pool, boolResult(ok)).Inc()
	var load Load
	scraped := false
	if ok && rep.kind.scrapes() {
		// Read-only, at the probe interval, within the health timeout. A
		// server whose metrics cannot be read is not unhealthy for it.
		var err error
		if load, err = p.be.scrape(pctx, i); err == nil {
			scraped = true
		} else if ctx.Err() == nil {
			p.scrapeErrors.WithLabelValues(rep.pool).Inc()
		}
	}
	p.be.mu.Lock()
	defer p.be.mu.Unlock()
	if !p.be.probed(i) {
		return // an autoscaled replica handed back while it was probed
	}
	now := p.clk.now()
	p.observe(now, i, ok)
	if scraped {
		p.loaded(now, i, load)
	}
}

func boolResult(ok bool) string {
	if ok {
		return "ok"
	}
	return "error"
}
