package telemetry

import (
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

func TestDefaults_FillsOnlyNilFields(t *testing.T) {
	var (
		logger *slog.Logger
		mp     metric.MeterProvider
		tp     trace.TracerProvider
	)
	Defaults(&logger, &mp, &tp)
	if logger == nil || logger.Enabled(t.Context(), slog.LevelError) {
		t.Errorf("logger = %v, want one that discards", logger)
	}
	if _, ok := mp.(metricnoop.MeterProvider); !ok {
		t.Errorf("meter provider = %T, want the no-op one", mp)
	}
	if _, ok := tp.(tracenoop.TracerProvider); !ok {
		t.Errorf("tracer provider = %T, want the no-op one", tp)
	}

	givenLogger := slog.New(slog.NewTextHandler(t.Output(), nil))
	givenMP := sdkmetric.NewMeterProvider()
	var givenTP trace.TracerProvider = tracenoop.NewTracerProvider()
	logger, mp, tp = givenLogger, givenMP, givenTP
	Defaults(&logger, &mp, &tp)
	if logger != givenLogger || mp != givenMP || tp != givenTP {
		t.Error("Defaults replaced a field that was set")
	}
}
