package liverun

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/fleetdrill/fleetdrill/internal/gateway"
	"github.com/fleetdrill/fleetdrill/internal/inproc"
	"github.com/fleetdrill/fleetdrill/internal/node"
	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/compile"
)

// gatewayHost is the gateway's host on the in-process transport.
const gatewayHost = "gateway.inproc"

// inprocNodes are the emulated nodes a run serves in this process
// (Options.InProcess), one per replica, by the twin's replica number.
// fleetdrill starts them itself, so, unlike an external endpoint, a node
// loss may stop one (its host refuses every request and its open streams
// are cut, as a lost container's) and start it again: a fresh node, its
// engine empty.
type inprocNodes struct {
	tr  *inproc.Transport
	ctx context.Context // the session's: cancelled when it closes

	mu    sync.Mutex
	nodes map[int]*inprocNode // by replica; nil for a replica not served in process
}

type inprocNode struct {
	cfg  node.Config
	host string
	stop context.CancelFunc // nil while stopped
	node *node.Node         // the running one
}

// has says whether replica ri is one of these nodes.
func (p *inprocNodes) has(ri int) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes[ri] != nil
}

// start starts replica ri's node (a new one, empty) unless it runs.
func (p *inprocNodes) start(ri int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[ri]
	if n == nil {
		return fmt.Errorf("live: replica %d has no in-process node (a harness bug)", ri)
	}
	if n.stop != nil {
		return nil
	}
	nd, err := node.New(n.cfg)
	if err != nil {
		return fmt.Errorf("live: in-process node for pool %s: %w", n.cfg.Pool, err)
	}
	ctx, cancel := context.WithCancel(p.ctx)
	n.stop, n.node = cancel, nd
	go func() { _ = nd.Run(ctx) }()
	p.tr.Handle(n.host, nd.Handler())
	return nil
}

// stop stops replica ri's node: its host refuses requests from now, and
// its open streams end. A stopped node is a no-op.
func (p *inprocNodes) stop(ri int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[ri]
	if n == nil || n.stop == nil {
		return
	}
	p.tr.Handle(n.host, nil) // dial refused
	n.stop()
	n.stop = nil
}

// startInProcess starts an emulated node in this process for every
// replica of every pool the live fleet emulates (Options.InProcess), on
// the session's transport, and returns them as the gateway's endpoints:
// pool → "fleetdrill+http://rN.inproc", N the replica's index.
func (s *Session) startInProcess(sc *scenarios.Scenario, speed float64) (map[string][]string, error) {
	s.inproc = &inproc.Transport{}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopNodes = cancel
	s.procs = &inprocNodes{tr: s.inproc, ctx: ctx, nodes: map[int]*inprocNode{}}
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
			host := fmt.Sprintf("r%d.inproc", ri)
			if cfg.KV != nil {
				// Pulls go over the session's transport, by host.
				kv := *cfg.KV
				kv.Advertise, kv.Client = host, &http.Client{Transport: s.inproc}
				cfg.KV = &kv
			}
			s.procs.nodes[ri] = &inprocNode{cfg: cfg, host: host}
			if err := s.procs.start(ri); err != nil {
				return nil, err
			}
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

// setLink sets link fault f on replicas' in-process nodes (their
// KVConfig has no wire: a fault's failures are the node's seeded draws).
// A node started later (after a node loss) starts without it, as a
// restarted container's does.
func (p *inprocNodes) setLink(replicas []int, f node.LinkFault) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, ri := range replicas {
		if n := p.nodes[ri]; n != nil && n.stop != nil {
			if _, err := n.node.Patch(node.FaultsPatch{Link: &f}); err != nil {
				errs = append(errs, fmt.Errorf("live: replica %d: %w", ri, err))
			}
		}
	}
	return errors.Join(errs...)
}
