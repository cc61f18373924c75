package telemetry

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
)

// GRPCServerOption instruments a gRPC server with otelgrpc: a span per
// call (per stream for a streaming call, however long it lives; a parent
// span context arriving in the W3C traceparent header is its parent) and
// the rpc.server.call.duration histogram. Nil providers are the no-op
// ones; with both no-op (metrics and traces off) nothing is installed.
func GRPCServerOption(mp metric.MeterProvider, tp trace.TracerProvider) grpc.ServerOption {
	if isNoop(mp, tp) {
		return grpc.EmptyServerOption{}
	}
	return grpc.StatsHandler(otelgrpc.NewServerHandler(grpcOptions(mp, tp)...))
}

// GRPCDialOption instruments a gRPC client connection the same way
// (client spans, rpc.client.call.duration) and sends the caller's span
// context in the traceparent header.
func GRPCDialOption(mp metric.MeterProvider, tp trace.TracerProvider) grpc.DialOption {
	if isNoop(mp, tp) {
		return grpc.EmptyDialOption{}
	}
	return grpc.WithStatsHandler(otelgrpc.NewClientHandler(grpcOptions(mp, tp)...))
}

// isNoop reports whether both providers are missing or the no-op ones.
func isNoop(mp metric.MeterProvider, tp trace.TracerProvider) bool {
	_, noopMeter := mp.(metricnoop.MeterProvider)
	_, noopTracer := tp.(tracenoop.TracerProvider)
	return (mp == nil || noopMeter) && (tp == nil || noopTracer)
}

// grpcOptions never lets otelgrpc fall back to the OpenTelemetry globals:
// two components in one process keep their own providers.
func grpcOptions(mp metric.MeterProvider, tp trace.TracerProvider) []otelgrpc.Option {
	if mp == nil {
		mp = noopMeter
	}
	if tp == nil {
		tp = noopTracer
	}
	return []otelgrpc.Option{
		otelgrpc.WithMeterProvider(mp),
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(propagation.TraceContext{}),
	}
}
