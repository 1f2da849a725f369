package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The benchmarks read a synthetic in-memory trace of benchRows rows, one
// whole file per op, and report rows/s and allocations per row (the
// reader's fixed setup — buffers, the first row — spread over the file).

const benchRows = 100_000

func azureBenchData() []byte {
	var b bytes.Buffer
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\r\n")
	t := time.Date(2023, 11, 16, 18, 17, 3, 979960000, time.UTC)
	for i := range benchRows {
		if i > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "%s,%d,%d", t.Format("2006-01-02 15:04:05.0000000"), 100+i*37%7000, 5+i*13%1800)
		t = t.Add(time.Duration(389_617_100 + i%1000*100))
	}
	return b.Bytes()
}

func mooncakeBenchData() []byte {
	var b bytes.Buffer
	for i := range benchRows {
		in := 512 + i*997%20000
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [`, i/4*3000, in, 1+i%2000)
		for k := range (in + BlockTokens - 1) / BlockTokens {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d", i*3+k)
		}
		b.WriteString("]}\n")
	}
	return b.Bytes()
}

func benchRead(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var rec Record
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), "bench", Options{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			err := r.Next(&rec)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != benchRows {
			b.Fatalf("read %d rows, want %d", n, benchRows)
		}
	}
	runtime.ReadMemStats(&after)
	rows := float64(benchRows) * float64(b.N)
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/rows, "allocs/row")
}

func BenchmarkAzureReader(b *testing.B) { benchRead(b, azureBenchData()) }

func BenchmarkAzureReaderGzip(b *testing.B) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(azureBenchData())
	zw.Close()
	benchRead(b, buf.Bytes())
}

func BenchmarkMooncakeReader(b *testing.B) { benchRead(b, mooncakeBenchData()) }

func BenchmarkCanonicalWriter(b *testing.B) {
	recs := make([]Record, 1000)
	for i := range recs {
		recs[i] = Record{Time: time.Duration(i) * 3 * time.Millisecond, Model: "llama-3.1-8b", Class: "chat",
			Input: 812 + i, Output: 96, Blocks: []uint64{uint64(i), uint64(i + 1), uint64(i + 2)}}
	}
	b.ReportAllocs()
	for b.Loop() {
		w := NewWriter(io.Discard)
		for i := range recs {
			if err := w.Write(&recs[i]); err != nil {
				b.Fatal(err)
			}
		}
		w.Close()
	}
	b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestBenchDataIsValid keeps the benchmark inputs honest: they must read
// without errors as the formats they claim to be.
func TestBenchDataIsValid(t *testing.T) {
	for _, tc := range []struct {
		format string
		data   []byte
	}{{FormatAzure, azureBenchData()}, {FormatMooncake, mooncakeBenchData()}} {
		r, err := NewReader(bytes.NewReader(tc.data), "bench", Options{})
		require.NoError(t, err)
		require.Equal(t, tc.format, r.Format())
		s, err := ComputeStats(r)
		require.NoError(t, err)
		require.Equal(t, benchRows, s.Requests)
		if tc.format == FormatMooncake {
			require.Zero(t, s.Blocks.LengthMismatch)
		}
	}
}
