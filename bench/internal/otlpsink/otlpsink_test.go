package otlpsink

import (
	"context"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/telemetry"
)

func TestSink_CountsWhatAnExporterSends(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	p, err := telemetry.Setup(context.Background(), telemetry.Config{Role: "node", Flags: telemetry.Flags{
		OTLPEndpoint: s.Addr(), OTLPInsecure: true, OTLPInterval: time.Hour, Traces: true}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, span := p.TracerProvider().Tracer("test").Start(context.Background(), "work")
		span.End()
	}
	c, _ := p.MeterProvider().Meter("test").Int64Counter("tributary.test.points")
	c.Add(context.Background(), 5)
	// Shutdown flushes the batched spans and the last metrics.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := s.Counts()
	if got.Spans != 3 || got.TraceRequests == 0 || got.MetricRequests == 0 || got.DataPoints == 0 {
		t.Fatalf("sink received %+v; want 3 spans and at least one metrics export", got)
	}
}
