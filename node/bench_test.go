package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
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

// BenchmarkNode_QueryDownsample is the node's part of TSBS's cpu-max-all-1
// in PromQL: the hourly maximum of 10 series over 8 h, windows not on
// hour boundaries (so raw chunks are folded, not rollups), everything in
// the store, compacted. Besides wall time it reports the process's CPU
// time per query (cpu-ns/op), which other load on the machine disturbs
// less.
func BenchmarkNode_QueryDownsample(b *testing.B) {
	end := time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC)
	o := node.Options{DataDir: b.TempDir(), Now: func() time.Time { return end }, FlushInterval: time.Hour}
	n := mustOpen(b, o)
	defer n.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	start := end.Add(-24 * time.Hour).UnixMilli()
	for lo := start; lo < end.UnixMilli(); lo += 3600_000 {
		var batches []model.Batch
		for f := range 10 {
			bt := model.Batch{Labels: []labels.Label{{Name: labels.MetricName, Value: fmt.Sprintf("cpu_f%d", f)}, {Name: "hostname", Value: "host_1"}}}
			for t := lo; t < lo+3600_000; t += 10_000 {
				bt.Ts, bt.Vs = append(bt.Ts, t), append(bt.Vs, float64(rng.IntN(100)))
			}
			batches = append(batches, bt)
		}
		if res, err := n.Write(context.Background(), batches); err != nil || res.Rejected != 0 {
			b.Fatalf("write: %v %+v", err, res.Rejections)
		}
	}
	if err := n.Flush(); err != nil {
		b.Fatal(err)
	}
	if _, err := n.CompactStore(); err != nil {
		b.Fatal(err)
	}
	ms, err := labels.NewMatcher(labels.MatchEqual, "hostname", "host_1")
	if err != nil {
		b.Fatal(err)
	}
	qStart := end.Add(-12*time.Hour-17*time.Minute).UnixMilli() + 1
	q := model.Query{Matchers: []*labels.Matcher{ms}, Start: qStart, End: qStart + 8*3600_000 - 1,
		Mode: model.ModeDownsample, Step: 3600_000, Offset: qStart % 3600_000, Downsample: rollup.FuncMax}
	b.ReportAllocs()
	cpu0 := cpuNanos(b)
	for b.Loop() {
		series := 0
		if _, err := n.Query(context.Background(), q, func(s model.Series) error { series++; return nil }); err != nil || series != 10 {
			b.Fatalf("query: %v, %d series", err, series)
		}
	}
	b.ReportMetric(float64(cpuNanos(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuNanos is the process's user and system CPU time so far.
func cpuNanos(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
