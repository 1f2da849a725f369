package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The peerSet's lower median is the sorted one's, through inserts,
// removals and moves in any order, with ties.
func TestPeerSetIsTheSortedMedian(t *testing.T) {
	const n = 200
	c := &Core{replicas: make([]replicaState, n), peers: make([]peerSet, 1), plat: make([]float64, n)}
	c.outlier.MinSamples = 1
	rng := rand.New(rand.NewPCG(35, 1))
	in := make([]bool, n)
	for step := range 20000 {
		r := rng.IntN(n)
		o := &c.replicas[r].out
		switch rng.IntN(3) {
		case 0: // a sample: its EWMA moves (often onto another's value)
			o.samples++
			o.lat = float64(rng.IntN(50)) / 10
		case 1: // ejected
			o.ejected = true
		case 2: // back, its samples forgotten
			o.ejected, o.samples, o.lat = false, 0, 0
		}
		c.repeer(r)
		in[r] = !o.ejected && o.samples >= 1
		var want []float64
		for x := range n {
			if in[x] {
				want = append(want, c.replicas[x].out.lat)
			}
		}
		med := 0.0
		if len(want) >= 2 {
			slices.Sort(want)
			med = want[(len(want)-1)/2]
		}
		if got := c.peerMedianOf(&c.peers[0]); got != med {
			t.Fatalf("step %d: median %g, want %g of %d peers", step, got, med, len(want))
		}
	}
}
