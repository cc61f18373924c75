package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
)

func TestTrace_WriteAndSealSpans(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Role: "node", SpanExporter: spans})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	n, err := Open(Options{DataDir: t.TempDir(), NodeID: "edge-1", WALSegmentAge: 10 * time.Millisecond,
		TracerProvider: tel.TracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	batch := func(ts int64) []model.Batch {
		return []model.Batch{{Labels: []labels.Label{{Name: "__name__", Value: "temp"}}, Ts: []int64{ts}, Vs: []float64{1}}}
	}
	now := time.Now().UnixMilli()

	// Untraced: no spans.
	if _, err := n.Write(context.Background(), batch(now)); err != nil {
		t.Fatal(err)
	}
	if got := spans.GetSpans(); len(got) != 0 {
		t.Fatalf("untraced write made %d spans", len(got))
	}

	ctx, req := tel.TracerProvider().Tracer("test").Start(context.Background(), "request")
	time.Sleep(20 * time.Millisecond) // the open segment ages: this write seals it first
	res, err := n.Write(ctx, batch(now+1))
	req.End()
	if err != nil || res.Accepted != 1 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byName[s.Name] = s
	}
	w, ok := byName["node.write"]
	if !ok || w.Parent.SpanID() != req.SpanContext().SpanID() {
		t.Fatalf("no node.write span under the request: %v", byName)
	}
	for _, name := range []string{"wal.append", "head.append", "wal.sync"} {
		if s, ok := byName[name]; !ok || s.Parent.SpanID() != w.SpanContext.SpanID() {
			t.Errorf("%s: missing or not a child of node.write", name)
		}
	}
	seal, ok := byName["wal.seal"]
	if !ok {
		t.Fatal("no wal.seal span for the aged segment")
	}
	if seal.Parent.IsValid() {
		t.Error("the seal span has a parent: it should start its own trace")
	}
	var seq int64
	for _, kv := range seal.Attributes {
		if kv.Key == "tributary.segment.seq" {
			seq = kv.Value.AsInt64()
		}
	}
	sc, ok := n.SealSpanContext(uint64(seq))
	if !ok || sc.SpanID() != seal.SpanContext.SpanID() {
		t.Fatalf("SealSpanContext(%d) = %v, %v; want the seal span", seq, sc, ok)
	}
	n.ForgetSealSpans(uint64(seq))
	if _, ok := n.SealSpanContext(uint64(seq)); ok {
		t.Error("seal span kept after ForgetSealSpans")
	}
}

// BenchmarkNode_WriteTracing is the cost of a write's spans: the same
// 1,000-point write untraced (the request carries no recording span) and
// traced (a sampled request span; node.write and its three children are
// recorded, not exported).
func BenchmarkNode_WriteTracing(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(context.Background())
	for _, traced := range []bool{false, true} {
		b.Run(fmt.Sprintf("traced=%v", traced), func(b *testing.B) {
			n, err := Open(Options{DataDir: b.TempDir(), NodeID: "edge-1", WALSync: wal.SyncPolicy{Interval: time.Second}})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			batches := make([]model.Batch, 100)
			for i := range batches {
				batches[i] = model.Batch{Labels: []labels.Label{{Name: labels.MetricName, Value: "temp"}, {Name: "sensor", Value: fmt.Sprint(i)}},
					Ts: make([]int64, 10), Vs: make([]float64, 10)}
			}
			ctx := context.Background()
			if traced {
				var span trace.Span
				ctx, span = tp.Tracer("bench").Start(ctx, "request")
				defer span.End()
			}
			ts := time.Now().Add(-time.Hour).UnixMilli()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for i := range batches {
					for k := range batches[i].Ts {
						batches[i].Ts[k] = ts + int64(k)
					}
				}
				ts += 10
				if _, err := n.Write(ctx, batches); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
