package replicator

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/replicator/wire"
)

// The ship span covers one segment from the moment the loop hands it to
// the stream until the cloud's answer: an ack ends it well, a refusal or
// the end of the stream ends it failed (a resend starts a new one). Its
// parent is the seal span the node recorded when it sealed the segment
// (SealTracer), so the trace starts at the seal even when the segment is
// shipped hours later; without one (traces off, a restart since the seal)
// it starts a new trace. Its context travels to the coordinator in the
// first part's traceparent, where the intake, replicate and catalog spans
// become its children.

// SealTracer is what a Source offers when it records seal spans
// (*node.Node does). Optional: a Source without it ships without parents.
type SealTracer interface {
	// SealSpanContext returns the span context of segment seq's seal.
	SealSpanContext(seq uint64) (trace.SpanContext, bool)
	// ForgetSealSpans drops the seal spans through seq.
	ForgetSealSpans(through uint64)
}

const tracerName = "github.com/tributarydb/tributary/replicator"

// startShip starts the ship span of segment seq and writes its context
// into the first part; it returns nil when traces are off.
func (l *loop) startShip(seq uint64, enc wire.Encoded, points int64, backlog bool) trace.Span {
	ctx := context.Background()
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
	if st, ok := l.src.(SealTracer); ok {
		if sc, ok := st.SealSpanContext(seq); ok {
			ctx = trace.ContextWithSpanContext(ctx, sc)
		}
	}
	ctx, span := l.o.TracerProvider.Tracer(tracerName).Start(ctx, "replicator.ship", opts...)
	if !span.IsRecording() {
		span.End()
		return nil
	}
	span.SetAttributes(
		attribute.Int64("tributary.segment.seq", int64(seq)),
		attribute.Int64("tributary.segment.points", points),
		attribute.Int64("tributary.segment.compressed_bytes", enc.CompressedBytes),
		attribute.Bool("tributary.replication.backlog", backlog),
	)
	if len(enc.Parts) > 0 {
		enc.Parts[0].Traceparent = telemetry.Traceparent(ctx)
	}
	return span
}

// endShip ends a ship span: err nil for an ack.
func endShip(span trace.Span, ackedThrough uint64, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.Int64("tributary.acked_through", int64(ackedThrough)))
	}
	span.End()
}

// errShipEnded fails the ship spans of a stream that ended before their
// answer.
var errShipEnded = errors.New("replication stream ended before the answer")

// endShipSpans fails the ship spans still in flight on s.
func endShipSpans(s *session) {
	for _, f := range s.inflight {
		endShip(f.span, 0, errShipEnded)
		f.span = nil
	}
}

// forgetSeals drops the seal spans of acknowledged segments.
func (l *loop) forgetSeals(through uint64) {
	if st, ok := l.src.(SealTracer); ok {
		st.ForgetSealSpans(through)
	}
}
