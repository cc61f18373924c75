package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
)

// BenchmarkNode_Write measures the write path in process: validation, WAL
// record encoding and append, head append, with the WAL fsync relaxed so the
// figure is the CPU cost, not the disk's. It reports WAL bytes and head memory
// bytes per sample.
func BenchmarkNode_Write(b *testing.B) {
	for _, shape := range []struct{ series, perSeries int }{{100, 100}, {1000, 10}} {
		b.Run(fmt.Sprintf("series=%d/points=%d", shape.series, shape.perSeries), func(b *testing.B) {
			o := testOptions(b, b.TempDir())
			o.Now = time.Now
			o.WALSync = wal.SyncPolicy{Interval: time.Second}
			o.FlushInterval = 100 * time.Millisecond
			n := mustOpen(b, o)
			defer n.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			batches := make([]model.Batch, shape.series)
			vals := make([]float64, shape.series)
			for i := range batches {
				batches[i].Labels = []labels.Label{{Name: labels.MetricName, Value: "temperature"}, {Name: "sensor", Value: fmt.Sprint(i)}}
				batches[i].Ts = make([]int64, shape.perSeries)
				batches[i].Vs = make([]float64, shape.perSeries)
				vals[i] = 20
			}
			t := time.Now().Add(-2 * time.Hour).UnixMilli()
			points := shape.series * shape.perSeries
			b.SetBytes(int64(16 * points))
			b.ReportAllocs()
			b.ResetTimer()
			var written int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for s := range batches {
					for k := range batches[s].Ts {
						vals[s] += float64(rng.IntN(3)-1) / 10
						batches[s].Ts[k] = t + int64(k)*100
						batches[s].Vs[k] = vals[s]
					}
				}
				t += int64(shape.perSeries) * 100
				b.StartTimer()
				res, err := n.Write(context.Background(), batches)
				if err != nil || res.Rejected != 0 {
					b.Fatalf("write: %v %+v", err, res.Rejections)
				}
				written += res.Accepted
			}
			b.StopTimer()
			st := n.Status()
			b.ReportMetric(float64(st.WALRecordBytes)/float64(written), "walB/sample")
			// Head memory per head sample at the end of the run: the open
			// chunks are young, and each keeps a buffer sized like its
			// predecessor, so this is well above a full chunk's ~0.6 B
			// (BenchmarkAppender in node/chunk).
			b.ReportMetric(float64(st.HeadBytes)/float64(st.HeadSamples), "headB/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(written), "ns/sample")
		})
	}
}
