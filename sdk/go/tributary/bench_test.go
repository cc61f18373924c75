package tributary_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

func benchSeries(n int) []tributary.Labels {
	out := make([]tributary.Labels, n)
	for i := range out {
		out[i] = tributary.Metric("cpu_usage", "host", fmt.Sprintf("pi-%03d", i), "core", fmt.Sprint(i%4), "region", "eu-west")
	}
	return out
}

// BenchmarkWriter_Add measures the client side alone: buffering and
// batching, with a sender that answers at once.
func BenchmarkWriter_Add(b *testing.B) {
	for _, nSeries := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("series=%d", nSeries), func(b *testing.B) {
			series := benchSeries(nSeries)
			send := func(_ context.Context, req *pb.WriteRequest, _ func(error)) (*pb.WriteResponse, error) {
				return &pb.WriteResponse{}, nil
			}
			w, err := tributary.NewWriterWithSend(send, tributary.WriterOptions{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := w.Add(ctx, series[i%nSeries], int64(i), float64(i)); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "points/s")
		})
	}
}

// BenchmarkWriter_ToNode measures points per second through the Writer
// into a real node over loopback gRPC (fsync before every answer).
func BenchmarkWriter_ToNode(b *testing.B) {
	s := startServer(b)
	c := dial(b, s)
	series := benchSeries(1000)
	w, err := c.NewWriter(tributary.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now().Add(-50 * time.Minute).UnixMilli()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// 1000 series, one point each per millisecond step: stays inside
		// the node's out-of-order window.
		if err := w.Add(ctx, series[i%len(series)], start+int64(i/len(series)), float64(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if st := w.Stats(); st.Accepted != int64(b.N) {
		b.Fatalf("accepted %d of %d", st.Accepted, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "points/s")
}
