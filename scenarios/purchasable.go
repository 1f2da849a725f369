package scenarios

import "slices"

// joinBought adds a copy of each purchasable type given replicas (bought,
// for this run) to the fleet, after today's pools.
func (s *Scenario) joinBought() {
	for _, p := range s.Purchasable {
		if p.Replicas > 0 {
			s.Pools = append(s.Pools, p)
		}
	}
}

// Bought reports whether pool i of Pools is a purchasable type bought for
// this run rather than one of today's pools. (Names are unique across
// pools and purchasable types.)
func (s *Scenario) Bought(i int) bool {
	return slices.ContainsFunc(s.Purchasable, func(p Pool) bool { return p.Name == s.Pools[i].Name })
}
