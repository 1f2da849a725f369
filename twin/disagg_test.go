package twin

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetdrill/fleetdrill/scenarios"
	"github.com/fleetdrill/fleetdrill/twin/kvlink"
	"github.com/fleetdrill/fleetdrill/twin/latency"
)

func pdRun(t *testing.T, sets ...string) *Report {
	t.Helper()
	sc, err := scenarios.LoadWithSets("testdata/pd.yaml", sets)
	require.NoError(t, err)
	rep, err := Run(context.Background(), sc, Options{})
	require.NoError(t, err)
	require.True(t, rep.Requests.Balanced(), "every request accounted for once: %+v", rep.Requests)
	return rep
}

// Always disaggregated: every attempt is prefilled remotely, every
// transfer of a completed request ended, and a transfer takes at least
// the link's latency plus the smallest prompt's bytes at the full
// bandwidth (and at most its share when they overlap).
func TestDisaggAlwaysMovesEveryPrompt(t *testing.T) {
	rep := pdRun(t)
	d := rep.Disaggregation
	require.NotNil(t, d)
	require.Positive(t, rep.Requests.Completed)
	require.Zero(t, d.LocalPrefills)
	require.Equal(t, d.RemotePrefills, d.Transfers+d.Aborted, "each remote prefill moved or stopped")
	require.GreaterOrEqual(t, d.Transfers, rep.Requests.Completed)
	require.Equal(t, d.Transfer.Count, rep.Requests.Completed, "every completed request's TTFT is split")

	m, err := latency.LookupModel("llama-3.1-8b-instruct")
	require.NoError(t, err)
	rdma, err := kvlink.Lookup("rdma")
	require.NoError(t, err)
	perToken := m.KVBytesPerToken(2)
	// The mean prompt is about 4,000 tokens: the bytes moved per transfer
	// say the same, from the model's own config.
	meanTokens := d.Bytes / float64(d.Transfers) / perToken
	require.InDelta(t, 4000, meanTokens, 400)
	floor := kvlink.Duration(kvlink.Bytes(perToken, 1), rdma.BandwidthGBs*1e9, rdma.Latency)
	require.GreaterOrEqual(t, d.Transfer.Max, floor.Seconds())
	require.Greater(t, d.Transfer.P50, rdma.Latency.Seconds())
	// A 4,000-token prompt alone on a 50 GB/s link: 1.31 ms + 10.5 ms.
	alone := kvlink.Duration(kvlink.Bytes(perToken, 4000), rdma.BandwidthGBs*1e9, rdma.Latency).Seconds()
	require.InDelta(t, alone, d.Transfer.P50, alone, "the median transfer is about one prompt's, alone or nearly")

	// The split adds up to the requests' TTFT (the same completions).
	ttft := rep.Classes["interactive"].TTFT.Mean
	require.InDelta(t, ttft, d.Prefill.Mean+d.Transfer.Mean+d.Decode.Mean, 1e-6)

	// Prefill and decode pools each report their own utilization.
	require.Positive(t, rep.Pools["prefill"].Utilization)
	require.Positive(t, rep.Pools["decode"].Utilization)
	require.Zero(t, rep.Pools["prefill"].Dispatched, "a prefill pool serves no client")
}

// The same GPUs, aggregated and split: on a prefill-heavy load the split
// removes prefill's interference from decode (lower TPOT p99) and pays
// the transfer in TTFT, as the published P/D measurements show.
func TestDisaggTradesTTFTForITL(t *testing.T) {
	split := pdRun(t)
	agg := pdRun(t, "models.llama-3.1-8b.disaggregation.decider=never", "pools.decode.replicas=6", "pools.prefill.replicas=0")
	require.NotNil(t, agg.Disaggregation)
	require.Zero(t, agg.Disaggregation.RemotePrefills)
	require.Positive(t, agg.Disaggregation.LocalPrefills)
	s, a := split.Classes["interactive"], agg.Classes["interactive"]
	require.Equal(t, a.Completed, s.Completed, "both serve the load")
	require.Less(t, s.TPOT.P99, a.TPOT.P99, "decode without prefill interference")
	require.Greater(t, s.TTFT.P50, a.TTFT.P50+split.Disaggregation.Transfer.P50,
		"TTFT gains at least a transfer (and a second queue)")
}

// Conditional: short prompts stay local, and with the prefill pool lost
// the rest fall back to local prefill, where always waits for it.
func TestDisaggLostPrefillPool(t *testing.T) {
	lost := `faults=["node-loss pool=prefill at=3m for=2m percent=100"]`
	cond := pdRun(t, "models.llama-3.1-8b.disaggregation.decider=conditional",
		"models.llama-3.1-8b.disaggregation.max_local_prefill_length=3000", lost)
	d := cond.Disaggregation
	require.Positive(t, d.LocalPrefills, "prompts of 3,000 tokens or less, and the rest while the pool is lost")
	require.Positive(t, d.RemotePrefills)
	require.Zero(t, cond.Requests.TimedOut, "nothing waits for the lost pool")

	always := pdRun(t, lost)
	require.Positive(t, always.Requests.TimedOut+always.Requests.Rejected,
		"always disaggregated, the lost prefill pool stops the model: requests wait out their deadline")
	require.Less(t, always.Requests.Completed, cond.Requests.Completed)
	require.Positive(t, always.Disaggregation.Aborted, "prefills under way on the lost pool are stopped")
}

// Disaggregated runs are deterministic: the same scenario and seed give
// byte-identical reports.
func TestDisaggDeterministic(t *testing.T) {
	faults := `faults=["node-loss pool=prefill at=1m for=1m count=1"]`
	ra, rb := pdRun(t, "duration=3m", faults), pdRun(t, "duration=3m", faults)
	ra.Run, rb.Run = RunInfo{}, RunInfo{} // its wall time
	a, err := json.Marshal(ra)
	require.NoError(t, err)
	b, err := json.Marshal(rb)
	require.NoError(t, err)
	require.Equal(t, string(a), string(b))
}

// link-degraded: RDMA falling back to TCP at 0.5 GB/s per GPU stretches
// every transfer during the fault, by the bandwidth's ratio.
func TestDisaggLinkDegraded(t *testing.T) {
	base := pdRun(t, "duration=4m")
	slow := pdRun(t, "duration=4m", `faults=["link-degraded pool=decode at=0s bandwidth=0.5"]`)
	b, s := base.Disaggregation, slow.Disaggregation
	// 4,000 tokens of 128 KiB at 0.5 GB/s is about a second, against
	// about 10 ms at 50 GB/s: the payload's part scales by 100.
	require.Greater(t, s.Transfer.P50, 0.5)
	require.Greater(t, s.Transfer.P50, 50*b.Transfer.P50)
	require.Greater(t, slow.Classes["interactive"].TTFT.P50, base.Classes["interactive"].TTFT.P50+0.5)
	// At 1.5 prompts a second per decode replica, a second each, the
	// links fall behind: transfers queue on them until requests time out,
	// as llm-d saw hundreds of time-outs on a silent fallback to TCP.
	require.Zero(t, base.Requests.TimedOut)
	require.Positive(t, slow.Requests.TimedOut)
	require.Positive(t, s.Aborted, "the timed-out requests' transfers are stopped")
	require.Equal(t, s.RemotePrefills, s.Transfers+s.Aborted+inFlightTransfers(slow))
}

// inFlightTransfers is the remote prefills neither moved nor stopped: the
// requests still in flight at the end.
func inFlightTransfers(rep *Report) uint64 { return rep.Requests.InFlightAtEnd }

// kv-transfer-failure: with the decode pool's policy fail (vLLM's
// default), a failed transfer fails its attempt, which is retried on
// another decode replica; with recompute, the decode replica prefills the
// prompt itself and nothing is retried.
func TestDisaggTransferFailurePolicies(t *testing.T) {
	fault := `faults=["kv-transfer-failure pool=decode at=1m for=1m count=1 fail=1"]`
	failing := pdRun(t, "duration=4m", fault)
	d := failing.Disaggregation
	require.Positive(t, d.Failed)
	require.Zero(t, d.Recomputed)
	require.GreaterOrEqual(t, failing.Requests.Retries, d.Failed, "each failed transfer's attempt is retried")
	require.Zero(t, failing.Requests.Failed, "the retries find the other decode replicas")

	recomputing := pdRun(t, "duration=4m", "pools.decode.kv_load_failure_policy=recompute",
		`faults=["kv-transfer-failure pool=decode at=1m for=1m fail=1"]`)
	r := recomputing.Disaggregation
	require.Positive(t, r.Failed)
	require.Equal(t, r.Failed, r.Recomputed, "every failed transfer is prefilled again on its decode replica")
	require.Zero(t, recomputing.Requests.Retries)
	require.Equal(t, recomputing.Requests.Arrived, recomputing.Requests.Completed)
}

// A transfer that hangs is heard of only at the decode side's timeout
// (SGLang's waits 300 s): its request waits that long before its retry.
func TestDisaggTransferHang(t *testing.T) {
	rep := pdRun(t, "duration=3m", `faults=["kv-transfer-failure pool=decode at=1m for=30s count=1 fail=1 timeout=20s"]`)
	d := rep.Disaggregation
	require.Positive(t, d.Failed)
	require.GreaterOrEqual(t, rep.Classes["interactive"].E2E.Max, 20.0, "a hung transfer holds its request for the timeout")
	require.Positive(t, rep.Requests.Retries)
}

// A drill's snapshot shows both sides of a split fleet and the link: the
// pools' roles, the prompts under way on the prefill pool, and the decode
// pool's inbound link at the rate a degraded link runs at.
func TestDisaggSnapshotShowsTheLink(t *testing.T) {
	sc, err := scenarios.LoadWithSets("testdata/pd.yaml", []string{`faults=["link-degraded pool=decode at=1m bandwidth=0.5"]`})
	require.NoError(t, err)
	d, err := NewDrill(sc, Options{})
	require.NoError(t, err)
	pools := func() map[string]PoolState {
		out := map[string]PoolState{}
		for _, reg := range d.Snapshot().Regions {
			for _, p := range reg.Pools {
				out[p.Name] = p
			}
		}
		return out
	}
	d.Advance(30 * time.Second)
	ps := pools()
	require.Equal(t, "prefill", ps["prefill"].Role)
	require.Equal(t, "decode", ps["decode"].Role)
	require.Nil(t, ps["prefill"].Link)
	link := ps["decode"].Link
	require.NotNil(t, link)
	require.InDelta(t, 50, link.BandwidthGBs, 1e-9, "rdma: 50 GB/s per GPU, one GPU")
	require.Equal(t, link.OwnGBs, link.BandwidthGBs)

	d.Advance(90 * time.Second) // the fallback since 1m: transfers pile up
	link = pools()["decode"].Link
	require.InDelta(t, 0.5, link.BandwidthGBs, 1e-9)
	require.InDelta(t, 50, link.OwnGBs, 1e-9)
	require.Positive(t, link.Transfers)
}

// A lost decode replica cuts the streams under way on it: they fail,
// unless the policy migrates them (Dynamo's request migration): offered
// again at once to another replica with what they had generated as
// prompt, their stream continued, their TTFT standing.
func TestDisaggMigratesCutStreams(t *testing.T) {
	loss := `faults=["node-loss pool=decode at=2m for=1m count=1"]`
	cut := pdRun(t, "duration=4m", loss)
	require.Positive(t, cut.Requests.Failed, "streams cut on the lost decode replica fail")
	require.Zero(t, cut.Migrations)

	moved := pdRun(t, "duration=4m", loss, "policy.retries.migration_limit=1")
	require.Positive(t, moved.Migrations)
	require.Less(t, moved.Requests.Failed, cut.Requests.Failed)
	require.Equal(t, cut.Requests.Arrived, moved.Requests.Arrived)
	require.Equal(t, cut.Requests.Completed+cut.Requests.Failed-moved.Requests.Failed, moved.Requests.Completed,
		"each migrated stream completes where it would have failed")
}

// A prefill replica keeps a prompt's KV for a decode replica that gave up
// on its failed transfer until its lease runs out (nothing tells it), and
// lets it go at once when a transfer ends: the KV held on the prefill
// pool after a burst of failures is the lease's.
func TestDisaggLeaseHoldsFailedTransfersKV(t *testing.T) {
	sets := func(lease string) []string {
		// recompute keeps the decode replicas serving (fail would open
		// their breakers, and nothing would move).
		return []string{"duration=3m", "pools.prefill.kv_lease_duration=" + lease, "pools.decode.kv_load_failure_policy=recompute",
			`faults=["kv-transfer-failure pool=decode at=1m for=1m fail=1"]`}
	}
	held := func(lease string, at time.Duration) int64 {
		sc, err := scenarios.LoadWithSets("testdata/pd.yaml", sets(lease))
		require.NoError(t, err)
		d, err := NewDrill(sc, Options{})
		require.NoError(t, err)
		d.Advance(at)
		var kv int64
		for ri := range d.r.replicas {
			if rt := &d.r.replicas[ri]; rt.eng != nil {
				kv += rt.eng.KVHeld()
			}
		}
		return kv
	}
	// 30 s into the failures: with a 10-minute lease every failed
	// transfer's KV is still held; with a 1 s lease only the last second's.
	long, short := held("10m", 90*time.Second), held("1s", 90*time.Second)
	require.Greater(t, long, 10*short)
	require.Positive(t, short)
	// Long after the fault, with the default 30 s lease, nothing is held
	// but the transfers under way.
	require.Less(t, held("30s", 150*time.Second), long/10)
}

// The decode replica reserves a prompt's KV before it pulls it (vLLM's
// pull connector): with little KV, transfers wait their turn for room,
// and every request still ends — none is left waiting for KV that frees.
func TestDisaggPullWaitsForDecodeKV(t *testing.T) {
	roomy := pdRun(t, "duration=3m")
	tight := pdRun(t, "duration=3m", "pools.decode.profiles.llama-3.1-8b.kv_tokens=9000")
	require.Zero(t, tight.Requests.InFlightAtEnd, "nothing waits forever for decode KV")
	require.Positive(t, tight.Requests.Completed)
	require.Greater(t, tight.Disaggregation.Transfer.P99, 2*roomy.Disaggregation.Transfer.P99,
		"a transfer waits for its decode replica's KV before it starts")
}
