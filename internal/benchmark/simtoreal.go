package benchmark

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Where the shared sim-to-real data comes from (its README), recorded in
// each converted experiment's source.
const (
	simToRealStudy          = "github.com/inference-sim/sim-to-real-accuracy-validation@dcec3fd4711c results_trainval/error_records.csv"
	simToRealProfiles       = "github.com/inference-sim/inference-sim@f90a1e3a6787 testdata/trained_physics_iter29.json"
	simToRealEngineVersion  = "vllm 0.15.1"
	simToRealMaxModelLen    = 4096 // the study's vLLM --max-model-len
	simToRealModelConfigDir = "model_configs"
)

// simToRealColumns are the CSV columns the conversion reads.
var simToRealColumns = []string{"simulator", "experiment_folder", "model", "workload", "stage_index",
	"metric_name", "actual", "hardware", "dp", "precision", "tp", "max_num_batched_tokens"}

// ConvertSimToReal turns the sim-to-real study's train/validation data into
// experiments, one per experiment folder of the CSV, sorted by name.
//
// csvPath is the study's error records: one row per simulator, experiment,
// stage and metric, whose actual column is the measured value in ms. It is
// repeated once per simulator; the conversion takes it once and fails if
// two rows disagree. profilesJSONPath is inference-sim's
// trained_physics_iter29.json, which gives each run's load profile, engine
// limits and KV capacity; its expected blocks are one simulator's
// predictions and are not read. A CSV folder matches the profile whose id
// it starts with ("64-qwen2-5-…" ↔ "64"). Model configs are looked up in
// model_configs/ next to the JSON file, which is the converted experiments'
// Dir.
//
// What the data does not say is taken from the study's README: vLLM 0.15.1,
// max_model_len 4096, 16-token blocks, prefix caching on. Arrivals are
// recorded as Poisson, as inference-sim regenerates these loads; the
// profiles do not name the process.
func ConvertSimToReal(csvPath, profilesJSONPath string) ([]*Experiment, error) {
	runs, err := readSimToRealCSV(csvPath)
	if err != nil {
		return nil, err
	}
	profiles, err := readSimToRealProfiles(profilesJSONPath)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(profilesJSONPath)
	var out []*Experiment
	var errs []error
	used := map[string]string{} // profile id → folder
	for _, r := range runs {
		p, err := matchProfile(r.folder, profiles)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", csvPath, err))
			continue
		}
		if prev, dup := used[p.ID]; dup {
			errs = append(errs, fmt.Errorf("%s: folders %s and %s both match profile %s", csvPath, prev, r.folder, p.ID))
			continue
		}
		used[p.ID] = r.folder
		e, err := simToRealExperiment(r, p, dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: folder %s (profile %s): %w", csvPath, r.folder, p.ID, err))
			continue
		}
		out = append(out, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortFunc(out, func(a, b *Experiment) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// simToRealRun is one experiment folder of the CSV.
type simToRealRun struct {
	folder                        string
	model, hardware, dp, prec, tp string
	mnbt                          string
	line                          int      // first CSV line of the folder
	workloads                     []string // the workload labels its rows carry, sorted
	measured                      Measured
}

// figure is one measured value and where it was read, to name both rows
// when two disagree.
type figure struct {
	v    float64
	line int
	sim  string
}

func readSimToRealCSV(csvPath string) ([]*simToRealRun, error) {
	f, err := os.Open(csvPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: reading the header: %w", csvPath, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	var missing []string
	for _, c := range simToRealColumns {
		if _, ok := col[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: missing columns %s; want the study's results_trainval/error_records.csv",
			csvPath, strings.Join(missing, ", "))
	}

	runs := map[string]*simToRealRun{}
	seen := map[string]map[[2]string]figure{} // folder → (stage, metric) → figure
	var errs []error
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", csvPath, err)
		}
		get := func(c string) string { return strings.TrimSpace(rec[col[c]]) }
		where := fmt.Sprintf("%s:%d", csvPath, line)
		folder := get("experiment_folder")
		if folder == "" {
			errs = append(errs, fmt.Errorf("%s: experiment_folder: empty", where))
			continue
		}
		stage, err := strconv.Atoi(get("stage_index"))
		if err != nil || stage < WholeRun {
			errs = append(errs, fmt.Errorf("%s: stage_index: got %q, want -1 (whole run) or a stage index", where, get("stage_index")))
			continue
		}
		metric := get("metric_name")
		if !slices.Contains(metricNames, metric) {
			errs = append(errs, fmt.Errorf("%s: metric_name: got %q, want one of %s", where, metric, strings.Join(metricNames, ", ")))
			continue
		}
		v, err := strconv.ParseFloat(get("actual"), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs = append(errs, fmt.Errorf("%s: actual: got %q, want a finite latency >= 0 in ms", where, get("actual")))
			continue
		}

		run, ok := runs[folder]
		if !ok {
			run = &simToRealRun{folder: folder, model: get("model"), hardware: get("hardware"), dp: get("dp"),
				prec: get("precision"), tp: get("tp"), mnbt: get("max_num_batched_tokens"), line: line, measured: Measured{}}
			runs[folder] = run
			seen[folder] = map[[2]string]figure{}
		}
		// A folder is one run on one engine: its rows must agree on it.
		for _, c := range []struct{ name, got, want string }{
			{"model", get("model"), run.model},
			{"hardware", get("hardware"), run.hardware},
			{"dp", get("dp"), run.dp},
			{"precision", get("precision"), run.prec},
			{"tp", get("tp"), run.tp},
			{"max_num_batched_tokens", get("max_num_batched_tokens"), run.mnbt},
		} {
			if c.got != c.want {
				errs = append(errs, fmt.Errorf("%s: %s: got %q, but line %d of folder %s says %q", where, c.name, c.got, run.line, folder, c.want))
			}
		}
		if w := get("workload"); !slices.Contains(run.workloads, w) {
			run.workloads = append(run.workloads, w)
			slices.Sort(run.workloads)
		}
		key := [2]string{strconv.Itoa(stage), metric}
		if prev, ok := seen[folder][key]; ok {
			if prev.v != v {
				errs = append(errs, fmt.Errorf("%s: actual: %s stage %d %s is %s for %s, but %s at line %d for %s; "+
					"a measurement cannot depend on the simulator", where, folder, stage, metric,
					formatFloat(v), get("simulator"), formatFloat(prev.v), prev.line, prev.sim))
			}
			continue
		}
		seen[folder][key] = figure{v, line, get("simulator")}
		if run.measured[stage] == nil {
			run.measured[stage] = Metrics{}
		}
		run.measured[stage][metric] = v
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: no rows", csvPath)
	}
	out := make([]*simToRealRun, 0, len(runs))
	for _, r := range runs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *simToRealRun) int { return strings.Compare(a.folder, b.folder) })
	return out, nil
}

// simToRealProfile is one experiment of trained_physics_iter29.json.
type simToRealProfile struct {
	ID                  string `json:"id"`
	Model               string `json:"model"`
	ModelConfigDir      string `json:"model_config_dir"`
	Hardware            string `json:"hardware"`
	TP                  int    `json:"tp"`
	MaxNumSeqs          int    `json:"max_num_seqs"`
	MaxNumBatchedTokens int    `json:"max_num_batched_tokens"`
	TotalKVBlocks       int    `json:"total_kv_blocks"`
	CPUKVBlocks         int    `json:"cpu_kv_blocks"`
	Workload            struct {
		InferencePerf struct {
			SharedPrefix struct {
				EnableMultiTurnChat     bool `json:"enable_multi_turn_chat"`
				NumUniqueSystemPrompts  int  `json:"num_unique_system_prompts"`
				NumUsersPerSystemPrompt int  `json:"num_users_per_system_prompt"`
				OutputLen               int  `json:"output_len"`
				QuestionLen             int  `json:"question_len"`
				SystemPromptLen         int  `json:"system_prompt_len"`
			} `json:"shared_prefix"`
			Stages []struct {
				Duration float64 `json:"duration"`
				Rate     float64 `json:"rate"`
			} `json:"stages"`
		} `json:"inference_perf"`
		NumRequests int    `json:"num_requests"`
		Seed        *int64 `json:"seed"`
		Version     string `json:"version"`
	} `json:"workload"`
	// Expected is a simulator's predictions for the run (its regression
	// goldens), not measurements: declared so that the strict decoder
	// accepts it, never read.
	Expected json.RawMessage `json:"expected"`
}

func readSimToRealProfiles(p string) ([]simToRealProfile, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var file struct {
		// The fitted coefficients are that simulator's, not ours.
		Description string             `json:"description"`
		Backend     string             `json:"backend"`
		Alpha       json.RawMessage    `json:"alpha_coeffs"`
		Beta        json.RawMessage    `json:"beta_coeffs"`
		Experiments []simToRealProfile `json:"experiments"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a changed format should fail here, not convert wrongly
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	ids := map[string]bool{}
	for i, e := range file.Experiments {
		if e.ID == "" {
			return nil, fmt.Errorf("%s: experiments[%d].id: empty", p, i)
		}
		if ids[e.ID] {
			return nil, fmt.Errorf("%s: experiments[%d].id: %q appears twice", p, i, e.ID)
		}
		ids[e.ID] = true
	}
	if len(file.Experiments) == 0 {
		return nil, fmt.Errorf("%s: experiments: none", p)
	}
	return file.Experiments, nil
}

// matchProfile finds the profile whose id begins the folder name; the
// longest wins, so that "20-llama…" is not taken for "20260217-155451".
func matchProfile(folder string, profiles []simToRealProfile) (*simToRealProfile, error) {
	var best *simToRealProfile
	for i := range profiles {
		id := profiles[i].ID
		if (folder == id || strings.HasPrefix(folder, id+"-")) && (best == nil || len(id) > len(best.ID)) {
			best = &profiles[i]
		}
	}
	if best == nil {
		return nil, fmt.Errorf("folder %s: no profile in the JSON has an id it starts with", folder)
	}
	return best, nil
}

func simToRealExperiment(r *simToRealRun, p *simToRealProfile, dir string) (*Experiment, error) {
	var errs []error
	mismatch := func(field, csvValue, jsonValue string) {
		if csvValue != jsonValue {
			errs = append(errs, fmt.Errorf("%s: the CSV says %q, the JSON %q", field, csvValue, jsonValue))
		}
	}
	mismatch("model", r.model, p.Model)
	mismatch("hardware", r.hardware, p.Hardware)
	mismatch("tp", r.tp, strconv.Itoa(p.TP))
	if r.mnbt != "" {
		mismatch("max_num_batched_tokens", r.mnbt, strconv.Itoa(p.MaxNumBatchedTokens))
	}
	dp := 1
	if r.dp != "" {
		n, err := strconv.Atoi(r.dp)
		if err != nil {
			errs = append(errs, fmt.Errorf("dp: got %q, want a whole number or empty", r.dp))
		}
		dp = n
	}
	precision := strings.ToLower(r.prec)
	if precision != PrecisionFP16 && precision != PrecisionBF16 && precision != PrecisionFP8 {
		errs = append(errs, fmt.Errorf("precision: got %q, want FP16, BF16 or FP8", r.prec))
	}
	modelConfig := path.Join(simToRealModelConfigDir, path.Base(p.ModelConfigDir)+".json")
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(modelConfig))); err != nil {
		errs = append(errs, fmt.Errorf("model config for %s: %w", p.Model, err))
	}
	workload, err := simToRealWorkload(r)
	if err != nil {
		errs = append(errs, err)
	}
	ip := p.Workload.InferencePerf
	for _, s := range r.measured.Stages() {
		if s >= len(ip.Stages) {
			errs = append(errs, fmt.Errorf("stage_index %d: the profile has %d stages", s, len(ip.Stages)))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	source := fmt.Sprintf("sim-to-real study, train/val split. Measured: %s (column actual). "+
		"Load profile, engine limits, KV blocks: %s, id %s. Workload %s", simToRealStudy, simToRealProfiles, p.ID, workload)
	if len(r.workloads) > 1 {
		source += fmt.Sprintf(" (the CSV also labels these same figures %s)", strings.Join(without(r.workloads, workload), ", "))
	}
	// The format has no field for vLLM's CPU KV offload, which the study
	// turned on; keep the capacity the profile gives where a reader sees it.
	source += fmt.Sprintf("; CPU KV offload on, cpu_kv_blocks %d in the profile.", p.CPUKVBlocks)

	e := &Experiment{
		Name:           r.folder,
		Source:         source,
		GPU:            r.hardware,
		TensorParallel: p.TP,
		DP:             dp,
		ModelConfig:    modelConfig,
		Precision:      precision,
		EngineVersion:  simToRealEngineVersion,
		Engine: Engine{
			MaxNumSeqs:          p.MaxNumSeqs,
			MaxNumBatchedTokens: p.MaxNumBatchedTokens,
			MaxModelLen:         simToRealMaxModelLen,
			TotalKVBlocks:       p.TotalKVBlocks,
			BlockSize:           DefaultBlockSize,
			PrefixCaching:       true,
		},
		Workload: Workload{
			Arrivals: ArrivalsPoisson,
			SharedPrefix: SharedPrefix{
				SystemPromptLen:         ip.SharedPrefix.SystemPromptLen,
				QuestionLen:             ip.SharedPrefix.QuestionLen,
				OutputLen:               ip.SharedPrefix.OutputLen,
				NumUniqueSystemPrompts:  ip.SharedPrefix.NumUniqueSystemPrompts,
				NumUsersPerSystemPrompt: ip.SharedPrefix.NumUsersPerSystemPrompt,
				EnableMultiTurnChat:     ip.SharedPrefix.EnableMultiTurnChat,
			},
			Seed:        p.Workload.Seed,
			NumRequests: p.Workload.NumRequests,
		},
		Measured: r.measured,
		Dir:      dir,
	}
	for _, s := range ip.Stages {
		e.Workload.Stages = append(e.Workload.Stages, Stage{Rate: s.Rate, DurationS: s.Duration})
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e, nil
}

// simToRealWorkload is the folder's workload type. Rows of one folder may
// carry several labels: the CSV cut experiment_folder to its last path
// element, so runs of different workloads that shared it were merged, with
// the same figures under each label. The folder name then says which it is.
func simToRealWorkload(r *simToRealRun) (string, error) {
	if len(r.workloads) == 1 {
		return r.workloads[0], nil
	}
	var inName []string
	for _, w := range r.workloads {
		if strings.Contains(r.folder, "-"+w) {
			inName = append(inName, w)
		}
	}
	if len(inName) != 1 {
		return "", fmt.Errorf("workload: rows are labelled %s and the folder name does not pick one",
			strings.Join(r.workloads, ", "))
	}
	return inName[0], nil
}

func without(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
