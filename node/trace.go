package node

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/wal"
)

// sealSpanMemo bounds the seal spans remembered for replication: a
// segment shipped after this many newer ones were sealed (a long outage)
// starts a new trace. About 100 bytes each.
const sealSpanMemo = 4096

// nodeTracing is the node's part of a segment's trace: a span per sealed
// WAL segment, the root of the segment's lifecycle (seal → ship → intake →
// replicate → catalog commit → ack). The replicator ships the segment
// later, maybe hours later, and makes its ship span a child of the seal
// span it finds with SealSpanContext. The memo is lost on restart.
type nodeTracing struct {
	tracer trace.Tracer
	seals  *telemetry.SpanMemo
}

func (n *Node) initTracing() {
	n.tracing = nodeTracing{
		tracer: n.opts.TracerProvider.Tracer("github.com/tributarydb/tributary/node"),
		seals:  telemetry.NewSpanMemo(sealSpanMemo),
	}
}

// onSeal is the WAL's OnSeal: it records the seal span (with the log's
// lock held; with traces off the span is the no-op one and nothing is
// remembered).
func (n *Node) onSeal(info wal.SegmentInfo, began time.Time) {
	_, span := n.tracing.tracer.Start(context.Background(), "wal.seal",
		trace.WithNewRoot(), trace.WithTimestamp(began), trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.Int64("tributary.segment.seq", int64(info.Seq)),
			attribute.Int64("tributary.segment.bytes", info.Bytes),
			attribute.Int64("tributary.segment.records", info.Records),
			attribute.Int64("tributary.segment.points", info.Points),
		)
		n.tracing.seals.Put(info.Seq, span.SpanContext())
	}
	span.End()
}

// SealSpanContext returns the span context of the seal of WAL segment seq
// when this process sealed it and still remembers it (ok false with
// traces off, after a restart, or past the memo's bound). Safe for
// concurrent use.
func (n *Node) SealSpanContext(seq uint64) (trace.SpanContext, bool) {
	return n.tracing.seals.Get(seq)
}

// ForgetSealSpans drops the seal spans of segments through seq (the cloud
// acknowledged them).
func (n *Node) ForgetSealSpans(through uint64) { n.tracing.seals.Forget(through) }

// writeTraced is Write with the caller's trace. REQUIRES: ctx holds a
// recording span.
func (n *Node) writeTraced(ctx context.Context, batches []model.Batch) (model.WriteResult, error) {
	ctx, span := requestTracer(ctx).Start(ctx, "node.write", trace.WithAttributes(attribute.Int("tributary.write.batches", len(batches))))
	res, err := n.write(ctx, batches)
	span.SetAttributes(attribute.Int64("tributary.write.accepted", res.Accepted), attribute.Int64("tributary.write.rejected", res.Rejected))
	endSpan(span, err)
	return res, err
}

// requestTracer is the tracer for the spans of a request: from the
// provider of the span in ctx (in a server the process's; a caller in the
// same process, such as a coordinator asking the edge it runs beside,
// keeps its own).
func requestTracer(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/tributarydb/tributary/node")
}

// noSpan is a span that records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// childSpan starts a child of the recording span in ctx, or returns
// noSpan (the hot path when traces are off).
func (n *Node) childSpan(ctx context.Context, name string) trace.Span {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return noSpan
	}
	_, span := requestTracer(ctx).Start(ctx, name)
	return span
}

// endSpan ends span, failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startQuery starts the node.query span under the recording span in ctx
// (a traced gRPC or HTTP request); its children select the series, read
// them and merge groups.
func (n *Node) startQuery(ctx context.Context, q *model.Query) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	return requestTracer(ctx).Start(ctx, "node.query", trace.WithAttributes(
		attribute.String("tributary.query.source", q.Source()),
		attribute.Int64("tributary.query.start_ms", q.Start), attribute.Int64("tributary.query.end_ms", q.End)))
}

// endQuery ends a node.query span with what the query read and answered.
func endQuery(span trace.Span, info *model.QueryInfo) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("tributary.query.series", int64(info.Series)), attribute.Int64("tributary.query.points", info.Points))
	}
	span.End()
}
