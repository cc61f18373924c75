package intake

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/internal/telemetry"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

// Spans of a segment's way through the intake. The segment span's parent
// is the edge's ship span, named by the segment's traceparent (the
// replication stream lives for hours, so the per-segment context rides in
// the message, not in the stream's gRPC metadata); without one it starts
// a new trace linked to the stream's span. Its children: one replicate
// span per replica coordinator (the gRPC call to a peer's ReplicaService
// is the replicate span's child) and one catalog span per proposal.
const tracerName = "github.com/tributarydb/tributary/coordinator/intake"

var (
	keyEdge        = attribute.Key("tributary.edge")
	keySeq         = attribute.Key("tributary.segment.seq")
	keyPoints      = attribute.Key("tributary.segment.points")
	keyBytes       = attribute.Key("tributary.segment.bytes")
	keyCoordinator = attribute.Key("tributary.coordinator")
	keyCommand     = attribute.Key("tributary.catalog.command")
	keyAckedThru   = attribute.Key("tributary.acked_through")
	keyShipError   = attribute.Key("tributary.ship.error")
)

func (s *Server) tracer() trace.Tracer { return s.o.TracerProvider.Tracer(tracerName) }

// startSegment starts the span of one assembled segment.
func (s *Server) startSegment(ctx context.Context, edge string, seg *wire.Segment) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		keyEdge.String(edge), keySeq.Int64(int64(seg.Seq)), keyPoints.Int64(seg.Points), keyBytes.Int(len(seg.File)))}
	if sc, ok := telemetry.ParseTraceparent(seg.Traceparent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
		if st := trace.SpanContextFromContext(ctx); st.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: st}))
		}
	}
	return s.tracer().Start(ctx, "intake.segment", opts...)
}

// endSegment ends the segment span with the answer sent to the edge.
func endSegment(span trace.Span, r *pb.ShipResponse) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if e := r.GetError(); e != nil {
		span.SetAttributes(keyShipError.String(e.GetCode().String()))
		span.SetStatus(codes.Error, e.GetMessage())
	} else if a := r.GetAck(); a != nil {
		span.SetAttributes(keyAckedThru.Int64(int64(a.GetAckedThrough())))
	}
	span.End()
}

// startReplicate starts the span of storing a segment on one replica.
func (s *Server) startReplicate(ctx context.Context, coordID string, seq uint64) (context.Context, trace.Span) {
	return s.tracer().Start(ctx, "intake.replicate", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(keyCoordinator.String(coordID), keySeq.Int64(int64(seq))))
}

// startPropose starts the span of one catalog proposal.
func (s *Server) startPropose(ctx context.Context, c catalog.Command) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, trace.SpanFromContext(ctx)
	}
	name := fmt.Sprintf("%T", c)
	name = name[strings.LastIndexByte(name, '.')+1:]
	return s.tracer().Start(ctx, "catalog.commit", trace.WithAttributes(keyCommand.String(name)))
}

// endSpan ends span, marking it failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
