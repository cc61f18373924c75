package query_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tributarydb/tributary/model"
)

func TestTrace_QueryPlanLegsMerge(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	fe := theFleet.frontend(t, faults{}, nil)

	// Untraced: nothing recorded.
	q := queries(t, theFleet.start)["raw"]
	collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
		return fe.Query(context.Background(), q, emit)
	})
	if n := len(spans.GetSpans()); n != 0 {
		t.Fatalf("an untraced query made %d spans", n)
	}
	fresh := freshQueries(t, theFleet.start)
	for _, fq := range fresh {
		q = fq // reaches edges directly: their node.query spans join
		break
	}
	ctx, root := tp.Tracer("test").Start(context.Background(), "request")
	_, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, q, emit) })
	root.End()
	got := spans.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	count := map[string]int{}
	for _, s := range got {
		byID[s.SpanContext.SpanID().String()] = s
		count[s.Name]++
		if s.SpanContext.TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %s is in another trace", s.Name)
		}
	}
	parent := func(s tracetest.SpanStub) string { return byID[s.Parent.SpanID().String()].Name }
	var top tracetest.SpanStub
	for _, s := range got {
		if s.Name == "coordinator.query" {
			top = s
		}
	}
	if count["coordinator.query"] != 1 || parent(top) != "request" {
		t.Fatalf("coordinator.query spans %d, parent %q: %v", count["coordinator.query"], parent(top), count)
	}
	if count["query.plan"] != 1 || count["query.merge"] != 1 || count["query.leg"] == 0 {
		t.Errorf("plan %d, merge %d, legs %d: want 1, 1, at least 1", count["query.plan"], count["query.merge"], count["query.leg"])
	}
	for _, s := range got {
		switch s.Name {
		case "query.plan", "query.merge", "query.leg":
			if parent(s) != "coordinator.query" {
				t.Errorf("%s under %q", s.Name, parent(s))
			}
		case "node.query":
			// An edge asked directly: its span hangs under a leg.
			p := s
			for p.Name != "query.leg" && p.Parent.IsValid() {
				p = byID[p.Parent.SpanID().String()]
			}
			if p.Name != "query.leg" {
				t.Errorf("node.query span not under a query.leg")
			}
		}
	}
	t.Logf("spans: %v; %d series", count, info.Series)
	if count["node.query"] == 0 && info.Series > 0 {
		t.Errorf("no node.query span for a query answered by the edges (%d series)", info.Series)
	}
}
