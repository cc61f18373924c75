// Package telemetry sets up a process's OpenTelemetry metrics and traces
// and its structured logs.
//
// Every long-running command (node, coordinator, local) calls Setup once
// and hands the returned Provider's MeterProvider and TracerProvider to the
// components it starts through their Options; components never use the
// OpenTelemetry globals, so two of them in one process (tributary local,
// tests) keep their instruments apart.
//
// Metrics are collected and served in the Prometheus text format by
// Provider.Handler (GET /metrics); with an OTLP endpoint they are also
// pushed over OTLP/gRPC. --metrics=false turns the OpenTelemetry
// instruments off (the MeterProvider is then the no-op one and the handler
// serves only the Go runtime and process collectors): it exists to measure
// what the instruments cost. Traces are off unless an OTLP endpoint (or,
// in tests, a span exporter) is given: the TracerProvider is then the
// no-op one, so instrumented code costs a branch per span.
//
// grpc.go instruments gRPC servers and clients (otelgrpc with the
// process's providers and the W3C propagator); trace.go carries trace
// context inside messages of long-lived streams.
package telemetry

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Flags are the telemetry command-line flags shared by every command that
// runs a server.
type Flags struct {
	OTLPEndpoint     string        // host:port of an OTLP/gRPC collector; empty: no OTLP export
	OTLPInsecure     bool          // plaintext to the collector
	OTLPInterval     time.Duration // metric push interval
	Traces           bool          // export traces (needs OTLPEndpoint)
	TraceSampleRatio float64       // fraction of root spans sampled; 0 (unset) samples all
	// MetricsOff turns the OpenTelemetry instruments off (--metrics=false):
	// a no-op MeterProvider, nothing pushed over OTLP, and /metrics serves
	// the Go runtime and process collectors only.
	MetricsOff bool
}

// onFlag is a boolean flag that is true by default and sets *off when
// turned off, so the zero Flags keep metrics on.
type onFlag struct{ off *bool }

func (f onFlag) String() string {
	if f.off != nil && *f.off {
		return "false"
	}
	return "true"
}

func (f onFlag) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*f.off = !on
	return nil
}

func (onFlag) IsBoolFlag() bool { return true }

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.OTLPEndpoint, "otlp-endpoint", "", "OTLP/gRPC collector host:port for metrics (and traces with --otlp-traces); empty: metrics on /metrics only")
	fs.BoolVar(&f.OTLPInsecure, "otlp-insecure", false, "send OTLP in plaintext (default: TLS with the system roots)")
	fs.DurationVar(&f.OTLPInterval, "otlp-interval", 30*time.Second, "how often metrics are pushed over OTLP")
	fs.BoolVar(&f.Traces, "otlp-traces", true, "with --otlp-endpoint: export traces too")
	fs.Var(onFlag{&f.MetricsOff}, "metrics", "record the OpenTelemetry metrics (false: no-op instruments, no tributary_* or rpc_* metrics, /metrics serves the Go runtime and process metrics only; for measuring what metrics cost)")
	fs.Float64Var(&f.TraceSampleRatio, "trace-sample-ratio", 1, "fraction of traces sampled when traces are exported, above 0 and at most 1 (a sampled parent's children always are)")
}

// Validate checks the flags; the error names the flag.
func (f *Flags) Validate() error {
	if f.TraceSampleRatio < 0 || f.TraceSampleRatio > 1 {
		return fmt.Errorf("--trace-sample-ratio %v: want a number above 0 and at most 1", f.TraceSampleRatio)
	}
	if f.OTLPEndpoint != "" && f.OTLPInterval <= 0 {
		return fmt.Errorf("--otlp-interval %v: want a positive duration", f.OTLPInterval)
	}
	if f.OTLPEndpoint != "" && strings.Contains(f.OTLPEndpoint, "://") {
		return fmt.Errorf("--otlp-endpoint %q: want host:port, without a scheme", f.OTLPEndpoint)
	}
	return nil
}

// Config is what Setup needs.
type Config struct {
	Flags
	Service  string // service.name: "tributary"
	Role     string // "node", "coordinator" or "local"
	Instance string // service.instance.id: node id or raft id
	Version  string // service.version

	// SpanExporter, when set, receives every span (synchronously: tests
	// use tracetest.NewInMemoryExporter). It turns traces on without an
	// OTLP endpoint.
	SpanExporter sdktrace.SpanExporter
}

// Provider is a process's telemetry.
type Provider struct {
	meter    metric.MeterProvider
	sdkMeter *sdkmetric.MeterProvider // nil when metrics are off
	tracer   trace.TracerProvider
	sdkTrace *sdktrace.TracerProvider // nil when traces are off
	registry *prometheus.Registry
	handler  http.Handler
}

// Setup builds the providers. Shutdown must be called once the process
// stops using them.
func Setup(ctx context.Context, c Config) (*Provider, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Service == "" {
		c.Service = "tributary"
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", c.Service),
		attribute.String("service.version", c.Version),
		attribute.String("tributary.role", c.Role),
	}
	if c.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", c.Instance))
	}
	res := resource.NewSchemaless(attrs...)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p := &Provider{registry: reg, tracer: noop.NewTracerProvider(), meter: metricnoop.NewMeterProvider()}
	if !c.MetricsOff {
		exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
		if err != nil {
			return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
		}
		mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(exp), sdkmetric.WithView(latencyView)}
		if c.OTLPEndpoint != "" {
			o := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(c.OTLPEndpoint)}
			if c.OTLPInsecure {
				o = append(o, otlpmetricgrpc.WithInsecure())
			}
			mexp, err := otlpmetricgrpc.New(ctx, o...)
			if err != nil {
				return nil, fmt.Errorf("telemetry: --otlp-endpoint %s: %w", c.OTLPEndpoint, err)
			}
			mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(c.OTLPInterval))))
		}
		p.sdkMeter = sdkmetric.NewMeterProvider(mopts...)
		p.meter = p.sdkMeter
	}
	p.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})

	var spanExp sdktrace.SpanExporter
	batch := true
	switch {
	case c.SpanExporter != nil:
		spanExp, batch = c.SpanExporter, false
	case c.OTLPEndpoint != "" && c.Traces:
		o := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(c.OTLPEndpoint)}
		if c.OTLPInsecure {
			o = append(o, otlptracegrpc.WithInsecure())
		}
		var err error
		if spanExp, err = otlptracegrpc.New(ctx, o...); err != nil {
			p.shutdownMeter(ctx)
			return nil, fmt.Errorf("telemetry: --otlp-endpoint %s: %w", c.OTLPEndpoint, err)
		}
	}
	if spanExp != nil {
		ratio := c.TraceSampleRatio
		if ratio == 0 {
			ratio = 1
		}
		topts := []sdktrace.TracerProviderOption{
			sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		}
		if batch {
			topts = append(topts, sdktrace.WithBatcher(spanExp))
		} else {
			topts = append(topts, sdktrace.WithSyncer(spanExp))
		}
		p.sdkTrace = sdktrace.NewTracerProvider(topts...)
		p.tracer = p.sdkTrace
	}
	return p, nil
}

// latencyView gives every histogram whose unit is seconds buckets from
// 100 µs to 60 s instead of the SDK's millisecond-oriented defaults.
var latencyView = sdkmetric.NewView(
	sdkmetric.Instrument{Unit: "s", Kind: sdkmetric.InstrumentKindHistogram},
	sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
		Boundaries: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}},
)

// MeterProvider is the provider components take their meters from; the
// no-op provider when metrics are off.
func (p *Provider) MeterProvider() metric.MeterProvider { return p.meter }

// TracerProvider is the provider components take their tracers from; the
// no-op provider when traces are off.
func (p *Provider) TracerProvider() trace.TracerProvider { return p.tracer }

// MetricsOn reports whether the OpenTelemetry instruments record.
func (p *Provider) MetricsOn() bool { return p.sdkMeter != nil }

// TracesOn reports whether spans are recorded and exported.
func (p *Provider) TracesOn() bool { return p.sdkTrace != nil }

// Propagator carries trace context across gRPC calls and inside
// replication messages (W3C trace context).
func (p *Provider) Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Handler serves the metrics in the Prometheus text format.
func (p *Provider) Handler() http.Handler { return p.handler }

// Gatherer reads the current metrics (self-monitoring writes them into
// the node's own store).
func (p *Provider) Gatherer() prometheus.Gatherer { return p.registry }

// Shutdown flushes and stops the exporters.
func (p *Provider) Shutdown(ctx context.Context) error {
	var errs []error
	if p.sdkTrace != nil {
		errs = append(errs, p.sdkTrace.Shutdown(ctx))
	}
	errs = append(errs, p.shutdownMeter(ctx))
	return errors.Join(errs...)
}

func (p *Provider) shutdownMeter(ctx context.Context) error {
	if p.sdkMeter == nil {
		return nil
	}
	return p.sdkMeter.Shutdown(ctx)
}
