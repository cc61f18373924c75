package telemetry

import (
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Defaults gives the telemetry fields of a component's Options their
// defaults where they are nil: a logger that discards, and the no-op meter
// and tracer providers (instruments and spans that cost a branch).
func Defaults(logger **slog.Logger, mp *metric.MeterProvider, tp *trace.TracerProvider) {
	if *logger == nil {
		*logger = slog.New(slog.DiscardHandler)
	}
	if *mp == nil {
		*mp = metricnoop.NewMeterProvider()
	}
	if *tp == nil {
		*tp = tracenoop.NewTracerProvider()
	}
}
