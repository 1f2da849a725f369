package liverun

import (
	"context"
	"fmt"
	"net/http"

	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/inproc"
	"github.com/fleetdrill/fleetdrill/internal/node"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
)

// gatewayHost is the gateway's host on the in-process transport.
const gatewayHost = "gateway.inproc"

// startInProcess starts an emulated node in this process for every
// replica of every pool the live fleet emulates (Options.InProcess), on
// the session's transport, and returns them as the gateway's endpoints:
// pool → "fleetdrill+http://rN.inproc", N the replica's index.
func (s *Session) startInProcess(sc *scenarios.Scenario, speed float64) (map[string][]string, error) {
	s.inproc = &inproc.Transport{}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopNodes = cancel
	ext := map[string][]string{}
	ri := 0
	for i := range sc.Pools {
		p := &sc.Pools[i]
		n := compile.PoolReplicas(p)
		if p.Replicas == 0 && p.Autoscale == nil {
			ri += n
			continue
		}
		cfg, err := node.FromScenario(sc, p.Name)
		if err != nil {
			return nil, fmt.Errorf("live: in-process node for pool %s: %w", p.Name, err)
		}
		cfg.Speed = speed
		for range n {
			nd, err := node.New(cfg)
			if err != nil {
				return nil, fmt.Errorf("live: in-process node for pool %s: %w", p.Name, err)
			}
			go func() { _ = nd.Run(ctx) }()
			host := fmt.Sprintf("r%d.inproc", ri)
			s.inproc.Handle(host, nd.Handler())
			ext[p.Name] = append(ext[p.Name], string(gateway.KindFleetdrill)+"+http://"+host)
			ri++
		}
	}
	return ext, nil
}

// transport is the gateway's upstream transport: the in-process one, or
// nil for the gateway's own.
func (s *Session) transport() http.RoundTripper {
	if s.inproc == nil {
		return nil
	}
	return s.inproc
}
