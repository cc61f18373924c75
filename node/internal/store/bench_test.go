package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// randomBytes returns n bytes from rng: stored chunks are compressed data,
// so the benchmark data should not compress either.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// BenchmarkChunksQuery reads one hour of one series' chunks (2-minute
// chunks of 1 s samples, ~180 bytes each) from a compacted store holding two
// days of 100 such series, at the start and at the end of a day partition.
func BenchmarkChunksQuery(b *testing.B) {
	const (
		series     = 100
		days       = 2
		chunkMs    = 2 * minuteMs
		chunkBytes = 180
	)
	rng := rand.New(rand.NewPCG(1, 1))
	db := openTest(b, Options{})
	for d := range int64(days) {
		write(b, db, func(bt *Batch) {
			for id := range uint64(series) {
				for t := d * dayMs; t < (d+1)*dayMs; t += chunkMs {
					bt.PutChunk(id, t, t+chunkMs-1000, randomBytes(rng, chunkBytes))
				}
			}
		})
	}
	if err := db.CompactAll(); err != nil {
		b.Fatal(err)
	}
	for _, hour := range []int64{0, 23} {
		b.Run(fmt.Sprintf("hour=%02d", hour), func(b *testing.B) {
			minT := dayMs + hour*hourMs
			maxT := minT + hourMs - 1
			var n, bytes int
			b.ReportAllocs()
			for b.Loop() {
				n, bytes = 0, 0
				err := db.Chunks(series/2, minT, maxT, func(_ ChunkMeta, data []byte) error {
					n++
					bytes += len(data)
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			if n != int(hourMs/chunkMs) {
				b.Fatalf("read %d chunks, want %d", n, hourMs/chunkMs)
			}
			b.SetBytes(int64(bytes))
			b.ReportMetric(float64(n), "chunks/op")
		})
	}
}

// BenchmarkRollupsQuery reads five years of one series' daily rollups
// (48-byte values) from a compacted store holding 100 such series.
func BenchmarkRollupsQuery(b *testing.B) {
	const (
		series     = 100
		days       = 5*365 + 1
		valueBytes = 48 // count, sum, min, max, first, last
	)
	rng := rand.New(rand.NewPCG(2, 2))
	db := openTest(b, Options{})
	start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	write(b, db, func(bt *Batch) {
		for id := range uint64(series) {
			for d := range int64(days) {
				bt.PutRollup(KindRollup1d, id, start+d*dayMs, randomBytes(rng, valueBytes))
			}
		}
	})
	if err := db.CompactAll(); err != nil {
		b.Fatal(err)
	}
	end := start + (days-1)*dayMs
	var n int
	b.ReportAllocs()
	for b.Loop() {
		n = 0
		err := db.Rollups(KindRollup1d, series/2, start, end, func(int64, []byte) error {
			n++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if n != days {
		b.Fatalf("read %d buckets, want %d", n, days)
	}
	b.SetBytes(int64(n * valueBytes))
	b.ReportMetric(float64(n), "buckets/op")
}
