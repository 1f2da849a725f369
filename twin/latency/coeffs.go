package latency

// engineCoeffs are the built-in engine coefficients of the physical
// step-time model for vLLM 0.15 (chunked prefill, prefix caching, CUDA
// graphs): the host's costs around the kernels and the client's per-request
// cost. They are software costs, the same on every GPU: each GPU's kernels
// come from its own measurements (DeviceFor), never from these. They are
// fitted jointly over the 13 measured train/val experiments of the
// sim-to-real study (H100; dense and MoE; TP 1, 2, 4; FP16 and FP8) with
// only the engine's terms free; docs/fidelity.md gives the command, the
// in-sample and the cross-validated errors.
//
// They were fitted with
//
//	fleetdrill calibrate --benchmark internal/benchmark/testdata/simtoreal \
//	  --free step_us,layer_us,seq_us,request_us,weights_x,kv_x,fixed_x --refine-evals 400
//
// from NeutralCoeffs (every factor 1, step 270 µs, layer 2, seq 3.9,
// request 8,000 µs), to a loss (RMS of log
// errors) of 0.1604. As physics: weights stream in the engine as in the
// microbenchmark (weights_x 1.00: 89 % of an H100's bandwidth), KV reads
// take 0.88 of the benchmark's time (86 % of the bandwidth, the paged
// kernel's median at 32–128 sequences), CUDA graphs hide 57 % of the
// kernels' measured fixed costs, the host spends 1.0 ms a step and 5 µs a
// sequence, and a request 1.0 ms outside the engine. compute_x, left free,
// went to 0.56, which would put H100's GEMMs at 140 % of their peak, so it
// stays 1 (the kernels' own figure).
//
// Link and AllReduce are not fitted: they model an all-reduce only where
// no measured table covers the GPU (workstation cards over PCIe), at
// NVLink's 3 µs per step and nearly its full bandwidth (the measured H100
// tables reach 2.2 µs more than that at 2 GPUs, and 270 GB/s of bus
// bandwidth at 32 MB: see docs/profiles.md).
var engineCoeffs = Coeffs{
	Link: 0.9, AllReduce: 4.3,
	WeightsX: 1.0028, KVX: 0.87801, FixedX: 0.42912,
	Step: 1006.8, Layer: 3.195, Seq: 5.2382,
	Request: 995.4,
}

// NeutralCoeffs are where a fit of the engine's coefficients starts when
// it must not lean on the built-in ones (a cross-validation fold): the
// kernels as measured (every factor 1) and round overheads, fitted on
// nothing. The built-in coefficients were fitted from them.
var NeutralCoeffs = Coeffs{
	Link: 0.9, AllReduce: 4.3,
	ComputeX: 1, WeightsX: 1, KVX: 1, FixedX: 1,
	Step: 270, Layer: 2, Seq: 3.9,
	Request: 8000,
}

// EngineFitted are the coefficients `calibrate --benchmark` fits unless
// told otherwise: the engine's overheads and in-engine factors, never the
// kernels' own efficiencies (those come from kernel measurements).
var EngineFitted = []string{"step_us", "layer_us", "seq_us", "request_us", "weights_x", "kv_x", "fixed_x"}

// CoeffsFor returns the built-in coefficients for a GPU (the engine's are
// the same on every GPU) and a note on where its kernels' efficiencies come
// from (DeviceFor).
func CoeffsFor(g GPU) (Coeffs, string) {
	_, how := DeviceFor(g)
	return engineCoeffs, "built-in engine coefficients; " + how
}
