package query

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
)

// Spans of a fan-out query, children of the caller's span (the otelgrpc
// server span of a gRPC query, the HTTP server span of a PromQL or
// InfluxQL one) from that span's own provider; an untraced query makes
// none. query.plan covers the catalog lookup and the legs' plans; one
// query.leg per edge asked (its replica and edge calls are otelgrpc
// client spans beneath it, so the edge's own node.query span joins the
// trace); query.merge the combination and aggregation of the answers.

// startQuery starts the coordinator.query span.
func startQuery(ctx context.Context, q model.Query) (context.Context, trace.Span) {
	return telemetry.StartChild(ctx, "coordinator.query",
		attribute.String("tributary.query.source", q.Source()),
		attribute.Int64("tributary.query.start_ms", q.Start), attribute.Int64("tributary.query.end_ms", q.End))
}

// endQuery ends the coordinator.query span with the answer's size and
// coverage.
func endQuery(span trace.Span, info *model.QueryInfo, edges int, err *error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int64("tributary.query.series", int64(info.Series)),
		attribute.Int64("tributary.query.points", info.Points), attribute.Int("tributary.query.edges", edges),
		attribute.Int("tributary.query.warnings", len(info.Warnings)))
	if *err != nil {
		span.SetStatus(codes.Error, (*err).Error())
	}
	span.End()
}

// startLeg starts the span of one edge's leg.
func startLeg(ctx context.Context, edge string) (context.Context, trace.Span) {
	return telemetry.StartChild(ctx, "query.leg", attribute.String("tributary.edge", edge))
}

// endLeg ends a leg's span with its outcome.
func endLeg(span trace.Span, r *edgeResult) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int64("tributary.query.points", r.points), attribute.Bool("tributary.query.unreachable", r.unreachable),
		attribute.Int("tributary.query.warnings", len(r.warnings)))
	if r.unreachable {
		span.SetStatus(codes.Error, "edge unreachable")
	}
	span.End()
}
