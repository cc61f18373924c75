package intake_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/internal/telemetry"
)

func TestIntake_SegmentSpansJoinTheEdgesTrace(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	e := startEnv(t, func(o *intake.Options) { o.TracerProvider = tp })
	c := open(t, dial(t, e.addr), "pi-1")
	c.welcome()
	segs := makeSegments(t, "pi-1", 3, 1)

	edge := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{7, 7}, SpanID: trace.SpanID{9, 9}, TraceFlags: trace.FlagsSampled})
	segs[0].parts[0].Traceparent = telemetry.SpanContextTraceparent(edge)
	segs[1].parts[0].Traceparent = "not a traceparent" // ignored: tracing never refuses a segment
	for _, s := range segs {
		c.send(s.parts...)
		if a := c.recv().GetAck(); a == nil || a.Seq != s.info.Seq {
			t.Fatalf("segment %d: answer %v, want its ack", s.info.Seq, a)
		}
	}

	got := spans.GetSpans()
	children := map[trace.SpanID]map[string]int{}
	var segSpans []tracetest.SpanStub
	for _, s := range got {
		if s.Name == "intake.segment" {
			segSpans = append(segSpans, s)
			continue
		}
		if children[s.Parent.SpanID()] == nil {
			children[s.Parent.SpanID()] = map[string]int{}
		}
		children[s.Parent.SpanID()][s.Name]++
	}
	if len(segSpans) != 3 {
		t.Fatalf("%d intake.segment spans, want 3", len(segSpans))
	}
	for _, s := range segSpans {
		var seq int64
		for _, kv := range s.Attributes {
			if kv.Key == "tributary.segment.seq" {
				seq = kv.Value.AsInt64()
			}
		}
		switch {
		case seq == int64(segs[0].info.Seq):
			if s.Parent.SpanID() != edge.SpanID() || s.SpanContext.TraceID() != edge.TraceID() || !s.Parent.IsRemote() {
				t.Errorf("segment %d: parent %v, want the edge's span %v", seq, s.Parent, edge)
			}
		case s.Parent.IsValid():
			t.Errorf("segment %d without a usable traceparent has a parent %v", seq, s.Parent)
		}
		if k := children[s.SpanContext.SpanID()]; k["intake.replicate"] != 1 || k["catalog.commit"] == 0 {
			t.Errorf("segment %d: children %v, want one intake.replicate and catalog.commit", seq, k)
		}
	}
}
