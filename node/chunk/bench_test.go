package chunk

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// benchChunks is how many distinct chunks each benchmark cycles through, so
// that B/sample is an average and branch predictors cannot learn one chunk.
const benchChunks = 32

var benchSizes = []int{120, 1024}

func BenchmarkEncode(b *testing.B) {
	for _, s := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				tss, vss := series(s, n, benchChunks)
				var buf []byte
				total := 0
				for i := range tss {
					buf = Encode(buf[:0], tss[i], vss[i])
					total += len(buf)
				}
				b.ReportAllocs()
				b.SetBytes(int64(16 * n))
				i := 0
				for b.Loop() {
					buf = Encode(buf[:0], tss[i], vss[i])
					i = (i + 1) % benchChunks
				}
				b.ReportMetric(float64(total)/float64(n*benchChunks), "B/sample")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
			})
		}
	}
}

// BenchmarkEncodeXOR encodes values with Gorilla XOR only, the baseline
// the chosen encodings are measured against.
func BenchmarkEncodeXOR(b *testing.B) {
	for _, name := range []string{"sensor-decimal", "noisy-float"} {
		s := shapeByName(name)
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				tss, vss := series(s, n, benchChunks)
				var buf []byte
				total := 0
				for i := range tss {
					buf = encode(buf[:0], tss[i], vss[i], 1<<valXOR)
					total += len(buf)
				}
				b.ReportAllocs()
				b.SetBytes(int64(16 * n))
				i := 0
				for b.Loop() {
					buf = encode(buf[:0], tss[i], vss[i], 1<<valXOR)
					i = (i + 1) % benchChunks
				}
				b.ReportMetric(float64(total)/float64(n*benchChunks), "B/sample")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
			})
		}
	}
}

func encodeAll(s shape, n int) (chunks [][]byte, bytes int) {
	tss, vss := series(s, n, benchChunks)
	for i := range tss {
		c := Encode(nil, tss[i], vss[i])
		chunks = append(chunks, c)
		bytes += len(c)
	}
	return chunks, bytes
}

func BenchmarkDecode(b *testing.B) {
	for _, s := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				chunks, total := encodeAll(s, n)
				ts, vs := make([]int64, 0, n), make([]float64, 0, n)
				b.ReportAllocs()
				b.SetBytes(int64(16 * n))
				i := 0
				for b.Loop() {
					var err error
					ts, vs, err = Decode(chunks[i], ts[:0], vs[:0])
					if err != nil {
						b.Fatal(err)
					}
					i = (i + 1) % benchChunks
				}
				b.ReportMetric(float64(total)/float64(n*benchChunks), "B/sample")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
			})
		}
	}
}

func BenchmarkIterator(b *testing.B) {
	for _, s := range shapes {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				chunks, total := encodeAll(s, n)
				it := NewIterator(chunks[0])
				b.ReportAllocs()
				b.SetBytes(int64(16 * n))
				i := 0
				var sum uint64 // consume samples without a float add chain
				for b.Loop() {
					it.Reset(chunks[i])
					for it.Next() {
						t, v := it.At()
						sum ^= uint64(t) ^ math.Float64bits(v)
					}
					if it.Err() != nil {
						b.Fatal(it.Err())
					}
					i = (i + 1) % benchChunks
				}
				b.ReportMetric(float64(total)/float64(n*benchChunks), "B/sample")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
				_ = sum
			})
		}
	}
}

// BenchmarkPlanCode measures choosing a bucket table for 120 residuals.
func BenchmarkPlanCode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		name string
		gen  func() uint64
	}{
		{"sensor", func() uint64 { return zigzag(r.Int64N(3) - 1) }},
		{"jitter", func() uint64 { return uint64(r.Int64N(100)) }},
		{"counter", func() uint64 { return uint64(r.Int64N(200)) }},
		{"noise", func() uint64 { return r.Uint64() >> 10 }},
	} {
		var h histogram
		var maxU uint64
		for range 120 {
			u := c.gen()
			h.add(u)
			maxU = max(maxU, u)
		}
		b.Run(c.name, func(b *testing.B) {
			var sc planScratch
			b.ReportAllocs()
			for b.Loop() {
				planCode(&h, maxU, &sc)
			}
		})
	}
}
