package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestInstruments_CreatesObservesAndKeepsTheFirstError(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	in := NewInstruments(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"))
	g := in.Int64Gauge("test.gauge", "{x}", "A gauge.")
	c := in.Int64Counter("test.counter", "{x}", "A counter.")
	f := in.Float64Gauge("test.float", "s", "A float gauge.")
	sc := in.Counter("test.sync", "{x}", "A synchronous counter.")
	h := in.Histogram("test.hist", "s", "A histogram.")
	if in.Err() != nil {
		t.Fatalf("Err = %v", in.Err())
	}
	if n := len(in.Observables()); n != 3 {
		t.Fatalf("%d observables, want 3", n)
	}
	_, err := in.Meter().RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, 7)
		o.ObserveInt64(c, 8)
		o.ObserveFloat64(f, 1.5)
		return nil
	}, in.Observables()...)
	if err != nil {
		t.Fatal(err)
	}
	sc.Add(context.Background(), 2)
	h.Record(context.Background(), 0.25)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = true
		}
	}
	for _, name := range []string{"test.gauge", "test.counter", "test.float", "test.sync", "test.hist"} {
		if !got[name] {
			t.Errorf("%s not collected", name)
		}
	}

	bad := in.Int64Gauge("bad name with spaces!", "", "")
	_ = bad
	first := in.Err()
	if first == nil || !strings.Contains(first.Error(), "bad name") {
		t.Fatalf("Err = %v, want the invalid name's error", first)
	}
	in.Counter("another bad name!", "", "")
	if in.Err() != first {
		t.Errorf("Err = %v, want the first error %v", in.Err(), first)
	}
	if n := len(in.Observables()); n != 3 {
		t.Errorf("%d observables after a failed creation, want 3", n)
	}
}
