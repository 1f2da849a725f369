package latency

import "fmt"

// FamilyCoeffs are the built-in coefficients of the physical step-time
// model per GPU family, for vLLM 0.15 (chunked prefill, prefix caching,
// CUDA graphs). Hopper's are fitted jointly over the 13 measured train/val
// experiments of the sim-to-real study (H100; dense and MoE; TP 1, 2, 4;
// FP16 and FP8) with `fleetdrill calibrate --benchmark` (docs/fidelity.md
// gives the command and the in-sample errors). No other family has a
// measured benchmark here: they use Hopper's efficiencies and overheads on
// their own spec-sheet figures, which is what the roofline transfer of the
// efficiencies assumes, and docs/profiles.md says what that costs.
var FamilyCoeffs = map[string]Coeffs{
	"hopper": hopperCoeffs,
}

// hopperCoeffs: fitted (see FamilyCoeffs) with
//
//	fleetdrill calibrate --benchmark internal/benchmark/testdata/simtoreal --refine-evals 700
//
// from earlier fits, to a loss (RMS of log errors) of 0.132;
// TestBenchmarkFidelityRegression (internal/calibrate) holds the in-sample
// figures they give.
var hopperCoeffs = Coeffs{
	Compute: 0.99789, Weights: 0.70389, KV: 0.86962, Link: 0.97850,
	Step: 270.27, Layer: 5.363, Seq: 3.8789, AllReduce: 3.4674,
	MoELayer: 61.224, Imbalance: 1.5546, Spread: 0.87048,
	Request: 8653.0,
}

// CoeffsFor returns the built-in coefficients for a GPU: its family's when
// fitted, else Hopper's, with a note saying so.
func CoeffsFor(g GPU) (Coeffs, string) {
	if c, ok := FamilyCoeffs[g.Family]; ok {
		return c, fmt.Sprintf("built-in %s coefficients", g.Family)
	}
	return hopperCoeffs, fmt.Sprintf("no measured %s benchmark: Hopper's coefficients on %s's spec sheet", g.Family, g.Name)
}

// TokensPerStreamChunk is how many tokens the engine generates for each
// output token the benchmark client counts, which is what a client's
// inter-token latency is divided by: (E2E − TTFT) / (counted − 1). It is 1
// except for the Llama-2 SentencePiece tokenizer (model_type llama with a
// 32,000-token vocabulary: Llama-2, CodeLlama), where the client counts
// fewer tokens than were generated: on both Llama-2-7B runs of the train/val
// split, (E2E − TTFT) / ITL gives 0.78 × the requested output (193.6 of 247
// on codegen, 1,119 of 1,448 on reasoning), the same ratio at 6× the
// length, which an early end of sequence would not give (it would cut long
// outputs far more), while every other model's runs give 0.99–1.00. The
// twin therefore generates the full output (E2E) and reports ITL per
// counted token; with the coefficients shared by all 13 experiments, both
// Llama-2 runs then land within 5 % on E2E and ITL alike.
func TokensPerStreamChunk(m ModelConfig) float64 {
	if m.Arch == "llama" && m.Vocab >= 32000 && m.Vocab <= 32064 {
		return llama2TokensPerChunk
	}
	return 1
}

// llama2TokensPerChunk is 1/0.78 (see TokensPerStreamChunk).
const llama2TokensPerChunk = 1.28
