package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HTTPServerSpans gives every request to next a server span (a child of
// the W3C traceparent header's span context when the client sent one),
// so the write and query handlers' spans have a parent. Use it only when
// traces are on (Provider.TracesOn): with traces off it would cost a span
// start per request for nothing.
func HTTPServerSpans(tp trace.TracerProvider, next http.Handler) http.Handler {
	tracer := tp.Tracer("github.com/tributarydb/tributary/internal/telemetry")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.code))
		if sw.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.code))
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// StartChild starts a child of the recording span in ctx, from that span's
// own provider (code without a provider of its own, such as protocol
// handlers, never reaches for the globals). Without a recording span it
// returns ctx and a span that records nothing, at the cost of a context
// lookup.
func StartChild(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	return parent.TracerProvider().Tracer("github.com/tributarydb/tributary").Start(ctx, name, trace.WithAttributes(attrs...))
}
