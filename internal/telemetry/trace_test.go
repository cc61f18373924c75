package telemetry

import (
	"context"
	"flag"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestMetricsFlagOffServesRuntimeMetricsOnly(t *testing.T) {
	var f Flags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse([]string{"--metrics=false"}); err != nil {
		t.Fatal(err)
	}
	if !f.MetricsOff {
		t.Fatal("--metrics=false left metrics on")
	}
	p, err := Setup(context.Background(), Config{Flags: f, Role: "node"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	if p.MetricsOn() {
		t.Fatal("MetricsOn with --metrics=false")
	}
	c, err := p.MeterProvider().Meter("test").Int64Counter("tributary.test.points")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 42)
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if strings.Contains(string(body), "tributary_test_points") {
		t.Errorf("/metrics serves an instrument with metrics off:\n%s", body)
	}
	if !strings.Contains(string(body), "go_goroutines") {
		t.Errorf("/metrics lacks the Go runtime metrics with metrics off:\n%s", body)
	}

	var on Flags
	on.Register(flag.NewFlagSet("t", flag.ContinueOnError))
	if on.MetricsOff {
		t.Fatal("metrics off by default")
	}
}

func TestTraceparentRoundTrip(t *testing.T) {
	p, err := Setup(context.Background(), Config{SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	ctx, span := p.TracerProvider().Tracer("test").Start(context.Background(), "seal")
	span.End()
	tp := Traceparent(ctx)
	if !strings.HasPrefix(tp, "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()) {
		t.Fatalf("traceparent %q does not name span %v", tp, span.SpanContext())
	}
	if got := SpanContextTraceparent(span.SpanContext()); got != tp {
		t.Fatalf("SpanContextTraceparent %q, Traceparent %q", got, tp)
	}
	sc, ok := ParseTraceparent(tp)
	if !ok || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsRemote() {
		t.Fatalf("parsed %v ok=%v from %q", sc, ok, tp)
	}
	for _, bad := range []string{"", "00-zz-yy-01", "garbage", "00-00000000000000000000000000000000-0000000000000000-01"} {
		if _, ok := ParseTraceparent(bad); ok {
			t.Errorf("ParseTraceparent(%q) ok", bad)
		}
	}
	if got := Traceparent(context.Background()); got != "" {
		t.Errorf("Traceparent without a span: %q", got)
	}
	// Traces off: nothing to carry.
	off, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Shutdown(context.Background())
	ctx, span = off.TracerProvider().Tracer("test").Start(context.Background(), "seal")
	span.End()
	if got := Traceparent(ctx); got != "" {
		t.Errorf("Traceparent with traces off: %q", got)
	}
}

func TestSpanMemo_BoundedAndForgets(t *testing.T) {
	m := NewSpanMemo(3)
	sc := func(i byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, i}, SpanID: trace.SpanID{2, i}, TraceFlags: trace.FlagsSampled})
	}
	m.Put(7, trace.SpanContext{}) // invalid: ignored
	for s := uint64(1); s <= 5; s++ {
		m.Put(s, sc(byte(s)))
	}
	if m.Len() != 3 {
		t.Fatalf("Len %d, want 3", m.Len())
	}
	for s := uint64(1); s <= 5; s++ {
		got, ok := m.Get(s)
		if want := s >= 3; ok != want || ok && !got.Equal(sc(byte(s))) {
			t.Errorf("Get(%d) = %v, %v", s, got, ok)
		}
	}
	m.Put(1000, sc(9)) // a jump: the lowest is still evicted first
	if _, ok := m.Get(3); ok {
		t.Error("seq 3 kept past the capacity")
	}
	m.Forget(4)
	if _, ok := m.Get(4); ok || m.Len() != 2 {
		t.Errorf("after Forget(4): Len %d", m.Len())
	}
	m.Forget(999)
	if _, ok := m.Get(1000); !ok || m.Len() != 1 {
		t.Errorf("Forget(999) dropped 1000 or kept 5: Len %d", m.Len())
	}
	var zero *SpanMemo
	zero.Put(1, sc(1))
	if _, ok := zero.Get(1); ok {
		t.Error("nil memo remembered")
	}
}

func TestGRPCOptions_NothingInstalledWhenAllOff(t *testing.T) {
	off, err := Setup(context.Background(), Config{Flags: Flags{MetricsOff: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Shutdown(context.Background())
	if !isNoop(off.MeterProvider(), off.TracerProvider()) || !isNoop(nil, nil) {
		t.Error("metrics and traces off: otelgrpc would still be installed")
	}
	on, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer on.Shutdown(context.Background())
	if isNoop(on.MeterProvider(), on.TracerProvider()) {
		t.Error("metrics on: otelgrpc would not be installed")
	}
	traced, err := Setup(context.Background(), Config{Flags: Flags{MetricsOff: true}, SpanExporter: tracetest.NewInMemoryExporter()})
	if err != nil {
		t.Fatal(err)
	}
	defer traced.Shutdown(context.Background())
	if isNoop(traced.MeterProvider(), traced.TracerProvider()) {
		t.Error("traces on: otelgrpc would not be installed")
	}
}
