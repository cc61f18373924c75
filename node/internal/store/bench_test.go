package store

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node/labels"
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

// Shape of the rollup benchmarks: five years of daily rollups of 100
// series, compacted.
const (
	benchRollupSeries     = 100
	benchRollupDays       = 5*365 + 1
	benchRollupValueBytes = 48 // count, sum, min, max, first, last
)

// openRollupBench returns a compacted store holding the daily rollups of
// benchRollupSeries series over benchRollupDays days, and the first and
// last bucket.
func openRollupBench(b *testing.B) (db *DB, start, end int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(2, 2))
	db = openTest(b, Options{})
	start = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	write(b, db, func(bt *Batch) {
		for id := range uint64(benchRollupSeries) {
			for d := range int64(benchRollupDays) {
				bt.PutRollup(KindRollup1d, id, start+d*dayMs, randomBytes(rng, benchRollupValueBytes))
			}
		}
	})
	if err := db.CompactAll(); err != nil {
		b.Fatal(err)
	}
	return db, start, start + (benchRollupDays-1)*dayMs
}

// BenchmarkRollupsQuery reads five years of one series' daily rollups
// (48-byte values) from a compacted store holding 100 such series.
func BenchmarkRollupsQuery(b *testing.B) {
	db, start, end := openRollupBench(b)
	var n int
	b.ReportAllocs()
	for b.Loop() {
		n = 0
		err := db.Rollups(KindRollup1d, benchRollupSeries/2, start, end, func(int64, []byte) error {
			n++
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if n != benchRollupDays {
		b.Fatalf("read %d buckets, want %d", n, benchRollupDays)
	}
	b.SetBytes(int64(n * benchRollupValueBytes))
	b.ReportMetric(float64(n), "buckets/op")
}

// BenchmarkRollupsQuery100Series reads five years of daily rollups of all
// 100 series, one series after the other: the "5 years of daily averages
// for 100 series" query, whose budget is 50 ms.
func BenchmarkRollupsQuery100Series(b *testing.B) {
	db, start, end := openRollupBench(b)
	var n int
	b.ReportAllocs()
	for b.Loop() {
		n = 0
		for id := range uint64(benchRollupSeries) {
			err := db.Rollups(KindRollup1d, id, start, end, func(int64, []byte) error {
				n++
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	if want := benchRollupSeries * benchRollupDays; n != want {
		b.Fatalf("read %d buckets, want %d", n, want)
	}
	b.SetBytes(int64(n * benchRollupValueBytes))
	b.ReportMetric(float64(n), "buckets/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/bucket")
}

// BenchmarkIndex reads the postings of 10,000 series with labels host (1,000
// values of 10 series each) and zone (10 values): listing the host values
// (a skip-scan), all postings of one zone, and the postings of the hosts a
// regexp-like predicate matches.
func BenchmarkIndex(b *testing.B) {
	const series, hosts, zones = 10_000, 1_000, 10
	db := openTest(b, Options{})
	write(b, db, func(bt *Batch) {
		for id := range uint64(series) {
			bt.PutSeries(id, labels.FromStrings("__name__", "cpu",
				"host", fmt.Sprintf("pi-%04d", id%hosts), "zone", fmt.Sprintf("z%d", id%zones)))
		}
	})
	if err := db.CompactAll(); err != nil {
		b.Fatal(err)
	}
	b.Run("LabelValues/host", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if vs, err := db.LabelValues("host"); err != nil || len(vs) != hosts {
				b.Fatalf("LabelValues = %d values, %v", len(vs), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/hosts, "ns/value")
	})
	b.Run("Postings/zone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ids, err := db.Postings("zone", "z3"); err != nil || len(ids) != series/zones {
				b.Fatalf("Postings = %d ids, %v", len(ids), err)
			}
		}
	})
	b.Run("PostingsMatching/host", func(b *testing.B) {
		match := func(v string) bool { return strings.HasSuffix(v, "7") } // 100 of 1,000 hosts
		b.ReportAllocs()
		for b.Loop() {
			if ids, err := db.PostingsMatching("host", match); err != nil || len(ids) != series/10 {
				b.Fatalf("PostingsMatching = %d ids, %v", len(ids), err)
			}
		}
	})
}

// BenchmarkRollupOneBucket reads one daily bucket of one series, as the
// flush reads a series' open packs: a point read (Rollup) against a
// one-bucket scan (Rollups).
func BenchmarkRollupOneBucket(b *testing.B) {
	db, start, _ := openRollupBench(b)
	at := start + 100*dayMs
	b.Run("Rollup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, found, err := db.Rollup(KindRollup1d, benchRollupSeries/2, at); err != nil || !found {
				b.Fatal(found, err)
			}
		}
	})
	b.Run("Rollups", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			if err := db.Rollups(KindRollup1d, benchRollupSeries/2, at, at, func(int64, []byte) error { n++; return nil }); err != nil || n != 1 {
				b.Fatal(n, err)
			}
		}
	})
}
