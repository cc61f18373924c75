package wal

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

func benchRecord(size int) Record {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return Record{Data: data, MinT: 1_700_000_000_000, MaxT: 1_700_000_010_000, Points: int64(size / 10)}
}

// BenchmarkAppend measures Append (with MaybeCut, as the node calls it) on
// a real directory without waiting for fsyncs. Old segments are removed
// as the node would after a checkpoint, so the disk does not fill up.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{100, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("size=%dB", size), func(b *testing.B) {
			l := mustOpen(b, Options{Dir: filepath.Join(b.TempDir(), "wal"), NodeID: "bench"})
			r := benchRecord(size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				seq, cut, err := l.MaybeCut()
				if err != nil {
					b.Fatal(err)
				}
				if cut && seq > 8 {
					if err := l.RemoveBefore(seq - 8); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := l.Append(r); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			mustClose(b, l)
		})
	}
}

// BenchmarkAppendSync measures acknowledged writes: concurrent writers each
// Append a 100-byte record and Sync it, on a real directory, with group
// commit (SyncPolicy{0}). fsyncs/op shows how many records share an fsync.
func BenchmarkAppendSync(b *testing.B) {
	for _, writers := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			l := mustOpen(b, Options{Dir: filepath.Join(b.TempDir(), "wal"), NodeID: "bench"})
			r := benchRecord(100)
			var mu sync.Mutex // the caller's lock across MaybeCut → Append
			var next atomic.Int64
			before := l.Stats().Fsyncs
			b.SetBytes(100)
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						mu.Lock()
						_, _, err := l.MaybeCut()
						var pos Position
						if err == nil {
							pos, err = l.Append(r)
						}
						mu.Unlock()
						if err == nil {
							err = l.Sync(pos)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(l.Stats().Fsyncs-before)/float64(b.N), "fsyncs/op")
			mustClose(b, l)
		})
	}
}
