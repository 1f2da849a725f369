package scenarios

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetdrill/fleetdrill/internal/modelfile"
	"github.com/fleetdrill/fleetdrill/internal/suggest"
	"github.com/fleetdrill/fleetdrill/traces"
	"github.com/fleetdrill/fleetdrill/twin/dispatch"
	"github.com/fleetdrill/fleetdrill/twin/fleet"
	"github.com/fleetdrill/fleetdrill/twin/kvlink"
	"github.com/fleetdrill/fleetdrill/twin/latency"
	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// Enumerations, in the order the docs and messages list them.
var (
	// The scheduler core's own lists: a name it accepts is one the
	// validator accepts, and no other.
	schedulers        = dispatch.Policies()
	routingStrategies = sched.Strategies
	processes         = []string{"poisson", "gamma"}
	tokenDists        = []string{"constant", "uniform", "exponential", "lognormal"}
	serviceDists      = []string{"exponential", "deterministic"}
	jobKinds          = []string{"training", "fine-tuning", "batch-embedding"}
	jobTraceFormats   = []string{"alibaba-pod"}
	degradeActions    = []string{"shed-batch", "cap-output", "smaller-model", "cached-answers", "defer-async"}
	poolRoles         = []string{"both", "prefill", "decode"}
	deciders          = []string{"always", "conditional", "never"}
	// traceFormats are the request-trace formats internal/trace reads.
	traceFormats = []string{"azure", "mooncake", "burstgpt", "canonical"}
	// precisions are the ones the compatibility registry knows.
	precisions = fleet.Precisions
)

// namePattern is what every name (and jurisdiction, provider, cohort) must
// match: it appears in field paths (pools.use-h100.replicas), expectation
// names (tenants.acme.e2e.p95) and reports, so it cannot hold spaces,
// brackets or '='. Dots are allowed because model versions use them.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

const maxNameLen = 64

// versionPattern is a dotted version of numbers: 550.54, 12.4, 535.104.05.
var versionPattern = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,9})*$`)

type validator struct {
	d *decoder
	s *Scenario
}

// add records a problem unless the value at path (or above it) could not be
// decoded at all: that problem is already reported and a second one about
// the zero value left behind would only confuse.
func (v *validator) add(path, value, msg string) {
	for p := path; ; {
		if v.d.bad[p] {
			return
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	line, set := v.d.ix.locate(path)
	v.d.problems = append(v.d.problems, Problem{File: v.d.file, Line: line, Path: path, Value: value, Msg: msg, Set: set})
}

func num(f float64) string      { return strconv.FormatFloat(f, 'g', -1, 64) }
func q(s string) string         { return strconv.Quote(s) }
func at(p string, i int) string { return fmt.Sprintf("%s[%d]", p, i) }

// oneOf renders the allowed values of an enumeration or reference.
func oneOf(allowed []string) string {
	if len(allowed) == 0 {
		return "none are defined"
	}
	const most = 12
	if len(allowed) > most {
		return strings.Join(allowed[:most], ", ") + fmt.Sprintf(", ... (%d in all)", len(allowed))
	}
	return strings.Join(allowed, ", ")
}

// enum checks that s is one of allowed.
func (v *validator) enum(path, s string, allowed []string) {
	switch {
	case s == "":
		v.add(path, "", "missing; want one of "+oneOf(allowed))
	case !slices.Contains(allowed, s):
		v.add(path, q(s), "want one of "+oneOf(allowed))
	}
}

// name checks one name-like value; required says whether it may be empty.
func (v *validator) name(path, s string, required bool) {
	switch {
	case s == "":
		if required {
			v.add(path, "", "missing; want a name such as use-h100")
		}
	case len(s) > maxNameLen:
		v.add(path, q(s[:20]+"..."), fmt.Sprintf("want at most %d characters", maxNameLen))
	case !namePattern.MatchString(s):
		v.add(path, q(s), "want letters, digits, '.', '-' and '_', starting with a letter or digit")
	}
}

// names checks the names of one list and returns name → index of the first
// entry with that name.
func (v *validator) names(list string, n int, nameOf func(int) string) map[string]int {
	if n == 0 {
		v.add(list, "", "missing; want at least one entry")
	}
	idx := make(map[string]int, n)
	for i := range n {
		p := at(list, i) + ".name"
		nm := nameOf(i)
		v.name(p, nm, true)
		if nm == "" {
			continue
		}
		if first, dup := idx[nm]; dup {
			v.add(p, q(nm), fmt.Sprintf("want a unique name; %s[%d] has it already", list, first))
			continue
		}
		idx[nm] = i
	}
	return idx
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ref checks that s names an entry of a list (kind is e.g. "region").
func (v *validator) ref(path, s string, known map[string]int, kind string) bool {
	if s == "" {
		v.add(path, "", fmt.Sprintf("missing; want the name of a %s: %s", kind, oneOf(sortedKeys(known))))
		return false
	}
	if _, ok := known[s]; !ok {
		msg := fmt.Sprintf("no such %s; want one of %s", kind, oneOf(sortedKeys(known)))
		if near := suggest.Nearest(s, sortedKeys(known), 1); len(near) > 0 {
			msg = fmt.Sprintf("no such %s; did you mean %q? (%ss: %s)", kind, near[0], kind, oneOf(sortedKeys(known)))
		}
		v.add(path, q(s), msg)
		return false
	}
	return true
}

// refs checks a list of references: each resolves and none repeats.
func (v *validator) refs(path string, list []string, known map[string]int, kind string, required bool) {
	if len(list) == 0 && required {
		v.add(path, "", fmt.Sprintf("missing; want a list of %ss: %s", kind, oneOf(sortedKeys(known))))
	}
	seen := map[string]int{}
	for i, s := range list {
		p := at(path, i)
		if j, dup := seen[s]; dup {
			v.add(p, q(s), fmt.Sprintf("listed twice; first at %s", at(path, j)))
			continue
		}
		seen[s] = i
		v.ref(p, s, known, kind)
	}
}

// Numeric checks. Each also refuses NaN and infinities, which YAML can
// spell (.nan, .inf) but no quantity here can be.

func (v *validator) positive(path string, f float64) {
	if !finite(f) || f <= 0 {
		v.add(path, num(f), "want > 0")
	}
}

func (v *validator) nonNegative(path string, f float64) {
	if !finite(f) || f < 0 {
		v.add(path, num(f), "want >= 0")
	}
}

func (v *validator) atLeast(path string, i, lo int) {
	if i < lo {
		v.add(path, strconv.Itoa(i), fmt.Sprintf("want >= %d", lo))
	}
}

func (v *validator) unit(path string, f float64, openLow bool) {
	if !finite(f) || f > 1 || f < 0 || (openLow && f == 0) {
		if openLow {
			v.add(path, num(f), "want a fraction in (0, 1]")
		} else {
			v.add(path, num(f), "want a number in [0, 1]")
		}
	}
}

func (v *validator) nonNegDuration(path string, d Duration) {
	if d < 0 {
		v.add(path, d.String(), "want a duration >= 0")
	}
}

// version checks a dotted version; required says whether it may be empty.
func (v *validator) version(path, s, example string, required bool) {
	switch {
	case s == "":
		if required {
			v.add(path, "", "missing; want a dotted version such as "+example)
		}
	case !versionPattern.MatchString(s):
		v.add(path, q(s), "want a dotted version of numbers such as "+example)
	}
}

func validVersion(s string) bool { return versionPattern.MatchString(s) }

// validate checks the whole scenario, after defaults, adding every problem.
func (v *validator) validate() {
	s := v.s
	switch {
	case s.Schema == 0:
		v.add("schema", "", fmt.Sprintf("missing; want schema: %d, the version this build reads", SchemaVersion))
	case s.Schema != SchemaVersion:
		v.add("schema", strconv.Itoa(s.Schema), fmt.Sprintf("want %d; this build reads schema version %d only", SchemaVersion, SchemaVersion))
	}
	v.name("name", s.Name, true)
	if s.Duration <= 0 {
		v.add("duration", s.Duration.String(), "want > 0: the simulated time during which requests arrive, e.g. 30m")
	}
	switch {
	case s.Warmup < 0:
		v.add("warmup", s.Warmup.String(), "want a duration >= 0")
	case s.Duration > 0 && s.Warmup >= s.Duration:
		v.add("warmup", s.Warmup.String(), fmt.Sprintf("want less than duration (%s), or nothing would be reported", s.Duration))
	}
	v.nonNegDuration("drain", s.Drain)

	regions := v.names("regions", len(s.Regions), func(i int) string { return s.Regions[i].Name })
	jurisdictions := map[string]int{}
	for i, r := range s.Regions {
		p := at("regions", i) + ".jurisdiction"
		if r.Jurisdiction == "" {
			v.add(p, "", "missing; want a data-residency tag such as eu or us")
			continue
		}
		v.name(p, r.Jurisdiction, true)
		if _, ok := jurisdictions[r.Jurisdiction]; !ok {
			jurisdictions[r.Jurisdiction] = i
		}
	}

	accels := v.names("accelerators", len(s.Accelerators), func(i int) string { return s.Accelerators[i].Name })
	for i, a := range s.Accelerators {
		p := at("accelerators", i)
		v.positive(p+".memory_gib", a.MemoryGiB)
		v.unit(p+".usable_fraction", a.UsableFraction, true)
		v.nonNegative(p+".bandwidth_gbs", a.BandwidthGBs)
		if len(a.Precisions) == 0 {
			v.add(p+".precisions", "", "missing; want a list of "+oneOf(precisions))
		}
		seen := map[string]bool{}
		for j, pr := range a.Precisions {
			pp := at(p+".precisions", j)
			if seen[pr] {
				v.add(pp, q(pr), "listed twice")
				continue
			}
			seen[pr] = true
			v.enum(pp, pr, precisions)
		}
	}

	runtimes := v.names("runtimes", len(s.Runtimes), func(i int) string { return s.Runtimes[i].Name })
	for i, r := range s.Runtimes {
		p := at("runtimes", i)
		if r.Server == "" {
			v.add(p+".server", "", "missing; want the serving engine, e.g. vllm, tgi, trtllm or sglang")
		} else {
			v.name(p+".server", r.Server, true)
		}
		if r.Version == "" {
			v.add(p+".version", "", "missing; want the engine version, e.g. 0.6.3")
		} else if strings.ContainsFunc(r.Version, func(c rune) bool { return c <= ' ' }) {
			v.add(p+".version", q(r.Version), "want a version without spaces, e.g. 0.6.3")
		}
		v.version(p+".cuda", r.CUDA, "12.4", false)
		v.version(p+".min_driver", r.MinDriver, "550.54", false)
	}

	models := v.names("models", len(s.Models), func(i int) string { return s.Models[i].Name })
	for i, m := range s.Models {
		p := at("models", i)
		v.positive(p+".parameters_b", m.ParametersB)
		v.atLeast(p+".layers", m.Layers, 1)
		v.atLeast(p+".kv_heads", m.KVHeads, 1)
		v.atLeast(p+".head_dim", m.HeadDim, 1)
		v.enum(p+".precision", m.Precision, precisions)
		v.atLeast(p+".context_length", m.ContextLength, 1)
		v.refs(p+".runtimes", m.Runtimes, runtimes, "runtime", true)
		v.version(p+".min_driver", m.MinDriver, "535.104", false)
		v.unit(p+".quality", m.Quality, false)
		seen := map[string]int{}
		for j, f := range m.Fallbacks {
			fp := at(p+".fallbacks", j)
			if f == m.Name && f != "" {
				v.add(fp, q(f), "a model cannot fall back to itself; want a different model")
				continue
			}
			if k, dup := seen[f]; dup {
				v.add(fp, q(f), "listed twice; first at "+at(p+".fallbacks", k))
				continue
			}
			seen[f] = j
			v.ref(fp, f, models, "model")
		}
	}
	v.fallbackCycles(models)

	poolNames := v.names("pools", len(s.Pools), func(i int) string { return s.Pools[i].Name })
	for i := range s.Pools {
		v.pool(at("pools", i), s.Pools[i], regions, accels, runtimes, models)
	}
	v.disaggregation(models)
	if len(s.Purchasable) > 0 { // optional, unlike pools
		v.names("purchasable", len(s.Purchasable), func(i int) string { return s.Purchasable[i].Name })
	}
	for i, pl := range s.Purchasable {
		p := at("purchasable", i)
		if k, dup := poolNames[pl.Name]; dup && pl.Name != "" {
			v.add(p+".name", q(pl.Name), "already the name of "+at("pools", k)+"; want a name of its own (the plan adds it to the fleet)")
		}
		v.pool(p, pl, regions, accels, runtimes, models)
		if pl.PricePerGPUHour == 0 {
			v.add(p+".price_per_gpu_hour", num(pl.PricePerGPUHour), "want > 0: the plan buys the cheapest fleet, and a free type would always be chosen")
		}
	}

	tenants := v.names("tenants", len(s.Tenants), func(i int) string { return s.Tenants[i].Name })
	for i, t := range s.Tenants {
		p := at("tenants", i)
		if t.Jurisdiction != "" {
			v.name(p+".jurisdiction", t.Jurisdiction, false)
			if _, ok := jurisdictions[t.Jurisdiction]; !ok && len(jurisdictions) > 0 {
				v.add(p+".jurisdiction", q(t.Jurisdiction), fmt.Sprintf("no region has this jurisdiction, so no request of this tenant could be served; want one of %s, or none for anywhere", oneOf(sortedKeys(jurisdictions))))
			}
		}
		if !finite(t.Weight) || t.Weight <= 0 {
			v.add(p+".weight", num(t.Weight), "want > 0 (leave it out for the default 1)")
		}
		v.nonNegative(p+".tokens_per_minute", t.TokensPerMinute)
		v.atLeast(p+".max_concurrency", t.MaxConcurrency, 0)
		v.name(p+".cohort", t.Cohort, false)
	}

	classes := v.names("classes", len(s.Classes), func(i int) string { return s.Classes[i].Name })
	for i, c := range s.Classes {
		p := at("classes", i)
		v.nonNegDuration(p+".slo.ttft", c.SLO.TTFT)
		v.nonNegDuration(p+".slo.tpot", c.SLO.TPOT)
		v.nonNegDuration(p+".slo.e2e", c.SLO.E2E)
		v.nonNegDuration(p+".deadline", c.Deadline)
		if c.SLO.E2E > 0 && c.Deadline > 0 && c.SLO.E2E > c.Deadline {
			v.add(p+".slo.e2e", c.SLO.E2E.String(), fmt.Sprintf("want <= deadline (%s): requests are cancelled at the deadline, so this objective could never be met late", c.Deadline))
		}
		v.unit(p+".quality_floor", c.QualityFloor, false)
		if c.SLO.TTFT > 0 && c.SLO.E2E > 0 && c.SLO.TTFT > c.SLO.E2E {
			v.add(p+".slo.ttft", c.SLO.TTFT.String(), fmt.Sprintf("want <= slo.e2e (%s): the first token cannot come after the last", c.SLO.E2E))
		}
	}

	v.names("workload", len(s.Workload), func(i int) string { return s.Workload[i].Name })
	for i := range s.Workload {
		v.stream(i, tenants, classes, models)
	}

	if len(s.Jobs) > 0 { // optional, unlike the lists above
		v.names("jobs", len(s.Jobs), func(i int) string { return s.Jobs[i].Name })
	}
	for i := range s.Jobs {
		v.job(i, tenants, accels)
	}

	v.policy()
	v.canaries(poolNames, models, tenants, classes)

	for i, e := range s.Expect {
		if _, err := ParseExpectation(e); err != nil {
			v.add(at("expect", i), "", err.Error())
		}
	}
}

// fallbackCycles reports each cycle in the fallback graph once, at the edge
// that closes it. A cycle would make fallback loop forever.
func (v *validator) fallbackCycles(models map[string]int) {
	const (
		unvisited = iota
		active
		done
	)
	state := make([]int, len(v.s.Models))
	var stack []int
	var visit func(i int)
	visit = func(i int) {
		state[i] = active
		stack = append(stack, i)
		for j, f := range v.s.Models[i].Fallbacks {
			k, ok := models[f]
			if !ok || k == i {
				continue // unknown or self: reported already
			}
			switch state[k] {
			case unvisited:
				visit(k)
			case active:
				start := slices.Index(stack, k)
				var chain []string
				for _, m := range stack[start:] {
					chain = append(chain, v.s.Models[m].Name)
				}
				chain = append(chain, f)
				v.add(at(at("models", i)+".fallbacks", j), q(f), "fallback chains form a cycle ("+strings.Join(chain, " -> ")+"); want a chain that ends")
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
	}
	for i, m := range v.s.Models {
		if _, ok := models[m.Name]; ok && models[m.Name] == i && state[i] == unvisited {
			visit(i)
		}
	}
}

func (v *validator) pool(p string, pl Pool, regions, accels, runtimes, models map[string]int) {
	s := v.s
	v.ref(p+".region", pl.Region, regions, "region")
	if pl.Provider == "" {
		v.add(p+".provider", "", "missing; want the provider's name, e.g. aws, coreweave or on-prem")
	} else {
		v.name(p+".provider", pl.Provider, true)
	}
	accOK := v.ref(p+".accelerator", pl.Accelerator, accels, "accelerator")
	v.atLeast(p+".gpus_per_replica", pl.GPUsPerReplica, 1)
	v.atLeast(p+".replicas", pl.Replicas, 0)
	rtOK := v.ref(p+".runtime", pl.Runtime, runtimes, "runtime")
	v.version(p+".driver", pl.Driver, "550.54.15", true)
	v.refs(p+".models", pl.Models, models, "model", true)
	v.atLeast(p+".max_batch", pl.MaxBatch, 1)
	v.nonNegative(p+".price_per_gpu_hour", pl.PricePerGPUHour)
	v.nonNegDuration(p+".cold_start", pl.ColdStart)
	v.nonNegative(p+".quota.requests_per_minute", pl.Quota.RequestsPerMinute)
	v.nonNegative(p+".quota.tokens_per_minute", pl.Quota.TokensPerMinute)
	if pu := pl.Purchase; pu != nil {
		v.atLeast(p+".purchase.max_replicas", pu.MaxReplicas, 0)
		if pu.MaxReplicas > 0 && pu.MaxReplicas < pl.Replicas {
			v.add(p+".purchase.max_replicas", strconv.Itoa(pu.MaxReplicas), fmt.Sprintf("want >= replicas (%d): it is the most the provider sells, today's included", pl.Replicas))
		}
	}

	// Can this pool run what it claims to serve? Each check needs the
	// references it compares to resolve; unresolved ones are reported above.
	var acc *Accelerator
	if accOK {
		acc = &s.Accelerators[accels[pl.Accelerator]]
	}
	var rt *Runtime
	if rtOK {
		rt = &s.Runtimes[runtimes[pl.Runtime]]
		if validVersion(pl.Driver) && validVersion(rt.MinDriver) && fleet.CompareVersions(pl.Driver, rt.MinDriver) < 0 {
			v.add(p+".driver", q(pl.Driver), fmt.Sprintf("want >= %s, the min_driver of runtime %s", rt.MinDriver, rt.Name))
		}
	}
	for j, mn := range pl.Models {
		k, ok := models[mn]
		if !ok {
			continue
		}
		m := &s.Models[k]
		mp := at(p+".models", j)
		if rt != nil && len(m.Runtimes) > 0 && !slices.Contains(m.Runtimes, rt.Name) {
			v.add(mp, q(mn), fmt.Sprintf("runtime %s cannot serve this model (its runtimes: %s); want a model of that runtime or another runtime", rt.Name, oneOf(m.Runtimes)))
		}
		if validVersion(pl.Driver) && validVersion(m.MinDriver) && fleet.CompareVersions(pl.Driver, m.MinDriver) < 0 {
			v.add(p+".driver", q(pl.Driver), fmt.Sprintf("want >= %s, the min_driver of model %s", m.MinDriver, m.Name))
		}
		if acc == nil {
			continue
		}
		if _, known := fleet.PrecisionBytes(m.Precision); known && len(acc.Precisions) > 0 && !slices.Contains(acc.Precisions, m.Precision) {
			v.add(mp, q(mn), fmt.Sprintf("the model is %s and accelerator %s supports only %s; want a model in a precision it supports", m.Precision, acc.Name, oneOf(acc.Precisions)))
		}
		// Weights and a minimum KV cache must fit in the usable memory of
		// the tensor-parallel group, or the engine fails at load; the
		// registry's own arithmetic decides, so the two cannot drift.
		if pl.GPUsPerReplica >= 1 && finite(acc.MemoryGiB*acc.UsableFraction) && finite(m.ParametersB) && m.ParametersB > 0 {
			fa := fleet.Accelerator{Name: acc.Name, MemoryGiB: acc.MemoryGiB, UsableFraction: acc.UsableFraction}
			fm := fleet.Model{Name: m.Name, ParametersB: m.ParametersB, Layers: m.Layers, KVHeads: m.KVHeads,
				HeadDim: m.HeadDim, Precision: m.Precision}
			if _, need, fits := fleet.Fit(fa, fm, pl.GPUsPerReplica); !fits && need > pl.GPUsPerReplica {
				bytes, _ := fleet.PrecisionBytes(m.Precision)
				v.add(p+".gpus_per_replica", strconv.Itoa(pl.GPUsPerReplica), fmt.Sprintf(
					"the %s weights of %s (%.1f GiB) and a %d-token KV cache do not fit in %d x %.1f GiB usable on %s; want >= %d",
					m.Precision, m.Name, m.ParametersB*1e9*bytes/(1<<30), fleet.MinKVTokens, pl.GPUsPerReplica,
					acc.MemoryGiB*acc.UsableFraction, acc.Name, need))
			}
		}
	}

	if pl.Role != "" {
		v.enum(p+".role", pl.Role, poolRoles)
	}
	v.nonNegDuration(p+".kv_lease_duration", pl.KVLeaseDuration)
	if pl.KVLeaseDuration != 0 && pl.Role != "prefill" {
		v.add(p+".kv_lease_duration", pl.KVLeaseDuration.String(), "only a prefill pool holds KV for a transfer; want role: prefill, or leave it out")
	}
	if pl.KVLoadFailurePolicy != "" {
		v.enum(p+".kv_load_failure_policy", pl.KVLoadFailurePolicy, []string{"fail", "recompute"})
		if pl.Role != "decode" {
			v.add(p+".kv_load_failure_policy", q(pl.KVLoadFailurePolicy), "only a decode pool receives KV transfers; want role: decode, or leave it out")
		}
	}
	v.autoscale(p, pl)
	if sv := pl.Service; sv != nil {
		if pl.Role == "prefill" || pl.Role == "decode" {
			v.add(p+".role", q(pl.Role), "a service-time pool has no KV cache to move; want both (or leave it out), or profiles instead of service")
		}
		v.enum(p+".service.distribution", sv.Distribution, serviceDists)
		if sv.Mean <= 0 {
			v.add(p+".service.mean", sv.Mean.String(), "want > 0, e.g. 2s")
		}
		if len(pl.Profiles) > 0 {
			v.add(p+".service", "", "set either service (a fixed service-time queue) or profiles (the batching model), not both")
		}
		if pl.MaxBatch > 1 {
			v.add(p+".max_batch", strconv.Itoa(pl.MaxBatch), "want 1 (or leave it out): a service-time pool serves one request per replica at a time")
		}
	}
	for _, key := range sortedKeys(pl.Profiles) {
		v.profile(p+".profiles."+key, key, pl)
	}
	v.derived(p, pl, acc)
}

// derived checks a pool's derived-profile keys (gpu, tensor_parallel,
// model_config, precision): the GPU is in the spec table, the config reads,
// the parallelism agrees with gpus_per_replica, one model is left for the
// derived profile, and its weights leave room for a KV cache.
func (v *validator) derived(p string, pl Pool, acc *Accelerator) {
	if !pl.Derives() {
		return
	}
	if c := pl.Coefficients; c != nil {
		if err := c.Check(); err != nil {
			v.add(p+".coefficients", "", err.Error())
		}
	}
	if pl.TensorParallel != 0 && pl.TensorParallel != pl.GPUsPerReplica {
		v.add(p+".tensor_parallel", strconv.Itoa(pl.TensorParallel), fmt.Sprintf("want gpus_per_replica (%d): a replica's GPUs are its tensor-parallel group; give one of the two", pl.GPUsPerReplica))
	}
	if pl.Precision != "" {
		v.enum(p+".precision", pl.Precision, []string{"bf16", "fp16", "fp8"})
	}
	if pl.KVCacheDtype != "" {
		v.enum(p+".kv_cache_dtype", pl.KVCacheDtype, []string{"auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"})
	}
	name, key := pl.GPUName()
	gpu, err := latency.LookupGPU(name)
	if err != nil {
		v.add(p+"."+key, q(name), "not in the GPU spec table a derived profile needs; want gpu: one of "+oneOf(latency.GPUNames()))
	}
	if pl.ModelConfig == "" {
		v.add(p+".model_config", "", "missing; a derived profile (gpu, tensor_parallel, precision) needs the model's Hugging Face config.json: a path or a shipped model, one of "+oneOf(latency.ModelNames()))
		return
	}
	m, merr := modelfile.Resolve(pl.ModelConfig, v.s.Dir)
	if merr != nil {
		v.add(p+".model_config", q(pl.ModelConfig), merr.Error())
	}
	bare := 0
	for _, mn := range pl.Models {
		if pr, ok := pl.Profiles[mn]; !ok || pr.LimitsOnly() {
			bare++
		}
	}
	if bare != 1 {
		v.add(p+".model_config", q(pl.ModelConfig), fmt.Sprintf("describes one model, and %d of the pool's models have no profile; want exactly one model without an entry in profiles (or with only max_batched_tokens, kv_tokens, min_step_us)", bare))
	}
	if err != nil || merr != nil || pl.GPUsPerReplica < 1 {
		return
	}
	place := pl.Placement(gpu, m)
	if err := place.Normalize(); err != nil {
		// Normalize's messages start with the key at fault.
		key, val := "model_config", q(pl.ModelConfig)
		switch first, _, _ := strings.Cut(err.Error(), " "); first {
		case "expert_parallel":
			key, val = first, strconv.Itoa(pl.ExpertParallel)
		case "tensor_parallel":
			key, val = "gpus_per_replica", strconv.Itoa(pl.GPUsPerReplica)
		case "precision":
			key, val = first, q(pl.Precision)
		case "kv_cache_dtype":
			key, val = first, q(pl.KVCacheDtype)
		}
		v.add(p+"."+key, val, err.Error())
		return
	}
	if pl.ExpertParallel > 1 && pl.Replicas > 0 && pl.Replicas%(pl.ExpertParallel/max(pl.GPUsPerReplica, 1)) != 0 {
		v.add(p+".expert_parallel", strconv.Itoa(pl.ExpertParallel), fmt.Sprintf("spreads experts over %d replicas, which replicas (%d) is not a multiple of; want a degree that groups whole replicas", pl.ExpertParallel/max(pl.GPUsPerReplica, 1), pl.Replicas))
	}
	usable := 0.9
	if acc != nil && acc.UsableFraction > 0 {
		usable = acc.UsableFraction
	}
	if kv := place.KVTokens(usable); kv < fleet.MinKVTokens {
		v.add(p+".gpus_per_replica", strconv.Itoa(pl.GPUsPerReplica), fmt.Sprintf(
			"the weights of %s (%.1f GB per GPU in %s) leave room for %d KV tokens on %s at %.0f %% of memory, want >= %d; want more GPUs per replica or precision: fp8",
			m.Name, place.WeightBytesPerGPU()/1e9, place.Precision, kv, gpu.Name, 100*usable, fleet.MinKVTokens))
	}
}

// tpPattern reads the tensor-parallel degree from a built-in ref's last
// segment, e.g. h100-sxm/llama-3.1-70b/tp4.
var tpPattern = regexp.MustCompile(`/tp([0-9]+)$`)

func (v *validator) profile(p, model string, pl Pool) {
	pr := pl.Profiles[model]
	if !slices.Contains(pl.Models, model) {
		served := slices.Clone(pl.Models)
		slices.Sort(served)
		v.add(p, q(model), "a profile for a model this pool does not serve; want one of its models: "+oneOf(slices.Compact(served)))
	}
	if pr.Ref != "" {
		if _, ok := latency.Builtin(pr.Ref); !ok {
			refs := latency.BuiltinRefs()
			msg := "no such built-in profile; want one of " + oneOf(refs)
			if len(refs) == 0 {
				msg = "no such built-in profile (this build has none); want step_base_us, per_prefill_token_us and the other costs instead"
			} else if near := suggest.Nearest(pr.Ref, refs, 1); len(near) > 0 {
				msg = fmt.Sprintf("no such built-in profile; did you mean %q? (built-in: %s)", near[0], oneOf(refs))
			}
			v.add(p+".ref", q(pr.Ref), msg)
		}
		if m := tpPattern.FindStringSubmatch(pr.Ref); m != nil && pl.GPUsPerReplica >= 1 && m[1] != strconv.Itoa(pl.GPUsPerReplica) {
			v.add(p+".ref", q(pr.Ref), fmt.Sprintf("the profile was measured at tensor parallelism %s but the pool has gpus_per_replica %d; want a tp%d profile", m[1], pl.GPUsPerReplica, pl.GPUsPerReplica))
		}
	} else if pl.Derives() && pr.LimitsOnly() {
		// The engine limits of a derived profile: no costs to give.
	} else {
		// Without a built-in to start from, the costs that are never zero
		// on real hardware must be given.
		if !(pr.StepBaseUS > 0) {
			v.add(p+".step_base_us", num(pr.StepBaseUS), "want > 0 (or a ref to a built-in profile)")
		}
		if !(pr.PerPrefillTokenUS > 0) {
			v.add(p+".per_prefill_token_us", num(pr.PerPrefillTokenUS), "want > 0 (or a ref to a built-in profile)")
		}
	}
	if pr.Ref != "" {
		v.nonNegative(p+".step_base_us", pr.StepBaseUS)
		v.nonNegative(p+".per_prefill_token_us", pr.PerPrefillTokenUS)
	}
	v.nonNegative(p+".per_seq_us", pr.PerSeqUS)
	v.nonNegative(p+".per_kv_token_us", pr.PerKVTokenUS)
	v.nonNegative(p+".min_step_us", pr.MinStepUS)
	v.atLeast(p+".max_batched_tokens", pr.MaxBatchedTokens, 0)
	v.atLeast(p+".kv_tokens", pr.KVTokens, 0)
}

func (v *validator) stream(i int, tenants, classes, models map[string]int) {
	s := v.s
	st := s.Workload[i]
	p := at("workload", i)
	v.ref(p+".tenant", st.Tenant, tenants, "tenant")
	v.ref(p+".class", st.Class, classes, "class")
	modelOK := v.ref(p+".model", st.Model, models, "model")

	if st.Trace != nil {
		v.trace(p, st, tenants, classes, models)
		v.common(p, st)
		return
	}
	a := st.Arrivals
	v.enum(p+".arrivals.process", a.Process, processes)
	v.positive(p+".arrivals.rate", a.Rate)
	v.nonNegative(p+".arrivals.cv", a.CV)
	switch a.Process {
	case "gamma":
		if a.CV == 0 {
			v.add(p+".arrivals.cv", "0", "want > 0: a gamma process needs the coefficient of variation of its gaps (1 is Poisson, 2 is bursty)")
		}
	case "poisson":
		if a.CV > 0 && a.CV != 1 {
			v.add(p+".arrivals.cv", num(a.CV), "a Poisson process has cv 1; want process: gamma for another cv, or leave cv out")
		}
	}

	inMax, inBounded := v.tokens(p+".input_tokens", st.InputTokens)
	outMax, outBounded := v.tokens(p+".output_tokens", st.OutputTokens)
	if modelOK {
		m := s.Models[models[st.Model]]
		switch {
		case m.ContextLength < 1:
		case inBounded && inMax >= m.ContextLength:
			v.add(p+".input_tokens", "", fmt.Sprintf("prompts of up to %d tokens leave no room to generate in %s's context_length %d; want a smaller max", inMax, m.Name, m.ContextLength))
		case inBounded && outBounded && inMax+outMax > m.ContextLength:
			v.add(p+".output_tokens", "", fmt.Sprintf("up to %d input plus %d output tokens exceed %s's context_length %d; want smaller maxima", inMax, outMax, m.Name, m.ContextLength))
		}
		switch {
		case !v.served(st.Model, ""):
			v.add(p+".model", q(st.Model), "no pool serves this model or (with policy.routing.fallback) any model of its fallback chain, so every request would be rejected; want a model some pool lists")
		case !v.s.Policy.Routing.IgnoreResidency && tenantJurisdiction(s, st.Tenant) != "" && !v.served(st.Model, tenantJurisdiction(s, st.Tenant)):
			j := tenantJurisdiction(s, st.Tenant)
			v.add(p+".model", q(st.Model), fmt.Sprintf("tenant %s is bound to jurisdiction %s, where no pool serves this model or (with policy.routing.fallback) its fallbacks, so every request would be rejected; want a model served in a region of jurisdiction %s", st.Tenant, j, j))
		}
	}

	if d := st.Diurnal; d != nil {
		v.unit(p+".diurnal.amplitude", d.Amplitude, false)
		if d.Period <= 0 {
			v.add(p+".diurnal.period", d.Period.String(), "want > 0 (leave it out for 24h)")
		}
		if d.Peak < 0 || (d.Period > 0 && d.Peak >= d.Period) {
			v.add(p+".diurnal.peak", d.Peak.String(), fmt.Sprintf("want an offset in [0, period) = [0, %s)", d.Period))
		}
	}
	v.common(p, st)
}

// common checks what synthetic and trace streams share: the start and stop
// of the stream.
func (v *validator) common(p string, st Stream) {
	s := v.s
	v.nonNegDuration(p+".start", st.Start)
	v.nonNegDuration(p+".stop", st.Stop)
	if s.Duration > 0 && st.Start >= s.Duration {
		v.add(p+".start", st.Start.String(), fmt.Sprintf("want less than duration (%s), or the stream sends nothing", s.Duration))
	}
	if st.Stop != 0 {
		if st.Stop <= st.Start {
			v.add(p+".stop", st.Stop.String(), fmt.Sprintf("want later than start (%s), or 0 for the end of the run", st.Start))
		} else if s.Duration > 0 && st.Stop > s.Duration {
			v.add(p+".stop", st.Stop.String(), fmt.Sprintf("want <= duration (%s): no request arrives after it", s.Duration))
		}
	}
}

// traceSource checks what a request or pod trace is read from: the file
// (what names the kind, "trace file" or "pod trace"), its format and the
// window.
func (v *validator) traceSource(tp, what, path, format string, formats []string, start, duration Duration) {
	if name, embedded := traces.Name(path); embedded {
		if !traces.Has(name) {
			v.add(tp+".path", q(path), fmt.Sprintf("no such embedded trace; want one of %s%s, or a %s's path relative to the scenario file",
				traces.Scheme, strings.Join(traces.Names(), ", "+traces.Scheme), what))
		}
	} else if path == "" {
		v.add(tp+".path", "", "missing; want the "+what+", relative to the scenario file")
	} else if found := v.s.TracePath(path); !fileExists(found) {
		v.add(tp+".path", q(path), fmt.Sprintf("no such file (looked for %s); want a %s, relative to the scenario file", found, what))
	}
	if format != "" {
		v.enum(tp+".format", format, formats)
	}
	v.nonNegDuration(tp+".start", start)
	v.nonNegDuration(tp+".duration", duration)
}

// trace checks a trace stream: its source, and its mapping rules.
func (v *validator) trace(p string, st Stream, tenants, classes, models map[string]int) {
	tr := st.Trace
	tp := p + ".trace"
	v.traceSource(tp, "trace file", tr.Path, tr.Format, traceFormats, tr.Start, tr.Duration)
	v.nonNegative(tp+".time_scale", tr.TimeScale)
	v.nonNegative(tp+".rate_scale", tr.RateScale)
	if tr.RateScale > 64 {
		v.add(tp+".rate_scale", num(tr.RateScale), "want <= 64: each unit superposes another pass over the trace")
	}
	if st.Arrivals != (Arrivals{}) {
		v.add(p+".arrivals", "", "a trace stream takes its arrivals from the trace; leave arrivals out")
	}
	if st.InputTokens != (Distribution{}) || st.OutputTokens != (Distribution{}) {
		v.add(p+".input_tokens", "", "a trace stream takes token counts from the trace; leave input_tokens and output_tokens out")
	}
	if st.Diurnal != nil {
		v.add(p+".diurnal", "", "a trace stream keeps the trace's own shape; leave diurnal out")
	}
	for j, r := range st.Mapping {
		rp := at(p+".mapping", j)
		if r.Tenant != "" {
			v.ref(rp+".tenant", r.Tenant, tenants, "tenant")
		}
		if r.Class != "" {
			v.ref(rp+".class", r.Class, classes, "class")
		}
		if r.Model != "" {
			v.ref(rp+".model", r.Model, models, "model")
		}
		if r.Share < 0 || r.Share > 1 || math.IsNaN(r.Share) {
			v.add(rp+".share", num(r.Share), "want a fraction in (0, 1], or leave it out to take every matching request")
		}
		if r.Tenant == "" && r.Class == "" && r.Model == "" {
			v.add(rp, "", "the rule assigns nothing; want at least one of tenant, class, model")
		}
	}
}

// tenantJurisdiction is the jurisdiction of the first tenant named name.
func tenantJurisdiction(s *Scenario, name string) string {
	for _, t := range s.Tenants {
		if t.Name == name {
			return t.Jurisdiction
		}
	}
	return ""
}

// served reports whether some pool lists model, or, when fallback routing
// is on, some model of its fallback chain; with a jurisdiction, only pools
// in regions of that jurisdiction count.
func (v *validator) served(model, jurisdiction string) bool {
	regionJ := map[string]string{}
	for _, r := range v.s.Regions {
		if _, dup := regionJ[r.Name]; !dup {
			regionJ[r.Name] = r.Jurisdiction
		}
	}
	byName := map[string]*Model{}
	for i := range v.s.Models {
		if _, dup := byName[v.s.Models[i].Name]; !dup {
			byName[v.s.Models[i].Name] = &v.s.Models[i]
		}
	}
	fleet := slices.Clip(v.s.Pools)
	for _, pl := range v.s.Purchasable {
		if pl.Replicas > 0 { // bought for this run: it joins the fleet
			fleet = append(fleet, pl)
		}
	}
	listed := map[string]bool{}
	for _, pl := range fleet {
		if jurisdiction != "" && regionJ[pl.Region] != jurisdiction {
			continue
		}
		for _, m := range pl.Models {
			listed[m] = true
		}
	}
	seen := map[string]bool{}
	queue := []string{model}
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		if seen[m] {
			continue
		}
		seen[m] = true
		if listed[m] {
			return true
		}
		if v.s.Policy.Routing.Fallback && byName[m] != nil {
			queue = append(queue, byName[m].Fallbacks...)
		}
	}
	return false
}

// tokens checks a token-count distribution and returns the largest count
// it can produce, when it is bounded.
func (v *validator) tokens(p string, d Distribution) (upper int, bounded bool) {
	v.enum(p+".dist", d.Dist, tokenDists)
	noCV := func(why string) {
		if d.CV != 0 {
			v.add(p+".cv", num(d.CV), "cv applies to lognormal only; "+why)
		}
	}
	clip := func() {
		v.atLeast(p+".min", d.Min, 0)
		if d.Max != 0 {
			switch {
			case d.Max < 1:
				v.add(p+".max", strconv.Itoa(d.Max), "want >= 1, or 0 for no upper clip")
			case d.Max < d.Min:
				v.add(p+".max", strconv.Itoa(d.Max), fmt.Sprintf("want >= min (%d)", d.Min))
			case finite(d.Mean) && float64(d.Max) < d.Mean:
				v.add(p+".max", strconv.Itoa(d.Max), fmt.Sprintf("want >= mean (%s): clipping below the mean leaves a different distribution", num(d.Mean)))
			}
		}
		if d.Min > 0 && finite(d.Mean) && d.Mean > 0 && float64(d.Min) > d.Mean {
			v.add(p+".min", strconv.Itoa(d.Min), fmt.Sprintf("want <= mean (%s): clipping above the mean leaves a different distribution", num(d.Mean)))
		}
	}
	switch d.Dist {
	case "constant":
		if !finite(d.Mean) || d.Mean < 1 || d.Mean != math.Trunc(d.Mean) {
			v.add(p+".mean", num(d.Mean), "want a whole number of tokens >= 1")
		} else if d.Mean <= math.MaxInt32 {
			upper, bounded = int(d.Mean), true
		}
		noCV("a constant has none")
		if d.Min != 0 || d.Max != 0 {
			v.add(p, "", "min and max do not apply to a constant; want only mean")
		}
	case "uniform":
		v.atLeast(p+".min", d.Min, 1)
		if d.Max < d.Min {
			v.add(p+".max", strconv.Itoa(d.Max), fmt.Sprintf("want >= min (%d)", d.Min))
		} else {
			upper, bounded = d.Max, true
		}
		if d.Mean != 0 {
			v.add(p+".mean", num(d.Mean), "a uniform distribution's mean is (min+max)/2; want it left out")
		}
		noCV("a uniform distribution's follows from min and max")
	case "exponential":
		v.positive(p+".mean", d.Mean)
		noCV("an exponential distribution has cv 1")
		clip()
		upper, bounded = d.Max, d.Max > 0
	case "lognormal":
		v.positive(p+".mean", d.Mean)
		v.positive(p+".cv", d.CV)
		clip()
		upper, bounded = d.Max, d.Max > 0
	}
	return upper, bounded
}

func (v *validator) policy() {
	pol := v.s.Policy
	v.enum("policy.scheduler", pol.Scheduler, schedulers)
	v.nonNegDuration("policy.aging", pol.Aging)
	v.atLeast("policy.admission.queue_limit", pol.Admission.QueueLimit, 0)
	v.nonNegDuration("policy.admission.retry_after", pol.Admission.RetryAfter)
	v.nonNegDuration("policy.admission.defer_for", pol.Admission.DeferFor)
	v.nonNegDuration("policy.admission.queue_timeout", pol.Admission.QueueTimeout)
	v.enum("policy.routing.strategy", pol.Routing.Strategy, routingStrategies)
	v.nonNegDuration("policy.routing.hedge_after", pol.Routing.HedgeAfter)
	v.nonNegDuration("policy.routing.latency_half_life", pol.Routing.LatencyHalfLife)
	if js := pol.Jobs.MaxPoolShare; !(js > 0 && js <= 1) {
		v.add("policy.jobs.max_pool_share", num(js), "want a fraction in (0, 1]: the share of a pool's replicas jobs may hold")
	}
	v.atLeast("policy.jobs.preempt_queue", pol.Jobs.PreemptQueue, 0)
	h := pol.Health
	for _, d := range []struct {
		path string
		v    Duration
	}{{"policy.health.probe_interval", h.ProbeInterval}, {"policy.health.timeout", h.Timeout}, {"policy.health.open_for", h.OpenFor}} {
		if d.v <= 0 {
			v.add(d.path, d.v.String(), "want > 0 (leave it out for the default)")
		}
	}
	v.atLeast("policy.health.threshold", h.Threshold, 1)
	if o := h.Outlier; !o.Disabled {
		if !(o.Factor > 1) {
			v.add("policy.health.outlier.factor", num(o.Factor), "want > 1: a multiple of the median latency of the replicas serving the same model")
		}
		v.nonNegDuration("policy.health.outlier.max_latency", o.MaxLatency)
		v.nonNegDuration("policy.health.outlier.min_excess", o.MinExcess)
		v.atLeast("policy.health.outlier.min_samples", o.MinSamples, 1)
		if o.BaseEjection <= 0 {
			v.add("policy.health.outlier.base_ejection", o.BaseEjection.String(), "want > 0 (leave it out for the default, 30s)")
		}
		if s := o.MaxEjectionShare; !(s > 0 && s <= 1) {
			v.add("policy.health.outlier.max_ejection_share", num(s), "want a fraction in (0, 1]: the share of a pool's replicas ejected at once (one is always kept)")
		}
	}
	rt := pol.Retries
	v.atLeast("policy.retries.max_attempts", rt.MaxAttempts, 1)
	v.atLeast("policy.retries.migration_limit", rt.MigrationLimit, 0)
	if rt.Backoff <= 0 || rt.MaxBackoff < rt.Backoff {
		v.add("policy.retries.backoff", rt.Backoff.String(), fmt.Sprintf("want > 0 and <= max_backoff (%s)", rt.MaxBackoff))
	}
	v.unit("policy.retries.budget", rt.Budget, false)
	classes := map[string]int{}
	for i, c := range v.s.Classes {
		classes[c.Name] = i
	}
	models := map[string]int{}
	for i, m := range v.s.Models {
		models[m.Name] = i
	}
	rungs := map[string]int{}
	for i, d := range pol.Degradation {
		p := at("policy.degradation", i)
		v.name(p+".name", d.Name, true)
		// Reports and the gateway's series are keyed by the step's name.
		if j, dup := rungs[d.Name]; dup && d.Name != "" {
			v.add(p+".name", q(d.Name), fmt.Sprintf("used twice; first at %s: give each step its own name", at("policy.degradation", j)))
		} else {
			rungs[d.Name] = i
		}
		v.enum(p+".action", d.Action, degradeActions)
		tr := d.Trigger
		if tr.QueueWait <= 0 && tr.Saturation <= 0 && tr.ErrorRate <= 0 {
			v.add(p+".trigger", "", "want at least one of queue_wait (> 0), saturation or error_rate (in (0, 1])")
		}
		if tr.Saturation < 0 || tr.Saturation > 1 {
			v.add(p+".trigger.saturation", num(tr.Saturation), "want a share in (0, 1]")
		}
		if tr.ErrorRate < 0 || tr.ErrorRate > 1 {
			v.add(p+".trigger.error_rate", num(tr.ErrorRate), "want a share in (0, 1]")
		}
		if !(d.RecoverBelow > 0 && d.RecoverBelow <= 1) {
			v.add(p+".recover_below", num(d.RecoverBelow), "want a fraction in (0, 1]: the share of the thresholds to fall under before releasing")
		}
		switch d.Action {
		case "shed-batch", "cached-answers", "defer-async":
			v.ref(p+".class", d.Class, classes, "class")
		case "smaller-model":
			if v.ref(p+".model", d.Model, models, "model") && len(v.s.Models[models[d.Model]].Fallbacks) == 0 {
				v.add(p+".model", q(d.Model), "the model has no fallbacks to switch to; want a model with fallbacks")
			}
		case "cap-output":
			v.atLeast(p+".max_output_tokens", d.MaxOutputTokens, 1)
		}
		if d.Action == "cached-answers" && !(d.HitRate > 0 && d.HitRate <= 1) {
			v.add(p+".hit_rate", num(d.HitRate), "want the share of requests the cache answers, in (0, 1]")
		}
	}
}

// job checks a GPU job stream.
func (v *validator) job(i int, tenants, accels map[string]int) {
	j := v.s.Jobs[i]
	p := at("jobs", i)
	v.enum(p+".kind", j.Kind, jobKinds)
	if j.Tenant != "" {
		v.ref(p+".tenant", j.Tenant, tenants, "tenant")
	}
	for k, a := range j.Accelerators {
		v.ref(at(p+".accelerators", k), a, accels, "accelerator")
	}
	v.nonNegDuration(p+".window", j.Window)
	v.nonNegDuration(p+".checkpoint_interval", j.CheckpointInterval)
	if tr := j.Trace; tr != nil {
		tp := p + ".trace"
		v.traceSource(tp, "pod trace", tr.Path, tr.Format, jobTraceFormats, tr.Start, tr.Duration)
		v.positive(tp+".time_scale", tr.TimeScale)
		for _, k := range sortedKeys(tr.GPUMap) {
			v.ref(tp+".gpu_map."+k, tr.GPUMap[k], accels, "accelerator")
		}
		if j.GPUs != 0 || j.Duration != 0 || j.Arrivals != (Arrivals{}) {
			v.add(p+".trace", "", "a trace job stream takes GPUs, run times and arrivals from the trace; leave gpus, duration and arrivals out")
		}
		return
	}
	v.atLeast(p+".gpus", j.GPUs, 1)
	if j.Duration <= 0 {
		v.add(p+".duration", j.Duration.String(), "want > 0: each job's run time without preemption, e.g. 2h")
	}
	v.enum(p+".arrivals.process", j.Arrivals.Process, processes)
	v.positive(p+".arrivals.rate", j.Arrivals.Rate)
	if j.Arrivals.Process == "gamma" && j.Arrivals.CV <= 0 {
		v.add(p+".arrivals.cv", num(j.Arrivals.CV), "want > 0 for a gamma process")
	}
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

// autoscale checks a pool's autoscale and acquisition keys; the policy's
// own rules are the core's (sched.AutoscalePolicy.Validate), so the two
// cannot drift.
func (v *validator) autoscale(p string, pl Pool) {
	a, q := pl.Autoscale, pl.Acquisition
	if a == nil {
		if q != nil {
			v.add(p+".acquisition", "", "acquisition without autoscale: want an autoscale policy, or no acquisition (a fixed pool acquires nothing)")
		}
		return
	}
	if a.Metric == sched.MetricWait && a.TargetWait <= 0 {
		v.add(p+".autoscale.target_wait", a.TargetWait.String(), "want > 0 with metric wait, e.g. 2s")
	}
	if a.Metric == sched.MetricWait && a.Target != 0 {
		v.add(p+".autoscale.target", "", "with metric wait give target_wait (a duration), not target")
	}
	if err := AutoscalePolicy(a).Validate(); err != nil {
		v.add(p+".autoscale", "", err.Error())
	}
	if pl.Replicas < a.MinReplicas || pl.Replicas > a.MaxReplicas {
		v.add(p+".replicas", strconv.Itoa(pl.Replicas), fmt.Sprintf("want within the autoscale bounds [%d, %d]: it is the count the pool starts with", a.MinReplicas, a.MaxReplicas))
	}
	if q == nil {
		return
	}
	v.atLeast(p+".acquisition.reserved", q.Reserved, 0)
	if q.Burst != nil {
		v.atLeast(p+".acquisition.burst", *q.Burst, 0)
	}
	v.nonNegative(p+".acquisition.burst_price", q.BurstPrice)
	v.nonNegDuration(p+".acquisition.retry_after", q.RetryAfter)
	if d := q.Delay; d != nil {
		v.enum(p+".acquisition.delay.distribution", d.Distribution, delayDists)
		if d.Mean < 0 {
			v.add(p+".acquisition.delay.mean", d.Mean.String(), "want >= 0, e.g. 3m")
		}
		v.nonNegative(p+".acquisition.delay.sigma", d.Sigma)
	}
}

// delayDists are the provisioning-delay distributions.
var delayDists = []string{"constant", "exponential", "lognormal"}

// AutoscalePolicy resolves a (defaulted) autoscale block to the core's
// policy.
func AutoscalePolicy(a *Autoscale) sched.AutoscalePolicy {
	p := sched.AutoscalePolicy{Metric: a.Metric, Target: a.Target, Min: a.MinReplicas, Max: a.MaxReplicas,
		SyncPeriod: a.SyncPeriod.D(), UpStabilization: a.ScaleUpStabilization.D(),
		UpMax: a.ScaleUpMax, DownMax: a.ScaleDownMax}
	if a.Metric == sched.MetricWait {
		p.Target = a.TargetWait.D().Seconds()
	}
	if a.ScaleDownStabilization != nil {
		p.DownStabilization = a.ScaleDownStabilization.D()
	}
	if a.Tolerance != nil {
		p.Tolerance = *a.Tolerance
	}
	return p
}

// disaggregation checks the models served disaggregated and the pools'
// roles together: a prefill or decode pool serves only disaggregated
// models, a disaggregated model has a decode pool and, in the region of
// each, a prefill pool (a KV cache crosses no region, so no jurisdiction),
// and its decider and link are known.
func (v *validator) disaggregation(models map[string]int) {
	s := v.s
	for i, pl := range s.Pools {
		if pl.Role != "prefill" && pl.Role != "decode" {
			continue
		}
		for j, mn := range pl.Models {
			if k, ok := models[mn]; ok && s.Models[k].Disaggregation == nil {
				v.add(at(at("pools", i)+".models", j), q(mn), fmt.Sprintf(
					"a %s pool serves disaggregated models only, and model %s has no disaggregation block; want one under models[%d], or role both", pl.Role, mn, k))
			}
		}
	}
	for i, m := range s.Models {
		d := m.Disaggregation
		if d == nil {
			continue
		}
		p := at("models", i) + ".disaggregation"
		v.enum(p+".decider", d.Decider, deciders)
		v.atLeast(p+".max_local_prefill_length", d.MaxLocalPrefillLength, 0)
		v.atLeast(p+".max_prefill_queue_size", d.MaxPrefillQueueSize, 0)
		if d.Decider != "conditional" && (d.MaxLocalPrefillLength != 0 || d.MaxPrefillQueueSize != 0) {
			v.add(p+".decider", q(d.Decider), "max_local_prefill_length and max_prefill_queue_size are the conditional decider's; want decider: conditional, or leave them out")
		}
		if d.Link.Kind == "" {
			v.add(p+".link.kind", "", "missing; want "+oneOf(kvlink.Kinds()))
		} else {
			v.enum(p+".link.kind", d.Link.Kind, kvlink.Kinds())
		}
		v.nonNegative(p+".link.bandwidth_gbs", d.Link.BandwidthGBs)
		v.nonNegDuration(p+".link.latency", d.Link.Latency)

		prefillIn := map[string]bool{}
		decodes := 0
		for _, pl := range s.Pools {
			if !slices.Contains(pl.Models, m.Name) {
				continue
			}
			switch pl.Role {
			case "prefill":
				prefillIn[pl.Region] = true
			case "decode":
				decodes++
			}
		}
		if decodes == 0 {
			v.add(p, "", fmt.Sprintf("no pool with role decode serves %s; want one (role decode, %s in its models)", m.Name, m.Name))
		}
		for j, pl := range s.Pools {
			if pl.Role == "decode" && slices.Contains(pl.Models, m.Name) && !prefillIn[pl.Region] {
				v.add(at("pools", j)+".role", q(pl.Role), fmt.Sprintf(
					"decode pool %s has no prefill pool for %s in its region %s (a KV cache moves within a region); want a pool with role prefill there, or role both",
					pl.Name, m.Name, pl.Region))
			}
		}
	}
}
