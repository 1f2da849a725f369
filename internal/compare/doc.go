// Package compare runs one scenario under several scheduling policies, or
// several named variants (sets of overrides: an autoscaling target, a
// reservation size), over several seeds and says which differences are
// real: `fleetdrill compare`. A variant is a column exactly as a policy is;
// Result.Policies holds the columns' names either way, and
// Result.Variants their overrides.
//
// It owns the fan-out of runs (a worker pool, Config.Parallel runs at a
// time), the per-metric statistics, and the text and JSON renderings. It
// imports the twin and the scenarios package and nothing of the CLI; the
// command builds the Loader (scenario bytes plus --set overrides) and
// prints the Result.
//
// Runs. Policy p and seed s is one twin.Run of a scenario the Loader parses
// afresh for that run: runs share no mutable state, and each result goes
// into a slot indexed by (policy, seed), so the output is the same whatever
// the completion order and however many workers there are. Only
// Result.Run (wall time, workers) varies.
//
// Statistics. For each class and metric (ttft_s.p99, tpot_s.p99, e2e_s.p99,
// queue_wait_s.p99, slo_attainment, goodput_rps) and each fleet metric
// (rejection_rate, cost.per_successful_task, residency_violations; and,
// per autoscaled pool, autoscaling.<pool>.refused, .burst_cost and
// .to_serving.p90, the last 0 in a run where no replica came up), and for
// each policy: the mean over seeds, the sample standard deviation, and the
// half-width of the 95 % confidence interval of the mean from Student's t
// with n−1 degrees of freedom. With one seed there is no interval and no
// test ("n/a").
//
// Significance. Every policy is tested against the first, the baseline,
// two-sided at 5 %. Seed s gives every policy the same arrivals and token
// counts (common random numbers: the twin draws them from RNG streams
// derived from the seed that no scheduling decision touches), so the runs
// are paired, and the verdict ("*" in the table, "significant" in JSON)
// comes from the paired t-test on the per-seed differences: the noise the
// policies share cancels, and it finds differences Welch's unpaired test
// would miss. Welch's test (Welch–Satterthwaite degrees of freedom) is
// reported beside it. When every difference is the same the t statistic is
// undefined; p is then 1 if the means are equal and 0 if not.
//
// NB: with nine metrics per class and several policies, some marks at
// p < 0.05 are chance (about one in twenty among true non-differences);
// there is no multiple-comparison correction. Rerun with other seeds
// (--set seed=…) before believing a lone mark.
//
// Where to start reading: compare.go (Run, Result), then stats.go
// (Summarize, Paired, Welch) and render.go (WriteText, WriteJSON and the
// JSON layout).
package compare
