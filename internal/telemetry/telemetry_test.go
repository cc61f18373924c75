package telemetry

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestMetricsServedInPrometheusFormat(t *testing.T) {
	p, err := Setup(context.Background(), Config{Role: "node", Instance: "pi-1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	if p.TracesOn() {
		t.Fatal("traces on without an endpoint or exporter")
	}
	c, err := p.MeterProvider().Meter("test").Int64Counter("tributary.test.points")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 42)
	h, err := p.MeterProvider().Meter("test").Float64Histogram("tributary.test.latency")
	if err != nil {
		t.Fatal(err)
	}
	h.Record(context.Background(), 0.003)
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{"tributary_test_points_total 42", "go_goroutines", `service_instance_id="pi-1"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestSpanExporterTurnsTracesOn(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	p, err := Setup(context.Background(), Config{Role: "node", SpanExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	_, span := p.TracerProvider().Tracer("test").Start(context.Background(), "write")
	span.End()
	if got := exp.GetSpans(); len(got) != 1 || got[0].Name != "write" {
		t.Fatalf("spans: %v", got)
	}
}

func TestSetupRejectsBadFlags(t *testing.T) {
	for _, f := range []Flags{{TraceSampleRatio: 2}, {OTLPEndpoint: "http://x:4317", OTLPInterval: 1}, {OTLPEndpoint: "x:4317"}} {
		if _, err := Setup(context.Background(), Config{Flags: f}); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
}

func TestComponentLevels(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "warn,replicator=debug", "text")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("dropped: default is warn")
	log.With(ComponentKey, "replicator").Debug("kept: replicator is debug")
	log.With(ComponentKey, "raft").Info("dropped: raft takes the default")
	log.With(ComponentKey, "raft").Warn("kept: warn")
	log.Debug("dropped too", ComponentKey, "other")
	out := buf.String()
	if strings.Contains(out, "dropped") || strings.Count(out, "kept") != 2 {
		t.Fatalf("output:\n%s", out)
	}
	for _, bad := range []string{"loud", "info,=debug", "info,x=loud", "x=debug,info"} {
		if _, err := NewLogger(io.Discard, bad, "text"); err == nil {
			t.Errorf("level %q accepted", bad)
		}
	}
	if _, err := NewLogger(io.Discard, "info", "xml"); err == nil {
		t.Error("format xml accepted")
	}
	if def, per, _ := ParseLevels("replicator=error"); def != slog.LevelInfo || per["replicator"] != slog.LevelError {
		t.Errorf("component-only spec: default %v, per %v", def, per)
	}
}
