package faults_test

import (
	"fmt"

	"github.com/fleetdrill/fleetdrill/faults"
)

func ExampleParse() {
	// Keys come in any order; String prints them in canonical order, with
	// compact durations.
	s, err := faults.Parse("brownout latency=300ms fail=0.2 region=us-east for=15m0s at=10m")
	if err != nil {
		panic(err)
	}
	fmt.Println(s)
	fmt.Println(s.Target.Region, s.At, s.FailRate, s.AddLatency)
	end, _ := s.End()
	fmt.Println("ends at", end)

	// node-loss takes one replica unless told otherwise.
	s, _ = faults.Parse("node-loss pool=use-h100 at=12m")
	fmt.Println(s)

	// Every problem at once, each naming the key, the value and what is
	// allowed.
	_, err = faults.Parse("brownout regoin=us-east at=10m rpm=2")
	fmt.Println(err)
	// Output:
	// brownout region=us-east at=10m for=15m fail=0.2 latency=300ms
	// us-east 10m0s 0.2 300ms
	// ends at 25m0s
	// node-loss pool=use-h100 at=12m count=1
	// regoin: unknown key; did you mean region?
	// rpm: got 2, but brownout does not take rpm=; quota-exhaustion does
	// region: brownout needs one of region= or pool=
	// fail: brownout needs fail=, latency= or both
}

func ExampleParseAll() {
	_, err := faults.ParseAll([]string{
		"regional-outage region=us-east at=10m for=15m",
		"quota-exhaustion provider=openai at=1h rpm=100",
	})
	fmt.Println(err)
	// Output:
	// faults[1]: tpm: zero (or left out) while rpm=100, and a zero quota lets no request through; give both rpm= and tpm=, or neither for a quota of zero
}

func ExampleDescribe() {
	for _, k := range faults.Kinds() {
		fmt.Println(faults.Describe(faults.Kind(k)))
	}
	// Output:
	// regional-outage: every pool of a region stops serving; region=NAME at=D [for=D]
	// brownout: a region or pool fails a fraction of requests and/or slows every request; region=NAME|pool=NAME at=D [for=D] [count=N|percent=P] fail=F and/or latency=D
	// quota-exhaustion: a provider's or pool's rate limit drops to rpm/tpm (zero when left out); pool=NAME|provider=NAME at=D [for=D] [rpm=X tpm=X]
	// model-retirement: a model is withdrawn from every pool (or from one), new sessions steered away notice= before; model=NAME [pool=NAME] at=D [for=D] [notice=D]
	// driver-upgrade: a pool's replicas restart on a new driver (and runtime), rolled back after for=; pool=NAME at=D [for=D] driver=VERSION [runtime=NAME]
	// node-loss: replicas of a pool fail (one unless count= or percent= says otherwise); pool=NAME at=D [for=D] [count=N|percent=P]
	// latency: requests to a region, pool or model take longer; region=NAME|pool=NAME|model=NAME at=D [for=D] latency=D
	// error-burst: a fraction of requests to a region, pool or model fail; region=NAME|pool=NAME|model=NAME at=D [for=D] fail=F
	// cold-start-storm: replicas of a pool or region reload their model at once (all unless count= or percent= says otherwise); region=NAME|pool=NAME at=D [count=N|percent=P]
	// stockout: an autoscaled pool's provider grants no new replicas (or only grant= of them); region=NAME|pool=NAME|provider=NAME [accelerator=NAME] at=D [for=D] [grant=F]
	// quota-cap: the account's GPUs at a provider are capped at gpus=: scale-ups beyond it are refused; provider=NAME at=D [for=D] gpus=N
	// slow-provisioning: an autoscaled pool's provisioning delay is multiplied by factor=; pool=NAME|provider=NAME at=D [for=D] factor=F
	// link-degraded: the KV link into a decode pool's replicas slows to bandwidth= GB/s per GPU and/or takes latency= more per transfer (RDMA falling back to TCP); region=NAME|pool=NAME at=D [for=D] [count=N|percent=P] bandwidth=GBS and/or latency=D
	// kv-transfer-failure: a share (fail=) of the KV transfers into a decode pool's replicas fail, heard of at once or after timeout= (a hang); region=NAME|pool=NAME at=D [for=D] [count=N|percent=P] fail=F [timeout=D]
}
