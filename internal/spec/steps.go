package spec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetdrill/fleetdrill/faults"
	"github.com/fleetdrill/fleetdrill/scenarios"
)

// A step definition: its pattern, a line of documentation and an example
// that matches it (docs/specs.md is generated from this table, and a test
// checks every example against its pattern).
type step struct {
	keyword string // Given, When or Then: how the reference groups it (godog matches any keyword)
	pattern string
	doc     string
	example string

	re *regexp.Regexp
	// do runs a Given or When step, or an outcome that is not an
	// expectation.
	do func(ctx context.Context, w *world, a []string) error
	// exprs gives an outcome's expectations (scenario expect syntax); the
	// outcome passes when they all hold.
	exprs func(w *world, a []string) ([]string, error)
	// fault gives the label of the fault an outcome concerns, for the
	// timeline excerpt of a failure.
	fault func(w *world, a []string) string
	// note says what happened, for the failure message of an outcome
	// whose measured figure alone does not explain it (a tenant's -1
	// mitigation: never mitigated, or nothing to mitigate?). It runs
	// after the run.
	note func(w *world, a []string) string
}

// scope matches an optional window at the end of an outcome: during the
// outage, after the quota exhaustion + 5m, after recovery + 2m,
// during regional-outage(us-east).
const scope = `((?: during| after) .+)?`

// steps is the library, in matching order (set by init: the handlers
// refer back to it).
var steps []*step

func table() []*step {
	return slices.Concat([]*step{
		// The fleet.
		{keyword: "Given", pattern: `^the (?:fleet|scenario) "([^"]+)"$`,
			doc:     "Start from a library scenario (`fleetdrill scenarios list`) or a YAML file, relative to the feature file. Its faults and expectations come with it.",
			example: `Given the fleet "default"`,
			do:      func(_ context.Context, w *world, a []string) error { return w.setFleet(a[0], false) }},
		{keyword: "Given", pattern: `^the library scenario "([^"]+)"$`,
			doc:     "Start from a library scenario, skipping the spec (with the reason) when this build's library does not have it, or when it replays a trace that is not beside the checkout.",
			example: `Given the library scenario "gameday-regional-outage"`,
			do:      func(_ context.Context, w *world, a []string) error { return w.setFleet(a[0], true) }},
		{keyword: "Given", pattern: `^pool (\S+) has (\d+) replicas?$`,
			doc:     "Resize a pool (`--set pools.P.replicas=N`).",
			example: "Given pool use-h100-8b has 2 replicas",
			do: func(_ context.Context, w *world, a []string) error {
				return w.set(fmt.Sprintf("pools.%s.replicas=%s", a[0], a[1]))
			}},
		{keyword: "Given", pattern: `^pool (\S+) runs driver (\S+)$`,
			doc:     "Set a pool's driver version (`--set pools.P.driver=V`).",
			example: "Given pool euw-a100-8b runs driver 550.127.05",
			do: func(_ context.Context, w *world, a []string) error {
				return w.set(fmt.Sprintf("pools.%s.driver=%q", a[0], a[1]))
			}},
		{keyword: "Given", pattern: `^tenant (\S+) is restricted to jurisdiction (\S+)$`,
			doc:     "Bind a tenant's requests to the regions of a jurisdiction (`--set tenants.T.jurisdiction=J`).",
			example: "Given tenant research is restricted to jurisdiction eu",
			do: func(_ context.Context, w *world, a []string) error {
				return w.set(fmt.Sprintf("tenants.%s.jurisdiction=%s", a[0], a[1]))
			}},
		{keyword: "Given", pattern: `^the seed is (\d+)$`,
			doc:     "Set the run seed (`--set seed=N`); every random stream derives from it.",
			example: "Given the seed is 7",
			do:      func(_ context.Context, w *world, a []string) error { return w.set("seed=" + a[0]) }},
		{keyword: "Given", pattern: `^the run lasts (\S+)$`,
			doc:     "Set the simulated time during which requests arrive (`--set duration=D`).",
			example: "Given the run lasts 20m",
			do:      func(_ context.Context, w *world, a []string) error { return w.set("duration=" + a[0]) }},
		{keyword: "Given", pattern: `^the live fleet runs at speed (\S+)(?: with (\d+) replicas? per pool)?$`,
			doc:     "For a @live scenario: the time compression (model seconds per wall second) and at most how many containers each pool gets (`fleetdrill run --live --speed X --replicas N`).",
			example: "Given the live fleet runs at speed 5 with 1 replica per pool",
			do: func(_ context.Context, w *world, a []string) error {
				if !w.live {
					return fmt.Errorf("the live fleet's speed applies to %s scenarios only; tag this one %s", LiveTag, LiveTag)
				}
				v, err := strconv.ParseFloat(a[0], 64)
				if err != nil || v <= 0 || v > 1000 {
					return fmt.Errorf("speed %q: want a number in (0, 1000]", a[0])
				}
				w.speed = v
				if a[1] != "" {
					w.perPool, _ = strconv.Atoi(a[1])
				}
				return nil
			}},
		{keyword: "Given", pattern: `^the setting (\S+) is (.*)$`,
			doc:     "Any other edit, as a `--set path=value` override (docs/scenarios.md); the value is YAML.",
			example: "Given the setting policy.admission.queue_limit is 200",
			do:      func(_ context.Context, w *world, a []string) error { return w.set(a[0] + "=" + a[1]) }},

		// The workload.
		{keyword: "Given", pattern: `^the workload is scaled by (\S+)$`,
			doc:     "Multiply every stream's rate: a synthetic stream's `arrivals.rate`, a trace's `rate_scale`. Takes a factor (1.5) or a percentage (150%).",
			example: "Given the workload is scaled by 1.5",
			do:      scaleWorkload},
		{keyword: "Given", pattern: `^stream (\S+) sends (\S+) requests per second$`,
			doc:     "Set a synthetic stream's mean arrival rate (`--set workload.S.arrivals.rate=R`).",
			example: "Given stream retail-chat sends 3 requests per second",
			do: func(_ context.Context, w *world, a []string) error {
				return w.set(fmt.Sprintf("workload.%s.arrivals.rate=%s", a[0], a[1]))
			}},
		{keyword: "Given", pattern: `^stream (\S+) replays the trace "([^"]+)"$`,
			doc:     "Point a trace stream at another trace file (`--set workload.S.trace.path=F`), relative to the scenario.",
			example: `Given stream chat replays the trace "../shared/traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"`,
			do: func(_ context.Context, w *world, a []string) error {
				return w.set(fmt.Sprintf("workload.%s.trace.path=%q", a[0], a[1]))
			}},

		// The policy.
		{keyword: "Given", pattern: `^the scheduler is (\S+)$`,
			doc:     "Choose the dispatch order: fifo, priority, wfq or edf (`--set policy.scheduler=X`).",
			example: "Given the scheduler is wfq",
			do:      func(_ context.Context, w *world, a []string) error { return w.set("policy.scheduler=" + a[0]) }},
		{keyword: "Given", pattern: `^the routing strategy is (\S+)$`,
			doc:     "Choose how pools are picked: least-loaded, cheapest, round-robin, ordered or lowest-latency (`--set policy.routing.strategy=X`).",
			example: "Given the routing strategy is cheapest",
			do: func(_ context.Context, w *world, a []string) error {
				return w.set("policy.routing.strategy=" + a[0])
			}},
		{keyword: "Given", pattern: `^fallback to smaller models is (on|off)$`,
			doc:     "Allow or forbid falling back to a model's `fallbacks` (`--set policy.routing.fallback=true|false`).",
			example: "Given fallback to smaller models is on",
			do: func(_ context.Context, w *world, a []string) error {
				return w.set("policy.routing.fallback=" + strconv.FormatBool(a[0] == "on"))
			}},
		{keyword: "Given", pattern: `^the routing ignores residency$`,
			doc:     "A deliberately broken policy: route regardless of tenants' jurisdictions (`--set policy.routing.ignore_residency=true`).",
			example: "Given the routing ignores residency",
			do: func(_ context.Context, w *world, _ []string) error {
				return w.set("policy.routing.ignore_residency=true")
			}},
		{keyword: "Given", pattern: `^there are no faults$`,
			doc:     "Drop the scenario's own faults (`--set faults=[]`), for a baseline or to add your own.",
			example: "Given there are no faults",
			do: func(_ context.Context, w *world, _ []string) error {
				if err := w.requireFleet(); err != nil {
					return err
				}
				w.faults, w.edited = nil, true
				return nil
			}},
		{keyword: "Given", pattern: `^the fleet's own expectations are dropped$`,
			doc:     "Clear the scenario's expect list (`--set expect=[]`): `every expectation of the scenario holds` then holds trivially. (A failure's reproduce command judges only what the failing step judged either way.)",
			example: "Given the fleet's own expectations are dropped",
			do:      func(_ context.Context, w *world, _ []string) error { return w.set("expect=[]") }},

		// Route versions (canary.go): a canary's or a shadow's candidate
		// pools are reachable only through it.
		{keyword: "Given", pattern: `^a canary of "([^"]+)" at (\S+)(?: for "([^"]+)")?$`,
			doc: "Send a fixed share (a fraction or a percentage) of the eligible traffic of the pool's model to the candidate pool (or pools, comma-separated), for one tenant or every tenant whose jurisdiction it may serve; the other pools of the model are the baseline. " +
				"Its checks, from the start of the run: `" + canaryErrorTrigger + "`, and `" + canaryTTFTTrigger + "` when a class has a TTFT objective, judged every 30s over a 2m window of at least 20 canary attempts; a breach rolls it back to 0. " +
				"It replaces the fleet's own canaries (`--set canaries=[...]`).",
			example: `Given a canary of "neo-h100" at 5% for "retail"`,
			do:      addCanary},
		{keyword: "Given", pattern: `^shadow traffic of (\S+) to "([^"]+)"(?: for "([^"]+)")?$`,
			doc:     "Mirror a share of the eligible traffic to the candidate pool: the shadow of its canary, or a shadow-only route (no canary share) when the steps added none. Copies' answers are discarded, outside the tenants' quotas and the run's request counts, and the first shed.",
			example: `Given shadow traffic of 10% to "neo-h100"`,
			do:      addShadow},
	}, autoscaleGivens(), []*step{
		// Faults. Times are from the start of the run; a fault without "for"
		// lasts to the end.
		{keyword: "When", pattern: `^region (\S+) goes down at (\S+)(?: for (\S+))?$`,
			doc:     "A regional outage: every replica of the region's pools goes down and swallows connections.",
			example: "When region us-east goes down at 10m for 15m",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.RegionalOutage, "region="+a[0], "at="+a[1], opt("for", a[2])))
			}},
		{keyword: "When", pattern: `^the quota of provider (\S+) is exhausted at (\S+)(?: for (\S+))?$`,
			doc:     "Quota exhaustion: the provider's rate limit drops to zero; requests over it are refused with a 429.",
			example: "When the quota of provider gpu-cloud-a is exhausted at 20m for 10m",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.QuotaExhaustion, "provider="+a[0], "at="+a[1], opt("for", a[2])))
			}},
		{keyword: "When", pattern: `^the quota of (provider|pool) (\S+) drops to (\S+) requests and (\S+) tokens per minute at (\S+)(?: for (\S+))?$`,
			doc:     "A quota cut rather than to zero: the provider's or pool's limits drop to these rates.",
			example: "When the quota of pool use-h100-8b drops to 60 requests and 90000 tokens per minute at 5m for 10m",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.QuotaExhaustion, a[0]+"="+a[1], "rpm="+a[2], "tpm="+a[3], "at="+a[4], opt("for", a[5])))
			}},
		{keyword: "When", pattern: `^model (\S+) is retired at (\S+)(?: with (\S+) notice)?$`,
			doc:     "Model retirement: the model is withdrawn from every pool at the time; with notice, new requests are steered to its fallbacks that long before.",
			example: "When model llama-3.1-70b is retired at 30m with 10m notice",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.ModelRetirement, "model="+a[0], "at="+a[1], opt("notice", a[2])))
			}},
		{keyword: "When", pattern: `^pool (\S+) upgrades its driver to (\S+) at (\S+)(?: for (\S+))?$`,
			doc:     "Driver upgrade: the pool's replicas restart on the new driver; models it cannot serve are dropped. \"for\" rolls it back.",
			example: "When pool use-h100-8b upgrades its driver to 560.28 at 40m",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.DriverUpgrade, "pool="+a[0], "driver="+a[1], "at="+a[2], opt("for", a[3])))
			}},
		{keyword: "When", pattern: `^pool (\S+) upgrades its driver to (\S+) and its runtime to (\S+) at (\S+)(?: for (\S+))?$`,
			doc:     "Driver and runtime upgrade together (the runtime must be one of the scenario's).",
			example: "When pool use-h100-8b upgrades its driver to 570.124.06 and its runtime to vllm-0.8.5 at 10m",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.DriverUpgrade, "pool="+a[0], "driver="+a[1], "runtime="+a[2], "at="+a[3], opt("for", a[4])))
			}},
		{keyword: "When", pattern: `^(\d+) replicas? of pool (\S+) (?:is|are) lost at (\S+)(?: for (\S+))?$`,
			doc:     "Node loss: replicas fail and refuse connections; after \"for\" they come back and cold-start.",
			example: "When 2 replicas of pool use-h100-8b are lost at 12m for 20m",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.NodeLoss, "pool="+a[1], "count="+a[0], "at="+a[2], opt("for", a[3])))
			}},
		{keyword: "When", pattern: `^(region|pool) (\S+) browns out at (\S+)(?: for (\S+))?(?: with (\S+) of requests failing)?(?: (?:with|and) (\S+) added latency)?$`,
			doc:     "A brownout: the region or pool fails a share of requests (a fraction or a percentage) and/or adds latency to every one; say either or both.",
			example: "When region eu-west browns out at 10m for 5m with 20% of requests failing and 2s added latency",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addBrownout(a[0]+"="+a[1], a[2:])
			}},
		{keyword: "When", pattern: `^(\d+) replicas? of pool (\S+) browns? out at (\S+)(?: for (\S+))?(?: with (\S+) of requests failing)?(?: (?:with|and) (\S+) added latency)?$`,
			doc:     "A brownout of some of a pool's replicas, drawn from the seed (`brownout pool=P count=N ...`): they fail a share of requests and/or add latency to every one; say either or both. The pool's other replicas are untouched: what latency outlier ejection is for.",
			example: "When 1 replica of pool use-h100-8b browns out at 10m for 5m with 2s added latency",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addBrownout("pool="+a[1], a[2:], "count="+a[0])
			}},
		{keyword: "When", pattern: `^(region|pool|model) (\S+) adds (\S+) (?:of )?latency at (\S+)(?: for (\S+))?$`,
			doc:     "Latency injection: every request to the region, pool or model takes this much longer.",
			example: "When pool use-h100-8b adds 500ms latency at 5m for 5m",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.Latency, a[0]+"="+a[1], "latency="+a[2], "at="+a[3], opt("for", a[4])))
			}},
		{keyword: "When", pattern: `^(region|pool|model) (\S+) fails (\S+) of requests at (\S+)(?: for (\S+))?$`,
			doc:     "An error burst: a share of the requests to the region, pool or model fail (a fraction or a percentage).",
			example: "When pool use-h100-8b fails 40% of requests at 5m for 2m",
			do: func(_ context.Context, w *world, a []string) error {
				fail, err := failShare(a[2])
				if err != nil {
					return err
				}
				return w.addFault(fault(faults.ErrorBurst, a[0]+"="+a[1], "fail="+fail, "at="+a[3], opt("for", a[4])))
			}},
		// The KV link of a disaggregated fleet (twin/kvlink).
		{keyword: "When", pattern: `^the KV link into (region|pool) (\S+) falls back to (\S+) GB/s at (\S+)(?: for (\S+))?$`,
			doc:     "A degraded P/D link: the KV transfers into the decode pool's (or region's decode pools') replicas move this many GB/s per GPU, as RDMA falling back to TCP does (`link-degraded ... bandwidth=`).",
			example: "When the KV link into pool use-h100-decode falls back to 0.5 GB/s at 15m for 10m",
			do: func(_ context.Context, w *world, a []string) error {
				return w.addFault(fault(faults.LinkDegraded, a[0]+"="+a[1], "bandwidth="+a[2], "at="+a[3], opt("for", a[4])))
			}},
		{keyword: "When", pattern: `^(\S+) of the KV transfers into (region|pool) (\S+) fail at (\S+)(?: for (\S+))?(?: and hang for (\S+))?$`,
			doc:     "KV transfer failures: a share of the transfers into the decode pool's replicas fail (a fraction or a percentage), heard of when they would have ended or, when they hang, after the decode side's timeout (`kv-transfer-failure ... fail= [timeout=]`).",
			example: "When 10% of the KV transfers into pool use-h100-decode fail at 5m for 5m and hang for 300s",
			do: func(_ context.Context, w *world, a []string) error {
				fail, err := failShare(a[0])
				if err != nil {
					return err
				}
				return w.addFault(fault(faults.KVTransferFailure, a[1]+"="+a[2], "fail="+fail, "at="+a[3], opt("for", a[4]), opt("timeout", a[5])))
			}},
		{keyword: "When", pattern: `^the fault "([^"]+)" is injected$`,
			doc:     "Any fault, as a line of the fault syntax (docs/faults.md).",
			example: `When the fault "brownout region=us-east at=10m for=5m fail=0.2" is injected`,
			do:      func(_ context.Context, w *world, a []string) error { return w.addFault(a[0]) }},
	}, autoscaleFaults(), []*step{

		// Outcomes. The first outcome runs the scenario on the twin; a window
		// ("during the outage", "after the outage + 5m", "after recovery")
		// names a fault by its kind (the last one of that kind) or by its
		// label, regional-outage(us-east).
		{keyword: "Then", pattern: `^(\S+) p(50|90|95|99) (TTFT|TPOT|E2E|queue wait) stays below (\S+)` + scope + `$`,
			doc:     "A latency percentile of a class (time to first token, per output token, end to end, or waiting in the gateway's queue), over the run or a window.",
			example: "Then interactive p99 TTFT stays below 2s during the outage",
			exprs: func(w *world, a []string) ([]string, error) {
				metric := map[string]string{"TTFT": "ttft", "TPOT": "tpot", "E2E": "e2e", "queue wait": "queue_wait"}[a[2]]
				return scoped(w, a[4], fmt.Sprintf("%s.%s.p%s < %s", a[0], metric, a[1], a[3]))
			},
			fault: scopeFault(4)},
		{keyword: "Then", pattern: `^(\S+) SLO attainment is at least (\S+)` + scope + `$`,
			doc:     "The share of a class's finished requests that met every objective (a fraction or a percentage).",
			example: "Then interactive SLO attainment is at least 99% after the outage + 5m",
			exprs: func(w *world, a []string) ([]string, error) {
				v, err := fraction(a[1])
				if err != nil {
					return nil, err
				}
				return scoped(w, a[2], fmt.Sprintf("%s.slo_attainment >= %g", a[0], v))
			},
			fault: scopeFault(2)},
		{keyword: "Then", pattern: `^pool (\S+) serves at (least|most) (\S+) of the requests` + scope + `$`,
			doc:     "A pool's share of the requests completed in a window (a fraction or a percentage): where the traffic went while a fault was active, or after it.",
			example: "Then pool use-h100-8b serves at least 90% of the requests during the outage",
			exprs: func(w *world, a []string) ([]string, error) {
				if strings.TrimSpace(a[3]) == "" {
					return nil, fmt.Errorf("a pool's share is of a window's requests: end the step with during or after a fault, e.g. %q", "during the outage")
				}
				v, err := fraction(a[2])
				if err != nil || v < 0 || v > 1 {
					return nil, fmt.Errorf("share %q: want a fraction in [0, 1] or a percentage", a[2])
				}
				op := ">="
				if a[1] == "most" {
					op = "<="
				}
				return scoped(w, a[3], fmt.Sprintf("pools.%s.share %s %g", a[0], op, v))
			},
			fault: scopeFault(3)},
		{keyword: "Then", pattern: `^no request leaves its jurisdiction$`,
			doc:     "Residency holds: no request was served outside its tenant's jurisdiction.",
			example: "Then no request leaves its jurisdiction",
			exprs:   func(*world, []string) ([]string, error) { return []string{"residency_violations == 0"}, nil }},
		{keyword: "Then", pattern: `^every request is accounted for$`,
			doc:     "Every request that arrived was counted once (rejected, completed, failed, cancelled, timed out or in flight at the end), for the run, each class, each tenant and each window.",
			example: "Then every request is accounted for",
			do:      accounted},
		{keyword: "Then", pattern: `^the gateway detects (.+) within (\S+)$`,
			doc:     "The fault was detected (a breaker opening, or the first 429 or retirement refusal) within this long of its start.",
			example: "Then the gateway detects the outage within 30s",
			exprs:   faultTime("time_to_detect_s", 0, 1),
			fault:   faultArg(0)},
		{keyword: "Then", pattern: `^the gateway mitigates (.+) for (tenant|class) (\S+) within (\S+)$`,
			doc:     "After detection, a request of the tenant (or class) the fault displaced was served elsewhere within this long of the fault's start. Fails for one never served elsewhere, such as a tenant bound to a dark region, or one the fault displaced nothing of.",
			example: "Then the gateway mitigates the outage for tenant bank-eu within 30s",
			exprs:   impactTime("time_to_mitigate_s"),
			fault:   faultArg(0),
			note:    impactNote(0, 1, 2)},
		{keyword: "Then", pattern: `^the fleet recovers from (.+) for (tenant|class) (\S+) within (\S+)$`,
			doc:     "A request of the tenant (or class) was served again within this long of the fault's end.",
			example: "Then the fleet recovers from the outage for tenant bank-eu within 1m",
			exprs:   impactTime("time_to_recover_s"),
			fault:   faultArg(0),
			note:    impactNote(0, 1, 2)},
		{keyword: "Then", pattern: `^the gateway mitigates (.+) within (\S+)$`,
			doc:     "After detection, a request was served by an unaffected replica within this long of the fault's start.",
			example: "Then the gateway mitigates the outage within 2m",
			exprs:   faultTime("time_to_mitigate_s", 0, 1),
			fault:   faultArg(0)},
		{keyword: "Then", pattern: `^the fleet recovers from (.+) within (\S+)$`,
			doc:     "An affected replica served a request again within this long of the fault's end.",
			example: "Then the fleet recovers from the outage within 5m",
			exprs:   faultTime("time_to_recover_s", 0, 1),
			fault:   faultArg(0)},
		{keyword: "Then", pattern: `^at most (\d+) requests? (?:is|are) lost during (.+)$`,
			doc:     "Requests that ended without an answer (failed, rejected or timed out) while the fault was active.",
			example: "Then at most 50 requests are lost during the quota exhaustion",
			exprs: func(w *world, a []string) ([]string, error) {
				l, err := w.labelFor(a[1])
				if err != nil {
					return nil, err
				}
				return []string{fmt.Sprintf("faults.%s.requests_lost <= %s", l, a[0])}, nil
			},
			fault: faultArg(1)},
		{keyword: "Then", pattern: `^no request is lost during (.+)$`,
			doc:     "Every request that arrived while the fault was active got an answer.",
			example: "Then no request is lost during the driver upgrade",
			exprs: func(w *world, a []string) ([]string, error) {
				l, err := w.labelFor(a[0])
				if err != nil {
					return nil, err
				}
				return []string{fmt.Sprintf("faults.%s.requests_lost == 0", l)}, nil
			},
			fault: faultArg(0)},
		{keyword: "Then", pattern: `^(tenant|class) (\S+) loses (no|at most \d+) requests? during (.+)$`,
			doc:     "Requests of the tenant (or class) that arrived while the fault was active and got no answer (refused, failed or timed out).",
			example: "Then tenant bank-eu loses at most 5 requests during the outage",
			exprs: func(w *world, a []string) ([]string, error) {
				p, err := w.impactPath(a[3], a[0], a[1])
				if err != nil {
					return nil, err
				}
				n := "0"
				if a[2] != "no" {
					n = strings.TrimPrefix(a[2], "at most ")
				}
				return []string{p + ".lost <= " + n}, nil
			},
			fault: faultArg(3),
			note:  impactNote(3, 0, 1)},
		{keyword: "Then", pattern: `^no request of (tenant|class) (\S+) times out during (.+)$`,
			doc:     "No request of the tenant (or class) that arrived while the fault was active waited out its deadline: those that cannot be served are refused fast.",
			example: "Then no request of tenant bank-eu times out during the outage",
			exprs: func(w *world, a []string) ([]string, error) {
				p, err := w.impactPath(a[2], a[0], a[1])
				if err != nil {
					return nil, err
				}
				return []string{p + ".timed_out == 0"}, nil
			},
			fault: faultArg(2),
			note:  impactNote(2, 0, 1)},
		{keyword: "Then", pattern: `^(tenant|class) (\S+) is served (elsewhere|in pool \S+|by model \S+) during (.+)$`,
			doc:     "Requests of the tenant (or class) the fault displaced were completed by a replica it did not hit (a retirement: by a fallback model): at least one, or at least one in that pool or by that model. Pair it with a loss bound for the rest.",
			example: "Then class interactive is served by model llama-3.1-8b during the retirement",
			do:      servedElsewhere},
		{keyword: "Then", pattern: `^(tenant|class) (\S+) SLO attainment is at least (\S+) (during|after) (.+)$`,
			doc:     "The share of the tenant's (or class's) requests that met every objective (a request with no answer is a miss), of those arriving while the fault was active, or in the ten minutes after it ended.",
			example: "Then tenant bank-eu SLO attainment is at least 99% during the outage",
			exprs: func(w *world, a []string) ([]string, error) {
				if strings.Contains(a[4], "+") {
					return nil, fmt.Errorf("%q: a %s's attainment after a fault is over the ten minutes after it ended, with no offset; write after %s, or the report shows for a window of the whole fleet", a[4], a[0], strings.TrimSpace(strings.Split(a[4], "+")[0]))
				}
				p, err := w.impactPath(a[4], a[0], a[1])
				if err != nil {
					return nil, err
				}
				v, err := fraction(a[2])
				if err != nil {
					return nil, fmt.Errorf("attainment %q: want a fraction (0.99) or a percentage (99%%)", a[2])
				}
				return []string{fmt.Sprintf("%s.slo_attainment_%s >= %g", p, a[3], v)}, nil
			},
			fault: faultArg(4),
			note:  impactNote(4, 0, 1)},
		{keyword: "Then", pattern: `^at most (\d+) requests are rejected$`,
			doc:     "Requests rejected over the whole run (queue full, quota, no route).",
			example: "Then at most 10 requests are rejected",
			exprs: func(_ *world, a []string) ([]string, error) {
				return []string{"requests.rejected <= " + a[0]}, nil
			}},
		{keyword: "Then", pattern: `^at most (\d+) requests? times? out` + scope + `$`,
			doc:     "Requests that waited out their deadline, over the run or a window.",
			example: "Then at most 20 requests time out during the outage",
			exprs: func(w *world, a []string) ([]string, error) {
				return scoped(w, a[1], "requests.timed_out <= "+a[0])
			},
			fault: scopeFault(1)},
		{keyword: "Then", pattern: `^no request times out` + scope + `$`,
			doc:     "No request waited out its deadline, over the run or a window.",
			example: "Then no request times out after the outage + 5m",
			exprs: func(w *world, a []string) ([]string, error) {
				return scoped(w, a[0], "requests.timed_out == 0")
			},
			fault: scopeFault(0)},
		{keyword: "Then", pattern: `^a breaker opens(?: on pool (\S+))?(?: during (.+))?$`,
			doc:     "The gateway's circuit breaker opened on a replica (of the pool), over the run or while the fault was active; read from the timeline's breaker-open entries.",
			example: "Then a breaker opens on pool euw-a100-8b during the outage",
			do:      breakerOpens(true)},
		{keyword: "Then", pattern: `^no breaker opens(?: on pool (\S+))?(?: during (.+))?$`,
			doc:     "No circuit breaker opened (on the pool), over the run or while the fault was active; a failure lists those that did.",
			example: "Then no breaker opens on pool use-h100-8b",
			do:      breakerOpens(false)},
		{keyword: "Then", pattern: `^(\S+) requests complete within their deadline$`,
			doc:     "No request of the class timed out or failed.",
			example: "Then batch requests complete within their deadline",
			exprs: func(_ *world, a []string) ([]string, error) {
				return []string{a[0] + ".timed_out == 0", a[0] + ".failed == 0"}, nil
			}},
		{keyword: "Then", pattern: `^batch jobs complete within their window$`,
			doc:     "Every GPU job submitted (the scenario's `jobs:` streams) completed within its window.",
			example: "Then batch jobs complete within their window",
			do:      jobsInWindow},
		{keyword: "Then", pattern: `^the canary(?: "([^"]+)")? is rolled back within (\S+)$`,
			doc:     "The canary (the one the steps added, or the fleet's only one) went back to 0 within this long of the start of the last fault on its candidate pools (`canaries.NAME.time_to_rollback_s`). Fails saying the time measured, or that it was not rolled back, or rolled back before any fault, with its decisions and why.",
			example: "Then the canary is rolled back within 2m30s",
			do:      rolledBack(true)},
		{keyword: "Then", pattern: `^the canary(?: "([^"]+)")? is not rolled back$`,
			doc:     "The canary was never rolled back, whatever the faults; a failure says when and why it was.",
			example: `Then the canary "neo-h100" is not rolled back`,
			do:      rolledBack(false)},
		{keyword: "Then", pattern: `^shadow traffic never reaches the tenant$`,
			doc:     "Shadow copies are invisible to clients: the run's requests, classes and tenants count exactly the requests the clients sent, no copy was served outside its tenant's jurisdiction, and with every canary's share held at 0 the scenario run with its shadows and without them gives byte-identical requests, classes and tenants (two more twin runs).",
			example: "Then shadow traffic never reaches the tenant",
			do:      shadowInvisible},
	}, moreOutcomes(), autoscaleOutcomes(), []*step{
		{keyword: "Then", pattern: `^the report shows (.+)$`,
			doc:     "Any expectation of the scenario syntax (docs/scenarios.md#expect), scoped or not.",
			example: "Then the report shows during regional-outage(us-east): requests.timed_out <= 100",
			exprs: func(_ *world, a []string) ([]string, error) {
				return []string{strings.Trim(a[0], `"`)}, nil
			},
			fault: func(w *world, a []string) string {
				e := strings.Trim(a[0], `"`)
				if rest, ok := strings.CutPrefix(e, "during "); ok {
					l, _, _ := strings.Cut(rest, ":")
					return strings.TrimSpace(l)
				}
				return ""
			}},
		{keyword: "Then", pattern: `^every expectation of the scenario holds$`,
			doc:     "The scenario's own expect list passes, as fleetdrill run would judge it.",
			example: "Then every expectation of the scenario holds",
			exprs:   func(w *world, _ []string) ([]string, error) { return w.baseExpect(), nil }},
	})
}

func init() {
	steps = table()
	for _, s := range steps {
		s.re = regexp.MustCompile(s.pattern)
	}
}

// match finds the step definition a text matches, as godog does (the
// first one), and its arguments.
func match(text string) (*step, []string) {
	for _, s := range steps {
		if m := s.re.FindStringSubmatch(text); m != nil {
			return s, m[1:]
		}
	}
	return nil, nil
}

// exampleText is the example without its keyword.
func exampleText(s *step) string {
	_, rest, _ := strings.Cut(s.example, " ")
	return rest
}

func fault(kind faults.Kind, kv ...string) string {
	parts := []string{string(kind)}
	for _, s := range kv {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

func opt(key, v string) string {
	if v == "" {
		return ""
	}
	return key + "=" + v
}

// scoped prefixes an expectation with its window, if the step names one.
func scoped(w *world, phrase, expr string) ([]string, error) {
	phrase = strings.TrimSpace(phrase)
	if phrase == "" {
		return []string{expr}, nil
	}
	word, rest, _ := strings.Cut(phrase, " ")
	what, offset, hasOffset := strings.Cut(rest, "+")
	what = strings.TrimSpace(what)
	if word == "during" && hasOffset {
		return nil, fmt.Errorf("%q: a during window takes no offset", phrase)
	}
	label := "recovery"
	if what != "recovery" {
		l, err := w.labelFor(what)
		if err != nil {
			return nil, err
		}
		label = l
	}
	prefix := word + " " + label
	if hasOffset {
		prefix += " + " + strings.TrimSpace(offset)
	}
	return []string{prefix + ": " + expr}, nil
}

func scopeFault(i int) func(w *world, a []string) string {
	return func(w *world, a []string) string {
		_, rest, _ := strings.Cut(strings.TrimSpace(a[i]), " ")
		what, _, _ := strings.Cut(rest, "+")
		l, _ := w.labelFor(strings.TrimSpace(what))
		return l
	}
}

func faultArg(i int) func(w *world, a []string) string {
	return func(w *world, a []string) string {
		l, _ := w.labelFor(a[i])
		return l
	}
}

// faultTime checks a fault's time figure: it happened (not -1) and took at
// most the given duration.
func faultTime(field string, faultIdx, durIdx int) func(w *world, a []string) ([]string, error) {
	return func(w *world, a []string) ([]string, error) {
		l, err := w.labelFor(a[faultIdx])
		if err != nil {
			return nil, err
		}
		p := fmt.Sprintf("faults.%s.%s", l, field)
		return []string{p + " >= 0", p + " <= " + a[durIdx]}, nil
	}
}

func fraction(s string) (float64, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		return v / 100, err
	}
	return strconv.ParseFloat(s, 64)
}

func scaleWorkload(_ context.Context, w *world, a []string) error {
	if err := w.requireFleet(); err != nil {
		return err
	}
	k, err := fraction(a[0])
	if err != nil || k <= 0 {
		return fmt.Errorf("scale %q: want a factor > 0 (1.5) or a percentage (150%%)", a[0])
	}
	sc, err := w.load(nil)
	if err != nil {
		return err
	}
	return w.set(scenarios.ScaleWorkloadSets(sc, k)...)
}

func accounted(ctx context.Context, w *world, _ []string) error {
	if err := w.run(ctx); err != nil {
		return err
	}
	if err := w.rep.CheckAccounting(); err != nil {
		return fmt.Errorf("%w\n  scenario: %s, seed %d\n%s  reproduce: %s",
			err, w.sc.Name, w.sc.Seed, w.timelineExcerpt(""), w.repro(nil))
	}
	return nil
}

func jobsInWindow(ctx context.Context, w *world, _ []string) error {
	if err := w.run(ctx); err != nil {
		return err
	}
	if len(w.rep.Jobs) == 0 {
		return errors.New("the scenario has no GPU jobs (jobs:); for batch requests write: Then batch requests complete within their deadline")
	}
	var exprs []string
	for _, k := range slices.Sorted(maps.Keys(w.rep.Jobs)) {
		exprs = append(exprs, fmt.Sprintf("jobs.%s.completed_in_window >= %d", k, w.rep.Jobs[k].Submitted))
	}
	return w.check(ctx, exprs, "", nil)
}

// addBrownout adds a brownout of scope (region=R, pool=P) from a step's
// captures at, for, fail share and added latency (either or both must be
// said), with extra arguments (a replica count) after the scope.
func (w *world) addBrownout(scope string, a []string, extra ...string) error {
	at, dur, failing, latency := a[0], a[1], a[2], a[3]
	if failing == "" && latency == "" {
		return fmt.Errorf("a brownout needs what it does: end the step with \"with 20%% of requests failing\", \"with 2s added latency\" or both (\"with 20%% of requests failing and 2s added latency\")")
	}
	fail, err := failShare(failing)
	if err != nil {
		return err
	}
	args := append([]string{scope}, extra...)
	args = append(args, "at="+at, opt("for", dur), opt("fail", fail), opt("latency", latency))
	return w.addFault(fault(faults.Brownout, args...))
}
