package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node"
)

// BenchmarkApply applies a segment of 100 sensor series (random walk, two
// decimals, one point a second per series) to a fresh store.
func BenchmarkApply(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const series, perSeries = 100, 2000
	var batches []node.Batch
	end := testNow.Add(-time.Hour)
	for i := range series {
		ts, vs := make([]int64, perSeries), make([]float64, perSeries)
		v := 20.0
		for k := range perSeries {
			ts[k] = end.Add(-time.Duration(perSeries-k) * time.Second).UnixMilli()
			v += float64(rng.IntN(21)-10) / 100
			vs[k] = v
		}
		batches = append(batches, node.Batch{Labels: lbl("__name__", "temp", "sensor", fmt.Sprint(i)), Ts: ts, Vs: vs})
	}
	seg := edgeSegments(b, "e", batches)[0]
	b.SetBytes(int64(len(seg.file)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s := openStore(b, b.TempDir())
		b.StartTimer()
		a, err := s.Apply(context.Background(), "e", seg.seq, seg.crc, seg.file)
		b.StopTimer()
		if err != nil || a.Points != series*perSeries {
			b.Fatalf("%+v, %v", a, err)
		}
		s.Close()
	}
	b.ReportMetric(float64(series*perSeries*b.N)/b.Elapsed().Seconds(), "points/s")
}
