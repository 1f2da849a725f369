package trace

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
)

// The fuzzers feed arbitrary bytes to each reader, forced to its format, in
// strict and skip-bad-rows mode, and with detection. None may panic or loop;
// what they return must keep the readers' promises. Seeds are in code and
// under testdata/fuzz/<FuzzName>/.

// checkRequests reads data with opts and checks every promise a Reader
// makes about what it returns.
func checkRequests(t *testing.T, data []byte, opts Options) []Record {
	r, err := NewReader(bytes.NewReader(data), "fuzz", opts)
	if err != nil {
		return nil
	}
	var out []Record
	var rec Record
	lastLine := 0
	for {
		err := r.Next(&rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var re *RowError
			if opts.SkipBadRows && errors.As(err, &re) {
				t.Fatalf("SkipBadRows returned a row error: %v", err)
			}
			if again := r.Next(&rec); again != err {
				t.Fatalf("error not sticky: %v, then %v", err, again)
			}
			break
		}
		if rec.Time < 0 || (len(out) > 0 && rec.Time < out[len(out)-1].Time) {
			t.Fatalf("line %d: time %v after %d records: not sorted or negative", rec.Line, rec.Time, len(out))
		}
		if rec.Input < 0 || rec.Output < 0 || rec.Input > maxCount || rec.Output > maxCount || rec.Deadline < 0 || rec.Service < 0 {
			t.Fatalf("line %d: out-of-range record %+v", rec.Line, rec)
		}
		if rec.Line <= lastLine {
			t.Fatalf("line numbers do not increase: %d after %d", rec.Line, lastLine)
		}
		lastLine = rec.Line
		if len(out) > len(data) {
			t.Fatalf("%d records from %d bytes", len(out), len(data))
		}
		out = append(out, rec.Clone())
	}
	if n := len(r.SkippedRows()); n > MaxSkippedRows || n > r.Skipped() || (!opts.SkipBadRows && r.Skipped() > 0) {
		t.Fatalf("skipped %d, kept %d (SkipBadRows %v)", r.Skipped(), n, opts.SkipBadRows)
	}
	if opts.Format != "" && r.Format() != opts.Format {
		t.Fatalf("format %q, forced %q", r.Format(), opts.Format)
	}
	return out
}

func fuzzRequests(f *testing.F, format string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []Options{{Format: format}, {Format: format, SkipBadRows: true}, {}} {
			recs := checkRequests(t, data, opts)
			if opts.Format == FormatCanonical {
				roundTrip(t, recs)
			}
		}
	})
}

// roundTrip writes recs as canonical JSONL and checks they read back equal.
func roundTrip(t *testing.T, recs []Record) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			t.Fatalf("write what was read: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	back := checkRequests(t, buf.Bytes(), Options{Format: FormatCanonical})
	if len(back) != len(recs) {
		t.Fatalf("wrote %d records, read back %d:\n%s", len(recs), len(back), buf.Bytes())
	}
	for i := range recs {
		a, b := recs[i], back[i]
		a.Line, b.Line = 0, 0
		if len(a.Blocks) == 0 && len(b.Blocks) == 0 {
			a.Blocks, b.Blocks = nil, nil
		}
		if !equalRecords(a, b) {
			t.Fatalf("record %d: wrote %+v, read back %+v", i, a, b)
		}
	}
}

func equalRecords(a, b Record) bool {
	if len(a.Blocks) != len(b.Blocks) {
		return false
	}
	for i := range a.Blocks {
		if a.Blocks[i] != b.Blocks[i] {
			return false
		}
	}
	a.Blocks, b.Blocks = nil, nil
	return reflect.DeepEqual(a, b)
}

func FuzzAzure(f *testing.F) {
	fuzzRequests(f, FormatAzure,
		"TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n2023-11-16 18:17:04.0319600,3180,8",
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.0000000+00:00,2048,128\n2024-05-10 00:00:00.5000000+00:00,17,3\n",
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04.0000000,1,1\n2023-11-16 18:17:03.0000000,1,1\n",
		"ContextTokens,TIMESTAMP,GeneratedTokens\n\"1\",2023-11-16 18:17:03Z,2\n")
}

func FuzzMooncake(f *testing.F) {
	fuzzRequests(f, FormatMooncake,
		`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}`+"\n"+
			`{"timestamp": 0, "input_length": 2290, "output_length": 316, "hash_ids": [0, 42, 43, 44, 45]}`+"\n",
		`{"timestamp": 3001, "input_length": 1, "output_length": 1, "hash_ids": [], "x": {"y": [true, null, "\u00e9"]}}`,
		`{"hash_ids": [18446744073709551615], "output_length": 0, "input_length": 0, "timestamp": 9223372036854}`)
}

func FuzzBurstGPT(f *testing.F) {
	fuzzRequests(f, FormatBurstGPT,
		"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n45.5,GPT-4,1087,0,1087,API log\n",
		"Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n0,s,1,\"GPT-4, \"\"x\"\"\",100,10,110,Conversation log\n",
		"Timestamp,Request tokens,Response tokens\n1e3,1,1\n0.0000000005,2,2\n")
}

func FuzzGenAI(f *testing.F) {
	fuzzRequests(f, FormatGenAI,
		"gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora\n"+
			"2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0,G0000,63.0,26.0,1.0,30.0,M0000,0\n2024-11-15 18:16:14,TXT_2_IMG,SUCCEED,43.0,G0001,,,1.0,40.0,,0\n")
}

func FuzzCanonical(f *testing.F) {
	fuzzRequests(f, FormatCanonical,
		`{"t":0,"tenant":"acme","user":"u\"1\\","session":"s\u00e9\ud83d\ude00","class":"chat","model":"m","input":812,"output":96,"blocks":[4,9],"deadline_s":30,"service_s":1.25}`+"\n"+
			`{"output": 1, "input": 2, "t": 1.5e0, "tenant": null, "blocks": null, "deadline_s": null}`+"\n",
		"{\"t\":0.000000001,\"user\":\"\xff\",\"input\":0,\"output\":0}\n{\"t\":9223372036.854775807,\"input\":2147483647,\"output\":1}\n",
		`{"t": 1, "input": 1, "output": 1, "bogus": 1}`)
}

// FuzzWriter writes one record built from the fuzzer's values and checks
// that it reads back equal (strings with invalid UTF-8 read back with
// U+FFFD per bad byte, as encoding/json would).
func FuzzWriter(f *testing.F) {
	f.Add(int64(0), "acme", "u1", "s9", "chat", "llama-3.1-8b", 812, 96, []byte{4, 0, 0, 0, 0, 0, 0, 0}, int64(30e9), int64(0))
	f.Add(int64(1), "\xff\"\\\n\u2028", "", "", "", "", 0, 0, []byte(nil), int64(1), int64(1<<62))
	f.Fuzz(func(t *testing.T, ns int64, tenant, user, session, class, model string, input, output int, blocks []byte, deadline, service int64) {
		rec := Record{Time: time.Duration(ns), Tenant: tenant, User: user, Session: session, Class: class, Model: model,
			Input: input, Output: output, Deadline: time.Duration(deadline), Service: time.Duration(service)}
		for i := 0; i+8 <= len(blocks); i += 8 {
			var h uint64
			for _, c := range blocks[i : i+8] {
				h = h<<8 | uint64(c)
			}
			rec.Blocks = append(rec.Blocks, h)
		}
		var buf bytes.Buffer
		w := NewWriter(&buf)
		if err := w.Write(&rec); err != nil {
			if rec.Time >= 0 && rec.Input >= 0 && rec.Input <= maxCount && rec.Output >= 0 && rec.Output <= maxCount && rec.Deadline >= 0 && rec.Service >= 0 {
				t.Fatalf("refused a valid record %+v: %v", rec, err)
			}
			return
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		back := checkRequests(t, buf.Bytes(), Options{Format: FormatCanonical})
		if len(back) != 1 {
			t.Fatalf("read back %d records from %s", len(back), buf.Bytes())
		}
		valid := func(s string) string { return string([]rune(s)) }
		want := rec
		want.Tenant, want.User, want.Session, want.Class, want.Model = valid(tenant), valid(user), valid(session), valid(class), valid(model)
		want.Line = 1
		got := back[0]
		if len(got.Blocks) == 0 && len(want.Blocks) == 0 {
			got.Blocks, want.Blocks = nil, nil
		}
		if !equalRecords(want, got) {
			t.Fatalf("wrote %+v\nread %+v\nfrom %s", want, got, buf.Bytes())
		}
	})
}

func FuzzPods(f *testing.F) {
	for _, s := range []string{
		"name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
			"openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\nopenb-pod-0017,6000,12288,1,460,V100M16|V100M32,BE,Pending,427061,12902960,\n",
		"name,creation_time,deletion_time,num_gpu,gpu_milli,memory_mib,cpu_milli\np,5,9,1,1,1,1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []Options{{Format: FormatPod}, {Format: FormatPod, SkipBadRows: true}, {}} {
			r, err := NewJobReader(bytes.NewReader(data), "fuzz", opts)
			if err != nil {
				continue
			}
			var j Job
			for n := 0; ; n++ {
				err := r.Next(&j)
				if err != nil {
					var re *RowError
					if opts.SkipBadRows && errors.As(err, &re) {
						t.Fatalf("SkipBadRows returned a row error: %v", err)
					}
					break
				}
				if n > len(data) || j.Deleted < j.Created || (j.ScheduledKnown && j.Scheduled < j.Created) ||
					j.GPUMilli > 1000 || j.Name == "" || j.CPUMilli < 0 || j.GPUs < 0 {
					t.Fatalf("line %d: bad job %+v", j.Line, j)
				}
				for _, m := range j.GPUSpec {
					if m == "" {
						t.Fatalf("line %d: empty GPU model in %q", j.Line, j.GPUSpec)
					}
				}
			}
		}
	})
}

func FuzzNodes(f *testing.F) {
	for _, s := range []string{
		"sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,32000,262144,0,\nopenb-node-1521,96000,393216,8,G2\n",
		"gpu_model,gpu_capacity_num,cpu_num,node_name\nA100-SXM4-80GB,8,128,4337\nGPU-series-1,1,192,1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []Options{{}, {SkipBadRows: true}, {Format: FormatSpotNode}} {
			r, err := NewNodeReader(bytes.NewReader(data), "fuzz", opts)
			if err != nil {
				continue
			}
			var n Node
			for i := 0; ; i++ {
				if err := r.Next(&n); err != nil {
					break
				}
				if i > len(data) || n.Name == "" || n.GPUs < 0 || n.CPUMilli < 0 || n.MemoryMiB < 0 {
					t.Fatalf("line %d: bad node %+v", n.Line, n)
				}
			}
		}
	})
}
