package latency

// This file derives each measured GPU's kernel coefficients (DeviceCoeffs,
// devices_table.go) from the op-level measurements in testdata/kernels/
// (converted by kernels_convert_test.go), and checks that the committed
// table is what the measurements give:
//
//	go test ./twin/latency -run TestDeviceTable -update   # rewrite devices_table.go
//
// Every coefficient is a least-squares fit of one op's physical form to
// that op's measurements, in log space (relative error), by Nelder-Mead:
//
//	GEMM              t = t0 + max(FLOPs/(peak·ec), bytes/(BW·ew))
//	decode attention  t = t0 + KV bytes/(BW·ekv)
//	prefill attention t = t0 + FLOPs/(peak16·ea)
//	fused MoE         t = t0 + max(FLOPs/(peak·ec·m/(m+mh)), touched experts' bytes/(BW·ew))
//	                  (m: tokens per expert; touched: E·(1−(1−k/E)^n) under uniform routing)
//
// and the all-reduce is the measured table itself (latency against message
// size per tensor-parallel degree), interpolated.

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/optimize"
)

// kernelGPUs are the measured GPUs: file prefix, spec-table name, L2 in bytes.
var kernelGPUs = []struct {
	prefix, gpu string
	l2          float64
}{
	{"h100", "H100-SXM", 50e6}, // H100 SXM5: 50 MB L2
	{"a100", "A100-SXM-80GB", 40e6},
	{"l40s", "L40S", 96e6},
}

// readKernelCSV reads one converted table: header → column index, rows,
// and each row's first column as text (a dtype, or a number read into the
// row too). Other columns must be numbers, but those named in text, which
// read as NaN.
func readKernelCSV(t testing.TB, name string, text ...string) (map[string]int, [][]float64, []string) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "kernels", name))
	require.NoError(t, err)
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err, name)
	require.Greater(t, len(recs), 1, name)
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	var rows [][]float64
	var dtypes []string
	for li, r := range recs[1:] {
		row := make([]float64, len(r))
		dtypes = append(dtypes, r[0])
		for i, v := range r {
			x, err := strconv.ParseFloat(v, 64)
			switch {
			case err == nil:
				row[i] = x
			case i == 0 || slices.Contains(text, recs[0][i]): // the first column may be text (a dtype)
				row[i] = math.NaN()
			default:
				t.Fatalf("%s:%d: column %s: %q is not a number", name, li+2, recs[0][i], v)
			}
		}
		rows = append(rows, row)
	}
	return col, rows, dtypes
}

// fitLog fits positive parameters p (started at p0) to minimise the mean
// squared log error of model(p, row) against the rows' measured times.
// It returns the parameters and the median absolute relative error.
func fitLog(p0 []float64, n int, model func(p []float64, i int) float64, meas func(i int) float64) ([]float64, float64) {
	x0 := make([]float64, len(p0))
	for i, v := range p0 {
		x0[i] = math.Log(v)
	}
	obj := func(x []float64) float64 {
		p := make([]float64, len(x))
		for i, v := range x {
			p[i] = math.Exp(v)
		}
		s := 0.0
		for i := 0; i < n; i++ {
			e := math.Log(model(p, i) / meas(i))
			s += e * e
		}
		return s / float64(n)
	}
	res, err := optimize.Minimize(optimize.Problem{Func: obj}, x0,
		&optimize.Settings{FuncEvaluations: 4000, Converger: &optimize.FunctionConverge{Absolute: 1e-9, Iterations: 200}},
		&optimize.NelderMead{})
	if err != nil && res == nil {
		panic(err)
	}
	p := make([]float64, len(p0))
	for i, v := range res.X {
		p[i] = math.Exp(v)
	}
	return p, medianRelErr(n, func(i int) float64 { return model(p, i) }, meas)
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianRelErr(n int, pred, meas func(i int) float64) float64 {
	errs := make([]float64, n)
	for i := range errs {
		errs[i] = math.Abs(pred(i)/meas(i) - 1)
	}
	slices.Sort(errs)
	if n == 0 {
		return math.NaN()
	}
	return errs[n/2]
}

// gemmModel is the GEMM form the device coefficients describe.
func gemmModel(p []float64, g GPU, peak, m, n, k, b float64) float64 {
	flops := 2 * m * n * k
	bytes := b*n*k + 2*m*(n+k)
	return p[2] + math.Max(flops/(peak*1e6*p[0]), bytes/(g.BandwidthGBs*1e3*p[1]))
}

// kvBytesOf is a decode-attention row's KV read: every sequence's K and V.
func kvBytesOf(col map[string]int, r []float64) float64 {
	return r[col["batch"]] * (r[col["kv_len"]] + 1) * r[col["kv_heads"]] * r[col["head_dim"]] * 2 * 2
}

// moeModel is the fused-MoE form: p = ec, mh, ew, t0. Experts touched as
// under uniform routing, as physics.go counts them: the benchmark's skew
// (a power law near uniform) is left in the efficiencies.
func moeModel(p []float64, g GPU, peak, n, h, inter, k, E, tp, b float64) float64 {
	touched := E * (1 - math.Pow(1-k/E, n))
	bytes := touched * 3 * h * inter / tp * b
	flops := 2 * n * k * 3 * h * inter / tp
	m := n * k / E
	return p[3] + math.Max(flops/(peak*1e6*p[0]*m/(m+p[1])), bytes/(g.BandwidthGBs*1e3*p[2]))
}

type kernelFit struct {
	dev  DeviceCoeffs
	errs map[string]float64 // op → median |relative error| (in-sample; held-out shapes for *_cv)
}

func fitDevice(t testing.TB, prefix string, g GPU, l2 float64) kernelFit {
	kf := kernelFit{dev: DeviceCoeffs{GPU: g.Name}, errs: map[string]float64{}}
	d := &kf.dev

	// GEMMs of layer-like shapes. Weight matrices that fit in twice the L2
	// are left out where the GEMM is memory-bound: the benchmark reads the
	// same weights again and again and hits the cache, which a serving step,
	// streaming every layer's weights once, does not.
	col, rows, dt := readKernelCSV(t, prefix+"_gemm_perf.csv")
	for _, dtype := range []string{"bf16", "fp8"} {
		var sel [][]float64
		for i, r := range rows {
			m, n, k := r[col["m"]], r[col["n"]], r[col["k"]]
			b := 2.0
			if dtype == "fp8" {
				b = 1
			}
			if dt[i] != dtype || n < 1024 || k < 1024 || (b*n*k < 2*l2 && m < 512) {
				continue
			}
			sel = append(sel, r)
		}
		if len(sel) == 0 {
			continue
		}
		peak, b := g.BF16TFLOPs, 2.0
		if dtype == "fp8" {
			peak, b = g.FP8TFLOPs, 1
		}
		model := func(p []float64, i int) float64 {
			r := sel[i]
			return gemmModel(p, g, peak, r[col["m"]], r[col["n"]], r[col["k"]], b)
		}
		meas := func(i int) float64 { return sel[i][col["us"]] }
		p, med := fitLog([]float64{0.8, 0.8, 5}, len(sel), model, meas)
		// Held-out shapes: fit on half the (n, k) shapes, score the rest.
		var train, test [][]float64
		for _, r := range sel {
			if int(math.Log2(r[col["n"]])*4+math.Log2(r[col["k"]])*4)%2 == 0 {
				train = append(train, r)
			} else {
				test = append(test, r)
			}
		}
		pt, _ := fitLog([]float64{0.8, 0.8, 5}, len(train), func(p []float64, i int) float64 {
			r := train[i]
			return gemmModel(p, g, peak, r[col["m"]], r[col["n"]], r[col["k"]], b)
		}, func(i int) float64 { return train[i][col["us"]] })
		kf.errs["gemm_"+dtype+"_cv"] = medianRelErr(len(test), func(i int) float64 {
			r := test[i]
			return gemmModel(pt, g, peak, r[col["m"]], r[col["n"]], r[col["k"]], b)
		}, func(i int) float64 { return test[i][col["us"]] })
		kf.errs["gemm_"+dtype] = med
		if dtype == "bf16" {
			d.GEMMCompute, d.GEMMWeights, d.GEMMFixedUS = p[0], p[1], p[2]
		} else {
			// Its weight streaming fits above 100 % of bandwidth (FP8's halved
			// weights fit the L2 more often): physics.go streams FP8 weights
			// at the 16-bit kernels' efficiency.
			d.GEMMComputeFP8 = p[0]
		}
	}

	// Decode attention (16-bit KV): the time to read every sequence's KV.
	col, rows, dt = readKernelCSV(t, prefix+"_generation_attention_perf.csv")
	// Its fixed cost is what the smallest reads take (under 1 MB: launch
	// and tail); its efficiency is fitted on reads larger than the L2,
	// which a serving step's KV is, at the batch sizes an engine runs
	// (8 to 512 sequences: below, too few blocks fill the GPU; above,
	// beyond any max_num_seqs here).
	var sel [][]float64
	var smallUS []float64
	for i, r := range rows {
		if dt[i] != "bf16" {
			continue
		}
		if kvBytesOf(col, r) >= 2*l2 && r[col["batch"]] >= 8 && r[col["batch"]] <= 512 {
			sel = append(sel, r)
		}
		if kvBytesOf(col, r) < 1e6 {
			smallUS = append(smallUS, r[col["us"]])
		}
	}
	d.AttnDecodeFixedUS = medianOf(smallUS)
	kvBytes := func(r []float64) float64 { return kvBytesOf(col, r) }
	p, med := fitLog([]float64{0.7}, len(sel), func(p []float64, i int) float64 {
		return d.AttnDecodeFixedUS + kvBytes(sel[i])/(g.BandwidthGBs*1e3*p[0])
	}, func(i int) float64 { return sel[i][col["us"]] })
	d.AttnKV = p[0]
	kf.errs["decode_attention"] = med

	// Prefill attention (16-bit, causal: half the square).
	col, rows, dt = readKernelCSV(t, prefix+"_context_attention_perf.csv")
	sel = sel[:0]
	smallUS = smallUS[:0]
	for i, r := range rows {
		if dt[i] != "bf16" {
			continue
		}
		// Chunks of a few hundred tokens and more, as chunked prefill runs.
		if r[col["tokens"]] >= 512 && r[col["batch"]]*r[col["heads"]] >= 32 {
			sel = append(sel, r)
		}
		if r[col["tokens"]] <= 16 && r[col["batch"]] == 1 {
			smallUS = append(smallUS, r[col["us"]])
		}
	}
	d.AttnPrefillFixedUS = medianOf(smallUS)
	attnFlops := func(r []float64) float64 {
		s := r[col["tokens"]]
		return 4 * r[col["batch"]] * r[col["heads"]] * r[col["head_dim"]] * s * s / 2
	}
	p, med = fitLog([]float64{0.5}, len(sel), func(p []float64, i int) float64 {
		return d.AttnPrefillFixedUS + attnFlops(sel[i])/(g.BF16TFLOPs*1e6*p[0])
	}, func(i int) float64 { return sel[i][col["us"]] })
	d.AttnPrefill = p[0]
	kf.errs["prefill_attention"] = med

	// Fused MoE, experts sliced over TP (ep 1), one routing skew.
	col, rows, dt = readKernelCSV(t, prefix+"_moe_perf.csv")
	for _, dtype := range []string{"bf16", "fp8"} {
		peak, b := g.BF16TFLOPs, 2.0
		if dtype == "fp8" {
			peak, b = g.FP8TFLOPs, 1
		}
		var sel [][]float64
		for i, r := range rows {
			if dt[i] == dtype && r[col["ep"]] == 1 && r[col["tokens"]] <= 16384 {
				sel = append(sel, r)
			}
		}
		if len(sel) == 0 || peak == 0 {
			continue
		}
		mm := func(p []float64, r []float64) float64 {
			return moeModel(p, g, peak, r[col["tokens"]], r[col["hidden"]], r[col["inter"]], r[col["topk"]], r[col["experts"]], r[col["tp"]], b)
		}
		p, med := fitLog([]float64{0.6, 32, 0.8, 20}, len(sel), func(p []float64, i int) float64 { return mm(p, sel[i]) },
			func(i int) float64 { return sel[i][col["us"]] })
		kf.errs["moe_"+dtype] = med
		// Leave one expert shape out: fit the others, score it.
		shape := func(r []float64) string {
			return fmt.Sprintf("h%.0f i%.0f k%.0f E%.0f", r[col["hidden"]], r[col["inter"]], r[col["topk"]], r[col["experts"]])
		}
		shapes := map[string]bool{}
		for _, r := range sel {
			shapes[shape(r)] = true
		}
		var heldErrs []float64
		for s := range shapes {
			var tr, te [][]float64
			for _, r := range sel {
				if shape(r) == s {
					te = append(te, r)
				} else {
					tr = append(tr, r)
				}
			}
			pt, _ := fitLog([]float64{0.6, 32, 0.8, 20}, len(tr), func(p []float64, i int) float64 { return mm(p, tr[i]) },
				func(i int) float64 { return tr[i][col["us"]] })
			heldErrs = append(heldErrs, medianRelErr(len(te), func(i int) float64 { return mm(pt, te[i]) }, func(i int) float64 { return te[i][col["us"]] }))
		}
		slices.Sort(heldErrs)
		kf.errs["moe_"+dtype+"_cv"] = heldErrs[len(heldErrs)/2]
		if dtype == "bf16" {
			d.MoECompute, d.MoEHalfTokens, d.MoEWeights, d.MoEFixedUS = p[0], p[1], p[2], p[3]
		} else {
			d.MoEComputeFP8 = p[0]
		}
	}

	// All-reduce: the measured table.
	col, rows, _ = readKernelCSV(t, prefix+"_custom_allreduce_perf.csv")
	for _, r := range rows {
		d.AllReduce = append(d.AllReduce, ARPoint{TP: int(r[col["tp"]]), Bytes: r[col["bytes"]], US: r[col["us"]]})
	}
	slices.SortFunc(d.AllReduce, func(a, b ARPoint) int {
		if a.TP != b.TP {
			return a.TP - b.TP
		}
		return int(a.Bytes - b.Bytes)
	})
	return kf
}

// TestDeviceTable refits every measured GPU's kernel coefficients and
// checks devices_table.go holds them (-update rewrites it).
func TestDeviceTable(t *testing.T) {
	var fits []kernelFit
	for _, kg := range kernelGPUs {
		g, err := LookupGPU(kg.gpu)
		require.NoError(t, err)
		kf := fitDevice(t, kg.prefix, g, kg.l2)
		var ops []string
		for op := range kf.errs {
			ops = append(ops, op)
		}
		slices.Sort(ops)
		for _, op := range ops {
			t.Logf("%s %-22s median |error| %.1f%%", kg.gpu, op, 100*kf.errs[op])
		}
		d := kf.dev
		d.AllReduce = nil
		t.Logf("%s %+v (and %d all-reduce measurements)", kg.gpu, d, len(kf.dev.AllReduce))
		fits = append(fits, kf)
	}
	src := deviceTableSource(fits)
	if *update {
		require.NoError(t, os.WriteFile("devices_table.go", []byte(src), 0o644))
		return
	}
	have, err := os.ReadFile("devices_table.go")
	require.NoError(t, err)
	require.Equal(t, src, string(have), "devices_table.go is stale: go test ./twin/latency -run TestDeviceTable -update")
}

func deviceTableSource(fits []kernelFit) string {
	var b strings.Builder
	b.WriteString("// Code generated by go test ./twin/latency -run TestDeviceTable -update; DO NOT EDIT.\n\npackage latency\n\n")
	b.WriteString("// measuredDevices are fitted by kernelfit_test.go to the op-level\n// measurements of vLLM " + aicVersion + "'s kernels in testdata/kernels/\n// (AIConfigurator @ " + aicCommit[:12] + ", Apache-2.0).\nvar measuredDevices = map[string]DeviceCoeffs{\n")
	r := func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) }
	for _, f := range fits {
		d := f.dev
		fmt.Fprintf(&b, "\t%q: {GPU: %q,\n", d.GPU, d.GPU)
		fmt.Fprintf(&b, "\t\tGEMMCompute: %s, GEMMWeights: %s, GEMMFixedUS: %s, GEMMComputeFP8: %s,\n", r(d.GEMMCompute), r(d.GEMMWeights), r(d.GEMMFixedUS), r(d.GEMMComputeFP8))
		fmt.Fprintf(&b, "\t\tAttnKV: %s, AttnDecodeFixedUS: %s, AttnPrefill: %s, AttnPrefillFixedUS: %s,\n", r(d.AttnKV), r(d.AttnDecodeFixedUS), r(d.AttnPrefill), r(d.AttnPrefillFixedUS))
		fmt.Fprintf(&b, "\t\tMoECompute: %s, MoEHalfTokens: %s, MoEWeights: %s, MoEFixedUS: %s, MoEComputeFP8: %s,\n", r(d.MoECompute), r(d.MoEHalfTokens), r(d.MoEWeights), r(d.MoEFixedUS), r(d.MoEComputeFP8))
		b.WriteString("\t\tAllReduce: []ARPoint{")
		for i, p := range d.AllReduce {
			if i%4 == 0 {
				b.WriteString("\n\t\t\t")
			} else {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "{%d, %s, %s},", p.TP, r(p.Bytes), r(p.US))
		}
		b.WriteString("\n\t\t}},\n")
	}
	b.WriteString("}\n")
	return b.String()
}
