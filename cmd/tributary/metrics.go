package main

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/internal/telemetry"
)

// metricsHandler serves GET /metrics: the OpenTelemetry instruments of
// tp in the Prometheus text format. The node, the replicator and the
// coordinator register their own instruments on tp; this adds those of
// the client APIs: the events of stats (limit violations, refused
// requests, per-protocol counts) and, with grpcAPI, the gRPC write
// requests refused for their size.
func metricsHandler(tp *telemetry.Provider, grpcAPI *grpcapi.Server, stats *httpapi.Stats) http.Handler {
	registerAPIMetrics(tp.MeterProvider(), grpcAPI, stats)
	return tp.Handler()
}

// registerAPIMetrics adds the client API instruments: observable counters
// over the counters stats and grpcAPI keep. Instrument errors come only
// from invalid names, which these constant ones are not; the SDK reports
// them through its error handler.
func registerAPIMetrics(mp metric.MeterProvider, grpcAPI *grpcapi.Server, stats *httpapi.Stats) {
	meter := mp.Meter("github.com/tributarydb/tributary/httpapi")
	registerCredentialMetrics(meter)
	events, _ := meter.Int64ObservableCounter("tributary.api.events", metric.WithUnit("{event}"),
		metric.WithDescription("Client API events: limit violations, refused requests and per-protocol counts."))
	insts := []metric.Observable{events}
	var tooLarge metric.Int64ObservableCounter
	if grpcAPI != nil {
		tooLarge, _ = meter.Int64ObservableCounter("tributary.grpc.requests_too_large", metric.WithUnit("{request}"),
			metric.WithDescription("gRPC write requests refused for carrying more points than the limit."))
		insts = append(insts, tooLarge)
	}
	_, _ = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if stats != nil {
			for _, e := range stats.Snapshot() {
				o.ObserveInt64(events, e.Count, metric.WithAttributes(attribute.String("event", sanitizeEvent(e.Name))))
			}
		}
		if grpcAPI != nil {
			o.ObserveInt64(tooLarge, grpcAPI.TooLargeRequests())
		}
		return nil
	}, insts...)
}

func sanitizeEvent(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}
