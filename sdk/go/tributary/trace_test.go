package tributary_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// traceparentServer is a node's gRPC API that records the traceparent
// header of each call.
func traceparentServer(t *testing.T) (addr string, got func() []string) {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	g := grpc.NewServer(grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		seen = append(seen, strings.Join(md.Get("traceparent"), ","))
		mu.Unlock()
		return h(ctx, req)
	}))
	grpcapi.New(n, grpcapi.Options{}).Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(func() {
		g.Stop()
		n.Close()
	})
	return lis.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func TestWithTracerProvider_PropagatesTheCallersTrace(t *testing.T) {
	addr, seen := traceparentServer(t)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	batch := tributary.Batch{Labels: tributary.Metric("temp", "room", "a"), TimestampsMs: []int64{time.Now().UnixMilli()}, Values: []float64{1}}

	plain, err := tributary.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "caller")
	if _, err := plain.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if got := seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("without WithTracerProvider the call carried traceparent %q", got)
	}

	traced, err := tributary.Dial(context.Background(), addr, tributary.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Close()
	if _, err := traced.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	parent.End()
	got := seen()
	if len(got) != 2 || !strings.Contains(got[1], parent.SpanContext().TraceID().String()) {
		t.Fatalf("traceparent headers %q; want the second in trace %s", got, parent.SpanContext().TraceID())
	}
	var client *tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Parent.SpanID() == parent.SpanContext().SpanID() {
			client = &s
		}
	}
	if client == nil || !strings.Contains(got[1], client.SpanContext.SpanID().String()) {
		t.Fatalf("no client span under the caller's span carrying the header %q", got[1])
	}
	if _, err := tributary.Dial(context.Background(), addr, tributary.WithTracerProvider(nil)); err == nil {
		t.Error("WithTracerProvider(nil) accepted")
	}
}
