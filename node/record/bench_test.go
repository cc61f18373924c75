package record

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchRecord builds a payload of series runs of n samples each, like a
// write batch of a scraped fleet: 10 s apart with jitter, gauge values.
func benchRecord(series, n int) (payload []byte, points int) {
	rng := rand.New(rand.NewPCG(1, 2))
	var e Encoder
	e.Reset()
	ts := make([]int64, n)
	vs := make([]float64, n)
	for id := range series {
		key := fmt.Appendf(nil, "__name__\xffcpu_seconds\xffhost\xffedge-%04d", id)
		e.DefineSeries(uint64(id), key)
		t := int64(1_700_000_000_000)
		for i := range n {
			t += 10_000 + rng.Int64N(50)
			ts[i], vs[i] = t, rng.Float64()*100
		}
		e.AddRun(uint64(id), ts, vs)
	}
	return e.AppendTo(nil), series * n
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("samples=%d", n), func(b *testing.B) {
			payload, points := benchRecord(100, n)
			var d Decoder
			def := func(uint64, []byte) error { return nil }
			run := func(uint64, []int64, []float64) error { return nil }
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Decode(payload, def, run); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*points), "ns/sample")
		})
	}
}

func BenchmarkFitRun(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	ts := make([]int64, 1000)
	t := int64(1_700_000_000_000)
	for i := range ts {
		t += 10_000 + rng.Int64N(50)
		ts[i] = t
	}
	b.ReportAllocs()
	for b.Loop() {
		if n, _ := FitRun(42, ts, 1<<20); n != len(ts) {
			b.Fatalf("FitRun fit %d of %d samples", n, len(ts))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ts)), "ns/sample")
}

// BenchmarkEncode: building a record of 100 series × n samples, raw
// (kind 1) and compressed (kind 2).
func BenchmarkEncode(b *testing.B) {
	for _, kind := range []byte{KindSamples, KindCompressed} {
		for _, n := range []int{10, 100} {
			b.Run(fmt.Sprintf("kind=%d/samples=%d", kind, n), func(b *testing.B) {
				var e Encoder
				e.SetKind(kind)
				tsbsLike(&e, 10, n)
				bytes := len(e.AppendTo(nil))
				var buf []byte
				b.ReportAllocs()
				for b.Loop() {
					e.Reset()
					tsbsLike(&e, 10, n)
					buf = e.AppendTo(buf[:0])
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100*n), "ns/sample")
				b.ReportMetric(float64(bytes)/float64(100*n), "bytes/sample")
			})
		}
	}
}
