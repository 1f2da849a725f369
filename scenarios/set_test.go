package scenarios

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestParseWithSets(t *testing.T) {
	base, err := os.ReadFile("testdata/minimal.good.yaml")
	require.NoError(t, err)
	tests := []struct {
		name  string
		sets  []string
		check func(t *testing.T, s *Scenario)
		want  []string // problems, when the sets make the scenario invalid
	}{
		{
			name:  "by index",
			sets:  []string{"pools[0].replicas=8"},
			check: func(t *testing.T, s *Scenario) { require.Equal(t, 8, s.Pools[0].Replicas) },
		},
		{
			name:  "by name",
			sets:  []string{"pools.p.replicas=5"},
			check: func(t *testing.T, s *Scenario) { require.Equal(t, 5, s.Pools[0].Replicas) },
		},
		{
			name:  "by name in brackets",
			sets:  []string{"pools[p].replicas=6"},
			check: func(t *testing.T, s *Scenario) { require.Equal(t, 6, s.Pools[0].Replicas) },
		},
		{
			name: "top-level and nested scalars",
			sets: []string{"seed=7", "policy.scheduler=wfq", "duration=1h"},
			check: func(t *testing.T, s *Scenario) {
				require.EqualValues(t, 7, s.Seed)
				require.Equal(t, "wfq", s.Policy.Scheduler)
				require.Equal(t, "1h0m0s", s.Duration.String())
			},
		},
		{
			name: "missing mappings are created",
			sets: []string{"pools[0].quota.tokens_per_minute=1e6", "workload[0].diurnal.amplitude=0.5"},
			check: func(t *testing.T, s *Scenario) {
				require.Equal(t, 1e6, s.Pools[0].Quota.TokensPerMinute)
				require.Equal(t, &Diurnal{Amplitude: 0.5, Period: Duration(DefaultDiurnalPeriod)}, s.Workload[0].Diurnal)
			},
		},
		{
			name: "values are YAML: lists and mappings",
			sets: []string{`expect=["requests.rejected == 0", "x.p99 < 2s"]`, "workload[0].input_tokens={dist: uniform, min: 10, max: 20}"},
			check: func(t *testing.T, s *Scenario) {
				require.Equal(t, []string{"requests.rejected == 0", "x.p99 < 2s"}, s.Expect)
				require.Equal(t, Distribution{Dist: "uniform", Min: 10, Max: 20}, s.Workload[0].InputTokens)
			},
		},
		{
			name:  "an empty value restores the default",
			sets:  []string{"policy.admission={queue_limit: 5}", "policy.admission.queue_limit="},
			check: func(t *testing.T, s *Scenario) { require.Equal(t, DefaultQueueLimit, s.Policy.Admission.QueueLimit) },
		},
		{
			name: "names with dots, in lists and maps",
			sets: []string{
				"models[0].name=llama-3.1-8b",
				"pools[0].models=[llama-3.1-8b]",
				"workload.s.model=llama-3.1-8b",
				"pools[0].profiles={llama-3.1-8b: {step_base_us: 6000, per_prefill_token_us: 60}}",
				"models.llama-3.1-8b.quality=0.9",
				"pools.p.profiles.llama-3.1-8b.per_seq_us=3",
				"pools[0].profiles[llama-3.1-8b].min_step_us=1000",
			},
			check: func(t *testing.T, s *Scenario) {
				require.Equal(t, 0.9, s.Models[0].Quality)
				require.Equal(t, Profile{StepBaseUS: 6000, PerPrefillTokenUS: 60, PerSeqUS: 3, MinStepUS: 1000}, s.Pools[0].Profiles["llama-3.1-8b"])
			},
		},
		{
			name: "a bad value is validated like a written one and blamed on the set",
			sets: []string{"pools.p.gpus_per_replica=0", "pools[0].replicas=many", "policy.scheduler=lifo"},
			want: []string{
				"minimal.yaml (--set pools.p.gpus_per_replica=0): pools[0].gpus_per_replica: got 0, want >= 1",
				`minimal.yaml (--set pools[0].replicas=many): pools[0].replicas: got "many", want an integer`,
				`minimal.yaml (--set policy.scheduler=lifo): policy.scheduler: got "lifo", want one of fifo, priority, wfq, edf`,
			},
		},
		{
			name: "file problems come first, then the sets'",
			sets: []string{"seed=-1", "workload[0].arrivals.process=gamma"},
			want: []string{
				"minimal.yaml:56: workload[0].arrivals.cv: got 0, want > 0: a gamma process needs the coefficient of variation of its gaps (1 is Poisson, 2 is bursty)",
				"minimal.yaml (--set seed=-1): seed: got -1, want an integer from 0 to 18446744073709551615",
			},
		},
		{
			name: "unknown key names the nearest",
			sets: []string{"pools[0].replica=8"},
			want: []string{`minimal.yaml (--set pools[0].replica=8): pools[0].replica: unknown key "replica"; did you mean replicas or gpus_per_replica?`},
		},
		{
			name: "unknown key with nothing near lists the keys",
			sets: []string{"regions[0].zone=a"},
			want: []string{`minimal.yaml (--set regions[0].zone=a): regions[0].zone: unknown key "zone"; known keys: name, jurisdiction`},
		},
		{
			name: "unknown name",
			sets: []string{"pools.q.replicas=1"},
			want: []string{`minimal.yaml (--set pools.q.replicas=1): pools: no entry named "q"; did you mean "p"? (names: p)`},
		},
		{
			name: "index out of range",
			sets: []string{"pools[3].replicas=1"},
			want: []string{"minimal.yaml (--set pools[3].replicas=1): pools: index 3 is out of range; want 0 to 0"},
		},
		{
			name: "malformed",
			sets: []string{"seed", "=3", "seed.x=1", "pools[0.replicas=1", "policy[0]=x", "pools..x=1", "seed=[", "pools[0]replicas=1"},
			want: []string{
				"minimal.yaml (--set seed): want path=value, e.g. pools[0].replicas=8 or policy.scheduler=wfq",
				"minimal.yaml (--set =3): want path=value, e.g. pools[0].replicas=8 or policy.scheduler=wfq",
				`minimal.yaml (--set seed.x=1): seed: seed is a single value; it has no field "x"`,
				"minimal.yaml (--set pools[0.replicas=1): pools: unclosed [ in the path",
				"minimal.yaml (--set policy[0]=x): policy: policy is a mapping; want .0, not [0]",
				"minimal.yaml (--set pools..x=1): pools: empty name in the path; want e.g. pools[0].replicas",
				"minimal.yaml (--set seed=[): the value \"[\" is not YAML: yaml: line 1: did not find expected node content",
				`minimal.yaml (--set pools[0]replicas=1): pools[0]: want . or [ after pools[0], got "replicas"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseWithSets("minimal.yaml", base, tt.sets)
			if tt.want == nil {
				require.NoError(t, err)
				tt.check(t, s)
				return
			}
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "ParseWithSets(%q) = %v, want a *ValidationError", tt.sets, err)
			require.Equal(t, tt.want, strings.Split(ve.Error(), "\n"))
		})
	}
}

func TestApplySetThroughAlias(t *testing.T) {
	// default.yaml shares one token distribution between streams through an
	// anchor; overriding one stream must leave the others alone.
	src, err := Source("default")
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(src, &doc))
	require.NoError(t, ApplySet(&doc, "workload.retail-assist.input_tokens.max=4096"))
	out, err := yaml.Marshal(&doc)
	require.NoError(t, err)
	var s Scenario
	require.NoError(t, yaml.Unmarshal(out, &s))
	require.Equal(t, 8192, s.Workload[0].InputTokens.Max)
	require.Equal(t, 4096, s.Workload[1].InputTokens.Max)
	require.Equal(t, 8192, s.Workload[2].InputTokens.Max)
}

func TestApplySetError(t *testing.T) {
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("schema: 1\n"), &doc))
	err := ApplySet(&doc, "pools[0].replicas=1")
	var se *SetError
	require.True(t, errors.As(err, &se))
	require.EqualError(t, err, "--set pools[0].replicas=1: pools: pools is empty; set the whole list, e.g. pools=[...]")

	var empty yaml.Node
	require.NoError(t, ApplySet(&empty, "seed=3"), "an empty document gets a mapping")
	require.NoError(t, ApplySet(&empty, "policy.routing.strategy=cheapest"))
	out, err := yaml.Marshal(&empty)
	require.NoError(t, err)
	require.Equal(t, "seed: 3\npolicy:\n    routing:\n        strategy: cheapest\n", string(out))
}
