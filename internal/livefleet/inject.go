package livefleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/internal/node"
)

// OutageMode is how a regional outage is emulated on the region's proxies.
type OutageMode int

const (
	// OutageRefuse disables the proxies: their listeners close, live
	// connections drop and new ones are refused at once. A client sees a
	// transport error immediately, so breakers open within one request per
	// backend, and the drill's timing does not depend on the client's
	// timeouts. This is the default: a region whose load balancers are gone
	// (or whose routes are withdrawn with an ICMP reject) looks like this.
	OutageRefuse OutageMode = iota
	// OutageHang adds a timeout toxic with timeout 0: connections are
	// accepted and then carry no data until the fault ends (black-holed
	// traffic). Detection then rests on the client's own deadlines
	// (policy.health.timeout in the gateway), which is the harder case.
	// When the toxic is removed toxiproxy closes the held connections.
	OutageHang
)

// Undo ends a fault injected by Inject.
type Undo func(ctx context.Context) error

// Inject applies spec to the fleet now (spec.At and spec.For are the
// caller's schedule) and returns the undo for the fault's end.
func (f *Fleet) Inject(ctx context.Context, spec faults.Spec) (Undo, error) {
	if why := spec.LiveGap(); why != "" {
		return nil, fmt.Errorf("livefleet: %s: %s", spec.Kind, why)
	}
	nodes, err := f.Select(spec.Target, spec.Radius)
	if err != nil {
		return nil, fmt.Errorf("livefleet: %s: %w", spec.Kind, err)
	}
	return f.InjectOn(ctx, spec, nodes)
}

// InjectOn applies spec to the given nodes rather than those Select picks:
// a replay that must hit the replicas a twin run chose (twin.FaultPlan). The
// kind's injector (injectors.go) does the work; a spec a live fleet cannot
// emulate (faults.Spec.LiveGap) is refused, and so is a kind with no part
// on the fleet (an HTTP-level one, faults.LiveGateway: the gateway's).
func (f *Fleet) InjectOn(ctx context.Context, spec faults.Spec, nodes []*Node) (Undo, error) {
	if why := spec.LiveGap(); why != "" {
		return nil, fmt.Errorf("livefleet: %s: %s", spec.Kind, why)
	}
	inj, ok := injectors[spec.Kind]
	if !ok && spec.Kind.Traits().Live != 0 {
		return nil, fmt.Errorf("livefleet: %s is HTTP-level: the live gateway's fault layer injects it (Live %s), not the fleet", spec.Kind, spec.Kind.Traits().Live)
	}
	if !ok {
		return nil, fmt.Errorf("livefleet: %s has no live emulation", spec.Kind)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("livefleet: %s: no node to inject into", spec.Kind)
	}
	f.mu.Lock()
	f.injected++
	id := fmt.Sprintf("fd-%s-%d", spec.Kind, f.injected)
	f.mu.Unlock()
	return inj.inject(ctx, f, spec, nodes, id)
}

// Select returns the nodes a fault target covers, in fleet order, cut to
// the radius (the first Count, or the first ceil(Percent%) of them).
func (f *Fleet) Select(t faults.Target, r faults.Radius) ([]*Node, error) {
	var out []*Node
	for _, n := range f.Nodes {
		if (t.Region == "" || n.Region == t.Region) && (t.Pool == "" || n.Pool == t.Pool) &&
			(t.Provider == "" || n.Provider == t.Provider) && (t.Model == "" || slices.Contains(n.Models, t.Model)) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no node of the fleet matches %+v", t)
	}
	k := len(out)
	switch {
	case r.Count > 0:
		k = min(k, r.Count)
	case r.Percent > 0:
		k = min(k, max(1, int(math.Ceil(r.Percent/100*float64(len(out))-1e-9))))
	}
	return out[:k], nil
}

// disable takes the nodes' proxies down.
func (f *Fleet) disable(nodes []*Node) (Undo, error) {
	for _, n := range nodes {
		n.proxy.Stop()
	}
	return func(context.Context) error {
		var errs []error
		for _, n := range nodes {
			if err := n.proxy.Start(); err != nil && !strings.Contains(err.Error(), "already started") {
				errs = append(errs, fmt.Errorf("livefleet: enable proxy %s: %w", n.Name, err))
			}
		}
		return errors.Join(errs...)
	}, nil
}

// addToxic adds a downstream toxic called name to the nodes' proxies.
func (f *Fleet) addToxic(ctx context.Context, nodes []*Node, name, typ string, attrs map[string]any) (Undo, error) {
	body, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": "downstream", "toxicity": 1.0, "attributes": attrs})
	if err != nil {
		return nil, err
	}
	var done []*Node
	undo := func(ctx context.Context) error {
		var errs []error
		for _, n := range done {
			if err := n.proxy.Toxics.RemoveToxic(ctx, name); err != nil {
				errs = append(errs, fmt.Errorf("livefleet: remove toxic %s from %s: %w", name, n.Name, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, n := range nodes {
		if _, err := n.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
			return nil, errors.Join(fmt.Errorf("livefleet: %s toxic on %s: %w", typ, n.Name, err), undo(ctx))
		}
		done = append(done, n)
	}
	return undo, nil
}

// Admin calls a node's admin API: GET the faults, POST a patch, or DELETE
// to reset them. It returns the node's faults after the call.
func (f *Fleet) Admin(ctx context.Context, n *Node, method string, patch *node.FaultsPatch) (node.Faults, error) {
	var out node.Faults
	var body io.Reader
	if patch != nil {
		b, err := json.Marshal(patch)
		if err != nil {
			return out, err
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, n.AdminURL()+"/admin/faults", body)
	if err != nil {
		return out, err
	}
	req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, fmt.Errorf("livefleet: admin %s %s: %w", method, n.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("livefleet: admin %s %s: %s: %s", method, n.Name, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("livefleet: admin %s %s: %w", method, n.Name, err)
	}
	return out, nil
}

// stopNodes stops the nodes' containers; undo starts them again (a fresh
// node process: its admin faults are reset) and re-points their proxies at
// the new published ports.
func (f *Fleet) stopNodes(ctx context.Context, nodes []*Node) (Undo, error) {
	var stopped []*Node
	undo := func(ctx context.Context) error {
		var errs []error
		for _, n := range stopped {
			errs = append(errs, f.RestartNode(ctx, n))
		}
		return errors.Join(errs...)
	}
	for _, n := range nodes {
		// An autoscaled pool's replica not started has nothing to lose.
		n.op.Lock()
		did, err := f.stop(ctx, n)
		n.op.Unlock()
		if did {
			stopped = append(stopped, n)
		}
		if err != nil {
			return nil, errors.Join(err, undo(ctx))
		}
	}
	return undo, nil
}

// RestartNode starts a stopped node's container, waits for it to be ready,
// and points its proxy at its new published port (Docker assigns new host
// ports on every start).
func (f *Fleet) RestartNode(ctx context.Context, n *Node) error {
	n.op.Lock()
	defer n.op.Unlock()
	return f.restart(ctx, n)
}

// restart is RestartNode with n.op held.
func (f *Fleet) restart(ctx context.Context, n *Node) error {
	n.mu.Lock()
	ctr := n.Container
	n.mu.Unlock()
	if ctr == nil {
		return nil // never started: an autoscaled replica's, started by StartNode
	}
	if err := ctr.Start(ctx); err != nil {
		return fmt.Errorf("livefleet: start %s: %w", n.Name, err)
	}
	up, err := n.attach(ctx)
	if err != nil {
		return err
	}
	f.log.Info("node restarted", "node", n.Name, "upstream", up, "admin", n.AdminURL())
	return nil
}

// RestartNodes stops the nodes' containers and starts them again at once:
// a restart in place (a driver upgrade's), its node process fresh, its
// proxy pointed at the new port. A node not running (an autoscaled
// replica not started) is left alone.
func (f *Fleet) RestartNodes(ctx context.Context, nodes []*Node) error {
	undo, err := f.stopNodes(ctx, nodes)
	if err != nil {
		return err
	}
	return undo(ctx)
}
