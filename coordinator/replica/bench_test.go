package replica

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/segment"
)

// BenchmarkApply applies a segment of 100 sensor series (random walk, two
// decimals, one point a second per series) to a fresh store.
func BenchmarkApply(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const series, perSeries = 100, 2000
	var batches []model.Batch
	end := testNow.Add(-time.Hour)
	for i := range series {
		ts, vs := make([]int64, perSeries), make([]float64, perSeries)
		v := 20.0
		for k := range perSeries {
			ts[k] = end.Add(-time.Duration(perSeries-k) * time.Second).UnixMilli()
			v += float64(rng.IntN(21)-10) / 100
			vs[k] = v
		}
		batches = append(batches, model.Batch{Labels: lbl("__name__", "temp", "sensor", fmt.Sprint(i)), Ts: ts, Vs: vs})
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

// copyBenchMB is about the uncompressed segment bytes BenchmarkCopy
// moves, in MB (about 10 bytes a point).
var copyBenchMB = flag.Int("copybench.mb", 200, "MB of segment bytes BenchmarkCopy copies")

// BenchmarkCopy copies an edge's history (about -copybench.mb MB of
// segment bytes: 2,000 sensor series, random walks with two decimals, one
// point every 10 s each) from a store served over gRPC on a loopback TCP
// socket into a fresh store, with the production engine sizes and
// CopyOptions' defaults: files S2-compressed (between hosts) and
// uncompressed (ClientOptions.Uncompressed, a peer on the same host). MiB/s is of uncompressed segment bytes until
// Copy returns (everything durable in the engine's WAL);
// MiB/s-flushed also counts closing the store, which writes the rest of
// its head into RocksDB; MiB/cpu-s is per second of CPU time of the
// process (both ends, until Copy returns).
func BenchmarkCopy(b *testing.B) {
	const series = 2000
	perSeries := *copyBenchMB * 1_000_000 / 10 / series
	open := func(dir string) *Store {
		s, err := Open(Options{Dir: dir, CoordinatorID: "coord", Now: clock, RetentionRaw: 30 * 24 * time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	src := open(b.TempDir())
	defer src.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	end := testNow.Add(-time.Hour)
	start := end.Add(-time.Duration(perSeries) * 10 * time.Second)
	const chunk = 2000 // points per series per write
	for lo := 0; lo < perSeries; lo += chunk {
		n := min(chunk, perSeries-lo)
		var batches []model.Batch
		for i := range series {
			ts, vs := make([]int64, n), make([]float64, n)
			v := 20.0 + float64(i%50)
			for k := range n {
				ts[k] = start.Add(time.Duration(lo+k)*10*time.Second + time.Duration(rng.IntN(50))*time.Millisecond).UnixMilli()
				v += float64(rng.IntN(21)-10) / 100
				vs[k] = math.Round(v*100) / 100
			}
			batches = append(batches, model.Batch{Labels: lbl("__name__", "temp", "sensor", fmt.Sprint(i), EdgeLabel, "e"), Ts: ts, Vs: vs})
		}
		if _, err := src.eng.Write(context.Background(), batches); err != nil {
			b.Fatal(err)
		}
	}
	if err := src.eng.Flush(); err != nil {
		b.Fatal(err)
	}

	srv, err := NewServer(ServerOptions{Store: src})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer(GRPCServerOptions(DefaultMaxSegmentBytes)...)
	srv.Register(g)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(lis) }()
	defer func() { g.Stop(); <-served }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	for _, k := range []struct {
		name string
		o    ClientOptions
	}{{"s2", ClientOptions{}}, {"uncompressed", ClientOptions{Uncompressed: true}}} {
		b.Run(k.name, func(b *testing.B) { benchCopy(b, NewClientWith(cc, k.o), open, series*perSeries, start, end) })
	}
}

// benchCopy is one sub-benchmark of BenchmarkCopy: copies through c into
// fresh stores.
func benchCopy(b *testing.B, c *Client, open func(string) *Store, points int, start, end time.Time) {
	var bytes, copied int64
	var withFlush, cpu time.Duration
	cpuOK := true
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		dst := open(b.TempDir())
		b.StartTimer()
		t0 := time.Now()
		c0, ok0 := processCPU()
		st, err := dst.Copy(context.Background(), c, "e", 1, 100, start.UnixMilli(), end.UnixMilli(), CopyOptions{})
		c1, ok1 := processCPU()
		b.StopTimer()
		cpu, cpuOK = cpu+c1-c0, cpuOK && ok0 && ok1
		if err != nil || st.Points != int64(points) || st.Rejected != 0 {
			b.Fatalf("copy: %+v, %v", st, err)
		}
		if i == 0 {
			b.SetBytes(st.Bytes)
		}
		bytes, copied = bytes+st.Bytes, copied+st.Points
		if err := dst.Close(); err != nil { // the head's rest into RocksDB
			b.Fatal(err)
		}
		withFlush += time.Since(t0)
		b.StartTimer()
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(bytes)/(1<<20)/sec, "MiB/s")
	b.ReportMetric(float64(copied)/sec, "points/s")
	b.ReportMetric(float64(bytes)/(1<<20)/withFlush.Seconds(), "MiB/s-flushed")
	if cpuOK && cpu > 0 {
		// Both ends' CPU (one process): steadier than MiB/s on a shared
		// machine.
		b.ReportMetric(float64(bytes)/(1<<20)/cpu.Seconds(), "MiB/cpu-s")
	}
}

// fleetSegment is a segment of edge.
type fleetSegment struct {
	edge string
	shipped
}

// fleetSegments builds perEdge segments (seqs 1..perEdge) of each of
// edges edges, each like a fleet edge's sealed every 5 s: 8 series of 5
// points (one a second). Segment seq of every edge comes before seq+1 of
// any in the result.
func fleetSegments(b testing.TB, edges, perEdge int) [][]fleetSegment {
	const series, pts = 8, 5
	out := make([][]fleetSegment, perEdge)
	vs := make([]float64, pts)
	for e := range edges {
		name := fmt.Sprintf("edge-%05d", e)
		bld, err := segment.NewBuilder(name, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		for seq := 1; seq <= perEdge; seq++ {
			t0 := testNow.Add(-time.Hour).Add(time.Duration(seq*pts) * time.Second).UnixMilli()
			for i := range series {
				ts := make([]int64, pts)
				for k := range ts {
					ts[k] = t0 + int64(k)*1000
					vs[k] = float64(e+i+k) / 4
				}
				if _, err := bld.Add(labels.Labels(lbl("__name__", "temp", "sensor", fmt.Sprint(i))), ts, vs); err != nil {
					b.Fatal(err)
				}
			}
			file, info, err := bld.Finish(uint64(seq), uint64(seq-1))
			if err != nil {
				b.Fatal(err)
			}
			out[seq-1] = append(out[seq-1], fleetSegment{name, shipped{info.Seq, info.CRC, file}})
		}
	}
	return out
}

// BenchmarkApplyConcurrent applies small segments (a fleet edge's: 8
// series × 5 points) of 1,000 edges from many goroutines at once, as a
// coordinator receiving a fleet's segments does. Each edge's first
// segment (its series created) is applied before the timer starts; b.N
// segments follow, 1,000 of one seq at a time. It reports segments/s,
// fsyncs per segment (the engine's WAL fsyncs and the index's store WAL
// syncs), the process's CPU time per segment and the wall time per
// segment of each phase of Apply (summed over concurrent Applies: waiting
// counts).
func BenchmarkApplyConcurrent(b *testing.B) {
	for _, g := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) { benchApplyConcurrent(b, g) })
	}
}

func benchApplyConcurrent(b *testing.B, goroutines int) {
	const edges = 1000
	segs := fleetSegments(b, edges, 1+(b.N+edges-1)/edges)
	s, err := Open(Options{Dir: b.TempDir(), CoordinatorID: "coord", Now: clock, RetentionRaw: 30 * 24 * time.Hour,
		HeadMaxBytes: 64 << 20, BlockCacheBytes: 32 << 20, WriteBufferBytes: 16 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	apply := func(list []fleetSegment) {
		next := make(chan fleetSegment)
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for seg := range next {
					if _, err := s.Apply(context.Background(), seg.edge, seg.seq, seg.crc, seg.file); err != nil {
						b.Error(err)
					}
				}
			})
		}
		for _, seg := range list {
			next <- seg
		}
		close(next)
		wg.Wait()
	}
	apply(segs[0])
	var todo []fleetSegment
	for _, l := range segs[1:] {
		todo = append(todo, l...)
	}
	todo = todo[:b.N]
	st0, wal0 := s.Stats(), s.eng.Status().WAL.Fsyncs
	s.phases = &applyPhases{}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, ok0 := processCPU()
	apply(todo)
	cpu1, ok1 := processCPU()
	b.StopTimer()
	st1, wal1 := s.Stats(), s.eng.Status().WAL.Fsyncs
	if got := st1.SegmentsApplied - st0.SegmentsApplied; got != int64(b.N) {
		b.Fatalf("%d segments applied, want %d", got, b.N)
	}
	n := float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "segments/s")
	b.ReportMetric(float64(wal1-wal0)/n, "wal-fsyncs/seg")
	b.ReportMetric(float64(st1.IndexSyncs-st0.IndexSyncs)/n, "index-syncs/seg")
	if ok0 && ok1 {
		// The process's CPU (the engine's background work included):
		// steadier than segments/s on a shared machine.
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/n, "cpu-µs/seg")
	}
	for i, name := range []string{"decode", "lookup", "write", "index"} {
		b.ReportMetric(float64(s.phases.ns[i].Load())/n/1e3, name+"-µs/seg")
	}
}
